"""Decode attention of one sequence and one K/V head over its cached tokens (Hermes, RAPID).

The ``group = heads / kv_heads`` query heads sharing a K/V head run as one batch: scores
``K q`` (a GEMV batch over the shared K, [context, head_dim] DOT rows), ``scale`` by
``head_dim ** -0.5``, a softmax per query (FP16 out), then ``V^T p`` (:func:`issue`).

Cycle behaviour: two GEMVs streaming K and V (each about linear in the context) and two
activation-unit passes over ``group x context`` elements; :func:`ndp_attention_cost` fits
``cycles = fixed + slope x context`` at a few context lengths.
"""

from __future__ import annotations

import dataclasses

import torch

from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.base import Invocation, LinearCost, check_samples
from ndpdimm.sw.kernels.base import Shape as _Base

__all__ = ["Shape", "issue", "ndp_attention_cost"]


@dataclasses.dataclass(frozen=True)
class Shape(_Base):
    """``context`` cached tokens of ``head_dim``, ``group`` query heads per K/V head."""
    kind = "attention"
    context: int
    head_dim: int
    group: int

    def prepare(self, dimm: Dimm, seed: int) -> Invocation:
        """One group: the whole (sequence, K/V head)."""
        gen = torch.Generator().manual_seed(seed)
        n, d = self.context, self.head_dim
        q = torch.randn(self.group, d, generator=gen).half()
        k = dimm.store_weights(torch.randn(n, d, generator=gen).half())
        vt = dimm.store_weights(torch.randn(d, n, generator=gen).half())

        def release():
            dimm.free(k.buffer)
            dimm.free(vt.buffer)
        return Invocation(1, lambda groups, fetch: issue(dimm, k, vt, q, d ** -0.5, fetch=fetch),
                          release)


def issue(dimm: Dimm, k, vt, q, scale: float, fetch: bool) -> list:
    """One (sequence, K/V head): scores ``K q`` for the group's query heads, scale, softmax per
    query, ``V^T p``; the intermediate results and the output. On a timing-only DIMM
    (``dimm.functional`` False) zeros stand in for the intermediate values (the activation
    unit's time does not depend on them) and the output is not fetched."""
    group, n = q.shape[0], k.shape[0]
    data = dimm.functional
    s = dimm.gemv(k, q, fetch=data)                        # scores [group, n]
    s = torch.zeros(group, n) if s is None else s
    ss = dimm.activation("scale", s, k=scale, fetch=data)
    ss = torch.zeros(group, n) if ss is None else ss
    p = dimm.softmax(ss, out_dtype=torch.float16, fetch=data)
    p = torch.zeros(group, n, dtype=torch.float16) if p is None else p
    return [s, ss, p, dimm.gemv(vt, p, fetch=fetch)]       # V^T p


def ndp_attention_cost(head_dim: int, group: int, dimm: Dimm, samples=(128, 512),
                       seed: int = 0) -> LinearCost:
    """Cycles of one sequence's decode attention over ``n`` cached tokens for one K/V head (its
    ``group`` query heads batched over the shared K and V)."""
    samples = check_samples(samples, 1, "context lengths")
    gen = torch.Generator().manual_seed(seed)
    d = head_dim
    q = torch.randn(group, d, generator=gen).half()
    points = []
    for n in samples:
        k = dimm.store_weights((torch.randn(n, d, generator=gen)).half())
        vt = dimm.store_weights((torch.randn(d, n, generator=gen)).half())
        try:
            with dimm.measure("attention") as m:
                issue(dimm, k, vt, q, d ** -0.5, fetch=False)
            points.append((n, m.cycles))
        finally:
            dimm.free(k.buffer)
            dimm.free(vt.buffer)
    return LinearCost.fitted(f"attention, {group} query head(s) of {d} per K/V head, per cached token",
                             points, dimm.name)
