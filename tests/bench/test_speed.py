"""The co-simulation benchmark's parts that need no RTL: the workload, the session recorder
and the timer correction (``bench/speed.py``); the RTL side runs in ``make bench``."""

import json
import warnings

import pytest

from ndpdimm.bench.speed import RecordingBackend, measure_model, workload
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.backend import ModelBackend
from ndpdimm.sw.driver.dimm import Dimm

CONFIG = CoreConfig(n_units=16)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_workload_is_bit_exact_and_recorded_session_replays():
    """The workload checks every result against the golden model; replaying the recorded
    session (loads, register writes, descriptor words) on a fresh backend gives the same
    completions and the same DRAM contents."""
    rec = RecordingBackend(ModelBackend(CONFIG))
    out = workload(Dimm(rec), scale=1, check=True)
    kinds = {e[0] for e in rec.events}
    assert kinds == {"load", "csr_write", "submit", "run"}
    assert [d["status"] for d in out["descriptors"]] == ["OK"] * len(out["descriptors"])

    fresh = ModelBackend(CONFIG)
    replayed = []
    for ev in rec.events:
        if ev[0] == "load":
            fresh.load(ev[1], bytes(rec.blob[ev[2]:ev[2] + ev[3]]))
        elif ev[0] == "csr_write":
            fresh.csr_write(ev[1], ev[2])
        elif ev[0] == "submit":
            fresh.submit([int(w, 16) for w in ev[1]])
        else:
            replayed += fresh.run()
    want = [(d["id"], d["status"], d["cycles"]) for d in out["descriptors"]]
    assert [(c.id, c.status.name, c.cycles) for c in replayed] == want
    last = [e for e in rec.events if e[0] == "load"][-1]
    assert fresh.dump(last[1], last[3]) == rec.inner.dump(last[1], last[3])


def test_recorder_refuses_what_it_cannot_replay():
    rec = RecordingBackend(ModelBackend(CONFIG))
    with pytest.raises(NotImplementedError, match="host accesses"):
        rec.host_access(0, False)
    with pytest.raises(NotImplementedError, match="until idle"):
        rec.run(max_cycles=10)


def test_timer_cost_is_subtracted():
    rec = RecordingBackend(ModelBackend(CONFIG))
    for _ in range(200):
        rec.csr_read("CYCLES")
    raw, calls = rec.sim_seconds, rec.calls
    corrected = rec.backend_seconds()
    assert 0 <= corrected <= raw and rec.calls == calls and rec.sim_seconds == raw


def test_model_error_compares_like_with_like():
    """measure_model pairs descriptors in order; fed the model's own records it reports 0 error."""
    rec = RecordingBackend(ModelBackend(CONFIG, functional=False))
    own = workload(Dimm(rec), scale=1, check=False)["descriptors"]
    m = measure_model(CONFIG, 1, own)
    assert m["per_descriptor"] and m["mean_abs_error"] == 0 and m["max_abs_error"] == 0
    assert m["cycles_per_second"] > 0


def test_model_only_rerun_keeps_the_rtl_sections(tmp_path):
    """``--model-only`` replaces each config's model section (with its own provenance) and
    leaves the harness figures it compares against untouched; no file: a clear error."""
    import json

    from ndpdimm.bench.speed import rerun_model
    with pytest.raises(ValueError, match="no cosim bench results"):
        rerun_model(tmp_path / "missing.json", scale=1)
    assert not (tmp_path / "missing.json").exists()
    own = workload(Dimm(RecordingBackend(ModelBackend(CONFIG, functional=False))), scale=1,
                   check=False)["descriptors"]
    harness = {"cycles_per_second": 1000.0, "descriptors": own}
    path = tmp_path / "cosim.json"
    path.write_text(json.dumps({"configs": [{"config": CONFIG.as_dict(), "harness": harness,
                                             "model": {"stale": True}}]}))
    report = rerun_model(path, scale=1)
    entry = json.loads(path.read_text())["configs"][0]
    assert entry == report["configs"][0]
    assert entry["harness"] == harness
    assert "stale" not in entry["model"] and entry["model"]["benchmark"] == "cosim model"
    assert entry["model"]["mean_abs_error"] == 0      # the model against its own cycle counts
    assert entry["model_vs_harness"] == entry["model"]["cycles_per_second"] / 1000.0


def test_previous_speeds_read_from_the_committed_file(tmp_path):
    """A rerun reports the speeds of the file it replaces, per configuration, with its commit."""
    from pathlib import Path

    from ndpdimm.bench.speed import previous_speeds
    committed = Path(__file__).parents[2] / "bench" / "results" / "cosim.json"
    prev = previous_speeds(committed)
    old = json.loads(committed.read_text())
    assert sorted(prev) == sorted(e["config"]["n_units"] for e in old["configs"])
    for e in old["configs"]:
        p = prev[e["config"]["n_units"]]
        assert p["git_commit"] == old["git_commit"] and p["config"] == e["config"]
        assert p["cycles_per_second"]["harness"] == e["harness"]["cycles_per_second"]
    assert previous_speeds(tmp_path / "missing.json") == {}
    assert previous_speeds(None) == {}


def test_rerun_keeps_the_fuzz_section(tmp_path):
    """The fuzzer's section (its own measurement and header) survives a rerun of the speed
    bench, which rewrites the rest of the file."""
    import shutil
    from pathlib import Path

    from ndpdimm.bench.speed import run_bench
    committed = Path(__file__).parents[2] / "bench" / "results" / "cosim.json"
    out = tmp_path / "cosim.json"
    shutil.copyfile(committed, out)
    report = run_bench(units=(), cocotb=False, out=out, work_dir=tmp_path / "work")
    assert report["fuzz"] == json.loads(committed.read_text())["fuzz"]
    assert report["configs"] == []
    assert "fuzz" not in run_bench(units=(), cocotb=False, out=tmp_path / "none.json",
                                   work_dir=tmp_path / "work2")
