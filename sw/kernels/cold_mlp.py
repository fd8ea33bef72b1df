"""The cold-neuron MLP: one DIMM's activated neurons of a sparse ReLU/gated MLP (Hermes).

A layer's predicted-active cold neurons ``idx`` (``k`` of the ``pool`` the DIMM stores) run
as a *row gather* of their up-projection rows (twice for a gated MLP: up and gate), then a
*column gather* of their down-projection vectors weighted by the activations ``h`` [B, pool]
(:func:`issue`). Weights are neuron-major (up: DOT rows; down: AXPY rows), so a skipped neuron
costs no DRAM traffic.

Cycle behaviour: two (three) GEMV operations back to back on one DIMM, each with its index
DMA, the gather and the DMA of its result; the time grows about linearly in ``k`` with a
slope set by the gathered rows' spread over ranks and bank groups, which depends on the
pool they are drawn from. :func:`ndp_neuron_cost` fits ``cycles = fixed + per_neuron x k``
at a few ``k`` drawn from ``pool`` (:class:`NeuronCost`); the Hermes placement charges it.
"""

from __future__ import annotations

import dataclasses

import torch

from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.base import Invocation, check_samples, fit_line, group_slices, random_weights
from ndpdimm.sw.kernels.base import Shape as _Base

__all__ = ["Shape", "GROUP_NEURONS", "issue", "NeuronCost", "ndp_neuron_cost", "check_pool", "DTYPES"]

#: Activated neurons per group of a sub-sampled replay (``Shape.groups``)
GROUP_NEURONS = 32
#: Weight / activation types of the cold neurons: FP16, or INT8 (half the DRAM bytes).
DTYPES = ("fp16", "int8")


def check_pool(pool, least: int, what: str) -> int:
    """A neuron pool is an int of at least ``least`` (``what`` names it in the error)."""
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < least:
        raise ValueError(f"the DIMM's neuron pool must be an int >= {what} ({least}), "
                         f"got {pool!r}")
    return pool


@dataclasses.dataclass(frozen=True)
class Shape(_Base):
    """``k`` activated neurons of the ``pool`` one DIMM stores in a layer of ``hidden``, for
    ``batch`` tokens, weights in ``dtype``; ``gated``: an up and a gate projection."""
    kind = "cold_mlp"
    k: int
    pool: int
    hidden: int
    batch: int
    dtype: str
    gated: bool

    def __post_init__(self):
        check_pool(self.pool, self.k if isinstance(self.k, int) else 1, "k")
        super().__post_init__()
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")

    def groups(self, max_batch: int) -> int:
        """Groups of :data:`GROUP_NEURONS` consecutive activated neurons (in index order)."""
        return -(-self.k // GROUP_NEURONS)

    def prepare(self, dimm: Dimm, seed: int) -> Invocation:
        """``k`` neurons drawn from the DIMM's ``pool`` on synthetic weights from ``seed``, as the
        scenario placed them (the cost line is measured the same way); a subset of groups runs
        the same kernel on those groups' neurons."""
        gen = torch.Generator().manual_seed(seed)
        pool, h, b, dt = self.pool, self.hidden, self.batch, self.dtype
        up = dimm.store_weights(random_weights((pool, h), gen, dt))
        down = dimm.store_weights(random_weights((pool, h), gen, dt), layout="axpy")
        idx = torch.randperm(pool, generator=gen)[:self.k].sort().values
        x = random_weights((b, h), gen, dt)
        act = random_weights((b, pool), gen, dt)

        def run(groups, fetch):
            sel = idx[group_slices(self.k, GROUP_NEURONS, groups)]
            return issue(dimm, up, down, x, lambda: act, sel, self.gated, fetch=fetch)

        def release():
            dimm.free(up.buffer)
            dimm.free(down.buffer)
        return Invocation(self.groups(dimm.config.max_batch), run, release)


def issue(dimm: Dimm, up, down, x, make_h, idx, gated: bool, fetch: bool) -> list:
    """The activated cold neurons ``idx`` of one DIMM: row gathers of their up (and gate) rows
    of ``up`` for tokens ``x``, then the column gather of their ``down`` vectors weighted by
    ``make_h()`` [B, pool]; the results (None where not fetched)."""
    outs = [dimm.gemv(up, x, op="row_gather", idx=idx, fetch=fetch)
            for _ in range(2 if gated else 1)]
    outs.append(dimm.gemv(down, make_h(), op="col_gather", idx=idx, fetch=fetch))
    return outs


@dataclasses.dataclass(frozen=True)
class NeuronCost:
    """``cycles = fixed + per_neuron x k`` of the kernel, fitted to ``samples`` ((k, cycles))
    measured on ``backend`` at ``hidden`` with ``k`` drawn from ``pool`` stored neurons."""
    per_neuron_cycles: float
    fixed_cycles: float
    samples: tuple
    backend: str
    hidden: int
    pool: int

    @property
    def per_neuron_seconds(self) -> float:
        return self.per_neuron_cycles / NDP_CLOCK_HZ

    def cycles(self, neurons: int) -> float:
        return self.fixed_cycles + self.per_neuron_cycles * neurons

    def as_dict(self) -> dict:
        return {"per_neuron_cycles": self.per_neuron_cycles, "fixed_cycles": self.fixed_cycles,
                "samples": [list(p) for p in self.samples], "pool": self.pool,
                "backend": self.backend}


def ndp_neuron_cost(hidden: int, gated: bool, dimm: Dimm, samples=(64, 256, 1024), seed: int = 0,
                    batch: int = 1, dtype: str = "fp16", pool: int | None = None) -> NeuronCost:
    """Fit the NDP time of ``k`` activated neurons of an MLP of ``hidden`` on ``dimm`` (see the
    module docstring); ``batch`` tokens share the weight stream; ``dtype`` "fp16" or "int8".
    ``pool``: the neurons the DIMM stores, the ``k`` drawn from them (default
    ``max(samples)``): where their rows fall over the ranks and bank groups sets a random
    gather's spread, so the line is measured at the placement's own pool."""
    samples = check_samples(samples, batch)
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be 'fp16' or 'int8', got {dtype!r}")
    pool = max(samples) if pool is None else pool
    check_pool(pool, max(samples), "the largest sample")
    gen = torch.Generator().manual_seed(seed)
    n, h = pool, hidden
    up = dimm.store_weights(random_weights((n, h), gen, dtype))
    down = dimm.store_weights(random_weights((n, h), gen, dtype), layout="axpy")
    x = random_weights((batch, h), gen, dtype)
    points = []
    try:
        for k in samples:
            idx = torch.randperm(n, generator=gen)[:k].sort().values
            with dimm.measure("cold_mlp") as m:
                issue(dimm, up, down, x, lambda: random_weights((batch, n), gen, dtype), idx,
                      gated, fetch=False)
            points.append((k, m.cycles))
    finally:
        dimm.free(up.buffer)
        dimm.free(down.buffer)
    slope, fixed = fit_line(points)
    return NeuronCost(per_neuron_cycles=slope, fixed_cycles=fixed,
                      samples=tuple(points), backend=dimm.name, hidden=h, pool=n)
