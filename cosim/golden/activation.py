"""Bit-exact golden model of the activation unit (``ndpdimm.hw.activation.unit``).

Vectorised numpy/torch. Every binary32 ``+`` and ``*`` of the datapath is one
torch float32 op on the CPU (IEEE round-to-nearest-even, subnormals honoured);
the fixed-point units (exp2, reciprocal, GELU's Q) repeat the hardware's integer
steps in numpy int64 with the very tables the RTL uses, and round their exact
fixed-point result to binary32 by converting the exact float64 value (one RNE
rounding, as ``round_pack_fp32`` does). NaNs are canonicalised at the output.

Lane words are ``uint32`` bit patterns (FP16/BF16 in the low 16 bits).
``elementwise`` gives the ``out`` lane words of an element op, ``reduce_beats``
the scalar of a MAX/SUMEXP pass in the hardware's tree-then-beat order,
``softmax`` the four passes a sequencer runs. ``reference_*`` are the float64
functions the approximations are measured against.
"""

import math

import numpy as np
import torch

from ndpdimm.hw.activation.unit import (
    EXP2_TABLE,
    GELU_Q_TABLE,
    K_HALF_LOG2E,
    K_LOG2E,
    NEG_INF_F32,
    ONE_F32,
    RECIP_TABLE,
    REDUCTION_OPS,
    ActFmt,
    ActOp,
)

__all__ = [
    "CANONICAL_NAN", "bits_to_f32", "f32_to_bits", "decode", "encode",
    "exp2_fixed", "recip_fixed", "gelu_q_fixed", "lane_values",
    "elementwise", "reduce_beats", "split_beats", "softmax",
    "reference_silu", "reference_gelu", "reference_exp", "fp16_ulp_error",
]

CANONICAL_NAN = 0x7FC00000
_SIGN = 0x80000000


def bits_to_f32(bits) -> torch.Tensor:
    """uint32-valued array -> float32 tensor (same bits)."""
    b = np.asarray(bits, dtype=np.int64) & 0xFFFFFFFF
    return torch.from_numpy(b.astype(np.uint32).view(np.int32).copy()).view(torch.float32)


def f32_to_bits(x: torch.Tensor) -> np.ndarray:
    """float32 tensor -> int64 array of its bits, NaN canonicalised."""
    b = x.to(torch.float32).contiguous().view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF
    return np.where(torch.isnan(x).numpy(), CANONICAL_NAN, b)


def _fields(bits):
    b = np.asarray(bits, dtype=np.int64) & 0xFFFFFFFF
    s = b >> 31
    e = (b >> 23) & 0xFF
    f = b & 0x7FFFFF
    return s, e, f, np.maximum(e, 1), f | ((e != 0).astype(np.int64) << 23)


def _is_nan(bits):
    _, e, f, _, _ = _fields(bits)
    return (e == 0xFF) & (f != 0)


def decode(bits, fmt) -> torch.Tensor:
    """Lane words in ``fmt`` -> float32 tensor (exact)."""
    b = np.asarray(bits, dtype=np.int64) & 0xFFFFFFFF
    fmt = ActFmt(fmt) if fmt in (0, 1, 2) else ActFmt.FP32
    if fmt == ActFmt.FP16:
        h = torch.from_numpy((b & 0xFFFF).astype(np.uint16).view(np.int16).copy())
        return h.view(torch.float16).to(torch.float32)
    if fmt == ActFmt.BF16:
        return bits_to_f32((b & 0xFFFF) << 16)
    return bits_to_f32(b)


def encode(y: torch.Tensor, fmt) -> np.ndarray:
    """float32 tensor -> lane words in ``fmt`` (RNE, overflow to Inf, canonical NaN)."""
    nan = torch.isnan(y).numpy()
    if fmt == ActFmt.FP16:
        h = y.to(torch.float16).view(torch.int16).numpy().astype(np.int64) & 0xFFFF
        return np.where(nan, 0x7E00, h)
    if fmt == ActFmt.BF16:
        h = y.to(torch.bfloat16).view(torch.int16).numpy().astype(np.int64) & 0xFFFF
        return np.where(nan, 0x7FC0, h)
    return f32_to_bits(y)


