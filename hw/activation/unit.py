"""Activation unit datapath: ``lanes`` parallel FP32-internal lanes, stream to stream.

What it does
------------
One command (``cmd`` stream, layout :func:`act_cmd_layout`) describes one pass
over one vector; the vector arrives on ``a`` (and, for binary ops, ``b``) as
beats of ``lanes`` 32-bit lane words with a valid-lane ``count`` (lanes
``0 .. count-1`` carry data) and ``last`` on the final beat. Every element is
first decoded from ``in_fmt`` (FP16 / BF16 in the low 16 bits, or FP32) to
binary32, computed in binary32, and the result encoded to ``out_fmt`` with
round-to-nearest-even (overflow to Inf, canonical NaN).

=========  =========================================================================
op         result per element (x = a lane, y = b lane, c/k = FP32 command constants)
=========  =========================================================================
PASS       ``x`` (with ``in_fmt`` FP32 and ``out_fmt`` FP16/BF16: the CONVERT op)
RELU       ``+0`` if x is negative (incl. -0, -Inf), else x
SILU       ``x * recip(1 + exp(-x))``
GELU       ``x * Phi(x)``, the exact (erf) GELU, with
           ``Phi(x) = p`` for x < 0 and ``1 - p`` otherwise,
           ``p = exp2(-x^2 * log2(e)/2) * Q(|x|)`` (see ``docs/activation.md``)
SCALE      ``x * k``
EXP        ``exp(x - c) * k`` (k = 1.0: plain exp; k = 1/sum: softmax final pass)
RECIP      ``recip(x)``
ADD        ``x + y`` (``in_fmt`` = ``out_fmt`` = FP32: the MERGE of partial sums)
MUL        ``x * y``
MAX        reduction: one scalar, the maximum of all valid lanes of all beats
SUMEXP     reduction: one scalar, the binary32 sum of ``exp(x - c)``
=========  =========================================================================

Every ``+``/``*`` above is one IEEE binary32 operation with round-to-nearest-even
(``Fp32Adder`` and :func:`fp32_mul`). ``exp`` and ``recip`` are the fixed-point
units :func:`exp2_unit` and :func:`recip_unit`; ``Q`` is :func:`gelu_q_unit`.
Their tables are generated once, below, by plain Python from ``math`` and shared
with the golden model (``ndpdimm.cosim.golden.activation``), which reproduces
every integer step. SILU and GELU of ``-Inf`` are ``-0`` (the limit). Reserved
op codes behave as PASS; reserved format code 3 decodes and encodes as FP32.

Reductions use a pairwise lane tree per beat (lanes ``2j`` and ``2j+1`` first,
invalid and padding lanes replaced by the identity, ``-Inf`` for MAX and ``+0``
for SUMEXP), then one accumulator that starts at the identity and combines the
beat results in beat order. MAX orders values by sign-magnitude (``-0 < +0``);
any NaN makes the result NaN. The scalar leaves as one ``out`` beat: lane 0,
``count`` 1, ``last`` 1, encoded to ``out_fmt``.

Cycle behaviour
---------------
A stall-all pipeline: every register advances when ``out`` is empty or taken
(``adv = ~out.valid | out.ready``). With the streams keeping up, one beat per
cycle is accepted and produced. Seven register stages (decode, pre-op,
exp/Q, post-op 1, recip/post-op 2, final multiply, encode into the output
register): an element beat whose input handshake is at clock edge ``t`` is
valid on ``out`` after edge ``t + 6`` and its earliest output handshake is at
edge ``t + 7`` (``LATENCY``). A reduction adds one register per tree level:
its scalar's earliest handshake is ``7 + ceil(log2(lanes))`` edges after its
last input beat (``reduction_latency``; the accumulator feeds the output
register directly). A new command
is taken in the cycle its predecessor's last beat is accepted (no bubble),
except after a reduction: then it waits until the scalar has left ``out``.
A command with binary op consumes ``a`` and ``b`` beats together.
"""

import enum
import math

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.gemv.fp32_arith import (
    CANONICAL_NAN,
    POS_INF,
    Fp32Adder,
    leading_zeros,
    round_pack_fp32,
)

__all__ = [
    "ActOp", "ActFmt", "REDUCTION_OPS", "BINARY_OPS",
    "act_cmd_layout", "act_in_layout", "act_b_layout", "act_out_layout",
    "PiecewiseQuadratic", "EXP2_TABLE", "RECIP_TABLE", "GELU_Q_TABLE",
    "K_LOG2E", "K_HALF_LOG2E", "ONE_F32", "NEG_INF_F32", "LATENCY",
    "fp32_mul", "exp2_unit", "recip_unit", "gelu_q_unit", "decode_fp32", "encode_fp32",
    "ActivationLane", "ActivationUnit",
]


