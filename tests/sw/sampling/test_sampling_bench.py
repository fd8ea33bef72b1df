"""The sampling benchmark's sections (sw/scenarios/sampling_bench.py) on the 8-unit test core:
coverage of the sub-sample correction, the warm-up bias, the allocation comparison, the
leave-one-out coverage arithmetic and the resumable JSON."""

import json

import numpy as np
import pytest

import ndpdimm.sw.scenarios.sampling_bench as bench
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.kernels import shape
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.replay import model_one

CORE = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


def _quiet(*_):
    pass


@pytest.fixture
def small(monkeypatch):
    """Kernel logs of every kind on the test core, charged the model's cycles off by -10..+10 %."""
    monkeypatch.setattr(bench, "CORE", CORE)
    monkeypatch.setattr(bench, "WORKERS", 0)
    logs = {"hermes_b1": KernelLog(), "trimoe_768": KernelLog()}
    kernels = [("hermes_b1", "cold_mlp", {"k": k, "pool": 320, "hidden": 128, "batch": 1,
                                           "dtype": "fp16", "gated": True}) for k in (160, 224)]
    kernels += [("hermes_b1", "qkv_dense", {"rows": 512, "hidden": 128, "batch": 1}),
                ("hermes_b1", "attention", {"context": 64, "head_dim": 32, "group": 2}),
                ("trimoe_768", "expert", {"hidden": 64, "ffn": 256, "tokens": 17, "dtype": "float16"})]
    for i, (log, kind, params) in enumerate(kernels):
        s = shape(kind, params)
        logs[log].add(s, model_one(s, 0, CORE)["model_backend_cycles"] * (0.9 + 0.05 * i), 2)
    return logs


def test_coverage_replays_each_kind_both_ways_on_the_rtl(small):
    c = bench.run_coverage(small, n=4, log=_quiet)
    assert set(c) == {"cold_mlp", "qkv_dense", "expert"}
    for kind, e in c.items():
        assert e["n"] == 4 and all(r["bit_exact"] for r in e["rows"]), kind
        for r in e["rows"]:
            assert len(r["plan"]["groups"]) < r["plan"]["n_groups"]
            # q is the whole RTL over the model-scaled sub-sample, within a few per cent of 1
            est = r["whole_model_cycles"] * r["sub_rtl_cycles"] / r["sub_model_cycles"]
            assert r["q"] == pytest.approx(r["whole_rtl_cycles"] / est)
            assert abs(r["q"] - 1) < 0.1
        assert 0 <= e["covered"] <= e["n"]


def test_the_warm_up_section_compares_reset_and_warm_starts(small):
    w = bench.run_warmup(small, n=2, log=_quiet)
    assert set(w) == {"attention", "qkv_dense", "cold_mlp", "expert"}
    for kind, e in w.items():
        assert len(e["rows"]) == 2 and all(r["bit_exact"] for r in e["rows"]), kind
        for r in e["rows"]:
            assert r["relative_difference"] == pytest.approx(r["warm_cycles"] / r["from_reset_cycles"] - 1)
        assert e["relative_difference"]["n"] == 2


def test_leave_one_out_coverage_is_near_nominal_on_normal_corrections():
    """Over 200 sets of 20 normal corrections (seeds 0..199) the leave-one-out 95 % prediction
    intervals hold 93-97 % of the values; one outlier among tight values is not covered."""
    cov = [bench.coverage_of(np.random.default_rng(s).normal(1.0, 0.01, 20))["coverage"]
           for s in range(200)]
    assert 0.93 <= float(np.mean(cov)) <= 0.97
    q = [1.0 + 0.001 * i for i in range(19)] + [1.2]
    c = bench.coverage_of(q)
    assert c["covered"] == 19 and c["n"] == 20


def test_predicted_allocation_compares_at_equal_rtl_seconds():
    """Two kinds, one varying and cheap, one steady and costly: Neyman's shares give a smaller
    predicted spread than the proportional ones at the same RTL seconds."""
    def kind(cycles, mean, sd, n, seconds):
        return {"model_cycles": cycles, "n": n, "replay_seconds_mean": seconds,
                "ratio": {"mean": mean, "terms": [(sd ** 2 / n, n - 1)]}}
    run = {"rtl_samples": {"kinds": {"a": kind(1e9, 1.0, 0.08, 6, 10.0),
                                     "b": kind(1e9, 1.0, 0.005, 6, 100.0)}}}
    p = bench.predicted_allocation(run)
    assert p["rtl_seconds"] == pytest.approx(6 * 10 + 6 * 100)
    assert p["neyman"]["relative_sd_pct"] < p["proportional"]["relative_sd_pct"]
    assert p["neyman"]["allocation"]["a"] > p["neyman"]["allocation"]["b"]


def test_sections_are_kept_and_unknown_ones_refused(tmp_path, capsys):
    from ndpdimm.sw.cli import main
    out = tmp_path / "sampling.json"
    out.write_text(json.dumps({"benchmark": "sampling", "warmup": {"kept": True}}))
    assert main(["bench", "--suite", "sampling", "--section", "nothing", "--out-dir", str(tmp_path)]) == 2
    assert "unknown sampling section" in capsys.readouterr().err
    assert json.loads(out.read_text())["warmup"] == {"kept": True}
