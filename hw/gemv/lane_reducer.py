"""Lane reducer: turns one unit's lane products into FP32/INT32 accumulators.

Each multiplier unit has one lane reducer. It latches the unit's raw lane
products (``load``), then one adder walks the lanes, one lane per cycle, in
lane order 0, 1, ..., L-1 (L = 8 for FP16/BF16, 16 for INT8):

* lane product -> FP32: ``ProductToFp32`` (exact for FP16; IEEE RNE to Inf or
  into the subnormal range for BF16 products that leave FP32's range);
  INT8 products are sign-extended to INT32;
* accumulate: IEEE binary32 RNE addition (``Fp32Adder``), or INT32 addition
  with two's-complement wrap-around.

Mode DOT (dense GEMV / row gather): all lanes of a word add into one
accumulator per batch element, so the reduction order of an output is plain
column order k = 0, 1, ..., K-1 (lanes within a word, words in order). Mode
AXPY (column gather): lane l adds into its own accumulator l.

Why one adder walking the lanes and not a 7-adder tree: a bit-serial unit
needs ``serial_digits`` (8-11) cycles per activation anyway, so one adder that
serves one lane per cycle keeps up for FP16/BF16 (8 lanes) at one eighth of
the adder area; INT8 (16 lanes) is then adder-bound at 16 cycles per word.

Accumulators live in a small RAM per unit, one row per batch element (row =
16 x 32 bits, lane-granular writes), read through a transparent synchronous
port. Cycle behaviour: the row is addressed (``read_row``) in the cycle the
products are loaded; lanes are added in the following L cycles; DOT keeps its
running sum in a 32-bit register and writes lane 0 in the last lane cycle,
AXPY writes lane l in lane l's cycle. ``clear`` starts the sums from +0.0 / 0
instead of the RAM (first word of a new output group), so no clearing pass is
needed. The RAM's read port is shared with the engine's result drain
(``acc_row``).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import ACC_BITS, WORD_BITS, Dtype, check_int
from ndpdimm.hw.gemv.fp32_arith import Fp32Adder, ProductToFp32
from ndpdimm.hw.gemv.multiplier import FP_LANES, FP_MANT_BITS, INT_LANES

__all__ = ["LaneReducer", "ACC_LANES", "lane_walk_members"]

#: Accumulators per batch row (enough for INT8's 16 lanes in AXPY mode).
ACC_LANES = INT_LANES

_fp_lane_products = data.StructLayout({"w": 16, "a": 16, "mant": FP_MANT_BITS})
#: The latched products of one unit: FP and INT views share the same flops.
ProductsLayout = data.UnionLayout({
    "fp": data.ArrayLayout(_fp_lane_products, FP_LANES),
    "int": data.ArrayLayout(signed(16), INT_LANES),
})


def check_max_batch(max_batch) -> int:
    return check_int("max_batch", max_batch, 1, 64)


def lane_walk_members(max_batch: int) -> dict:
    """The ports that walk the lanes and address the accumulator RAM (shared with GemvUnit)."""
    row = range(max(check_max_batch(max_batch), 2))
    return {
        "add": In(1),
        "lane": In(range(ACC_LANES)),
        "clear": In(1),
        "last": In(1),
        "row": In(row),
        # accumulator RAM read port (slot prefetch and result drain)
        "read_row": In(row),
        "acc_row": Out(data.ArrayLayout(ACC_BITS, ACC_LANES)),
    }


class LaneReducer(wiring.Component):
    """Per-unit lane reducer and accumulator RAM (see module docstring)."""

    def __init__(self, max_batch: int = 16):
        self.max_batch = check_max_batch(max_batch)
        super().__init__({
            "dtype": In(2),
            "axpy": In(1),
            # products of the unit, latched when `load` is high
            "load": In(1),
            "weight_word": In(WORD_BITS),
            "act_word": In(WORD_BITS),
            "fp_mant": In(data.ArrayLayout(FP_MANT_BITS, FP_LANES)),
            "int_prod": In(data.ArrayLayout(signed(16), INT_LANES)),
            **lane_walk_members(self.max_batch),
        })

    def elaborate(self, platform):
        m = Module()
        is_int8 = self.dtype == Dtype.INT8

        products = Signal(ProductsLayout)
        with m.If(self.load):
            with m.If(is_int8):
                m.d.sync += products.int.eq(self.int_prod)
            with m.Else():
                for lane in range(FP_LANES):
                    m.d.sync += [
                        products.fp[lane].w.eq(self.weight_word.word_select(lane, 16)),
                        products.fp[lane].a.eq(self.act_word.word_select(lane, 16)),
                        products.fp[lane].mant.eq(self.fp_mant[lane]),
                    ]

        m.submodules.acc_ram = acc_ram = Memory(
            shape=unsigned(ACC_BITS * ACC_LANES), depth=self.max_batch, init=[])
        write = acc_ram.write_port(granularity=ACC_BITS)
        read = acc_ram.read_port(transparent_for=(write,))
        m.d.comb += [
            read.addr.eq(self.read_row),
            self.acc_row.eq(read.data),
        ]

        # the accumulator this lane adds into, and its value before the add
        acc_lane = Mux(self.axpy, self.lane, 0)
        running = Signal(ACC_BITS)                    # DOT running sum
        # lane selections are case muxes (Array), not variable shifts of the whole row: the
        # same logic, but Verilator evaluates a shift of a 512-bit row word by word
        ram_lanes = Array(read.data.word_select(i, ACC_BITS) for i in range(ACC_LANES))
        from_ram = Mux(self.clear, 0, ram_lanes[acc_lane])
        fresh = self.axpy | (self.lane == 0)
        current = Mux(fresh, from_ram, running)

        fp_lane = Array(products.fp[i] for i in range(FP_LANES))[self.lane[:3]]
        m.submodules.to_fp32 = to_fp32 = ProductToFp32()
        m.submodules.adder = adder = Fp32Adder()
        m.d.comb += [
            to_fp32.dtype.eq(self.dtype),
            to_fp32.w.eq(fp_lane.w),
            to_fp32.a.eq(fp_lane.a),
            to_fp32.mant_product.eq(fp_lane.mant),
            adder.a.eq(current),
            adder.b.eq(to_fp32.product),
        ]
        int_sum = Signal(ACC_BITS)
        int_lane = Array(products.int[i] for i in range(INT_LANES))[self.lane]
        m.d.comb += int_sum.eq(current + int_lane.as_signed())
        result = Mux(is_int8, int_sum, adder.sum)

        with m.If(self.add):
            m.d.sync += running.eq(result)
        lane_enable = Signal(ACC_LANES)
        m.d.comb += lane_enable.eq(Mux(self.axpy, 1 << self.lane, Mux(self.last, 1, 0)))
        m.d.comb += [
            write.addr.eq(self.row),
            write.data.eq(Cat(*([result] * ACC_LANES))),
            write.en.eq(Mux(self.add, lane_enable, 0)),
        ]
        return m
