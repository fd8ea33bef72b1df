"""The scenarios' shared catalogue (``sw/scenarios/catalog.py``), Hermes' hardware catalogue
(``sw/scenarios/hermes/catalog.py``) and the GPU roofline model (``sw/scenarios/gpu.py``)."""

import dataclasses
import math

import pytest

from ndpdimm.sw.scenarios.catalog import PARAM_TOLERANCE, CatalogError, list_models, load_model
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.catalog import list_hardware, load_hardware

MODELS = ["falcon-40b", "llama2-13b", "llama2-70b", "llama2-7b", "opt-13b", "opt-30b", "opt-66b"]


def test_every_model_of_the_spec_is_built_in_and_consistent():
    assert list_models() == MODELS
    for name in MODELS:
        m = load_model(name)
        assert m.name == name and m.source.startswith("https://huggingface.co/")
        assert abs(m.params / 1e9 - m.nominal_params_b) <= PARAM_TOLERANCE * m.nominal_params_b
        assert m.heads * m.head_dim == m.hidden


def test_known_figures():
    # LLaMA2-70B: grouped-query attention, 8 K/V heads of 128 -> 320 KiB of FP16 KV per token
    m = load_model("llama2-70b")
    assert (m.head_dim, m.kv_dim, m.kv_bytes_per_token()) == (128, 1024, 80 * 2 * 1024 * 2)
    assert round(m.params / 1e9, 2) == 68.98
    assert round(load_model("llama2-7b").params / 1e9, 2) == 6.74     # the published 6.74 B
    assert round(load_model("opt-13b").params / 1e9, 2) == 12.85


def _write(tmp_path, text, name="m.toml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _model_text(**override):
    path = load_model("opt-13b")
    fields = {k: getattr(path, k) for k in path.__dataclass_fields__}
    fields.update(override)
    lines = []
    for k, v in fields.items():
        if v is None:
            continue
        lines.append(f"{k} = " + ("true" if v is True else "false" if v is False else
                                  f'"{v}"' if isinstance(v, str) else
                                  f'{{ value = {v!r}, source = "test" }}'))
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("override, message", [
    ({"ffn": 2048}, "imply"),                          # a typo in a width
    ({"hidden": 5121}, "multiple of heads"),
    ({"mlp": "moe"}, "mlp must be"),
    ({"activation": "tanh"}, "activation must be"),
    ({"layers": 0}, "must be positive"),
    ({"layers": 40.5}, "layers must be an int"),
    ({"tied_embeddings": 1}, "tied_embeddings must be a bool, got 1"),
    ({"tied_embeddings": "yes"}, "tied_embeddings must be a bool"),
    ({"heads": None}, "missing key heads"),
    ({"experts": 8}, "unknown key experts"),
    ({"hidden": math.nan}, "hidden is nan: numbers must be finite"),
])
def test_bad_model_files_are_refused_with_the_reason(tmp_path, override, message):
    with pytest.raises(CatalogError, match=message):
        load_model(_write(tmp_path, _model_text(**override)))


def test_unknown_names_and_broken_files():
    with pytest.raises(CatalogError, match="unknown model 'gpt-5'.*llama2-70b"):
        load_model("gpt-5")
    with pytest.raises(CatalogError, match="unknown hardware"):
        load_hardware("dgx")


def test_broken_toml_and_missing_file(tmp_path):
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_model(_write(tmp_path, "hidden = = 3\n"))
    with pytest.raises(CatalogError, match="no such file"):
        load_model(tmp_path / "absent.toml")


def test_hardware_catalogue():
    assert list_hardware() == ["hermes"]
    h = load_hardware()
    assert h.gpu.memory_gb == 24 and h.ndp.dimms == 8
    # PCIe 4.0 x16: 16 GT/s x 16 lanes / 8 x 128/130 = 31.5 GB/s raw, times the protocol factor
    assert math.isclose(h.pcie.gbytes_per_s, 31.5 * h.pcie.protocol_efficiency, rel_tol=1e-3)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("compute_efficiency = { value = 0.997,", "compute_efficiency = { value = 1.7,"),
     "gpu.compute_efficiency must be in \\(0, 1\\]"),
    (lambda t: t.replace("[host]", "[cpu]"), "missing key host; unknown key cpu"),
    (lambda t: t.replace("dimms = { value = 8,", "dimms = { value = -8,"), "ndp.dimms must be positive"),
    (lambda t: t + "\n[extra]\nx = 1\n", "unknown key extra"),
])
def test_bad_hardware_files_are_refused(tmp_path, edit, message):
    from ndpdimm.sw.scenarios.catalog import CONFIG_DIR
    text = (CONFIG_DIR / "hardware" / "hermes.toml").read_text()
    with pytest.raises(CatalogError, match=message):
        load_hardware(_write(tmp_path, edit(text), "h.toml"))


def test_gpu_roofline():
    gpu = dataclasses.replace(load_hardware().gpu, measured="")       # the roofline, no fit
    g = GpuModel(gpu)
    # decode (one token): memory-bound, the weights at the effective bandwidth
    t = g.linear(1, 8192, 8192)
    assert t.bound == "memory"
    want = gpu.kernel_overhead_us * 1e-6 + (8192 * 8192 + 2 * 8192) * 2 / (
        gpu.memory_bandwidth_gbs * 1e9 * gpu.memory_efficiency)
    assert math.isclose(t.seconds, want, rel_tol=1e-12)
    # prefill (2048 tokens): compute-bound
    t = g.linear(2048, 8192, 8192)
    assert t.bound == "compute"
    assert math.isclose(t.seconds - gpu.kernel_overhead_us * 1e-6,
                        2 * 2048 * 8192 * 8192 / (gpu.fp16_tflops * 1e12 * gpu.compute_efficiency))
    # attention over a long context reads the KV cache
    a = g.attention(batch=1, queries=1, context=4096, heads=64, kv_heads=8, head_dim=128)
    assert a.bound == "memory" and a.bytes >= 2 * 4096 * 8 * 128 * 2
    with pytest.raises(ValueError, match="tokens"):
        g.linear(-1, 2, 2)
    with pytest.raises(ValueError, match="catalog.Gpu"):
        GpuModel("4090")
