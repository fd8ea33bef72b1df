"""Bit-exact checks of ``ndpdimm.hw.gemv.fp32_arith`` against torch float32 on the CPU.

Every test drives a whole batch of vectors through one simulator run (the blocks
are combinational) and compares all outputs with the golden model
(``ndpdimm.cosim.golden.numerics``), NaNs canonicalized to 0x7FC00000.
"""

import random

import numpy as np
import pytest
from amaranth.back import rtlil
from amaranth.hdl import Fragment, Module, Signal
from amaranth.sim import Simulator

from ndpdimm.cosim.golden.numerics import (
    CANONICAL_NAN,
    bits_elem,
    bits_f32,
    canonical_nan,
    f32_bits,
    product_f32,
)
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.gemv.fp32_arith import Fp32Adder, ProductToFp32, round_pack_fp32

PZ, NZ = 0x00000000, 0x80000000
MIN_SUB, MAX_SUB = 0x00000001, 0x007FFFFF
MIN_NORM, MAX_FIN = 0x00800000, 0x7F7FFFFF
ONE = 0x3F800000
INF, NINF = 0x7F800000, 0xFF800000
NANS = [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FA5A5A5, 0xFFFFFFFF]
SIGN = 0x80000000


def neg(x):
    return x ^ SIGN


# ---------------------------------------------------------------- harness

def run_comb(dut, inputs, output):
    """Apply each dict of ``inputs`` (port name -> value) to ``dut``; return ``output`` per vector."""
    got = []
    sim = Simulator(dut)

    async def tb(ctx):
        for vec in inputs:
            for name, value in vec.items():
                ctx.set(getattr(dut, name), value)
            got.append(ctx.get(getattr(dut, output)))

    sim.add_testbench(tb)
    sim.run()
    return got


def compare(label, inputs, got, expected):
    """Raise AssertionError naming the first mismatch (inputs, got, expected in hex)."""
    assert len(inputs) == len(got) == len(expected)
    bad = [i for i, (g, e) in enumerate(zip(got, expected)) if g != e]
    if bad:
        i = bad[0]
        ins = ", ".join(f"{k}=0x{v:x}" for k, v in inputs[i].items())
        raise AssertionError(f"{label}: {len(bad)}/{len(got)} mismatches; first #{i}: "
                             f"{ins}: got 0x{got[i]:08x}, expected 0x{expected[i]:08x}")


def golden_add(pairs):
    a = bits_f32([p[0] for p in pairs])
    b = bits_f32([p[1] for p in pairs])
    return f32_bits(canonical_nan(a + b)).tolist()


def check_add(label, pairs):
    inputs = [{"a": a, "b": b} for a, b in pairs]
    got = run_comb(Fp32Adder(), inputs, "sum")
    compare(label, inputs, got, golden_add(pairs))
    return got


def significand(x, dtype):
    info = Dtype(dtype).info
    e = (x >> info.frac_bits) & ((1 << info.exp_bits) - 1)
    return ((e != 0) << info.frac_bits) | (x & ((1 << info.frac_bits) - 1))


def golden_product(dtype, pairs):
    w = bits_elem([p[0] for p in pairs], dtype)
    a = bits_elem([p[1] for p in pairs], dtype)
    return f32_bits(canonical_nan(product_f32(w, a))).tolist()


def product_inputs(dtype, pairs):
    return [{"dtype": int(dtype), "w": w, "a": a,
             "mant_product": significand(w, dtype) * significand(a, dtype)} for w, a in pairs]


def check_product(label, dtype, pairs):
    inputs = product_inputs(dtype, pairs)
    got = run_comb(ProductToFp32(), inputs, "product")
    compare(label, inputs, got, golden_product(dtype, pairs))
    return got


def f32_class(bits):
    e = (bits >> 23) & 0xFF
    f = bits & 0x7FFFFF
    if e == 0xFF:
        return "nan" if f else "inf"
    if e == 0:
        return "subnormal" if f else "zero"
    return "normal"


# ---------------------------------------------------------------- the checker itself

def test_compare_detects_mismatch():
    pairs = [(ONE, ONE), (MIN_SUB, MIN_SUB), (INF, NINF)]
    inputs = [{"a": a, "b": b} for a, b in pairs]
    got = run_comb(Fp32Adder(), inputs, "sum")
    expected = golden_add(pairs)
    compare("sane", inputs, got, expected)
    assert got == [0x40000000, 0x00000002, CANONICAL_NAN]
    for i in range(len(pairs)):
        wrong = list(expected)
        wrong[i] ^= 1
        with pytest.raises(AssertionError, match=f"1/3 mismatches; first #{i}"):
            compare("wrong", inputs, got, wrong)


