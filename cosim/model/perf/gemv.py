"""GEMV timing: a descriptor's output groups, its compute and DRAM-bound paths per phase, and the refreshes inside it.

The engine (``hw/gemv/engine.py``) runs ``groups = ceil(n_out / outs_per_group)`` output
groups of ``steps x batch`` slots, ``P = slot_cycles(dtype, radix)`` cycles each
(``hw/formats.py``); after each group it drains ``batch x ceil(outs/8)`` result beats (two
cycles a beat with ``accumulate``) plus ``max(D, L + 3) - P`` cycles of pipeline turn-around
(derived from the engine's RTL; 0 for FP16, 3 for BF16 and INT8). The compute path is the
access replay (``cosim/model/perf/access.py``) with the row openings of
``cosim/model/perf/rows.py``. At many units the DRAM bounds the stream instead: every burst
at the sustained bandwidth (a row gather's stretched by its spread,
``cosim/model/perf/gather.py``) plus a penalty per row-opening access and per bank conflict.
The answer is the larger of the two paths - per phase: the full groups, then a short last
group - plus fixed start/end costs, plus the refreshes that fall inside (``PROMPT``: each
stalls the stream for about ``tRFC`` less what the ring still holds; ``HOLD``, a DRAM-bound
stream or one whose requests come too densely, postpones up to 8 of them:
``cosim/model/perf/refresh.py``). A row gather first pre-scans its index list, one SRAM word
a cycle.
"""

import collections
from dataclasses import dataclass

from ndpdimm.cosim.model.perf.access import WINDOW, group_accesses, replay
from ndpdimm.cosim.model.perf.cost import Cost, DramUse, Regime
from ndpdimm.cosim.model.perf.gather import gather_spread
from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.refresh import with_refresh
from ndpdimm.cosim.model.perf.rows import RowOpenings, RowReplay
from ndpdimm.cosim.model.perf.structure import BURST_BYTES, INDEX_ENTRIES_PER_WORD, CoreStructure
from ndpdimm.hw.descriptors import GemvOp
from ndpdimm.hw.formats import Dtype

__all__ = ["GemvShape", "gemv_shape", "GemvTiming", "DRAM_BOUND", "DENSE_REQUESTS_BP"]

#: stream utilisation above which the rank queues never drain (refresh postponed up to
#: max_postponed_refs)
DRAM_BOUND = 0.9
#: batch x slot cycles up to which a GEMV's weight requests come too densely for a rank to idle
#: the 64 cycles it refreshes after, so it holds its refreshes too (batch-1 FP16 / BF16). From
#: the RTL's refresh counters on the calibration points that span two or more refresh
#: boundaries: such GEMVs issued fewer REF rounds than boundaries in 3 of 3 at 256 units, 29 of
#: 29 at 16 and 30 of 34 at 8; with batch x slot cycles of 22 or more they paid every one inside
#: in 6 of 7, 28 of 28 and 13 of 13 (INT8 at batch 1, 16, is mixed).
DENSE_REQUESTS_BP = 11


@dataclass(frozen=True)
class GemvShape:
    """What a GEMV descriptor means to the engine and the streamer."""
    axpy: bool
    gather: bool
    dtype: Dtype
    batch: int
    n_out: int
    steps: int            # weight words per unit per group (DOT: ceil(K/lanes); AXPY: n_idx)
    per_group: int        # outputs per group
    groups: int
    last_outs: int        # outputs in the last group
    bpr: int              # bursts per stored neuron
    bursts: int           # weight bursts read (DRAM_BURSTS_READ)
    result_beats: int     # result beats drained, all groups


