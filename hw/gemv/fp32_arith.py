"""Combinational IEEE-754 binary32 arithmetic for the GEMV engine's lane reducer.

Two blocks, both purely combinational (no clock domain: 0 cycles of latency,
one operation per cycle; the caller registers the result if it needs to):

``Fp32Adder``
    ``sum = a + b`` on binary32 bit patterns.

``ProductToFp32``
    Turns the integer significand product of two FP16 or BF16 operands (computed
    elsewhere by the bit-serial multiplier) plus the operands' sign and exponent
    fields into the binary32 bit pattern of ``float32(w) * float32(a)``. It does
    not multiply the significands itself.

Both are bit-exact against IEEE 754 binary32 arithmetic as done by torch
float32 on the CPU (subnormals honoured, no flush-to-zero), except that every
NaN result is the canonical quiet NaN ``0x7FC00000`` (sign and payload of NaN
inputs are not propagated).

Special values
--------------
Adder:

* any NaN operand -> ``0x7FC00000``; ``Inf + (-Inf)`` -> ``0x7FC00000``;
* ``+-Inf + finite`` and ``Inf + Inf`` of equal signs -> that Inf;
* finite results too large for binary32 -> ``+-Inf`` (round-to-nearest-even
  never saturates to the largest finite value);
* exact cancellation ``x + (-x)`` -> ``+0``; ``(+0) + (-0)`` -> ``+0``;
  ``(-0) + (-0)`` -> ``-0``; ``x + (-0)`` -> ``x``;
* subnormal operands and results are exact IEEE (a sum of subnormals is exact
  and may carry into the normal range).

Product (``dtype`` FP16 = 0 or BF16 = 1; any other code is decoded as BF16 and
its result is meaningless):

* NaN operand, or ``0 * Inf`` / ``Inf * 0`` -> ``0x7FC00000``;
* ``Inf * nonzero`` -> Inf with sign ``sign(w) xor sign(a)``;
* a zero operand (either sign) times a finite value -> zero with sign
  ``sign(w) xor sign(a)``;
* FP16 x FP16 is always an exact binary32 normal (|product| is in
  [2**-48, 2**32)); BF16 x BF16 can leave binary32's range: too large ->
  ``+-Inf``, too small -> rounded (nearest-even) into the subnormal range or to
  a zero that keeps the product's sign.

Rounding algorithm
------------------
Shared by both blocks in :func:`round_pack_fp32`, written once: the caller
hands over a significand ``sig`` (``W`` >= 25 bits, binary point after its top
bit) and a signed biased exponent ``exp`` so that the value is
``sig / 2**(W-1) * 2**(exp - 127)``. The step

1. counts the leading zeros ``lz`` of ``sig``;
2. normalizes: shift left by ``lz`` if ``exp - lz >= 1`` (a normal result);
   otherwise the result is subnormal and ``sig`` is shifted so that its top bit
   has the weight of the smallest normal's hidden bit: left by ``exp - 1`` or,
   if ``exp < 1``, right by ``1 - exp`` with the shifted-out bits ORed into the
   sticky bit;
3. keeps the top 24 bits (hidden bit + 23 fraction bits), takes the next bit as
   guard and the OR of all lower bits as sticky, and rounds to nearest, ties to
   even: ``round_up = guard & (sticky | lsb)``;
4. packs ``(exponent_field_without_hidden << 23) + rounded_significand``; the
   integer addition carries a rounding overflow (``1.111..1 + ulp``) into the
   exponent and a subnormal that rounds up to ``2**-126`` into exponent field 1;
5. turns any field >= 255 into ``+-Inf``.

``Fp32Adder`` is the classic single-path adder: unpack (effective exponent
``max(e, 1)``, hidden bit ``e != 0``), order the operands by magnitude, align
the smaller one with guard, round and sticky bits (the sticky bit sits in the
LSB of the 27-bit aligned significand), add or subtract in 28 bits, then
:func:`round_pack_fp32`. The G/R/S alignment is exact for round-to-nearest:
whenever bits are lost to the sticky bit the exponents differ by >= 4, so the
difference needs at most one left shift and the sticky LSB still lies below the
guard bit.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal, signed, unsigned
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import Dtype

__all__ = [
    "CANONICAL_NAN", "POS_INF", "round_pack_fp32", "leading_zeros",
    "Fp32Adder", "ProductToFp32",
]

#: The only NaN these blocks produce (quiet, positive, zero payload).
CANONICAL_NAN = 0x7FC00000
#: +Inf; -Inf is ``POS_INF | 1 << 31``.
POS_INF = 0x7F800000

_FRAC = 23          # binary32 fraction bits
_SIG = _FRAC + 1    # binary32 significand bits incl. hidden bit


def leading_zeros(m: Module, value, name: str = "lz") -> Signal:
    """Number of leading zeros of ``value`` (``len(value)`` if it is zero), as a new signal."""
    width = len(value)
    if width < 1:
        raise ValueError("leading_zeros needs a value at least 1 bit wide")
    lz = Signal(range(width + 1), name=name)
    expr = Const(width, range(width + 1))
    for i in range(width):           # higher bits later in the chain win
        expr = Mux(value[i], width - 1 - i, expr)
    m.d.comb += lz.eq(expr)
    return lz


def round_pack_fp32(m: Module, *, sign, sig, exp, exp_min: int, name: str = "rp") -> Signal:
    """Normalize, round to nearest even and pack into binary32; returns the 32-bit result signal.

    Builds combinational logic in ``m``. The value represented by the inputs is
    ``(-1)**sign * sig / 2**(len(sig)-1) * 2**(exp - 127)``.

    * ``sign``: 1-bit value; it is also the sign of a zero result.
    * ``sig``: unsigned significand, at least 25 bits. It must be exact, except
      that its LSB may be a sticky bit (the OR of everything below it) as long
      as normalization never moves that LSB up to the guard position or above
      (i.e. at most ``len(sig) - 26`` bits of left shift when the LSB is sticky).
    * ``exp``: biased exponent (signed or unsigned value) that applies when the
      top bit of ``sig`` is set.
    * ``exp_min``: the smallest value ``exp`` can take (a static promise by the
      caller); if it is >= 1, the right-shift (deep underflow) path is omitted.

    Results too large for binary32 become ``+-Inf``; NaN is never produced.
    """
    width = len(sig)
    if width < _SIG + 1:
        raise ValueError(f"sig must be at least {_SIG + 1} bits wide (24 kept + guard), "
                         f"got {width}")
    if len(sign) != 1:
        raise ValueError(f"sign must be 1 bit wide, got {len(sign)}")
    if not isinstance(exp_min, int) or isinstance(exp_min, bool):
        raise ValueError(f"exp_min must be an int, got {exp_min!r}")

    lz = leading_zeros(m, sig, name=f"{name}_lz")
    exp_bits = max(len(exp), (width + 1).bit_length()) + 2
    e_norm = Signal(signed(exp_bits), name=f"{name}_e_norm")
    m.d.comb += e_norm.eq(exp - lz)

    left = Signal(range(width), name=f"{name}_left")     # normalizing left shift
    right = Signal(range(width + 1), name=f"{name}_right")  # underflow right shift
    e_pre = Signal(unsigned(exp_bits), name=f"{name}_e_pre")  # exponent field - hidden bit
    with m.If(~sig.any()):
        pass                                   # zero: everything stays 0
    with m.Elif(e_norm >= 1):                  # normal result
        m.d.comb += [left.eq(lz), e_pre.eq(e_norm - 1)]
    with m.Elif(exp >= 1):                     # subnormal, shift left by exp - 1 < lz
        m.d.comb += left.eq(exp - 1)
    if exp_min < 1:
        with m.Else():                         # subnormal, shift right by 1 - exp
            r = Signal(signed(exp_bits + 1), name=f"{name}_r")
            m.d.comb += [r.eq(1 - exp),
                         right.eq(Mux(r > width, width, r))]

    if exp_min < 1:
        shr = Signal(width, name=f"{name}_shr")
        m.d.comb += shr.eq(sig >> right)
        lost = (shr << right) != sig           # bits shifted out to the right
    else:
        shr = sig
        lost = Const(0, 1)
    t = Signal(width, name=f"{name}_norm")
    m.d.comb += t.eq((shr << left)[:width])

    kept = t[width - _SIG:]
    guard = t[width - _SIG - 1]
    sticky = lost
    if width > _SIG + 1:
        sticky = sticky | t[:width - _SIG - 1].any()
    round_up = guard & (sticky | kept[0])
    rounded = Signal(_SIG + 1, name=f"{name}_rounded")
    m.d.comb += rounded.eq(kept + round_up)

    packed = Signal(exp_bits + _FRAC + 1, name=f"{name}_packed")
    m.d.comb += packed.eq((e_pre << _FRAC) + rounded)

    result = Signal(32, name=f"{name}_result")
    with m.If(packed >= POS_INF):
        m.d.comb += result.eq(Cat(Const(POS_INF, 31), sign))
    with m.Else():
        m.d.comb += result.eq(Cat(packed[:31], sign))
    return result


def _unpack_fp32(value):
    """(sign, exponent field, fraction field, effective exponent, significand) of a binary32."""
    sign = value[31]
    efield = value[_FRAC:31]
    frac = value[:_FRAC]
    nonzero_e = efield.any()
    e_eff = efield | ~nonzero_e                # max(e, 1)
    sig = Cat(frac, nonzero_e)            # hidden bit = (e != 0)
    return sign, efield, frac, e_eff, sig


class Fp32Adder(wiring.Component):
    """Combinational binary32 adder: ``sum = a + b`` (see the module docstring)."""

    a: In(32)
    b: In(32)
    sum: Out(32)

    def elaborate(self, platform):
        m = Module()

        # Order by magnitude: for non-NaN patterns, |x| >= |y| iff bits[:31] compare so.
        swap = self.b[:31] > self.a[:31]
        x = Signal(32)
        y = Signal(32)
        m.d.comb += [x.eq(Mux(swap, self.b, self.a)), y.eq(Mux(swap, self.a, self.b))]

        sx, ex, fx, ex_eff, sigx = _unpack_fp32(x)
        sy, ey, fy, ey_eff, sigy = _unpack_fp32(y)

        # Align y with guard, round and sticky bits: 27-bit significands.
        grs = 3
        aw = _SIG + grs
        d = Signal(8)
        m.d.comb += d.eq(ex_eff - ey_eff)
        dcl = Signal(range(aw + 1))
        m.d.comb += dcl.eq(Mux(d > aw, aw, d))
        y_full = Signal(aw)
        m.d.comb += y_full.eq(sigy << grs)
        y_shr = Signal(aw)
        m.d.comb += y_shr.eq(y_full >> dcl)
        y_lost = (y_shr << dcl) != y_full
        y_al = Signal(aw)
        m.d.comb += y_al.eq(y_shr | y_lost)
        x_al = Signal(aw)
        m.d.comb += x_al.eq(sigx << grs)

        subtract = sx ^ sy
        s = Signal(aw + 1)                      # 28 bits incl. carry
        m.d.comb += s.eq(Mux(subtract, x_al - y_al, x_al + y_al))

        # Zero sum: +0 unless both operands are -0 (only zeros can sum to 0 with equal signs).
        zsign = Signal()
        m.d.comb += zsign.eq(Mux(s.any(), sx, sx & sy))

        # s has its binary point after bit 27; x's hidden bit (bit 26) has weight 2**(ex_eff-127).
        exp = Signal(9)
        m.d.comb += exp.eq(ex_eff + 1)
        finite = round_pack_fp32(m, sign=zsign, sig=s, exp=exp, exp_min=2, name="add")

        x_special = ex == 0xFF
        y_special = ey == 0xFF
        x_nan = x_special & fx.any()
        y_nan = y_special & fy.any()
        x_inf = x_special & ~fx.any()
        y_inf = y_special & ~fy.any()
        nan = x_nan | y_nan | (x_inf & y_inf & subtract)

        with m.If(nan):
            m.d.comb += self.sum.eq(CANONICAL_NAN)
        with m.Elif(x_inf):                     # |x| >= |y|, so an Inf is always in x
            m.d.comb += self.sum.eq(x)
        with m.Else():
            m.d.comb += self.sum.eq(finite)
        return m


class ProductToFp32(wiring.Component):
    """binary32 bits of ``float32(w) * float32(a)`` for FP16/BF16 operands (see the module docstring).

    ``mant_product`` is ``significand(w) * significand(a)`` where
    ``significand(x) = ((exp(x) != 0) << frac_bits) | frac(x)`` (an 11x11-bit
    product for FP16, 8x8 bits in the low 16 bits for BF16), computed elsewhere.
    """

    dtype: In(2)
    w: In(16)
    a: In(16)
    mant_product: In(22)
    product: Out(32)

    # With sig = mant_product << 3 (25 bits, binary point after bit 24) the value
    # is mant_product * 2**(exp - 148). It must equal
    # mant_product * 2**(ew_eff + ea_eff - 2*(bias + frac_bits)), hence
    # exp = ew_eff + ea_eff + 148 - 2*(bias + frac_bits).
    _EXP_OFFSET = {
        dt: 148 - 2 * (dt.info.bias + dt.info.frac_bits) for dt in (Dtype.FP16, Dtype.BF16)
    }

    def elaborate(self, platform):
        m = Module()
        is_fp16 = self.dtype == Dtype.FP16

        def unpack(x, name):
            fp16 = Dtype.FP16.info
            bf16 = Dtype.BF16.info
            e16 = x[fp16.frac_bits:15]
            e_bf = x[bf16.frac_bits:15]
            f16 = x[:fp16.frac_bits]
            f_bf = x[:bf16.frac_bits]
            efield = Signal(8, name=f"{name}_e")
            frac_nz = Signal(name=f"{name}_frac_nz")
            e_max = Signal(name=f"{name}_e_max")
            m.d.comb += [
                efield.eq(Mux(is_fp16, e16, e_bf)),
                frac_nz.eq(Mux(is_fp16, f16.any(), f_bf.any())),
                e_max.eq(Mux(is_fp16, e16.all(), e_bf.all())),
            ]
            nonzero_e = efield.any()
            e_eff = efield | ~nonzero_e
            zero = ~nonzero_e & ~frac_nz
            inf = e_max & ~frac_nz
            nan = e_max & frac_nz
            return x[15], e_eff, zero, inf, nan

        sw, ew_eff, w_zero, w_inf, w_nan = unpack(self.w, "w")
        sa, ea_eff, a_zero, a_inf, a_nan = unpack(self.a, "a")
        sign = sw ^ sa

        exp = Signal(signed(11))
        offset = Mux(is_fp16, self._EXP_OFFSET[Dtype.FP16], self._EXP_OFFSET[Dtype.BF16])
        m.d.comb += exp.eq(ew_eff + ea_eff + offset)
        sig = Cat(Const(0, 3), self.mant_product)
        exp_min = 2 + min(self._EXP_OFFSET.values())
        finite = round_pack_fp32(m, sign=sign, sig=sig, exp=exp, exp_min=exp_min, name="mul")

        nan = w_nan | a_nan | (w_inf & a_zero) | (w_zero & a_inf)
        with m.If(nan):
            m.d.comb += self.product.eq(CANONICAL_NAN)
        with m.Elif(w_inf | a_inf):
            m.d.comb += self.product.eq(Cat(Const(POS_INF, 31), sign))
        with m.Elif(w_zero | a_zero):
            m.d.comb += self.product.eq(Cat(Const(0, 31), sign))
        with m.Else():
            m.d.comb += self.product.eq(finite)
        return m
