"""Bit-serial multiplier unit: one 128-bit weight word times the lanes of one activation word.

A unit holds one weight word (8 FP16/BF16 lanes or 16 INT8 lanes) and eight
*datapaths*, one per 16-bit lane. Everything all units share lives in the
engine's :class:`~ndpdimm.hw.gemv.sequencer.LaneSequencer`, not here: the
activation words, their decode into per-datapath operands (fraction bits or
signed INT8 values, negated for an INT8 sign digit), the step counting and the
per-datapath control. A unit gets, per datapath ``j``, ``first[j]``,
``run[j]``, ``hi_byte[j]`` and the operand ``a_top[j]`` (plus ``a_rest[j]``
when ``radix_bits > 1``).

Datapath (classic LSB-first shift-and-add, weight digits in the low part)
--------------------------------------------------------------------------
A datapath is one register ``R = {hi (10 bits), lo (Lw bits)}``,
``Lw = radix_bits * ceil(10 / radix_bits)`` (20 bits at radix 1). In its
first cycle it loads ``lo`` with the weight digits of its lane (FP16: the 10
fraction bits; BF16: the 7 fraction bits; INT8: the lane's low byte, or its
high byte when ``hi_byte``, sign-extended) and ``hi`` with 0; each cycle with
``run`` high it takes digit ``d = lo[:r]`` and does::

    P = hi + d * a        (r + 10 bits: unsigned for FP, two's complement for INT8)
    R <- {P, lo >> r}

so the weight digits shift out of ``lo`` as the product bits shift in. After
``frac_steps(dtype, r)`` steps (FP16 10, BF16 7, INT8 8 at radix 1) ``R``
holds ``fw * fa`` (FP: fraction times fraction, hidden bits excluded) or the
signed INT8 product, shifted left by ``product_shift(dtype, r)`` (0, 3, 2 at
radix 1). The hidden bits are added back once per unit by the lane reducer,
where the operands' exponents are decoded anyway:
``sig_w * sig_a = fw*fa + 2**F * (hw*fa + ha*fw) + 2**(2F) * hw*ha``.

INT8: the 16 lanes run as 8 pairs through the 8 datapaths in two passes
(datapath ``j`` does lane ``2j``, then lane ``2j+1``): INT8 slots take 16
cycles anyway (the reducer's 16 lanes), so the second pass costs no
throughput and INT8 needs no registers of its own.

Cycle behaviour
---------------
* ``wload[j]`` high: weight lane ``j`` (bits ``16j..16j+15``) is loaded from
  ``weight_in`` at the end of the cycle. The engine loads lane ``j`` ``j``
  cycles after the slot starts (the weight beat is held by its stream until
  then), so each lane's old word stays readable until the reducer has used it.
* ``first[j]`` high: datapath ``j`` starts a product (first step done in the
  same cycle, from the held weight lane). ``run[j]`` low freezes it, so a
  finished product stays in ``products[j]`` until the reducer reads it.
* The engine skews datapath ``j`` by ``j`` cycles, matching the reducer's
  one-lane-per-cycle walk: each product is read the cycle its datapath starts
  the next one, so no product register is double-buffered.

Area: per datapath a 20-bit register (radix 1) and an 11-bit adder; per unit
the 128-bit weight word. 288 flip-flops at radix 1. None of them has a reset:
a weight lane is read only after ``wload`` loaded it and a datapath's product
only after ``first`` started it, so their contents before that are never
used; without a reset each 16-bit weight lane and each datapath register
changes only with its own enable (``wload[j]``, ``run[j]``), and synthesis
gates its clock instead of putting a multiplexer before every flip-flop
(``synth/flow.py``, Clock gating).
"""

import math

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS, Dtype, check_int, serial_digits

__all__ = ["BitSerialMultiplierUnit", "FP_LANES", "INT_LANES", "FP_MANT_BITS", "OPERAND_BITS",
           "frac_steps", "product_shift", "register_bits", "multiplier_signature"]

FP_LANES = Dtype.FP16.info.lanes
INT_LANES = Dtype.INT8.info.lanes
#: Width of an FP16 significand product (11 x 11 bits); BF16 uses the low 16.
FP_MANT_BITS = 2 * Dtype.FP16.info.serial_bits
#: Width of ``hi`` in a datapath: FP16's 10 fraction bits (the widest operand).
_HI_BITS = Dtype.FP16.info.frac_bits
#: Signed width of an activation operand: a 10-bit fraction or an INT8 value in -128..128.
OPERAND_BITS = _HI_BITS + 1


def max_serial_digits(radix_bits: int) -> int:
    return max(serial_digits(d, radix_bits) for d in Dtype)


def check_radix_bits(radix_bits) -> int:
    return check_int("radix_bits", radix_bits, 1, Dtype.FP16.info.serial_bits)