class ActOp(enum.IntEnum):
    """Operation code of one activation-unit command (4 bits; 11..15 reserved = PASS)."""
    PASS = 0
    RELU = 1
    SILU = 2
    GELU = 3
    SCALE = 4
    EXP = 5
    RECIP = 6
    ADD = 7
    MUL = 8
    MAX = 9
    SUMEXP = 10


class ActFmt(enum.IntEnum):
    """Element format of a lane word: FP16/BF16 in bits [0, 16), FP32 in all 32 bits."""
    FP16 = 0
    BF16 = 1
    FP32 = 2


REDUCTION_OPS = (ActOp.MAX, ActOp.SUMEXP)
BINARY_OPS = (ActOp.ADD, ActOp.MUL)

ONE_F32 = 0x3F800000
NEG_INF_F32 = 0xFF800000
#: Clock edges from an element beat's input handshake to its earliest output handshake.
LATENCY = 7


def act_cmd_layout() -> data.StructLayout:
    """One command: op, formats, and the FP32 constants ``c`` (EXP/SUMEXP) and ``k`` (SCALE/EXP)."""
    return data.StructLayout({
        "op": 4,
        "in_fmt": 2,
        "out_fmt": 2,
        "c": 32,
        "k": 32,
    })


def act_in_layout(lanes: int) -> data.StructLayout:
    """One ``a`` beat: ``lanes`` 32-bit lane words, valid-lane count, end-of-vector flag."""
    return data.StructLayout({
        "data": data.ArrayLayout(32, lanes),
        "count": range(lanes + 1),
        "last": 1,
    })


def act_b_layout(lanes: int) -> data.StructLayout:
    """One ``b`` beat (second operand of ADD/MUL; count and last come from ``a``)."""
    return data.StructLayout({"data": data.ArrayLayout(32, lanes)})


def act_out_layout(lanes: int) -> data.StructLayout:
    """One ``out`` beat; lanes at or above ``count`` are zero."""
    return act_in_layout(lanes)


# ------------------------------------------------------------------ tables

class PiecewiseQuadratic:
    """Fixed-point piecewise quadratic: segment ``i``, offset ``r`` in [0, 2**rbits).

    ``y = a_i + ((b_i + ((c_i * r) >> rbits)) * r >> rbits)`` with arithmetic
    (floor) shifts; ``y`` approximates ``f(x0 + h * (i + r / 2**rbits)) * 2**out_frac``.
    Coefficients interpolate ``f`` at the segment's start, middle and end
    (so segment starts are exact up to one rounding of ``a_i``).
    """

    def __init__(self, name, func, x0, h, segments, rbits, out_frac):
        self.name, self.segments, self.rbits, self.out_frac = name, segments, rbits, out_frac
        coeffs = []
        for i in range(segments):
            y0, y1, y2 = (func(x0 + h * (i + t)) for t in (0.0, 0.5, 1.0))
            c = 2.0 * (y2 - 2.0 * y1 + y0)
            b = y2 - y0 - c
            coeffs.append(tuple(round(v * 2.0 ** out_frac) for v in (y0, b, c)))
        self.coeffs = tuple(coeffs)
        self.a = tuple(t[0] for t in coeffs)
        self.b = tuple(t[1] for t in coeffs)
        self.c = tuple(t[2] for t in coeffs)


def _gelu_q(u: float) -> float:
    # Q(u) = Phi(-u) * exp(u^2 / 2): smooth, 0.5 at 0, ~1/(u sqrt(2 pi)) for large u.
    return 0.5 * math.erfc(u / math.sqrt(2.0)) * math.exp(u * u / 2.0)


#: 2**f on [0, 1): 64 segments, offset 24 bits, result scaled 2**30.
EXP2_TABLE = PiecewiseQuadratic("exp2", lambda x: 2.0 ** x, 0.0, 1 / 64, 64, 24, 30)
#: 1/m on [1, 2): 64 segments, offset 17 bits, result scaled 2**31.
RECIP_TABLE = PiecewiseQuadratic("recip", lambda x: 1.0 / x, 1.0, 1 / 64, 64, 17, 31)
#: Q(u) on [0, 8): 128 segments, offset 20 bits, result scaled 2**30.
GELU_Q_TABLE = PiecewiseQuadratic("gelu_q", _gelu_q, 0.0, 1 / 16, 128, 20, 30)

#: log2(e) scaled 2**31 (exp unit constant for exp(d)).
K_LOG2E = round(math.log2(math.e) * 2 ** 31)
#: log2(e)/2 scaled 2**31 (exp unit constant for exp(d/2), used by GELU).
K_HALF_LOG2E = round(math.log2(math.e) * 2 ** 30)

