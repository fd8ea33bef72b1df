"""Amaranth-simulator tests of the lane reducer (one unit's reduction + accumulator RAM).

The reducer is driven exactly as the engine drives it (transfer, then one lane
per cycle, reading each lane from its multiplier datapath; the unit and the
engine's ``LaneSequencer`` in ``cosim/amaranth_sim/gemv_unit.py``) with random
words, and its accumulators are compared bit for bit with float32 / int32 sums
done in torch in the documented order.
"""

import random

import pytest
import torch

from ndpdimm.cosim.amaranth_sim.gemv_unit import run_unit
from ndpdimm.cosim.gemv.lane_products import lane_products, lanes_of, random_word
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import Dtype


def f32(bits):
    return golden.bits_f32(torch.tensor([bits]))[0]


def product_values(weight, act, dtype):
    ws, xs = lanes_of(weight, dtype), lanes_of(act, dtype)
    if dtype == Dtype.INT8:
        return [int(v) for v in lane_products(weight, act, dtype)]
    w = golden.bits_elem(torch.tensor(ws), dtype)
    x = golden.bits_elem(torch.tensor(xs), dtype)
    return list(golden.product_f32(w, x))


def run_reducer(dtype, axpy, slots, max_batch=4, idle_prob=0.3):
    """slots: list of (row, clear, weight, act). Returns the RAM rows read back at the end."""
    unit_slots = [(weight, act, row, clear) for row, clear, weight, act in slots]
    _, rows = run_unit(dtype, axpy, unit_slots, 1, max_batch, seed=len(slots),
                       idle_prob=idle_prob)
    return rows


def model(dtype, axpy, slots, max_batch=4):
    lanes = dtype.info.lanes
    is_int = dtype == Dtype.INT8
    acc = {}
    for row, clear, weight, act in slots:
        prods = product_values(weight, act, dtype)
        cur = acc.get(row, [0] * lanes) if not clear else [0] * lanes
        if is_int:
            cur = list(cur)
            for lane in range(lanes):
                target = lane if axpy else 0
                cur[target] = (cur[target] + prods[lane] + 2 ** 31) % 2 ** 32 - 2 ** 31
        else:
            cur = [c if isinstance(c, torch.Tensor) else torch.tensor(0.0) for c in cur]
            for lane in range(lanes):
                target = lane if axpy else 0
                cur[target] = (cur[target] + prods[lane]).to(torch.float32)
        acc[row] = cur
    out = {}
    for row, vals in acc.items():
        if is_int:
            out[row] = [v & 0xFFFFFFFF for v in vals]
        else:
            out[row] = [int(golden.f32_bits(golden.canonical_nan(v.reshape(1)))[0]) for v in vals]
    return out


@pytest.mark.parametrize("axpy", [False, True], ids=["dot", "axpy"])
@pytest.mark.parametrize("dtype", list(Dtype))
def test_reducer_matches_sequential_sums(dtype, axpy):
    rng = random.Random(31 * int(dtype) + axpy)
    slots, seen = [], set()
    for n in range(14):
        row = rng.randrange(4)
        clear = row not in seen or rng.random() < 0.15   # first use of a row always clears
        seen.add(row)
        share = 0.25 if n % 2 else 0.0
        slots.append((row, clear, random_word(rng, dtype, share), random_word(rng, dtype, share)))
    got = run_reducer(dtype, axpy, slots)
    want = model(dtype, axpy, slots)
    lanes = dtype.info.lanes if axpy else 1
    for row, vals in want.items():
        assert [hex(v) for v in got[row][:lanes]] == [hex(v) for v in vals[:lanes]], f"row {row}"


def test_clear_discards_old_sum():
    """A slot with ``clear`` starts from +0, whatever the RAM held."""
    w = int.from_bytes(bytes.fromhex("003c" * 8), "little")          # eight FP16 1.0
    slots = [(0, True, w, w), (0, False, w, w), (0, True, w, w)]
    got = run_reducer(Dtype.FP16, False, slots)
    assert got[0][0] == 0x41000000                                    # 8.0, not 24.0


def test_checker_sees_a_wrong_sum():
    w = int.from_bytes(bytes.fromhex("003c" * 8), "little")
    got = run_reducer(Dtype.FP16, False, [(1, True, w, w)])
    assert got[1][0] == 0x41000000 and got[1][0] != 0x40E00000