def _pq(table, index, r):
    a = np.asarray(table.a, dtype=np.int64)[index]
    b = np.asarray(table.b, dtype=np.int64)[index]
    c = np.asarray(table.c, dtype=np.int64)[index]
    u = b + ((c * r) >> table.rbits)
    return a + ((u * r) >> table.rbits)


def _exact_to_f32(y, exp2):
    """Round the exact value ``y * 2**exp2`` (int arrays, y >= 0) to binary32 (RNE)."""
    with np.errstate(over="ignore", under="ignore"):
        v = np.ldexp(y.astype(np.float64), exp2.astype(np.int64))
        return torch.from_numpy(v.astype(np.float32))


def exp2_fixed(d: torch.Tensor, k: int) -> torch.Tensor:
    """The exp unit: binary32 ``2**(d * k / 2**31)`` exactly as the RTL computes it."""
    db = f32_to_bits(d)
    s, e, f, e_eff, sig = _fields(db)
    prod = sig * k                                       # < 2**56
    big = e_eff >= 135
    sh = np.clip(151 - e_eff, 0, 63)
    tmag = np.where(big, 0, prod >> sh)
    sat = big | (tmag >= 1 << 38)
    t = np.where(s == 1, -tmag, tmag)
    n = t >> 30
    frac = t & ((1 << 30) - 1)
    rb = EXP2_TABLE.rbits
    y = _pq(EXP2_TABLE, frac >> rb, frac & ((1 << rb) - 1))
    out = f32_to_bits(_exact_to_f32(np.where(sat, 0, y), n - 30))
    out = np.where(sat, np.where(s == 1, 0, 0x7F800000), out)
    out = np.where((e == 0xFF) & (f != 0), CANONICAL_NAN, out)
    return bits_to_f32(out)


def recip_fixed(x: torch.Tensor) -> torch.Tensor:
    """The reciprocal unit: binary32 ``1/x`` exactly as the RTL computes it."""
    xb = f32_to_bits(x)
    s, e, f, e_eff, sig = _fields(xb)
    zero = sig == 0
    bitlen = np.frexp(np.where(zero, 1, sig).astype(np.float64))[1].astype(np.int64)
    lz = 24 - bitlen
    mn = (sig << lz) & 0xFFFFFF
    rb = RECIP_TABLE.rbits
    y = _pq(RECIP_TABLE, (mn >> rb) & 0x3F, mn & ((1 << rb) - 1))
    e_unb = e_eff - 127 - lz
    out = f32_to_bits(_exact_to_f32(np.where(zero | (e == 0xFF), 0, y), -31 - e_unb))
    out = out | (s << 31)
    out = np.where(zero, 0x7F800000 | (s << 31), out)
    out = np.where(e == 0xFF, s << 31, out)
    out = np.where((e == 0xFF) & (f != 0), CANONICAL_NAN, out)
    return bits_to_f32(out)


def gelu_q_fixed(x: torch.Tensor) -> torch.Tensor:
    """GELU's ``Q(|x|)`` exactly as the RTL computes it."""
    s, e, f, e_eff, sig = _fields(f32_to_bits(x))
    u = np.where(e_eff >= 126, sig << np.clip(e_eff - 126, 0, 3),
                 sig >> np.clip(126 - e_eff, 0, 31))
    u = np.where(e_eff >= 130, (1 << 27) - 1, u)
    rb = GELU_Q_TABLE.rbits
    y = _pq(GELU_Q_TABLE, u >> rb, u & ((1 << rb) - 1))
    return _exact_to_f32(y, np.full_like(y, -30))