def significand(bits, exp_bits: int, frac_bits: int):
    """Significand of a 16-bit float incl. the hidden bit (0 for zero/subnormal exponent)."""
    exponent = bits[frac_bits:frac_bits + exp_bits]
    return Mux(exponent != 0, 1 << frac_bits, 0) | bits[:frac_bits]


def _walk_bits(dtype: Dtype) -> int:
    """Weight bits a datapath walks: the fraction (FP, hidden bit excluded) or the 8 INT bits."""
    info = Dtype.parse(dtype).info
    return info.frac_bits if info.is_float else info.elem_bits


def frac_steps(dtype: Dtype, radix_bits: int) -> int:
    """Steps (cycles with ``run``) of one datapath product: at most ``serial_digits``."""
    return math.ceil(_walk_bits(dtype) / radix_bits)


def _lo_bits(radix_bits: int) -> int:
    return radix_bits * frac_steps(Dtype.FP16, radix_bits)


def register_bits(radix_bits: int) -> int:
    """Width of one datapath register (20 at radix 1)."""
    return _lo_bits(radix_bits) + _HI_BITS


def product_shift(dtype: Dtype, radix_bits: int) -> int:
    """Left shift of the product in a finished datapath register."""
    return _lo_bits(radix_bits) - radix_bits * frac_steps(dtype, radix_bits)


def _by_dtype(is_dtype: dict, wanted: dict, default):
    """A mux over the dtypes that want distinct values (dtypes absent from ``wanted``: any)."""
    values = list(wanted.items())
    if not values:
        return default
    result = values[-1][1]
    for d, v in reversed(values[:-1]):
        if v is not result:
            result = Mux(is_dtype[d], v, result)
    return result


def multiplier_signature(radix_bits: int) -> dict:
    """Ports of the unit (the GEMV unit forwards them)."""
    operands = data.ArrayLayout(signed(OPERAND_BITS), FP_LANES)
    return {
        "dtype": In(2),
        "weight_in": In(WORD_BITS),
        "wload": In(FP_LANES),
        "first": In(FP_LANES),
        "run": In(FP_LANES),
        "hi_byte": In(FP_LANES),
        "a_top": In(operands),
        **({"a_rest": In(operands)} if radix_bits > 1 else {}),
    }


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
            **multiplier_signature(self.radix_bits),
            "weight_word": Out(WORD_BITS),
            "products": Out(data.ArrayLayout(register_bits(self.radix_bits), FP_LANES)),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.radix_bits
        lo_bits = _lo_bits(r)
        sum_bits = _HI_BITS + r
        is_int8 = self.dtype == Dtype.INT8

        weight_reg = Signal(WORD_BITS, reset_less=True)
        for lane in range(FP_LANES):
            with m.If(self.wload[lane]):
                m.d.sync += weight_reg.word_select(lane, 16).eq(self.weight_in.word_select(lane, 16))
        m.d.comb += self.weight_word.eq(weight_reg)

        # lo's load value: each dtype's walk bits; bits a walk consumes past its width must be 0
        # (FP) or the sign (INT8; radix not dividing 8), bits it never reaches are free (they
        # end below the product, ``product_shift``) and take whatever costs no logic. The sign
        # digit's negative weight is the sequencer's (it sends -a for it).
        is_dtype = {d: self.dtype == d for d in Dtype}
        for j in range(FP_LANES):
            w = weight_reg.word_select(j, 16)
            byte = Mux(self.hi_byte[j], w[8:], w[:8])      # hi_byte: INT8 second pass only
            start_lo = Signal(lo_bits, name=f"dp{j}_load")
            for i in range(lo_bits):
                low = byte[i] if i < 8 else (w[i] if i < 16 else Const(0, 1))
                wanted = {}
                for d in Dtype:
                    width, consumed = _walk_bits(d), r * frac_steps(d, r)
                    if i < width:
                        wanted[d] = low
                    elif i < consumed:
                        wanted[d] = byte[7] if d == Dtype.INT8 else Const(0, 1)
                m.d.comb += start_lo[i].eq(_by_dtype(is_dtype, wanted, low))
            reg = Signal(register_bits(r), name=f"dp{j}", reset_less=True)
            lo = Mux(self.first[j], start_lo, reg[:lo_bits])
            hi = Mux(self.first[j], 0, reg[lo_bits:])
            # hi is unsigned for FP, two's complement for INT8: extend it to the sum's width
            hi_ext = Cat(hi, *([hi[-1] & is_int8] * r)).as_signed()
            addend = Const(0, signed(sum_bits))
            for i in range(r):
                operand = self.a_top[j] if i == r - 1 else self.a_rest[j]
                addend = addend + (Mux(lo[i], operand, 0) << i)
            p = Signal(sum_bits, name=f"dp{j}_sum")
            m.d.comb += p.eq(hi_ext + addend)
            with m.If(self.run[j]):
                m.d.sync += reg.eq(Cat(lo[r:], p))
            m.d.comb += self.products[j].eq(reg)
        return m