_EXP_FRAC = 30       # fractional bits of t = d * K in the exp unit
_EXP_T_BITS = 38     # |t| < 2**8 (else saturate)


# ------------------------------------------------------------------ combinational helpers

def _fields(x):
    """(sign, exponent field, fraction field, effective exponent max(e,1), 24-bit significand)."""
    s, e, f = x[31], x[23:31], x[:23]
    nz = e.any()
    return s, e, f, e | ~nz, Cat(f, nz)


def _pq(m, table: PiecewiseQuadratic, index, r, name):
    """Evaluate ``table`` at segment ``index``, offset ``r`` (see PiecewiseQuadratic)."""
    width = max(abs(v) for t in table.coeffs for v in t).bit_length() + 2
    ca = Array(Const(v, signed(width)) for v in table.a)
    cb = Array(Const(v, signed(width)) for v in table.b)
    cc = Array(Const(v, signed(width)) for v in table.c)
    a, b, c = (Signal(signed(width), name=f"{name}_{n}") for n in "abc")
    m.d.comb += [a.eq(ca[index]), b.eq(cb[index]), c.eq(cc[index])]
    rbits = table.rbits
    u = Signal(signed(width + 1), name=f"{name}_u")
    w = Signal(signed(width + 2), name=f"{name}_w")
    y = Signal(signed(width + 3), name=f"{name}_y")
    m.d.comb += [
        u.eq(b + ((c * r) >> rbits)),
        w.eq((u * r) >> rbits),
        y.eq(a + w),
    ]
    return y


def fp32_mul(m, a, b, name="mul"):
    """binary32 ``a * b`` with RNE, IEEE specials, canonical NaN; returns a 32-bit signal."""
    sa, ea, fa, ea_eff, siga = _fields(a)
    sb, eb, fb, eb_eff, sigb = _fields(b)
    sign = sa ^ sb
    prod = Signal(48, name=f"{name}_prod")
    exp = Signal(signed(11), name=f"{name}_exp")
    # value = prod * 2**(ea + eb - 300) = prod / 2**47 * 2**(exp - 127)
    m.d.comb += [prod.eq(siga * sigb), exp.eq(ea_eff + eb_eff - 126)]
    finite = round_pack_fp32(m, sign=sign, sig=prod, exp=exp, exp_min=-124, name=name)
    a_nan, b_nan = (ea == 0xFF) & fa.any(), (eb == 0xFF) & fb.any()
    a_inf, b_inf = (ea == 0xFF) & ~fa.any(), (eb == 0xFF) & ~fb.any()
    a_zero, b_zero = ~siga.any(), ~sigb.any()
    res = Signal(32, name=f"{name}_res")
    with m.If(a_nan | b_nan | (a_inf & b_zero) | (a_zero & b_inf)):
        m.d.comb += res.eq(CANONICAL_NAN)
    with m.Elif(a_inf | b_inf):
        m.d.comb += res.eq(Cat(Const(POS_INF, 31), sign))
    with m.Else():
        m.d.comb += res.eq(finite)      # zero operands give a signed zero here
    return res


def exp2_unit(m, d, k, name="exp"):
    """binary32 approximation of ``2**(d * k / 2**31)`` (``k`` = K_LOG2E: ``exp(d)``).

    ``t = d * k`` is formed exactly as an integer product and truncated toward
    zero to 30 fractional bits; ``n = floor(t)``, ``f = t - n``; ``2**f`` from
    EXP2_TABLE; the result ``y * 2**(n - 30)`` is rounded (RNE) to binary32,
    subnormal or zero below the normal range, Inf above. ``|t| >= 256``
    saturates to +Inf (d > 0) or +0 (d < 0); NaN gives NaN.
    """
    s, e, f, e_eff, sig = _fields(d)
    prod = Signal(56, name=f"{name}_prod")
    m.d.comb += prod.eq(sig * k)
    # |t| * 2**30 = prod * 2**(e_eff - 151); e_eff >= 135 means |d| >= 256: saturated anyway.
    big = e_eff >= 135
    sh = Signal(range(64), name=f"{name}_sh")
    m.d.comb += sh.eq(Mux(e_eff <= 151 - 63, 63, 151 - e_eff))
    t_mag = Signal(_EXP_T_BITS + 1, name=f"{name}_tmag")
    m.d.comb += t_mag.eq(Mux(big, 0, prod >> sh))
    sat = big | t_mag[_EXP_T_BITS]
    t = Signal(signed(_EXP_T_BITS + 2), name=f"{name}_t")
    m.d.comb += t.eq(Mux(s, -t_mag, t_mag))
    n = Signal(signed(_EXP_T_BITS + 2 - _EXP_FRAC), name=f"{name}_n")
    m.d.comb += n.eq(t >> _EXP_FRAC)
    frac = t[:_EXP_FRAC]
    rb = EXP2_TABLE.rbits
    y = _pq(m, EXP2_TABLE, frac[rb:], frac[:rb], name=f"{name}_pq")
    sig_w = 34                                   # y < 2**33: value = y / 2**33 * 2**(E - 127)
    E = Signal(signed(12), name=f"{name}_E")
    m.d.comb += E.eq(n - _EXP_FRAC + 127 + sig_w - 1)
    finite = round_pack_fp32(m, sign=Const(0, 1), sig=y[:sig_w], exp=E,
                             exp_min=-256 - _EXP_FRAC + 127 + sig_w - 1, name=f"{name}_rp")
    res = Signal(32, name=f"{name}_res")
    with m.If((e == 0xFF) & f.any()):
        m.d.comb += res.eq(CANONICAL_NAN)
    with m.Elif(sat):
        m.d.comb += res.eq(Mux(s, 0, POS_INF))
    with m.Else():
        m.d.comb += res.eq(finite)
    return res


