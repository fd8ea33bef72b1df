"""What every NDP kernel module shares: the shape base, the fitted cost line, argument checks.

A kernel's :class:`Shape` (a frozen dataclass of ints and strings, one subclass per kernel
module, its ``kind`` a class attribute) is all a scenario records of one invocation: the
kernel log aggregates equal shapes (``sw/sampling/record.py``) and a replay rebuilds the
invocation from the shape and a data seed (:meth:`Shape.run`). A shape's fields are checked
when it is made: a bad one raises ``ValueError`` naming the field.

An invocation's work is a sequence of :meth:`Shape.groups` like groups (the neuron groups of
a gather, the row groups of a dense GEMV, the FFN neuron groups of an expert; an attention step
is one group). :meth:`Shape.prepare` stores the invocation's operands on a DIMM and returns an
:class:`Invocation`, whose ``issue(groups)`` runs the kernel on all of them or on a subset: what
a sub-sampled replay runs (``sw/sampling/subsample.py``). The operands are drawn from the seed
in the same order whatever is issued, so a subset is a subset of the full invocation's work.

:class:`LinearCost` is the cost line a scenario charges for a kernel: ``cycles = fixed +
slope x n`` fitted by least squares (:func:`fit_line`) to cycles measured through the driver
(:meth:`~ndpdimm.sw.driver.dimm.Dimm.measure`) at a few sizes ``n``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm

__all__ = ["Shape", "Invocation", "check_groups", "OfShape", "LinearCost", "fit_line", "check_samples", "check_int", "random_weights",
           "group_slices"]


@dataclasses.dataclass(frozen=True)
class Shape:
    """One kernel invocation's shape (see the module docstring). Subclasses set ``kind`` and
    implement :meth:`run`; every ``int`` field must be an int >= 1 and every ``bool`` field a
    bool (checked here, ``ValueError`` naming the field), other checks are the subclass's."""
    kind: ClassVar[str] = ""

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.type in ("int", int):
                check_int(f.name, v)
            elif f.type in ("bool", bool) and not isinstance(v, bool):
                raise ValueError(f"{f.name} must be True or False, got {v!r}")

    def params(self) -> dict:
        """The fields as a dict, in declaration order (what results and logs write)."""
        return dataclasses.asdict(self)

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.params().items())

    def groups(self, max_batch: int) -> int:
        """How many like groups the invocation's work is (1: it is not divided); ``max_batch`` the
        core's tokens per weight stream."""
        return 1

    def prepare(self, dimm: Dimm, seed: int) -> Invocation:
        """Store the invocation's operands, drawn from ``seed``, on ``dimm``."""
        raise NotImplementedError

    def run(self, dimm: Dimm, seed: int) -> list[torch.Tensor]:
        """Issue the kernel's descriptor stream on ``dimm`` on synthetic data drawn from ``seed``
        (weights stored, used and freed); every result the kernel wrote, read back."""
        inv = self.prepare(dimm, seed)
        try:
            return inv.issue()
        finally:
            inv.free()


def check_groups(groups, n: int) -> tuple[int, ...]:
    """``groups`` as a sorted tuple of distinct group numbers in ``0..n-1`` (at least one), or
    ``ValueError``."""
    try:
        g = tuple(groups)
    except TypeError:
        raise ValueError(f"groups must be a sequence of group numbers, got {groups!r}") from None
    if not g or any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) or not 0 <= i < n
                    for i in g) or len(set(g)) != len(g):
        raise ValueError(f"groups must be distinct ints in 0..{n - 1}, at least one, got {groups!r}")
    return tuple(sorted(int(i) for i in g))


@dataclasses.dataclass
class Invocation:
    """One invocation's operands on a DIMM (:meth:`Shape.prepare`): ``issue(groups, fetch)`` runs
    the kernel on all ``n_groups`` groups (``None``) or on the listed ones (:func:`check_groups`)
    and returns its results (``None`` entries where not fetched); ``free()`` releases the
    operands."""
    n_groups: int
    run_groups: Callable[[tuple[int, ...] | None, bool], list]
    release: Callable[[], Any]

    def issue(self, groups: Sequence[int] | None = None, fetch: bool = True) -> list:
        return self.run_groups(None if groups is None else check_groups(groups, self.n_groups), fetch)

    def free(self) -> None:
        self.release()


def group_slices(n: int, size: int, groups: tuple[int, ...] | None) -> torch.Tensor:
    """The positions ``0..n-1`` of the groups ``groups`` of ``size`` consecutive positions (all
    for ``None``), as a LongTensor."""
    if groups is None:
        return torch.arange(n)
    return torch.cat([torch.arange(g * size, min(n, (g + 1) * size)) for g in groups])


class OfShape:
    """``kind`` and ``params`` of an object's ``shape`` (a log entry, a draw)."""
    shape: Shape

    @property
    def kind(self) -> str:
        return self.shape.kind

    @property
    def params(self) -> dict:
        return self.shape.params()


def check_int(name: str, v, least: int = 1, what: str | None = None) -> int:
    """``v`` if it is an int (not a bool) >= ``least``, else ``ValueError`` naming ``name``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < least:
        raise ValueError(f"{name} must be an int >= {what or least}, got {v!r}")
    return int(v)


def check_samples(samples, batch=1, what="neuron counts") -> tuple:
    """``samples`` as a tuple of at least two different ints >= 1, and ``batch`` an int >= 1."""
    samples = tuple(samples)
    if len(samples) < 2 or any(isinstance(k, bool) or not isinstance(k, int) or k < 1
                               for k in samples) or len(set(samples)) < 2:
        raise ValueError(f"samples must be at least two different {what} >= 1, got {samples!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    return samples


def fit_line(points) -> tuple[float, float]:
    """``(slope, fixed)`` of the least-squares line through ``(n, cycles)`` points."""
    ks, cyc = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, fixed = np.polyfit(ks, cyc, 1)
    return float(slope), float(fixed)


def random_weights(shape, gen: torch.Generator, dtype: str) -> torch.Tensor:
    """Synthetic values of a kernel's operands: INT8 uniform over [-127, 127], or FP16 normal x 0.05."""
    if dtype == "int8":
        return torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8)
    return (torch.randn(*shape, generator=gen) * 0.05).half()


@dataclasses.dataclass(frozen=True)
class LinearCost:
    """``cycles = fixed + slope x n`` fitted to ``samples`` ((n, cycles) measured)."""
    what: str
    slope: float
    fixed: float
    samples: tuple
    backend: str

    def cycles(self, n) -> float:
        return self.fixed + self.slope * n

    def seconds(self, n) -> float:
        return self.cycles(n) / NDP_CLOCK_HZ

    def as_dict(self) -> dict:
        return {"what": self.what, "fixed_cycles": self.fixed, "slope_cycles": self.slope,
                "samples": [list(p) for p in self.samples], "backend": self.backend}

    @classmethod
    def fitted(cls, what: str, points, backend: str) -> LinearCost:
        slope, fixed = fit_line(points)
        return cls(what, slope, fixed, tuple(points), backend)
