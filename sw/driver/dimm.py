"""Host driver of one NDP-DIMM: memory, descriptors, submit / wait / run, status, over either backend.

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
* operations: ``store_weights``, ``gemv``, ``activation``, ``softmax``, ``eltwise``
  (``kernels.py``, the mixin :class:`Dimm` inherits; GEMV tiling is described there). Each
  returns its result and leaves a :class:`RunStats` in ``last_run``.

The tensor helpers, :class:`~ndpdimm.sw.driver.buffers.Buffer` and the allocators are in
``buffers.py``, the exceptions in ``errors.py``.

Background host traffic (:meth:`Dimm.host_reads`): within ``with
dimm.host_reads(buffer, spacing_cycles):`` every ``wait`` (so every operation)
advances the backend in slices (``backend.run(max_cycles=...)``) and issues
one 64 B pass-through host read (``backend.host_access``) of the next burst of
``buffer`` every ``spacing_cycles`` NDP cycles while descriptors it waits for
are in flight: the CPU / GPU reading striped data from the DIMM while its core
computes. Both backends model the contention (the RTL's arbiter; the model's
``PerfModel.host_contention``).

Several DIMMs: :class:`~ndpdimm.sw.driver.system.NdpSystem` (``system.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ndpdimm.cosim.backend import BACKENDS, Backend, Completion, CoreConfig
from ndpdimm.cosim.golden.core import descriptor_layouts
from ndpdimm.hw.activation.unit import ONE_F32
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import BURST_BYTES
from ndpdimm.hw.registers import register
from ndpdimm.sw.driver.buffers import (
    GEMV_OPS,
    SRAM_ALIGN,
    SRAM_GRANULE,
    TENSOR_DTYPES,
    Allocator,
    Buffer,
    WeightBuffer,
    bytes_tensor,
    check_tensor,
    round_up,
    tensor_bytes,
)
from ndpdimm.sw.driver.errors import NdpError
from ndpdimm.sw.driver.host_reads import HostReads
from ndpdimm.sw.driver.kernels import Kernels
from ndpdimm.sw.driver.measure import Measurement, MeasureScope, RunStats, StatsScope
from ndpdimm.sw.driver.timeline import descriptor_timeline

__all__ = ["Dimm", "Descriptor", "RunStats", "CoreStatus", "Measurement", "make_backend",
           "cycles_source"]

ID_BITS = 12


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
    def decode(cls, word: int) -> CoreStatus:
        f = register("STATUS").unpack(word)
        return cls(busy=bool(f["BUSY"]), queued=f["QUEUED"], completions_waiting=f["CQ_WAITING"],
                   queue_full=bool(f["QUEUE_FULL"]), completion_queue_full=bool(f["CQ_FULL"]),
                   raw=word)


def make_backend(backend: str | Backend, config: CoreConfig | None = None, **kwargs: Any) -> Backend:
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


def cycles_source(backend: str, config: CoreConfig) -> tuple[str, bool | None]:
    """``(words, calibrated)``: where the cycles of ``backend`` with ``config`` come from, for a
    table's header and a result's provenance. ``calibrated``: None on the RTL (its own cycles);
    on the model, whether ``config`` has its own calibration file (without one the model runs
    with the default core's parameters, and the words say ``UNCALIBRATED``)."""
    if backend == "rtl":
        return "Verilated RTL cycles", None
    from ndpdimm.cosim.model.perf import calibration_words
    return calibration_words(config)


class Dimm(Kernels):
    """One NDP-DIMM (see the module docstring).

    ``backend``: ``"model"``, ``"rtl"`` or a ``Backend`` instance; ``config``: the core's
    :class:`CoreConfig`; ``window``: ``(base, limit)`` of the DRAM the NDP may touch (default the
    whole DIMM), also the range the DRAM allocator hands out; ``backend_kwargs`` go to the
    backend's constructor (e.g. ``functional=False`` for the model, ``waves=...`` for the RTL).
    ``timeline``: keep every waited-for descriptor's completion for :meth:`write_timeline`.
    """

    def __init__(self, backend: str | Backend = "model", config: CoreConfig | None = None, *,
                 window: tuple[int, int] | None = None, timeline: bool = False,
                 **backend_kwargs: Any) -> None:
        if not isinstance(timeline, bool):
            raise ValueError(f"timeline must be True or False, got {timeline!r}")
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
        self.dram = Allocator("dram", lo, hi, BURST_BYTES, BURST_BYTES, "the NDP window")
        self.sram = Allocator("sram", 0, self.config.sram_size, SRAM_ALIGN, SRAM_GRANULE, "the SRAM")
        self.layouts = descriptor_layouts(cap, self.config.sram_size)
        self._next_id = 0
        self._outstanding = {}          # id -> Descriptor, submitted and not yet completed
        self._completed = {}            # id -> Completion, completed and not yet waited for
        self._enabled = True
        self.last_run: RunStats | None = None
        self._host_reads = None         # the active HostReads scope
        self.host_reads_issued = 0      # background host reads issued (HostReads), all scopes
        #: (label, Completion) of every descriptor waited for, with ``timeline=True``
        self.timeline_records: list | None = [] if timeline else None

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def capacity(self) -> int:
        return self.backend.org.capacity_bytes

    @property
    def functional(self) -> bool:
        """Whether descriptors compute results (False: a timing-only model, results not read)."""
        return self.backend.functional

    @property
    def timing_source(self) -> str | None:
        """Where the cycle counts come from beyond the backend's name: the calibration file of
        the model backend's performance model; None for the RTL (its own cycles)."""
        return getattr(getattr(self.backend, "perf", None), "source", None)

    def measure(self, label: str = "") -> MeasureScope:
        """A context manager timing everything inside it on this DIMM's clock:
        ``with dimm.measure("cold_mlp") as m: ...`` then ``m.cycles`` (a :class:`Measurement`).
        Scopes nest and do not disturb ``last_run``."""
        return MeasureScope(self, label)

    def close(self) -> None:
        """Close the backend if this DIMM created it (one passed in stays open)."""
        if self._owns_backend:
            self.backend.close()

    def __enter__(self) -> Dimm:
        return self

    def __exit__(self, *exc: object) -> None:
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

    def free(self, buf: Buffer | WeightBuffer) -> None:
        """Return a buffer (or a :class:`WeightBuffer`); a second free raises ``FreedBufferError``."""
        if isinstance(buf, WeightBuffer):
            buf = buf.buffer
        self._allocator(buf).free(buf, self)

    def check(self, buf: Buffer, what: str = "use") -> Buffer:
        """``buf`` if it is a live buffer of this DIMM, else ``FreedBufferError``."""
        self._allocator(buf).check(buf, self, what)
        return buf

    def write(self, buf: Buffer, tensor: torch.Tensor, offset: int = 0) -> None:
        """The tensor's raw bytes into ``buf`` at ``offset``. SRAM buffers are written by a DMA
        from a DRAM staging area in whole 64 B blocks: bytes up to the next 64 B boundary after
        the tensor are zeroed."""
        self.check(buf, "write")
        check_tensor("tensor", tensor)
        raw = tensor_bytes(tensor)
        if not isinstance(offset, int) or offset < 0 or offset + len(raw) > buf.nbytes:
            raise ValueError(f"{len(raw)} bytes at offset {offset!r} do not fit {buf!r}")
        self._write_bytes(buf, offset, raw)

    def _write_bytes(self, buf, offset, raw):
        if buf.space == "dram":
            self.backend.load(buf.addr + offset, raw)
            return
        if offset % SRAM_GRANULE:
            raise ValueError(f"SRAM writes start on a {SRAM_GRANULE} B boundary, got offset {offset}")
        n = round_up(len(raw), SRAM_GRANULE)
        if not n:
            return
        tmp = self.alloc(n)
        try:
            self.backend.load(tmp.addr, raw + bytes(n - len(raw)))
            self.run([self.dma_descriptor(0, tmp.addr, buf.addr + offset, n, "write: DMA in")],
                     "write")
        finally:
            self.free(tmp)

    def read(self, buf: Buffer, dtype: torch.dtype, shape: int | Sequence[int] | None = None,
             offset: int = 0) -> torch.Tensor:
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
        return bytes_tensor(self._read_bytes(buf, offset, n), dtype, shape)

    def _read_bytes(self, buf, offset, n):
        if buf.space == "dram":
            return self.backend.dump(buf.addr + offset, n)
        lo = buf.addr + offset
        a = lo // SRAM_ALIGN * SRAM_ALIGN
        m = round_up(lo + n - a, SRAM_GRANULE)
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

    def descriptor(self, opcode: int, fields: dict[str, int], label: str = "") -> Descriptor:
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

    def gemv_descriptor(self, op: str | int, dtype: Dtype | str | int, batch: int, w_base: int, n_rows: int,
                        n_cols: int, x_addr: int, x_pitch: int, y_addr: int, y_pitch: int, idx_addr: int = 0,
                        n_idx: int = 0, accumulate: bool = False, label: str = "GEMV") -> Descriptor:
        op = GEMV_OPS[op] if isinstance(op, str) else int(op)
        return self.descriptor(Opcode.GEMV, {
            "op": int(op), "dtype": int(dtype) if isinstance(dtype, int) else int(Dtype.parse(dtype)),
            "batch_minus_one": batch - 1,
            "accumulate": int(bool(accumulate)), "w_base": w_base, "n_rows": n_rows,
            "n_cols": n_cols, "idx_addr": idx_addr, "n_idx": n_idx, "x_addr": x_addr,
            "x_pitch": x_pitch, "y_addr": y_addr, "y_pitch": y_pitch}, label)

    def dma_descriptor(self, to_dram: bool | int, dram: int, sram: int, n_bytes: int,
                       label: str = "DMA") -> Descriptor:
        return self.descriptor(Opcode.DMA, {"to_dram": int(bool(to_dram)), "dram": dram,
                                            "sram": sram, "n_bytes": n_bytes}, label)

    def act_descriptor(self, opcode: int, op: int, in_fmt: int, out_fmt: int, n: int, src_a: int, dst: int,
                       src_b: int = 0, c: int = 0, k: int = ONE_F32, label: str = "") -> Descriptor:
        """ACT / SOFTMAX / ELTWISE; ``c`` and ``k`` are binary32 bit patterns."""
        opcode = Opcode(opcode)
        return self.descriptor(opcode, {"op": int(op), "in_fmt": int(in_fmt),
                                        "out_fmt": int(out_fmt), "n": n, "src_a": src_a,
                                        "src_b": src_b, "dst": dst, "c": c, "k": k},
                               label or opcode.name)

    def link_descriptor(self, dest: int, remote: int, sram: int, n_bytes: int, *, read: bool = False,
                        label: str = "LINK_SEND") -> Descriptor:
        """LINK_SEND: ``n_bytes`` from this SRAM at ``sram`` to DIMM ``dest``'s SRAM at ``remote``
        (``read=True``: from there to here). Needs a core built with ``link=True``."""
        return self.descriptor(Opcode.LINK_SEND, {"read": int(bool(read)), "dest": dest,
                                                  "remote": remote, "sram": sram,
                                                  "n_bytes": n_bytes}, label)

    def atomic_add_descriptor(self, dest: int, remote: int, sram: int, n_bytes: int, *, int32: bool = False,
                              label: str = "ATOMIC_ADD") -> Descriptor:
        """ATOMIC_ADD: add ``n_bytes`` of FP32 (``int32=True``: INT32) lanes from this SRAM at
        ``sram`` into DIMM ``dest``'s SRAM at ``remote``."""
        return self.descriptor(Opcode.ATOMIC_ADD, {"int32": int(bool(int32)), "dest": dest,
                                                   "remote": remote, "sram": sram,
                                                   "n_bytes": n_bytes}, label)

    def relayout_descriptor(self, to_localized: bool, group_dimms: int, target: int, block_bytes: int,
                            n_blocks: int, src: int, dst: int, staging: int, *, group_base: int = 0,
                            label: str = "RELAYOUT") -> Descriptor:
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

    def set_link_id(self, dimm_id: int, n_dimms: int) -> None:
        """Program ``LINK_ID``: this DIMM's id in the chain and the chain's length (privileged:
        only while the core is idle; ``ValueError`` for ids that do not fit)."""
        if not (isinstance(n_dimms, int) and 1 <= n_dimms <= 16):
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        if not (isinstance(dimm_id, int) and 0 <= dimm_id < n_dimms):
            raise ValueError(f"dimm_id must be 0..{n_dimms - 1}, got {dimm_id!r}")
        self.backend.csr_write("LINK_ID", register("LINK_ID").pack(MY_ID=dimm_id, N_DIMMS=n_dimms))

    def fence(self, label: str = "FENCE") -> Descriptor:
        return self.descriptor(Opcode.FENCE, {}, label)

    def raw_descriptor(self, opcode: int, label: str = "") -> Descriptor:
        """A header-only descriptor of any opcode (FENCE, the DIMM-Link ones, undefined ones)."""
        return self.descriptor(opcode, {}, label)

    def submit(self, descriptors: Iterable[Descriptor]) -> list[int]:
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

    def wait(self, ids: Iterable[int | Descriptor] | None = None, check: bool = True) -> list[Completion]:
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
        if self.timeline_records is not None:
            self.timeline_records += [(d.label if d else "", c) for d, c in zip(descs, out)]
        if check:
            for d, c in zip(descs, out):
                if not c.ok:
                    raise NdpError(c, d)
        return out

    _recording = False

    def run(self, descriptors: Sequence[Descriptor], operation: str = "descriptors") -> list[Completion]:
        """Submit ``descriptors``, wait for them (raising :class:`NdpError` on a failure) and record
        a :class:`RunStats` in ``last_run``; returns the completions."""
        with self._stats(operation):
            self.submit(descriptors)
            return self.wait([d.id for d in descriptors])

    def _stats(self, operation):
        return StatsScope(self, operation)

    def enable(self, on: bool = True) -> None:
        """``CTRL.ENABLE``: while off, submitted descriptors wait in the queue (``wait`` refuses
        to run, it would never finish); ``run_for`` clocks the core meanwhile."""
        self.backend.csr_write("CTRL", int(bool(on)))
        self._enabled = bool(on)

    def run_for(self, cycles: int) -> None:
        """Let the core run ``cycles`` NDP cycles (completions are kept for ``wait``)."""
        for c in self.backend.run(max_cycles=cycles):
            self._completed[c.id] = c

    def host_reads(self, buffer: Buffer | WeightBuffer, spacing_cycles: int) -> HostReads:
        """A context manager during which ``wait`` issues a 64 B host read of ``buffer`` (a DRAM
        :class:`Buffer` / :class:`WeightBuffer`) every ``spacing_cycles`` NDP cycles while
        descriptors run (see :class:`HostReads`). Arguments are checked here: ``ValueError``,
        nothing changed."""
        return HostReads(self, buffer, spacing_cycles)

    def write_timeline(self, path) -> Path:
        """Write the descriptors waited for so far as a Chrome-trace/Perfetto JSON timeline: one
        track per engine, each descriptor from its start to its end cycle
        (``sw/driver/timeline.py``). Needs ``Dimm(..., timeline=True)``."""
        if self.timeline_records is None:
            raise ValueError("this Dimm keeps no timeline: make it with Dimm(..., timeline=True)")
        return descriptor_timeline({f"DIMM ({self.name} backend)": self.timeline_records},
                                   self.name).write(path)

    def status(self) -> CoreStatus:
        return CoreStatus.decode(self.backend.csr_read("STATUS"))

    def counters(self) -> dict[str, int]:
        return self.backend.counters()
