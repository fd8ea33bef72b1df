"""The Hermes energy model and price catalogue (``sw/scenarios/energy.py``)."""

import dataclasses
import math
import re

import pytest

from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, CatalogError, Gpu
from ndpdimm.sw.scenarios.energy import (
    COMPONENTS,
    SYSTEMS,
    EnergyModel,
    PriceCatalog,
    Usage,
    load_energy,
    reference_gpu,
)
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.catalog import load_hardware

ENERGY_TOML = CONFIG_DIR / "energy" / "hermes_energy.toml"


@pytest.fixture(scope="module")
def model():
    return EnergyModel(gpu=load_hardware("hermes").gpu)


def test_built_in_file_and_its_key_figures():
    c = load_energy()
    assert c.name == "hermes_energy" and c.gpu.hardware == "hermes"
    assert c.link.pj_per_bit == 1.17                        # SPEC section 5
    dc = c.datacenter                                       # NVIDIA A100 80GB SXM datasheet
    assert (dc.count, dc.memory_gb, dc.memory_bandwidth_gbs, dc.fp16_tflops, dc.board_power_w) == \
        (5, 80.0, 2039.0, 312.0, 400.0)
    assert math.isclose(c.ndp.core_busy_w, c.ndp.core_area_mm2 * c.ndp.busy_w_per_mm2)
    # the energy file lives apart from the hardware files the hardware catalogue lists
    assert ENERGY_TOML.is_file()


def test_energy_adds_up_per_component_by_hand(model):
    c, board = model.config, load_hardware("hermes").gpu.board_power_w
    u = Usage(seconds=2.0, gpu_busy_s=0.5, pcie_bytes=1e9, host_dram_bytes=3e9,
              host_cpu_busy_s=0.25, dimm_dram_bytes=4e9, ndp_macs=1e10, ndp_busy_s=6.0,
              link_bytes=2e8, dimms=4)
    e = model.energy(u)
    want = {
        "gpu": 0.5 * board + 1.5 * c.gpu.idle_w,
        "host_cpu": 0.25 * c.host.busy_w + 1.75 * c.host.idle_w,
        "host_dram": 8 * 3e9 * c.dram.host_pj_per_bit * 1e-12,
        "pcie": 8 * 1e9 * c.pcie.pj_per_bit * 1e-12,
        "dimm_dram": 8 * 4e9 * c.dram.dimm_pj_per_bit * 1e-12,
        "ndp_logic": 1e10 * c.ndp.mac_pj * 1e-12 + 6.0 * c.ndp.core_area_mm2 * c.ndp.busy_w_per_mm2
                     + (4 * 2.0 - 6.0) * c.ndp.idle_w,
        "dimm_link": 8 * 2e8 * 1.17e-12,
        "dimm_background": 4 * 2.0 * c.dram.dimm_background_w,
    }
    assert set(e) == set(COMPONENTS) | {"total"}
    for k, v in want.items():
        assert math.isclose(e[k], v, rel_tol=1e-12), k
    assert math.isclose(e["total"], sum(want.values()), rel_tol=1e-12)
    assert math.isclose(model.tokens_per_joule(u, 10), 10 / e["total"], rel_tol=1e-12)


def test_unused_components_cost_nothing(model):
    e = model.energy(Usage(seconds=1.0, gpu_busy_s=1.0))
    for k in ("host_dram", "pcie", "dimm_dram", "ndp_logic", "dimm_link", "dimm_background"):
        assert e[k] == 0.0, k
    assert e["gpu"] == load_hardware("hermes").gpu.board_power_w      # busy all the time
    assert e["host_cpu"] == model.config.host.idle_w                  # the host is always on
    assert model.energy(Usage(seconds=0.0)) == {k: 0.0 for k in (*COMPONENTS, "total")}


