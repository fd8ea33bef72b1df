"""The offloading baselines' step arithmetic (``offload_run``, ``prefill_seconds`` and
``accelerate_layers`` of ``sw/scenarios/hermes/simulate.py``): Accelerate-like (no overlap: a
layer takes transfer + compute) against FlexGen-like (overlap: the slower of the two)."""

import warnings

import pytest

from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.costs import measure_costs
from ndpdimm.sw.scenarios.hermes.simulate import (
    RunShape,
    accelerate_layers,
    offload_run,
    prefill_seconds,
)
from ndpdimm.sw.scenarios.hermes.workload import make_workload

CFG = HermesConfig(model="llama2-13b", tokens=3, prompt=8, profile_tokens=4, sample_layers=1,
                   recall_floor=0.0)


@pytest.fixture(scope="module")
def setup():
    m = load_model(CFG.model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the 256-unit core borrows a calibration
        costs = measure_costs(CFG, m, load_hardware(CFG.hardware))
    return costs, RunShape(m, CFG.batch), make_workload(CFG, m)


def test_without_overlap_a_layer_takes_transfer_plus_compute(setup):
    costs, sh, wl = setup
    none = [0.0] * sh.L                                      # every layer offloaded
    seq = offload_run(CFG, costs, sh, wl, none, overlap=False)
    ovl = offload_run(CFG, costs, sh, wl, none, overlap=True)
    per_layer = costs.pcie(sh.layer_bytes)                  # the whole layer crosses PCIe
    transfers = CFG.tokens * sh.L * per_layer
    assert seq.pcie_bytes == pytest.approx(CFG.tokens * sh.L * sh.layer_bytes)
    # summed: every transfer and every kernel (LM head included) on the critical path
    assert seq.breakdown["pcie"] == pytest.approx(transfers)
    assert seq.breakdown["gpu"] == pytest.approx(seq.gpu_busy)
    assert seq.seconds == pytest.approx(seq.gpu_busy + transfers)
    # the same work overlapped: as long as the slower side, shorter than the sum
    assert ovl.gpu_busy == pytest.approx(seq.gpu_busy) and ovl.pcie_bytes == seq.pcie_bytes
    assert max(ovl.gpu_busy, transfers) <= ovl.seconds < seq.seconds
    # a scalar share is the same as that share for every layer
    half = offload_run(CFG, costs, sh, wl, 0.5, overlap=False)
    assert half.seconds == offload_run(CFG, costs, sh, wl, [0.5] * sh.L, overlap=False).seconds


def test_only_the_offloaded_layers_cross_pcie(setup):
    costs, sh, wl = setup
    k = 7
    tl = offload_run(CFG, costs, sh, wl, [1.0] * k + [0.0] * (sh.L - k), overlap=False)
    assert tl.pcie_bytes == pytest.approx(CFG.tokens * (sh.L - k) * sh.layer_bytes)
    assert tl.breakdown["pcie"] == pytest.approx(CFG.tokens * (sh.L - k) *
                                                 costs.pcie(sh.layer_bytes))
    every = offload_run(CFG, costs, sh, wl, [1.0] * sh.L, overlap=False)
    assert "pcie" not in every.breakdown and every.seconds == pytest.approx(every.gpu_busy)


def test_prefill_without_overlap_adds_the_transfers(setup):
    costs, sh, _ = setup
    resident = [sh.layer_bytes] * sh.L
    assert prefill_seconds(costs, sh, 16, resident, False, overlap=False) == \
        pytest.approx(prefill_seconds(costs, sh, 16, resident, False))
    nothing = [0.0] * sh.L
    seq = prefill_seconds(costs, sh, 16, nothing, False, overlap=False)
    assert seq > prefill_seconds(costs, sh, 16, nothing, False)
    assert seq == pytest.approx(prefill_seconds(costs, sh, 16, resident, False) +
                                sh.L * costs.pcie(sh.layer_bytes))


def test_accelerate_keeps_whole_layers_only():
    assert accelerate_layers(2.5e9, 1e9, 40) == 2             # the remainder stays unused
    assert accelerate_layers(100e9, 1e9, 40) == 40
    assert accelerate_layers(0.0, 1e9, 40) == 0
    assert accelerate_layers(-1e9, 1e9, 40) == 0
