"""A parallel FP16 multiplier array: the comparison circuit for the bit-serial multiplier unit.

Not part of the accelerator. It answers "how much smaller is a bit-serial
unit than parallel multipliers of the same throughput?" by synthesizing both
with the same flow and library (``synth/report.py`` prints the head-to-head).

What one multiplier does: the same job as one lane of
``hw/gemv/multiplier.py``, in one cycle instead of ``serial_digits`` cycles.
Each cycle it takes one FP16 (or BF16, by ``dtype``) weight and activation
into operand registers and, one cycle later, registers the exact unsigned
significand product (11 x 11 -> 22 bits, hidden bits included; zero /
subnormal exponents give a zero hidden bit), which is what the bit-serial unit
hands to the lane reducer (signs, exponents and special cases are resolved
there for both). Latency 2 cycles, one product per cycle per multiplier.

Throughput matching (:func:`matching_multipliers`): one bit-serial unit
yields ``FP_LANES / serial_digits(FP16, radix_bits)`` FP16 products per cycle
(8 / 11 = 0.73 at radix 1); the array gets the smallest whole number of
parallel multipliers that is not slower: 1 at radix 1. The report also
normalises both areas per product per cycle. The bit-serial unit also does
16 INT8 lanes, which this array does not: the comparison favours the array.
"""

import math

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import Dtype, check_int, serial_digits
from ndpdimm.hw.gemv.multiplier import FP_LANES, FP_MANT_BITS, significand

__all__ = ["ParallelFp16Multipliers", "matching_multipliers", "products_per_cycle"]


def products_per_cycle(radix_bits: int = 1) -> float:
    """FP16 products per cycle of one bit-serial multiplier unit."""
    return FP_LANES / serial_digits(Dtype.FP16, radix_bits)


def matching_multipliers(radix_bits: int = 1) -> int:
    """Parallel FP16 multipliers (one product per cycle each) matching one bit-serial unit."""
    return math.ceil(products_per_cycle(radix_bits))


class ParallelFp16Multipliers(wiring.Component):
    """``n_multipliers`` single-cycle FP16/BF16 significand multipliers (see module docstring)."""

    def __init__(self, n_multipliers: int = 1):
        self.n = check_int("n_multipliers", n_multipliers, 1, 256)
        super().__init__({
            "dtype": In(2),
            "w": In(data.ArrayLayout(16, self.n)),
            "a": In(data.ArrayLayout(16, self.n)),
            "fp_mant": Out(data.ArrayLayout(FP_MANT_BITS, self.n)),
        })

    def elaborate(self, platform):
        m = Module()
        fp16, bf16 = Dtype.FP16.info, Dtype.BF16.info
        is_bf16 = Signal()
        m.d.sync += is_bf16.eq(self.dtype == Dtype.BF16)
        for i in range(self.n):
            w, a = Signal(16, name=f"w{i}"), Signal(16, name=f"a{i}")
            m.d.sync += [w.eq(self.w[i]), a.eq(self.a[i])]

            def sig(x):
                return Mux(is_bf16, significand(x, bf16.exp_bits, bf16.frac_bits),
                           significand(x, fp16.exp_bits, fp16.frac_bits))
            prod = Signal(FP_MANT_BITS, name=f"prod{i}")
            m.d.sync += prod.eq(sig(w) * sig(a))
            m.d.comb += self.fp_mant[i].eq(prod)
        return m
