"""Activation unit: RTL vs bit-exact golden model, and golden model vs float64 math.

* RTL (Amaranth simulator, 4-8 lanes) against ``cosim.golden_activation`` bit for
  bit: every unary op on a strided sweep of all FP16 patterns plus every special
  (zeros, subnormal boundaries, Inf, NaN, max, the exp/GELU saturation edges);
  ADD/MUL/MERGE/CONVERT on random and special values; softmax pass sequences over
  vectors longer than the lane count with a partial last beat; with and without
  random idle cycles and back-pressure; latency and throughput.
  The full 65536-pattern RTL sweep takes ~10 ms per lane-element in the Python
  simulator (about 11 minutes per op), so it runs only with
  ``NDP_ACT_STRIDE=1`` (``make sim`` runs every 7th pattern); the golden model is
  checked on all patterns always.
* Golden model against float64 math: SiLU / GELU (exact erf GELU) max ULP error on
  all finite FP16 inputs, exp and reciprocal relative error, softmax abs / sum error.
* A corrupted golden model is caught; bad constructor / golden arguments raise.
"""

import math
import os
import random
import re

import numpy as np
import pytest
import torch
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim.streams import get, put
from ndpdimm.cosim.golden import activation as G
from ndpdimm.hw.activation.unit import (
    EXP2_TABLE,
    LATENCY,
    ONE_F32,
    ActFmt,
    ActivationUnit,
    ActOp,
    PiecewiseQuadratic,
    act_b_layout,
    act_cmd_layout,
    act_in_layout,
)

FP16_SPECIALS = [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x8400, 0x3C00, 0xBC00,
                 0x7BFF, 0xFBFF, 0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFFFF, 0x3800, 0xB800,
                 0x4C00, 0xCC00, 0x4800, 0xC800, 0x47FF, 0xC7FF, 0x5640, 0xD640, 0x5A00, 0xDA00,
                 0x2000, 0xA000, 0x4B80, 0xCB80, 0x4D00, 0xCD00, 0x1400, 0x9400, 0x5C00, 0xDC00]
F32_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x3F800000,
                0xBF800000, 0x7F7FFFFF, 0xFF7FFFFF, 0x7F800000, 0xFF800000, 0x7FC00000,
                0xFFC00001, 0x477FEFFF, 0x477FF000, 0x477FE000, 0x33800000, 0x33000000,
                0x33000001, 0x387FC000, 0x38800000, 0x3F808000, 0x3F818000, 0x7F7F8000,
                0x387FE000, 0x00400000, 0x4B000001, 0x4B7FFFFF]


# ------------------------------------------------------------------ harness

class Job:
    """One command and its vector(s), split into beats; ``expected`` out beats from the golden model."""

    def __init__(self, op, a, lanes, b=None, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP16,
                 c=0, k=ONE_F32, counts=None):
        self.op, self.in_fmt, self.out_fmt, self.c, self.k = ActOp(op), in_fmt, out_fmt, c, k
        a = [int(v) for v in a]
        b = [int(v) for v in b] if b is not None else None
        if counts is None:
            counts = [min(lanes, len(a) - i) for i in range(0, max(len(a), 1), lanes)]
        self.beats, pos = [], 0
        for n in counts:
            self.beats.append((a[pos:pos + n], b[pos:pos + n] if b else None))
            pos += n
        assert pos == len(a)
        if self.op in (ActOp.MAX, ActOp.SUMEXP):
            s = G.reduce_beats(self.op, [x for x, _ in self.beats], lanes, in_fmt, out_fmt, c)
            self.expected = [([s] + [0] * (lanes - 1), 1, 1)]
        else:
            self.expected = []
            for i, (x, y) in enumerate(self.beats):
                r = G.elementwise(self.op, x, y, in_fmt, out_fmt, c, k) if x else []
                self.expected.append(([int(v) for v in r] + [0] * (lanes - len(x)), len(x),
                                      int(i == len(self.beats) - 1)))