def recip_unit(m, x, name="recip"):
    """binary32 approximation of ``1 / x``: normalize the significand (subnormals too),
    ``1/m`` from RECIP_TABLE (64 segments on [1, 2)), round (RNE) to binary32.
    ``+-0 -> +-Inf``, ``+-Inf -> +-0``, NaN -> NaN, results beyond range -> Inf / subnormal."""
    s, e, f, e_eff, sig = _fields(x)
    lz = leading_zeros(m, sig, name=f"{name}_lz")
    mn = Signal(24, name=f"{name}_mn")
    m.d.comb += mn.eq(sig << lz)
    rb = RECIP_TABLE.rbits
    y = _pq(m, RECIP_TABLE, mn[rb:23], mn[:rb], name=f"{name}_pq")
    # x = mn * 2**(e_unb - 23), e_unb = e_eff - 127 - lz; 1/x = y * 2**(-31 - e_unb)
    # = y / 2**32 * 2**(E - 127) with E = 128 - e_unb = 255 - e_eff + lz.
    E = Signal(signed(11), name=f"{name}_E")
    m.d.comb += E.eq(255 - e_eff + lz)
    finite = round_pack_fp32(m, sign=s, sig=y[:33], exp=E, exp_min=1, name=f"{name}_rp")
    res = Signal(32, name=f"{name}_res")
    with m.If((e == 0xFF) & f.any()):
        m.d.comb += res.eq(CANONICAL_NAN)
    with m.Elif(e == 0xFF):
        m.d.comb += res.eq(Cat(Const(0, 31), s))
    with m.Elif(~sig.any()):
        m.d.comb += res.eq(Cat(Const(POS_INF, 31), s))
    with m.Else():
        m.d.comb += res.eq(finite)
    return res


def gelu_q_unit(m, x, name="q"):
    """binary32 ``Q(|x|)`` from GELU_Q_TABLE: ``|x|`` truncated to 24 fractional bits,
    clamped to ``8 - 2**-24`` (NaN and Inf clamp too; their GELU is settled elsewhere)."""
    s, e, f, e_eff, sig = _fields(x)
    u = Signal(27, name=f"{name}_u")
    with m.If(e_eff >= 130):                    # |x| >= 8
        m.d.comb += u.eq((1 << 27) - 1)
    with m.Elif(e_eff >= 126):                  # u = sig * 2**(e_eff - 126) / 2**24
        m.d.comb += u.eq(sig << (e_eff - 126)[:2])
    with m.Else():
        sh = Signal(range(32), name=f"{name}_sh")
        m.d.comb += sh.eq(Mux(e_eff < 126 - 31, 31, 126 - e_eff))
        m.d.comb += u.eq(sig >> sh)
    rb = GELU_Q_TABLE.rbits
    y = _pq(m, GELU_Q_TABLE, u[rb:], u[:rb], name=f"{name}_pq")
    # Q in [0.06, 0.5]: y < 2**29; value = y / 2**31 * 2**(E - 127) = y * 2**-30 -> E = 128.
    return round_pack_fp32(m, sign=Const(0, 1), sig=y[:32], exp=Const(128, 9),
                           exp_min=128, name=f"{name}_rp")


