"""The TriMoE scenario's catalogue (``sw/scenarios/trimoe/catalog.py``): MoE shapes and the GPU + AMX CPU +
NDP-DIMM hardware."""

import dataclasses
import math
import re

import pytest

from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, PARAM_TOLERANCE, CatalogError, Gpu
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.measured.gpus import fit_path, load_fit, load_gpu
from ndpdimm.sw.scenarios.trimoe.catalog import (
    list_moe_models,
    list_trimoe_hardware,
    load_moe_model,
    load_trimoe_hardware,
)

MODELS = ["deepseek-v2", "glm-4.5-air", "mixtral-8x7b", "qwen3-235b-a22b"]
HARDWARE_TOML = CONFIG_DIR / "trimoe_hardware" / "h100-amx.toml"


def test_every_moe_model_of_the_spec_is_built_in_and_consistent(capsys):
    assert list_moe_models() == MODELS
    for name in MODELS:
        m = load_moe_model(name)
        assert m.name == name and m.source.startswith("https://huggingface.co/")
        assert abs(m.params / 1e9 - m.nominal_params_b) <= PARAM_TOLERANCE * m.nominal_params_b
        assert m.top_k <= m.experts and m.moe_layers == m.layers - m.dense_layers
        assert m.active_params < m.params
    assert capsys.readouterr() == ("", "")


# Implied totals (computed by hand from the config.json shapes, see each file) and the published
# per-token ("activated") figures: DeepSeek-V2 21B, Qwen3 A22B, Mixtral 12.9B, GLM-4.5-Air 12B
# (its published figure leaves the 1.24 B of embeddings out).
@pytest.mark.parametrize("name, total, active, expert_mb", [
    ("deepseek-v2", 235_740_692_480, 21.38, 47.19),
    ("qwen3-235b-a22b", 235_092_836_352, 22.19, 37.75),
    ("mixtral-8x7b", 46_702_526_464, 12.88, 352.32),
    ("glm-4.5-air", 106_851_205_120, 13.42, 34.60),
])
def test_known_figures(name, total, active, expert_mb):
    m = load_moe_model(name)
    assert m.params == total
    assert round(m.active_params / 1e9, 2) == active
    assert round(m.expert_bytes() / 1e6, 2) == expert_mb
    assert m.expert_bytes(1) * 2 == m.expert_bytes()


def test_deepseek_v2_structure():
    m = load_moe_model("deepseek-v2")
    assert (m.dense_layers, m.moe_layers, m.shared_experts, m.experts, m.top_k) == \
        (1, 59, 2, 160, 6)
    # MLA: q_a, q_b, kv_a (with the shared RoPE key), kv_b, o
    mla = (5120 * 1536 + 1536 * 128 * (128 + 64) + 5120 * (512 + 64) + 512 * 128 * (128 + 128)
           + 128 * 128 * 5120)
    assert m.attention_params_per_layer == mla
    assert m.expert_params == 3 * 5120 * 1536


def _write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _model_text(base="deepseek-v2", **override):
    m = load_moe_model(base)
    fields = {k: getattr(m, k) for k in m.__dataclass_fields__}
    fields.update(override)
    return "".join(f"{k} = " + ("true" if v is True else "false" if v is False else
                                f'"{v}"' if isinstance(v, str) else
                                f'{{ value = {v!r}, source = "test" }}') + "\n"
                   for k, v in fields.items() if v is not None)


def test_the_writer_round_trips(tmp_path):
    assert load_moe_model(_write(tmp_path, _model_text())) == load_moe_model("deepseek-v2")


