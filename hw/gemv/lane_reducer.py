"""Lane reducer: turns one unit's lane products into FP32/INT32 accumulators.

Each multiplier unit has one lane reducer. One adder walks the lanes, one lane
per cycle, in lane order 0, 1, ..., L-1 (L = 8 for FP16/BF16, 16 for INT8),
reading each lane's product straight from its datapath register in the
multiplier (``products``; the engine skews the datapaths so that lane ``l`` is
finished and still held in the cycle it is reduced, see
``hw/gemv/sequencer.py``):

* lane product -> FP32: the datapath holds fraction x fraction; the hidden
  bits are added back here (``sig_w*sig_a = fw*fa + 2**F*(hw*fa + ha*fw) +
  2**(2F)*hw*ha``), then ``ProductToFp32`` (exact for FP16; IEEE RNE to Inf or
  into the subnormal range for BF16 products that leave FP32's range);
  INT8 products are sign-extended to INT32. INT8 reduce lane ``k`` is INT8
  lane ``2*(k mod 8) + k // 8`` (datapath ``k mod 8``, pass ``k // 8``);
* accumulate: IEEE binary32 RNE addition (``Fp32Adder``), or INT32 addition
  with two's-complement wrap-around.

The weight lane of the lane being reduced is prefetched one cycle ahead from
the unit's weight word (``pre_lane``, a 16-bit register): the engine loads the
next weight word lane by lane, lane ``l`` in the cycle the reducer prefetches
it. The activation lane comes from the engine (``act_lane``), which holds the
activation words for all units.

Mode DOT (dense GEMV / row gather): all lanes of a word add into one
accumulator per batch element, so the reduction order of an output is plain
column order k = 0, 1, ..., K-1 (lanes within a word, words in order; INT8
sums are exact modulo 2**32, so their lane order is immaterial). Mode AXPY
(column gather): lane l adds into its own accumulator l.

Why one adder walking the lanes and not a 7-adder tree: a bit-serial unit
needs ``serial_digits`` (8-11) cycles per activation anyway, so one adder that
serves one lane per cycle keeps up for FP16/BF16 (8 lanes) at one eighth of
the adder area; INT8 (16 lanes) is then adder-bound at 16 cycles per word.

Accumulators live in a small RAM per unit, one row per batch element (row =
16 x 32 bits, lane-granular writes), read through a transparent synchronous
port. Cycle behaviour: the row is addressed (``read_row``) in the transfer
cycle; lanes are added in the following L cycles, each writing its sum back
(DOT: accumulator 0 in every lane cycle, read back through the transparent
port in the next, so the running sum needs no register of its own; AXPY:
accumulator l in lane l's cycle). ``clear`` starts the sums from +0.0 / 0 instead of
the RAM (first word of a new output group), so no clearing pass is needed.
The RAM's read port is shared with the engine's result drain (``acc_row``).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import ACC_BITS, WORD_BITS, Dtype, check_int
from ndpdimm.hw.gemv.fp32_arith import Fp32Adder, ProductToFp32
from ndpdimm.hw.gemv.multiplier import (
    FP_LANES,
    FP_MANT_BITS,
    INT_LANES,
    check_radix_bits,
    product_shift,
    register_bits,
)

__all__ = ["LaneReducer", "ACC_LANES", "lane_walk_members"]

#: Accumulators per batch row (enough for INT8's 16 lanes in AXPY mode).
ACC_LANES = INT_LANES


def check_max_batch(max_batch) -> int:
    return check_int("max_batch", max_batch, 1, 64)


def lane_walk_members(max_batch: int) -> dict:
    """The ports that walk the lanes and address the accumulator RAM (shared with GemvUnit)."""
    row = range(max(check_max_batch(max_batch), 2))
    return {
        "add": In(1),
        "lane": In(range(ACC_LANES)),
        "pre_lane": In(range(FP_LANES)),
        "act_lane": In(16),
        "clear": In(1),
        "row": In(row),
        # accumulator RAM read port (slot prefetch and result drain)
        "read_row": In(row),
        "acc_row": Out(data.ArrayLayout(ACC_BITS, ACC_LANES)),
    }


def significand_product(m: Module, dtype, frac_product, w, a):
    """``sig(w) * sig(a)`` of 16-bit floats from ``frac_product = frac(w) * frac(a)`` (22 bits)."""
    is_bf16 = dtype == Dtype.BF16
    fp16, bf16 = Dtype.FP16.info, Dtype.BF16.info

    def fields(x):
        hidden = Mux(is_bf16, x[bf16.frac_bits:15].any(), x[fp16.frac_bits:15].any())
        return hidden, Mux(is_bf16, x[:bf16.frac_bits], x[:fp16.frac_bits])

    hw, fw = fields(w)
    ha, fa = fields(a)
    cross = Signal(fp16.frac_bits + 1)
    m.d.comb += cross.eq(Mux(ha, fw, 0) + Mux(hw, fa, 0))
    both = hw & ha
    hidden = [(cross + (both << f)) << f for f in (fp16.frac_bits, bf16.frac_bits)]
    mant = Signal(FP_MANT_BITS)
    m.d.comb += mant.eq(frac_product + Mux(is_bf16, hidden[1], hidden[0]))
    return mant


class LaneReducer(wiring.Component):
    """Per-unit lane reducer and accumulator RAM (see module docstring)."""

    def __init__(self, max_batch: int = 16, radix_bits: int = 1):
        self.max_batch = check_max_batch(max_batch)
        self.radix_bits = check_radix_bits(radix_bits)
        super().__init__({
            "dtype": In(2),
            "axpy": In(1),
            # the multiplier's datapath registers and held weight word
            "products": In(data.ArrayLayout(register_bits(self.radix_bits), FP_LANES)),
            "weight_word": In(WORD_BITS),
            **lane_walk_members(self.max_batch),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.radix_bits
        is_int8 = self.dtype == Dtype.INT8
        is_bf16 = self.dtype == Dtype.BF16

        # the weight lane of the next lane, one cycle ahead (the engine reloads lane l after it)
        w_lane = Signal(16)
        m.d.sync += w_lane.eq(Array(self.weight_word.word_select(i, 16)
                                    for i in range(FP_LANES))[self.pre_lane])
        raw = Array(self.products[i] for i in range(FP_LANES))[self.lane[:3]]

        fp16_shift, bf16_shift = product_shift(Dtype.FP16, r), product_shift(Dtype.BF16, r)
        frac_product = Signal(2 * Dtype.FP16.info.frac_bits)
        m.d.comb += frac_product.eq(Mux(is_bf16, raw[bf16_shift:], raw[fp16_shift:]))
        mant = significand_product(m, self.dtype, frac_product, w_lane, self.act_lane)
        int_shift = product_shift(Dtype.INT8, r)
        int_product = raw[int_shift:int_shift + 16].as_signed()

        m.submodules.acc_ram = acc_ram = Memory(
            shape=unsigned(ACC_BITS * ACC_LANES), depth=self.max_batch, init=[])
        write = acc_ram.write_port(granularity=ACC_BITS)
        read = acc_ram.read_port(transparent_for=(write,))
        m.d.comb += [
            read.addr.eq(self.read_row),
            self.acc_row.eq(read.data),
        ]

        # the accumulator this lane adds into, and its value before the add; INT8 reduce lane
        # k is INT8 lane 2*(k mod 8) + k // 8 (datapath k mod 8, pass k // 8)
        data_lane = Mux(is_int8, Cat(self.lane[3], self.lane[:3]), self.lane)
        acc_lane = Mux(self.axpy, data_lane, 0)
        # lane selections are case muxes (Array), not variable shifts of the whole row: the
        # same logic, but Verilator evaluates a shift of a 512-bit row word by word
        ram_lanes = Array(read.data.word_select(i, ACC_BITS) for i in range(ACC_LANES))
        # DOT's running sum is accumulator 0 itself (written every lane, read back next cycle)
        current = Mux(self.clear & (self.axpy | (self.lane == 0)), 0, ram_lanes[acc_lane])

        m.submodules.to_fp32 = to_fp32 = ProductToFp32()
        m.submodules.adder = adder = Fp32Adder()
        m.d.comb += [
            to_fp32.dtype.eq(self.dtype),
            to_fp32.w.eq(w_lane),
            to_fp32.a.eq(self.act_lane),
            to_fp32.mant_product.eq(mant),
            adder.a.eq(current),
            adder.b.eq(to_fp32.product),
        ]
        int_sum = Signal(ACC_BITS)
        m.d.comb += int_sum.eq(current + int_product)
        result = Mux(is_int8, int_sum, adder.sum)

        lane_enable = Signal(ACC_LANES)
        m.d.comb += lane_enable.eq(Mux(self.axpy, 1 << data_lane, 1))
        m.d.comb += [
            write.addr.eq(self.row),
            write.data.eq(Cat(*([result] * ACC_LANES))),
            write.en.eq(Mux(self.add, lane_enable, 0)),
        ]
        return m