def decode_fp32(m, raw, fmt, name="dec"):
    """Lane word in format ``fmt`` -> binary32 (exact; NaN -> canonical NaN)."""
    h = raw[:16]
    he, hf = h[10:15], h[:10]
    # FP16 finite: value = (hidden.f) * 2**(he_eff - 15) = sig / 2**24 * 2**(E - 127)
    h_sig = Cat(Const(0, 14), hf, he.any())
    h_exp = Signal(9, name=f"{name}_hexp")
    m.d.comb += h_exp.eq((he | ~he.any()) + 112)
    h_fin = round_pack_fp32(m, sign=h[15], sig=h_sig, exp=h_exp, exp_min=113, name=f"{name}_h")
    res = Signal(32, name=f"{name}_res")
    with m.Switch(fmt):
        with m.Case(ActFmt.FP16):
            with m.If(he.all() & hf.any()):
                m.d.comb += res.eq(CANONICAL_NAN)
            with m.Elif(he.all()):
                m.d.comb += res.eq(Cat(Const(POS_INF, 31), h[15]))
            with m.Else():
                m.d.comb += res.eq(h_fin)
        with m.Case(ActFmt.BF16):
            with m.If(h[7:15].all() & h[:7].any()):
                m.d.comb += res.eq(CANONICAL_NAN)
            with m.Else():
                m.d.comb += res.eq(Cat(Const(0, 16), h))
        with m.Default():
            with m.If(raw[23:31].all() & raw[:23].any()):
                m.d.comb += res.eq(CANONICAL_NAN)
            with m.Else():
                m.d.comb += res.eq(raw)
    return res


def _narrow(m, x, exp_bits, frac_bits, name):
    """binary32 -> 1-exp_bits-frac_bits format with RNE, overflow to Inf (NaN handled by caller)."""
    bias = (1 << (exp_bits - 1)) - 1
    s, e, f, e_eff, sig = _fields(x)
    et = Signal(signed(10), name=f"{name}_et")
    m.d.comb += et.eq(e_eff - 127 + bias)
    width = 26
    sh = Signal(range(width + 1), name=f"{name}_sh")
    m.d.comb += sh.eq(Mux(et >= 1, 0, Mux(et < 1 - width, width, 1 - et)))
    wide = Cat(Const(0, 2), sig)
    shifted = Signal(width, name=f"{name}_shr")
    m.d.comb += shifted.eq(wide >> sh)
    lost = (shifted << sh)[:width] != wide
    keep = frac_bits + 1
    kept = shifted[width - keep:]
    guard = shifted[width - keep - 1]
    sticky = shifted[:width - keep - 1].any() | lost
    round_up = guard & (sticky | kept[0])
    pre = Signal(9, name=f"{name}_pre")
    m.d.comb += pre.eq(Mux(et >= 1, et - 1, 0))
    packed = Signal(9 + frac_bits + 1, name=f"{name}_packed")
    m.d.comb += packed.eq((pre << frac_bits) + kept + round_up)
    inf = ((1 << exp_bits) - 1) << frac_bits
    res = Signal(exp_bits + frac_bits + 1, name=f"{name}_res")
    m.d.comb += res.eq(Cat(Mux(packed >= inf, inf, packed[:exp_bits + frac_bits]), s))
    return res


def encode_fp32(m, x, fmt, name="enc"):
    """binary32 -> lane word in ``fmt`` (RNE, overflow to Inf, canonical NaN 0x7E00 / 0x7FC0)."""
    nan = (x[23:31] == 0xFF) & x[:23].any()
    h = _narrow(m, x, 5, 10, name=f"{name}_h")
    bf = _narrow(m, x, 8, 7, name=f"{name}_b")
    res = Signal(32, name=f"{name}_res")
    with m.Switch(fmt):
        with m.Case(ActFmt.FP16):
            m.d.comb += res.eq(Mux(nan, 0x7E00, h))
        with m.Case(ActFmt.BF16):
            m.d.comb += res.eq(Mux(nan, 0x7FC0, bf))
        with m.Default():
            m.d.comb += res.eq(Mux(nan, CANONICAL_NAN, x))
    return res


def _max_key(x):
    # Unsigned key that orders binary32 values with -0 < +0 (NaN handled separately).
    return Mux(x[31], ~x, x | (1 << 31))


def _reduce_node(m, add_mod, a, b, is_max, name):
    """One tree node: ``a + b`` (SUMEXP) or ``max(a, b)`` (MAX), canonical NaN."""
    m.d.comb += [add_mod.a.eq(a), add_mod.b.eq(b)]
    nan = ((a[23:31] == 0xFF) & a[:23].any()) | ((b[23:31] == 0xFF) & b[:23].any())
    mx = Mux(nan, CANONICAL_NAN, Mux(_max_key(a) >= _max_key(b), a, b))
    res = Signal(32, name=name)
    m.d.comb += res.eq(Mux(is_max, mx, add_mod.sum))
    return res


