"""Dense rows: a dense FP16 GEMV of ``rows`` x ``hidden`` for a batch of tokens (Hermes' QKV rows).

The rows of the QKV projections a placement puts on a DIMM are computed every token: one
dense GEMV (DOT layout, weights streamed once per batch) whose time is about linear in the
rows (:func:`ndp_dense_cost`: ``cycles = fixed + slope x rows``).
"""

from __future__ import annotations

import dataclasses

import torch

from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.base import Invocation, LinearCost, check_samples, group_slices
from ndpdimm.sw.kernels.base import Shape as _Base

__all__ = ["Shape", "GROUP_ROWS", "ndp_dense_cost"]

#: Rows per group of a sub-sampled replay (``Shape.groups``)
GROUP_ROWS = 64


@dataclasses.dataclass(frozen=True)
class Shape(_Base):
    """``rows`` x ``hidden`` FP16 weights, ``batch`` tokens."""
    kind = "qkv_dense"
    rows: int
    hidden: int
    batch: int

    def groups(self, max_batch: int) -> int:
        """Groups of :data:`GROUP_ROWS` consecutive rows."""
        return -(-self.rows // GROUP_ROWS)

    def prepare(self, dimm: Dimm, seed: int) -> Invocation:
        """The weights and tokens drawn from ``seed``; a subset of groups is a dense GEMV of those
        groups' rows (stored as a matrix of their own for the replay)."""
        gen = torch.Generator().manual_seed(seed)
        w = (torch.randn(self.rows, self.hidden, generator=gen) * 0.05).half()
        x = torch.randn(self.batch, self.hidden, generator=gen).half()

        def run(groups, fetch):
            sub = w if groups is None else w[group_slices(self.rows, GROUP_ROWS, groups)]
            wb = dimm.store_weights(sub)
            try:
                return [dimm.gemv(wb, x, fetch=fetch)]
            finally:
                dimm.free(wb.buffer)
        return Invocation(self.groups(dimm.config.max_batch), run, lambda: None)


def ndp_dense_cost(hidden: int, dimm: Dimm, samples=(64, 256, 1024), seed: int = 0,
                   batch: int = 1) -> LinearCost:
    """Cycles of a dense FP16 GEMV of ``n`` rows x ``hidden`` for ``batch`` tokens."""
    samples = check_samples(samples, batch, "row counts")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, hidden, generator=gen).half()
    points = []
    for n in samples:
        w = dimm.store_weights((torch.randn(n, hidden, generator=gen) * 0.05).half())
        try:
            with dimm.measure("qkv_dense") as m:
                dimm.gemv(w, x, fetch=False)
            points.append((n, m.cycles))
        finally:
            dimm.free(w.buffer)
    return LinearCost.fitted(f"dense GEMV rows x {hidden}, batch {batch}", points, dimm.name)
