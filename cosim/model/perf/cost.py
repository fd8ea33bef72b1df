"""The named quantities the parts of the performance model hand to the model: what one descriptor costs.

A part (``gemv``, ``dma``, ``activation``) answers a descriptor with a :class:`Cost`: its
cycles without the wait for a refresh already under way, and, for a descriptor that streams
DRAM, a :class:`DramUse` (the rows it opens, the refreshes inside it and how the ranks treat
them); a GEMV adds its :class:`~ndpdimm.cosim.model.perf.gemv.GemvShape` and the fraction of
its time the engine waits for weights. The model turns them into a ``Timing`` and the
counters; nothing here computes cycles.
"""

import enum
from dataclasses import dataclass

__all__ = ["Regime", "DramUse", "Cost"]


class Regime(enum.Enum):
    """How the ranks treat a refresh that falls due inside a descriptor (``RankScheduler``: a
    REF goes out when the rank's queue is empty or ``max_postponed_refs`` are owed)."""
    #: the queues empty often: every refresh is paid when due (the owed ones at once)
    PROMPT = "prompt"
    #: the queues never empty (DMA, DRAM-bound GEMV, batch-1 FP16 / BF16 GEMV): past
    #: ``max_postponed_refs`` one refresh per interval is paid, the rest stay owed
    HOLD = "hold"


@dataclass(frozen=True)
class DramUse:
    """The DRAM side of a GEMV or a DMA: ``misses``, the rows it opens (``DRAM_ROW_MISSES``
    before the clamp to its bursts, the rows a refresh closes included); ``refreshes``, the
    refresh boundaries paid inside it; ``owed``, the refreshes owed at its end; ``regime``, how
    the ranks treated them (``None``: no weight traffic, a GEMV without outputs)."""
    misses: float = 0.0
    refreshes: float = 0.0
    owed: int = 0
    regime: Regime | None = None


@dataclass(frozen=True)
class Cost:
    """One descriptor's cycles (a float, before rounding) and its DRAM use (``None`` for a
    descriptor without DRAM traffic: ACT / SOFTMAX / ELTWISE, FENCE, rejections); a GEMV's
    ``shape`` and ``stall``, the fraction of its time its engine waits for weights (what host
    accesses can slow)."""
    cycles: float
    dram: DramUse | None = None
    shape: object = None          # GemvShape of a GEMV
    stall: float = 0.0

    @property
    def uses_dram(self) -> bool:
        """Whether it streams DRAM (then host accesses contend with it and it pays refreshes)."""
        return self.dram is not None and self.dram.regime is not None

    @property
    def refreshes(self) -> float | None:
        """Refresh boundaries inside it as its part counted them; ``None`` where the part does
        not (the counters then count the boundaries of its time)."""
        return None if self.dram is None else self.dram.refreshes