# ------------------------------------------------------------------ the component

class ActivationLane(wiring.Component):
    """One lane of :class:`ActivationUnit`'s element pipeline (stages 1-6), a submodule so
    that the unit's lanes are one module instantiated ``lanes`` times (synthesis handles
    each once; ``synth/``).

    ``a`` / ``b`` are the raw lane words of the input beat, decoded from ``in_fmt``; ``opN``
    / ``c1`` / ``k1`` / ``k3`` are the op code and constants of the beat at stage N, from the
    unit's control pipeline. Every register advances when ``adv`` is high; ``y`` is the stage-6
    register (the element result in binary32, before the output encode).
    """
    adv: In(1)
    a: In(32)
    b: In(32)
    in_fmt: In(2)
    op1: In(4)
    op2: In(4)
    op3: In(4)
    op4: In(4)
    op5: In(4)
    c1: In(32)
    k1: In(32)
    k3: In(32)
    y: Out(32)

    def elaborate(self, platform):
        m = Module()
        one = Const(ONE_F32, 32)

        def op_in(op, *ops):
            return Cat(*(op == o for o in ops)).any()

        def reg(stage, what):
            return Signal(32, name=f"s{stage}_{what}")

        # stage 1: decode
        s1_xa, s1_xb = reg(1, "xa"), reg(1, "xb")
        dec_a = decode_fp32(m, self.a, self.in_fmt, name="deca")
        dec_b = decode_fp32(m, self.b, self.in_fmt, name="decb")
        # stage 2: pre-op (one adder, one multiplier)
        op2 = self.op1
        add2 = m.submodules.add2 = Fp32Adder()
        m.d.comb += [add2.a.eq(s1_xa),
                     add2.b.eq(Mux(op_in(op2, ActOp.EXP, ActOp.SUMEXP),
                                   self.c1 ^ (1 << 31), s1_xb))]
        mul2 = fp32_mul(m, s1_xa,
                        Mux(op2 == ActOp.MUL, s1_xb, Mux(op2 == ActOp.SCALE, self.k1, s1_xa)),
                        name="mul2")
        d2 = Signal(32, name="d2")
        with m.Switch(op2):
            with m.Case(ActOp.EXP, ActOp.SUMEXP, ActOp.ADD):
                m.d.comb += d2.eq(add2.sum)
            with m.Case(ActOp.MUL, ActOp.SCALE):
                m.d.comb += d2.eq(mul2)
            with m.Case(ActOp.GELU):
                m.d.comb += d2.eq(mul2 ^ (1 << 31))
            with m.Case(ActOp.SILU):
                m.d.comb += d2.eq(s1_xa ^ (1 << 31))
            with m.Case(ActOp.RELU):
                is_nan = (s1_xa[23:31] == 0xFF) & s1_xa[:23].any()
                m.d.comb += d2.eq(Mux(s1_xa[31] & ~is_nan, 0, s1_xa))
            with m.Default():
                m.d.comb += d2.eq(s1_xa)
        s2_xa, s2_d = reg(2, "xa"), reg(2, "d")
        # stage 3: exp unit and Q unit
        kexp = Mux(self.op2 == ActOp.GELU, K_HALF_LOG2E, K_LOG2E)
        g3 = exp2_unit(m, s2_d, kexp, name="exp3")
        q3 = gelu_q_unit(m, s2_xa, name="q3")
        s3_xa, s3_d, s3_g, s3_q = reg(3, "xa"), reg(3, "d"), reg(3, "g"), reg(3, "q")
        # stage 4: 1 + g (SILU), g * q (GELU), g * k (EXP)
        op4 = self.op3
        add4 = m.submodules.add4 = Fp32Adder()
        m.d.comb += [add4.a.eq(one), add4.b.eq(s3_g)]
        mul4 = fp32_mul(m, s3_g, Mux(op4 == ActOp.GELU, s3_q, self.k3), name="mul4")
        v4 = Signal(32, name="v4")
        with m.Switch(op4):
            with m.Case(ActOp.SILU):
                m.d.comb += v4.eq(add4.sum)
            with m.Case(ActOp.GELU, ActOp.EXP):
                m.d.comb += v4.eq(mul4)
            with m.Case(ActOp.SUMEXP):
                m.d.comb += v4.eq(s3_g)
            with m.Default():
                m.d.comb += v4.eq(s3_d)
        s4_xa, s4_v = reg(4, "xa"), reg(4, "v")
        # stage 5: recip (SILU, RECIP), 1 - p (GELU, x >= 0)
        op5 = self.op4
        rcp5 = recip_unit(m, s4_v, name="rcp5")
        add5 = m.submodules.add5 = Fp32Adder()
        m.d.comb += [add5.a.eq(one), add5.b.eq(s4_v ^ (1 << 31))]
        v5 = Signal(32, name="v5")
        with m.Switch(op5):
            with m.Case(ActOp.SILU, ActOp.RECIP):
                m.d.comb += v5.eq(rcp5)
            with m.Case(ActOp.GELU):
                m.d.comb += v5.eq(Mux(s4_xa[31], s4_v, add5.sum))
            with m.Default():
                m.d.comb += v5.eq(s4_v)
        s5_xa, s5_v = reg(5, "xa"), reg(5, "v")
        # stage 6: x * (sigmoid | Phi); SILU/GELU(-Inf) = -0
        op6 = self.op5
        mul6 = fp32_mul(m, s5_xa, s5_v, name="mul6")
        v6 = Signal(32, name="v6")
        with m.If(op_in(op6, ActOp.SILU, ActOp.GELU)):
            m.d.comb += v6.eq(Mux(s5_xa == NEG_INF_F32, 1 << 31, mul6))
        with m.Else():
            m.d.comb += v6.eq(s5_v)

        with m.If(self.adv):
            m.d.sync += [
                s1_xa.eq(dec_a), s1_xb.eq(dec_b),
                s2_xa.eq(s1_xa), s2_d.eq(d2),
                s3_xa.eq(s2_xa), s3_d.eq(s2_d), s3_g.eq(g3), s3_q.eq(q3),
                s4_xa.eq(s3_xa), s4_v.eq(v4),
                s5_xa.eq(s4_xa), s5_v.eq(v5),
                self.y.eq(v6),
            ]
        return m