@pytest.mark.parametrize("base, override, message", [
    ("deepseek-v2", {"expert_ffn": 1356}, "imply .* B parameters, the file says 236.0 B"),
    ("mixtral-8x7b", {"hidden": 4906}, "imply .* the file says 46.7 B"),
    ("deepseek-v2", {"top_k": 161}, r"top_k \(161\) must not exceed experts \(160\)"),
    ("deepseek-v2", {"dense_ffn": 0}, r"dense_ffn \(0\) must be 0 exactly when dense_layers \(1\)"),
    ("mixtral-8x7b", {"dense_ffn": 14336}, r"dense_ffn \(14336\) must be 0 exactly when"),
    ("mixtral-8x7b", {"dense_layers": 32, "dense_ffn": 14336}, "must be fewer than layers"),
    ("qwen3-235b-a22b", {"kv_heads": 5}, "multiple of kv_heads"),
    ("deepseek-v2", {"shared_experts": -2}, "shared_experts must be zero or positive, got -2"),
    ("deepseek-v2", {"experts": 0}, "experts must be positive, got 0"),
    ("deepseek-v2", {"top_k": 6.0}, "top_k must be an int, got 6.0"),
    ("deepseek-v2", {"layers": "60"}, "layers must be an int"),
    ("deepseek-v2", {"tied_embeddings": 0}, "tied_embeddings must be a bool"),
    ("deepseek-v2", {"experts": None}, "missing key experts"),
    ("deepseek-v2", {"ffn": 1536}, "unknown key ffn"),
    ("deepseek-v2", {"vocab": math.inf}, "vocab is inf: numbers must be finite"),
])
def test_bad_model_files_are_refused_with_the_reason(tmp_path, base, override, message):
    path = _write(tmp_path, _model_text(base, **override))
    with pytest.raises(CatalogError, match=message) as e:
        load_moe_model(path)
    assert str(path) in str(e.value)


def test_unknown_names_and_broken_files(tmp_path):
    with pytest.raises(CatalogError, match="unknown MoE model 'gpt-oss': built in are "
                                           "deepseek-v2, glm-4.5-air, mixtral-8x7b, qwen3-235b-a22b"):
        load_moe_model("gpt-oss")
    with pytest.raises(CatalogError, match="unknown TriMoE hardware 'dgx': built in are h100-amx"):
        load_trimoe_hardware("dgx")
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_moe_model(_write(tmp_path, "hidden = = 3\n"))
    with pytest.raises(CatalogError, match="no such file"):
        load_trimoe_hardware(tmp_path / "absent.toml")
    # the dense catalogue's message is unchanged by the generalised reader
    from ndpdimm.sw.scenarios.catalog import load_model
    with pytest.raises(CatalogError, match="unknown model 'mixtral-8x7b'"):
        load_model("mixtral-8x7b")


def test_hardware_catalogue(capsys):
    assert list_trimoe_hardware() == ["h100-amx", "h100-pcie-8470"]
    h = load_trimoe_hardware()
    assert capsys.readouterr() == ("", "")
    assert h.name == "h100-amx" and h.gpu.memory_gb == 80 and h.gpu.fp16_tflops == 756
    # the GPU charges the H100 SXM table's fit carried to the PCIe card through the datasheets
    assert h.gpu.measured == "h100-sxm"
    fit = GpuModel(h.gpu).fitted
    sxm = load_gpu("h100-sxm")
    assert fit is not None and fit.gpu == h.gpu.name
    assert math.isclose(max(fit.bw) / max(load_fit(fit_path("h100-sxm")).bw),
                        h.gpu.memory_bandwidth_gbs / sxm.memory_bandwidth_gbs)
    assert h.cpu.efficiency_at(h.cpu.half_efficiency_tokens) == h.cpu.compute_efficiency / 2
    with pytest.raises(ValueError, match="tokens must be >= 0"):
        h.cpu.efficiency_at(-1)
    # 8 DDR5 channels; the 16 NDP-DIMMs fill them two per channel and are the host memory
    assert h.cpu.memory_channels == 8
    assert h.cpu.memory_bandwidth_gbs == 8 * h.cpu.channel_bandwidth_gbs
    assert h.ndp.dimms == 16 == h.cpu.memory_channels * h.ndp.dimms_per_channel
    assert h.cpu.memory_gb == h.ndp.dimms * h.ndp.capacity_gb
    assert 85 <= h.cpu.amx_bf16_tflops <= 95                   # SPEC: ~90 TFLOPS BF16
    # PCIe 5.0 x16: 32 GT/s x 16 lanes / 8 x 128/130 = 63.0 GB/s raw, times the protocol factor
    assert math.isclose(h.pcie.gbytes_per_s, 63.0 * h.pcie.protocol_efficiency, rel_tol=1e-3)
    # the GPU is a catalog.Gpu: the GPU model takes it (on the fit; on the roofline without one)
    assert isinstance(h.gpu, Gpu) and GpuModel(h.gpu).linear(1, 4096, 4096).bound == "measured"
    roofline = dataclasses.replace(h.gpu, measured="")
    assert GpuModel(roofline).linear(1, 4096, 4096).bound == "memory"
    # the largest model's experts fit in the host memory the DIMMs provide
    m = load_moe_model("deepseek-v2")
    experts = m.moe_layers * (m.experts + m.shared_experts) * m.expert_bytes()
    assert experts / 1e9 < h.cpu.memory_gb
    assert h.gpu.reserved_gb < h.gpu.memory_gb



