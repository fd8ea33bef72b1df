"""Refresh in the performance model: the boundaries inside a descriptor, what they cost it, and the refresh debt the ranks carry between descriptors.

The ranks refresh every tREFI from reset, all together (the core's ``aligned`` mode), so
refresh depends on *when* an operation runs. Given the cycle at which a descriptor is
dispatched, :func:`refreshes_inside` counts the boundaries inside it; without it, the
expected number. :func:`with_refresh` lengthens an operation of ``base`` cycles by the
refreshes it pays, in one of two :class:`~ndpdimm.cosim.model.perf.cost.Regime`\\ s:
``PROMPT`` (every refresh paid when due, each costing about tRFC less what the ring still
holds) or ``HOLD`` (the rank queues never empty: up to ``max_postponed_refs`` are postponed
and owed at the end). A :class:`RefreshDebt` carries the owed refreshes to the next
descriptor: the idle ranks pay them back to back, ``refresh_idle`` cycles each
(:func:`refresh_wait`), and a refresh falling due while they are idle joins them
(:func:`idle_refresh`).
"""

import math
from dataclasses import dataclass

from ndpdimm.cosim.model.perf.cost import Regime
from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.structure import CoreStructure

__all__ = ["RefreshDebt", "refreshes_inside", "with_refresh", "refresh_wait", "idle_refresh",
           "RefreshPaid"]


@dataclass(frozen=True)
class RefreshDebt:
    """Refreshes the ranks owe after a descriptor that kept their queues busy (all ranks
    together, the core's ``aligned`` refresh mode), and the cycle from which they are free to
    pay them (the descriptor's end)."""
    owed: int = 0
    since: float = 0.0


@dataclass(frozen=True)
class RefreshPaid:
    """An operation with its refreshes: ``cycles`` (its duration), ``paid`` (refreshes paid
    inside it) and ``owed`` (refreshes owed at its end)."""
    cycles: float
    paid: float
    owed: int


def refreshes_inside(s: CoreStructure, start, duration) -> float:
    """Refresh boundaries (all ranks together) inside ``[start, start + duration)``; the
    expected number when ``start`` is None."""
    if duration <= 0:
        return 0.0
    if start is None:
        return duration / s.trefi
    return float(math.floor((start + duration) / s.trefi) - math.floor(start / s.trefi))


def with_refresh(s: CoreStructure, base, start, loss_per, regime: Regime, owed=0) -> RefreshPaid:
    """An operation of ``base`` cycles without refresh that starts owing ``owed``, with the
    refreshes it pays. How the ranks treat a due refresh depends on their queues
    (``RankScheduler``: REF when the queue is empty or ``max_postponed_refs`` are owed):

    * ``PROMPT``: the queues empty often: every refresh (the owed ones at once) is paid
      when due, each costing ``loss_per`` (every GEMV that is not DRAM-bound; see
      docs/perf_model.md for the latency-bound streams where the RTL postpones instead);
    * ``HOLD``: the queues never empty (DMA, DRAM-bound GEMV, batch-1 FP16 / BF16 GEMV:
      ``DENSE_REQUESTS_BP`` in ``cosim/model/perf/gemv.py``): past ``max_postponed_refs``
      one refresh per interval is paid, the rest stay owed.

    Without ``start`` the expected number of boundaries is used and nothing is owed."""
    cap = s.postponed
    t = base
    for _ in range(3):                            # fixed point: refreshes lengthen t
        n = refreshes_inside(s, start, t)
        total = owed + n
        if start is None:
            paid = max(0.0, n - cap) if regime is Regime.HOLD else n
        elif regime is Regime.PROMPT:
            paid = total
        else:
            paid = max(0.0, total - cap)
        t = base + paid * loss_per
    owed_out = 0 if start is None else int(total - paid)
    return RefreshPaid(t, paid, owed_out)


def refresh_wait(p: PerfParams, debt: RefreshDebt, start: float) -> tuple[float, int]:
    """(cycles a DRAM descriptor dispatched at ``start`` waits for the refresh in progress,
    refreshes still owed after it): from ``debt.since`` the idle ranks pay their debt back
    to back, ``refresh_idle`` cycles each; the descriptor's first request arrives
    ``refresh_lead`` cycles after dispatch and then only waits for the REF under way (with
    fewer than ``max_postponed_refs`` owed, a rank with queued requests serves them)."""
    if debt.owed <= 0:
        return 0.0, 0
    R = max(p.refresh_idle, 1.0)
    arrive = start + p.refresh_lead
    elapsed = max(0.0, arrive - debt.since)
    k = int(elapsed // R)
    if k >= debt.owed:
        return 0.0, 0
    return (k + 1) * R - elapsed, debt.owed - k - 1


def idle_refresh(s: CoreStructure, p: PerfParams, debt: RefreshDebt, start: float) -> RefreshDebt:
    """``debt`` plus the refresh that fell due while the ranks had no traffic (after
    ``debt.since``, by the time the descriptor's first request arrives): the ranks issued it
    at once, after any owed ones, and a descriptor arriving during it waits."""
    arrive = start + p.refresh_lead
    b = math.floor(arrive / s.trefi) * s.trefi
    if b <= 0 or b < debt.since:                 # the first refresh falls due at tREFI
        return debt
    if debt.owed <= 0:
        return RefreshDebt(1, b)
    return RefreshDebt(debt.owed + 1, debt.since)
