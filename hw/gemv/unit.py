"""One GEMV unit: a bit-serial multiplier unit and its lane reducer, as one replicable block.

The GEMV engine is ``n_units`` copies of this block plus shared control; the
only per-unit input is the unit's weight word, everything else is broadcast.
Keeping the pair in one component lets builds and synthesis treat it as one
module that is elaborated once and instantiated ``n_units`` times
(``GemvEngine(hierarchical=True)``).

Cycle behaviour: that of ``BitSerialMultiplierUnit`` (multiply stage,
``serial_digits`` cycles per activation) feeding ``LaneReducer`` (one lane per
cycle); ``load`` moves the finished lane products from the first to the second
(see both modules).
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In

from ndpdimm.hw.formats import WORD_BITS
from ndpdimm.hw.gemv.lane_reducer import LaneReducer, check_max_batch, lane_walk_members
from ndpdimm.hw.gemv.multiplier import BitSerialMultiplierUnit, check_radix_bits

__all__ = ["GemvUnit", "GEMV_UNIT_MODULE", "gemv_unit_signature"]

#: Verilog module name of the unit in hierarchical netlists.
GEMV_UNIT_MODULE = "gemv_unit"


def gemv_unit_signature(max_batch: int) -> wiring.Signature:
    """Ports of a GemvUnit (also used to instantiate it as a Verilog module)."""
    return wiring.Signature({
        "dtype": In(2),
        "axpy": In(1),
        # multiply stage
        "weight_in": In(WORD_BITS),
        "load_weight": In(1),
        "act": In(WORD_BITS),
        "run": In(1),
        "first": In(1),
        # reduce stage
        "load": In(1),
        "act_word": In(WORD_BITS),
        **lane_walk_members(max_batch),
    })


class GemvUnit(wiring.Component):
    """Multiplier unit + lane reducer (see module docstring)."""

    def __init__(self, radix_bits: int = 1, max_batch: int = 16):
        self.radix_bits = check_radix_bits(radix_bits)
        self.max_batch = check_max_batch(max_batch)
        super().__init__(gemv_unit_signature(self.max_batch))

    def elaborate(self, platform):
        m = Module()
        m.submodules.multiplier = mul = BitSerialMultiplierUnit(self.radix_bits)
        m.submodules.reducer = red = LaneReducer(self.max_batch)
        for name in ("dtype", "weight_in", "load_weight", "act", "run", "first"):
            m.d.comb += getattr(mul, name).eq(getattr(self, name))
        for name in ("dtype", "axpy", "load", "act_word", "add", "lane", "clear", "last",
                     "row", "read_row"):
            m.d.comb += getattr(red, name).eq(getattr(self, name))
        m.d.comb += [
            red.weight_word.eq(mul.weight_word),
            red.fp_mant.eq(mul.fp_mant),
            red.int_prod.eq(mul.int_prod),
            self.acc_row.eq(red.acc_row),
        ]
        return m
