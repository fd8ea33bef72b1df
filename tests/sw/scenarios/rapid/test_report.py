"""RAPID report, command line and benchmark (``sw/scenarios/rapid/report.py``, ``ndpdimm rapid``,
``sw/scenarios/rapid/bench.py``): the table names every system and the SLOs, the JSON and plots are
written, the CLI runs end to end and rejects bad values with status 2 and a one-line reason
before any simulation, a saved trace replays the same requests, and a tiny benchmark writes
its JSON with every field."""

import argparse
import contextlib
import io
import json

import pytest

from ndpdimm.cosim.provenance import without
from ndpdimm.sw import cli
from ndpdimm.sw.cli import main
from ndpdimm.sw.commands import command
from ndpdimm.sw.scenarios.rapid.report import HEADLINE, figures, format_report, write_report
from ndpdimm.sw.scenarios.rapid.scenario import RapidResult
from ndpdimm.sw.scenarios.rapid.workload import generate_trace, load_trace, load_workload

SYSTEMS_ALL = ("coalesced", "static-4p4d", "static-4p750-4d450", "dynamic-power", "dynamic",
               "dynamic-power+ndp", "dynamic+ndp")


def _run(argv) -> int:
    """``main(argv)``'s exit status, whether argparse exits or main returns."""
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """One ``ndpdimm rapid --mode all`` run of 30 s: (output folder, stdout, result)."""
    out = tmp_path_factory.mktemp("rapid")
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout):
        assert main(["rapid", "--duration", "30", "--mode", "all", "--out-dir", str(out),
                     "--timeline", str(out / "timeline.json"),
                     "--timeline-system", "dynamic-power+ndp"]) == 0
    return out, stdout.getvalue(), json.loads((out / "rapid.json").read_text())


def test_cli_choices_are_the_scenarios():
    """``ndpdimm rapid``'s choices are the scenario's own (its options are RapidConfig's fields)."""
    from ndpdimm.sw.sampling.stats import ALLOCATIONS
    from ndpdimm.sw.scenarios.rapid.catalog import KV_PATHS
    from ndpdimm.sw.scenarios.rapid.scenario import MODES
    from ndpdimm.sw.scenarios.rapid.workload import PATTERNS
    rapid = argparse.ArgumentParser()
    command("rapid").add_arguments(rapid)
    choices = {a.option_strings[0]: a.choices for a in rapid._actions if a.choices}
    assert choices == {"--mode": MODES, "--pattern": PATTERNS, "--kv-path": KV_PATHS,
                       "--backend": ("model", "rtl"), "--rtl-allocation": ALLOCATIONS}
    parser = cli.build_parser(declare=("rapid", "bench"))
    args = parser.parse_args(["rapid", "--mode", "all", "--pattern", "steady", "--kv-path", "p2p"])
    assert (args.mode, args.pattern, args.kv_path) == ("all", "steady", "p2p")
    assert parser.parse_args(["bench", "--suite", "rapid"]).suite == "rapid"


def test_cli_runs_end_to_end_and_writes_the_results(cli_run):
    out, stdout, r = cli_run
    assert [s["system"] for s in r["systems"]] == list(SYSTEMS_ALL)
    assert r["config"]["mode"] == "all" and r["config"]["duration_s"] == 30.0
    assert "goodput" in stdout and "dynamic+ndp" in stdout
    for name in ("rapid.json", "rapid_power_roles.png", "rapid_queues.png",
                 "rapid_latency_cdf.png", "timeline.json"):
        assert f"wrote {out / name}" in stdout
        assert (out / name).stat().st_size > 0
    # --timeline-system: the NDP tier's dynamic-power run, its DIMMs' reserve in the counters
    from ndpdimm.cosim.timeline import read_timeline
    f = read_timeline(out / "timeline.json")
    p = "RAPID dynamic-power+ndp"
    assert f.metadata["system"] == "dynamic-power+ndp" and {q for q, _ in f.tracks} == {p}
    ndp = r["systems"][SYSTEMS_ALL.index("dynamic-power+ndp")]["checks"]["ndp_reserved_w"]
    assert ndp > 0 and all(v["NDP-DIMM tier"] == ndp for _, v in f.counters[(p, "power reserved (W)")])


