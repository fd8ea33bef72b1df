"""Test-case generators for the GEMV engine: directed corner cases and constrained-random jobs.

Shared by the Amaranth-simulator tests and the cocotb benches, so both check
the same situations.
"""

import random

import torch

from ndpdimm.cosim.gemv.job import OPS, EngineShape, GemvJob
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import Dtype

__all__ = ["SPECIAL_BITS", "special_tensor", "random_values", "corner_jobs", "random_job"]

#: Raw bit patterns of the values every datapath must get right.
SPECIAL_BITS = {
    Dtype.FP16: [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x3C00, 0xBC00, 0x7BFF, 0xFBFF,
                 0x7C00, 0xFC00, 0x7E00, 0x7C01, 0xFE00, 0x3555, 0x0200],
    Dtype.BF16: [0x0000, 0x8000, 0x0001, 0x8001, 0x007F, 0x0080, 0x3F80, 0xBF80, 0x7F7F, 0xFF7F,
                 0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0x0040, 0x1F80, 0x6000, 0xE000],
    Dtype.INT8: [0x00, 0x01, 0xFF, 0x7F, 0x80, 0x81, 0x40, 0xC0],
}
_FINITE = {Dtype.FP16: lambda b: (b & 0x7C00) != 0x7C00,
           Dtype.BF16: lambda b: (b & 0x7F80) != 0x7F80,
           Dtype.INT8: lambda b: True}


def special_tensor(shape, dtype, gen: random.Random, finite_only=False) -> torch.Tensor:
    pool = [b for b in SPECIAL_BITS[dtype] if not finite_only or _FINITE[dtype](b)]
    n = 1
    for s in shape:
        n *= s
    bits = torch.tensor([gen.choice(pool) for _ in range(n)], dtype=torch.int64).reshape(shape)
    return golden.bits_elem(bits, dtype)


def random_values(shape, dtype, gen: random.Random, special_share=0.0) -> torch.Tensor:
    """Normal-ish random values; ``special_share`` of them replaced by special values."""
    tgen = torch.Generator().manual_seed(gen.getrandbits(31))
    if dtype == Dtype.INT8:
        t = torch.randint(-128, 128, shape, generator=tgen).to(torch.int8)
    else:
        scale = 2.0 ** gen.randint(-4, 4)
        t = (torch.randn(shape, generator=tgen) * scale).to(golden.TORCH_DTYPE[dtype])
    if special_share > 0:
        mask = torch.rand(shape, generator=tgen) < special_share
        t = torch.where(mask, special_tensor(shape, dtype, gen), t)
    return t


def _job(op, dtype, W, X, idx, shape):
    return GemvJob(op, dtype, W, X, idx, shape)