class ActivationUnit(wiring.Component):
    """Pipelined activation datapath with ``lanes`` lanes (see the module docstring)."""

    def __init__(self, lanes: int = 256):
        if not isinstance(lanes, int) or isinstance(lanes, bool) or not 1 <= lanes <= 4096:
            self._MustUse__silence = True          # never elaborated: no UnusedElaboratable warning
            raise ValueError(f"lanes must be an integer in 1..4096, got {lanes!r}")
        self.lanes = lanes
        self.tree_levels = (lanes - 1).bit_length()
        super().__init__({
            "cmd": In(stream.Signature(act_cmd_layout())),
            "a": In(stream.Signature(act_in_layout(lanes))),
            "b": In(stream.Signature(act_b_layout(lanes))),
            "out": Out(stream.Signature(act_out_layout(lanes))),
        })

    @property
    def reduction_latency(self) -> int:
        """Clock edges from a reduction's last input handshake to its scalar's earliest output handshake."""
        return LATENCY + self.tree_levels

    def elaborate(self, platform):
        m = Module()
        lanes = self.lanes
        ctrl_layout = data.StructLayout({
            "op": 4, "in_fmt": 2, "out_fmt": 2, "c": 32, "k": 32,
            "count": range(lanes + 1), "last": 1,
        })

        def op_in(op, *ops):
            return Cat(*(op == o for o in ops)).any()

        # ---- command register and input handshake
        adv = Signal()
        m.d.comb += adv.eq(~self.out.valid | self.out.ready)
        cmd_r = Signal(act_cmd_layout())
        cmd_v = Signal()
        red_busy = Signal()
        out_is_red = Signal()
        is_bin = op_in(cmd_r.op, *BINARY_OPS)
        a_fire = Signal()
        m.d.comb += [
            self.a.ready.eq(adv & cmd_v & (~is_bin | self.b.valid)),
            self.b.ready.eq(adv & cmd_v & is_bin & self.a.valid),
            a_fire.eq(self.a.valid & self.a.ready),
            self.cmd.ready.eq(~red_busy & (~cmd_v | (a_fire & self.a.payload.last))),
        ]
        with m.If(self.out.valid & self.out.ready & out_is_red):
            m.d.sync += red_busy.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.sync += [cmd_r.eq(self.cmd.payload), cmd_v.eq(1),
                         red_busy.eq(op_in(self.cmd.payload.op, *REDUCTION_OPS))]
        with m.Elif(a_fire & self.a.payload.last):
            m.d.sync += cmd_v.eq(0)

        # ---- control pipeline: stage 1..6 carry the command and beat info
        n_stages = 6
        valid = [Signal(name=f"s{i}_valid") for i in range(n_stages + 1)]
        ctrl = [Signal(ctrl_layout, name=f"s{i}_ctrl") for i in range(n_stages + 1)]
        with m.If(adv):
            m.d.sync += [
                valid[1].eq(a_fire),
                ctrl[1].op.eq(cmd_r.op), ctrl[1].in_fmt.eq(cmd_r.in_fmt),
                ctrl[1].out_fmt.eq(cmd_r.out_fmt), ctrl[1].c.eq(cmd_r.c), ctrl[1].k.eq(cmd_r.k),
                ctrl[1].count.eq(self.a.payload.count), ctrl[1].last.eq(self.a.payload.last),
            ]
            for i in range(2, n_stages + 1):
                m.d.sync += [valid[i].eq(valid[i - 1]), ctrl[i].eq(ctrl[i - 1])]

        ys = []
        for ln in range(lanes):
            lane = m.submodules[f"lane{ln}"] = ActivationLane()
            m.d.comb += [
                lane.adv.eq(adv), lane.a.eq(self.a.payload.data[ln]),
                lane.b.eq(self.b.payload.data[ln]), lane.in_fmt.eq(cmd_r.in_fmt),
                lane.op1.eq(ctrl[1].op), lane.op2.eq(ctrl[2].op), lane.op3.eq(ctrl[3].op),
                lane.op4.eq(ctrl[4].op), lane.op5.eq(ctrl[5].op),
                lane.c1.eq(ctrl[1].c), lane.k1.eq(ctrl[1].k), lane.k3.eq(ctrl[3].k),
            ]
            ys.append(lane.y)

        # ---- element output
        c6 = ctrl[n_stages]
        is_red6 = op_in(c6.op, *REDUCTION_OPS)
        elem_data = []
        for ln in range(lanes):
            enc = encode_fp32(m, ys[ln], c6.out_fmt, name=f"enc_l{ln}")
            elem_data.append(Mux(ln < c6.count, enc, 0))

        # ---- reduction tree: level 0 = masked lane values, one register per level
        is_max6 = c6.op == ActOp.MAX
        ident = Mux(is_max6, NEG_INF_F32, 0)
        level = [Mux(ln < c6.count, ys[ln], ident) for ln in range(lanes)]
        width = 1 << self.tree_levels
        level += [ident] * (width - lanes)
        lv_valid, lv_ctrl = valid[n_stages] & is_red6, c6
        for lvl in range(self.tree_levels):
            nv = Signal(name=f"t{lvl + 1}_valid")
            nc = Signal(ctrl_layout, name=f"t{lvl + 1}_ctrl")
            is_max = lv_ctrl.op == ActOp.MAX
            nxt = []
            for j in range(len(level) // 2):
                add = m.submodules[f"tree{lvl + 1}_add{j}"] = Fp32Adder()
                node = _reduce_node(m, add, level[2 * j], level[2 * j + 1], is_max,
                                    name=f"t{lvl + 1}_node{j}")
                r = Signal(32, name=f"t{lvl + 1}_v{j}")
                with m.If(adv):
                    m.d.sync += r.eq(node)
                nxt.append(r)
            with m.If(adv):
                m.d.sync += [nv.eq(lv_valid), nc.eq(lv_ctrl)]
            level, lv_valid, lv_ctrl = nxt, nv, nc

        # ---- accumulator
        acc = Signal(32)
        first = Signal(init=1)
        is_max_t = lv_ctrl.op == ActOp.MAX
        acc_in = Mux(first, Mux(is_max_t, NEG_INF_F32, 0), acc)
        acc_add = m.submodules.acc_add = Fp32Adder()
        acc_next = _reduce_node(m, acc_add, acc_in, level[0], is_max_t, name="acc_next")
        scalar = encode_fp32(m, acc_next, lv_ctrl.out_fmt, name="enc_scalar")
        with m.If(adv & lv_valid):
            m.d.sync += [acc.eq(acc_next), first.eq(lv_ctrl.last)]

        # ---- output register
        with m.If(adv):
            with m.If(valid[n_stages] & ~is_red6):
                m.d.sync += [
                    self.out.valid.eq(1), out_is_red.eq(0),
                    self.out.payload.count.eq(c6.count), self.out.payload.last.eq(c6.last),
                ]
                m.d.sync += [self.out.payload.data[ln].eq(elem_data[ln]) for ln in range(lanes)]
            with m.Elif(lv_valid & lv_ctrl.last):
                m.d.sync += [
                    self.out.valid.eq(1), out_is_red.eq(1),
                    self.out.payload.count.eq(1), self.out.payload.last.eq(1),
                    self.out.payload.data[0].eq(scalar),
                ]
                m.d.sync += [self.out.payload.data[ln].eq(0) for ln in range(1, lanes)]
            with m.Else():
                m.d.sync += self.out.valid.eq(0)
        return m