def test_format_report_names_every_system_and_the_slos(cli_run):
    r = cli_run[2]
    text = format_report(RapidResult.from_dict(r))
    rows = {line.split()[0]: line for line in text.splitlines() if line.split()
            and line.split()[0] in SYSTEMS_ALL}
    assert set(rows) == set(SYSTEMS_ALL)
    ttft_ms, tpot_ms = 1e3 * r["slo"]["ttft_s"], 1e3 * r["slo"]["tpot_s"]
    assert f"SLOs: TTFT {ttft_ms:.0f} ms (p90 TTFT of static-4p4d on mixed-steady), " \
           f"TPOT {tpot_ms:.0f} ms" in text
    assert "llama3.1-8b on mi300x-node" in text and "mixed-bursty" in text
    assert "NDP attention: model backend" in text and "GPU numbers:" in text
    dyn = r["systems"][SYSTEMS_ALL.index("dynamic")]
    fields = rows["dynamic"].replace("|", " ").split()
    assert fields[1] == f"{dyn['goodput_rps']:.2f}"
    assert fields[2] == f"{100 * dyn['slo_attainment']:.1f}"
    assert fields[-2:] == [str(dyn["power_moves"]), str(dyn["role_switches"])]
    assert "caps within the budget; every request finished exactly once" in text


def test_figures_name_the_run_and_share_their_ranges(cli_run, figure_rules):
    """Every figure names the run; the panels that compare systems share their axes' ranges."""
    r = RapidResult.from_dict(cli_run[2])
    figs = figures(r)
    assert list(figs) == ["power_roles", "queues", "latency_cdf"]
    for name in ("power_roles", "queues"):
        panels = [a for a in figs[name].axes if a.get_visible()]
        for get in ("get_xlim", "get_ylim"):
            ranges = {}
            for a in panels:              # each row of panels (a twin axis is its own row)
                ranges.setdefault((a.get_subplotspec().rowspan.start, a.get_label(),
                                   a.yaxis.get_label_position()), set()).add(getattr(a, get)())
            assert all(len(v) == 1 for v in ranges.values()), (name, get, ranges)
    figure_rules(figs, ["llama3.1-8b", "trace mixed-bursty", "node mi300x-node, 4800 W budget (32 NDP-DIMMs)",
                        "model backend (calibrated)"])
    assert HEADLINE in format_report(r)


def test_write_report_writes_json_and_plots(cli_run, tmp_path):
    r = cli_run[2]
    files = write_report(RapidResult.from_dict(r), tmp_path / "again", name="run")
    assert [f.name for f in files] == ["run.json", "run_power_roles.png", "run_queues.png",
                                       "run_latency_cdf.png"]
    for f in files[1:]:
        assert f.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f.stat().st_size > 10_000
    assert json.loads(files[0].read_text())["systems"][0]["system"] == "coalesced"