def _neg(x: torch.Tensor) -> torch.Tensor:
    return bits_to_f32(f32_to_bits(x) ^ _SIGN)


def lane_values(op, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor, k: torch.Tensor):
    """binary32 result of ``op`` per lane before output encoding (the RTL's stage-6 value)."""
    op = int(op)
    if op == ActOp.RELU:
        return _relu(a)
    if op == ActOp.SCALE:
        return a * k
    if op == ActOp.ADD:
        return a + b
    if op == ActOp.MUL:
        return a * b
    if op in (ActOp.EXP, ActOp.SUMEXP):
        g = exp2_fixed(a + _neg(c), K_LOG2E)
        return g * k if op == ActOp.EXP else g
    if op == ActOp.RECIP:
        return recip_fixed(a)
    if op == ActOp.SILU:
        g = exp2_fixed(_neg(a), K_LOG2E)
        y = a * recip_fixed(torch.ones_like(g) + g)
        return _neg_inf_to_neg_zero(a, y)
    if op == ActOp.GELU:
        g = exp2_fixed(_neg(a * a), K_HALF_LOG2E)
        p = g * gelu_q_fixed(a)
        neg = torch.from_numpy(f32_to_bits(a) >> 31 == 1)
        phi = torch.where(neg, p, torch.ones_like(p) + _neg(p))
        return _neg_inf_to_neg_zero(a, a * phi)
    return a.clone()                             # PASS, MAX and reserved codes


def _relu(a):
    negative = torch.from_numpy((f32_to_bits(a) >> 31) == 1) & ~torch.isnan(a)
    return torch.where(negative, torch.zeros_like(a), a)


def _neg_inf_to_neg_zero(a, y):
    return torch.where(torch.isneginf(a), torch.full_like(y, -0.0), y)


def _const(bits, n):
    return bits_to_f32(np.full(n, bits, dtype=np.int64))


def elementwise(op, a_bits, b_bits=None, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP16,
                c=0, k=ONE_F32) -> np.ndarray:
    """``out`` lane words of element op ``op`` on lane words ``a_bits`` (and ``b_bits``).

    ``c`` and ``k`` are binary32 bit patterns of the command constants.
    """
    if int(op) in REDUCTION_OPS:
        raise ValueError(f"op {ActOp(op).name} is a reduction: use reduce_beats")
    a_bits = np.asarray(a_bits, dtype=np.int64)
    n = a_bits.size
    a = decode(a_bits, in_fmt)
    b = decode(b_bits if b_bits is not None else np.zeros(n, np.int64), in_fmt)
    y = lane_values(op, a, b, _const(c, n), _const(k, n))
    return encode(y, out_fmt if out_fmt in (0, 1) else ActFmt.FP32)


def split_beats(a_bits, lanes: int):
    """A vector -> list of beats of ``lanes`` lane words (the last one partial)."""
    a_bits = np.asarray(a_bits, dtype=np.int64)
    return [a_bits[i:i + lanes] for i in range(0, max(a_bits.size, 1), lanes)]


def _node(op, x, y):
    """One tree / accumulator node on float32 tensors (NaN canonicalised later)."""
    if op == ActOp.SUMEXP:
        return x + y
    xb, yb = f32_to_bits(x), f32_to_bits(y)
    key = lambda b: np.where(b >> 31 == 1, (~b) & 0xFFFFFFFF, b | _SIGN)
    pick = np.where(key(xb) >= key(yb), xb, yb)
    nan = _is_nan(xb) | _is_nan(yb)
    return bits_to_f32(np.where(nan, CANONICAL_NAN, pick))


