"""One GEMV unit: a bit-serial multiplier unit and its lane reducer, as one replicable block.

The GEMV engine is ``n_units`` copies of this block plus shared control; the
only per-unit input is the unit's weight word, everything else is broadcast.
Keeping the pair in one component lets builds and synthesis treat it as one
module that is elaborated once and instantiated ``n_units`` times
(``GemvEngine(hierarchical=True)``).

Cycle behaviour: that of ``BitSerialMultiplierUnit`` (multiply stage: the
eight datapaths, skewed by the engine's ``LaneSequencer``) feeding
``LaneReducer`` (one lane per cycle, read straight from the datapath
registers); see the three modules. A unit holds only its weight word, its
datapath registers, the reducer's running sum and prefetched weight lane,
and its accumulator RAM: activation words, their decode and the step
counting are the engine's, broadcast to every unit.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ndpdimm.hw.gemv.lane_reducer import LaneReducer, check_max_batch, lane_walk_members
from ndpdimm.hw.gemv.multiplier import (
    BitSerialMultiplierUnit,
    check_radix_bits,
    multiplier_signature,
)

__all__ = ["GemvUnit", "GEMV_UNIT_MODULE", "gemv_unit_signature"]

#: Verilog module name of the unit in hierarchical netlists.
GEMV_UNIT_MODULE = "gemv_unit"


def gemv_unit_signature(max_batch: int, radix_bits: int = 1) -> wiring.Signature:
    """Ports of a GemvUnit (also used to instantiate it as a Verilog module)."""
    return wiring.Signature({
        "axpy": In(1),
        **multiplier_signature(radix_bits),        # multiply stage
        **lane_walk_members(max_batch),            # reduce stage
    })


class GemvUnit(wiring.Component):
    """Multiplier unit + lane reducer (see module docstring)."""

    def __init__(self, radix_bits: int = 1, max_batch: int = 16):
        self.radix_bits = check_radix_bits(radix_bits)
        self.max_batch = check_max_batch(max_batch)
        super().__init__(gemv_unit_signature(self.max_batch, self.radix_bits))

    def elaborate(self, platform):
        m = Module()
        m.submodules.multiplier = mul = BitSerialMultiplierUnit(self.radix_bits)
        m.submodules.reducer = red = LaneReducer(self.max_batch, self.radix_bits)
        for name in multiplier_signature(self.radix_bits):
            m.d.comb += getattr(mul, name).eq(getattr(self, name))
        for name, member in lane_walk_members(self.max_batch).items():
            if member.flow == In:
                m.d.comb += getattr(red, name).eq(getattr(self, name))
        m.d.comb += [
            red.dtype.eq(self.dtype),
            red.axpy.eq(self.axpy),
            red.weight_word.eq(mul.weight_word),
            red.products.eq(mul.products),
            self.acc_row.eq(red.acc_row),
        ]
        return m
