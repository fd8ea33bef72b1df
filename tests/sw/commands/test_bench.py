"""``ndpdimm bench`` (``sw/commands/bench.py``): a suite's name is its ``--suite`` choice and the
name of the JSON file it writes, ``--suite all`` runs every suite once in its order."""

import json
from pathlib import Path

import pytest

from ndpdimm.sw.cli import build_parser, main
from ndpdimm.sw.commands import bench

REPO = Path(__file__).resolve().parents[3]


def test_the_suites_are_the_choices_and_all_runs_each_once():
    parser = build_parser(declare=("bench",))
    for suite in (*bench.SUITES, "all"):
        assert parser.parse_args(["bench", "--suite", suite]).suite == suite
    assert sorted(bench.ALL) == sorted(bench.SUITES) and len(set(bench.ALL)) == len(bench.ALL)


@pytest.mark.parametrize("suite", list(bench.SUITES))
def test_a_suite_is_named_as_its_results_file(suite):
    """The committed result of each suite is ``bench/results/<suite>.json`` (fuzz: the ``fuzz``
    section of ``cosim.json``) and records the command that made it, ``--suite <suite>``."""
    path = bench.results_file(suite, "bench/results")
    assert path == f"bench/results/{'cosim' if suite == 'fuzz' else suite}.json"
    result = json.loads((REPO / path).read_text())
    if suite in bench.RESULTS:
        result = result[suite]
    assert result["command"].startswith(f"ndpdimm bench --suite {suite}")


def test_the_suites_run_in_order_into_their_files(tmp_path, monkeypatch):
    ran = []
    for suite in bench.SUITES:
        monkeypatch.setitem(bench.SUITES, suite, lambda args, out, s=suite: ran.append((s, out)))
    assert main(["bench", "--out-dir", str(tmp_path)]) == 0
    assert ran == [(s, bench.results_file(s, str(tmp_path))) for s in bench.ALL]
    ran.clear()
    assert main(["bench", "--suite", "fuzz", "--out-dir", str(tmp_path)]) == 0
    assert ran == [("fuzz", f"{tmp_path}/cosim.json")]
