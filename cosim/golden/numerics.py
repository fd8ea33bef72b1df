"""Torch golden model of the NDP core's numerics (docs/numerics.md is the contract).

Bit-exact by construction: it performs the same IEEE binary32 operations as the
hardware, in the hardware's order, with float32 torch ops on the CPU (which
honour subnormals; nothing here enables flush-to-zero).

* Products: ``float32(w) * float32(a)``. FP16 x FP16 is always exact in FP32;
  BF16 x BF16 is exact unless it leaves FP32's range, where IEEE RNE rounds it
  to Inf or into the subnormal range / zero. INT8 x INT8 is an exact INT16.
* Reduction (mode DOT: dense GEMV, row gather): one accumulator per output,
  starting at +0.0, adds the products in column order ``k = 0, 1, ..., K-1``
  with binary32 round-to-nearest-even. Columns are walked lane by lane through
  each 128-bit weight word, words in order - i.e. plain sequential order.
* Reduction (mode AXPY: column gather): one accumulator per output element,
  starting at +0.0, adds ``h[b, j] * Wt[j, n]`` for ``j`` in index-list order.
* NaN: every NaN result is the canonical quiet NaN 0x7FC00000. Inf and
  subnormals follow IEEE 754.
* INT8: products accumulate in INT32 with two's-complement wrap-around.

Every function validates its inputs first and raises ``ValueError`` naming the
bad argument; nothing is simulated on bad input.
"""

import numpy as np
import torch

from ndpdimm.hw.formats import Dtype

__all__ = [
    "CANONICAL_NAN", "TORCH_DTYPE",
    "f32_bits", "bits_f32", "elem_bits", "bits_elem", "canonical_nan",
    "check_operand", "result_bits", "result_values", "accumulate_bits",
    "product_f32", "gemv_dot", "gemv_row_gather", "gemv_col_gather",
    "reference_f64_dense", "reference_f64_col_gather", "summation_error_bound",
]

CANONICAL_NAN = 0x7FC00000

TORCH_DTYPE = {
    Dtype.FP16: torch.float16,
    Dtype.BF16: torch.bfloat16,
    Dtype.INT8: torch.int8,
}


def f32_bits(x: torch.Tensor) -> torch.Tensor:
    """float32 tensor -> its IEEE bit patterns as int64 in [0, 2**32)."""
    return x.to(torch.float32).contiguous().view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def bits_f32(bits) -> torch.Tensor:
    """Bit patterns (ints in [0, 2**32)) -> float32 tensor."""
    t = torch.as_tensor(bits, dtype=torch.int64)
    t = torch.where(t >= 2**31, t - 2**32, t).to(torch.int32)
    return t.view(torch.float32)


def elem_bits(x: torch.Tensor, dtype: Dtype) -> torch.Tensor:
    """Elements of ``dtype`` -> their raw storage bits as int64 (16 or 8 bits)."""
    dtype = Dtype.parse(dtype)
    width = dtype.info.elem_bits
    view = torch.int16 if width == 16 else torch.int8
    return x.contiguous().view(view).to(torch.int64) & ((1 << width) - 1)


def bits_elem(bits, dtype: Dtype) -> torch.Tensor:
    """Raw storage bits -> tensor of ``dtype``."""
    dtype = Dtype.parse(dtype)
    width = dtype.info.elem_bits
    t = torch.as_tensor(bits, dtype=torch.int64)
    t = torch.where(t >= 2**(width - 1), t - 2**width, t)
    view = torch.int16 if width == 16 else torch.int8
    return t.to(view).view(TORCH_DTYPE[dtype])


def canonical_nan(y: torch.Tensor) -> torch.Tensor:
    """Replace every NaN with the canonical quiet NaN (bit pattern 0x7FC00000)."""
    if y.dtype != torch.float32:
        return y
    return torch.where(torch.isnan(y), bits_f32(CANONICAL_NAN), y)


def result_bits(y: torch.Tensor) -> np.ndarray:
    """GEMV results (float32 or int32 tensor) -> their 32-bit patterns as a uint32 array."""
    if y.dtype == torch.int32:
        return y.numpy().view(np.uint32)
    return f32_bits(y).numpy().astype(np.uint32)


def result_values(bits, is_float: bool) -> torch.Tensor:
    """32-bit result patterns -> float32 (FP16/BF16 operations) or int32 (INT8) tensor."""
    t = torch.as_tensor(bits, dtype=torch.int64)
    if is_float:
        return bits_f32(t)
    return torch.where(t >= 2 ** 31, t - 2 ** 32, t).to(torch.int32)


def accumulate_bits(old, new, is_int: bool) -> np.ndarray:
    """The result writer's ``accumulate``: ``old + new`` on 32-bit patterns (uint32 arrays of any
    shape) - binary32 with round-to-nearest-even and the canonical NaN, or INT32 wrap-around."""
    old = np.asarray(old, dtype=np.uint32)
    new = np.asarray(new, dtype=np.uint32)
    if is_int:
        return ((old.astype(np.uint64) + new.astype(np.uint64)) & 0xFFFFFFFF).astype(np.uint32)
    s = bits_f32(torch.from_numpy(old.astype(np.int64))) + \
        bits_f32(torch.from_numpy(new.astype(np.int64)))
    return result_bits(canonical_nan(s)).reshape(old.shape)


