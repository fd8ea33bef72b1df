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


def test_speedup_is_over_the_strongest_of_the_three_named_baselines(reduced):
    (point, measured), = reduced.setup["measured"].items()      # one model, one batch
    assert set(trimoe.BASELINES) == {"klotski", "ktransformers", "monde"}
    systems = {name: system for name, (system, _) in trimoe.BASELINES.items()}
    assert systems == {"klotski": "gpu_only", "ktransformers": "cpu_routed", "monde": "gpu_ndp"}
    assert reduced.setup["baselines"] == {n: {"system": s, "label": trimoe.BASELINES[n][1]}
                                          for n, s in systems.items()}
    tput = measured["throughput_tokens_per_s"]
    assert set(tput) >= {*systems.values(), "trimoe"} and "gpu_cpu" not in tput
    strongest = max(systems, key=lambda n: tput[systems[n]])
    assert measured["best_baseline"] == strongest
    assert measured["best_baseline_system"] == systems[strongest]
    assert measured["speedup_over_best_baseline"] == pytest.approx(
        tput["trimoe"] / tput[systems[strongest]], rel=1e-3)
    each = measured["speedup_over_each_baseline"]
    assert measured["speedup_over_best_baseline"] == pytest.approx(min(each.values()), rel=1e-3)
    assert reduced.figure("decode_speedup_max").ours == pytest.approx(
        measured["speedup_over_best_baseline"], rel=1e-3)
    assert reduced.figure("decode_speedup_min").ours == reduced.figure("decode_speedup_max").ours


def test_the_set_up_is_the_papers_batches_pcie_cpu_and_weights(reduced):
    """The headline runs 256-768 tokens per step (64 only on the curve), on the paper's H100 PCIe,
    Xeon Platinum 8470, 16 NDP-DIMMs and PCIe at 64 GB/s, the measured 51 GB/s printed beside it
    as the tornado's other end; no KV cache in GPU memory."""
    v = values(load_params("trimoe"))
    assert all(256 <= b <= 768 for b in v["setup.batches"])
    assert 64 in v["setup.curve_batches"] and 64 not in v["setup.batches"]
    assert reduced.setup["tokens_per_step"] == v["setup.batches"][:1] == [256]
    hw = reduced.setup["hardware_figures"]
    assert reduced.setup["hardware"] == v["setup.hardware"] == "h100-pcie-8470"
    assert hw["pcie_gbs"] == v["hardware.pcie_gbs"] == 64.0 and hw["pcie_gbs_measured"] == 51.0
    assert "8470" in hw["cpu"] and hw["cpu_cores"] == 52 and hw["memory_channels"] == 8
    assert hw["gpu"] == "H100 PCIe 80GB" and hw["ndp_dimms"] == 16
    assert hw["gpu_reserved_gb"] < load_trimoe_hardware("h100-amx").gpu.reserved_gb
    assert any("PCIe 64 GB/s one way as the paper states" in n and "51 GB/s" in n
               for n in reduced.notes)
    # the tornado's PCIe bar runs from the measured rate to the set-up's, whose end is the headline
    bar, = (b for b in reduced.sensitivity["decode_speedup_max"] if b.parameter == "hardware.pcie_gbs")
    assert (bar.low, bar.high, bar.baseline) == (51.0, 64.0, 64.0)
    assert bar.headline_at_high == pytest.approx(reduced.figure("decode_speedup_max").ours, rel=1e-5)


def test_every_routing_assumption_has_a_sourced_range_in_the_tornado():
    """Each routing.* parameter has a range with its source and is one of the tornado's bars; the
    hot experts take what the paper's cold (~8 %) and warm (up to 70 %) classes leave."""
    params = load_params("trimoe")
    routing = [k for k in params if k.startswith("routing.")]
    assert len(routing) == 8
    for name in routing:
        p = params[name]
        assert p.low is not None and p.low < p.high and p.range_source.strip(), name
        assert name in trimoe.SENSITIVITY
    v = values(params)
    assert (v["routing.cold_mass"], v["routing.warm_mass"]) == (0.08, 0.70)
    cfg = trimoe._config(v, "deepseek-v2", 256)
    masses = cfg.trace_config(load_moe_model("deepseek-v2"), 4, 0).class_masses
    assert masses == pytest.approx({"hot": 0.22, "warm": 0.70, "cold": 0.08})
    assert 1 - v["routing.hot_fraction"] - v["routing.warm_fraction"] > 0.70   # >70 % cold


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