def test_link_bytes_cost_exactly_1_17_pj_per_bit(model):
    base = dict(seconds=1e-3, gpu_busy_s=5e-4, dimm_dram_bytes=1e6, ndp_busy_s=1e-3, dimms=8)
    a = model.energy(Usage(**base, link_bytes=1e6))
    b = model.energy(Usage(**base, link_bytes=3e6))
    assert math.isclose(b["total"] - a["total"], 2e6 * 8 * 1.17e-12, rel_tol=1e-9)
    assert all(a[k] == b[k] for k in COMPONENTS if k != "dimm_link")


def test_datacenter_usage_uses_its_own_powers(model):
    dc = model.config.datacenter
    e = model.energy(model.datacenter_usage(seconds=1.0, gpu_busy_s=2.0))
    assert math.isclose(e["gpu"], 2.0 * dc.board_power_w + (dc.count - 2.0) * dc.idle_w)
    assert e["host_cpu"] == dc.host_idle_w
    assert e["dimm_background"] == e["ndp_logic"] == 0.0


def test_reference_gpu_is_a_catalogue_gpu_for_the_roofline():
    g = reference_gpu()
    assert isinstance(g, Gpu) and g.name.startswith("A100") and g.memory_bandwidth_gbs == 2039.0
    t = GpuModel(g).linear(1, 8192, 8192)                   # decode GEMV: the A100's measured fit
    assert g.measured == "a100-80gb" and t.bound == "measured"
    assert GpuModel(dataclasses.replace(g, measured="")).linear(1, 8192, 8192).bound == "memory"
    assert t.seconds < GpuModel(load_hardware("hermes").gpu).linear(1, 8192, 8192).seconds


def test_prices_itemise_and_total():
    p = load_energy().prices
    cat = PriceCatalog()
    host = p.gpu_usd + p.host_cpu_usd + p.host_board_usd + p.host_memory_usd + p.host_other_usd
    ndp_dimm = p.dimm_usd + p.ndp_premium_usd
    for system in SYSTEMS:
        price = cat.system_price(system)
        assert price["total"] == sum(v for k, v in price.items() if k != "total") > 0
    for system in ("accelerate", "flexgen", "dejavu", "powerinfer"):
        price = cat.system_price(system)
        assert price["total"] == host and "ndp_dimms" not in price
    for system in ("ndp_dense", "hermes"):
        assert cat.system_price(system, dimms=8)["ndp_dimms"] == 8 * ndp_dimm
        assert cat.system_price(system, dimms=16)["total"] == host + 16 * ndp_dimm
    assert cat.system_price("datacenter") == {
        "gpus": 5 * p.datacenter_gpu_usd, "server": p.datacenter_server_usd,
        "total": 5 * p.datacenter_gpu_usd + p.datacenter_server_usd}
    assert p.gpu_usd == 1599.0                              # RTX 4090 MSRP
    assert set(cat.all_prices()) == set(SYSTEMS)
    with pytest.raises(ValueError, match="unknown system 'tpu'.*hermes"):
        cat.system_price("tpu")
    with pytest.raises(ValueError, match="dimms must be an int >= 1"):
        cat.system_price("hermes", dimms=0)


