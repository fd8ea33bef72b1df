"""``bench/cycle_identity.py``: the comparison of two runs and its refusal of a mismatched file
(the RTL runs themselves are the benchmark, not a test)."""

import json

import pytest

from ndpdimm.bench import cycle_identity
from ndpdimm.cosim.backend import CoreConfig


def _run(points, config=None):
    return {"config": (config or CoreConfig(n_units=256, act_lanes=256)).as_dict(),
            "points": {n: {"status": s, "cycles": c, "start_cycle": 0} for n, (s, c) in points.items()}}


def test_compare_lists_every_difference():
    old = _run({"a": ("OK", 10), "b": ("OK", 20), "c": ("OK", 30), "gone": ("OK", 1)})
    new = _run({"a": ("OK", 10), "b": ("OK", 21), "c": ("BAD_INDEX", 30), "extra": ("OK", 2)})
    diff = cycle_identity.compare(new, old)
    assert [n for n, *_ in diff] == ["b", "c", "extra", "gone"]
    assert diff[0][1]["cycles"] == 20 and diff[0][2]["cycles"] == 21
    assert cycle_identity.compare(old, old) == []


def test_start_cycle_alone_is_not_a_difference():
    old = _run({"a": ("OK", 10)})
    new = json.loads(json.dumps(old))
    new["points"]["a"]["start_cycle"] = 99
    assert cycle_identity.compare(new, old) == []


def test_against_another_configuration_is_refused_before_running(tmp_path, capsys):
    f = tmp_path / "old.json"
    f.write_text(json.dumps(_run({"a": ("OK", 1)}, CoreConfig(n_units=16))))
    with pytest.raises(SystemExit):
        cycle_identity.main(["--units", "256", "--out", str(tmp_path / "new.json"),
                             "--against", str(f)])
    assert "another configuration" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists()


@pytest.mark.parametrize("content", [None, "not json", '{"points": {}}', "[1, 2]"])
def test_against_a_missing_or_foreign_file_is_refused(tmp_path, capsys, content):
    f = tmp_path / "old.json"
    if content is not None:
        f.write_text(content)
    with pytest.raises(SystemExit):
        cycle_identity.main(["--units", "16", "--out", str(tmp_path / "new.json"),
                             "--against", str(f)])
    assert "not a cycle_identity result" in capsys.readouterr().err
    assert not (tmp_path / "new.json").exists()


def test_a_bad_core_size_is_a_usage_error_before_any_run(capsys):
    with pytest.raises(SystemExit) as e:
        cycle_identity.main(["--units", "256", "--act-lanes", "0", "--out", "unused.json"])
    assert e.value.code == 2 and "act_lanes" in capsys.readouterr().err