def run_unit(lanes, jobs, seed=0, idle_prob=0.0, stall_prob=0.0, junk=True):
    """Drive ``jobs`` through an ActivationUnit; return the observed out beats.

    Invalid lanes carry random junk (``junk``) to show they cannot leak.
    """
    dut = ActivationUnit(lanes)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    cl, al, bl = act_cmd_layout(), act_in_layout(lanes), act_b_layout(lanes)
    rng = random.Random(seed)
    got = []
    n_out = sum(len(j.expected) for j in jobs)

    def fill(vals):
        return vals + [rng.getrandbits(32) if junk else 0 for _ in range(lanes - len(vals))]

    async def commands(ctx):
        r = random.Random(seed + 1)
        for j in jobs:
            await put(ctx, dut.cmd, cl.const({"op": j.op, "in_fmt": j.in_fmt, "out_fmt": j.out_fmt,
                                              "c": j.c, "k": j.k}).as_bits(), r, idle_prob)

    async def a_beats(ctx):
        r = random.Random(seed + 2)
        for j in jobs:
            for i, (x, _) in enumerate(j.beats):
                await put(ctx, dut.a, al.const({"data": fill(list(x)), "count": len(x),
                                                "last": i == len(j.beats) - 1}).as_bits(),
                          r, idle_prob)

    async def b_beats(ctx):
        r = random.Random(seed + 3)
        for j in jobs:
            for _, y in j.beats:
                if y is not None:
                    await put(ctx, dut.b, bl.const({"data": fill(list(y))}).as_bits(), r, idle_prob)

    async def results(ctx):
        r = random.Random(seed + 4)
        for _ in range(n_out):
            p = await get(ctx, dut.out, r, stall_prob)
            got.append(([int(p.data[i]) for i in range(lanes)], int(p.count), int(p.last)))

    for tb in (commands, a_beats, b_beats, results):
        sim.add_testbench(tb)
    sim.run()
    return got


def check(jobs, got, label=""):
    """In-order checker: raise AssertionError naming the first differing lane."""
    expected = [(e, j) for j in jobs for e in j.expected]
    assert len(got) == len(expected), f"{label}: {len(got)} beats, expected {len(expected)}"
    for n, (g, (e, job)) in enumerate(zip(got, expected)):
        if g != e:
            lane = next((i for i in range(len(g[0])) if g[0][i] != e[0][i]), None)
            where = (f"lane {lane}: got 0x{g[0][lane]:x}, expected 0x{e[0][lane]:x}"
                     if lane is not None else f"count/last {g[1:]} vs {e[1:]}")
            raise AssertionError(f"{label}: {job.op.name} beat {n}: {where}")


def f32_bits_of(x):
    return int(np.array(x, dtype=np.float32).view(np.uint32))


def fp16_sweep(stride):
    pats = sorted(set(range(0, 65536, stride)) | set(FP16_SPECIALS))
    return pats


UNARY_JOBS = [
    (ActOp.PASS, {}),
    (ActOp.RELU, {}),
    (ActOp.SILU, {}),
    (ActOp.GELU, {}),
    (ActOp.SCALE, {"k": f32_bits_of(0.1)}),
    (ActOp.EXP, {"c": f32_bits_of(2.5), "k": ONE_F32}),
    (ActOp.EXP, {"out_fmt": ActFmt.FP32}),
    (ActOp.RECIP, {"out_fmt": ActFmt.FP32}),
]


# ------------------------------------------------------------------ RTL vs golden

def test_unary_ops_fp16_sweep():
    """Every unary op on a strided sweep of FP16 patterns plus all specials, bit-exact."""
    lanes = 8
    pats = fp16_sweep(173)
    jobs = [Job(op, pats, lanes, **kw) for op, kw in UNARY_JOBS]
    check(jobs, run_unit(lanes, jobs, seed=1), "fp16 sweep")


