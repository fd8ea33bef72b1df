"""Host driver of the NDP-DIMM: memory, tensors, descriptors and operations over either backend.

One :class:`Dimm` is one simulated NDP-DIMM behind a backend
(``cosim/backend.py``): ``"rtl"`` (the Verilated core in the C++ harness,
``cosim/rtl/harness.py``) or ``"model"`` (reference model + calibrated
performance model, ``cosim/model/backend.py``). Code written against this
module cannot tell which one it runs on; every cycle count it reports names
the backend it came from.

Layers, lowest first:

* memory: ``alloc`` / ``alloc_sram`` / ``free`` (first-fit allocators with a
  free list: DRAM inside the protection window, 64 B aligned; SRAM 32 B
  aligned in whole 64 B granules so a DMA never spills past a buffer), and
  ``write`` / ``read`` of torch tensors (raw little-endian bytes) into either;
* descriptors: builders for every opcode over the layouts of
  ``hw/descriptors.py`` (``gemv_descriptor``, ``dma_descriptor``,
  ``act_descriptor``, ``link_descriptor``, ``atomic_add_descriptor``,
  ``relayout_descriptor``, ``fence``, ``raw_descriptor``), ids allocated 12-bit
  wrapping; ``submit`` and ``wait``, which raises :class:`NdpError` for a
  descriptor that completed with an error; ``status`` and ``counters``;
* operations: ``store_weights`` (the weight streamer's layouts,
  ``cosim/gemv/weight_layout.py``), ``gemv`` (DMA X / index list in, GEMV, DMA Y
  out, tiled to fit the SRAM), ``activation``, ``softmax``, ``eltwise``. Each
  returns its result and leaves a :class:`RunStats` in ``last_run``: every
  descriptor's completion (cycles, DRAM bytes), the elapsed cycles and the
  counter increments, with the backend's name.

GEMV tiling (bit-exact: every output is computed by one descriptor, with the
whole reduction in hardware order):

* DOT weights (dense, row gather) are stored as one image. When ``X``, the
  index list and ``Y`` do not fit the free SRAM together, the outputs are
  split into groups (multiples of the engine's units where possible); a
  dense GEMV then runs as row gathers over ``arange`` index chunks.
* AXPY weights (column gather) are stored as column tiles of at most
  :meth:`Dimm.axpy_tile` outputs each (the AXPY layout's row pitch follows
  the stored width, so a column range of one image is not addressable); one
  descriptor per tile.
* Batches above ``max_batch`` (or too large for the SRAM) are split into
  batch groups.

Background host traffic (:meth:`Dimm.host_reads`): within ``with
dimm.host_reads(buffer, spacing_cycles):`` every ``wait`` (so every operation)
advances the backend in slices (``backend.run(max_cycles=...)``) and issues
one 64 B pass-through host read (``backend.host_access``) of the next burst of
``buffer`` every ``spacing_cycles`` NDP cycles while descriptors it waits for
are in flight: the CPU / GPU reading striped data from the DIMM while its core
computes. Both backends model the contention (the RTL's arbiter; the model's
``PerfModel.host_contention``).

:class:`NdpSystem` is several DIMMs with the same API per DIMM, plus a GEMV
whose output rows are split across them (``store_weights_split`` /
``gemv_split``) reporting each DIMM's cycles and the parallel time (the max).
"""

import math
import struct
import sys
from dataclasses import dataclass, field

import numpy as np
import torch

from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.backend import BACKENDS, Backend, Completion, CoreConfig
from ndpdimm.cosim.golden.core import descriptor_layouts
from ndpdimm.cosim.golden.numerics import result_values
from ndpdimm.hw.activation.sequencer import ACT_UNARY_OPS
from ndpdimm.hw.activation.unit import BINARY_OPS, ONE_F32, REDUCTION_OPS, ActFmt, ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import BURST_BYTES

__all__ = ["Dimm", "NdpSystem", "NdpError", "FreedBufferError", "Buffer", "WeightBuffer",
           "Descriptor", "RunStats", "CoreStatus", "HostReads", "make_backend", "TENSOR_DTYPES"]

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
ID_BITS = 12
SRAM_ALIGN = 32                                # the SRAM word; DMA and activation addresses
SRAM_GRANULE = 64                              # DMA length unit


