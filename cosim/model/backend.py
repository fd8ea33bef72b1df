"""The model backend: one NDP-DIMM as a functional reference model plus a calibrated timing model.

Functional half: :class:`~ndpdimm.cosim.golden.core.CoreModel` holds the DIMM's
DRAM (a ``SparseStore``) and the SRAM image, predicts every descriptor's
completion code exactly as the RTL computes it (in queue order, against the
window in the ``WINDOW_BASE`` / ``WINDOW_LIMIT`` registers; reset: the empty
window ``[0, 0)``) and applies each valid descriptor with the bit-exact golden
model. Timing half: :class:`~ndpdimm.cosim.model.perf.PerfModel` (calibrated
against the RTL backend) gives each descriptor's ``CQ_CYCLES``, the gap before
the next dispatch, the host pass-through latency and the counter increments.

Time. Descriptors run one at a time in queue order while ``CTRL.ENABLE`` is
set: descriptor ``i`` is dispatched ``dispatch_gap()`` cycles after the later
of the previous completion and the time ``run`` was called, and completes
``descriptor_cycles`` later. Its status is decided and its effects applied at
dispatch (so bytes it writes are visible to ``dump`` as soon as it has been
dispatched, which only matters if ``run(max_cycles)`` stopped mid-descriptor).
A host pass-through access takes ``host_access_cycles`` and lets descriptors
run meanwhile (their completions are returned by the next ``run``); while a
descriptor that streams DRAM (GEMV, DMA) runs, it instead takes the
``POLICY``-dependent contended latency and delays that descriptor
(``PerfModel.host_contention``). Refreshes the ranks postponed during a
DRAM-busy descriptor are carried to the next one (``RefreshDebt``): the
ranks pay them back to back while idle, and a DRAM descriptor dispatched
meanwhile waits for the refresh under way.

``functional=False`` only times descriptors: DMAs are still applied (they are
byte copies, and index lists must be known to predict ``BAD_INDEX``), but GEMV
and activation results are not computed; the bytes they would have written -
and wherever a DMA copies them - are *unknown*. Reading unknown bytes
(``dump``, a host read, a gather's index list) raises :class:`UnknownDataError`
rather than returning stale data; host writes and ``load`` make bytes known
again.

Registers behave as ``hw/registers.py`` documents: writes to ``ro``
registers and privileged writes while the core is busy (a descriptor queued or
running) are ignored and counted in ``CSR_ERRORS``; ``DESC0..3`` /
``DESC_PUSH`` stage and push a descriptor (refused and counted when the
queue holds ``desc_queue``); ``CQ_HEAD`` reads 0 because ``run`` hands
completions to the caller directly, as the RTL harness does.
"""

from __future__ import annotations

import os
from collections import Counter, deque
from collections.abc import Iterable
from typing import TYPE_CHECKING

from ndpdimm.cosim.backend import COUNTER_REGISTERS, Backend, Completion, CoreConfig, check_word
from ndpdimm.cosim.golden.act_program import elem_bytes as act_elem_bytes
from ndpdimm.cosim.golden.core import ACT_OPCODES, CoreModel
from ndpdimm.cosim.model.perf import RefreshDebt, Timing
from ndpdimm.hw.activation.unit import REDUCTION_OPS
from ndpdimm.hw.core.ndp_core import core_caps
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.hw.memory.port import BURST_BYTES, Status
from ndpdimm.hw.registers import ID_VALUE, REGISTERS, register

if TYPE_CHECKING:
    from ndpdimm.cosim.link.model import LinkFabric
    from ndpdimm.cosim.model.perf import PerfModel

__all__ = ["ModelBackend", "UnknownDataError", "PERF_COUNTERS"]

#: Counters the performance model increments per descriptor.
PERF_COUNTERS = ("GEMV_BUSY_CYCLES", "ACT_BUSY_CYCLES", "DMA_BUSY_CYCLES", "DRAM_BURSTS_READ",
                 "DRAM_ROW_HITS", "DRAM_ROW_MISSES", "DRAM_REFRESHES")