def _write(tmp_path, text):
    p = tmp_path / "e.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("edit, message", [
    (lambda t: re.sub(r"\nmac_pj = .*\n", "\n", t), r"missing key ndp.mac_pj"),
    (lambda t: t.replace("[pcie]\n", "[pcie]\nwatts = 3.0\n"), r"unknown key pcie.watts"),
    (lambda t: t.replace("dimm_background_w = { value = 2.2,", "dimm_background_w = { value = -2.2,"),
     r"dram.dimm_background_w must be positive"),
    (lambda t: t.replace("count = { value = 5,", 'count = { value = "5",'),
     r"datacenter.count must be an int"),
    (lambda t: t.replace("count = { value = 5,", "count = { value = 5.0,"), r"count must be an int"),
    (lambda t: t.replace("hardware = \"hermes\"", "hardware = 1"), r"gpu.hardware must be a str"),
    (lambda t: t.replace("pj_per_bit = { value = 1.17,", "pj_per_bit = { value = 1.17e12,"),
     r"\[link\]: pj_per_bit must be at most"),
    (lambda t: t.replace("memory_efficiency = { value = 0.814,", "memory_efficiency = { value = 81.4,"),
     r"in \(0, 1\]"),
    (lambda t: t.replace("busy_w = { value = 150.0,", "busy_w = { value = 5.0,"),
     r"\[host\]: idle_w < busy_w"),
    (lambda t: t.replace("[link]", "[links]"), "missing key link; unknown key links"),
    (lambda t: t + "\n[extra]\nx = 1\n", "unknown key extra"),
    (lambda t: t.replace("gpu_usd = { value = 1599.0,", "gpu_usd = { value = -inf,"),
     "prices.gpu_usd is -inf: numbers must be finite"),
    (lambda t: re.sub(r'(mac_pj = \{ value = 0.7), source = "[^"]*"', r"\1", t),
     "ndp.mac_pj has no source"),
])
def test_bad_energy_files_are_refused_naming_the_key(tmp_path, edit, message):
    text = ENERGY_TOML.read_text()
    assert edit(text) != text
    with pytest.raises(CatalogError, match=message) as e:
        load_energy(_write(tmp_path, edit(text)))
    assert "e.toml" in str(e.value)                          # names the file


def test_unknown_name_broken_toml_and_gpu_idle_above_board_power(tmp_path):
    with pytest.raises(CatalogError, match="unknown energy 'nope'.*hermes_energy"):
        load_energy("nope")
    with pytest.raises(CatalogError, match="not valid TOML"):
        load_energy(_write(tmp_path, "x = = 1\n"))
    text = ENERGY_TOML.read_text().replace("idle_w = { value = 60.0,", "idle_w = { value = 600.0,", 1)
    with pytest.raises(CatalogError, match=r"\[gpu\]: idle_w \(600.0\) must be below the board"):
        EnergyModel(load_energy(_write(tmp_path, text)), load_hardware("hermes").gpu)


@pytest.mark.parametrize("kwargs, message", [
    (dict(seconds=-1.0), "Usage.seconds must be a finite number >= 0"),
    (dict(seconds=1.0, pcie_bytes=float("nan")), "Usage.pcie_bytes must be a finite"),
    (dict(seconds=1.0, link_bytes=float("inf"), dimms=1), "Usage.link_bytes must be a finite"),
    (dict(seconds=1.0, ndp_macs="many", dimms=1), "Usage.ndp_macs must be a finite"),
    (dict(seconds=1.0, host_dram_bytes=True), "Usage.host_dram_bytes must be a finite"),
    (dict(seconds=1.0, gpus=0), "Usage.gpus must be an int >= 1"),
    (dict(seconds=1.0, dimms=2.0), "Usage.dimms must be an int >= 0"),
    (dict(seconds=1.0, gpu_board_w=-5.0), "Usage.gpu_board_w must be a finite"),
    (dict(seconds=1.0, gpu_busy_s=1.5), r"Usage.gpu_busy_s \(1.5\) exceeds gpus x seconds"),
    (dict(seconds=1.0, host_cpu_busy_s=2.0), r"Usage.host_cpu_busy_s \(2.0\) exceeds seconds"),
    (dict(seconds=1.0, ndp_busy_s=3.0, dimms=2),
     r"Usage.ndp_busy_s \(3.0\) exceeds dimms x seconds"),
    (dict(seconds=1.0, link_bytes=64.0), "Usage.link_bytes given with dimms = 0"),
])
def test_bad_usage_is_refused_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Usage(**kwargs)


def test_tokens_per_joule_needs_tokens_and_energy(model):
    with pytest.raises(ValueError, match="tokens must be"):
        model.tokens_per_joule(Usage(seconds=1.0), 0)
    with pytest.raises(ValueError, match="no energy"):
        model.tokens_per_joule(Usage(seconds=0.0), 1)
    with pytest.raises(ValueError, match="usage must be a Usage"):
        model.energy({"seconds": 1.0})
