"""``ndpdimm bench --suite dram_gemv`` point lists: the default set, points files, balancing.

Malformed points files are refused with the file and entry named, before any
build or simulation (CLI: exit status 2); the committed
``bench/dram_gemv_points.json`` loads; the balancer gives every point to
exactly one process, longest first.
"""

import json
from pathlib import Path

import pytest

from ndpdimm.bench.dram_gemv import _balance, _cost, bench_points, load_points
from ndpdimm.sw.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_default_points_are_the_issue_set():
    pts = bench_points()
    names = [p["name"] for p in pts]
    assert names[:2] == ["dense-fp16-4096x4096", "dense-int8-4096x4096"]
    gathers = [(p["active"], p["pattern"]) for p in pts if p["op"] == "row_gather"]
    assert sorted(gathers) == sorted((a, s) for a in (0.10, 0.25, 0.50)
                                     for s in ("random", "clustered"))
    assert sorted(p["policy"] for p in pts if "policy" in p) == ["fair", "host_first", "ndp_first"]
    assert load_points(REPO / "bench" / "dram_gemv_points.json")


@pytest.mark.parametrize("content,message", [
    ("not json", "points file"),
    ("[]", "non-empty JSON list"),
    ('[{"name": "a", "op": "dense", "dtype": "fp16", "rows": 4}]', "missing 'cols'"),
    ('[{"name": "a", "op": "axpy", "dtype": "fp16", "rows": 4, "cols": 4}]', "op must be"),
    ('[{"name": "a", "op": "dense", "dtype": "fp8", "rows": 4, "cols": 4}]', "dtype must be"),
    ('[{"name": "a", "op": "dense", "dtype": "fp16", "rows": 0, "cols": 4}]', "rows must be"),
    ('[{"name": "a", "op": "row_gather", "dtype": "fp16", "rows": 4, "cols": 4, "active": 1.5}]',
     "active must be"),
    ('[{"name": "a", "op": "dense", "dtype": "fp16", "rows": 4, "cols": 4, "policy": "x"}]',
     "policy must be"),
    ('[{"name": "a", "op": "dense", "dtype": "fp16", "rows": 4, "cols": 4, "colour": 1}]',
     "unknown keys"),
    ('[{"name": "a", "op": "dense", "dtype": "fp16", "rows": 4, "cols": 4},'
     ' {"name": "a", "op": "dense", "dtype": "fp16", "rows": 4, "cols": 4}]', "duplicate name"),
])
def test_bad_points_file_is_refused_before_any_work(tmp_path, capsys, content, message):
    path = tmp_path / "points.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="points file"):
        load_points(path)
    out_dir = tmp_path / "out"
    assert main(["bench", "--suite", "dram_gemv", "--points-file", str(path),
                 "--out-dir", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert not out_dir.exists()


def test_missing_points_file(tmp_path, capsys):
    assert main(["bench", "--suite", "dram_gemv", "--points-file", str(tmp_path / "no.json")]) == 2
    assert "points file" in capsys.readouterr().err


def test_balance_assigns_every_point_once_longest_first():
    pts = bench_points(1024, 2048)
    shares = _balance(pts, 3)
    flat = [p["name"] for s in shares for p in s]
    assert sorted(flat) == sorted(p["name"] for p in pts)
    for s in shares:
        assert [_cost(p) for p in s] == sorted((_cost(p) for p in s), reverse=True)
    loads = [sum(_cost(p) for p in s) for s in shares]
    assert max(loads) - min(loads) <= max(_cost(p) for p in pts)
    assert len(_balance(pts[:1], 4)) == 1
    json.dumps(shares)        # shares go to other processes as plain data
