"""Tensors and memory of the host driver: dtype tables, tensor helpers, buffers and the allocator.

* the torch dtypes the driver moves (``TENSOR_DTYPES``), the GEMV and activation-unit formats
  by torch dtype (``GEMV_DTYPES``, ``ACT_FORMATS``), the GEMV op names (``GEMV_OPS``) and the
  SRAM's alignment and DMA granule (``SRAM_ALIGN``, ``SRAM_GRANULE``);
* tensors as raw little-endian bytes and back (``tensor_bytes``, ``bytes_tensor``) and the
  argument check ``check_tensor``;
* :class:`Buffer` (a block of one DIMM's DRAM or SRAM), the first-fit allocator over a free
  list that hands them out (``Dimm.alloc`` / ``alloc_sram`` / ``free``) and
  :class:`WeightBuffer` (a matrix in the weight streamer's layout, ``Dimm.store_weights``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

import torch

from ndpdimm.hw.activation.unit import ActFmt
from ndpdimm.hw.descriptors import GemvOp
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.errors import FreedBufferError

__all__ = ["Buffer", "WeightBuffer", "Allocator", "TENSOR_DTYPES", "GEMV_DTYPES", "ACT_FORMATS",
           "GEMV_OPS", "SRAM_ALIGN", "SRAM_GRANULE", "round_up", "tensor_bytes", "bytes_tensor",
           "check_tensor"]

if sys.byteorder != "little":                 # tensors are moved as raw little-endian bytes
    raise ImportError("the NDP-DIMM driver needs a little-endian host")

#: torch dtypes ``write`` / ``read`` move (raw little-endian element bytes).
TENSOR_DTYPES = (torch.float16, torch.bfloat16, torch.int8, torch.uint8, torch.float32,
                 torch.int32)
#: GEMV element types by torch dtype.
GEMV_DTYPES = {torch.float16: Dtype.FP16, torch.bfloat16: Dtype.BF16, torch.int8: Dtype.INT8}
#: Activation-unit formats by torch dtype.
ACT_FORMATS = {torch.float16: ActFmt.FP16, torch.bfloat16: ActFmt.BF16, torch.float32: ActFmt.FP32}
GEMV_OPS = {"dense": GemvOp.DENSE, "row_gather": GemvOp.ROW_GATHER, "col_gather": GemvOp.COL_GATHER}
SRAM_ALIGN = 32                                # the SRAM word; DMA and activation addresses
SRAM_GRANULE = 64                              # DMA length unit


def round_up(n, k):
    return -(-n // k) * k


def tensor_bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def bytes_tensor(raw: bytes, dtype, shape) -> torch.Tensor:
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()


def check_tensor(name, t, dtypes=TENSOR_DTYPES):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}; expected one of "
                         f"{', '.join(str(d) for d in dtypes)}")
    return t


# ---- memory --------------------------------------------------------------------------------

class Buffer:
    """A block of one DIMM's DRAM (``space == "dram"``, DIMM-local byte address) or SRAM."""

    __slots__ = ("space", "addr", "nbytes", "_owner", "_live")

    def __init__(self, space: str, addr: int, nbytes: int, owner: object) -> None:
        self.space, self.addr, self.nbytes = space, addr, nbytes
        self._owner, self._live = owner, True

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    @property
    def live(self) -> bool:
        return self._live

    def __repr__(self) -> str:
        state = "" if self._live else ", freed"
        return f"Buffer({self.space}, {self.addr:#x}, {self.nbytes} bytes{state})"


class Allocator:
    """First fit over a free list of ``[lo, hi)`` spans; neighbours merge on free."""

    def __init__(self, space: str, lo: int, hi: int, align: int, granule: int, what: str) -> None:
        self.space, self.lo, self.hi, self.align, self.granule = space, lo, hi, align, granule
        self.what = what
        self.free_spans = [(lo, hi)] if hi > lo else []
        self.live = {}

    def alloc(self, nbytes: int, owner: object) -> Buffer:
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
            raise ValueError(f"a {self.space} allocation is a positive number of bytes, got {nbytes!r}")
        size = round_up(nbytes, self.granule)
        if size > self.hi - self.lo:
            raise MemoryError(f"cannot allocate {nbytes} bytes of {self.space}: {self.what} "
                              f"[{self.lo:#x}, {self.hi:#x}) holds only {self.hi - self.lo} bytes")
        for i, (a, b) in enumerate(self.free_spans):
            start = round_up(a, self.align)
            if start + size <= b:
                spans = [(a, start)] if start > a else []
                if start + size < b:
                    spans.append((start + size, b))
                self.free_spans[i:i + 1] = spans
                buf = Buffer(self.space, start, size, owner)
                self.live[start] = buf
                return buf
        raise MemoryError(f"cannot allocate {nbytes} bytes of {self.space}: {self.free_bytes} of "
                          f"{self.hi - self.lo} bytes free in {self.what}, largest free block "
                          f"{self.largest_free} bytes")

    def check(self, buf: Buffer, owner: object, what: str = "use") -> None:
        if not isinstance(buf, Buffer):
            raise ValueError(f"expected a Buffer, got {type(buf).__name__}")
        if buf._owner is not owner:
            raise FreedBufferError(f"{buf!r} belongs to another DIMM")
        if buf.space != self.space:
            raise ValueError(f"{buf!r} is {buf.space}, expected {self.space}")
        if not buf._live or self.live.get(buf.addr) is not buf:
            raise FreedBufferError(f"{what} of {buf!r} after it was freed")

    def free(self, buf: Buffer, owner: object) -> None:
        self.check(buf, owner, "free")
        del self.live[buf.addr]
        buf._live = False
        spans = sorted(self.free_spans + [(buf.addr, buf.end)])
        merged = []
        for a, b in spans:
            if merged and merged[-1][1] == a:
                merged[-1] = (merged[-1][0], b)
            else:
                merged.append((a, b))
        self.free_spans = merged

    @property
    def free_bytes(self) -> int:
        return sum(b - a for a, b in self.free_spans)

    @property
    def largest_free(self) -> int:
        """Largest allocation that would succeed now."""
        best = 0
        for a, b in self.free_spans:
            best = max(best, (b - round_up(a, self.align)) // self.granule * self.granule)
        return best


@dataclass
class WeightBuffer:
    """A weight matrix in DRAM in the weight streamer's layout (``store_weights``).

    ``layout`` "dot": ``W`` [N neurons, K elements] (dense, row gather); "axpy": ``Wt``
    [J neurons, N elements] (column gather), stored as column tiles ``(c0, c1, addr)``.
    """
    buffer: Buffer
    dtype: Dtype
    layout: str
    shape: tuple
    tiles: list = field(default_factory=list)

    @property
    def torch_dtype(self) -> torch.dtype:
        return {v: k for k, v in GEMV_DTYPES.items()}[self.dtype]