def test_unary_ops_bf16_and_fp32_inputs():
    lanes = 4
    rng = np.random.default_rng(5)
    bf = list(rng.integers(0, 65536, 24)) + [0x7F80, 0xFF80, 0x7FC1, 0x0001, 0x8080, 0x4300, 0xC300]
    f32 = list(rng.integers(0, 2**32, 16, dtype=np.int64)) + F32_SPECIALS
    jobs = [Job(op, bf, lanes, in_fmt=ActFmt.BF16, out_fmt=ActFmt.BF16)
            for op in (ActOp.SILU, ActOp.GELU, ActOp.RELU)]
    jobs += [Job(ActOp.EXP, f32, lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32),
             Job(ActOp.RECIP, f32, lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32),
             Job(ActOp.SILU, f32, lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP16)]
    check(jobs, run_unit(lanes, jobs, seed=2), "bf16/fp32 inputs")


@pytest.mark.parametrize("idle_prob,stall_prob", [(0.0, 0.0), (0.3, 0.4)])
def test_binary_merge_convert(idle_prob, stall_prob):
    """ADD/MUL (FP16), MERGE (FP32 add), CONVERT FP32 -> FP16 / BF16, random + specials."""
    lanes = 4
    rng = np.random.default_rng(7)
    h = list(rng.integers(0, 65536, 21)) + FP16_SPECIALS
    h2 = list(rng.permutation(h))
    f = list(rng.integers(0, 2**32, 17, dtype=np.int64)) + F32_SPECIALS
    f2 = list(rng.permutation(f))
    small = list(np.random.default_rng(8).normal(0, 1e3, 30).astype(np.float32).view(np.uint32))
    jobs = [
        Job(ActOp.ADD, h, lanes, b=h2),
        Job(ActOp.MUL, h, lanes, b=h2),
        Job(ActOp.ADD, f, lanes, b=f2, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32),   # MERGE
        Job(ActOp.MUL, f, lanes, b=f2, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32),
        Job(ActOp.PASS, f + small, lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP16),  # CONVERT
        Job(ActOp.PASS, f + small, lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.BF16),
        Job(ActOp.PASS, h, lanes, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP32),
    ]
    check(jobs, run_unit(lanes, jobs, seed=3, idle_prob=idle_prob, stall_prob=stall_prob),
          "binary/convert")


def softmax_jobs(x, lanes, counts=None):
    """The four softmax passes with the constants the sequencer would carry over."""
    sm = G.softmax(x, lanes)
    return sm, [
        Job(ActOp.MAX, x, lanes, out_fmt=ActFmt.FP32, counts=counts),
        Job(ActOp.SUMEXP, x, lanes, out_fmt=ActFmt.FP32, c=sm["max"], counts=counts),
        Job(ActOp.RECIP, [sm["sum"]], lanes, in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32),
        Job(ActOp.EXP, x, lanes, c=sm["max"], k=sm["recip"], counts=counts),
    ]


@pytest.mark.parametrize("idle_prob,stall_prob", [(0.0, 0.0), (0.3, 0.4)])
def test_softmax_passes(idle_prob, stall_prob):
    """MAX, SUMEXP, RECIP, EXP*recip over 23 elements on 4 lanes (partial last beat)."""
    lanes = 4
    x = torch.randn(23, generator=torch.Generator().manual_seed(11)) * 4
    xb = G.encode(x, ActFmt.FP16)
    sm, jobs = softmax_jobs(xb, lanes)
    # back-to-back reductions and element ops of other commands around it
    jobs = jobs + [Job(ActOp.GELU, xb[:6], lanes)] + softmax_jobs(xb[:9], lanes)[1]
    got = run_unit(lanes, jobs, seed=4, idle_prob=idle_prob, stall_prob=stall_prob)
    check(jobs, got, "softmax")
    y = G.decode([v for beat in got[3:9] for v in beat[0][:beat[1]]], ActFmt.FP16).double()
    ref = torch.softmax(x.to(torch.float16).double(), 0)
    assert (y - ref).abs().max() < 1e-3 and abs(float(y.sum()) - 1) < 1e-3