@pytest.mark.parametrize("argv, message", [
    (["--workload", "chatbot"], "unknown workload 'chatbot'"),
    (["--pattern", "spiky"], "argument --pattern: invalid choice: 'spiky'"),
    (["--duration", "-5"], "argument --duration: expected a positive number, got '-5'"),
    (["--duration", "nan"], "argument --duration: expected a positive number, got 'nan'"),
    (["--kv-path", "pcie"], "argument --kv-path: invalid choice: 'pcie'"),
    (["--mode", "sometimes"], "argument --mode: invalid choice: 'sometimes'"),
    (["--seed", "-1"], "seed must be an int >= 0, got -1"),
    (["--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["--trace", "TRACE", "--rate-scale", "2"], "--rate-scale applies to generated traces"),
    (["--trace", "TRACE"], "line 3: input_tokens must be an integer >= 1, got 'many'"),
    (["--trace", "MISSING"], "no such trace file"),
])
def test_bad_values_exit_2_with_a_clear_message(tmp_path, capsys, argv, message):
    trace = tmp_path / "bad.csv"
    trace.write_text("arrival_s,input_tokens,output_tokens\n0.0,100,10\n0.5,many,10\n")
    argv = [str(trace) if a == "TRACE" else str(tmp_path / "none.csv") if a == "MISSING" else a
            for a in argv]
    out = tmp_path / "out"
    assert _run(["rapid", *argv, "--out-dir", str(out)]) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith("ndpdimm rapid: error: ") and message in last, err
    assert not out.exists()             # rejected before any work


def test_saved_trace_replays_the_same_requests(tmp_path, capsys):
    saved = tmp_path / "trace.csv"
    common = ["--mode", "static", "--no-ndp", "--ttft-slo", "0.3"]
    assert main(["rapid", "--duration", "20", "--pattern", "steady", "--seed", "3",
                 "--save-trace", str(saved), "--out-dir", str(tmp_path / "a"), *common]) == 0
    assert f"wrote {saved}" in capsys.readouterr().out
    trace = load_trace(saved)
    assert trace == generate_trace(load_workload("mixed"), 20.0, "steady", seed=3)
    assert main(["rapid", "--trace", str(saved), "--out-dir", str(tmp_path / "b"), *common]) == 0
    first, replay = (json.loads((tmp_path / d / "rapid.json").read_text()) for d in "ab")
    assert replay["config"]["trace"] == str(saved)
    assert replay["trace"]["requests"] == first["trace"]["requests"] == len(trace)
    assert replay["trace"]["name"] == first["trace"]["name"] == "mixed-steady"
    assert [s["requests"] for s in replay["systems"]] == [len(trace)] * 3
    assert "TTFT 300 ms (given)" in format_report(RapidResult.from_dict(replay))


def test_tiny_bench_writes_its_json(tmp_path):
    from ndpdimm.sw.scenarios.rapid.bench import run_rapid_bench
    lines = []
    path = tmp_path / "bench" / "rapid.json"
    result = run_rapid_bench(out=path, workloads=("mixed",), patterns=("steady",),
                             duration_s=20.0, speed_duration_s=20.0, dimm_counts=(32, 128),
                             log=lines.append)
    written = json.loads(path.read_text())
    assert without(written) == without(json.loads(json.dumps(result, default=float)))
    assert written["command"] == "ndpdimm bench --suite rapid" and written["date"][:2] == "20"
    assert written["git_commit"] and written["git_dirty"] in (True, False)
    speed = result["simulator_speed"]
    assert speed["system"] == "dynamic" and speed["peak_rate_rps"] == 45.0
    assert speed["rate_scale"] == pytest.approx(45.0 / 25.0)
    assert speed["requests"] > 0 and speed["wall_s"] > 0 and speed["simulated_s"] >= 19.0
    assert speed["requests_per_wall_s"] == pytest.approx(speed["requests"] / speed["wall_s"])
    assert speed["goal"]["met"] is False        # measured: a 20 s trace is not an hour
    [run] = result["runs"]
    assert (run["workload"], run["pattern"]) == ("mixed", "steady")
    assert [s["system"] for s in run["systems"]] == list(SYSTEMS_ALL)
    for s in run["systems"]:
        for key in ("goodput_rps", "slo_attainment", "qps_per_w", "power_moves",
                    "role_switches"):
            assert key in s
        assert set(s["ttft_ms"]) == set(s["tpot_ms"]) == {"p50", "p99"}
    assert [e["dimms"] for e in result["ndp_dimm_sweep"]] == [32, 128]
    small, large = result["ndp_dimm_sweep"]
    assert large["ndp_reserved_w"] == pytest.approx(4 * small["ndp_reserved_w"])
    assert sum(large["ndp_decode_caps_w"]) < sum(small["ndp_decode_caps_w"])
    assert large["dynamic+ndp"]["requests"] == small["dynamic"]["requests"]
    assert any("[bench rapid] wrote" in line for line in lines)
