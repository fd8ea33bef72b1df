"""GEMV gather spread: how unevenly a row gather's weight bursts load the ranks and bank groups.

Consecutive bursts alternate bank groups and ranks (``hw/memory/address_map.py``), so a dense
access spreads evenly over the ranks' buses; the selected rows of a gather fall unevenly, and
a rank then takes ``max(tBL x its bursts, tCCD_L x its busiest bank group's bursts)``. The
spread lengthens the GEMV's DRAM-bound path only (``cosim/model/perf/gemv.py``): an access's
latency is hidden by the accesses in flight.
"""

import numpy as np

from ndpdimm.cosim.model.perf.structure import BURST_BYTES, CoreStructure

__all__ = ["gather_spread"]


def gather_spread(s: CoreStructure, fields, g) -> tuple[float, float]:
    """How much longer a row gather's weight bursts keep the ranks' buses busy than the
    same number of consecutive bursts, in its full groups and in its last group: (1.0,
    1.0) without ``fields["indices"]``, the index list, which the model backend reads
    from the SRAM.

    An access reads chunk ``j`` of every selected row of a group, one burst each, at
    ``base + j*N + index`` (``cosim/gemv/weight_layout.py``). Consecutive bursts alternate
    bank groups and ranks (``AddressMap``), so a dense access spreads evenly; the selected
    rows of a gather fall unevenly, and a rank then takes ``max(tBL * its bursts,
    tCCD_L * its busiest bank group's bursts)``. The factor is the slowest rank's time
    over the even share, over a group's first 8 accesses together: the offsets ``j*N``
    rotate the low address bits (unless ``N`` is a multiple of 8), so consecutive
    accesses load other ranks, and the rank queues and the ring overlap them (measured:
    a 153-of-306-row gather runs 1.13x the evenly spread model, its load over the 4
    rotations 1.14x, its worst single access 1.25x)."""
    idx = fields.get("indices")
    if idx is None or not g.gather or g.axpy or not g.n_out:
        return 1.0, 1.0
    idx = np.asarray(idx, dtype=np.int64)[:g.n_out]
    t, org = s.timing, s.org
    ranks, groups_per_rank = org.ranks, org.bank_groups
    group = np.arange(len(idx)) // g.per_group
    n_groups = int(group[-1]) + 1
    amap = s.address_map
    base = fields["w_base"] // BURST_BYTES
    bus = max(t.tBL, t.tCCD_S)
    counts = np.zeros(n_groups * ranks * groups_per_rank)
    for j in range(min(g.bpr, 8)):
        addr = (base + j * fields["n_rows"] + idx) * BURST_BYTES
        cls = amap.field("rank", addr) * groups_per_rank + amap.field("bank_group", addr)
        counts += np.bincount(group * (ranks * groups_per_rank) + cls,
                              minlength=n_groups * ranks * groups_per_rank)
    counts = counts.reshape(n_groups, ranks, groups_per_rank)
    busy = np.maximum(bus * counts.sum(2), t.tCCD_L * counts.max(2)).max(1)
    even = bus * counts.sum((1, 2)) / ranks
    last = max(1.0, float(busy[-1] / even[-1]))
    if n_groups == 1:
        return last, last
    return max(1.0, float(busy[:-1].sum() / even[:-1].sum())), last