def check_operand(name: str, t, dtype: Dtype, ndim: int) -> torch.Tensor:
    """Validate one operand tensor; return it. Raises ``ValueError`` with the reason."""
    dtype = Dtype.parse(dtype)
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype != TORCH_DTYPE[dtype]:
        raise ValueError(f"{name} has dtype {t.dtype}, operation dtype is "
                         f"{dtype.name.lower()} ({TORCH_DTYPE[dtype]})")
    if t.dim() != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(t.shape)}")
    return t


def check_index(name: str, idx, limit: int) -> torch.Tensor:
    idx = torch.as_tensor(idx, dtype=torch.int64)
    if idx.dim() != 1:
        raise ValueError(f"{name} must be a 1-D index list, got shape {tuple(idx.shape)}")
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= limit):
        bad = idx[(idx < 0) | (idx >= limit)][0].item()
        raise ValueError(f"{name} entry {bad} is outside 0..{limit - 1}")
    return idx


def product_f32(w: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """Lane products exactly as a multiplier unit produces them (float32 or int64)."""
    if w.dtype == torch.int8:
        return w.to(torch.int64) * a.to(torch.int64)
    return w.to(torch.float32) * a.to(torch.float32)


def _wrap_int32(acc: torch.Tensor) -> torch.Tensor:
    acc = acc & 0xFFFFFFFF
    return torch.where(acc >= 2**31, acc - 2**32, acc).to(torch.int32)


def gemv_dot(W: torch.Tensor, X: torch.Tensor, dtype) -> torch.Tensor:
    """Dense GEMV ``Y[b, n] = sum_k W[n, k] * X[b, k]`` in hardware order.

    ``W``: [N, K] weights (neuron-major: row n is neuron n), ``X``: [B, K].
    Returns [B, N] float32 (FP16/BF16) or int32 (INT8).
    """
    dtype = Dtype.parse(dtype)
    check_operand("W", W, dtype, 2)
    check_operand("X", X, dtype, 2)
    if W.shape[1] != X.shape[1]:
        raise ValueError(f"W has {W.shape[1]} columns but X has {X.shape[1]}")
    n_rows, n_cols = W.shape
    batch = X.shape[0]
    if dtype == Dtype.INT8:
        acc = torch.zeros(batch, n_rows, dtype=torch.int64)
        acc += X.to(torch.int64) @ W.to(torch.int64).T   # exact; order-free in Z
        return _wrap_int32(acc)
    Wf = W.to(torch.float32)
    Xf = X.to(torch.float32)
    acc = torch.zeros(batch, n_rows, dtype=torch.float32)
    for k in range(n_cols):
        acc = acc + Xf[:, k:k + 1] * Wf[:, k][None, :]
    return canonical_nan(acc)


def gemv_row_gather(W: torch.Tensor, X: torch.Tensor, idx, dtype) -> torch.Tensor:
    """Only the output rows named in ``idx``: returns [B, len(idx)] in index-list order."""
    dtype = Dtype.parse(dtype)
    check_operand("W", W, dtype, 2)
    idx = check_index("idx", idx, W.shape[0])
    return gemv_dot(W[idx], X, dtype)


def gemv_col_gather(Wt: torch.Tensor, H: torch.Tensor, idx, dtype) -> torch.Tensor:
    """Weighted sum of selected neuron vectors: ``Y[b, :] = sum_{j in idx} H[b, j] * Wt[j, :]``.

    ``Wt``: [J, N] neuron-major (row j is neuron j's output vector), ``H``: [B, J].
    Accumulates in index-list order. Returns [B, N].
    """
    dtype = Dtype.parse(dtype)
    check_operand("Wt", Wt, dtype, 2)
    check_operand("H", H, dtype, 2)
    if Wt.shape[0] != H.shape[1]:
        raise ValueError(f"Wt has {Wt.shape[0]} neurons but H has {H.shape[1]}")
    idx = check_index("idx", idx, Wt.shape[0])
    batch, n_out = H.shape[0], Wt.shape[1]
    if dtype == Dtype.INT8:
        acc = H[:, idx].to(torch.int64) @ Wt[idx].to(torch.int64)
        return _wrap_int32(acc)
    acc = torch.zeros(batch, n_out, dtype=torch.float32)
    Wf = Wt.to(torch.float32)
    Hf = H.to(torch.float32)
    for j in idx.tolist():
        acc = acc + Hf[:, j:j + 1] * Wf[j][None, :]
    return canonical_nan(acc)


def reference_f64_dense(W: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
    """Plain float64 matmul, independent of the hardware order."""
    return torch.matmul(X.to(torch.float64), W.to(torch.float64).T)


def reference_f64_col_gather(Wt: torch.Tensor, H: torch.Tensor, idx) -> torch.Tensor:
    idx = torch.as_tensor(idx, dtype=torch.int64)
    return torch.matmul(H[:, idx].to(torch.float64), Wt[idx].to(torch.float64))


def summation_error_bound(abs_products_sum: torch.Tensor, n_terms: int) -> torch.Tensor:
    """Bound on |float32 result - exact| for a sequential sum of ``n_terms`` exact products.

    Recursive summation (Higham, *Accuracy and Stability*, eq. 4.4):
    ``|err| <= gamma_{n-1} * sum|p_k|`` with ``gamma_m = m*u/(1-m*u)``, ``u = 2**-24``,
    plus one half-ulp of the smallest subnormal per addition for results in the
    subnormal range (BF16 products that underflow are also covered by it).
    """
    u = 2.0 ** -24
    m = max(n_terms - 1, 0)
    gamma = m * u / (1 - m * u)
    return gamma * abs_products_sum + (n_terms + 1) * 2.0 ** -149