def _round(n, k):
    return -(-n // k) * k


def _f32_bits(v) -> int:
    """A Python number -> its binary32 bit pattern (descriptor constants ``c`` and ``k``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"an activation constant must be a number, got {v!r}")
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]


def _tensor_bytes(t: torch.Tensor) -> bytes:
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _bytes_tensor(raw: bytes, dtype, shape) -> torch.Tensor:
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape).clone()


def _check_tensor(name, t, dtypes=TENSOR_DTYPES):
    if not isinstance(t, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if t.dtype not in dtypes:
        raise ValueError(f"{name} has dtype {t.dtype}; expected one of "
                         f"{', '.join(str(d) for d in dtypes)}")
    return t


# ---- errors --------------------------------------------------------------------------------

class NdpError(Exception):
    """A descriptor completed with an error status. ``status`` (a ``Status``), ``completion``
    (the ``Completion``) and ``descriptor`` (the :class:`Descriptor`, if the driver built it)."""

    def __init__(self, completion: Completion, descriptor=None):
        self.completion, self.descriptor, self.status = completion, descriptor, completion.status
        try:
            op = Opcode(completion.opcode).name
        except ValueError:
            op = f"opcode {completion.opcode}"
        what = f" [{descriptor.label}]" if descriptor is not None and descriptor.label else ""
        fields = ""
        if descriptor is not None and set(descriptor.fields) - {"opcode", "id"}:
            fields = ": " + ", ".join(f"{k}={v:#x}" if k in _ADDR_FIELDS else f"{k}={v}"
                                      for k, v in descriptor.fields.items() if k not in ("opcode", "id"))
        super().__init__(f"{op} descriptor {completion.id}{what} failed with "
                         f"{completion.status.name} (code {int(completion.status)}){fields}")


_ADDR_FIELDS = ("w_base", "idx_addr", "x_addr", "y_addr", "dram", "sram", "remote", "src_a", "src_b", "dst",
                "c", "k")


class FreedBufferError(ValueError):
    """A buffer used (or freed) after it was freed, or one that belongs to another DIMM."""


# ---- memory --------------------------------------------------------------------------------

class Buffer:
    """A block of one DIMM's DRAM (``space == "dram"``, DIMM-local byte address) or SRAM."""

    __slots__ = ("space", "addr", "nbytes", "_owner", "_live")

    def __init__(self, space, addr, nbytes, owner):
        self.space, self.addr, self.nbytes = space, addr, nbytes
        self._owner, self._live = owner, True

    @property
    def end(self) -> int:
        return self.addr + self.nbytes

    @property
    def live(self) -> bool:
        return self._live

    def __repr__(self):
        state = "" if self._live else ", freed"
        return f"Buffer({self.space}, {self.addr:#x}, {self.nbytes} bytes{state})"


class _Allocator:
    """First fit over a free list of ``[lo, hi)`` spans; neighbours merge on free."""

    def __init__(self, space, lo, hi, align, granule, what):
        self.space, self.lo, self.hi, self.align, self.granule = space, lo, hi, align, granule
        self.what = what
        self.free_spans = [(lo, hi)] if hi > lo else []
        self.live = {}

    def alloc(self, nbytes, owner) -> Buffer:
        if not isinstance(nbytes, int) or isinstance(nbytes, bool) or nbytes < 1:
            raise ValueError(f"a {self.space} allocation is a positive number of bytes, got {nbytes!r}")
        size = _round(nbytes, self.granule)
        if size > self.hi - self.lo:
            raise MemoryError(f"cannot allocate {nbytes} bytes of {self.space}: {self.what} "
                              f"[{self.lo:#x}, {self.hi:#x}) holds only {self.hi - self.lo} bytes")
        for i, (a, b) in enumerate(self.free_spans):
            start = _round(a, self.align)
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

    def check(self, buf, owner, what="use"):
        if not isinstance(buf, Buffer):
            raise ValueError(f"expected a Buffer, got {type(buf).__name__}")
        if buf._owner is not owner:
            raise FreedBufferError(f"{buf!r} belongs to another DIMM")
        if buf.space != self.space:
            raise ValueError(f"{buf!r} is {buf.space}, expected {self.space}")
        if not buf._live or self.live.get(buf.addr) is not buf:
            raise FreedBufferError(f"{what} of {buf!r} after it was freed")

    def free(self, buf, owner):
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
            best = max(best, (b - _round(a, self.align)) // self.granule * self.granule)
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
    def torch_dtype(self):
        return {v: k for k, v in GEMV_DTYPES.items()}[self.dtype]


# ---- descriptors and results ---------------------------------------------------------------

@dataclass
class Descriptor:
    """One built descriptor: its fields (``id`` included), the 256-bit word and a label."""
    fields: dict
    word: int
    label: str = ""

    @property
    def id(self) -> int:
        return self.fields["id"]

    @property
    def opcode(self) -> int:
        return self.fields["opcode"]


@dataclass
class CoreStatus:
    """The ``STATUS`` register, decoded."""
    busy: bool
    queued: int
    completions_waiting: int
    queue_full: bool
    completion_queue_full: bool
    raw: int

    @classmethod
    def decode(cls, word):
        return cls(busy=bool(word & 1), queued=(word >> 8) & 0xFF,
                   completions_waiting=(word >> 16) & 0xFFFF, queue_full=bool(word >> 32 & 1),
                   completion_queue_full=bool(word >> 33 & 1), raw=word)


@dataclass
class RunStats:
    """What one operation cost on one DIMM: each descriptor's completion, elapsed cycles (backend
    clock from the first submit to the last completion) and the counter increments."""
    operation: str
    backend: str
    elapsed_cycles: int = 0
    descriptors: list = field(default_factory=list)      # (label, Completion)
    counters: dict = field(default_factory=dict)
    host_reads: int = 0        # background host reads issued meanwhile (Dimm.host_reads)

    def cycles_by_opcode(self) -> dict:
        out = {}
        for _, c in self.descriptors:
            try:
                name = Opcode(c.opcode).name
            except ValueError:
                name = str(c.opcode)
            out[name] = out.get(name, 0) + c.cycles
        return out

    @property
    def descriptor_cycles(self) -> int:
        """Sum of the descriptors' dispatch-to-completion cycles."""
        return sum(c.cycles for _, c in self.descriptors)

    def as_dict(self) -> dict:
        return {"operation": self.operation, "backend": self.backend,
                "elapsed_cycles": self.elapsed_cycles, "descriptor_cycles": self.descriptor_cycles,
                "cycles_by_opcode": self.cycles_by_opcode(), "counters": self.counters,
                "host_reads": self.host_reads,
                "descriptors": [{"label": lab, "id": c.id, "opcode": c.opcode,
                                 "status": c.status.name, "cycles": c.cycles,
                                 "dram_bytes": c.dram_bytes} for lab, c in self.descriptors]}


def make_backend(backend, config: CoreConfig | None = None, **kwargs) -> Backend:
    """A backend by name (``"model"`` / ``"rtl"``), or ``backend`` itself if it is one."""
    if isinstance(backend, Backend):
        if config is not None and config != backend.config:
            raise ValueError(f"config {config} differs from the backend's {backend.config}")
        if kwargs:
            raise ValueError(f"backend options {sorted(kwargs)} need a backend name, not an instance")
        return backend
    config = CoreConfig() if config is None else config
    if not isinstance(config, CoreConfig):
        raise ValueError(f"config must be a CoreConfig, got {config!r}")
    if backend == "model":
        from ndpdimm.cosim.model.backend import ModelBackend
        return ModelBackend(config, **kwargs)
    if backend == "rtl":
        from ndpdimm.cosim.rtl.harness import RtlBackend
        return RtlBackend(config, **kwargs)
    raise ValueError(f"backend must be one of {', '.join(BACKENDS)} or a Backend, got {backend!r}")


class HostReads:
    """Background host reads while descriptors run: ``Dimm.host_reads(buffer, spacing_cycles)``.

    A context manager. While it is active, :meth:`Dimm.wait` (and so every operation) does not
    run the backend to completion in one call: it runs it in slices up to the next read's time
    (``backend.run(max_cycles=...)``), then issues one 64 B host read (``backend.host_access``)
    of the next burst of ``buffer`` (cycling through it), until the descriptors it waits for
    have completed. Reads are issued ``spacing_cycles`` NDP cycles apart (start to start) or
    back to back when one takes longer than that (one read outstanding at a time, as a host
    port with a single request in flight); the first one ``spacing_cycles`` after the scope
    opened. Time the driver does not spend in ``wait`` (host-side work, ``run_for``) issues
    none: only contention with NDP work is of interest.

    ``issued`` counts this scope's reads, ``Dimm.host_reads_issued`` all of them, and each
    operation's ``RunStats.host_reads`` those issued while it ran.

    Backends: both model a host access during a GEMV (the RTL's arbiter under ``POLICY``; the
    model's ``PerfModel.host_contention``, which also lengthens the GEMV's ``CQ_CYCLES``). The
    RTL backend's ``run(max_cycles)`` returns as soon as the core is idle; the model's runs
    its clock to the end of the slice even when the queue empties inside it. So that this
    idle tail stays short (idle time lets the model's ranks pay owed refreshes, which would
    flatter the next operation), slices are cut to :attr:`FINAL_SLICE` cycles once only the
    last descriptor waited for is in flight: an operation's ``elapsed_cycles`` may include up
    to that many idle cycles on the model (the completions' ``done_cycle`` are exact on both).

    ``buffer``: a live DRAM :class:`Buffer` or :class:`WeightBuffer` of this DIMM whose bytes
    are known (on a timing-only model, not written by a descriptor it only timed);
    ``spacing_cycles``: a positive int. Bad arguments raise ``ValueError`` (a freed or foreign
    buffer ``FreedBufferError``) and change nothing; opening a second scope on the same DIMM
    while one is active raises ``RuntimeError``.
    """

    #: Longest slice once only the last descriptor waited for is in flight (see above).
    FINAL_SLICE = 32

    def __init__(self, dimm, buffer, spacing_cycles):
        if isinstance(buffer, WeightBuffer):
            buffer = buffer.buffer
        if not isinstance(buffer, Buffer):
            raise ValueError(f"host reads need a DRAM Buffer or WeightBuffer, got "
                             f"{type(buffer).__name__}")
        if buffer.space != "dram":
            raise ValueError(f"host reads go to DRAM, {buffer!r} is {buffer.space}")
        dimm.check(buffer, "host reads")
        if isinstance(spacing_cycles, bool) or not isinstance(spacing_cycles, int) or \
                spacing_cycles < 1:
            raise ValueError(f"spacing_cycles must be a positive int (NDP cycles between host "
                             f"reads), got {spacing_cycles!r}")
        self.dimm, self.buffer, self.spacing = dimm, buffer, spacing_cycles
        self.issued = 0
        self._cursor = 0                          # byte offset of the next read in the buffer
        self._next = None                         # cycle of the next read

    def __enter__(self):
        d = self.dimm
        if d._host_reads is not None:
            raise RuntimeError("host reads are already active on this DIMM (one scope at a time)")
        self._next = d.backend.cycle + self.spacing
        d._host_reads = self
        return self

    def __exit__(self, *exc):
        self.dimm._host_reads = None

    def _run_until(self, ids):
        """Run the backend in slices with a host read between them until ``ids`` completed
        (or the backend goes idle without them: ``wait`` reports that)."""
        d = self.dimm
        b = d.backend
        while True:
            gap = max(0, self._next - b.cycle)
            missing = sum(i not in d._completed for i in ids)
            if missing == 1 and b.pending == 1:     # the last one runs: stop close to its end
                gap = min(gap, self.FINAL_SLICE)
            for c in b.run(max_cycles=gap):
                d._completed[c.id] = c
            if all(i in d._completed for i in ids) or not b.pending:
                return
            if b.cycle >= self._next:
                self._read()

    def _read(self):
        d = self.dimm
        d.check(self.buffer, "host read")
        addr = self.buffer.addr + self._cursor
        self._cursor = (self._cursor + BURST_BYTES) % self.buffer.nbytes
        issued_at = d.backend.cycle
        d.backend.host_access(addr, False)
        self._next = issued_at + self.spacing
        self.issued += 1
        d.host_reads_issued += 1
        if d._recording and d.last_run is not None:
            d.last_run.host_reads += 1


# ---- one DIMM ------------------------------------------------------------------------------

class Dimm:
    """One NDP-DIMM (see the module docstring).

    ``backend``: ``"model"``, ``"rtl"`` or a ``Backend`` instance; ``config``: the core's
    :class:`CoreConfig`; ``window``: ``(base, limit)`` of the DRAM the NDP may touch (default the
    whole DIMM), also the range the DRAM allocator hands out; ``backend_kwargs`` go to the
    backend's constructor (e.g. ``functional=False`` for the model, ``waves=...`` for the RTL).
    """

    def __init__(self, backend="model", config: CoreConfig | None = None, *, window=None,
                 **backend_kwargs):
        self._owns_backend = not isinstance(backend, Backend)
        self.backend = make_backend(backend, config, **backend_kwargs)
        self.config = self.backend.config
        cap = self.backend.org.capacity_bytes
        lo, hi = (0, cap) if window is None else window
        for v in (lo, hi):
            if not isinstance(v, int) or isinstance(v, bool):
                raise ValueError(f"window must be two ints, got {window!r}")
        if not 0 <= lo < hi <= cap or lo % BURST_BYTES or hi % BURST_BYTES:
            raise ValueError(f"window [{lo:#x}, {hi:#x}) must be 64 B aligned, non-empty and inside "
                             f"the DIMM [0, {cap:#x})")
        self.window = (lo, hi)
        if self.backend.pending:                 # a backend taken over: finish its earlier work
            self.backend.csr_write("CTRL", 1)
            self.backend.run()
        for name, value in (("WINDOW_BASE", lo), ("WINDOW_LIMIT", hi), ("CTRL", 1)):
            self.backend.csr_write(name, value)
        got = (self.backend.csr_read("WINDOW_BASE"), self.backend.csr_read("WINDOW_LIMIT"))
        if got != (lo, hi):
            raise RuntimeError(f"the core kept its window {got} (busy?): cannot open [{lo:#x}, {hi:#x})")
        self.dram = _Allocator("dram", lo, hi, BURST_BYTES, BURST_BYTES, "the NDP window")
        self.sram = _Allocator("sram", 0, self.config.sram_size, SRAM_ALIGN, SRAM_GRANULE, "the SRAM")
        self.layouts = descriptor_layouts(cap, self.config.sram_size)
        self._next_id = 0
        self._outstanding = {}          # id -> Descriptor, submitted and not yet completed
        self._completed = {}            # id -> Completion, completed and not yet waited for
        self._enabled = True
        self.last_run: RunStats | None = None
        self._host_reads = None         # the active HostReads scope
        self.host_reads_issued = 0      # background host reads issued (HostReads), all scopes

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def capacity(self) -> int:
        return self.backend.org.capacity_bytes

    def close(self):
        """Close the backend if this DIMM created it (one passed in stays open)."""
        if self._owns_backend:
            self.backend.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- memory ------------------------------------------------------------------------------
    def alloc(self, nbytes: int) -> Buffer:
        """``nbytes`` of DRAM inside the window (64 B aligned, size rounded up to 64 B)."""
        return self.dram.alloc(nbytes, self)

    def alloc_sram(self, nbytes: int) -> Buffer:
        """``nbytes`` of SRAM (32 B aligned, size rounded up to 64 B)."""
        return self.sram.alloc(nbytes, self)

    def _allocator(self, buf):
        if not isinstance(buf, Buffer):
            raise ValueError(f"expected a Buffer, got {type(buf).__name__}")
        return self.dram if buf.space == "dram" else self.sram

    def free(self, buf):
        """Return a buffer (or a :class:`WeightBuffer`); a second free raises ``FreedBufferError``."""
        if isinstance(buf, WeightBuffer):
            buf = buf.buffer
        self._allocator(buf).free(buf, self)

    def check(self, buf, what="use") -> Buffer:
        """``buf`` if it is a live buffer of this DIMM, else ``FreedBufferError``."""
        self._allocator(buf).check(buf, self, what)
        return buf

    def write(self, buf: Buffer, tensor: torch.Tensor, offset: int = 0) -> None:
        """The tensor's raw bytes into ``buf`` at ``offset``. SRAM buffers are written by a DMA
        from a DRAM staging area in whole 64 B blocks: bytes up to the next 64 B boundary after
        the tensor are zeroed."""
        self.check(buf, "write")
        _check_tensor("tensor", tensor)
        raw = _tensor_bytes(tensor)
        if not isinstance(offset, int) or offset < 0 or offset + len(raw) > buf.nbytes:
            raise ValueError(f"{len(raw)} bytes at offset {offset!r} do not fit {buf!r}")
        self._write_bytes(buf, offset, raw)

    def _write_bytes(self, buf, offset, raw):
        if buf.space == "dram":
            self.backend.load(buf.addr + offset, raw)
            return
        if offset % SRAM_GRANULE:
            raise ValueError(f"SRAM writes start on a {SRAM_GRANULE} B boundary, got offset {offset}")
        n = _round(len(raw), SRAM_GRANULE)
        if not n:
            return
        tmp = self.alloc(n)
        try:
            self.backend.load(tmp.addr, raw + bytes(n - len(raw)))
            self.run([self.dma_descriptor(0, tmp.addr, buf.addr + offset, n, "write: DMA in")],
                     "write")
        finally:
            self.free(tmp)

    def read(self, buf: Buffer, dtype, shape=None, offset: int = 0) -> torch.Tensor:
        """A tensor of ``dtype`` and ``shape`` (default: as many elements as fit) from ``buf``."""
        self.check(buf, "read")
        if dtype not in TENSOR_DTYPES:
            raise ValueError(f"dtype {dtype!r} is not one of {', '.join(str(d) for d in TENSOR_DTYPES)}")
        esize = torch.empty((), dtype=dtype).element_size()
        if shape is None:
            shape = ((buf.nbytes - offset) // esize,)
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list, torch.Size)) else (shape,)))
        n = math.prod(shape) * esize
        if any(s < 0 for s in shape) or not isinstance(offset, int) or offset < 0 or \
                offset + n > buf.nbytes:
            raise ValueError(f"{dtype} {shape} ({n} bytes) at offset {offset!r} does not fit {buf!r}")
        return _bytes_tensor(self._read_bytes(buf, offset, n), dtype, shape)

    def _read_bytes(self, buf, offset, n):
        if buf.space == "dram":
            return self.backend.dump(buf.addr + offset, n)
        lo = buf.addr + offset
        a = lo // SRAM_ALIGN * SRAM_ALIGN
        m = _round(lo + n - a, SRAM_GRANULE)
        if a + m > self.config.sram_size:
            a = max(0, self.config.sram_size - m)
        if not n:
            return b""
        tmp = self.alloc(m)
        try:
            self.run([self.dma_descriptor(1, tmp.addr, a, m, "read: DMA out")], "read")
            return self.backend.dump(tmp.addr + lo - a, n)
        finally:
            self.free(tmp)

    # ---- descriptors -------------------------------------------------------------------------
    def _new_id(self) -> int:
        for _ in range(1 << ID_BITS):
            i = self._next_id
            self._next_id = (self._next_id + 1) % (1 << ID_BITS)
            if i not in self._outstanding and i not in self._completed:
                return i
        raise RuntimeError(f"all {1 << ID_BITS} descriptor ids are in flight: wait for some")

    def descriptor(self, opcode, fields: dict, label: str = "") -> Descriptor:
        """A descriptor of ``opcode`` with ``fields`` (the layout's names; missing ones are 0) and
        a fresh id. ``ValueError`` names a field that does not exist or does not fit its width."""
        opcode = int(opcode)
        layout = self.layouts.get(opcode)
        fields = dict(fields)
        fields.pop("id", None)
        fields["opcode"] = opcode
        if layout is None:                       # header-only: FENCE, DIMM-Link, undefined opcodes
            if set(fields) - {"opcode"}:
                raise ValueError(f"opcode {opcode} takes no fields, got {sorted(set(fields) - {'opcode'})}")
            if not 0 <= opcode < 16:
                raise ValueError(f"opcode must be 0..15, got {opcode}")
            fields["id"] = self._new_id()
            return Descriptor(fields, opcode | fields["id"] << 4, label)
        widths = {name: f.width for name, f in layout}
        for name, value in fields.items():
            if name not in widths:
                raise ValueError(f"{Opcode(opcode).name} descriptors have no field {name!r}; "
                                 f"fields: {', '.join(widths)}")
            if not isinstance(value, int) or not 0 <= value < 1 << widths[name]:
                raise ValueError(f"{Opcode(opcode).name} field {name} = {value!r} does not fit "
                                 f"its {widths[name]} bits")
        fields["id"] = self._new_id()
        full = {name: fields.get(name, 0) for name in widths}
        return Descriptor(full, layout.const(full).as_value().value, label)

    def gemv_descriptor(self, op, dtype, batch, w_base, n_rows, n_cols, x_addr, x_pitch, y_addr,
                        y_pitch, idx_addr=0, n_idx=0, accumulate=False, label="GEMV") -> Descriptor:
        op = GEMV_OPS[op] if isinstance(op, str) else int(op)
        return self.descriptor(Opcode.GEMV, {
            "op": int(op), "dtype": int(dtype) if isinstance(dtype, int) else int(Dtype.parse(dtype)),
            "batch_minus_one": batch - 1,
            "accumulate": int(bool(accumulate)), "w_base": w_base, "n_rows": n_rows,
            "n_cols": n_cols, "idx_addr": idx_addr, "n_idx": n_idx, "x_addr": x_addr,
            "x_pitch": x_pitch, "y_addr": y_addr, "y_pitch": y_pitch}, label)

    def dma_descriptor(self, to_dram, dram, sram, n_bytes, label="DMA") -> Descriptor:
        return self.descriptor(Opcode.DMA, {"to_dram": int(bool(to_dram)), "dram": dram,
                                            "sram": sram, "n_bytes": n_bytes}, label)

    def act_descriptor(self, opcode, op, in_fmt, out_fmt, n, src_a, dst, src_b=0, c=0, k=ONE_F32,
                       label="") -> Descriptor:
        """ACT / SOFTMAX / ELTWISE; ``c`` and ``k`` are binary32 bit patterns."""
        opcode = Opcode(opcode)
        return self.descriptor(opcode, {"op": int(op), "in_fmt": int(in_fmt),
                                        "out_fmt": int(out_fmt), "n": n, "src_a": src_a,
                                        "src_b": src_b, "dst": dst, "c": c, "k": k},
                               label or opcode.name)

    def link_descriptor(self, dest, remote, sram, n_bytes, *, read=False,
                        label="LINK_SEND") -> Descriptor:
        """LINK_SEND: ``n_bytes`` from this SRAM at ``sram`` to DIMM ``dest``'s SRAM at ``remote``
        (``read=True``: from there to here). Needs a core built with ``link=True``."""
        return self.descriptor(Opcode.LINK_SEND, {"read": int(bool(read)), "dest": dest,
                                                  "remote": remote, "sram": sram,
                                                  "n_bytes": n_bytes}, label)

    def atomic_add_descriptor(self, dest, remote, sram, n_bytes, *, int32=False,
                              label="ATOMIC_ADD") -> Descriptor:
        """ATOMIC_ADD: add ``n_bytes`` of FP32 (``int32=True``: INT32) lanes from this SRAM at
        ``sram`` into DIMM ``dest``'s SRAM at ``remote``."""
        return self.descriptor(Opcode.ATOMIC_ADD, {"int32": int(bool(int32)), "dest": dest,
                                                   "remote": remote, "sram": sram,
                                                   "n_bytes": n_bytes}, label)

    def relayout_descriptor(self, to_localized, group_dimms, target, block_bytes, n_blocks, src,
                            dst, staging, *, group_base=0, label="RELAYOUT") -> Descriptor:
        """RELAYOUT over the group of DIMMs ``group_base .. group_base + group_dimms - 1``
        (``hw/link/relayout.py``): ``to_localized=True`` sends this DIMM's blocks of a tensor
        striped at ``src`` (block ``k`` on member ``k mod D`` at ``src + (k div D) block_bytes``)
        to member ``target`` at ``dst + k block_bytes``; ``to_localized=False`` sends the tensor
        localized at ``src`` on member ``target`` back to striped at ``dst``. Issue it on every
        member of the group and wait for all; ``staging`` is ``2 block_bytes`` of this SRAM.
        Needs a core built with ``link=True`` and ``set_link_id``."""
        return self.descriptor(Opcode.RELAYOUT, {
            "to_localized": int(bool(to_localized)), "group_base": group_base,
            "group_dimms": group_dimms, "target": target, "block_bytes": block_bytes,
            "n_blocks": n_blocks, "src": src, "dst": dst, "staging": staging}, label)

    def set_link_id(self, dimm_id: int, n_dimms: int):
        """Program ``LINK_ID``: this DIMM's id in the chain and the chain's length (privileged:
        only while the core is idle; ``ValueError`` for ids that do not fit)."""
        if not (isinstance(n_dimms, int) and 1 <= n_dimms <= 16):
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        if not (isinstance(dimm_id, int) and 0 <= dimm_id < n_dimms):
            raise ValueError(f"dimm_id must be 0..{n_dimms - 1}, got {dimm_id!r}")
        self.backend.csr_write("LINK_ID", dimm_id | n_dimms << 4)

    def fence(self, label="FENCE") -> Descriptor:
        return self.descriptor(Opcode.FENCE, {}, label)

    def raw_descriptor(self, opcode: int, label="") -> Descriptor:
        """A header-only descriptor of any opcode (FENCE, the DIMM-Link ones, undefined ones)."""
        return self.descriptor(opcode, {}, label)

    def submit(self, descriptors) -> list:
        """Queue descriptors (in order); returns their ids."""
        descriptors = list(descriptors)
        for d in descriptors:
            if not isinstance(d, Descriptor):
                raise ValueError(f"submit takes Descriptors, got {type(d).__name__}")
            if d.id in self._outstanding:
                raise ValueError(f"descriptor id {d.id} is already in flight")
        self.backend.submit([d.word for d in descriptors])
        for d in descriptors:
            self._outstanding[d.id] = d
        return [d.id for d in descriptors]

    def wait(self, ids=None, check: bool = True) -> list:
        """Run until the descriptors ``ids`` (ids or Descriptors; default: everything in flight)
        have completed; their completions in the order asked. With ``check``, the first one (in
        that order) that failed raises :class:`NdpError`."""
        if ids is None:
            ids = list(self._outstanding) + [i for i in self._completed if i not in self._outstanding]
        ids = [d.id if isinstance(d, Descriptor) else d for d in ids]
        unknown = [i for i in ids if i not in self._outstanding and i not in self._completed]
        if unknown:
            raise ValueError(f"descriptor ids {unknown} were never submitted or were already waited for")
        if any(i not in self._completed for i in ids):
            if not self._enabled:
                raise RuntimeError("the queue is held (enable(False)): wait would never finish")
            if self._host_reads is not None:
                self._host_reads._run_until(ids)
            else:
                for c in self.backend.run():
                    self._completed[c.id] = c
        missing = [i for i in ids if i not in self._completed]
        if missing:
            raise RuntimeError(f"the {self.name} backend went idle without completing descriptors "
                               f"{missing} (CTRL.ENABLE cleared?)")
        out, descs = [], []
        for i in ids:
            out.append(self._completed.pop(i))
            descs.append(self._outstanding.pop(i, None))
        if self.last_run is not None and self._recording:
            self.last_run.descriptors += [(d.label if d else "", c) for d, c in zip(descs, out)]
        if check:
            for d, c in zip(descs, out):
                if not c.ok:
                    raise NdpError(c, d)
        return out

    _recording = False

    def run(self, descriptors, operation="descriptors") -> list:
        """Submit ``descriptors``, wait for them (raising :class:`NdpError` on a failure) and record
        a :class:`RunStats` in ``last_run``; returns the completions."""
        with self._stats(operation):
            self.submit(descriptors)
            return self.wait([d.id for d in descriptors])

    class _StatsScope:
        def __init__(self, dimm, operation):
            self.dimm, self.operation = dimm, operation

        def __enter__(self):
            d = self.dimm
            self.outer = d._recording
            if not self.outer:
                self.c0 = d.backend.counters()
                self.t0 = d.backend.cycle
                d.last_run = RunStats(self.operation, d.name)
                d._recording = True
            return d.last_run

        def __exit__(self, *exc):
            d = self.dimm
            if not self.outer:
                d._recording = False
                d.last_run.elapsed_cycles = d.backend.cycle - self.t0
                c1 = d.backend.counters()
                d.last_run.counters = {k: c1[k] - self.c0.get(k, 0) for k in c1}

    def _stats(self, operation):
        return Dimm._StatsScope(self, operation)

    def enable(self, on: bool = True) -> None:
        """``CTRL.ENABLE``: while off, submitted descriptors wait in the queue (``wait`` refuses
        to run, it would never finish); ``run_for`` clocks the core meanwhile."""
        self.backend.csr_write("CTRL", int(bool(on)))
        self._enabled = bool(on)

    def run_for(self, cycles: int) -> None:
        """Let the core run ``cycles`` NDP cycles (completions are kept for ``wait``)."""
        for c in self.backend.run(max_cycles=cycles):
            self._completed[c.id] = c

    def host_reads(self, buffer, spacing_cycles: int) -> HostReads:
        """A context manager during which ``wait`` issues a 64 B host read of ``buffer`` (a DRAM
        :class:`Buffer` / :class:`WeightBuffer`) every ``spacing_cycles`` NDP cycles while
        descriptors run (see :class:`HostReads`). Arguments are checked here: ``ValueError``,
        nothing changed."""
        return HostReads(self, buffer, spacing_cycles)

    def status(self) -> CoreStatus:
        return CoreStatus.decode(self.backend.csr_read("STATUS"))

    def counters(self) -> dict:
        return self.backend.counters()

    # ---- weights -----------------------------------------------------------------------------
    def axpy_tile(self, dtype=Dtype.FP16) -> int:
        """Outputs per stored AXPY column tile: ``max_batch`` result rows of the tile take at most
        half the SRAM (a multiple of 64 elements, so every tile's pitch is whole bursts)."""
        t = self.config.sram_size // 2 // self.config.max_batch // 4
        return max(64, t // 64 * 64)

    def store_weights(self, W: torch.Tensor, dtype=None, layout: str = "dot") -> WeightBuffer:
        """``W`` into DRAM in the weight streamer's layout: "dot" for ``W`` [N, K] (dense / row
        gather), "axpy" for ``Wt`` [J, N] (column gather). ``dtype`` defaults to ``W``'s
        (float16 -> FP16, bfloat16 -> BF16, int8 -> INT8); a different one is an error."""
        _check_tensor("W", W, tuple(GEMV_DTYPES))
        if W.dim() != 2 or 0 in W.shape:
            raise ValueError(f"W must be a non-empty 2-D tensor, got shape {tuple(W.shape)}")
        dt = GEMV_DTYPES[W.dtype]
        if dtype is not None and Dtype.parse(dtype) != dt:
            raise ValueError(f"W has dtype {W.dtype} but dtype {Dtype.parse(dtype).name} was asked for")
        if layout not in ("dot", "axpy"):
            raise ValueError(f"layout must be 'dot' or 'axpy', got {layout!r}")
        rows, cols = W.shape
        if layout == "dot":
            tiles = [(0, cols)]
        else:
            t = self.axpy_tile(dt)
            tiles = [(c0, min(cols, c0 + t)) for c0 in range(0, cols, t)]
        sizes = [weight_layout.image_bytes(rows, c1 - c0, dt) for c0, c1 in tiles]
        buf = self.alloc(sum(sizes))
        addr, placed = buf.addr, []
        try:
            for (c0, c1), size in zip(tiles, sizes):
                if layout == "dot":
                    image = weight_layout.dot_image(W, dt)
                else:
                    image = weight_layout.axpy_image(W[:, c0:c1].contiguous(), dt)
                self.backend.load(addr, image)
                placed.append((c0, c1, addr))
                addr += size
        except BaseException:
            self.free(buf)
            raise
        return WeightBuffer(buf, dt, layout, (rows, cols), placed)

    # ---- GEMV --------------------------------------------------------------------------------
    def gemv(self, weights: WeightBuffer, x: torch.Tensor, op: str | None = None, idx=None,
             accumulate: torch.Tensor | None = None, fetch: bool = True) -> torch.Tensor | None:
        """``Y = W x`` on the NDP; returns float32 (FP16/BF16) or int32 (INT8) ``[B, n_out]`` (or
        ``[n_out]`` for a 1-D ``x``).

        ``op``: "dense" (DOT weights, ``x`` [B, K]), "row_gather" (DOT weights, outputs
        ``idx``), "col_gather" (AXPY weights ``Wt`` [J, N], ``x`` = H [B, J], sums over the
        neurons ``idx`` in list order); default from the weights' layout and ``idx``.
        ``accumulate``: prior values ``[B, n_out]`` the results are added to in hardware (the
        result writer's rule). Index entries past the matrix are the hardware's to report
        (``NdpError`` with ``BAD_INDEX``; nothing is written). ``fetch=False`` runs everything
        but does not read the results back (returns None): for a timing-only model backend.
        """
        if not isinstance(weights, WeightBuffer):
            raise ValueError(f"weights must be a WeightBuffer (store_weights), got {type(weights).__name__}")
        self.check(weights.buffer, "GEMV")
        if op is None:
            op = "col_gather" if weights.layout == "axpy" else ("dense" if idx is None else "row_gather")
        if op not in GEMV_OPS:
            raise ValueError(f"op must be one of {', '.join(GEMV_OPS)}, got {op!r}")
        if (op == "col_gather") != (weights.layout == "axpy"):
            raise ValueError(f"{op} needs weights stored with layout "
                             f"{'axpy' if op == 'col_gather' else 'dot'}, these are {weights.layout}")
        _check_tensor("x", x, (weights.torch_dtype,))
        squeeze = x.dim() == 1
        X = x[None] if squeeze else x
        rows, cols = weights.shape
        width = rows if op == "col_gather" else cols
        if X.dim() != 2 or X.shape[1] != width or X.shape[0] < 1:
            raise ValueError(f"x must be [{width}] or [B, {width}] for these {rows}x{cols} weights "
                             f"({op}), got shape {tuple(x.shape)}")
        if op == "dense":
            if idx is not None:
                raise ValueError("a dense GEMV takes no index list (use op='row_gather')")
            index = None
        else:
            if idx is None:
                raise ValueError(f"{op} needs an index list idx")
            index = torch.as_tensor(idx)
            if index.dim() != 1 or index.dtype.is_floating_point or index.dtype == torch.bool:
                raise ValueError(f"idx must be a 1-D integer list, got {index.dtype} shape "
                                 f"{tuple(index.shape)}")
            index = index.to(torch.int64)
            if index.numel() and (int(index.min()) < 0 or int(index.max()) >= 1 << 32):
                raise ValueError("idx entries must be uint32 (0 .. 2**32-1); entries past the "
                                 "matrix are reported by the hardware as BAD_INDEX")
            if index.numel() >= 1 << 20:
                raise ValueError(f"an index list holds at most {(1 << 20) - 1} entries, got {index.numel()}")
        B = X.shape[0]
        n_out = cols if op == "col_gather" else (rows if op == "dense" else index.numel())
        is_int = weights.dtype == Dtype.INT8
        prior = None
        if accumulate is not None:
            want = torch.int32 if is_int else torch.float32
            _check_tensor("accumulate", accumulate, (want,))
            prior = accumulate[None] if accumulate.dim() == 1 else accumulate
            if tuple(prior.shape) != (B, n_out):
                raise ValueError(f"accumulate must be [{B}, {n_out}], got {tuple(accumulate.shape)}")
        with self._stats(f"gemv {op}"):
            y = self._gemv(weights, X, op, index, prior, n_out, fetch)
        if not fetch:
            return None
        out = result_values(torch.from_numpy(y.astype(np.int64)), not is_int)
        return out[0] if squeeze else out

    def _gemv(self, wb, X, op, index, prior, n_out, fetch=True) -> np.ndarray:
        """Plan and run: batch groups x output chunks (see the module docstring)."""
        cfg, dt = self.config, wb.dtype
        e = dt.info.elem_bits // 8
        lanes = dt.info.lanes
        B = X.shape[0]
        rows, cols = wb.shape
        axpy = op == "col_gather"
        x_len = rows * e if axpy else 16 * -(-cols // lanes)
        x_pitch = _round(x_len, 16)
        y = np.zeros((B, n_out), np.uint32)
        if axpy:
            chunks = [(c0, c1, addr, None) for c0, c1, addr in wb.tiles]
            n_idx = index.numel()
        elif op == "dense":
            chunks = [(0, n_out, wb.buffer.addr, None)]
            n_idx = 0
        else:
            chunks = None
            n_idx = 0
        avail = self.sram.largest_free
        per_group = cfg.n_units

        def cost(b, c, gather_idx):
            return (_round(b * x_pitch, SRAM_GRANULE) + _round(4 * gather_idx, SRAM_GRANULE) +
                    _round(b * _round(4 * c, 32), SRAM_GRANULE))

        b = min(B, cfg.max_batch)
        while True:
            if axpy:
                widest = max(c1 - c0 for c0, c1, _, _ in chunks)
                if cost(b, widest, n_idx) <= avail:
                    break
            elif op == "dense" and cost(b, n_out, 0) <= avail:
                break
            else:
                if cost(b, min(1, n_out), min(1, n_out)) <= avail:
                    lo, hi = 1, max(n_out, 1)                 # largest c that fits, as row gathers
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        if cost(b, mid, mid) <= avail:
                            lo = mid
                        else:
                            hi = mid - 1
                    c = lo if lo < per_group else lo // per_group * per_group
                    source = torch.arange(n_out) if op == "dense" else index
                    chunks = [(c0, min(n_out, c0 + c), wb.buffer.addr, source[c0:c0 + c])
                              for c0 in range(0, n_out, c)] or [(0, 0, wb.buffer.addr, source)]
                    break
            if b == 1:
                raise MemoryError(f"GEMV does not fit the SRAM: one {x_len} B activation row, its "
                                  f"index list and one result row need more than the "
                                  f"{avail} bytes free")
            b = max(1, b // 2)
        for b0 in range(0, B, b):
            b1 = min(B, b0 + b)
            self._gemv_batch(wb, X[b0:b1], op, index, None if prior is None else prior[b0:b1],
                             chunks, x_len, x_pitch, y[b0:b1], fetch)
        return y

    def _gemv_batch(self, wb, X, op, index, prior, chunks, x_len, x_pitch, y_out, fetch):
        dt, B = wb.dtype, X.shape[0]
        rows, cols = wb.shape
        axpy = op == "col_gather"
        n_idx_all = index.numel() if axpy else 0
        # SRAM: X rows, one index list, one Y block (the widest chunk), reused chunk by chunk
        widest = max(c1 - c0 for c0, c1, _, _ in chunks)
        max_idx = n_idx_all if axpy else max((0 if s is None else s.numel()) for *_, s in chunks)
        x_bytes = _round(B * x_pitch, SRAM_GRANULE)
        i_bytes = _round(4 * max_idx, SRAM_GRANULE)
        y_bytes = _round(B * _round(4 * widest, 32), SRAM_GRANULE)
        scratch = self.alloc_sram(x_bytes + i_bytes + y_bytes)
        x_sram, i_sram, y_sram = scratch.addr, scratch.addr + x_bytes, scratch.addr + x_bytes + i_bytes
        staging = []
        try:
            def stage(raw):
                buf = self.alloc(max(len(raw), 1))
                staging.append(buf)
                if raw:
                    self.backend.load(buf.addr, raw)
                return buf
            xb = np.zeros((B, x_pitch), np.uint8)
            raw_x = X.detach().contiguous().view(torch.uint8).numpy().reshape(B, -1)
            xb[:, :raw_x.shape[1]] = raw_x
            x_img = xb.tobytes() + bytes(x_bytes - B * x_pitch)
            descs = [self.dma_descriptor(0, stage(x_img).addr, x_sram, x_bytes, "DMA X in")]
            if axpy and n_idx_all:
                img = weight_layout.index_bytes(index)
                img += bytes(_round(len(img), SRAM_GRANULE) - len(img))
                descs.append(self.dma_descriptor(0, stage(img).addr, i_sram, len(img),
                                                 "DMA index list in"))
            outs = []
            for c0, c1, w_addr, sub_idx in chunks:
                n = c1 - c0
                y_pitch = _round(4 * n, 32)
                y_len = _round(B * y_pitch, SRAM_GRANULE)
                tag = "" if len(chunks) == 1 else f" [{c0}:{c1}]"
                if sub_idx is not None and sub_idx.numel():
                    img = weight_layout.index_bytes(sub_idx)
                    img += bytes(_round(len(img), SRAM_GRANULE) - len(img))
                    descs.append(self.dma_descriptor(0, stage(img).addr, i_sram, len(img),
                                                     "DMA index list in" + tag))
                if prior is not None:
                    pb = np.zeros((B, y_pitch // 4), np.uint32)
                    pb[:, :n] = prior[:, c0:c1].contiguous().view(torch.int32).numpy().view(np.uint32)
                    img = pb.astype("<u4").tobytes() + bytes(y_len - B * y_pitch)
                    descs.append(self.dma_descriptor(0, stage(img).addr, y_sram, y_len,
                                                     "DMA prior Y in" + tag))
                if axpy:
                    sub_op, n_rows, n_cols, n_idx = "col_gather", rows, n, n_idx_all
                elif sub_idx is None:
                    sub_op, n_rows, n_cols, n_idx = "dense", rows, cols, 0
                else:
                    sub_op, n_rows, n_cols, n_idx = "row_gather", rows, cols, sub_idx.numel()
                descs.append(self.gemv_descriptor(
                    sub_op, dt, B, w_addr, n_rows, n_cols, x_sram, x_pitch, y_sram, y_pitch,
                    idx_addr=i_sram if sub_op != "dense" else 0, n_idx=n_idx,
                    accumulate=prior is not None,
                    label=f"GEMV {sub_op} {dt.name} {n_rows}x{n_cols} batch {B}" + tag))
                out = stage(bytes(y_len)) if y_len else None
                if y_len:
                    descs.append(self.dma_descriptor(1, out.addr, y_sram, y_len, "DMA Y out" + tag))
                outs.append((c0, c1, y_pitch, out))
            self.submit(descs)
            self.wait(descs)
            for c0, c1, y_pitch, out in outs:
                if out is None or c1 == c0 or not fetch:
                    continue
                raw = self.backend.dump(out.addr, B * y_pitch)
                vals = np.frombuffer(raw, dtype="<u4").reshape(B, y_pitch // 4)
                y_out[:, c0:c1] = vals[:, :c1 - c0]
        finally:
            for buf in staging:
                self.free(buf)
            self.free(scratch)

    # ---- activation unit -----------------------------------------------------------------------
    def _act_io(self, operation, inputs, out_bytes, build, fetch=True):
        """DMA ``inputs`` (raw bytes) into fresh SRAM areas, run ``build(addrs, dst)``'s
        descriptors, DMA ``out_bytes`` back; returns the raw output."""
        sizes = [_round(max(len(r), 1), SRAM_GRANULE) for r in inputs] + \
            [_round(max(out_bytes, 1), SRAM_GRANULE)]
        if sum(sizes) > self.sram.largest_free:
            raise MemoryError(f"{operation}: operands and result need {sum(sizes)} bytes of SRAM, "
                              f"{self.sram.largest_free} free (the activation unit works on whole "
                              f"vectors in the SRAM)")
        bufs, staging = [], []
        try:
            descs = []
            for raw, size in zip(inputs, sizes):
                buf = self.alloc_sram(size)
                bufs.append(buf)
                tmp = self.alloc(size)
                staging.append(tmp)
                self.backend.load(tmp.addr, raw + bytes(size - len(raw)))
                descs.append(self.dma_descriptor(0, tmp.addr, buf.addr, size, "DMA operand in"))
            dst = self.alloc_sram(sizes[-1])
            bufs.append(dst)
            descs += build([b.addr for b in bufs[:-1]], dst.addr)
            out = self.alloc(sizes[-1])
            staging.append(out)
            descs.append(self.dma_descriptor(1, out.addr, dst.addr, sizes[-1], "DMA result out"))
            with self._stats(operation):
                self.submit(descs)
                self.wait(descs)
            return self.backend.dump(out.addr, out_bytes) if fetch else None
        finally:
            for b in bufs + staging:
                self.free(b)

    @staticmethod
    def _act_format(name, t):
        _check_tensor(name, t, tuple(ACT_FORMATS))
        return ACT_FORMATS[t.dtype]

    @staticmethod
    def _out_format(out_dtype, default):
        if out_dtype is None:
            return default
        if out_dtype not in ACT_FORMATS:
            raise ValueError(f"out_dtype must be one of {', '.join(str(d) for d in ACT_FORMATS)}, "
                             f"got {out_dtype!r}")
        return ACT_FORMATS[out_dtype]

    @staticmethod
    def _act_dtype(fmt):
        return {v: k for k, v in ACT_FORMATS.items()}[fmt]

    def activation(self, op, x: torch.Tensor, out_dtype=None, c: float = 0.0,
                   k: float = 1.0, fetch: bool = True) -> torch.Tensor | None:
        """One ACT descriptor over all elements of ``x`` (float16 / bfloat16 / float32): PASS,
        RELU, SILU, GELU, SCALE (``x * k``), EXP (``exp(x - c) * k``), RECIP; the reductions MAX
        and SUMEXP (``sum exp(x - c)``) return a 0-d tensor. ``out_dtype`` defaults to ``x``'s."""
        act = self._act_op(op, ACT_UNARY_OPS, "an ACT")
        fin = self._act_format("x", x)
        fout = self._out_format(out_dtype, fin)
        n = x.numel()
        red = act in REDUCTION_OPS
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        out_n = 1 if red else n
        raw = self._act_io(f"activation {act.name}", [_tensor_bytes(x)], out_n * eo,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.ACT, act, fin, fout, n, src[0], dst, c=_f32_bits(c),
                               k=_f32_bits(k), label=f"ACT {act.name} n={n}")], fetch)
        if not fetch:
            return None
        y = _bytes_tensor(raw, self._act_dtype(fout), (out_n,))
        return y.reshape(()) if red else y.reshape(x.shape)

    def eltwise(self, op, a: torch.Tensor, b: torch.Tensor, out_dtype=None,
                fetch: bool = True) -> torch.Tensor | None:
        """ELTWISE ``a (+|*) b`` element by element (same dtype and shape)."""
        act = self._act_op(op, BINARY_OPS, "an ELTWISE")
        fin = self._act_format("a", a)
        self._act_format("b", b)
        if b.dtype != a.dtype or b.shape != a.shape:
            raise ValueError(f"a ({a.dtype}, {tuple(a.shape)}) and b ({b.dtype}, {tuple(b.shape)}) "
                             "must have the same dtype and shape")
        fout = self._out_format(out_dtype, fin)
        n = a.numel()
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        raw = self._act_io(f"eltwise {act.name}", [_tensor_bytes(a), _tensor_bytes(b)], n * eo,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.ELTWISE, act, fin, fout, n, src[0], dst, src_b=src[1],
                               label=f"ELTWISE {act.name} n={n}")], fetch)
        if not fetch:
            return None
        return _bytes_tensor(raw, self._act_dtype(fout), a.shape)

    def softmax(self, x: torch.Tensor, out_dtype=None, fetch: bool = True) -> torch.Tensor | None:
        """SOFTMAX over the last dimension of ``x`` (1-D, or 2-D: one descriptor per row)."""
        fin = self._act_format("x", x)
        if x.dim() not in (1, 2) or x.shape[-1] < 1:
            raise ValueError(f"softmax takes a 1-D or 2-D tensor with rows of >= 1 element, "
                             f"got shape {tuple(x.shape)}")
        fout = self._out_format(out_dtype, fin)
        X = x[None] if x.dim() == 1 else x
        R, n = X.shape
        ei = x.element_size()
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        in_pitch, out_pitch = _round(n * ei, SRAM_ALIGN), _round(n * eo, SRAM_ALIGN)
        rows = np.zeros((R, in_pitch), np.uint8)
        rows[:, :n * ei] = np.frombuffer(_tensor_bytes(X), np.uint8).reshape(R, n * ei)
        raw = self._act_io("softmax", [rows.tobytes()], R * out_pitch,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.SOFTMAX, 0, fin, fout, n, src[0] + r * in_pitch,
                               dst + r * out_pitch, label=f"SOFTMAX row {r} n={n}")
                               for r in range(R)], fetch)
        if not fetch:
            return None
        out = np.frombuffer(raw, np.uint8).reshape(R, out_pitch)[:, :n * eo]
        y = _bytes_tensor(np.ascontiguousarray(out).tobytes(), self._act_dtype(fout), (R, n))
        return y[0] if x.dim() == 1 else y

    @staticmethod
    def _act_op(op, allowed, what) -> ActOp:
        try:
            a = ActOp[op.upper()] if isinstance(op, str) else ActOp(op)
        except (KeyError, ValueError):
            a = None
        if a is None or a not in allowed:
            raise ValueError(f"{what} op must be one of {', '.join(o.name for o in allowed)}, "
                             f"got {op!r}")
        return a