def test_compare_detects_wrong_operation():
    # A golden that computes something else (a - b) must be caught by the harness.
    rng = random.Random(7)
    pairs = [(rng.getrandbits(32) & 0x7FFFFFFF, rng.getrandbits(32) & 0x7FFFFFFF)
             for _ in range(50)]
    inputs = [{"a": a, "b": b} for a, b in pairs]
    got = run_comb(Fp32Adder(), inputs, "sum")
    wrong = golden_add([(a, neg(b)) for a, b in pairs])
    with pytest.raises(AssertionError, match="mismatches"):
        compare("a-b", inputs, got, wrong)


def test_round_pack_validates_arguments():
    m = Module()
    with pytest.raises(ValueError, match="at least 25 bits"):
        round_pack_fp32(m, sign=Signal(), sig=Signal(24), exp=Signal(9), exp_min=1)
    with pytest.raises(ValueError, match="sign must be 1 bit"):
        round_pack_fp32(m, sign=Signal(2), sig=Signal(25), exp=Signal(9), exp_min=1)
    with pytest.raises(ValueError, match="exp_min"):
        round_pack_fp32(m, sign=Signal(), sig=Signal(25), exp=Signal(9), exp_min=1.0)
    Fragment.get(m, None)   # nothing was built; keeps Amaranth's unused-module warning quiet


@pytest.mark.parametrize("cls", [Fp32Adder, ProductToFp32])
def test_blocks_are_combinational(cls):
    text = rtlil.convert(cls())
    assert "clk" not in text and "rst" not in text


def test_golden_honours_subnormals():
    # If torch ever flushed subnormals, every subnormal expectation below would be vacuous.
    assert golden_add([(MIN_SUB, MIN_SUB)]) == [0x00000002]
    assert golden_product(Dtype.BF16, [(0x0001, 0x3F80)]) == [0x00010000]


# ---------------------------------------------------------------- adder, directed

