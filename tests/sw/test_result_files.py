"""No JSON the project writes holds a bare ``NaN`` or ``Infinity``: the result writers
(``sw/result_files.py`` ``write_json``, ``cosim/provenance.py`` ``write_result`` and
``dumps_finite``, which the calibration records and the bench suites use too) refuse a
non-finite number naming its key and write nothing; a sweep point whose result holds one is
reported as failed, and its records are finite JSON; the one result field that could be
infinite (the calibration's speed ratio of a point the clock cannot time) is None."""

import json
import math
import types

import numpy as np
import pytest

from ndpdimm.cosim.provenance import write_result
from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.sweep import jobs
from ndpdimm.sw.sweep.run import Sweep, run_sweep


def _strict(text):
    """``text`` parsed as strict JSON (NaN / Infinity are not JSON)."""
    def refuse(name):
        raise ValueError(f"{name} is not JSON")
    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("data, key", [
    ({"a": 1.0, "b": {"c": [1.0, math.nan]}}, "b.c[1]"),
    ({"ratio": math.inf}, "ratio"),
    ({"x": np.float64("nan")}, "x"),
    ({"x": np.float32("-inf")}, "x"),                 # through the writer's default=float
    ([1.0, {"y": math.nan}], "[1].y"),                # a list is written as it is
])
def test_a_non_finite_number_is_refused_naming_its_key_and_nothing_is_written(tmp_path, data, key):
    path = tmp_path / "out" / "r.json"
    with pytest.raises(ValueError) as e:
        write_json(data, path)
    assert f"{path}: {key} is " in str(e.value) and "None" in str(e.value)
    assert not path.exists()


def test_a_result_without_a_value_holds_null(tmp_path):
    path = write_json({"recall": None, "tokens_per_s": 13.75, "xs": [np.float32(0.5)]},
                      tmp_path / "r.json")
    doc = _strict(path.read_text())
    assert doc["recall"] is None and doc["tokens_per_s"] == 13.75 and doc["xs"] == [0.5]
    path = write_result({"v": 1.0}, tmp_path / "s.json", command="test")
    assert _strict(path.read_text())["command"] == "test"
    with pytest.raises(ValueError, match="s.json: v is nan"):
        write_result({"v": math.nan}, tmp_path / "s.json", command="test")


def test_a_sweep_point_whose_result_holds_nan_fails_and_its_records_are_json(tmp_path, monkeypatch):
    real = jobs.run_job

    def run_job(job, params):
        record = real(job, params)
        if params["value"] == 2:                      # this point's result holds a NaN
            record = dict(record, result=dict(record["result"], square=math.nan))
        return record

    monkeypatch.setattr("ndpdimm.sw.sweep.run.run_job", run_job)
    points = tuple(jobs.check_point("probe", {"value": v}) for v in (1, 2))
    sweep = Sweep("nan", "probe", points)
    result = run_sweep(sweep, in_process=True, cache_dir=tmp_path / "cache",
                       out_dir=tmp_path / "out", progress=False, log=lambda *_: None)
    ok, bad = result.records
    assert ok["status"] == "ok" and bad["status"] == "error" and bad["result"] is None
    assert bad["error"] == "the result's square is nan, not a number JSON can hold"
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert [_strict(line)["status"] for line in lines] == ["ok", "error"]
    assert _strict((tmp_path / "out" / "summary.json").read_text())["failed"] == 1
    assert len(list((tmp_path / "cache" / "probe").glob("*.json"))) == 1    # only the good point


def test_a_model_time_below_the_clock_gives_no_speed_ratio_not_infinity(monkeypatch, tmp_path):
    """``ndpdimm calibrate``'s speed block: a model time the clock cannot see was an infinite
    ratio (not JSON); it is None now, and the record writer refuses a NaN naming its key."""
    from ndpdimm.cosim.model.calibrate import evaluation, record

    class Model:                                      # the calls speed() makes, timed at zero
        def descriptor_cycles(self, fields, status, start=None):
            return 100

    monkeypatch.setattr(evaluation, "time", types.SimpleNamespace(perf_counter=lambda: 1.0))
    rows = [{"status": "OK", "start_cycle": 0, "rtl_wall_s": 0.01, "name": "p", "rtl_cycles": 2000,
             "rtl_sim_cycles": 3000, "fields": {}}]
    sp = evaluation.speed(Model(), rows)
    assert sp["speed_ratio_min_point"] is None and sp["speed_ratio_total"] is None
    assert sp["model_cycles_per_s"] is None and "null where" in sp["note"]
    _strict(json.dumps(sp, allow_nan=False))
    path = tmp_path / "cal.json"
    path.write_text("{}")
    with pytest.raises(ValueError, match="cal.json: summary.x is nan"):
        record.add_held_out_streams({"summary": {"x": math.nan}}, {"summary": {}}, path)
    assert path.read_text() == "{}"
