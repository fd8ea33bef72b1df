"""What a DIMM's work cost: one operation's :class:`RunStats`, a scope's :class:`Measurement`.

``Dimm.run`` and every driver operation record a :class:`RunStats` in ``dimm.last_run``
(:class:`StatsScope`: each descriptor's completion, the elapsed backend cycles from the first
submit to the last completion, the counter increments); ``Dimm.measure(label)`` times any
stretch of work, several operations included (:class:`MeasureScope`), without touching
``last_run``: what the kernels' cost lines and the sampled replays are measured with.
Reading the clock and the counters takes no NDP time on either backend.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ndpdimm.hw.descriptors import Opcode

__all__ = ["RunStats", "Measurement", "MeasureScope", "StatsScope"]


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

    def cycles_by_opcode(self) -> dict[str, int]:
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


@dataclass
class Measurement:
    """What a :meth:`Dimm.measure` scope cost: the backend clock at its start and end (NDP cycles)
    and the counter increments (:data:`~ndpdimm.cosim.backend.COUNTER_REGISTERS`). Filled in when
    the scope closes (``end`` is None while it is open)."""
    label: str
    backend: str
    start: int
    end: int | None = None
    counters: dict = field(default_factory=dict)

    @property
    def cycles(self) -> int:
        """Elapsed NDP cycles of the scope (backend clock, ``end - start``)."""
        if self.end is None:
            raise RuntimeError(f"measurement {self.label!r} is still open")
        return self.end - self.start


class MeasureScope:
    """The scope of :meth:`Dimm.measure`: backend clock and counters at entry and exit."""

    def __init__(self, dimm, label):
        self.dimm, self.label = dimm, label

    def __enter__(self) -> Measurement:
        b = self.dimm.backend
        self.c0 = b.counters()
        self.m = Measurement(self.label, b.name, b.cycle)
        return self.m

    def __exit__(self, *exc):
        b = self.dimm.backend
        self.m.end = b.cycle
        c1 = b.counters()
        self.m.counters = {k: c1[k] - self.c0.get(k, 0) for k in c1}


class StatsScope:
    """The scope of one operation (``Dimm.run``, the kernels): a :class:`RunStats` in the DIMM's
    ``last_run``, counted from the outermost scope's entry (nested operations add their
    descriptors to it)."""

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