# ---- several DIMMs -------------------------------------------------------------------------

@dataclass
class SplitWeights:
    """A DOT weight matrix whose output rows are spread over the DIMMs of an :class:`NdpSystem`."""
    parts: list                # (dimm index, row0, row1, WeightBuffer)
    shape: tuple
    dtype: Dtype


@dataclass
class SystemRun:
    """Per-DIMM cycles of one split operation; the DIMMs work in parallel, so the time is the max."""
    operation: str
    backend: str
    per_dimm: list             # RunStats of each DIMM that took part

    @property
    def cycles(self) -> int:
        return max((r.elapsed_cycles for r in self.per_dimm), default=0)

    def as_dict(self) -> dict:
        return {"operation": self.operation, "backend": self.backend, "parallel_cycles": self.cycles,
                "per_dimm_cycles": [r.elapsed_cycles for r in self.per_dimm],
                "per_dimm": [r.as_dict() for r in self.per_dimm]}


class NdpSystem:
    """``n_dimms`` DIMMs, each a :class:`Dimm` on its own backend instance (``system[i]``).

    ``backend``: a name (one instance of it per DIMM) or a list of ``n_dimms`` Backend instances.
    With ``CoreConfig(link=True)`` the DIMMs form a DIMM-Link chain (ids 0..n-1, ``LINK_ID``
    set) and their LINK_SEND / ATOMIC_ADD / RELAYOUT descriptors reach each other: on the
    model backend through ``cosim/link/model.py``; on the RTL backend (2-4 DIMMs) the cores
    run in one harness (``cosim/rtl/harness.py`` :class:`RtlSystem`), joined by their RTL
    link ports through behavioural lane channels (``rtl`` holds it; backend keyword arguments
    such as ``latency`` or ``progress`` go to it, ``window`` to every DIMM).

    ``link_ber``, ``link_seed``: bit errors on that chain's links (a number in [0, 1e-2)). On
    the model, drawn from a numpy Generator seeded with ``link_seed``: frames are NAKed and
    replayed as the RTL link layer does, which costs time, never data. On the RTL, bits of
    the serial lanes flip and the link layer's CRC, NAK and replay deal with them.
    :meth:`link_counters` reads the per-link error counters (``docs/dimm_link.md``, "Bit
    errors and error counters").
    """

    def __init__(self, n_dimms: int, backend="model", config: CoreConfig | None = None,
                 link_ber: float = 0.0, link_seed: int = 0, **kwargs):
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or n_dimms < 1:
            raise ValueError(f"n_dimms must be a positive integer, got {n_dimms!r}")
        if isinstance(backend, Backend):
            raise ValueError("every DIMM needs its own backend: pass a name or a list of "
                             f"{n_dimms} Backend instances")
        link = config is not None and config.link
        from ndpdimm.cosim.link.model import check_ber, check_seed
        link_ber = check_ber(link_ber, "link_ber")
        link_seed = check_seed(link_seed, "link_seed")
        if link_ber and not link:
            raise ValueError(f"link_ber={link_ber!r} needs a DIMM-Link system "
                             "(CoreConfig(link=True)), got config "
                             f"{'None' if config is None else 'with link=False'}")
        self.fabric = self.rtl = None
        if isinstance(backend, (list, tuple)):
            if len(backend) != n_dimms or len({id(b) for b in backend}) != n_dimms:
                raise ValueError(f"expected {n_dimms} distinct Backend instances, got {len(backend)}")
            if link and n_dimms > 1:
                raise ValueError("a DIMM-Link system builds its own model backends: pass "
                                 "backend='model', not instances")
            self.dimms = [Dimm(b, config, **kwargs) for b in backend]
        elif link and n_dimms > 1 and backend == "rtl":
            # DIMM-Link between RTL cores: one harness simulating them all, joined by their link
            # ports (cosim/rtl/harness.py RtlSystem); the DIMMs drive its cores
            from ndpdimm.cosim.rtl.harness import RtlSystem
            window = kwargs.pop("window", None)
            self.rtl = RtlSystem(config, n_dimms, ber=link_ber, seed=link_seed, **kwargs)
            self.dimms = [Dimm(core, window=window) for core in self.rtl.cores]
        elif link and n_dimms > 1:
            # DIMM-Link: one chain joining the DIMMs' models (cosim/link/model.py)
            if backend != "model":
                raise ValueError(f"DIMM-Link between {n_dimms} DIMMs runs on the 'model' or "
                                 f"'rtl' backend, got {backend!r}")
            from ndpdimm.cosim.link.model import LinkFabric
            self.fabric = LinkFabric(n_dimms, ber=link_ber, seed=link_seed)
            self.dimms = [Dimm(backend, config, fabric=self.fabric, dimm_id=i, **kwargs)
                          for i in range(n_dimms)]
        else:
            self.dimms = [Dimm(backend, config, **kwargs) for _ in range(n_dimms)]
        if link:
            for i, d in enumerate(self.dimms):
                d.set_link_id(i, n_dimms)
        self.link = link
        self.last_run: SystemRun | None = None

    def link_counters(self) -> dict:
        """Per DIMM-Link direction (``"0->1"``, ``"1->0"``, ...) the model fabric's counters since
        it was built or last reset (``self.fabric.reset_counters()``): ``frames_sent``,
        ``bytes``, ``wire_cycles``, ``crc_errors``, ``naks_sent``, ``replays``, ``timeouts``,
        ``replay_cycles`` (``cosim/link/model.py``, ``LINK_COUNTERS``). On the RTL backend the
        link ports' own counters (:meth:`RtlSystem.link_counters`: ``tx_*`` of the sender,
        ``rx_*`` and ``phy_*`` of the receiver, the channel's ``injected_bit_errors``). Empty
        for one DIMM (no link between DIMMs). ``ValueError`` without DIMM-Link."""
        if not self.link:
            raise ValueError("link_counters: this system has no DIMM-Link (build it with "
                             "CoreConfig(link=True))")
        if self.rtl is not None:
            return self.rtl.link_counters()
        return {} if self.fabric is None else self.fabric.counters()

    def __len__(self):
        return len(self.dimms)

    def __getitem__(self, i) -> Dimm:
        return self.dimms[i]

    def __iter__(self):
        return iter(self.dimms)

    def close(self):
        for d in self.dimms:
            d.close()
        if self.rtl is not None:
            self.rtl.close()

    def store_weights_split(self, W: torch.Tensor, dtype=None) -> SplitWeights:
        """DOT weights ``W`` [N, K] with rows split as evenly as possible over the DIMMs."""
        _check_tensor("W", W, tuple(GEMV_DTYPES))
        if W.dim() != 2:
            raise ValueError(f"W must be 2-D, got shape {tuple(W.shape)}")
        n = W.shape[0]
        k = len(self.dimms)
        bounds = [n * i // k for i in range(k + 1)]
        parts = []
        for i, d in enumerate(self.dimms):
            r0, r1 = bounds[i], bounds[i + 1]
            if r1 > r0:
                parts.append((i, r0, r1, d.store_weights(W[r0:r1].contiguous(), dtype, "dot")))
        return SplitWeights(parts, tuple(W.shape), GEMV_DTYPES[W.dtype])

    def relayout(self, to_localized: bool, target: int, block_bytes: int, n_blocks: int, src,
                 dst, staging, members: int | None = None) -> int:
        """One RELAYOUT over the first ``members`` DIMMs of the system (default all; a group is
        the chain's first members): each member's descriptor (``Dimm.relayout_descriptor``)
        submitted, then all waited for. ``src``, ``dst``, ``staging``: per member its Buffer
        (staging: ``2 block_bytes`` of SRAM). Returns the slowest member's cycles; a failed
        member raises :class:`NdpError`."""
        members = len(self.dimms) if members is None else members
        if not isinstance(members, int) or isinstance(members, bool) or not 1 <= members <= len(self.dimms):
            raise ValueError(f"members must be 1..{len(self.dimms)}, got {members!r}")
        group = self.dimms[:members]
        if not all(len(b) == members for b in (src, dst, staging)):
            raise ValueError(f"src, dst and staging need one buffer per member ({members})")
        descs = [d.relayout_descriptor(to_localized, members, target, block_bytes, n_blocks,
                                       src[i].addr, dst[i].addr, staging[i].addr)
                 for i, d in enumerate(group)]
        for d, desc in zip(group, descs):
            d.submit([desc])
        return max(d.wait([desc.id])[0].cycles for d, desc in zip(group, descs))

    def gemv_merged(self, W: torch.Tensor, x: torch.Tensor):
        """Dense ``W x`` split by columns over the DIMMs of a DIMM-Link chain (DIMM ``i`` takes
        columns ``[K i / n, K (i + 1) / n)``): each computes its partial FP32 product on its own
        engine, then DIMMs 1, 2, ... in that order add theirs into DIMM 0's with ATOMIC_ADD, so
        the result is bit for bit ``((y0 + y1) + y2) + ...``. Returns ``(y, partials,
        merge_cycles)``: the merged product read from DIMM 0, each DIMM's partial product and
        each merge descriptor's cycles. The SRAM buffers it used are freed."""
        if not self.link:
            raise ValueError("gemv_merged needs a DIMM-Link system (CoreConfig(link=True))")
        n, K = len(self.dimms), W.shape[1]
        cols = [slice(K * i // n, K * (i + 1) // n) for i in range(n)]
        partial = [d.gemv(d.store_weights(W[:, c].contiguous()), x[..., c].contiguous())
                   for d, c in zip(self.dimms, cols)]
        bufs = [d.alloc_sram(y.numel() * 4) for d, y in zip(self.dimms, partial)]
        try:
            for d, buf, y in zip(self.dimms, bufs, partial):
                d.write(buf, y.contiguous())
            merge_cycles = []
            for i in range(1, n):                          # the merge order: DIMM 1, 2, ...
                d = self.dimms[i]
                desc = d.atomic_add_descriptor(0, bufs[0].addr, bufs[i].addr, bufs[i].nbytes)
                merge_cycles.append(d.run([desc], f"merge {i}")[0].cycles)
            y = self.dimms[0].read(bufs[0], torch.float32, tuple(partial[0].shape))
        finally:
            for d, b in zip(self.dimms, bufs):
                d.free(b)
        return y, partial, merge_cycles

    def gemv_split(self, split: SplitWeights, x: torch.Tensor) -> torch.Tensor:
        """Dense ``W x`` with every DIMM computing its rows; results concatenated. ``last_run``
        holds each DIMM's cycles and the parallel time."""
        outs, runs = [], []
        for i, r0, r1, wb in split.parts:
            outs.append(self.dimms[i].gemv(wb, x))
            runs.append(self.dimms[i].last_run)
        self.last_run = SystemRun("gemv dense split", self.dimms[0].name, runs)
        return torch.cat(outs, dim=-1)
