"""Bad input found by trying the commands as a new user would (issue 42, part 3; the table is in
docs/bad_input.md): each case exits with status 2 and one line on stderr naming the input,
prints nothing on stdout (every run logs its first step there, so no work began) and writes
nothing. Each test runs in an empty folder, as a user who installed the wheel would.

Also here: a core the RTL can build but that has no calibration runs, and says in its table
header and its JSON that its model is uncalibrated; a run that needs the RTL of a core not in
the build cache says, before it starts, that it builds it first and for how long."""

import dataclasses
import json
import os
import re
from pathlib import Path

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.cli import main
from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, load_model
from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model


@pytest.fixture
def empty_folder(tmp_path, monkeypatch) -> Path:
    """The current folder, empty: where a new user runs the commands."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def listing(folder: Path) -> list:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def refused(argv, capsys) -> str:
    """Run ``ndpdimm argv``: it must exit 2 with one line on stderr and nothing on stdout; the
    line."""
    try:
        status = main(argv)
    except SystemExit as e:                    # argparse's refusal of an option's value
        status = e.code
    out, err = capsys.readouterr()
    assert status == 2, f"exit {status}; stdout: {out!r}; stderr: {err!r}"
    assert out == "", f"work began: {out!r}"
    assert err.count("\n") == 1 and err.startswith(f"ndpdimm {argv[0]}: error: "), err
    return err


def read_only_folder(folder: Path) -> Path:
    """A folder this process cannot write into: ``folder`` made ``chmod 555``, or for root (who
    writes into it all the same) ``/proc/sys``, mounted read-only."""
    folder.mkdir()
    folder.chmod(0o555)
    chosen = folder if not os.access(folder, os.W_OK) else Path("/proc/sys")
    assert chosen.is_dir() and not os.access(chosen, os.W_OK), f"{chosen} is writable here"
    return chosen


def bad_folders(base: Path) -> dict:
    """The three kinds of output folder that cannot be written: ``{kind: (path, reason)}``."""
    (base / "results").write_text("a file where the folder goes\n")
    ro = read_only_folder(base.parent / "read-only")
    return {"a file": ("results", "'results' is a file, not a folder"),
            "read-only": (str(ro), f"folder '{ro}' is not writable"),
            "uncreatable": ("results/run1", "cannot create folder 'results/run1': "
                                            f"'{base / 'results'}' is a file")}


@pytest.mark.parametrize("kind", ["a file", "read-only", "uncreatable"])
@pytest.mark.parametrize("command", ["hermes", "trimoe", "rapid"])
def test_an_output_folder_that_cannot_be_written_is_refused_before_the_run(command, kind,
                                                                          empty_folder, capsys):
    path, reason = bad_folders(empty_folder)[kind]
    before = listing(empty_folder)
    err = refused([command, "--out-dir", path], capsys)
    assert f"argument --out-dir: {reason}" in err
    assert listing(empty_folder) == before


@pytest.mark.parametrize("kind", ["a folder", "read-only", "uncreatable"])
@pytest.mark.parametrize("argv", [["run-layer"], ["fuzz", "--count", "10"]])
def test_a_json_file_that_cannot_be_written_is_refused_before_the_run(argv, kind, empty_folder,
                                                                     capsys):
    folders = bad_folders(empty_folder)
    (empty_folder / "out").mkdir()
    path, reason = {"a folder": ("out", "'out' is a folder, give a file name (e.g. 'out/result.json')"),
                    "read-only": (f"{folders['read-only'][0]}/r.json", folders["read-only"][1]),
                    "uncreatable": ("results/run1/r.json", folders["uncreatable"][1])}[kind]
    before = listing(empty_folder)
    err = refused([*argv, "--json", path], capsys)
    assert f"argument --json: {reason}" in err
    assert listing(empty_folder) == before


def test_an_output_folder_that_can_be_made_is_accepted(empty_folder):
    """The check refuses only what cannot be written: a new folder is made when the command
    writes, never by the check."""
    from ndpdimm.cosim.arguments import output_file, output_folder
    assert output_folder("build/hermes") == "build/hermes"
    assert output_file("build/run/r.json") == "build/run/r.json"
    assert listing(empty_folder) == []


def _scaled(source: Path, out: Path, shape, pattern: str, value: int, **change) -> str:
    """``source`` (a shipped model file) with one count raised to ``value``: the ``pattern``
    key's value and ``nominal_params_b`` (what the loader checks the shapes against); the
    file's path."""
    bigger = dataclasses.replace(shape, **change)
    text = re.sub(rf"^{pattern} = {{ value = \d+,", f"{pattern} = {{ value = {value},",
                  source.read_text(), flags=re.M)
    text = re.sub(r"^nominal_params_b = \{ value = [0-9.]+,",
                  f"nominal_params_b = {{ value = {bigger.params / 1e9!r},", text, flags=re.M)
    out.write_text(text)
    return str(out)


