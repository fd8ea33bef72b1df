"""The provenance writer (``cosim/provenance.py``), and every committed result traceable.

Every JSON the repository commits under ``bench/results/``, ``synth/reports/``,
``cosim/model/calibration/`` and ``sw/configs/gpus/fits/`` must start with the provenance
fields, and its commit must be in this repository's history (``git cat-file -e``): a result
whose commit was lost to a rebase, or that records none, fails here.
"""

import datetime
import json
import subprocess
from pathlib import Path

import pytest

from ndpdimm.cosim.provenance import FIELDS, command_line, git_commit, stamp, write_result

REPO = Path(__file__).resolve().parents[2]
#: the folders whose JSON is a committed result
COMMITTED = ("bench/results", "synth/reports", "cosim/model/calibration", "sw/configs/gpus/fits")


def _git(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)


def _committed_results() -> list[str]:
    out = _git("ls-files", "--", *(f"{d}/*.json" for d in COMMITTED))
    assert out.returncode == 0, f"the tests run from a git checkout: {out.stderr}"
    return sorted(out.stdout.split())


def test_there_are_committed_results():
    files = _committed_results()
    # the suites' results, the area report and the four calibrations at least
    for must in ("bench/results/dram_gemv.json", "synth/reports/area.json",
                 "bench/results/hermes.json"):
        assert must in files
    assert sum(f.startswith("cosim/model/calibration/") for f in files) >= 4
    assert sum(f.startswith("sw/configs/gpus/fits/") for f in files) >= 3


@pytest.mark.parametrize("path", _committed_results())
def test_committed_result_names_an_existing_commit(path):
    doc = json.loads((REPO / path).read_text())
    assert isinstance(doc, dict), f"{path}: a result is a JSON object"
    missing = [f for f in FIELDS if f not in doc]
    assert not missing, f"{path}: no {', '.join(missing)} (write it with cosim.provenance)"
    commits = doc["git_commit"] if isinstance(doc["git_commit"], list) else [doc["git_commit"]]
    for c in commits:
        assert isinstance(c, str) and len(c) >= 7, f"{path}: git_commit {c!r} is not a commit"
        found = _git("cat-file", "-e", f"{c}^{{commit}}")
        assert found.returncode == 0, f"{path}: commit {c} is not in this repository's history"
    assert doc["git_dirty"] in (True, False, None), f"{path}: git_dirty {doc['git_dirty']!r}"
    commands = doc["command"] if isinstance(doc["command"], list) else [doc["command"]]
    assert all(isinstance(c, str) and c.strip() for c in commands), f"{path}: empty command"
    dates = doc["date"] if isinstance(doc["date"], list) else [doc["date"]]
    for d in dates:
        datetime.datetime.fromisoformat(d)      # raises on a date that is not ISO 8601


def test_stamp_is_this_checkout():
    s = stamp("ndpdimm bench --suite x")
    assert list(s) == list(FIELDS)
    head = _git("rev-parse", "HEAD").stdout.strip()
    assert s["git_commit"] == head == git_commit()
    assert s["git_dirty"] is (bool(_git("status", "--porcelain", "--untracked-files=no").stdout.strip()))
    assert s["command"] == "ndpdimm bench --suite x"
    when = datetime.datetime.fromisoformat(s["date"])
    assert abs((datetime.datetime.now(datetime.UTC) - when).total_seconds()) < 60


def test_write_result_puts_the_fields_first(tmp_path):
    path = write_result({"what": "x", "command": "ndpdimm bench --suite x", "date": "old",
                         "value": 1.5}, tmp_path / "sub" / "r.json")
    doc = json.loads(path.read_text())
    assert list(doc)[:4] == list(FIELDS)
    assert doc["command"] == "ndpdimm bench --suite x"      # the result's own reproduction line
    assert doc["date"] != "old" and doc["value"] == 1.5 and doc["what"] == "x"
    doc = json.loads(write_result({"v": 1}, tmp_path / "r2.json", command="ndpdimm y").read_text())
    assert doc["command"] == "ndpdimm y"


def test_write_result_refuses_what_is_not_an_object(tmp_path):
    with pytest.raises(TypeError, match="JSON object"):
        write_result([1, 2], tmp_path / "r.json")
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("argv, expected", [
    (["/home/u/.venv/bin/ndpdimm", "bench", "--suite", "rapid"], "ndpdimm bench --suite rapid"),
    (["bench/profile.py", "--units", "16"], "python bench/profile.py --units 16"),
])
def test_command_line(argv, expected):
    assert command_line(argv) == expected