_MASK64 = (1 << 64) - 1


class UnknownDataError(RuntimeError):
    """Bytes a descriptor wrote were asked for, but the model only timed it (``functional=False``)."""


class _Ranges:
    """A set of byte addresses as sorted disjoint ``[lo, hi)`` intervals."""

    def __init__(self) -> None:
        self.spans = []

    def remove(self, lo: int, hi: int) -> None:
        out = []
        for a, b in self.spans:
            if b <= lo or a >= hi:
                out.append((a, b))
                continue
            if a < lo:
                out.append((a, lo))
            if b > hi:
                out.append((hi, b))
        self.spans = out

    def add(self, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        self.remove(lo, hi)
        self.spans.append((lo, hi))
        self.spans.sort()
        merged = []
        for a, b in self.spans:
            if merged and merged[-1][1] >= a:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self.spans = merged

    def overlap(self, lo: int, hi: int) -> list[tuple[int, int]]:
        return [(max(a, lo), min(b, hi)) for a, b in self.spans if a < hi and b > lo]


class _Dispatched:
    """The descriptor at the head of the queue once dispatched (``timing``: the performance
    model's :class:`~ndpdimm.cosim.model.perf.Timing`; ``cycles`` grows by host contention)."""

    def __init__(self, fields, status, start, timing, dram_bytes):
        self.fields, self.status, self.start = fields, status, start
        self.timing, self.dram_bytes = timing, dram_bytes
        self.delay = 0.0                         # host contention so far (fractional cycles)

    @property
    def cycles(self) -> int:
        return self.timing.cycles + round(self.delay)

    @property
    def done(self) -> int:
        return self.start + self.cycles


class ModelBackend(Backend):
    """One NDP-DIMM as reference model + performance model (see the module docstring).

    ``perf``: a ``PerfModel`` to use; by default ``PerfModel.for_config(config, perf_path)``
    (the calibrated parameters). ``progress`` is accepted for symmetry with the RTL backend
    (there is nothing to build).
    """
    name = "model"

    def __init__(self, config: CoreConfig = CoreConfig(), *, functional: bool = True,
                 perf: PerfModel | None = None, perf_path: str | os.PathLike | None = None,
                 progress: bool = False, fabric: LinkFabric | None = None, dimm_id: int = 0) -> None:
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        self.config = config
        self.org, self.timing = config.dram()
        self.functional = bool(functional)
        if perf is None:
            from ndpdimm.cosim.model.perf import PerfModel
            perf = PerfModel.for_config(config, perf_path)
        self.perf = perf
        self.core = CoreModel.from_config(config, window=(0, 0))
        self._caps = core_caps(config.n_units, config.sram_size, self.org.ranks, config.max_batch,
                               config.act_lanes, config.link) & _MASK64
        # DIMM-Link: a core built with the link joins a chain (its own, of one DIMM, unless a
        # system passes a shared one); without it link descriptors complete UNSUPPORTED
        self.fabric, self.dimm_id = None, dimm_id
        if config.link:
            from ndpdimm.cosim.link.model import LinkFabric
            self.fabric = LinkFabric(1) if fabric is None else fabric
            self.fabric.attach(dimm_id, self)
        elif fabric is not None:
            raise ValueError("a LinkFabric needs a core built with the link (CoreConfig(link=True))")
        self._regs = {r.name: r.reset for r in REGISTERS if r.access == "rw"}
        self._staging = [0, 0, 0, 0]
        self._queue = deque()            # (word, cycle submitted) not yet completed; head may be dispatched
        self._head = None                # _Dispatched for the head of the queue
        self._done = []                  # completions not yet returned by run
        self._cycle = 0
        self._free_at = 0                # cycle the last descriptor completed
        self._enabled_at = 0             # cycle CTRL.ENABLE was last set
        # refreshes go on while the core idles (all ranks every tREFI): counted up to here
        self._refreshed_to = 0
        self._trefi = self.timing.tREFI * self.timing.tCK_ns * NDP_CLOCK_HZ / 1e9
        self._counts = Counter()
        self._debt = RefreshDebt()       # refreshes the ranks owe after a DRAM-busy descriptor
        self._last_host = -(1 << 62)     # cycle of the last host access (contention spacing)
        # bytes of the SRAM / DRAM whose contents the model does not know (written by a
        # descriptor it only timed, functional=False); the LinkFabric moves them between DIMMs
        self.unknown_sram, self.unknown_dram = _Ranges(), _Ranges()

    # --- the DIMM's DRAM -------------------------------------------------------------------
    def _range(self, addr, n):
        cap = self.org.capacity_bytes
        if not isinstance(addr, int) or isinstance(addr, bool) or not isinstance(n, int) or \
                addr < 0 or n < 0 or addr + n > cap:
            raise ValueError(f"DRAM range {addr!r} + {n!r} bytes is outside the DIMM (0..{cap:#x})")

    def _known(self, addr, n, what):
        bad = self.unknown_dram.overlap(addr, addr + n)
        if bad:
            lo, hi = bad[0]
            raise UnknownDataError(
                f"{what}: DRAM bytes [{lo:#x}, {hi:#x}) were written by a descriptor the model "
                f"only timed (ModelBackend(functional=False)); use functional=True for its data")

    def load(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        self._range(addr, len(data))
        self.core.dram.write(addr, data)
        self.unknown_dram.remove(addr, addr + len(data))

    def dump(self, addr: int, n: int) -> bytes:
        self._range(addr, n)
        self._known(addr, n, "dump")
        return self.core.dram.read(addr, n)

    def host_access(self, addr: int, write: bool, data: bytes = b"") -> bytes:
        cap = self.org.capacity_bytes
        if not isinstance(addr, int) or addr % BURST_BYTES or not 0 <= addr <= cap - BURST_BYTES:
            raise ValueError(f"host access address {addr!r} is not a 64 B aligned burst in the DIMM")
        data = bytes(data)
        if write and len(data) != BURST_BYTES:
            raise ValueError(f"a host write is {BURST_BYTES} bytes, got {len(data)}")
        if not write:
            self._known(addr, BURST_BYTES, "host read")
        self._advance(self._cycle)                  # dispatch what is due by now
        head = self._head
        spacing, self._last_host = self._cycle - self._last_host, self._cycle
        if head is not None and head.timing.uses_dram and head.start <= self._cycle < head.done:
            # the access contends with a descriptor streaming DRAM (POLICY arbitration)
            latency, slowdown = self.perf.host_contention(self._regs["POLICY"], head.timing,
                                                          spacing)
            head.delay += slowdown
        else:
            latency = self.perf.host_access_cycles(bool(write))
        self._advance(self._cycle + latency)
        if write:
            self.load(addr, data)
            return b""
        return self.core.dram.read(addr, BURST_BYTES)

    # --- registers -------------------------------------------------------------------------
    @property
    def _busy(self) -> bool:
        return bool(self._queue)

    def _status_word(self) -> int:
        queued = min(len(self._queue) - (self._head is not None), self.config.desc_queue)
        waiting = min(len(self._done), self.config.cq_depth)
        return register("STATUS").pack(BUSY=int(self._busy), QUEUED=queued, CQ_WAITING=waiting,
                                       QUEUE_FULL=int(queued >= self.config.desc_queue),
                                       CQ_FULL=int(waiting >= self.config.cq_depth))

    def csr_read(self, name: str) -> int:
        n = self._register(name).name
        if n in self._regs:
            return self._regs[n]
        if n == "STATUS":
            return self._status_word()
        if n == "CYCLES":
            return self._cycle & _MASK64
        if n == "ID":
            return ID_VALUE
        if n == "CAPS":
            return self._caps
        if n == "CSR_ERRORS" or n in PERF_COUNTERS:
            return self._counts[n] & _MASK64
        return 0                                  # wo / w1 registers and CQ_* read 0

    def counters(self) -> dict[str, int]:
        """The :data:`~ndpdimm.cosim.backend.COUNTER_REGISTERS` in one call (what ``csr_read``
        of each would return; the driver reads them around every run)."""
        c = self._counts
        return {n: (self._cycle if n == "CYCLES" else c[n]) & _MASK64 for n in COUNTER_REGISTERS}

    def csr_write(self, name: str, value: int) -> None:
        r = self._register(name)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= _MASK64:
            raise ValueError(f"register {name}: value must be a 64-bit unsigned int, got {value!r}")
        if r.access == "ro" or (r.privileged and self._busy):
            self._counts["CSR_ERRORS"] += 1
        elif r.name in self._regs:
            if r.name == "CTRL" and value & 1 and not self._regs["CTRL"] & 1:
                self._enabled_at = self._cycle
            self._regs[r.name] = value
            self.core.window = (self._regs["WINDOW_BASE"], self._regs["WINDOW_LIMIT"])
        elif r.name.startswith("DESC") and r.name != "DESC_PUSH":
            self._staging[int(r.name[4])] = value
        elif r.name == "DESC_PUSH":
            if len(self._queue) - (self._head is not None) >= self.config.desc_queue:
                self._counts["CSR_ERRORS"] += 1
            else:
                self._queue.append((sum(w << (64 * i) for i, w in enumerate(self._staging)), self._cycle))
        # CQ_POP: run() hands completions over directly, nothing waits in the queue

    @staticmethod
    def _register(name):
        try:
            return register(name)
        except KeyError as e:
            raise ValueError(e.args[0]) from None

    # --- descriptors -----------------------------------------------------------------------
    def submit(self, words: Iterable[int]) -> None:
        words = [check_word(w) for w in words]
        self._queue.extend((w, self._cycle) for w in words)

    @property
    def pending(self) -> int:
        return len(self._queue) + len(self._done)

    @property
    def cycle(self) -> int:
        return self._cycle

    def run(self, max_cycles: int | None = None) -> list[Completion]:
        if max_cycles is not None and (not isinstance(max_cycles, int) or max_cycles < 0):
            raise ValueError(f"max_cycles must be an int >= 0, got {max_cycles!r}")
        if max_cycles is None and self._queue and not self._regs["CTRL"] & 1:
            raise RuntimeError(f"{len(self._queue)} descriptors are queued but CTRL.ENABLE is 0: "
                               "the core holds them (set CTRL = 1, or run with max_cycles)")
        self._advance(None if max_cycles is None else self._cycle + max_cycles)
        out, self._done = self._done, []
        return out

    def _advance(self, until):
        """Run the queue until it is empty (``until`` None) or up to cycle ``until``."""
        while self._queue and self._regs["CTRL"] & 1:
            if self._head is None:
                word, submitted = self._queue[0]
                start = max(self._free_at, submitted, self._enabled_at) + self.perf.dispatch_gap()
                if until is not None and start > until:
                    break
                self._idle_until(start)
                self._head = self._dispatch(word, start)
            head = self._head
            if until is not None and head.done > until:
                break
            f = head.fields
            self._queue.popleft()
            self._head = None
            self._cycle = self._free_at = head.done
            for k, v in self.perf.counters_of(f, head.status, head.cycles, head.timing.cost,
                                              head.start).items():
                self._counts[k] += v
            if head.timing.uses_dram:
                self._debt = RefreshDebt(head.timing.debt.owed, head.done)
            self._refreshed_to = head.done
            self._done.append(Completion(id=f["id"], opcode=f["opcode"], status=head.status,
                                         cycles=head.cycles, dram_bytes=head.dram_bytes,
                                         done_cycle=head.done))
        if until is not None:
            self._cycle = max(self._cycle, until)
        self._idle_until(self._cycle if self._head is None else self._head.start)

    def _idle_until(self, t):
        """Count the refreshes of the idle time up to cycle ``t`` (a descriptor's own come from
        the performance model)."""
        if t > self._refreshed_to:
            n = int(t // self._trefi) - int(self._refreshed_to // self._trefi)
            self._counts["DRAM_REFRESHES"] += n * self.org.ranks
            self._refreshed_to = t

    def _dispatch(self, word, start) -> _Dispatched:
        core = self.core
        f = core.decode(word)
        if f["opcode"] == Opcode.GEMV and not self.functional:
            g = core.geometry(f)
            if g.gather and g.n_idx:
                a = f["idx_addr"]
                if self.unknown_sram.overlap(a, a + 4 * g.n_idx):
                    raise UnknownDataError(
                        f"descriptor {f['id']}: its index list at SRAM {a:#x} was written by a "
                        "descriptor the model only timed (functional=False): its status cannot be "
                        "predicted")
        if self.fabric is not None and f["opcode"] in (Opcode.LINK_SEND, Opcode.ATOMIC_ADD):
            status = self.fabric.status(self.dimm_id, self._regs["LINK_ID"], f)
            if status in (Status.OK, Status.REMOTE_RANGE):
                self.fabric.apply(self.dimm_id, f)
            timing = Timing(self.fabric.cycles(self.dimm_id, f, status), self._debt, False)
            return _Dispatched(f, status, start, timing, 0)
        if self.fabric is not None and f["opcode"] == Opcode.RELAYOUT:
            status = self.fabric.relayout_status(self.dimm_id, self._regs["LINK_ID"], f)
            self.fabric.relayout_apply(self.dimm_id, f, status)
            cycles = self.fabric.relayout_cycles(self.dimm_id, f, status, self._dma_cycles)
            return _Dispatched(f, status, start, Timing(cycles, self._debt, False), 0)
        status = core.expected_status(f)
        timed = f
        if status == Status.OK and f["opcode"] == Opcode.GEMV and f["op"] == GemvOp.ROW_GATHER:
            # a row gather's DRAM time depends on where its rows fall (PerfModel.gather_spread)
            timed = {**f, "indices": core.index_list(f["idx_addr"], f["n_idx"])}
        if status == Status.OK:
            self._apply(f)
        timing = self.perf.descriptor_timing(timed, status, start, self._debt)
        return _Dispatched(f, status, start, timing, core.completion_bytes(f, status))

    def _dma_cycles(self, dram, n_bytes) -> int:
        """A DRAM -> SRAM DMA's time (for the relayout unit, which borrows the DMA engine)."""
        f = {"opcode": Opcode.DMA, "id": 0, "to_dram": 0, "dram": dram, "sram": 0, "n_bytes": n_bytes}
        return self.perf.descriptor_timing(f, Status.OK, None).cycles

    def _apply(self, f):
        core, op = self.core, f["opcode"]
        if op == Opcode.DMA:
            d, s, n = f["dram"], f["sram"], f["n_bytes"]
            src, dst, delta = (self.unknown_sram, self.unknown_dram, d - s) if f["to_dram"] else \
                (self.unknown_dram, self.unknown_sram, s - d)
            lo = s if f["to_dram"] else d
            carried = src.overlap(lo, lo + n)
            dst.remove(lo + delta, lo + delta + n)
            for a, b in carried:
                dst.add(a + delta, b + delta)
            core.apply(f)
        elif self.functional:
            core.apply(f)
        elif op == Opcode.GEMV:
            for a, b in core.gemv_spans(f)[1]:
                self.unknown_sram.add(a, b)
        elif op in ACT_OPCODES and f["n"]:
            reduction = op == Opcode.ACT and f["op"] in [int(o) for o in REDUCTION_OPS]
            out = act_elem_bytes(f["out_fmt"]) * (1 if reduction else f["n"])
            self.unknown_sram.add(f["dst"], f["dst"] + out)