def test_a_dense_model_too_large_for_any_memory_is_refused_before_the_run(empty_folder, capsys):
    """A 10 T-parameter model (LLaMA2-7B with 1,500 layers): neither GPU + host memory (the
    offloading baselines) nor GPU + DIMMs (the NDP systems) holds it."""
    shape = load_model("llama2-7b")
    path = _scaled(CONFIG_DIR / "models" / "llama2-7b.toml", empty_folder / "huge.toml", shape,
                   "layers", 1500, layers=1500)
    before = listing(empty_folder)
    err = refused(["hermes", "--model", path], capsys)
    assert "of weights and KV cache" in err and "do not fit the offloading baselines' GPU + host memory" in err
    assert listing(empty_folder) == before


def test_a_dense_model_too_large_for_the_dimms_is_refused_before_the_run(capsys, empty_folder):
    """LLaMA2-70B (138 GB) fits the host's 192 GB but not the GPU and one 32 GiB DIMM."""
    err = refused(["hermes", "--model", "llama2-70b", "--dimms", "1"], capsys)
    assert "do not fit the NDP systems' GPU + 1 DIMMs (56.9 GB)" in err


def test_an_moe_model_too_large_for_the_dimms_is_refused_before_the_run(empty_folder, capsys):
    shape = load_moe_model("mixtral-8x7b")
    path = _scaled(CONFIG_DIR / "moe_models" / "mixtral-8x7b.toml", empty_folder / "huge.toml",
                   shape, "experts", 8192, experts=8192)
    err = refused(["trimoe", "--model", path], capsys)
    assert "routed experts (32 MoE layers x 8192 x 352.3 MB" in err
    assert "do not fit the 16 NDP-DIMMs of h100-amx (512.0 GB)" in err


def test_a_serving_model_larger_than_one_gpu_is_refused_before_the_run(empty_folder, capsys):
    shape = load_model("llama3.1-8b", folder="serving_models")
    path = _scaled(CONFIG_DIR / "serving_models" / "llama3.1-8b.toml", empty_folder / "huge.toml",
                   shape, "layers", 3200, layers=3200)
    err = refused(["rapid", "--model", path], capsys)
    assert "of weights do not fit one GPU of mi300x-node (192 GB HBM" in err


@pytest.mark.parametrize("command, folder, name", [("hermes", "hardware", "hermes"),
                                                   ("trimoe", "trimoe_hardware", "h100-amx")])
@pytest.mark.parametrize("measured, message", [
    ("h100-pcie", "measured = 'h100-pcie': not a GPU with a committed fit (those are a100-80gb, "
                  "h100-sxm, rtx4090"),
    ("nowhere.json", "measured = 'nowhere.json': no such fit file")])
def test_a_gpu_measured_by_an_unknown_fit_is_refused_before_the_run(command, folder, name,
                                                                     measured, message,
                                                                     empty_folder, capsys):
    text = (CONFIG_DIR / folder / f"{name}.toml").read_text()
    start = text.index("measured = { value = ")
    end = text.index(",", start)
    path = empty_folder / "h.toml"
    path.write_text(text[:start] + f'measured = {{ value = "{measured}"' + text[end:])
    before = listing(empty_folder)
    err = refused([command, "--hardware", str(path)], capsys)
    assert f"h.toml: [gpu]: {message}" in err
    assert listing(empty_folder) == before


def test_a_prompt_beyond_the_models_positions_is_refused_before_the_run(empty_folder, capsys):
    err = refused(["hermes", "--model", "llama2-7b", "--prompt", "4090", "--tokens", "7"], capsys)
    assert "llama2-7b: prompt 4090 + 7 decode tokens = 4097 positions, the model has 4096" in err


@pytest.mark.parametrize("argv, message", [
    (["hermes", "--predictor", "oracle"], "argument --predictor: invalid choice: 'oracle'"),
    (["hermes", "--recall-floor", "1.5"], "recall_floor must be a number in [0.0, 1.0], got 1.5"),
    (["hermes", "--gpu", "rtx5090"], "unknown GPU 'rtx5090'"),
])
def test_a_bad_predictor_recall_floor_or_gpu_is_refused_before_the_run(argv, message, empty_folder,
                                                                      capsys):
    err = refused(argv, capsys)
    assert message in err
    assert listing(empty_folder) == []