def reduce_beats(op, beats, lanes: int, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP32, c=0) -> int:
    """Scalar ``out`` lane word of a MAX/SUMEXP pass over ``beats`` (lists of valid lane words).

    Per beat: lane values padded with the identity to a power of two, reduced
    pairwise (lanes 2j, 2j+1 first); then acc = identity, acc = acc (op) beat.
    """
    op = ActOp(op)
    if op not in REDUCTION_OPS:
        raise ValueError(f"op {op.name} is not a reduction")
    ident = NEG_INF_F32 if op == ActOp.MAX else 0
    width = 1 << (lanes - 1).bit_length()
    acc = _const(ident, 1)
    for beat in beats:
        beat = np.asarray(beat, dtype=np.int64)
        if beat.size > lanes:
            raise ValueError(f"beat of {beat.size} lanes exceeds lanes={lanes}")
        n = beat.size
        a = decode(beat, in_fmt)
        vals = lane_values(op, a, a, _const(c, n), _const(ONE_F32, n))
        level = torch.cat([vals, _const(ident, width - n)])
        while level.numel() > 1:
            level = _node(op, level[0::2], level[1::2])
        acc = _node(op, acc, level)
    return int(encode(acc, out_fmt if out_fmt in (0, 1) else ActFmt.FP32)[0])


def softmax(x_bits, lanes: int, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP16):
    """The sequencer's softmax: MAX, SUMEXP(c = max), RECIP(sum), EXP(c = max, k = 1/sum).

    Returns dict with ``max``, ``sum``, ``recip`` (binary32 bits) and ``y`` (out lane words).
    """
    beats = split_beats(x_bits, lanes)
    mx = reduce_beats(ActOp.MAX, beats, lanes, in_fmt, ActFmt.FP32)
    sm = reduce_beats(ActOp.SUMEXP, beats, lanes, in_fmt, ActFmt.FP32, c=mx)
    rc = int(elementwise(ActOp.RECIP, [sm], in_fmt=ActFmt.FP32, out_fmt=ActFmt.FP32)[0])
    y = elementwise(ActOp.EXP, x_bits, in_fmt=in_fmt, out_fmt=out_fmt, c=mx, k=rc)
    return {"max": mx, "sum": sm, "recip": rc, "y": y}


# ------------------------------------------------------------------ float64 references

def reference_exp(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.exp(np.asarray(x, dtype=np.float64))


def reference_silu(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        y = x / (1.0 + np.exp(-x))
    return np.where(np.isneginf(x), -0.0, y)


_erf = np.vectorize(math.erf, otypes=[np.float64])
_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def reference_gelu(x: np.ndarray) -> np.ndarray:
    """Exact GELU ``x * Phi(x)``, Phi via erfc for x < 0 (no cancellation)."""
    x = np.asarray(x, dtype=np.float64)
    finite = np.isfinite(x)
    xs = np.where(finite, x, 0.0)
    phi = np.where(xs < 0, 0.5 * _erfc(-xs / math.sqrt(2.0)), 0.5 * (1.0 + _erf(xs / math.sqrt(2.0))))
    y = xs * phi
    y = np.where(np.isposinf(x), np.inf, y)
    y = np.where(np.isneginf(x), -0.0, y)
    return np.where(np.isnan(x), np.nan, y)


def fp16_ulp_error(got_bits, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in units of the FP16 ulp at ``exact`` (float64 ``exact``, finite).

    The ulp of a value v is 2**(max(floor(log2|v|), -14) - 10) (subnormal ulp 2**-24);
    values beyond the FP16 range use the largest binade's ulp (32); a got of Inf
    against a finite exact value counts as infinitely wrong.
    """
    got = decode(got_bits, ActFmt.FP16).to(torch.float64).numpy()
    exact = np.asarray(exact, dtype=np.float64)
    mag = np.abs(exact)
    e = np.floor(np.log2(np.where(mag > 0, mag, 1.0)))
    e = np.clip(np.where(mag > 0, e, -14), -14, 15)
    ulp = np.ldexp(1.0, (e - 10).astype(np.int64))
    with np.errstate(invalid="ignore"):
        err = np.abs(got - exact) / ulp
    return np.where(np.isinf(got) & np.isfinite(exact), np.inf, err)
