"""One MoE expert on a DIMM (``sw/kernels/expert.py``): bit-exact chain, error bound, cost model.

The chain (up and gate GEMVs, SiLU, multiply converting to FP16/BF16, down
GEMV) runs through the driver on the ``model`` backend and on the Verilated
core (the small configuration of ``tests/sw/driver/test_driver.py``, whose build is
shared), and must equal :func:`golden_expert` bit for bit - odd sizes, one
token, a full pass, several passes, zeros, FP16 overflow to Inf, NaN and -Inf
inputs - and stay within :func:`error_bound` of the float64 reference. The cost
model is measured on the timing-only model backend, with and without
background host reads.
"""

import math
import warnings

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.model.perf import POLICY_NAMES
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.errors import FreedBufferError
from ndpdimm.sw.kernels.expert import (
    ExpertCost,
    ExpertWeights,
    error_bound,
    free_expert,
    golden_expert,
    ndp_expert,
    ndp_expert_cost,
    store_expert,
    torch_expert,
)

#: The small core of tests/sw/driver/test_driver.py and tests/sw/scenarios/hermes/test_decode.py (one shared RTL build).
RTL_CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
#: The SPEC's GEMV array and activation lanes (model backend only).
BIG_CFG = CoreConfig(n_units=256, act_lanes=256)
H, F = 48, 40                                           # odd sizes: not multiples of units / lanes


def _weights(dtype=torch.float16, seed=0, h=H, f=F):
    g = torch.Generator().manual_seed(seed)
    return ((torch.randn(f, h, generator=g) / math.sqrt(h)).to(dtype),
            (torch.randn(f, h, generator=g) / math.sqrt(h)).to(dtype),
            (torch.randn(h, f, generator=g) / math.sqrt(f)).to(dtype))


