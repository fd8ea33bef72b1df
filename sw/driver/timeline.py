"""Descriptor timelines: when each descriptor of a DIMM ran, per engine, from its completions.

The command processor runs descriptors one at a time in queue order
(``hw/core/command_processor.py``), and each completion record carries ``cycles``, the
descriptor's exact dispatch-to-completion time (``CQ_CYCLES``), and ``done_cycle``, the
backend cycle at which the host collected it. On the model backend ``done_cycle`` is the
completion itself; on the RTL backend the host collects a completion a few cycles after the
core made it (the harness reads ``CQ_HEAD``, ``CQ_CYCLES``, ``CQ_DRAM_BYTES`` and writes
``CQ_POP`` once ``irq`` is high and its CSR port is free), so ``done_cycle`` is only an upper
bound of the completion cycle. :func:`descriptor_slices` places each descriptor at the
latest end consistent with both facts: ``end_i = min(done_cycle_i, end_{i+1} - cycles_{i+1})``
in completion order (a descriptor ended before the next one started), ``start_i = end_i -
cycles_i``. Durations are exact; positions are exact on the model backend and late by at most
the collection latency on the RTL (the slices never overlap, as the hardware cannot).

Engines (tracks): GEMV -> ``GEMV engine``; ACT, SOFTMAX, ELTWISE -> ``activation unit``;
DMA -> ``DMA``; LINK_SEND, ATOMIC_ADD, RELAYOUT -> ``DIMM-Link``; FENCE and unknown opcodes
-> ``command processor``. Times are NDP cycles, written at the core clock
(:data:`~ndpdimm.hw.formats.NDP_CLOCK_HZ`, 1 GHz: one cycle = 1 ns).
"""

from ndpdimm.cosim.backend import Completion
from ndpdimm.cosim.timeline import Timeline
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.formats import NDP_CLOCK_HZ

__all__ = ["ENGINES", "engine_of", "descriptor_slices", "lay_descriptors", "descriptor_timeline"]

#: the tracks of one DIMM's timeline, in display order
ENGINES = ("GEMV engine", "activation unit", "DMA", "DIMM-Link", "command processor")
_ENGINE = {Opcode.GEMV: "GEMV engine", Opcode.ACT: "activation unit",
           Opcode.SOFTMAX: "activation unit", Opcode.ELTWISE: "activation unit",
           Opcode.DMA: "DMA", Opcode.LINK_SEND: "DIMM-Link", Opcode.ATOMIC_ADD: "DIMM-Link",
           Opcode.RELAYOUT: "DIMM-Link"}


def engine_of(opcode: int) -> str:
    return _ENGINE.get(opcode, "command processor")


def descriptor_slices(records: list[tuple[str, Completion]]) -> list[tuple]:
    """``(engine, name, start_cycle, end_cycle, args)`` per ``(label, completion)`` record, in
    completion order (see the module docstring)."""
    recs = sorted(records, key=lambda r: r[1].done_cycle)
    out, bound = [], None
    for label, c in reversed(recs):
        end = c.done_cycle if bound is None else min(c.done_cycle, bound)
        start = end - c.cycles
        bound = start
        try:
            op = Opcode(c.opcode).name
        except ValueError:
            op = f"opcode {c.opcode}"
        out.append((engine_of(c.opcode), label or op, start, end,
                    {"id": c.id, "opcode": op, "status": c.status.name, "cycles": c.cycles,
                     "dram_bytes": c.dram_bytes, "collected_cycle": c.done_cycle}))
    return out[::-1]


def lay_descriptors(timeline: Timeline, process: str, records: list[tuple[str, Completion]]) -> None:
    """Lay the records' descriptors on ``timeline`` (made with ``unit_s = 1 / NDP_CLOCK_HZ``) as
    process ``process``, one track per engine."""
    for engine in ENGINES:
        timeline.track(process, engine)
    for engine, name, start, end, args in descriptor_slices(records):
        timeline.slice(process, engine, name, start, end - start, args)


def descriptor_timeline(dimms: dict, backend: str) -> Timeline:
    """A timeline of ``{process name: records}`` (one process per DIMM), in NDP cycles."""
    tl = Timeline(unit_s=1 / NDP_CLOCK_HZ, metadata={
        "source": f"descriptor completions, {backend} backend", "clock_hz": NDP_CLOCK_HZ,
        "placement": "exact durations (CQ_CYCLES); each ends at the latest cycle consistent with "
                     "its collection cycle and one-at-a-time execution (sw/driver/timeline.py)"})
    for process, records in dimms.items():
        lay_descriptors(tl, process, records)
    return tl
