"""Hermes decode path (``sw/scenarios/hermes/decode.py``): a reduced ReLU model's decode step on GPU + DIMMs.

Every step checks each NDP kernel bit for bit against the golden model and the
output against the float64 reference; these tests assert those checks pass
with the oracle prediction (on the ``model`` backend and, for one small step,
on the Verilated core), that the placement does not change the result, that a
prediction missing firing neurons is caught, and that bad input is refused
before anything runs.
"""

import json

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.scenarios.hermes.checks import tolerance
from ndpdimm.sw.scenarios.hermes.decode import HermesNdp, Placement, make_placement, run_hermes_decode
from ndpdimm.sw.scenarios.hermes.reduced_model import (
    KvCache,
    ReducedModel,
    neuron_frequency,
    oracle_prediction,
    prefill,
    reference_decode_step,
)

#: The small core of the driver tests (tests/sw/driver/test_driver.py): its Verilated build is shared.
RTL_CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


@pytest.fixture(scope="module")
def model():
    return ReducedModel()


@pytest.fixture(scope="module")
def frequency(model):
    return neuron_frequency(model)


def _batch(model, B, T=6, seed=5):
    g = torch.Generator().manual_seed(seed)
    cache = prefill(model, torch.randn(B, T, model.hidden, generator=g))
    return cache, torch.randn(B, model.hidden, generator=g)


def _step(model, dimms, placement, cache, x, predicted, **kw):
    with HermesNdp(model, dimms, placement, **kw) as ndp:
        return ndp.decode_step(cache, x, predicted)