def test_reduction_specials_and_odd_counts():
    """MAX with -0/+0/NaN/-Inf, beats with count 0 and odd counts, SUMEXP overflow to Inf."""
    lanes = 4
    jobs = [
        Job(ActOp.MAX, [0x8000, 0x8000, 0x0000, 0x8001], lanes, counts=[3, 0, 1],
            out_fmt=ActFmt.FP32),
        Job(ActOp.MAX, [0xFC00, 0xFC00, 0xFC00], lanes, counts=[2, 1], out_fmt=ActFmt.FP16),
        Job(ActOp.MAX, [0x3C00, 0x7E01, 0x4000], lanes, counts=[1, 2]),
        Job(ActOp.MAX, [], lanes, counts=[0], out_fmt=ActFmt.FP32),
        Job(ActOp.SUMEXP, [0x5A00] * 9, lanes, out_fmt=ActFmt.FP32),           # exp(192) = Inf
        Job(ActOp.SUMEXP, [0x3C00, 0xFC00, 0x0000, 0x7C00, 0x3C00], lanes, c=0x3F800000),
        Job(ActOp.SUMEXP, [0x3C00] * 5, lanes, c=0x7FC00000, out_fmt=ActFmt.FP32),  # c = NaN
    ]
    check(jobs, run_unit(lanes, jobs, seed=5, idle_prob=0.2, stall_prob=0.2), "reductions")


def test_latency_and_throughput():
    """Streams always ready: one beat per cycle, documented latencies, no bubble between commands."""
    lanes = 4
    dut = ActivationUnit(lanes)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    cl, al = act_cmd_layout(), act_in_layout(lanes)
    n = 12
    accept, emit = [], []

    async def drive(ctx):
        cycle = 0
        ctx.set(dut.out.ready, 1)
        queue = [ActOp.SILU, ActOp.RELU, ActOp.MAX]

        def present_next():       # the next command waits on cmd as soon as the previous is taken
            ctx.set(dut.cmd.valid, bool(queue))
            if queue:
                ctx.set(dut.cmd.payload.as_value(), cl.const(
                    {"op": queue[0], "in_fmt": 0, "out_fmt": 0, "c": 0, "k": ONE_F32}).as_bits())

        present_next()
        for _ in range(3):
            for i in range(n):
                ctx.set(dut.a.payload.as_value(),
                        al.const({"data": [0x3C00] * lanes, "count": lanes,
                                  "last": i == n - 1}).as_bits())
                ctx.set(dut.a.valid, 1)
                while True:
                    _, _, ca, aa, ov = await ctx.tick().sample(dut.cmd.ready, dut.a.ready,
                                                              dut.out.valid)
                    cycle += 1
                    emit.append(ov)
                    if ca and queue:
                        queue.pop(0)
                        present_next()
                    if aa:
                        accept.append(cycle)
                        break
        ctx.set(dut.a.valid, 0)
        for _ in range(30):
            _, _, ov = await ctx.tick().sample(dut.out.valid)
            emit.append(ov)

    sim.add_testbench(drive)
    sim.run()
    # the first beat is accepted one cycle after the command (command register), then every cycle
    assert accept == list(range(2, 2 + 3 * n)), accept
    outs = [i + 1 for i, v in enumerate(emit) if v]
    assert outs[:2 * n] == [a + LATENCY for a in accept[:2 * n]], (outs, accept)
    assert outs[2 * n] == accept[-1] + LATENCY + dut.tree_levels == accept[-1] + dut.reduction_latency


