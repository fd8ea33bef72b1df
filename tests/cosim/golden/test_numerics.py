"""The golden model: independent float64 check with a stated bound, bit helpers, input validation."""

import random

import pytest
import torch

from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import Dtype

FLOATS = [Dtype.FP16, Dtype.BF16]


def within_bound(y, y64, abs_sum, n_terms):
    bound = golden.summation_error_bound(abs_sum, n_terms)
    finite = torch.isfinite(y64) & (y64.abs() < 3.4e38)
    err = (y.to(torch.float64) - y64).abs()
    return bool((err[finite] <= bound[finite]).all()), (err / bound.clamp_min(1e-300))[finite].max()


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("k", [1, 7, 64, 1000])
def test_dense_matches_float64_within_bound(dtype, k):
    g = random.Random(k)
    W = random_values((33, k), dtype, g)
    X = random_values((4, k), dtype, g)
    y = golden.gemv_dot(W, X, dtype)
    y64 = golden.reference_f64_dense(W, X)
    abs_sum = torch.matmul(X.to(torch.float64).abs(), W.to(torch.float64).abs().T)
    ok, worst = within_bound(y, y64, abs_sum, k)
    assert ok, f"error reaches {worst:.2f} x the bound"


@pytest.mark.parametrize("dtype", FLOATS)
def test_col_gather_matches_float64_within_bound(dtype):
    g = random.Random(3)
    Wt = random_values((50, 40), dtype, g)
    H = random_values((3, 50), dtype, g)
    idx = [g.randrange(50) for _ in range(30)]
    y = golden.gemv_col_gather(Wt, H, idx, dtype)
    y64 = golden.reference_f64_col_gather(Wt, H, idx)
    i = torch.tensor(idx)
    abs_sum = torch.matmul(H[:, i].to(torch.float64).abs(), Wt[i].to(torch.float64).abs())
    ok, worst = within_bound(y, y64, abs_sum, len(idx))
    assert ok, f"error reaches {worst:.2f} x the bound"


def test_bound_check_can_fail():
    """A result off by far more than rounding can explain is rejected by the bound check."""
    g = random.Random(9)
    W = random_values((8, 64), Dtype.FP16, g)
    X = random_values((1, 64), Dtype.FP16, g)
    y = golden.gemv_dot(W, X, Dtype.FP16)
    y64 = golden.reference_f64_dense(W, X)
    abs_sum = torch.matmul(X.to(torch.float64).abs(), W.to(torch.float64).abs().T)
    bad = y + (abs_sum * 1e-4).to(torch.float32)
    assert not within_bound(bad, y64, abs_sum, 64)[0]


def test_hardware_order_is_sequential():
    """The golden model's order is observable: 1 + 2**-24 + 2**-24 in order gives 1, not 1 + 2**-23."""
    W = torch.tensor([[1.0, 2.0 ** -12, 2.0 ** -12]], dtype=torch.float16)
    X = torch.tensor([[1.0, 2.0 ** -12, 2.0 ** -12]], dtype=torch.float16)
    y = golden.gemv_dot(W, X, Dtype.FP16)
    assert y.item() == 1.0                        # each 2**-24 is a tie that rounds to even
    W2 = torch.tensor([[2.0 ** -12, 2.0 ** -12, 1.0]], dtype=torch.float16)
    assert golden.gemv_dot(W2, W2, Dtype.FP16).item() == 1.0 + 2.0 ** -23


def test_int8_exact_and_wraps():
    g = torch.Generator().manual_seed(0)
    W = torch.randint(-128, 128, (5, 100), generator=g).to(torch.int8)
    X = torch.randint(-128, 128, (2, 100), generator=g).to(torch.int8)
    exact = X.to(torch.int64) @ W.to(torch.int64).T
    assert torch.equal(golden.gemv_dot(W, X, "int8").to(torch.int64), exact)
    # 140000 x (-128 * -128) = 2293760000 > 2**31 - 1: wraps to 2293760000 - 2**32
    K = 140000
    W = torch.full((1, K), -128, dtype=torch.int8)
    assert golden.gemv_dot(W, W, Dtype.INT8).item() == 2293760000 - 2 ** 32


