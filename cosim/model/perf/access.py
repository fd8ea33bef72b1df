"""GEMV access replay: the weight accesses of one output group and the streamer/engine recurrence that times them.

Weights arrive in accesses - DOT chunks of 4 words per unit, AXPY beats of one word per
unit (``hw/memory/weight_streamer.py``) - and the streamer's ring holds ``R`` of them
(``ring_beats / 4`` chunks or ``ring_beats`` beats): access ``i`` is requested when access
``i - R`` has been consumed and arrives ``X_i`` later (issue at up to ``ISSUE_PER_CYCLE``
bursts a cycle, memory latency, and the extra latency of opening rows, of a bank conflict
and of a gather). The engine starts an access when the previous one is done and its data
are there, ``B x P`` cycles a beat (batch x slot cycles), and drains after each group.
:func:`replay` runs that recurrence over one or two groups of the pattern (at most
:data:`WINDOW` accesses each: the pattern is periodic) and extrapolates to all groups, so
no answer depends on the size of the operation. :func:`group_accesses` lists a group's
accesses (with an AXPY's row openings from ``cosim/model/perf/rows.py``).
"""

from dataclasses import dataclass

from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.rows import axpy_openings
from ndpdimm.cosim.model.perf.structure import BURST_BYTES, ISSUE_PER_CYCLE, CoreStructure

__all__ = ["WINDOW", "Accesses", "StreamPath", "group_accesses", "replay"]

#: weight accesses per group simulated before extrapolating
WINDOW = 32


@dataclass(frozen=True)
class Accesses:
    """One output group's weight accesses, in streamer order: ``n`` per group, then the
    ``beats``, ``bursts`` and row-opening flags (``opens``: 0 none, 1 opens rows, 2 a
    conflict) of the first ``min(n, WINDOW)`` of them, the ring's capacity in accesses
    (``ring``) and the 64 KiB spans the sweep touches (``spans``). ``opens`` and ``spans``
    are None for DOT (``RowReplay.dot`` replays every group's openings)."""
    n: int
    beats: list
    bursts: list
    opens: list | None
    ring: int
    spans: int | None


@dataclass(frozen=True)
class StreamPath:
    """The compute path of some groups: ``cycles`` to the end of the last drain and the
    steady-state cycles per group (``period``)."""
    cycles: float
    period: float


def group_accesses(s: CoreStructure, g, fields) -> Accesses:
    """The accesses of one output group of the GEMV of shape ``g`` (see :class:`Accesses`).
    An AXPY access opens rows when it enters another 64 KiB span than the access before it
    and that span's bank holds other spans of the same sweep (else its rows stay open from
    the previous group); see docs/perf_model.md."""
    c = s.config
    U, blk = c.n_units, s.span_bursts
    if not g.axpy:
        n = g.bpr
        w = min(n, WINDOW)
        beats = [4] * w
        if n <= WINDOW and g.steps % 4:
            beats[-1] = g.steps % 4
        u = min(U, g.n_out)
        return Accesses(n, beats, [u] * w, None, s.ring_chunks, None)
    base = fields["w_base"] // BURST_BYTES
    n = g.steps
    w = min(n, WINDOW)
    per = min(U // 4, g.bpr)
    spacing = fields["n_rows"] / max(n, 1)              # neurons between selected ones
    starts = [base + int(i * spacing) * g.bpr for i in range(w)]
    last = base + int((n - 1) * spacing) * g.bpr
    blocks = [b // blk for b in starts]
    opens, spans = axpy_openings(s, blocks, last // blk, n > WINDOW, 4 * WINDOW)
    return Accesses(n, [1] * w, [per] * w, opens, c.ring_beats, spans)


def replay(s: CoreStructure, p: PerfParams, n, beats, bursts, opens, ring, BP, drain, groups,
           extra_latency=0.0, aligned=False, continued=False) -> StreamPath:
    """Compute path of the GEMV: the streamer/engine recurrence over two groups of the
    access pattern (see the module docstring), extrapolated to ``groups`` groups of ``n``
    accesses. ``continued``: the groups follow others, so the first access's latency is
    hidden; ``aligned``: consecutive accesses are whole 64 KiB spans apart
    (``open_latency_aligned``)."""
    w = len(beats)
    issue_rate = min(ISSUE_PER_CYCLE, s.burst_rate * p.stream_efficiency)
    X = [bursts[i] / issue_rate + p.mem_latency + extra_latency
         + (0.0 if not opens[i] else
            p.open_latency_aligned if aligned and opens[i - 1] else p.open_latency)
         + (p.conflict_latency if opens[i] == 2 else 0.0)
         for i in range(w)]
    if max(X) <= ((ring - 1) * min(beats) + 1) * BP:
        # every access arrives before the engine needs it: no stall after the first one
        per_group = n * beats[0] * BP if n > w else sum(beats) * BP
        if n > w and beats[-1] != beats[0]:
            per_group = (n - 1) * beats[0] * BP + beats[-1] * BP
        return StreamPath((0.0 if continued else X[0]) + groups * (per_group + drain),
                          per_group + drain)
    done = []          # time the access's last beat is accepted (frees its ring room)
    t_end = 0.0        # end of the previous access's slots (+ drain at a group boundary)
    ends, tau = [], 0.0
    k = 0
    marks = {}
    for grp in range(min(groups, 2)):
        for i in range(w):
            req = done[k - ring] if k >= ring else sum(bursts[:i + 1]) / issue_rate - bursts[i] / issue_rate
            start = max(t_end, req + X[i])
            if i == w // 2:
                marks[grp] = start
            done.append(start + (beats[i] - 1) * BP)
            t_end = start + beats[i] * BP
            k += 1
        if w > 2:                  # steady time per access: the last group simulated
            tau = (t_end - marks[grp]) / (w - w // 2)
        t_end += drain
        ends.append(t_end)
    extra = (n - w) * tau if n > w else 0.0
    if groups == 1:
        total = ends[0] + extra
    else:
        total = ends[0] + extra + (groups - 1) * (ends[1] - ends[0] + extra)
    period = (ends[1] - ends[0] if len(ends) > 1 else ends[0]) + extra
    return StreamPath(total - (X[0] if continued else 0.0), period)
