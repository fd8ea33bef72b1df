"""TriMoE with the NDP experts executed: bit-exact on the model and the RTL backend."""

import pytest
import torch

from ndpdimm.sw.cli import main
from ndpdimm.sw.scenarios.trimoe import check as trimoe_check
from ndpdimm.sw.scenarios.trimoe.check import run_trimoe_check


@pytest.mark.parametrize("backend", ["model", "rtl"])
def test_every_ndp_expert_is_bit_exact(backend):
    r = run_trimoe_check(backend=backend, steps=2, tokens=24)
    ndp = [e for rec in r["records"] for e in rec["experts"] if e["device"].startswith("ndp")]
    assert r["ok"], r["records"]
    assert r["ndp_experts_checked"] == len(ndp) >= 2
    assert all(e["bit_exact"] and e["within_bound"] and e["cycles"] > 0 for e in ndp)
    assert any(e["tokens"] > r["core"]["max_batch"] for rec in r["records"] for e in rec["experts"])
    assert r["max_relative_error"] <= r["layer_tolerance"]
    # every routed token-slot is served exactly once per layer
    for rec in r["records"]:
        assert sum(e["tokens"] for e in rec["experts"]) == 24 * 2
    assert r["costs"]["ndp_backend"] == backend


def test_a_wrong_golden_model_fails_the_check(monkeypatch):
    real = trimoe_check.golden_expert

    def off_by_one_ulp(*args):
        y = real(*args).clone()
        y.view(torch.int32)[0, 0] ^= 1
        return y

    monkeypatch.setattr(trimoe_check, "golden_expert", off_by_one_ulp)
    r = run_trimoe_check(backend="model", steps=1, tokens=24)
    assert not r["ok"] and r["ndp_bit_exact"] == 0 < r["ndp_experts_checked"]


def test_bad_arguments():
    for kw in ({"steps": 0}, {"tokens": True}, {"dimms": -1}):
        with pytest.raises(ValueError):
            run_trimoe_check(backend="model", **kw)


def test_cli_check(tmp_path, capsys):
    assert main(["trimoe", "--check", "--backend", "model", "--out-dir", str(tmp_path)]) == 0
    assert "PASS" in capsys.readouterr().out
    assert (tmp_path / "trimoe_check.json").exists()
