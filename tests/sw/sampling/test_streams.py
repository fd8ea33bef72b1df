"""Held-out scenario streams (``sw/sampling/streams.py``) on the small core.

A hand-made kernel log of two TriMoE expert shapes stands in for a scenario run (the scenario
runs themselves are exercised by their own tests); the draw takes the asked number per kind,
and each stream runs on the model and on the RTL harness with every descriptor's cycles kept,
the RTL's results bit-exact against the golden model.
"""

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.calibrate import local_runner
from ndpdimm.sw.kernels.attention import Shape as Attention
from ndpdimm.sw.kernels.expert import Shape as Expert
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.streams import draw_streams, stream_check, summarise_streams

SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


def _logs():
    log = KernelLog()
    log.add(Expert(hidden=64, ffn=32, tokens=1, dtype="float16"), 900.0, 3)
    log.add(Expert(hidden=64, ffn=64, tokens=2, dtype="bfloat16"), 1500.0, 1)
    other = KernelLog()
    other.add(Attention(context=1, head_dim=64, group=1), 10.0)
    return {"trimoe": log, "hermes": other}


def test_draw_takes_per_kind_from_every_log():
    drawn = draw_streams(_logs(), 2, seed=5)
    assert sorted((s, d.kind) for s, d in drawn) == [("hermes", "attention")] * 2 + \
        [("trimoe", "expert")] * 2
    assert drawn == draw_streams(_logs(), 2, seed=5)                 # seeded
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="streams per kernel kind"):
            draw_streams(_logs(), bad, seed=5)


def test_streams_run_on_model_and_rtl_descriptor_by_descriptor():
    logs = {"trimoe": _logs()["trimoe"]}
    lines = []
    block = stream_check(logs, SMALL, 2, 3, local_runner(1), log=lines.append)
    rows = block["streams"]
    assert len(rows) == 2 and all("error" not in r for r in rows), rows
    for r in rows:
        assert r["bit_exact"], r
        assert r["descriptors"] == len(r["rtl_descriptor_cycles"]) == len(r["model_descriptor_cycles"])
        assert r["descriptors"] >= 3                       # gate/up GEMVs, activation, down GEMV
        assert r["rtl_cycles"] >= sum(r["rtl_descriptor_cycles"]) > 0
        assert r["total_error_pct"] == pytest.approx(100 * (r["model_cycles"] / r["rtl_cycles"] - 1))
    s = block["summary"]
    assert s["streams"] == 2 and s["failed"] == 0 and s["all_bit_exact"]
    assert s["rtl_cycles"] == sum(r["rtl_cycles"] for r in rows)
    assert any("2/2 trimoe expert" in line for line in lines)


def test_summary_counts_failed_streams_apart():
    ok = {"scenario": "trimoe", "kind": "expert", "rtl_cycles": 100, "model_cycles": 103,
          "descriptors": 2, "total_error_pct": 3.0, "descriptor_mean_abs_error_pct": 4.0,
          "bit_exact": True}
    s = summarise_streams([ok, {"scenario": "hermes", "kind": "x", "error": "OSError: gone"}])
    assert s["streams"] == 1 and s["failed"] == 1
    assert s["total_error_pct"] == pytest.approx(3.0) and s["stream_max_point"] == "trimoe:expert"
    assert summarise_streams([{"error": "x"}]) == {"streams": 0, "failed": 1}


def test_calibrate_streams_options_are_checked_before_any_work(tmp_path, capsys):
    from ndpdimm.sw.cli import main
    assert main(["calibrate", "--streams-only"]) == 2
    assert "--streams must be >= 1 with --streams-only" in capsys.readouterr().err
    assert main(["calibrate", "--streams", "-1"]) == 2
    assert "--streams must be" in capsys.readouterr().err
    missing = tmp_path / "none.json"
    assert main(["calibrate", "--streams-only", "--streams", "1", "--out", str(missing)]) == 2
    assert f"{missing}: no calibration of" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text('{"config": {"n_units": 3}, "config_key": "u3"}')
    assert main(["calibrate", "--streams-only", "--streams", "1", "--out", str(other)]) == 2
    assert "calibrates u3, not" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == [other]