def _tokens(t, dtype=torch.float16, seed=1, h=H):
    return torch.randn(t, h, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _bits(y):
    return golden.f32_bits(y)


def assert_bit_exact(got, want, what):
    assert got.dtype == torch.float32 and got.shape == want.shape, (what, got.shape, want.shape)
    diff = torch.nonzero(_bits(got) != _bits(want))
    if diff.numel():
        i = tuple(diff[0].tolist())
        raise AssertionError(f"{what}: {len(diff)} outputs differ from the golden chain, first at "
                             f"{i}: {got[i].item()!r} vs {want[i].item()!r}")


@pytest.fixture(scope="module")
def rtl_backend():
    from ndpdimm.cosim.rtl.harness import RtlBackend
    b = RtlBackend(RTL_CFG)
    yield b
    b.close()


@pytest.fixture(params=["model", "rtl"])
def dimm(request):
    """A fresh driver on the small configuration: its own model, or the module's RTL core."""
    if request.param == "model":
        return Dimm("model", RTL_CFG)
    return Dimm(request.getfixturevalue("rtl_backend"))


@pytest.fixture(scope="module")
def timing_dimm():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dimm("model", BIG_CFG, functional=False)


# ---- the chain, bit for bit ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
def test_bit_exact_one_token_a_pass_and_several_passes(dimm, dtype):
    w = _weights(dtype)
    e = store_expert(dimm, *w)
    assert (e.hidden, e.ffn, e.dtype, e.dimm) == (H, F, dtype, dimm)
    mb = dimm.config.max_batch
    cycles = {}
    for t in (1, mb, mb + 3):
        x = _tokens(t, dtype, seed=t)
        y, cycles[t] = ndp_expert(e, x)
        assert_bit_exact(y, golden_expert(*w, x), f"{dtype} t={t} on {dimm.name}")
        ref = torch_expert(*w, x)
        assert ref.dtype == torch.float64 and ref.shape == (t, H)
        assert ((y.double() - ref).abs() <= error_bound(*w, x)).all()
    assert 0 < cycles[1] < cycles[mb] < cycles[mb + 3]
    free_expert(e)


def test_corner_values(dimm):
    """Zeros, FP16 overflow in the multiply (Inf into the down GEMV), a NaN and a -Inf token
    element, next to an ordinary token; two passes on the small core."""
    g = torch.Generator().manual_seed(5)
    w = tuple(torch.where(torch.rand(*s, generator=g) < 0.5, -1.0, 1.0).half()
              for s in ((F, H), (F, H), (H, F)))
    x = torch.zeros(5, H)
    x[1] = 200.0                                        # |g|, |up| ~ 1e3: silu(g) * up > 65504
    x[2] = 0.25
    x[2, 7] = float("nan")
    x[3] = 0.25
    x[3, 0] = float("-inf")
    x[4] = torch.randn(H, generator=g) * 0.1
    x = x.half()
    want = golden_expert(*w, x)
    assert (_bits(want[0]) == 0).all()                  # +0 all the way
    assert not torch.isfinite(want[1]).all() and torch.isnan(want[2]).all()
    assert torch.isfinite(want[4]).all()
    e = store_expert(dimm, *w)
    y, cycles = ndp_expert(e, x)
    assert_bit_exact(y, want, f"corner values on {dimm.name}")
    assert cycles > 0
    free_expert(e)


def test_under_background_host_reads_still_bit_exact(dimm):
    w = _weights(seed=3)
    x = _tokens(dimm.config.max_batch, seed=4)
    e = store_expert(dimm, *w)
    quiet_y, quiet = ndp_expert(e, x)
    with dimm.host_reads(e.down, 30) as hr:             # the host reads another matrix meanwhile
        y, busy = ndp_expert(e, x)
    assert_bit_exact(y, golden_expert(*w, x), f"under host reads on {dimm.name}")
    assert torch.equal(_bits(y), _bits(quiet_y))
    assert hr.issued > busy // 200 > 0
    free_expert(e)


def test_bound_is_tight_enough_to_catch_an_error():
    """The float64 check is not vacuous: ``y`` off by 2**-7 relative breaks it, while the chain
    stays within 0.5 of it (measured 0.26 .. 0.41 of the bound on these shapes)."""
    w = _weights(seed=7, h=96, f=64)
    x = _tokens(6, seed=8, h=96)
    y, ref, bound = golden_expert(*w, x).double(), torch_expert(*w, x), error_bound(*w, x)
    assert ((y - ref).abs() / bound).max() < 0.5
    assert not ((y * (1 + 2 ** -7) - ref).abs() <= bound).all()


def test_the_bit_comparison_can_fail():
    """A chain with gate and up swapped (``silu(up) * gate``) is caught by the bit comparison."""
    d = Dimm("model", RTL_CFG)
    wg, wu, wd = _weights(seed=11)
    x = _tokens(3, seed=12)
    e = store_expert(d, wg, wu, wd)
    y, _ = ndp_expert(e, x)
    free_expert(e)
    with pytest.raises(AssertionError, match="differ from the golden chain"):
        assert_bit_exact(y, golden_expert(wu, wg, wd, x), "swapped")


def test_zero_tokens_and_freeing():
    d = Dimm("model", RTL_CFG)
    free0 = d.dram.free_bytes
    w = _weights()
    e = store_expert(d, *w)
    y, cycles = ndp_expert(e, torch.empty(0, H, dtype=torch.float16))
    assert y.shape == (0, H) and y.dtype == torch.float32 and cycles == 0
    assert golden_expert(*w, torch.empty(0, H, dtype=torch.float16)).shape == (0, H)
    free_expert(e)
    assert d.dram.free_bytes == free0
    with pytest.raises(FreedBufferError):
        free_expert(e)
    with pytest.raises(FreedBufferError):
        ndp_expert(e, _tokens(1))


def test_bad_arguments_store_nothing():
    d = Dimm("model", RTL_CFG)
    free0 = d.dram.free_bytes
    wg, wu, wd = _weights()
    bad = [((wg, wu, wd.T.contiguous()), "w_down"), ((wg, wu[:-1], wd), "w_up"),
           ((wg, wu, wd[:, :-1]), "w_down"), ((wg.float(), wu, wd), "dtype"),
           ((wg.to(torch.int8), wu.to(torch.int8), wd.to(torch.int8)), "INT8"),
           ((wg, wu.bfloat16(), wd), "one dtype"), ((wg[0], wu, wd), "2-D"),
           ((wg, wu, "down"), "torch.Tensor")]
    for args, message in bad:
        with pytest.raises(ValueError, match=message):
            store_expert(d, *args)
        with pytest.raises(ValueError, match=message):
            golden_expert(*args, _tokens(1))
        with pytest.raises(ValueError, match=message):
            torch_expert(*args, _tokens(1))
    with pytest.raises(ValueError, match="Dimm"):
        store_expert("model", wg, wu, wd)
    assert d.dram.free_bytes == free0
    e = store_expert(d, wg, wu, wd)
    for x, message in [(_tokens(2).float(), "dtype"), (_tokens(2).bfloat16(), "dtype"),
                       (_tokens(2)[0], r"\[t, 48\]"), (_tokens(2, h=47), r"\[t, 48\]"),
                       (np.zeros((2, H)), "torch.Tensor")]:
        with pytest.raises(ValueError, match=message):
            ndp_expert(e, x)
        with pytest.raises(ValueError, match=message):
            golden_expert(wg, wu, wd, x)
    with pytest.raises(ValueError, match="ExpertWeights"):
        ndp_expert((e.gate, e.up, e.down), _tokens(1))
    free_expert(e)
    assert isinstance(e, ExpertWeights)


# ---- cost --------------------------------------------------------------------------------------

def test_cost_samples_interpolation_and_passes(timing_dimm):
    c = ndp_expert_cost(1024, 512, timing_dimm, batches=(16, 1, 4))
    assert (c.hidden, c.ffn, c.max_batch, c.backend, c.host_spacing) == (1024, 512, 16, "model", None)
    assert [b for b, _ in c.samples] == [1, 4, 16] and c.host_reads == ()
    assert all(isinstance(n, int) and n > 0 for _, n in c.samples)
    for b, n in c.samples:
        assert c.cycles(b) == n
    (b0, c0), (b1, c1) = c.samples[:2]
    assert c.cycles(2) == pytest.approx(c0 + (c1 - c0) * (2 - b0) / (b1 - b0))
    assert c.cycles(0) == 0 == c.seconds(0)
    costs = [c.cycles(t) for t in range(0, 3 * 16 + 1)]
    assert all(a < b for a, b in zip(costs, costs[1:])), costs
    assert c.cycles(48) == 3 * c.cycles(16) and c.cycles(35) == 2 * c.cycles(16) + c.cycles(3)
    assert c.seconds(20) == c.cycles(20) / NDP_CLOCK_HZ
    assert c.as_dict()["samples"][0] == [1, c.samples[0][1]]
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="tokens"):
            c.cycles(bad)
    assert ExpertCost(8, 8, 16, "model", ((4, 100),)).cycles(20) == 200.0     # one sample: flat