def gemv_shape(fields: dict, n_units: int) -> GemvShape:
    """Derived quantities of a (valid) GEMV descriptor, as the command processor derives them."""
    dtype = Dtype(fields["dtype"])
    lanes = dtype.info.lanes
    e = dtype.info.elem_bits // 8
    op = fields["op"]
    axpy, gather = op == GemvOp.COL_GATHER, op != GemvOp.DENSE
    n_rows, n_cols, n_idx = fields["n_rows"], fields["n_cols"], fields["n_idx"]
    batch = fields["batch_minus_one"] + 1
    bpr = -(-n_cols * e // BURST_BYTES)
    if axpy:
        n_out, steps, per_group = n_cols, n_idx, n_units * lanes
    else:
        n_out = n_idx if gather else n_rows
        steps, per_group = -(-n_cols // lanes), n_units
    groups = -(-n_out // per_group)
    last = n_out - (groups - 1) * per_group if groups else 0
    if steps == 0 or n_out == 0:
        bursts = 0
    else:
        bursts = n_idx * bpr if axpy else n_out * bpr
    beats_full = -(-per_group // 8)
    beats = batch * ((groups - 1) * beats_full + -(-last // 8)) if groups else 0
    return GemvShape(axpy, gather, dtype, batch, n_out, steps, per_group, groups, last, bpr,
                     bursts, beats)


def prescan_cycles(n_idx: int) -> int:
    """Cycles of the streamer's pre-scan of an index list (one SRAM word a cycle)."""
    return -(-n_idx // INDEX_ENTRIES_PER_WORD)


@dataclass(frozen=True)
class _Phase:
    """One phase of a GEMV (its full groups, or a short last group): its compute path, its
    weight bursts weighted by their spread, its row-opening accesses and its conflicts."""
    compute: float
    weighted_bursts: float
    opening: float
    conflicts: float


class GemvTiming:
    """The GEMVs of one core (see the module docstring); the row openings replayed are
    cached per shape and index list."""

    def __init__(self, structure: CoreStructure):
        self.structure = structure
        self.rows = RowReplay(structure, WINDOW)

    def row_openings(self, g: GemvShape, fields) -> RowOpenings:
        """The row openings of a DOT GEMV of shape ``g`` (``RowReplay.dot``)."""
        return self.rows.dot(g, fields)

    def gather_spread(self, fields, g: GemvShape) -> tuple[float, float]:
        """A row gather's spread in its full groups and in its last group (:func:`gather_spread`)."""
        return gather_spread(self.structure, fields, g)

    def cost(self, p: PerfParams, fields, start, owed=0) -> Cost:
        """One GEMV dispatched at ``start`` (None: the expected refresh cost) while the ranks
        owe ``owed`` refreshes."""
        s = self.structure
        c = s.config
        g = gemv_shape(fields, c.n_units)
        B, S = g.batch, g.steps
        slot = s.slots[g.dtype]
        D, L, P = slot.digits, slot.lanes, slot.slot
        BP = B * P
        wb = 2 if fields.get("accumulate") else 1               # writer cycles per result beat
        prescan = prescan_cycles(fields["n_idx"]) if g.gather else 0
        if g.n_out == 0:
            return Cost(p.complete + p.block_reject + prescan, DramUse(owed=owed), shape=g)
        turn = max(D, L + 3) - P
        beats_full = B * -(-g.per_group // 8)
        drain = turn + p.group_fixed + wb * beats_full
        # the last group drains only its own outputs
        short = wb * (beats_full * g.groups - g.result_beats)
        ring, X_hit = s.ring_chunks, p.mem_latency
        pure = g.groups * S * BP                                 # the engine's slots alone
        spread, spread_last = gather_spread(s, fields, g)
        misses = 0.0
        if S and g.bursts:
            a = group_accesses(s, g, fields)
            n, beats, bursts, ring = a.n, a.beats, a.bursts, a.ring
            stride = (fields["n_rows"] / max(g.steps, 1) if g.axpy else fields["n_rows"]) * \
                (g.bpr if g.axpy else 1)
            extra, aligned = p.gather_latency if g.gather else 0.0, stride >= s.span_bursts
            u = min(c.n_units, g.n_out)
            if g.axpy:
                opens = a.opens
                compute_path = replay(s, p, n, beats, bursts, opens, ring, BP, drain,
                                      g.groups, extra, aligned).cycles
                opens_total = g.groups * sum(1 for o in opens if o) * (n / len(opens))
                conflicts = g.groups * sum(1 for o in opens if o == 2) * (n / len(opens))
                misses = max(opens_total, a.spans) * min(s.pairs, bursts[0])
                phases = [_Phase(compute_path, g.bursts * spread_last, opens_total, conflicts)]
            else:
                rows = self.rows.dot(g, fields)
                flags, opening, conflicts = rows.flags, rows.accesses, rows.conflicts
                full = g.groups if g.last_outs == u else g.groups - 1
                # the groups by their row openings (a periodic pattern: a few kinds of group)
                kinds = collections.Counter(flags[:full])
                compute_path = 0.0
                for k, (f, count) in enumerate(kinds.items()):
                    compute_path += replay(s, p, n, beats, bursts, list(f), ring, BP, drain,
                                           count, extra, aligned, continued=k > 0).cycles
                misses = sum(rows.spans) * min(s.pairs, bursts[0])
                if full == g.groups:
                    weighted = g.bursts * spread_last if g.groups == 1 else \
                        (g.bursts - u * g.bpr) * spread + u * g.bpr * spread_last
                    phases = [_Phase(compute_path, weighted, sum(opening), sum(conflicts))]
                else:
                    # a short last group is a phase of its own: it reads only its own rows'
                    # bursts (a DOT access is one burst per output), so it is often latency-bound
                    # after DRAM-bound full groups; its first requests go out while the group
                    # before it runs
                    last = [b * g.last_outs / u for b in bursts]
                    last_path = replay(s, p, n, beats, last, list(flags[-1]), ring, BP, drain,
                                       1, extra, aligned, continued=full > 0).cycles
                    phases = [_Phase(compute_path, full * u * g.bpr * spread, sum(opening[:full]),
                                     sum(conflicts[:full])),
                              _Phase(last_path, g.last_outs * g.bpr * spread_last, opening[-1],
                                     conflicts[-1])]
        else:
            phases = [_Phase(g.groups * (S * BP + drain), 0.0, 0.0, 0.0)]
        # DRAM path of each phase: every burst at the sustained rate, plus a penalty per
        # row-opening access and one per conflict. A row gather's uneven spread over ranks and
        # bank groups lengthens the DRAM path only: an access's latency is hidden by the
        # accesses in flight (calibration error 1.70 vs 1.92 % at 8 units, 1.81 vs 1.99 % at 16,
        # equal at 256 with it in the access latency). The last phase drains only its own
        # outputs (``short``).
        rate = s.burst_rate * p.stream_efficiency
        compute_path = sum(q.compute for q in phases) - short
        weighted = sum(q.weighted_bursts for q in phases)
        stall = max(0.0, 1.0 - pure / compute_path) if compute_path > 0 else 0.0
        path = 0.0
        for k, q in enumerate(phases):
            end = short if k == len(phases) - 1 else 0.0
            path += max(q.compute - end, q.weighted_bursts / rate + q.opening * p.open_penalty
                        + q.conflicts * p.conflict_penalty + drain - end)
        util = (weighted / rate) / compute_path if compute_path else 0.0
        base = p.gemv_fixed + prescan + path
        dram_bound = util >= DRAM_BOUND
        if dram_bound or BP <= DENSE_REQUESTS_BP:
            loss, regime = s.trfc + p.refresh_extra, Regime.HOLD
        else:
            cover = (ring * (1 if g.axpy else 4) - 1) * BP if g.bursts else float("inf")
            loss = max(0.0, s.trfc + p.refresh_extra + X_hit - cover)
            regime = Regime.PROMPT
        if not g.bursts:
            regime = None
        r = with_refresh(s, base, start, loss, regime or Regime.PROMPT, owed)
        misses += r.paid * s.pairs                    # a refresh closes the open rows
        return Cost(r.cycles, DramUse(misses, r.paid, r.owed, regime), shape=g, stall=stall)
