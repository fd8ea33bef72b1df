"""Background host reads while the NDP computes: the pass-through traffic a DIMM serves.

``HostReads`` (opened with ``Dimm.host_reads(buffer, spacing_cycles)``) issues 64 B host reads
of ``buffer``, ``spacing_cycles`` NDP cycles apart, while the driver waits for descriptors
(the class docstring has the rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ndpdimm.hw.memory.port import BURST_BYTES
from ndpdimm.sw.driver.buffers import Buffer, WeightBuffer

if TYPE_CHECKING:
    from ndpdimm.sw.driver.dimm import Dimm

__all__ = ["HostReads"]


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

    def __init__(self, dimm: Dimm, buffer: Buffer | WeightBuffer, spacing_cycles: int) -> None:
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

    def __enter__(self) -> HostReads:
        d = self.dimm
        if d._host_reads is not None:
            raise RuntimeError("host reads are already active on this DIMM (one scope at a time)")
        self._next = d.backend.cycle + self.spacing
        d._host_reads = self
        return self

    def __exit__(self, *exc: object) -> None:
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
