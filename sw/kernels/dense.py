"""Dense rows: a dense FP16 GEMV of ``rows`` x ``hidden`` for a batch of tokens (Hermes' QKV rows).

The rows of the QKV projections a placement puts on a DIMM are computed every token: one
dense GEMV (DOT layout, weights streamed once per batch) whose time is about linear in the
rows (:func:`ndp_dense_cost`: ``cycles = fixed + slope x rows``).
"""

from __future__ import annotations

import dataclasses

import torch

from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.base import LinearCost, check_samples
from ndpdimm.sw.kernels.base import Shape as _Base

__all__ = ["Shape", "ndp_dense_cost"]


@dataclasses.dataclass(frozen=True)
class Shape(_Base):
    """``rows`` x ``hidden`` FP16 weights, ``batch`` tokens."""
    kind = "qkv_dense"
    rows: int
    hidden: int
    batch: int

    def run(self, dimm: Dimm, seed: int) -> list[torch.Tensor]:
        gen = torch.Generator().manual_seed(seed)
        w = dimm.store_weights((torch.randn(self.rows, self.hidden, generator=gen) * 0.05).half())
        try:
            return [dimm.gemv(w, torch.randn(self.batch, self.hidden, generator=gen).half())]
        finally:
            dimm.free(w.buffer)


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