def corner_jobs(shape: EngineShape, dtype: Dtype, seed: int = 0) -> list:
    """Directed corner cases for one dtype, each a (name, GemvJob)."""
    g = random.Random(seed)
    U, B = shape.n_units, shape.max_batch
    lanes = dtype.info.lanes
    td = golden.TORCH_DTYPE[dtype]
    jobs = []

    def add(name, op, W, X, idx=None):
        # directed cases use batch 2-3 where it matters; an engine with a smaller
        # max batch gets the first rows only
        jobs.append((name, _job(op, dtype, W, X[:B], idx, shape)))

    # every special value against every other one, one lane each (dense, odd K)
    specials = golden.bits_elem(torch.tensor(SPECIAL_BITS[dtype]), dtype)
    n = len(specials)
    # every special value times every other one, one product per output (K = 1)
    for start in range(0, n, B):
        add(f"special x special {start}", "dense", specials[:, None],
            specials[start:start + B, None])
    # every special value added to a running sum of ordinary values (K = 3)
    ordinary = random_values((n, 2), dtype, g)
    add("special + sum", "dense", torch.cat([ordinary, specials[:, None]], 1),
        torch.ones((1, 3), dtype=td) if dtype != Dtype.INT8 else torch.ones((1, 3), dtype=td))
    # specials mixed into realistic data, every op, batch 2
    add("specials in data", "dense", random_values((U + 1, 3 * lanes + 5), dtype, g, 0.2),
        random_values((2, 3 * lanes + 5), dtype, g, 0.2))
    add("specials col gather", "col_gather", random_values((9, U * lanes + 3), dtype, g, 0.2),
        random_values((2, 9), dtype, g, 0.2), [3, 0, 8, 3])
    # tiny and odd shapes
    add("1x1", "dense", random_values((1, 1), dtype, g), random_values((1, 1), dtype, g))
    add("1 row", "dense", random_values((1, 2 * lanes + 1), dtype, g),
        random_values((1, 2 * lanes + 1), dtype, g))
    add("1 column", "dense", random_values((2 * U + 1, 1), dtype, g), random_values((B, 1), dtype, g))
    add("row gather 1 index", "row_gather", random_values((5, 7), dtype, g),
        random_values((1, 7), dtype, g), [4])
    add("row gather repeated+reversed", "row_gather", random_values((U + 2, lanes), dtype, g),
        random_values((3, lanes), dtype, g), list(range(U + 1, -1, -1)) + [0, 0])
    add("col gather 1 output", "col_gather", random_values((4, 1), dtype, g),
        random_values((1, 4), dtype, g), [2, 1])
    # empty index lists: row gather has no outputs, column gather gives zeros
    add("row gather empty", "row_gather", random_values((6, 5), dtype, g),
        random_values((2, 5), dtype, g), [])
    add("col gather empty", "col_gather", random_values((6, 2 * lanes + 3), dtype, g),
        random_values((2, 6), dtype, g), [])
    # full batch
    add("max batch", "dense", random_values((U + 3, lanes + 1), dtype, g),
        random_values((B, lanes + 1), dtype, g))
    if dtype == Dtype.INT8:
        add("-128 x -128", "dense", torch.full((3, 2 * lanes), -128, dtype=td),
            torch.full((2, 2 * lanes), -128, dtype=td))
        add("max magnitude col gather", "col_gather", torch.full((5, 17), -128, dtype=td),
            torch.tensor([[127, -128, -128, 127, -1]], dtype=td), [0, 1, 2, 3, 4])
    elif dtype == Dtype.BF16:
        big = torch.tensor([1e30, -3e38, 2.5e20, 1e38], dtype=torch.bfloat16)
        tiny = torch.tensor([1e-30, 3e-39, -1e-20, 5e-25], dtype=torch.bfloat16)
        add("products overflow to Inf", "dense", big.repeat(3, 2), big.roll(1)[None].repeat(1, 2))
        add("products underflow to subnormal/zero", "dense", tiny.repeat(3, 2),
            tiny.roll(2)[None].repeat(2, 2))
        add("sum overflows to Inf", "dense", torch.full((2, 9), 3e38, dtype=td),
            torch.full((1, 9), 1.0, dtype=td))
    else:
        add("max finite products", "dense", torch.full((2, 9), 65504.0, dtype=td),
            torch.tensor([[65504.0, -65504.0] * 4 + [65504.0]], dtype=td))
        add("subnormal x subnormal", "dense", golden.bits_elem(torch.tensor([[1, 0x3FF, 0x8200]]), dtype),
            golden.bits_elem(torch.tensor([[0x3FF, 1, 0x0200]]), dtype))
    return jobs


def random_job(shape: EngineShape, gen: random.Random, *, dtype=None, op=None,
               max_out=None, max_in=40, special_share=0.02) -> GemvJob:
    """A constrained-random job that fits ``shape``: random op, dtype, batch, sizes, values."""
    dtype = Dtype.parse(dtype) if dtype is not None else gen.choice(list(Dtype))
    op = op or gen.choice(OPS)
    lanes = dtype.info.lanes
    max_out = max_out or 2 * shape.n_units * (lanes if op == "col_gather" else 1) + 5
    batch = gen.choice([1, shape.max_batch, gen.randint(1, shape.max_batch)])
    n_out = gen.randint(1, max_out)
    n_in = gen.randint(1, max_in)
    if op == "col_gather":
        W = random_values((n_in, n_out), dtype, gen, special_share)
        X = random_values((batch, n_in), dtype, gen, special_share)
        idx = [gen.randrange(n_in) for _ in range(gen.randint(0, n_in))]
    else:
        W = random_values((n_out, n_in), dtype, gen, special_share)
        X = random_values((batch, n_in), dtype, gen, special_share)
        idx = None
        if op == "row_gather":
            idx = [gen.randrange(n_out) for _ in range(gen.randint(0, n_out))]
    return GemvJob(op, dtype, W, X, idx, shape)
