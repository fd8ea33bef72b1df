"""Amaranth-simulator bench of one GEMV unit driven cycle by cycle as the engine drives it.

``UnitBench`` is a ``LaneSequencer`` (the engine's shared part) wired to one
``BitSerialMultiplierUnit`` and its ``LaneReducer`` exactly as ``GemvEngine``
and ``GemvUnit`` wire them, with the engine's slot bookkeeping replaced by a
schedule computed here (:func:`schedule`): slot ``s`` starts in cycle ``t[s]``,
its products move to the reducer in ``T[s]``, and both follow the engine's
rules (``T >= t + D``, ``T >= T_prev + L``, next start ``>= T``,
``>= t + 8`` and, for INT8, ``>= T + 8``) plus seeded random idle cycles.
:func:`run_unit` returns what the reducer read from every datapath (each raw
register in the cycle its lane is reduced) and the accumulator rows at the
end, so tests compare both with references. The weight word is driven only
while its stream would hold it (until ``weights_ready``), garbage otherwise.
"""

import random

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from amaranth.sim import Simulator

from ndpdimm.hw.formats import WORD_BITS, Dtype, serial_digits
from ndpdimm.hw.gemv.lane_reducer import ACC_LANES, LaneReducer
from ndpdimm.hw.gemv.multiplier import BitSerialMultiplierUnit, multiplier_signature
from ndpdimm.hw.gemv.sequencer import START_SPACING, LaneSequencer

__all__ = ["UnitBench", "schedule", "run_unit"]


class UnitBench(wiring.Component):
    """Sequencer + one unit's multiplier and reducer; the products are visible."""

    def __init__(self, radix_bits: int = 1, max_batch: int = 4):
        self.radix_bits, self.max_batch = radix_bits, max_batch
        self._mul = BitSerialMultiplierUnit(radix_bits)
        self._red = LaneReducer(max_batch, radix_bits)
        self._seq = LaneSequencer(radix_bits)
        super().__init__({
            "dtype": In(2), "axpy": In(1), "start": In(1), "load_weight": In(1),
            "weight_in": In(WORD_BITS), "act": In(WORD_BITS), "transfer": In(1),
            "add": In(1), "lane": In(range(16)), "clear": In(1),
            "row": In(range(max(max_batch, 2))), "read_row": In(range(max(max_batch, 2))),
            "start_ok": Out(1), "weights_ready": Out(1),
            "products": Out(self._mul.products.shape()),
            "acc_row": Out(self._red.acc_row.shape()),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.seq, m.submodules.mul, m.submodules.red = seq, mul, red = \
            self._seq, self._mul, self._red
        for name in ("dtype", "start", "load_weight", "act", "transfer", "lane"):
            m.d.comb += getattr(seq, name).eq(getattr(self, name))
        for name in multiplier_signature(self.radix_bits):
            if name not in ("dtype", "weight_in"):
                m.d.comb += getattr(mul, name).eq(getattr(seq, name))
        for name in ("add", "lane", "clear", "row", "read_row", "dtype", "axpy"):
            m.d.comb += getattr(red, name).eq(getattr(self, name))
        m.d.comb += [
            mul.dtype.eq(self.dtype), mul.weight_in.eq(self.weight_in),
            red.pre_lane.eq(seq.pre_lane), red.act_lane.eq(seq.red_a),
            red.products.eq(mul.products), red.weight_word.eq(mul.weight_word),
            self.products.eq(mul.products), self.acc_row.eq(red.acc_row),
            self.start_ok.eq(seq.start_ok), self.weights_ready.eq(seq.weights_ready),
        ]
        return m


def schedule(dtype: Dtype, radix_bits: int, n_slots: int, rng: random.Random, idle_prob: float):
    """(t, T) per slot, by the engine's rules with random idle cycles."""
    d = serial_digits(dtype, radix_bits)
    lanes = dtype.info.lanes
    starts, transfers = [], []
    earliest = 0
    for s in range(n_slots):
        while rng.random() < idle_prob:
            earliest += 1                            # activation word late
        t = earliest
        transfer = t + d
        if transfers:
            transfer = max(transfer, transfers[-1] + lanes)
        while rng.random() < idle_prob:
            transfer += 1                            # reducer busy (drain)
        starts.append(t)
        transfers.append(transfer)
        earliest = max(transfer, t + START_SPACING,
                       transfer + START_SPACING if dtype == Dtype.INT8 else 0)
    return starts, transfers


def run_unit(dtype: Dtype, axpy: bool, slots: list, radix_bits: int = 1, max_batch: int = 4,
             seed: int = 0, idle_prob: float = 0.0):
    """Run ``slots`` = [(weight or None to keep the held word, act, row, clear)] through one unit.

    Returns ``(reads, rows)``: ``reads[s][k]`` the raw datapath register the reducer
    read for its lane ``k`` of slot ``s``; ``rows`` the accumulator rows at the end.
    """
    rng = random.Random(seed)
    starts, transfers = schedule(dtype, radix_bits, len(slots), rng, idle_prob)
    lanes = dtype.info.lanes
    dut = UnitBench(radix_bits, max_batch)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    reads = [[None] * lanes for _ in slots]
    rows = {}
    end = transfers[-1] + lanes + 2
    by_start = {t: s for s, t in enumerate(starts)}
    by_transfer = {T: s for s, T in enumerate(transfers)}
    by_lane = {T + 1 + k: (s, k) for s, T in enumerate(transfers) for k in range(lanes)}

    async def tb(ctx):
        ctx.set(dut.dtype, dtype)
        ctx.set(dut.axpy, axpy)
        held_until, weight = -1, 0
        for cycle in range(end):
            s = by_start.get(cycle)
            ctx.set(dut.start, s is not None)
            if s is not None:
                assert ctx.get(dut.start_ok), f"cycle {cycle}: slot {s} may not start"
                new_weight = slots[s][0]
                ctx.set(dut.load_weight, new_weight is not None)
                ctx.set(dut.act, slots[s][1])
                if new_weight is not None:
                    weight, held_until = new_weight, cycle + START_SPACING - 1
            else:
                ctx.set(dut.act, rng.getrandbits(WORD_BITS))
            ctx.set(dut.weight_in, weight if cycle <= held_until else rng.getrandbits(WORD_BITS))
            ready = ctx.get(dut.weights_ready)
            assert ready == (cycle == held_until), f"cycle {cycle}: weights_ready {ready}"
            reducing = by_lane.get(cycle)
            if reducing is not None:
                slot, lane = reducing
                _, _, row, clear = slots[slot]
                reads[slot][lane] = ctx.get(dut.products[lane % 8])
                ctx.set(dut.lane, lane)
                ctx.set(dut.clear, clear)
                ctx.set(dut.row, row)
                ctx.set(dut.read_row, row)
            ctx.set(dut.add, reducing is not None)
            r = by_transfer.get(cycle)
            ctx.set(dut.transfer, r is not None)
            if r is not None:
                ctx.set(dut.read_row, slots[r][2])
            await ctx.tick()
        ctx.set(dut.add, 0)
        for row in range(max_batch):
            ctx.set(dut.read_row, row)
            await ctx.tick()
            rows[row] = [ctx.get(dut.acc_row[i]) for i in range(ACC_LANES)]

    sim.add_testbench(tb)
    sim.run()
    return reads, rows
