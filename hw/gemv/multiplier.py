"""Bit-serial multiplier unit: one 128-bit weight word times one activation word.

A unit holds one weight word (8 FP16/BF16 lanes or 16 INT8 lanes) and
multiplies every lane by the matching lane of an activation word that is held
in parallel (broadcast by the engine to all units). The weight operand is
consumed serially: each cycle the unit takes the next ``radix_bits``-bit digit of
every lane's weight significand, most significant digit first, and does one
shift-and-add per lane::

    pp <- (first ? 0 : pp << radix_bits) + a_significand * digit

Cycle behaviour
---------------
* ``serial_digits(dtype, radix_bits)`` cycles per (weight word, activation):
  FP16 walks 11 significand bits (hidden bit included), BF16 8, INT8 the 8
  two's-complement bits (the top digit carries negative weight). With the
  default ``radix_bits=1``: FP16 11 cycles, BF16 8, INT8 8.
* A new weight word is taken in the cycle ``load_weight`` is high (its first
  digit is used in that same cycle) and held for as many activations as the
  batch has; a new multiplication starts in any cycle ``first`` is high (the
  lane shift registers reload from the held word), so back-to-back
  multiplications have no bubble. ``run`` low freezes all state.
* The unit produces raw lane products only: the unsigned significand product
  (``fp_mant``, up to 22 bits) for FP16/BF16 and the exact signed product
  (``int_prod``, 16 bits) for INT8. Signs, exponents and IEEE special cases are
  resolved by the lane reducer from the held operands (``weight_word``).

Area: per FP lane an 11-bit x ``radix_bits`` partial-product adder and a 22-bit
register plus an 11-bit weight shift register; per INT8 lane an 8-bit x
``radix_bits`` adder, a 16-bit register and an 8-bit shift register.
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS, Dtype, check_int, serial_digits

__all__ = ["BitSerialMultiplierUnit", "FP_LANES", "INT_LANES", "FP_MANT_BITS"]

FP_LANES = Dtype.FP16.info.lanes
INT_LANES = Dtype.INT8.info.lanes
#: Width of an FP16 significand product (11 x 11 bits); BF16 uses the low 16.
FP_MANT_BITS = 2 * Dtype.FP16.info.serial_bits


def max_serial_digits(radix_bits: int) -> int:
    return max(serial_digits(d, radix_bits) for d in Dtype)


def check_radix_bits(radix_bits) -> int:
    return check_int("radix_bits", radix_bits, 1, Dtype.FP16.info.serial_bits)


def significand(bits, exp_bits: int, frac_bits: int):
    """Significand of a 16-bit float incl. the hidden bit (0 for zero/subnormal exponent)."""
    exponent = bits[frac_bits:frac_bits + exp_bits]
    return Mux(exponent != 0, 1 << frac_bits, 0) | bits[:frac_bits]


class BitSerialMultiplierUnit(wiring.Component):
    """One bit-serial multiplier unit (see module docstring for cycle behaviour).

    Parameters
    ----------
    radix_bits : int
        Weight bits consumed per cycle (1 = bit-serial).
    """

    def __init__(self, radix_bits: int = 1):
        self.radix_bits = check_radix_bits(radix_bits)
        self.n_digits = max_serial_digits(self.radix_bits)
        super().__init__({
            "dtype": In(2),
            "weight_in": In(WORD_BITS),
            "load_weight": In(1),
            "act": In(WORD_BITS),
            "run": In(1),
            "first": In(1),
            "weight_word": Out(WORD_BITS),
            "fp_mant": Out(data.ArrayLayout(FP_MANT_BITS, FP_LANES)),
            "int_prod": Out(data.ArrayLayout(signed(16), INT_LANES)),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.radix_bits
        weight_reg = Signal(WORD_BITS)
        with m.If(self.load_weight):
            m.d.sync += weight_reg.eq(self.weight_in)
        weight = Mux(self.load_weight, self.weight_in, weight_reg)
        m.d.comb += self.weight_word.eq(weight_reg)

        fp16, bf16 = Dtype.FP16.info, Dtype.BF16.info
        d16 = serial_digits(Dtype.FP16, r)
        dbf = serial_digits(Dtype.BF16, r)
        d8 = serial_digits(Dtype.INT8, r)

        # Each lane walks its weight significand MSB first through a shift register
        # that is (re)loaded from the held word whenever a multiplication starts.
        fp_width = d16 * r                       # FP16 needs the most digits
        is_bf16 = self.dtype == Dtype.BF16
        for lane in range(FP_LANES):
            w = weight.word_select(lane, 16)
            a = self.act.word_select(lane, 16)
            sig_a = Mux(is_bf16, significand(a, bf16.exp_bits, bf16.frac_bits),
                        significand(a, fp16.exp_bits, fp16.frac_bits))
            # left-align the zero-padded significand so digit 0 is always the top r bits
            aligned = Mux(is_bf16, significand(w, bf16.exp_bits, bf16.frac_bits) << (fp_width - dbf * r),
                          significand(w, fp16.exp_bits, fp16.frac_bits))
            shreg = Signal(fp_width, name=f"fp_w{lane}")
            source = Mux(self.first, aligned, shreg)
            digit = source[fp_width - r:]
            pp = Signal(FP_MANT_BITS, name=f"fp_pp{lane}")
            with m.If(self.run):
                m.d.sync += [
                    shreg.eq(source << r),
                    pp.eq(Mux(self.first, 0, pp << r) + sig_a * digit),
                ]
            m.d.comb += self.fp_mant[lane].eq(pp)

        int_width = d8 * r
        for lane in range(INT_LANES):
            w = Signal(signed(int_width), name=f"int_w{lane}_ext")
            m.d.comb += w.eq(weight.word_select(lane, 8).as_signed())   # sign-extend to the digits
            a = self.act.word_select(lane, 8).as_signed()
            shreg = Signal(int_width, name=f"int_w{lane}")
            source = Mux(self.first, w.as_unsigned(), shreg)
            raw = source[int_width - r:]
            # the most significant digit of a two's-complement number carries negative weight
            digit = Mux(self.first, raw.as_signed(), raw.as_unsigned())
            pp = Signal(signed(16), name=f"int_pp{lane}")
            with m.If(self.run):
                m.d.sync += [
                    shreg.eq(source << r),
                    pp.eq(Mux(self.first, 0, pp << r) + a * digit),
                ]
            m.d.comb += self.int_prod[lane].eq(pp)
        return m
