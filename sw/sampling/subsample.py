"""Which groups a sub-sampled replay runs: :func:`plan`.

A kernel invocation's work is ``G`` like groups (``Shape.groups``: 32 activated neurons of a
cold-neuron gather, 64 rows of a dense GEMV, 64 FFN neurons of an expert; an attention step is
one group). A sub-sampled replay runs ``m`` of them, chosen at
random without replacement, after ``w`` other groups issued first as a *warm-up* (not timed,
not read back: it leaves DRAM rows open, the refresh counters advanced and the controller's
queues drained as a running kernel would, instead of the reset state). ``m`` is the smallest
number of groups whose share of the charged cycles reaches ``target`` cycles:
``m = ceil(G * target / charged)``; an invocation that would run ``m + w >= G`` groups is
replayed whole (``Plan.whole``).

The choice is a pure function of the draw's data seed (``numpy.random.default_rng(seed)``), so
a replay is reproducible from the JSON. Cycle behaviour: a sub-sampled replay costs about
``(m + w) / G`` of the whole one on the RTL.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ndpdimm.sw.kernels import Shape

__all__ = ["Plan", "plan", "check_sub_request"]


@dataclasses.dataclass(frozen=True)
class Plan:
    """The groups of one replay: ``groups`` timed (None: the whole invocation), ``warmup`` issued
    first, of ``n_groups``."""
    n_groups: int
    groups: tuple[int, ...] | None
    warmup: tuple[int, ...]

    @property
    def whole(self) -> bool:
        return self.groups is None

    def as_dict(self) -> dict:
        return {"n_groups": self.n_groups, "groups": None if self.groups is None else list(self.groups),
                "warmup": list(self.warmup)}


def check_sub_request(target, warmup) -> None:
    """``ValueError`` naming a bad sub-sampling request (``target`` None: whole replays)."""
    if target is not None and (isinstance(target, bool) or not isinstance(target, (int, float))
                               or not target > 0 or not math.isfinite(target)):
        raise ValueError(f"the sub-sample target must be a number of cycles > 0 (or None), got {target!r}")
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warm-up groups must be an int >= 0, got {warmup!r}")


def plan(shape: Shape, charged: float, seed: int, max_batch: int, target: float | None,
         warmup: int = 1) -> Plan:
    """The groups a replay of ``shape`` (charged ``charged`` cycles) runs: see the module
    docstring. ``target`` None replays every invocation whole."""
    check_sub_request(target, warmup)
    g = shape.groups(max_batch)
    if target is None or not charged > 0:
        return Plan(g, None, ())
    m = max(1, math.ceil(g * target / charged))
    if m + warmup >= g:
        return Plan(g, None, ())
    pick = np.random.default_rng(seed).permutation(g)[:m + warmup]
    return Plan(g, tuple(sorted(int(i) for i in pick[warmup:])),
                tuple(sorted(int(i) for i in pick[:warmup])))