def test_add_directed():
    cases = [
        # signed zeros
        (PZ, PZ, PZ), (PZ, NZ, PZ), (NZ, PZ, PZ), (NZ, NZ, NZ),
        (ONE, NZ, ONE), (NZ, neg(ONE), neg(ONE)), (PZ, MIN_SUB, MIN_SUB), (neg(MIN_SUB), NZ, neg(MIN_SUB)),
        # subnormal + subnormal, incl. carry into the normal range
        (MIN_SUB, MIN_SUB, 0x00000002), (0x00400000, 0x00400000, MIN_NORM),
        (MAX_SUB, MIN_SUB, MIN_NORM), (MAX_SUB, MAX_SUB, 0x00FFFFFE),
        (MAX_SUB, neg(MIN_SUB), 0x007FFFFE), (MIN_SUB, neg(MAX_SUB), 0x807FFFFE),
        (neg(MAX_SUB), neg(MAX_SUB), 0x80FFFFFE),
        # normal + subnormal; min normal minus tiny
        (MIN_NORM, MIN_SUB, 0x00800001), (MIN_NORM, neg(MIN_SUB), MAX_SUB),
        (0x00800001, 0x80000002, MAX_SUB), (0x01000000, neg(MIN_SUB), 0x00FFFFFF),
        (0x01000000, neg(MIN_NORM), MIN_NORM), (neg(MIN_NORM), MAX_SUB, 0x80000001),
        # exact cancellation -> +0
        (ONE, neg(ONE), PZ), (neg(ONE), ONE, PZ), (MIN_SUB, neg(MIN_SUB), PZ),
        (MAX_FIN, neg(MAX_FIN), PZ), (neg(MIN_NORM), MIN_NORM, PZ),
        # cancellation leaving a few bits (massive left shift)
        (0x3F800001, neg(ONE), 0x34000000), (0x00800001, neg(MIN_NORM), MIN_SUB),
        # ties to even, both ways
        (ONE, 0x33800000, ONE), (0x3F800001, 0x33800000, 0x3F800002),
        (0x4B800000, ONE, 0x4B800000), (0x4B800001, ONE, 0x4B800002),
        (ONE, neg(0x33000000), ONE), (0x3F800001, neg(0x33800000), ONE),
        (0x3F800003, neg(0x33800000), 0x3F800002), (0x3F800002, neg(0x33800000), 0x3F800002),
        # rounding carry bumps the exponent
        (0x3FFFFFFF, 0x33800000, 0x40000000), (0x4B7FFFFF, 0x3F000000, 0x4B800000),
        (neg(0x3FFFFFFF), neg(0x33800000), neg(0x40000000)),
        # overflow to Inf
        (MAX_FIN, MAX_FIN, INF), (neg(MAX_FIN), neg(MAX_FIN), NINF),
        (MAX_FIN, 0x73000000, INF), (MAX_FIN, 0x72FFFFFF, MAX_FIN),
        (0x7F000000, 0x7F000000, INF), (MAX_FIN, neg(0x73000000), 0x7F7FFFFE), (MAX_FIN, neg(0x72FFFFFF), MAX_FIN),
        # infinities
        (INF, ONE, INF), (ONE, INF, INF), (NINF, MAX_FIN, NINF), (MIN_SUB, NINF, NINF),
        (INF, INF, INF), (NINF, NINF, NINF), (INF, NINF, CANONICAL_NAN), (NINF, INF, CANONICAL_NAN),
        (INF, NZ, INF), (PZ, NINF, NINF),
        # large exponent differences (d >= 25, up to the maximum of 253)
        (ONE, 0x33000000, ONE), (ONE, 0x33000001, ONE), (ONE, 0x33800001, 0x3F800001), (ONE, neg(0x33000001), 0x3F7FFFFF),
        (ONE, 0x32800000, ONE), (ONE, neg(0x32800000), ONE), (ONE, 0x32000000, ONE),
        (0x3F800001, neg(0x32FFFFFF), 0x3F800001), (0x3F800000, neg(0x31000000), ONE),
        (MAX_FIN, MIN_SUB, MAX_FIN), (MAX_FIN, neg(MIN_SUB), MAX_FIN),
        (neg(MIN_SUB), MAX_FIN, MAX_FIN), (0x7F000000, neg(MIN_NORM), 0x7F000000),
        (0x40000000, neg(MIN_SUB), 0x40000000), (MIN_NORM, 0x7F000000, 0x7F000000),
    ]
    # NaNs with payloads and both signs, against everything
    for n in NANS:
        for x in (PZ, NZ, ONE, MIN_SUB, MAX_FIN, INF, NINF, n, NANS[0], NANS[-1]):
            cases += [(n, x, CANONICAL_NAN), (x, n, CANONICAL_NAN)]
    pairs = [(a, b) for a, b, _ in cases]
    # The expectations written above are checked against torch too, so both are pinned.
    assert golden_add(pairs) == [c for _, _, c in cases]
    check_add("add directed", pairs)


def test_add_special_grid():
    specials = [PZ, NZ, MIN_SUB, 0x00000002, 0x00400000, MAX_SUB, MIN_NORM, 0x00800001,
                0x00FFFFFF, 0x01000000, 0x33800000, 0x34000000, ONE, 0x3F800001, 0x3FFFFFFF,
                0x4B800000, 0x7F000000, MAX_FIN, INF, NANS[0], NANS[4]]
    specials += [neg(x) for x in specials]
    check_add("add specials crossed", [(a, b) for a in specials for b in specials])


# ---------------------------------------------------------------- adder, random

def _rand_with_exp(rng, e, sign=None):
    s = rng.getrandbits(1) if sign is None else sign
    return (s << 31) | (e << 23) | rng.getrandbits(23)


def test_add_random_bits():
    rng = random.Random(1)
    check_add("add random bits", [(rng.getrandbits(32), rng.getrandbits(32)) for _ in range(3000)])


def test_add_random_cancellation():
    # close exponents, opposite signs: deep cancellation and long normalizing shifts
    rng = random.Random(2)
    pairs = []
    for _ in range(2500):
        e = rng.randrange(0, 255)
        a = _rand_with_exp(rng, e)
        eb = min(max(e + rng.choice([0, 0, 0, 1, -1, 2, -2, 3]), 0), 254)
        b = _rand_with_exp(rng, eb, sign=(a >> 31) ^ 1)
        if rng.random() < 0.3:          # share high fraction bits -> massive cancellation
            keep = rng.randrange(1, 23)
            mask = ((1 << 23) - 1) ^ ((1 << (23 - keep)) - 1)
            b = (b & ~mask) | (a & mask)
        pairs.append((a, b))
    got = check_add("add cancellation", pairs)
    assert sum(g in (PZ, NZ) for g in got) > 10


