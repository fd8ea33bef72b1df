"""DMA timing: one DMA descriptor between DRAM and SRAM (``hw/memory/dma.py``).

The engine keeps ``DMA_OUTSTANDING`` bursts in flight, so it moves a burst every ``max(SRAM
words per burst, round trip / outstanding)`` cycles (one SRAM word a cycle), plus fixed
costs (dispatch, checks, the first access's latency, status; more for a write, which waits
for its acknowledgements) and a penalty per 64 KiB span it opens. A DMA keeps its ranks'
queues busy: a refresh that falls due inside it waits for its end (up to
``max_postponed_refs``; the ``HOLD`` regime of ``cosim/model/perf/refresh.py``) and costs the
next descriptor's idle gap, not the transfer (RTL: a 96 KiB DMA takes 3,120 cycles with a
refresh falling due 500 or 1,500 cycles in, 3,121 with none).
"""

from ndpdimm.cosim.model.perf.cost import Cost, DramUse, Regime
from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.refresh import with_refresh
from ndpdimm.cosim.model.perf.structure import BURST_BYTES, DMA_OUTSTANDING, CoreStructure

__all__ = ["dma_cost"]


def dma_cost(s: CoreStructure, p: PerfParams, fields, start, owed=0) -> Cost:
    """One DMA dispatched at ``start`` (None: the expected refresh cost) while the ranks owe
    ``owed`` refreshes."""
    n = fields["n_bytes"] // BURST_BYTES
    if n == 0:
        return Cost(p.complete + p.block_reject, DramUse(owed=owed))
    off = (fields["dram"] // BURST_BYTES) % s.span_bursts
    blocks = -(-(off + n) // s.span_bursts)
    misses = blocks * min(s.pairs, n)
    per = max(s.words_per_burst, p.dma_round_trip / DMA_OUTSTANDING)
    fixed = p.dma_write_fixed if fields.get("to_dram") else p.dma_fixed
    base = fixed + n * per + blocks * p.dma_open_penalty
    r = with_refresh(s, base, start, s.trfc + p.refresh_extra, Regime.HOLD, owed)
    misses += r.paid * s.pairs                    # a refresh closes the open rows
    return Cost(r.cycles, DramUse(misses, r.paid, r.owed, Regime.HOLD))
