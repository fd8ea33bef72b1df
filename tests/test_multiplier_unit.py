"""Amaranth-simulator tests of the bit-serial multiplier unit against exact integer products."""

import random

import pytest
from amaranth.sim import Simulator

from ndpdimm.hw.formats import Dtype, serial_digits
from ndpdimm.hw.multiplier_unit import BitSerialMultiplierUnit


def significand(bits, dtype):
    info = dtype.info
    exp = (bits >> info.frac_bits) & ((1 << info.exp_bits) - 1)
    return ((1 << info.frac_bits) if exp else 0) | (bits & ((1 << info.frac_bits) - 1))


def lanes_of(word, dtype):
    w = dtype.info.elem_bits
    return [(word >> (i * w)) & ((1 << w) - 1) for i in range(dtype.info.lanes)]


def expected(weight, act, dtype):
    ws, xs = lanes_of(weight, dtype), lanes_of(act, dtype)
    if dtype == Dtype.INT8:
        sx = lambda v: v - 256 if v >= 128 else v
        return [sx(a) * sx(b) for a, b in zip(ws, xs)]
    return [significand(a, dtype) * significand(b, dtype) for a, b in zip(ws, xs)]


CORNER16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x7E00, 0x3C00, 0xFFFF]
CORNER8 = [0x00, 0x01, 0x7F, 0x80, 0x81, 0xFF]


def random_word(rng, dtype, corner_share=0.3):
    w = dtype.info.elem_bits
    corners = CORNER8 if w == 8 else CORNER16
    word = 0
    for i in range(dtype.info.lanes):
        v = rng.choice(corners) if rng.random() < corner_share else rng.getrandbits(w)
        word |= v << (i * w)
    return word


def run_unit(radix_bits, jobs, gap_cycles=0):
    """jobs: list of (dtype, weight or None to keep, act). Returns observed lane products."""
    dut = BitSerialMultiplierUnit(radix_bits=radix_bits)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    observed = []

    async def tb(ctx):
        for dtype, weight, act in jobs:
            digits = serial_digits(dtype, radix_bits)
            ctx.set(dut.dtype, dtype)
            for d in range(digits):
                ctx.set(dut.run, 1)
                ctx.set(dut.first, d == 0)
                ctx.set(dut.act, act)
                ctx.set(dut.load_weight, d == 0 and weight is not None)
                ctx.set(dut.weight_in, weight if (d == 0 and weight is not None) else 0)
                await ctx.tick()
            ctx.set(dut.run, 0)
            ctx.set(dut.load_weight, 0)
            if dtype == Dtype.INT8:
                observed.append([ctx.get(dut.int_prod[i]) for i in range(16)])
            else:
                observed.append([ctx.get(dut.fp_mant[i]) for i in range(8)])
            for _ in range(gap_cycles):
                ctx.set(dut.act, 0xDEAD)   # idle cycles must not disturb held state
                await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    return observed


@pytest.mark.parametrize("radix_bits", [1, 2, 3, 4, 11])
@pytest.mark.parametrize("dtype", list(Dtype))
def test_lane_products_exact(dtype, radix_bits):
    rng = random.Random(1000 * radix_bits + dtype)
    jobs, expect = [], []
    weight = None
    for n in range(24):
        # a new weight word every 3 activations (batch 3), held in between
        if n % 3 == 0:
            weight = random_word(rng, dtype)
            load = weight
        else:
            load = None
        act = random_word(rng, dtype)
        jobs.append((dtype, load, act))
        expect.append(expected(weight, act, dtype))
    got = run_unit(radix_bits, jobs, gap_cycles=rng.choice([0, 1, 2]))
    for n, (g, e) in enumerate(zip(got, expect)):
        assert g == e, f"job {n}: got {g}, expected {e}"


def test_extremes_int8():
    # -128 x -128 = 16384 is the one product that needs the full 16-bit signed range
    w = int.from_bytes(bytes([0x80] * 16), "little")
    got = run_unit(1, [(Dtype.INT8, w, w)])[0]
    assert got == [16384] * 16


def test_checker_detects_wrong_product():
    """The comparison in these tests can fail: a perturbed expectation is caught."""
    w = 0x3C00 | (0x4000 << 16)
    got = run_unit(1, [(Dtype.FP16, w, w)])[0]
    wrong = expected(w, w, Dtype.FP16)
    wrong[1] += 1
    assert got != wrong


def test_bad_radix():
    with pytest.raises(ValueError, match="radix_bits"):
        BitSerialMultiplierUnit(radix_bits=0)
    with pytest.raises(ValueError, match="radix_bits"):
        BitSerialMultiplierUnit(radix_bits=12)
