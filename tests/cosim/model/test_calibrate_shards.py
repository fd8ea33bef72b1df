"""Sharded, resumable RTL runs of the calibration (``cosim/model/calibrate/measure.py``:
``run_points``, ``PointStore``, ``local_runner``; ``sw/sweep/tasks.py``: ``dask_runner``).

Three cheap points of the small core (the harness the other fast harness tests build): a first
run measures them and saves each; a second run with a runner that must not be called returns the
same records from the store; a run whose shard fails saves the other shards and says which
failed; the Dask runner gives the same cycle counts as local processes.
"""

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model import calibrate
from ndpdimm.cosim.model.calibrate import measure
from ndpdimm.sw.sweep.tasks import dask_runner

SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
NAMES = ("softmax-fp16-64", "dma-out-256", "dense-fp16-8x64-b1")


def _points():
    pts = {p["name"]: p for s in calibrate.point_sets(SMALL).values() for p in s}
    missing = [n for n in NAMES if n not in pts]
    assert not missing, f"point names changed: {missing}"
    return [pts[n] for n in NAMES]


def _no_runner(fn, tasks, on_done):
    raise AssertionError(f"nothing should run: {len(tasks)} shards submitted")


def test_points_are_saved_and_a_second_run_resumes(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "SHARD_CYCLES", 1)           # one shard per point (read by run_points)
    store = calibrate.PointStore(tmp_path / "points")
    pts = _points()
    recs, extras = calibrate.run_points(SMALL, pts, jobs=1, progress=False, store=store,
                                        log=lambda *a: None)
    assert [r["name"] for r in recs] == list(NAMES)
    assert all(r["rtl_cycles"] > 0 for r in recs) and extras["gap_samples"]
    assert len(list((tmp_path / "points").glob("*.json"))) == len(NAMES) + 1     # + extras
    lines = []
    again, extras2 = calibrate.run_points(SMALL, pts, jobs=1, progress=False, store=store,
                                          runner=_no_runner, log=lines.append)
    assert again == recs and extras2 == extras
    assert "3 of 3 points already measured" in lines[0]


def test_a_failed_shard_keeps_the_others_and_names_itself(tmp_path, monkeypatch):
    monkeypatch.setattr(measure, "SHARD_CYCLES", 1)
    store = calibrate.PointStore(tmp_path / "points")
    pts = _points()

    def flaky(fn, tasks, on_done):
        for i, t in enumerate(tasks):
            if any(p["name"] == "dma-out-256" for p in t[1]):
                on_done(i, None, OSError("worker lost"))
            else:
                on_done(i, fn(t), None)

    with pytest.raises(RuntimeError, match=r"1 of 3 shards failed.*dma-out-256.*worker lost"):
        calibrate.run_points(SMALL, pts, progress=False, store=store, runner=flaky,
                             log=lambda *a: None)
    assert store.get("dma-out-256") is None
    assert store.get("softmax-fp16-64")["rtl_cycles"] > 0
    # the rerun measures only the missing point
    ran = []

    def counting(fn, tasks, on_done):
        ran.extend(p["name"] for t in tasks for p in t[1])
        calibrate.local_runner(1)(fn, tasks, on_done)

    recs, _ = calibrate.run_points(SMALL, pts, progress=False, store=store, runner=counting,
                                   log=lambda *a: None)
    assert ran == ["dma-out-256"] and [r["name"] for r in recs] == list(NAMES)


def test_dask_runner_measures_what_local_processes_measure(tmp_path):
    pts = _points()[:2]
    local, _ = calibrate.run_points(SMALL, pts, progress=False, store=None,
                                    runner=calibrate.local_runner(1), log=lambda *a: None)
    dask, _ = calibrate.run_points(SMALL, pts, progress=False, store=None,
                                   runner=dask_runner(None, 2), log=lambda *a: None)
    assert [r["rtl_cycles"] for r in dask] == [r["rtl_cycles"] for r in local]


def test_store_ignores_half_written_and_foreign_files(tmp_path):
    store = calibrate.PointStore(tmp_path)
    store.put("a", {"rtl_cycles": 5})
    assert store.get("a") == {"rtl_cycles": 5} and store.get("b") is None
    store._path("b").write_text('{"name": "b", "rec')             # killed mid-write
    assert store.get("b") is None
    store._path("c").write_text('{"name": "not c", "record": 1}\n')
    assert store.get("c") is None


def test_measure_on_rtl_is_the_same_from_reset_every_time():
    # what bench/cycle_identity.py relies on: one process, one order, from reset -> same cycles
    pts = _points()
    first, extras = calibrate.measure_on_rtl(SMALL, pts)
    again, _ = calibrate.measure_on_rtl(SMALL, pts)
    assert extras is None and [r["name"] for r in first] == list(NAMES)
    assert [(r["status"], r["rtl_cycles"], r["start_cycle"]) for r in first] == \
        [(r["status"], r["rtl_cycles"], r["start_cycle"]) for r in again]
    assert all(r["rtl_cycles"] > 0 for r in first)
