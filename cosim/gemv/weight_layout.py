"""GEMV weight layouts in DRAM and the weight streamer's descriptor, host side.

The layouts are those the weight streamer (``ndpdimm.hw.memory.weight_streamer``,
whose module docstring explains why they are chosen) reads:

* DOT (dense and row gather), ``W`` [N neurons, K elements], ``e`` bytes per
  element: row n is cut into ``J = ceil(K*e/64)`` chunks of 64 B (weight words
  4j..4j+3, zero padded past K); chunk j of neuron n is at
  ``base + (j*N + n)*64`` (chunk-interleaved, neuron-major).
* AXPY (column gather), ``Wt`` [J neurons, N elements]: neuron i at
  ``base + i*P``, pitch ``P = ceil(N*e/64)*64``, zero padded.

Both occupy ``n_rows * bursts_per_row(n_cols) * 64`` bytes (``n_rows`` = N
for DOT, J for AXPY; ``n_cols`` = K for DOT, N for AXPY). Index lists are
uint32 little-endian entries. Every padding byte is zero.
"""

import math

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import Dtype, GemvMode
from ndpdimm.hw.memory.port import BURST_BYTES

__all__ = ["elem_bytes", "bursts_per_row", "dot_image", "axpy_image", "dram_image",
           "index_bytes", "descriptor", "image_bytes"]


def elem_bytes(dtype) -> int:
    return Dtype.parse(dtype).info.elem_bits // 8


def bursts_per_row(n_cols: int, dtype) -> int:
    """64 B bursts of one stored neuron (DOT: chunks J of a row; AXPY: pitch / 64)."""
    return math.ceil(n_cols * elem_bytes(dtype) / BURST_BYTES)


def _raw_bytes(W: torch.Tensor, dtype) -> np.ndarray:
    """[rows, cols] tensor -> [rows, cols * e] uint8 (little-endian element bytes)."""
    dtype = Dtype.parse(dtype)
    bits = golden.elem_bits(W, dtype).numpy()
    bits = bits.astype(np.dtype("<u2") if dtype.info.elem_bits == 16 else np.uint8)
    return np.ascontiguousarray(bits).view(np.uint8).reshape(W.shape[0], -1)


def _padded_rows(W: torch.Tensor, dtype) -> np.ndarray:
    """Rows zero padded to whole bursts: [rows, bursts_per_row * 64] uint8."""
    raw = _raw_bytes(W, dtype)
    rows = np.zeros((W.shape[0], bursts_per_row(W.shape[1], dtype) * BURST_BYTES), np.uint8)
    rows[:, :raw.shape[1]] = raw
    return rows


def dot_image(W: torch.Tensor, dtype) -> bytes:
    """DOT layout of ``W`` [N, K]: chunk j of neuron n at offset ``(j*N + n)*64``."""
    rows = _padded_rows(W, dtype)                                   # [N, J*64]
    n, j = W.shape[0], rows.shape[1] // BURST_BYTES
    return np.ascontiguousarray(rows.reshape(n, j, BURST_BYTES).transpose(1, 0, 2)).tobytes()


def axpy_image(Wt: torch.Tensor, dtype) -> bytes:
    """AXPY layout of ``Wt`` [J, N]: neuron i at offset ``i*P``."""
    return _padded_rows(Wt, dtype).tobytes()


def image_bytes(n_rows: int, n_cols: int, dtype) -> int:
    """Size of either layout."""
    return n_rows * bursts_per_row(n_cols, dtype) * BURST_BYTES


def dram_image(job) -> bytes:
    """The bytes to load at the descriptor's ``base`` for a ``GemvJob``."""
    if job.mode == GemvMode.DOT:
        return dot_image(job.W, job.dtype)
    return axpy_image(job.W, job.dtype)


def index_bytes(idx) -> bytes:
    """An index list as uint32 little-endian entries (empty for None)."""
    if idx is None:
        return b""
    return np.asarray(torch.as_tensor(idx, dtype=torch.int64).numpy(), dtype="<u4").tobytes()


def descriptor(job, base: int, idx_addr: int = 0) -> dict:
    """The weight streamer descriptor (``streamer_descriptor_layout`` fields) for a ``GemvJob``."""
    gather = job.op != "dense"
    return {
        "mode": job.mode,
        "gather": int(gather),
        "dtype": int(job.dtype),
        "base": base,
        "n_rows": job.W.shape[0],
        "n_cols": job.W.shape[1],
        "idx_addr": idx_addr if gather else 0,
        "n_idx": len(job.idx) if gather else 0,
    }