def test_nan_is_canonical_and_inf_rules():
    nan16 = golden.bits_elem(torch.tensor([0xFE01]), Dtype.FP16)   # negative NaN with payload
    W = torch.cat([nan16, torch.tensor([1.0], dtype=torch.float16)])[None]
    X = torch.tensor([[1.0, 1.0]], dtype=torch.float16)
    assert golden.f32_bits(golden.gemv_dot(W, X, Dtype.FP16)).item() == golden.CANONICAL_NAN
    inf = torch.tensor([[float("inf"), float("-inf")]], dtype=torch.bfloat16)
    one = torch.ones((1, 2), dtype=torch.bfloat16)
    assert golden.f32_bits(golden.gemv_dot(inf, one, Dtype.BF16)).item() == golden.CANONICAL_NAN
    zero_inf = golden.gemv_dot(torch.tensor([[0.0]], dtype=torch.bfloat16),
                               torch.tensor([[float("inf")]], dtype=torch.bfloat16), Dtype.BF16)
    assert golden.f32_bits(zero_inf).item() == golden.CANONICAL_NAN


def test_bf16_products_leave_fp32_range():
    big = torch.tensor([[3e38]], dtype=torch.bfloat16)
    assert golden.gemv_dot(big, big, Dtype.BF16).item() == float("inf")
    tiny = torch.tensor([[1e-20]], dtype=torch.bfloat16)          # product 1e-40
    y = golden.gemv_dot(tiny, tiny, Dtype.BF16).item()
    assert 0 < y < 1.2e-38                           # a subnormal, not flushed
    assert golden.gemv_dot(tiny, -tiny * 1e-20, Dtype.BF16).item() == 0.0


def test_accumulator_starts_at_plus_zero():
    negzero = torch.tensor([[-0.0, -0.0]], dtype=torch.float16)
    pos = torch.tensor([[1.0, 1.0]], dtype=torch.float16)
    assert golden.f32_bits(golden.gemv_dot(negzero, pos, Dtype.FP16)).item() == 0


def test_bit_helpers_round_trip():
    bits = torch.arange(0, 65536, 97)
    for dtype in FLOATS:
        assert torch.equal(golden.elem_bits(golden.bits_elem(bits, dtype), dtype), bits)
    b8 = torch.arange(256)
    assert torch.equal(golden.elem_bits(golden.bits_elem(b8, Dtype.INT8), Dtype.INT8), b8)
    f = torch.tensor([0x00000001, 0x7F7FFFFF, 0x80000000, 0x3F800000])
    assert torch.equal(golden.f32_bits(golden.bits_f32(f)), f)


@pytest.mark.parametrize("call,message", [
    (lambda: golden.gemv_dot(torch.zeros(2, 3), torch.zeros(1, 3), Dtype.FP16), "dtype"),
    (lambda: golden.gemv_dot(torch.zeros(2, 3, dtype=torch.float16),
                             torch.zeros(1, 4, dtype=torch.float16), "fp16"), "columns"),
    (lambda: golden.gemv_dot(torch.zeros(2, 3, dtype=torch.float16),
                             torch.zeros(3, dtype=torch.float16), "fp16"), "2-D"),
    (lambda: golden.gemv_dot(torch.zeros(2, 3, dtype=torch.float16),
                             torch.zeros(1, 3, dtype=torch.float16), "fp8"), "unknown dtype"),
    (lambda: golden.gemv_row_gather(torch.zeros(2, 3, dtype=torch.int8),
                                    torch.zeros(1, 3, dtype=torch.int8), [0, 2], "int8"), "outside"),
    (lambda: golden.gemv_col_gather(torch.zeros(2, 3, dtype=torch.int8),
                                    torch.zeros(1, 2, dtype=torch.int8), [[0]], "int8"), "1-D"),
])
def test_bad_input_is_rejected(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def _job(**kw):
    args = dict(op="dense", dtype=Dtype.FP16, W=torch.zeros(4, 5, dtype=torch.float16),
                X=torch.zeros(2, 5, dtype=torch.float16), idx=None,
                shape=EngineShape(n_units=4, max_batch=4))
    args.update(kw)
    return GemvJob(**args)


@pytest.mark.parametrize("kw,message", [
    ({"op": "transpose"}, "unknown GEMV op"),
    ({"dtype": "fp32"}, "unknown dtype"),
    ({"X": torch.zeros(5, 5, dtype=torch.float16)}, "batch 5 outside"),
    ({"X": torch.zeros(0, 5, dtype=torch.float16)}, "batch 0 outside"),
    ({"idx": [1]}, "no index list"),
    ({"op": "row_gather"}, "needs an index list"),
    ({"op": "row_gather", "idx": [4]}, "outside 0..3"),
    ({"op": "col_gather", "idx": [0]}, "neurons"),
    ({"W": torch.zeros(4, 5, dtype=torch.bfloat16)}, "dtype"),
    ({"W": torch.zeros(2 ** 20, 1, dtype=torch.float16), "X": torch.zeros(1, 1, dtype=torch.float16)},
     "outputs exceed"),
])
def test_job_validation(kw, message):
    """Bad jobs are rejected on the Python side, before any simulation."""
    with pytest.raises(ValueError, match=message):
        _job(**kw)