def test_add_random_subnormal_heavy():
    rng = random.Random(3)
    pairs = []
    for _ in range(2000):
        a = _rand_with_exp(rng, rng.choice([0, 0, 1, 2]))
        b = _rand_with_exp(rng, rng.choice([0, 0, 1, 2, rng.randrange(0, 30)]))
        if rng.random() < 0.2:
            a &= 0x8000000F | rng.getrandbits(23)   # tiny subnormals
        if rng.random() < 0.05:
            b = neg(a)                              # exact cancellation
        pairs.append((a, b))
    got = check_add("add subnormal-heavy", pairs)
    classes = {f32_class(g) for g in got}
    assert {"zero", "subnormal", "normal"} <= classes


def test_add_random_alignment_and_overflow():
    rng = random.Random(4)
    pairs = []
    for _ in range(1500):      # exponent differences around the guard/round/sticky window
        ea = rng.randrange(30, 255)
        eb = max(ea - rng.randrange(20, 32), 0)
        a, b = _rand_with_exp(rng, ea), _rand_with_exp(rng, eb)
        if rng.random() < 0.3:
            b &= 0xFF800000 | (rng.getrandbits(23) & (0xFFFFFF << rng.randrange(0, 23)))
        pairs.append((a, b) if rng.getrandbits(1) else (b, a))
    for _ in range(500):       # near the top of the range
        pairs.append((_rand_with_exp(rng, rng.choice([253, 254])),
                      _rand_with_exp(rng, rng.randrange(225, 255))))
    got = check_add("add alignment/overflow", pairs)
    assert any(g in (INF, NINF) for g in got)


# ---------------------------------------------------------------- products

FP16_CORNERS = [0x0000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x3C00, 0x3555, 0x7C00, 0x7E00, 0x7C01]
FP16_CORNERS += [x | 0x8000 for x in FP16_CORNERS]


def test_product_fp16_corners_crossed():
    pairs = [(w, a) for w in FP16_CORNERS for a in FP16_CORNERS]
    got = check_product("fp16 corners", Dtype.FP16, pairs)
    assert {"zero", "normal", "inf", "nan"} == {f32_class(g) for g in got}
    assert 0x80000000 in got and 0x00000000 in got


def test_product_fp16_random():
    rng = random.Random(5)
    pairs = [(rng.getrandbits(16), rng.getrandbits(16)) for _ in range(2000)]
    pairs += [(rng.getrandbits(16) & 0x83FF, rng.getrandbits(16)) for _ in range(300)]  # subnormal w
    check_product("fp16 random", Dtype.FP16, pairs)


def _bf16(sign, e, f):
    return (sign << 15) | (e << 7) | f


def _exact_tie(w, a, result):
    """Is the exact BF16 product exactly halfway between two adjacent binary32 values?"""
    exact = float(bits_elem([w], Dtype.BF16).double()[0] * bits_elem([a], Dtype.BF16).double()[0])
    r = np.float32(bits_f32([result]).item())
    if not np.isfinite(r) or exact == float(r):
        return False
    other = np.nextafter(r, np.float32(np.inf if exact > r else -np.inf))
    return abs(exact - float(r)) == abs(float(other) - exact)