def test_model_is_sparse_with_hot_neurons(model, frequency):
    per_token = frequency.mean(dim=1)
    assert ((per_token > 0.10) & (per_token < 0.30)).all(), per_token
    assert frequency[model.hot].mean() > 0.7 > 0.2 > frequency[~model.hot].mean()
    cache, x = _batch(model, 2)
    r32 = reference_decode_step(model, cache, x)
    r64 = reference_decode_step(model, cache, x, torch.float64)
    assert r32.cache.length == cache.length + 1
    assert torch.allclose(r32.out.double(), r64.out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", ["model", "rtl"])
def test_oracle_prediction_matches_reference(model, frequency, backend):
    if backend == "model":
        B, dimms = 4, [Dimm("model"), Dimm("model")]
        cache, x = _batch(model, B)
    else:
        # one Verilated core serves both logical DIMMs in turn (see the module docstring)
        from ndpdimm.cosim.rtl.harness import RtlBackend
        rtl = RtlBackend(RTL_CFG)
        dimm = Dimm(rtl)
        B, dimms = 2, [dimm, dimm]
        cache, x = _batch(model, B, T=3)
    try:
        res = _step(model, dimms, make_placement(model, 2, frequency=frequency), cache, x,
                    oracle_prediction(model, cache, x))
    finally:
        for d in set(dimms):
            d.close()
        if backend == "rtl":
            rtl.close()
    bad = [k for k in res.kernels if not k.bit_exact]
    assert not bad, bad[:3]
    assert res.relative_error <= res.tolerance == tolerance(model.layers), res.relative_error
    assert res.ok and res.missed == [0, 0] and all(n > 0 for n in res.cold_computed)
    assert {k.backend for k in res.kernels} == {backend}
    assert {k.dimm for k in res.kernels} == {0, 1}
    assert all(k.elapsed_cycles > 0 for k in res.kernels)
    # per layer: QKV on each DIMM, 4 kernels per (head, sequence), 3 per DIMM with cold neurons
    assert len(res.kernels) == model.layers * (2 + 4 * model.heads * B + 3 * 2)
    assert 0 < res.ndp_cycles < sum(k.elapsed_cycles for k in res.kernels)
    assert torch.equal(res.cache.keys[0][:, :-1], cache.keys[0])


def test_placements_give_the_same_output(model, frequency):
    cache, x = _batch(model, 3)
    oracle = oracle_prediction(model, cache, x)
    outs = []
    for n in (1, 2, 3):               # same hot set and GPU QKV rows: only the sums' order moves
        dimms = [Dimm("model") for _ in range(n)]
        res = _step(model, dimms, make_placement(model, n, frequency=frequency), cache, x, oracle)
        assert res.ok
        outs.append(res)
    update = (outs[0].reference.out.float() - x).norm()
    for res in outs[1:]:
        assert (res.out - outs[0].out).norm() <= 1e-5 * update
    # a random placement of everything (hot set, QKV rows) over 3 DIMMs: within the bound
    rng = np.random.default_rng(3)
    pl = Placement(rng.integers(-1, 3, (model.layers, model.ffn)),
                   rng.integers(-1, 3, (model.layers, 3 * model.hidden)))
    dimm = Dimm("model")
    res = _step(model, [dimm] * 3, pl, cache, x, oracle)
    assert res.ok
    assert (res.out - outs[0].out).norm() <= 2 * res.tolerance * update


def test_wrong_prediction_is_caught(model, frequency):
    cache, x = _batch(model, 2)
    pl = make_placement(model, 2, frequency=frequency)
    oracle = oracle_prediction(model, cache, x)
    dimm = Dimm("model")
    good = _step(model, [dimm, dimm], pl, cache, x, oracle)
    # the firing cold neurons of layer 1 ranked by their contribution ||relu(z) w_fc2[:, j]||
    lw = model.weights[1]
    z = reference_decode_step(model, cache, x, torch.float64).z[1]
    size = torch.relu(z).norm(dim=0) * lw.w_fc2.double().norm(dim=0)
    cold_firing = torch.from_numpy(pl.neurons[1] >= 0) & oracle[1]
    ranked = torch.argsort(torch.where(cold_firing, size, torch.zeros_like(size)), descending=True)

    one = oracle.clone()
    one[1, ranked[0]] = False
    res = _step(model, [dimm, dimm], pl, cache, x, one)
    assert res.all_bit_exact and res.missed == [0, 1]
    assert not torch.equal(res.out, good.out)
    assert res.relative_error > 10 * good.relative_error

    many = oracle.clone()
    many[1, ranked[:8]] = False
    res = _step(model, [dimm, dimm], pl, cache, x, many)
    assert res.missed == [0, 8] and res.all_bit_exact
    assert not res.within_tolerance and not res.ok, res.relative_error

    # false positives (every cold neuron predicted): computed, ReLU gives 0, still correct
    res = _step(model, [dimm, dimm], pl, cache, x, torch.ones_like(oracle))
    assert res.ok and res.missed == [0, 0] and min(res.extra) > 0
    assert res.cold_computed == [int((pl.neurons[i] >= 0).sum()) for i in range(model.layers)]


def test_int8_cold_neurons_error_measured(model, frequency):
    cache, x = _batch(model, 2)
    pl = make_placement(model, 2, frequency=frequency)
    oracle = oracle_prediction(model, cache, x)
    dimm = Dimm("model")
    fp16 = _step(model, [dimm, dimm], pl, cache, x, oracle)
    int8 = _step(model, [dimm, dimm], pl, cache, x, oracle, cold_dtype="int8")
    assert int8.all_bit_exact
    assert {k.note for k in int8.kernels if k.phase == "mlp"} == {"int8"}
    assert fp16.relative_error < int8.relative_error < 0.03, int8.relative_error
    assert len(int8.kernels) == len(fp16.kernels) - 2 * 2    # INT8: ReLU on the GPU side


def test_records_serialise(model, frequency):
    cache, x = _batch(model, 1)
    dimm = Dimm("model")
    res = _step(model, [dimm], make_placement(model, 1, frequency=frequency), cache, x,
                oracle_prediction(model, cache, x))
    doc = json.loads(json.dumps(res.as_dict()))
    assert doc["all_bit_exact"] and doc["backend"] == "model" and doc["batch"] == 1
    assert {k["op"] for k in doc["kernels"]} == {"GEMV dense", "GEMV scores", "ACT SCALE", "SOFTMAX",
                                                "GEMV V^T p", "GEMV row_gather", "ACT RELU",
                                                "GEMV col_gather"}
    assert "NDP critical path" in res.table() and "bit-exact" in res.kernel_table()


def test_built_in_configuration_end_to_end(tmp_path):
    out = tmp_path / "hermes_decode.json"
    lines = []
    doc = run_hermes_decode("model", batch=1, n_dimms=2, prompt_tokens=2, json_out=out,
                            log=lines.append)
    assert doc["all_bit_exact"] and doc["within_tolerance"] and doc["n_dimms"] == 2
    assert json.loads(out.read_text())["ndp_cycles"] == doc["ndp_cycles"] > 0
    assert any("NDP critical path" in line for line in lines)


def test_bad_input_computes_nothing(model, frequency):
    dimm = Dimm("model")
    pl = make_placement(model, 2, frequency=frequency)
    cache, x = _batch(model, 2)
    oracle = oracle_prediction(model, cache, x)
    free, cycle = dimm.dram.free_bytes, dimm.backend.cycle

    def refused(match, fn):
        with pytest.raises(ValueError, match=match):
            fn()
        assert dimm.dram.free_bytes == free and dimm.backend.cycle == cycle

    refused(r"neurons must have shape \(2, 512\)",
            lambda: HermesNdp(model, [dimm, dimm], Placement(pl.neurons[:, :100], pl.qkv)))
    refused("qkv must have shape", lambda: HermesNdp(model, [dimm, dimm],
                                                      Placement(pl.neurons, pl.qkv[:1])))
    refused("DIMM index 1", lambda: HermesNdp(model, [dimm], pl))
    refused("DIMM index -2", lambda: HermesNdp(model, [dimm, dimm],
                                               Placement(pl.neurons - 1, pl.qkv)))
    refused("integer array", lambda: Placement(pl.neurons.astype(float), pl.qkv))
    refused("non-empty list of Dimm", lambda: HermesNdp(model, [], pl))
    refused("cold_dtype", lambda: HermesNdp(model, [dimm, dimm], pl, cold_dtype="bf16"))
    with HermesNdp(model, [dimm, dimm], pl) as ndp:
        free, cycle = dimm.dram.free_bytes, dimm.backend.cycle
        refused("float32", lambda: ndp.decode_step(cache, x.half(), oracle))
        refused(r"\[B, 128\]", lambda: ndp.decode_step(cache, x[:, :64], oracle))
        refused("B in 1..4", lambda: ndp.decode_step(KvCache.empty(model, 5),
                                                     torch.zeros(5, 128), oracle))
        refused("non-finite", lambda: ndp.decode_step(cache, x * float("nan"), oracle))
        refused(r"float32 \[1, T, 128\]", lambda: ndp.decode_step(cache, x[:1], oracle))
        refused("predicted must be a bool", lambda: ndp.decode_step(cache, x, oracle[0]))
        refused("predicted must be a bool", lambda: ndp.decode_step(cache, x, oracle.int()))
    assert dimm.dram.free_bytes == dimm.dram.hi - dimm.dram.lo


@pytest.mark.parametrize("kwargs, match", [
    ({"hidden": 130}, "multiple of heads"), ({"layers": 0}, "layers must be a positive"),
    ({"ffn": 2.5}, "ffn must be a positive"), ({"seed": -1}, "seed"),
    ({"hot_fraction": 1.5}, "hot_fraction"), ({"cold_bias": float("inf")}, "cold_bias")])
def test_bad_model_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ReducedModel(**kwargs)


def test_placement_helper(model, frequency):
    pl = make_placement(model, 3, hot_fraction=0.2, frequency=frequency)
    hot = pl.neurons < 0
    assert (hot.sum(1) == round(0.2 * model.ffn)).all()
    # the hot set holds the most frequent neurons; DIMM loads are balanced
    for layer in range(model.layers):
        f = frequency[layer].numpy()
        assert f[hot[layer]].min() >= f[~hot[layer]].max()
        load = [f[pl.neurons[layer] == d].sum() for d in range(3)]
        assert max(load) - min(load) < 0.1 * sum(load) + 1
    assert set(np.unique(pl.qkv)) == {-1, 0, 1, 2}
    with pytest.raises(ValueError, match="hot_fraction"):
        make_placement(model, 2, hot_fraction=-0.1, frequency=frequency)
    with pytest.raises(ValueError, match="n_dimms"):
        make_placement(model, 0, frequency=frequency)
