"""The TriMoE reproduction on its reduced set-up (a complete table, tornados and plots) and its parts."""

import json

import pytest

from ndpdimm.sw.reproduce import trimoe
from ndpdimm.sw.reproduce.core import ReproductionError, check_figures, write_outputs
from ndpdimm.sw.reproduce.params import load_params, values
from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model, load_trimoe_hardware


@pytest.fixture(scope="module")
def reduced():
    return trimoe.reproduce(reduced=True, progress=lambda msg: None)


def test_reduced_run_gives_every_figure_tornado_and_plot(reduced, tmp_path):
    assert [f.key for f in reduced.figures] == list(trimoe.PUBLISHED)
    for f in reduced.figures:
        assert f.published == trimoe.PUBLISHED[f.key][0]
        assert f.ours is not None and f.ours > 0
    check_figures(reduced)                       # every figure outside +-25 % is explained
    assert set(reduced.sensitivity) == {"decode_speedup_max", "decode_speedup_min",
                                        "e2e_speedup_max", "e2e_speedup_min"}
    for bars in reduced.sensitivity.values():
        assert [b.parameter for b in bars] == list(trimoe.SENSITIVITY)
        assert all(b.source.strip() and b.low < b.high for b in bars)
    names = {p.name for p in write_outputs(reduced, tmp_path)}
    assert {"trimoe.json", "trimoe.md", "trimoe.png"} <= names
    assert sum(n.startswith("trimoe_tornado_") for n in names) == 4
    data = json.loads((tmp_path / "trimoe.json").read_text())
    assert data["setup"]["reduced"] is True
    assert set(data["setup"]["parameters"]) == set(load_params("trimoe"))


def test_speedup_is_over_the_best_baseline_not_gpu_only(reduced):
    (point, measured), = reduced.setup["measured"].items()      # one model, one batch
    best = measured["best_baseline"]
    tput = measured["throughput_tokens_per_s"]
    assert best in trimoe.BASELINES and tput[best] == max(tput[s] for s in trimoe.BASELINES)
    assert measured["speedup_over_best_baseline"] == pytest.approx(tput["trimoe"] / tput[best], rel=1e-3)
    assert measured["speedup_over_best_baseline"] <= measured["speedup_over_gpu_only"]
    assert reduced.figure("decode_speedup_max").ours == pytest.approx(
        measured["speedup_over_best_baseline"], rel=1e-3)
    assert reduced.figure("decode_speedup_min").ours == reduced.figure("decode_speedup_max").ours


def test_non_moe_time_is_the_weights_read_or_their_compute():
    model, hw = load_moe_model("deepseek-v2"), load_trimoe_hardware("h100-amx")
    # everything but the experts and the input embedding, from the catalogue's own count
    params = (model.params - model.moe_layers * (model.experts + model.shared_experts)
              * model.expert_params - model.vocab * model.hidden)
    g = hw.gpu
    assert trimoe.non_moe_seconds(model, hw, 1) == pytest.approx(
        2 * params / (g.memory_bandwidth_gbs * 1e9 * g.memory_efficiency))
    assert trimoe.non_moe_seconds(model, hw, 4096) == pytest.approx(
        2 * params * 4096 / (g.fp16_tflops * 1e12 * g.compute_efficiency))
    with pytest.raises(ValueError, match="batch"):
        trimoe.non_moe_seconds(model, hw, 0)


def test_swept_hardware_figures_reach_the_scenario_and_the_file_must_match_the_catalogue():
    v = values(load_params("trimoe"))
    base = load_trimoe_hardware(v["setup.hardware"])
    assert trimoe._hardware(base, v, check=True) == base
    hw = trimoe._hardware(base, {**v, "hardware.pcie_gbs": 25.2, "hardware.amx_bf16_tflops": 52.4})
    assert hw.pcie.gbytes_per_s == pytest.approx(25.2)
    assert hw.cpu.amx_bf16_tflops == 52.4 and hw.gpu == base.gpu and hw.ndp == base.ndp
    with pytest.raises(ReproductionError, match="hardware.amx_bf16_tflops = 80"):
        trimoe._hardware(base, {**v, "hardware.amx_bf16_tflops": 80.0}, check=True)