def test_product_bf16_range_edges():
    rng = random.Random(6)
    fracs = [0x00, 0x01, 0x40, 0x41, 0x7F, 0x3F, 0x60]
    pairs = []
    # t = ew + ea - 127 is the biased exponent of the product of the two significands'
    # leading parts: t >= 255 overflows, t near 1 crosses the normal/subnormal boundary,
    # t <= 0 lies in the subnormal range, t <= -23 underflows towards zero.
    targets = list(range(252, 258)) + list(range(1, 5)) + list(range(-25, 1))
    for t in targets:
        esum = t + 127
        for fw in fracs:
            for fa in fracs:
                lo = max(1, esum - 254)
                hi = min(254, esum - 1)
                if lo > hi:
                    continue
                ew = rng.randint(lo, hi)
                ea = esum - ew
                pairs.append((_bf16(rng.getrandbits(1), ew, fw), _bf16(rng.getrandbits(1), ea, fa)))
    # specific values
    pairs += [
        (0x2000, 0x2000),      # 2**-63 * 2**-63 = 2**-126, exactly the smallest normal
        (0x1F80, 0x2000),      # 2**-64 * 2**-63 = 2**-127, subnormal
        (0x1A80, 0x1A00),      # 2**-74 * 2**-75 = 2**-149, smallest subnormal
        (0x1A00, 0x1A00),      # 2**-150: tie between 0 and 2**-149 -> 0 (even)
        (0x9A00, 0x1A00),      # -2**-150 -> -0
        (0x1A40, 0x1A00),      # 1.5 * 2**-150 -> 2**-149
        (0x1A01, 0x1A00),      # just above the tie -> 2**-149
        (0x1980, 0x1A00),      # 2**-151 -> +0
        (0x9980, 0x9A00),      # (-)(-) 2**-151 -> +0
        (0x1A40, 0x1AC0),      # 1.5*1.5*2**-149 = 2.25 * 2**-149 -> 2 * 2**-149
        (0x1AC0, 0x1AC0),      # 1.5*1.5*2**-148 = 4.5 * 2**-149 -> tie -> 4 (even)
        (0x1AE0, 0x1AC0),      # 1.75*1.5*2**-148 = 5.25 * 2**-149 -> 5
        (0x1B20, 0x1AA0),      # 1.25*1.25*2**-147 = 12.5 * 2**-149 ... exercises rounding
        (0x00FF, 0x3F80),      # BF16 subnormal times 1
        (0x0001, 0x0001),      # min subnormal squared -> 0
        (0x7F7F, 0x7F7F),      # max * max -> Inf
        (0xFF7F, 0x7F7F),      # -> -Inf
        (0x7F00, 0x4000),      # 2**127 * 2 -> Inf
        (0x7F7F, 0x3F80),      # max * 1 -> exact
        (0x7F7F, 0x3F81),      # max * (1+2**-7) -> Inf
        (0x7F7F, 0x3F7F),      # max * (1-2**-8) -> finite
        (0x7F00, 0x3FFF),      # 2**127 * 1.99 -> finite, rounding near the top
        (0x0080, 0x0080),      # min normal squared -> 0
        (0x7F80, 0x0001), (0x0000, 0xFF80), (0x7FC1, 0x3F80), (0xFF80, 0xFF80), (0x8000, 0x7F7F),
    ]
    got = check_product("bf16 range edges", Dtype.BF16, pairs)

    # The vectors must really reach every region named above.
    finite_in = [not (((w >> 7) & 0xFF) == 0xFF or ((a >> 7) & 0xFF) == 0xFF) for w, a in pairs]
    nonzero_in = [(w & 0x7FFF) != 0 and (a & 0x7FFF) != 0 for w, a in pairs]
    live = [f and n for f, n in zip(finite_in, nonzero_in)]
    assert any(l and g in (INF, NINF) for l, g in zip(live, got)), "no overflow"
    assert any(l and g in (PZ, NZ) for l, g in zip(live, got)), "no underflow to zero"
    assert any(l and g == NZ for l, g in zip(live, got)), "no underflow to -0"
    assert any(l and (g & 0x7FFFFFFF) == MIN_SUB for l, g in zip(live, got)), "no min subnormal"
    assert any(l and (g & 0x7FFFFFFF) == MIN_NORM for l, g in zip(live, got)), "no min normal"
    assert sum(l and f32_class(g) == "subnormal" for l, g in zip(live, got)) > 100
    ties = [(g, w, a) for l, g, (w, a) in zip(live, got, pairs)
            if l and f32_class(g) in ("subnormal", "zero") and _exact_tie(w, a, g)]
    assert any(g & 1 == 0 and g & 0x7FFFFFFF for g, _, _ in ties), "no subnormal tie"
    assert any(g & 0x7FFFFFFF == 0 for g, _, _ in ties), "no tie rounding down to zero"
    # ties that rounded up (to an even neighbour above the truncation) and down
    up = down = False
    for g, w, a in ties:
        exact = abs(float(bits_elem([w], Dtype.BF16).double()[0] * bits_elem([a], Dtype.BF16).double()[0]))
        mag = float(abs(np.float32(bits_f32([g]).item())))
        up |= mag > exact
        down |= mag < exact
    assert up and down, "ties must round to even both ways"


def test_product_bf16_random():
    rng = random.Random(8)
    pairs = [(rng.getrandbits(16), rng.getrandbits(16)) for _ in range(1500)]
    for _ in range(1500):   # exponents spread over the whole range incl. both ends
        pairs.append((_bf16(rng.getrandbits(1), rng.choice([0, rng.randrange(0, 40), rng.randrange(200, 256)]),
                            rng.getrandbits(7)),
                      _bf16(rng.getrandbits(1), rng.randrange(0, 256), rng.getrandbits(7))))
    check_product("bf16 random", Dtype.BF16, pairs)