@pytest.mark.parametrize("argv, message", [
    (["rapid", "--time-shift", "--mode", "static"],
     "time_shift is an option of the dynamic controller: it needs mode dynamic-power, dynamic or "
     "all, got mode 'static' (no controller)"),
    (["rapid", "--time-shift=yes"], "argument --time-shift: ignored explicit argument 'yes'"),
])
def test_time_shifting_without_a_controller_or_with_a_value_is_refused_before_the_run(
        argv, message, empty_folder, capsys):
    err = refused(argv, capsys)
    assert message in err
    assert listing(empty_folder) == []


@pytest.mark.parametrize("argv", [["hermes", "--units", "7"], ["hermes", "--units", "12"],
                                  ["trimoe", "--units", "12"], ["rapid", "--units", "12"],
                                  ["run-layer", "--units", "12"],
                                  ["hermes", "--units", "64", "--act-lanes", "8"]])
def test_a_core_the_rtl_cannot_build_is_refused_before_the_run(argv, empty_folder, capsys):
    err = refused(argv, capsys)
    assert "the RTL cannot build an NDP core with n_units=" in err
    assert ("n_units must be a power of two" in err) != ("lanes must be" in err)
    assert listing(empty_folder) == []


@pytest.mark.parametrize("command", ["hermes", "trimoe", "rapid"])
def test_a_folder_without_config_json_is_refused_saying_so(command, empty_folder, capsys):
    (empty_folder / "my-model").mkdir()
    err = refused([command, "--model", "my-model"], capsys)
    assert "'my-model' is a folder without a config.json: give a Hugging Face model folder" in err


def test_a_core_without_a_calibration_runs_and_says_its_model_is_uncalibrated(empty_folder, capsys):
    """64 units: a core the RTL builds, with no calibration file: the run goes on with the
    default core's parameters, and its table header and JSON say so."""
    assert main(["hermes", "--model", "llama2-7b", "--units", "64", "--act-lanes", "64",
                 "--tokens", "2", "--sample-layers", "1", "--out-dir", "out"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines()
                  if line.startswith("NDP cycles:"))
    assert "model backend (UNCALIBRATED performance model: no calibration of this core " \
           "(u64-b16-r1-ring8-sram131072x16-act64-q8-cq8-ddr4-3200), the parameters calibrated " \
           "on u16-b16-r1-ring8-sram131072x16-act16-q8-cq8-ddr4-3200)" in header
    provenance = json.loads((empty_folder / "out" / "hermes.json").read_text())["provenance"]
    assert provenance["ndp_calibrated"] is False and "UNCALIBRATED" in provenance["ndp"]


def test_cycles_source_says_where_the_cycles_come_from():
    from ndpdimm.sw.driver.dimm import cycles_source
    assert cycles_source("rtl", CoreConfig()) == ("Verilated RTL cycles", None)
    assert cycles_source("model", CoreConfig(n_units=256, act_lanes=256)) == \
        ("calibrated performance model", True)
    words, calibrated = cycles_source("model", CoreConfig(n_units=32, act_lanes=32))
    assert calibrated is False and words.startswith("UNCALIBRATED performance model")


def test_the_first_rtl_run_of_a_core_says_it_builds_the_harness_first(tmp_path, monkeypatch,
                                                                     empty_folder, capsys):
    """An empty build cache: ``--backend rtl`` at 256 units prints the note first (here the run
    then stops at an unknown model, before any build)."""
    monkeypatch.setenv("NDPDIMM_CACHE", str(tmp_path / "cache"))
    assert main(["hermes", "--backend", "rtl", "--model", "no-such-model"]) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note == ("ndpdimm hermes: note: the RTL of this core (256 GEMV units, 256 activation "
                    "lanes) is not built yet: the run first builds its Verilated harness, 12-15 "
                    f"minutes or more, kept in {tmp_path / 'cache' / 'harness'} for later runs")
    assert error.startswith("ndpdimm hermes: error: unknown model 'no-such-model'")
    assert not any((tmp_path / "cache" / "harness").iterdir())
    # --rtl-samples needs the RTL too; the model backend alone does not
    from ndpdimm.sw.commands.options import announce_rtl_build
    assert announce_rtl_build("trimoe", CoreConfig(n_units=16), True).endswith(
        "a few minutes, kept in " f"{tmp_path / 'cache' / 'harness'} for later runs")
    assert announce_rtl_build("trimoe", CoreConfig(n_units=16), False) is None


def test_a_core_whose_harness_is_built_gets_no_note(capsys):
    """The small core the fast suite's RTL tests use: built (or found) once, then no note."""
    from ndpdimm.cosim.rtl.harness import RtlBackend
    from ndpdimm.cosim.rtl.harness_build import harness_built
    from ndpdimm.sw.commands.options import announce_rtl_build
    small = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
    RtlBackend(small, progress=False).close()
    assert harness_built(small)
    assert announce_rtl_build("run-layer", small, True) is None
    assert capsys.readouterr().err == ""