def test_the_papers_hardware_file_is_its_stated_set_up():
    """h100-pcie-8470 (the reproduction's): an H100 PCIe, a Xeon Platinum 8470 (52 cores, AMX at
    the assumed 1.6 GHz, 8 DDR5-4400 channels), 16 NDP-DIMMs, PCIe 5.0 at the paper's 64 GB/s one
    way, and no KV cache in GPU memory; the GPU fit and the NDP-DIMMs are the default file's."""
    paper, default = load_trimoe_hardware("h100-pcie-8470"), load_trimoe_hardware("h100-amx")
    assert paper.name == "h100-pcie-8470" and paper.gpu.name == "H100 PCIe 80GB"
    assert paper.pcie.gbytes_per_s == 64.0 and default.pcie.gbytes_per_s == pytest.approx(51.0, rel=1e-3)
    assert "8470" in paper.cpu.name and paper.cpu.cores == 52 and paper.cpu.sockets == 1
    assert paper.cpu.amx_bf16_tflops == pytest.approx(52 * 1024 * 1.6e9 / 1e12, abs=0.01)
    assert paper.cpu.memory_channels == 8 and paper.cpu.memory_bandwidth_gbs == pytest.approx(8 * 35.2)
    assert paper.ndp == default.ndp and paper.ndp.dimms == 16
    # only the reserved memory differs on the GPU: the KV cache lives in the host DIMMs
    assert dataclasses.replace(paper.gpu, reserved_gb=default.gpu.reserved_gb) == default.gpu
    assert paper.gpu.reserved_gb == default.gpu.reserved_gb - 6.0


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("compute_efficiency = { value = 0.5,", "compute_efficiency = { value = 1.5,"),
     r"cpu.compute_efficiency must be in \(0, 1\]"),
    (lambda t: t.replace("[cpu]", "[host]"), "missing key cpu; unknown key host"),
    (lambda t: re.sub(r"\nreserved_gb = .*\n", "\n", t), r"missing key gpu.reserved_gb"),
    (lambda t: t.replace("\n[ndp]\n", "\n[ndp]\nvoltage = 1.2\n"), r"unknown key ndp.voltage"),
    (lambda t: t.replace("memory_channels = { value = 8,", 'memory_channels = { value = "8",'),
     "cpu.memory_channels must be an int"),
    (lambda t: t.replace("half_efficiency_tokens = { value = 64.0,", "half_efficiency_tokens = { value = 0.0,"),
     "cpu.half_efficiency_tokens must be positive"),
    (lambda t: t.replace('measured = { value = "h100-sxm",', 'measured = { value = "h100-pcie",'),
     r"\[gpu\]: measured = 'h100-pcie': not a GPU with a committed fit"),
    (lambda t: t.replace("reserved_gb = { value = 32.0,", "reserved_gb = { value = 80.0,"),
     "leaves no room for experts"),
    (lambda t: t.replace("dimms_per_channel = { value = 2,", "dimms_per_channel = { value = 1,"),
     r"dimms \(16\) must fill the CPU's channels"),
    (lambda t: t.replace("memory_gb = { value = 512.0,", "memory_gb = { value = 1024.0,"),
     "they are the host memory"),
    (lambda t: t.replace("[ndp]", "[ndp2]"), "missing key ndp; unknown key ndp2"),
    (lambda t: t.replace("lanes = { value = 16,", "lanes = { value = nan,"), "pcie.lanes is nan"),
    (lambda t: re.sub(r'(gt_per_s = \{ value = 32.0), source = "[^"]*"', r"\1", t),
     "pcie.gt_per_s has no source"),
])
def test_bad_hardware_files_are_refused(tmp_path, edit, message):
    text = HARDWARE_TOML.read_text()
    assert edit(text) != text
    path = _write(tmp_path, edit(text), "h.toml")
    with pytest.raises(CatalogError, match=message) as e:
        load_trimoe_hardware(path)
    assert str(path) in str(e.value)
