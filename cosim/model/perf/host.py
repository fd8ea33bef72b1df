"""Host contention: 64 B host pass-through accesses while a descriptor streams DRAM, under the ``POLICY`` arbitration (``hw/memory/controller.py``).

On an idle core a host read (write) takes ``host_read`` (``host_write``) cycles. While a
GEMV or a DMA streams DRAM it takes ``host_busy_<policy>`` (``host_busy_dma_<policy>``), the
mean (median) measured in the calibration runs. A host access that closes a row the GEMV's
stream uses costs it a re-open only where the stream is latency-bound: it delays the GEMV by
``host_slow_<policy> x stall x min(1, spacing / host_slow_span)`` cycles, ``stall`` the
fraction of the GEMV's time its engine waits for weights and ``spacing`` the cycles since the
previous host access, and never by more than the share of that spacing it spent waiting, so
host traffic slows a descriptor but never stops it. DMAs (16 requests outstanding) were
measured unaffected.
"""

from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.hw.memory.controller import POLICIES

__all__ = ["POLICY_NAMES", "host_contention", "host_access_cycles"]

#: ``POLICY`` register values by code (``hw/memory/controller.POLICIES``; the reserved code 3
#: is neither host_first nor ndp_first there, so it behaves as fair).
POLICY_NAMES = POLICIES + ("fair",)


def host_contention(p: PerfParams, policy: int, dma: bool, stall: float,
                    spacing: float) -> tuple[int, float]:
    """(latency of one host access, cycles it adds to the descriptor) while a descriptor
    streams DRAM (a DMA if ``dma``; ``stall`` its engine's share of time waiting for weights),
    under arbitration ``policy`` (the ``POLICY`` register), ``spacing`` cycles after the
    previous host access."""
    name = POLICY_NAMES[policy & 3]
    if dma:
        return max(1, round(getattr(p, f"host_busy_dma_{name}"))), 0
    span = max(p.host_slow_span, 1.0)
    slow = getattr(p, f"host_slow_{name}") * stall * min(1.0, spacing / span)
    # the stream loses at most the part of the time since the previous access that it spent
    # waiting for DRAM: host traffic slows a descriptor but never stops it
    slow = min(slow, stall * spacing)
    return max(1, round(getattr(p, f"host_busy_{name}"))), max(0.0, slow)


def host_access_cycles(p: PerfParams, write: bool) -> int:
    """Latency of one 64 B host pass-through access on an idle core."""
    return max(1, round(p.host_write if write else p.host_read))
