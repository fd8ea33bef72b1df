"""The log of every NDP kernel invocation a scenario costs: :class:`KernelLog`.

An invocation is described by its kernel's *shape* (a frozen
:class:`~ndpdimm.sw.kernels.base.Shape` of one kernel module of ``sw/kernels/``: its ``kind``,
``cold_mlp``, ``qkv_dense``, ``attention``, ``expert``, and a few ints and strings: rows,
hidden size, batch, context, dtype ...) and the NDP cycles the scenario charged for it (what
its cost line predicted). That is a deterministic recipe: the replay rebuilds the kernel's
descriptor stream through the driver from the shape and synthetic data drawn from a seed
(:meth:`~ndpdimm.sw.kernels.base.Shape.run`), so nothing of the full-size tensors is stored.

A decode run costs the same shape many times (every DIMM, every layer, every
sequence's attention at one context length), so identical shapes are
aggregated into one entry with a count and the cycles charged in total: a
LLaMA2-70B run of 64 steps logs about 10^5 invocations in a few hundred entries.
Sampling an invocation at random is sampling an entry with probability proportional
to its count (``sw/sampling/stats.py``).
"""

from __future__ import annotations

import dataclasses

from ndpdimm.sw.kernels.base import OfShape, Shape

__all__ = ["KernelEntry", "KernelLog"]


@dataclasses.dataclass
class KernelEntry(OfShape):
    """Identical invocations of one kernel shape: how many, and the cycles charged in total."""
    shape: Shape
    count: int = 0
    cycles: float = 0.0

    @property
    def cycles_each(self) -> float:
        return self.cycles / self.count


class KernelLog:
    """Every NDP kernel invocation of one scenario run (see the module docstring)."""

    def __init__(self) -> None:
        self._entries: dict[Shape, KernelEntry] = {}

    def add(self, shape: Shape, cycles: float, count: int = 1) -> None:
        """``count`` invocations of the kernel ``shape``, each charged ``cycles``."""
        if not isinstance(shape, Shape) or not shape.kind:
            raise ValueError(f"expected the shape of a kernel kind (sw/kernels), got {shape!r}")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"count must be an int >= 0, got {count!r}")
        if not cycles >= 0:
            raise ValueError(f"charged cycles must be >= 0, got {cycles!r}")
        if count == 0:
            return
        e = self._entries.get(shape)
        if e is None:
            e = self._entries[shape] = KernelEntry(shape)
        e.count += count
        e.cycles += float(cycles) * count

    def entries(self, kind: str | None = None) -> list[KernelEntry]:
        """The entries (of one kind), in the order first logged."""
        return [e for e in self._entries.values() if kind is None or e.kind == kind]

    def of_kind(self, kind: str) -> KernelLog:
        """A log of this one's entries of ``kind`` only."""
        one = KernelLog()
        for e in self.entries(kind):
            one.add(e.shape, e.cycles_each, e.count)
        return one

    def kinds(self) -> list[str]:
        return sorted({e.kind for e in self._entries.values()})

    def total_cycles(self, kind: str | None = None) -> float:
        return sum(e.cycles for e in self.entries(kind))

    def invocations(self, kind: str | None = None) -> int:
        return sum(e.count for e in self.entries(kind))

    def summary(self) -> dict:
        """Per kind: invocations, distinct shapes and the cycles charged (JSON-ready)."""
        return {k: {"invocations": self.invocations(k), "shapes": len(self.entries(k)),
                    "model_cycles": self.total_cycles(k)} for k in self.kinds()}