@pytest.mark.parametrize("backend", ["model", "rtl"])
def test_cost_of_several_passes_matches_the_chain(backend, rtl_backend):
    """Several passes cost about passes x one pass: the cost model against the expert actually
    run for ``2 max_batch + 3`` tokens (small core; RTL cycles of the Verilated core)."""
    dimm = Dimm("model", RTL_CFG) if backend == "model" else Dimm(rtl_backend)
    h, f = 128, 96
    c = ndp_expert_cost(h, f, dimm, batches=(1, 2, 4), seed=3)
    w = _weights(seed=9, h=h, f=f)
    e = store_expert(dimm, *w)
    t = 2 * RTL_CFG.max_batch + 3
    y, cycles = ndp_expert(e, _tokens(t, seed=10, h=h))
    free_expert(e)
    assert c.backend == backend
    assert cycles == pytest.approx(c.cycles(t), rel=0.03)     # measured 0.1 .. 0.6 % off


@pytest.mark.parametrize("kw, message", [
    ({"batches": (1, 17)}, "batches"), ({"batches": ()}, "batches"),
    ({"batches": (4, 4)}, "batches"), ({"batches": (0, 4)}, "batches"),
    ({"batches": (1.0, 4)}, "batches"), ({"batches": 4}, "batches"),
    ({"host_spacing": 0}, "host_spacing"), ({"host_spacing": 2.5}, "host_spacing"),
    ({"hidden": 0}, "hidden"), ({"ffn": -4}, "ffn"), ({"dtype": torch.int8}, "dtype"),
    ({"dtype": torch.float32}, "dtype"), ({"dimm": "model"}, "Dimm"), ({"seed": None}, "seed"),
])
def test_cost_bad_arguments_change_nothing(timing_dimm, kw, message):
    args = {"hidden": 64, "ffn": 32, "dimm": timing_dimm, **kw}
    free0, reads0 = timing_dimm.dram.free_bytes, timing_dimm.host_reads_issued
    with pytest.raises(ValueError, match=message):
        ndp_expert_cost(**args)
    assert timing_dimm.dram.free_bytes == free0 and timing_dimm.host_reads_issued == reads0


def test_host_reads_make_the_expert_slower(timing_dimm):
    """Background host reads slow a latency-bound (batch 1) pass on the model backend
    (its engine waits for weights; each read costs the stream a row re-open), and were issued
    about once per spacing; a compute-bound batch-16 pass hardly notices."""
    h, f = 1024, 512
    quiet = ndp_expert_cost(h, f, timing_dimm, batches=(1, 16))
    reads0 = timing_dimm.host_reads_issued
    busy = ndp_expert_cost(h, f, timing_dimm, batches=(1, 16), host_spacing=100)
    assert busy.host_spacing == 100 and [b for b, _ in busy.host_reads] == [1, 16]
    assert timing_dimm.host_reads_issued - reads0 == sum(n for _, n in busy.host_reads)
    # one read per 100 cycles, or back to back when a read under load takes longer: the
    # calibrated latency of a host read beside a DRAM-bound stream (430 cycles on this core)
    perf = timing_dimm.backend.perf
    name = POLICY_NAMES[timing_dimm.backend.csr_read("POLICY") & 3]
    period = max(100, getattr(perf.params, f"host_busy_{name}"))
    for (b, cycles), (_, reads) in zip(busy.samples, busy.host_reads):
        assert cycles / (2 * period) < reads <= cycles / 100 + 10
    assert quiet.host_read_gbs is None
    assert 64 / (2 * period) < busy.host_read_gbs <= 0.64 + 0.01   # 64 B / 100 cycles at most
    # 7.6 % with this core's own calibration (host contention measured on its RTL: one read per
    # ~430 cycles, each costing the batch-1 stream ~25 cycles); 1.3x was the borrowed 16-unit fit
    assert busy.cycles(1) > 1.05 * quiet.cycles(1)
    assert quiet.cycles(16) <= busy.cycles(16) < 1.1 * quiet.cycles(16)
    assert busy.cycles(5) > quiet.cycles(5)
    sparse = ndp_expert_cost(h, f, timing_dimm, batches=(1,), host_spacing=2000)
    assert quiet.cycles(1) < sparse.cycles(1) < busy.cycles(1)
