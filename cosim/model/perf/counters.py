"""Performance counters: how one descriptor moves the core's counter registers (``hw/registers.py``).

A block's busy counter is the descriptor's CQ cycles less a measured offset per block
(``*_busy_offset``: dispatch and completion lie outside the block). The DRAM counters come
from the part that timed the descriptor: the weight bursts of a GEMV
(``GemvShape.bursts``) or the bursts of a DMA, of which the rows opened
(``DramUse.misses``, clamped to the bursts) are misses and the rest hits, and the refresh
boundaries inside it, times the ranks (all refresh together); a descriptor without DRAM
traffic counts the boundaries of its time.
"""

from ndpdimm.cosim.model.perf.activation import ACT_OPCODES
from ndpdimm.cosim.model.perf.cost import Cost
from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.refresh import refreshes_inside
from ndpdimm.cosim.model.perf.structure import BURST_BYTES, CoreStructure
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

__all__ = ["COUNTER_NAMES", "counter_increments"]

#: Counter registers the model predicts (increments per descriptor).
COUNTER_NAMES = ("GEMV_BUSY_CYCLES", "ACT_BUSY_CYCLES", "DMA_BUSY_CYCLES", "DRAM_BURSTS_READ",
                 "DRAM_ROW_HITS", "DRAM_ROW_MISSES", "DRAM_REFRESHES")


def counter_increments(s: CoreStructure, p: PerfParams, fields: dict, status: Status,
                       cycles: float, cost: Cost, start_cycle: int | None = None) -> dict:
    """Increments of :data:`COUNTER_NAMES` caused by one descriptor of ``cycles`` (its
    prediction, with any host-contention delay added) whose part answered ``cost``."""
    out = dict.fromkeys(COUNTER_NAMES, 0)
    op = fields.get("opcode")
    # refresh boundaries inside the descriptor, whether or not they cost it anything
    refreshes = cost.refreshes
    if refreshes is None:
        refreshes = refreshes_inside(s, start_cycle, cycles)
    out["DRAM_REFRESHES"] = round(refreshes * s.org.ranks)
    if status != Status.OK:
        if op == Opcode.DMA and status != Status.DRAM_RANGE:
            out["DMA_BUSY_CYCLES"] = max(0, round(cycles - p.dma_busy_offset))
        elif op in ACT_OPCODES:
            out["ACT_BUSY_CYCLES"] = max(0, round(cycles - p.act_busy_offset))
        return out
    if op == Opcode.GEMV:
        g = cost.shape
        if g.n_out:
            out["GEMV_BUSY_CYCLES"] = max(0, round(cycles - p.gemv_busy_offset))
        out["DRAM_BURSTS_READ"] = g.bursts
        misses = min(g.bursts, round(cost.dram.misses))
        out["DRAM_ROW_MISSES"], out["DRAM_ROW_HITS"] = misses, g.bursts - misses
    elif op == Opcode.DMA:
        out["DMA_BUSY_CYCLES"] = max(0, round(cycles - p.dma_busy_offset))
        n = fields["n_bytes"] // BURST_BYTES
        misses = min(n, round(cost.dram.misses))
        out["DRAM_ROW_MISSES"], out["DRAM_ROW_HITS"] = misses, n - misses
    elif op in ACT_OPCODES:
        out["ACT_BUSY_CYCLES"] = max(0, round(cycles - p.act_busy_offset))
    return out