@pytest.mark.sim
@pytest.mark.parametrize("op,kw", UNARY_JOBS, ids=lambda v: getattr(v, "name", str(v)))
def test_unary_sweep_rtl(op, kw):
    """Every 7th FP16 pattern (a different subset from the fast test's every 173rd), or every
    ``NDP_ACT_STRIDE``-th: ``NDP_ACT_STRIDE=1`` is the exhaustive sweep (~11 min per op in the
    Python simulator)."""
    lanes = 16
    stride = int(os.environ.get("NDP_ACT_STRIDE", "7"))
    jobs = [Job(op, range(3, 65536, stride) if stride > 1 else range(65536), lanes, **kw)]
    check(jobs, run_unit(lanes, jobs, seed=6, junk=False), f"sweep/{stride} {op.name}")


# ------------------------------------------------------------------ checker can fail

def test_corrupted_golden_is_caught(monkeypatch):
    lanes = 4
    pats = [0x3C00, 0xBC00, 0x3555, 0xC123, 0x4400, 0x0001, 0x2E66, 0xB000]
    broken = PiecewiseQuadratic("exp2", lambda x: 2.0 ** x, 0.0, 1 / 64, 64, 24, 30)
    broken.a = tuple(a + (1 << 12) for a in EXP2_TABLE.a)   # one table entry off by 4e-6
    monkeypatch.setattr(G, "EXP2_TABLE", broken)
    jobs = [Job(ActOp.EXP, pats, lanes, out_fmt=ActFmt.FP32)]
    got = run_unit(lanes, jobs)
    with pytest.raises(AssertionError, match="EXP beat"):
        check(jobs, got, "corrupted")


# ------------------------------------------------------------------ argument validation

@pytest.mark.parametrize("bad", [0, -1, 4097, 2.0, "4", True, None])
def test_constructor_rejects(bad):
    with pytest.raises(ValueError, match="lanes must be .* got " + re.escape(repr(bad))):
        ActivationUnit(bad)


def test_golden_rejects_misuse():
    with pytest.raises(ValueError, match="SUMEXP is a reduction"):
        G.elementwise(ActOp.SUMEXP, [0])
    with pytest.raises(ValueError, match="GELU is not a reduction"):
        G.reduce_beats(ActOp.GELU, [[0]], 4)
    with pytest.raises(ValueError, match="exceeds lanes=4"):
        G.reduce_beats(ActOp.MAX, [[0] * 5], 4)


# ------------------------------------------------------------------ golden vs float64

ALL_FP16 = np.arange(65536)
X64 = G.decode(ALL_FP16, ActFmt.FP16).double().numpy()
FINITE = np.isfinite(X64)


@pytest.mark.parametrize("op,ref", [(ActOp.SILU, G.reference_silu), (ActOp.GELU, G.reference_gelu)],
                         ids=["silu", "gelu"])
def test_error_vs_float64_all_fp16(op, ref):
    """Max / mean FP16 ULP error over all finite FP16 inputs (goal: <= 2; measured ~0.5)."""
    y = G.elementwise(op, ALL_FP16)
    err = G.fp16_ulp_error(y[FINITE], ref(X64[FINITE]))
    worst = int(np.argmax(err))
    print(f"{op.name}: max {err.max():.4f} ulp at x={X64[FINITE][worst]!r}, mean {err.mean():.4f}, "
          f"not correctly rounded: {(err > 0.5).sum()}")
    assert err.max() <= 0.51
    # specials: NaN -> canonical NaN, +Inf -> +Inf, -Inf -> -0
    assert list(G.elementwise(op, [0x7E01, 0x7C00, 0xFC00, 0x0000, 0x8000])) == \
        [0x7E00, 0x7C00, 0x8000, 0x0000, 0x8000]


