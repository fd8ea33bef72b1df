"""Amaranth-simulator tests of the bit-serial multiplier unit against exact integer products.

The unit is driven by the engine's ``LaneSequencer`` (``cosim/amaranth_sim/gemv_unit.py``),
skew, INT8 second pass and late weight acknowledgement included; each datapath register
is checked in the cycle the lane reducer reads it.
"""

import random

import pytest

from ndpdimm.cosim.amaranth_sim.gemv_unit import run_unit
from ndpdimm.cosim.gemv.lane_products import datapath_products, random_word
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.gemv.lane_reducer import LaneReducer
from ndpdimm.hw.gemv.multiplier import BitSerialMultiplierUnit, product_shift, register_bits
from ndpdimm.hw.gemv.sequencer import LaneSequencer


def held_values(reads, dtype, radix_bits):
    """Raw datapath registers -> the products they hold (signed for INT8)."""
    shift = product_shift(dtype, radix_bits)
    width = register_bits(radix_bits) - shift
    out = []
    for slot in reads:
        vals = [raw >> shift for raw in slot]
        if dtype == Dtype.INT8:
            vals = [v - (1 << width) if v >> (width - 1) else v for v in vals]
        out.append(vals)
    return out


def slots_for(rng, dtype, n_slots, batch):
    """A new weight word every ``batch`` activations, held in between."""
    slots, pairs = [], []
    for n in range(n_slots):
        if n % batch == 0:
            weight = random_word(rng, dtype)
        act = random_word(rng, dtype)
        slots.append((weight if n % batch == 0 else None, act, n % batch, n < batch))
        pairs.append((weight, act))
    return slots, pairs


@pytest.mark.parametrize("radix_bits", [1, 2, 3, 4, 11])
@pytest.mark.parametrize("dtype", list(Dtype))
def test_lane_products_exact(dtype, radix_bits):
    rng = random.Random(1000 * radix_bits + dtype)
    slots, pairs = slots_for(rng, dtype, 24, batch=3)
    reads, _ = run_unit(dtype, False, slots, radix_bits, seed=radix_bits,
                        idle_prob=rng.choice([0.0, 0.3]))
    got = held_values(reads, dtype, radix_bits)
    for n, (g, (w, a)) in enumerate(zip(got, pairs)):
        assert g == datapath_products(w, a, dtype), f"slot {n}"


@pytest.mark.parametrize("batch", [1, 4], ids=["batch1", "max_batch"])
@pytest.mark.parametrize("idle_prob", [0.0, 0.4], ids=["back_to_back", "idle"])
@pytest.mark.parametrize("dtype", list(Dtype))
def test_batch_and_idle(dtype, batch, idle_prob):
    """Batch 1 (a new weight word every slot, acknowledged 7 cycles after the start) and the
    largest batch (one word held for 4 activations), back to back and with idle cycles."""
    rng = random.Random(7 * batch + int(dtype) + int(10 * idle_prob))
    slots, pairs = slots_for(rng, dtype, 12, batch)
    reads, _ = run_unit(dtype, False, slots, 1, max_batch=4, seed=batch, idle_prob=idle_prob)
    for n, (g, (w, a)) in enumerate(zip(held_values(reads, dtype, 1), pairs)):
        assert g == datapath_products(w, a, dtype), f"slot {n}"


def test_extremes_int8():
    # -128 x -128 = 16384 is the one product that needs the full 16-bit signed range
    w = int.from_bytes(bytes([0x80] * 16), "little")
    reads, _ = run_unit(Dtype.INT8, False, [(w, w, 0, True)])
    assert held_values(reads, Dtype.INT8, 1)[0] == [16384] * 16


def test_checker_detects_wrong_product():
    """The comparison in these tests can fail: a perturbed expectation is caught."""
    w = 0x3C01 | (0x4003 << 16)
    reads, _ = run_unit(Dtype.FP16, False, [(w, w, 0, True)])
    wrong = datapath_products(w, w, Dtype.FP16)
    wrong[1] += 1
    assert held_values(reads, Dtype.FP16, 1)[0] != wrong


@pytest.mark.parametrize("block", [BitSerialMultiplierUnit, LaneSequencer,
                                   lambda radix_bits: LaneReducer(4, radix_bits)])
def test_bad_radix(block):
    with pytest.raises(ValueError, match="radix_bits must be an integer in 1..11, got 0"):
        block(radix_bits=0)
    with pytest.raises(ValueError, match="radix_bits .* got 12"):
        block(radix_bits=12)
