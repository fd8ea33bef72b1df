"""Reference of the bit-serial multiplier unit's lane products, and word generators for its tests.

``lane_products(weight, act, dtype)`` is what the lane reducer must see for one
(weight word, activation word) pair: per lane, the exact product of the two
significands (FP16/BF16, hidden bit included, no exponent) or of the two signed
INT8 values. ``datapath_products`` is what ``hw/gemv/multiplier.py``'s datapaths
hold after their walk, in the reducer's lane order: fraction times fraction
(hidden bits excluded; the reducer adds them back) or the INT8 products, lane
pair ``(2j, 2j+1)`` in datapath ``j``. ``random_word`` draws a 128-bit word whose lanes
are random or, with probability ``corner_share``, one of the corner encodings
(zero, signed zero, smallest subnormal, largest finite, Inf, NaN, ...).
"""

from ndpdimm.hw.formats import Dtype

__all__ = ["significand", "lanes_of", "lane_products", "datapath_products", "random_word",
           "CORNER16", "CORNER8"]


def significand(bits, dtype):
    info = dtype.info
    exp = (bits >> info.frac_bits) & ((1 << info.exp_bits) - 1)
    return ((1 << info.frac_bits) if exp else 0) | (bits & ((1 << info.frac_bits) - 1))


def lanes_of(word, dtype):
    w = dtype.info.elem_bits
    return [(word >> (i * w)) & ((1 << w) - 1) for i in range(dtype.info.lanes)]


def lane_products(weight, act, dtype):
    ws, xs = lanes_of(weight, dtype), lanes_of(act, dtype)
    if dtype == Dtype.INT8:
        sx = lambda v: v - 256 if v >= 128 else v
        return [sx(a) * sx(b) for a, b in zip(ws, xs)]
    return [significand(a, dtype) * significand(b, dtype) for a, b in zip(ws, xs)]


def datapath_products(weight, act, dtype):
    """Per reduce lane ``k``: the value datapath ``k mod 8`` holds when lane ``k`` is reduced."""
    if dtype == Dtype.INT8:
        products = lane_products(weight, act, dtype)
        return [products[2 * (k % 8) + k // 8] for k in range(16)]
    frac = (1 << dtype.info.frac_bits) - 1
    ws, xs = lanes_of(weight, dtype), lanes_of(act, dtype)
    return [(a & frac) * (b & frac) for a, b in zip(ws, xs)]


CORNER16 = [0x0000, 0x8000, 0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C00, 0x7E00, 0x3C00, 0xFFFF]
CORNER8 = [0x00, 0x01, 0x7F, 0x80, 0x81, 0xFF]


def random_word(rng, dtype, corner_share=0.3):
    w = dtype.info.elem_bits
    corners = CORNER8 if w == 8 else CORNER16
    word = 0
    for i in range(dtype.info.lanes):
        v = rng.choice(corners) if rng.random() < corner_share else rng.getrandbits(w)
        word |= v << (i * w)
    return word