def test_exp_recip_error_vs_float64():
    """exp (FP32 out) on all finite FP16 inputs; recip on random FP32; relative error."""
    y = G.bits_to_f32(G.elementwise(ActOp.EXP, ALL_FP16, out_fmt=ActFmt.FP32)).double().numpy()
    ex = G.reference_exp(X64)
    ok = FINITE & (ex > 2.0 ** -126) & (ex < 3.4e38)
    rel = np.abs(y[ok] - ex[ok]) / ex[ok]
    print(f"exp: max rel error {rel.max():.3e}, mean {rel.mean():.3e}")
    assert rel.max() < 1.2e-7
    # beyond the normal range: overflow to Inf, underflow to subnormal / +0
    assert np.all(np.isinf(y[FINITE & (X64 > 88.8)])) and np.all(y[FINITE & (X64 < -104)] == 0)
    fp16 = G.elementwise(ActOp.EXP, ALL_FP16)
    err = G.fp16_ulp_error(fp16[FINITE & (ex < 65504)], ex[FINITE & (ex < 65504)])
    print(f"exp FP16 out: max {err.max():.4f} ulp")
    assert err.max() <= 0.51
    r = torch.rand(100000, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    xs = torch.exp((r - 0.5) * 170).to(torch.float32)
    rc = G.bits_to_f32(G.elementwise(ActOp.RECIP, G.f32_to_bits(xs), in_fmt=ActFmt.FP32,
                                     out_fmt=ActFmt.FP32)).double()
    rel = ((rc - 1 / xs.double()) * xs.double()).abs()
    print(f"recip: max rel error {rel.max():.3e}")
    assert rel.max() < 2.5e-7
    assert float(G.recip_fixed(torch.tensor([1.0]))[0]) == 1.0
    assert float(G.exp2_fixed(torch.tensor([0.0]), G.K_LOG2E)[0]) == 1.0


def test_softmax_error_vs_float64():
    """Softmax outputs within 1e-3 absolute and summing to 1 within 1e-3 (many random vectors)."""
    worst_abs = worst_sum = 0.0
    gen = torch.Generator().manual_seed(21)
    for n, scale in [(7, 1), (100, 3), (1000, 8), (4096, 2), (300, 30), (64, 1000)]:
        for lanes in (4, 16, 256):
            x = (torch.randn(n, generator=gen) * scale).to(torch.float16)
            sm = G.softmax(G.encode(x.float(), ActFmt.FP16), lanes)
            y = G.decode(sm["y"], ActFmt.FP16).double()
            ref = torch.softmax(x.double(), 0)
            worst_abs = max(worst_abs, float((y - ref).abs().max()))
            worst_sum = max(worst_sum, abs(float(y.sum()) - 1))
    print(f"softmax: max abs error {worst_abs:.3e}, max |sum - 1| {worst_sum:.3e}")
    assert worst_abs < 1e-3 and worst_sum < 1e-3


def test_convert_table_vectors():
    """FP32 -> FP16 / BF16 conversion against hand-derived values (RNE, ties, overflow)."""
    cases16 = [(65504.0, 0x7BFF), (65519.996, 0x7BFF), (65520.0, 0x7C00), (2.0 ** -25, 0x0000),
               (2.0 ** -25 * 1.0000001, 0x0001), (3 * 2.0 ** -25, 0x0002), (-2.0 ** -24, 0x8001),
               (1.0 + 2.0 ** -11, 0x3C00), (1.0 + 3 * 2.0 ** -11, 0x3C02), (2.0 ** -14, 0x0400),
               (1e-30, 0x0000), (-1e30, 0xFC00)]
    for v, want in cases16:
        got = int(G.elementwise(ActOp.PASS, [f32_bits_of(v)], in_fmt=ActFmt.FP32)[0])
        assert got == want, (v, hex(got), hex(want))
    cases_bf = [(1.0 + 2.0 ** -8, 0x3F80), (1.0 + 3 * 2.0 ** -8, 0x3F82), (3.4e38, 0x7F80),
                (2.0 ** -133, 0x0001), (2.0 ** -134, 0x0000)]
    for v, want in cases_bf:
        got = int(G.elementwise(ActOp.PASS, [f32_bits_of(v)], in_fmt=ActFmt.FP32,
                                out_fmt=ActFmt.BF16)[0])
        assert got == want, (v, hex(got), hex(want))
    assert math.isnan(float(G.decode([0x7E00], ActFmt.FP16)[0]))
