"""Amaranth-simulator tests of the bit-serial multiplier unit against exact integer products."""

import random

import pytest
from amaranth.sim import Simulator

from ndpdimm.cosim.gemv.lane_products import lane_products as expected
from ndpdimm.cosim.gemv.lane_products import random_word
from ndpdimm.hw.formats import Dtype, serial_digits
from ndpdimm.hw.gemv.multiplier import BitSerialMultiplierUnit


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
