"""What one activated cold neuron costs on an NDP-DIMM, measured through the driver API.

Hermes computes a layer's predicted-active cold neurons on the DIMMs: a
*row gather* of their up-projection rows (and gate rows for a gated MLP) and
a *column gather* of their down-projection vectors. :func:`ndp_neuron_cost`
runs exactly those GEMVs on a :class:`~ndpdimm.sw.driver.Dimm` of the chosen
backend for a few counts of selected neurons (``samples``) at the model's
hidden size, and fits ``cycles = fixed + per_neuron x k`` by least squares;
the placement ILP (``sw/hermes_partition.py``) takes ``per_neuron`` (in
seconds at the NDP clock) as its DIMM cost. The weights used are random FP16
values of the model's shapes (only timing matters here), ``max(samples)``
neurons of them. The result records the backend, so every scenario number
traces back to RTL cycles or the calibrated model.
"""

import dataclasses

import numpy as np
import torch

from ndpdimm.hw.formats import NDP_CLOCK_HZ

from .catalog import ModelShape
from .driver import Dimm

__all__ = ["NeuronCost", "ndp_neuron_cost"]


@dataclasses.dataclass(frozen=True)
class NeuronCost:
    per_neuron_cycles: float
    fixed_cycles: float
    samples: tuple            # (neurons, cycles) measured
    backend: str
    hidden: int

    @property
    def per_neuron_seconds(self) -> float:
        return self.per_neuron_cycles / NDP_CLOCK_HZ

    def cycles(self, neurons: int) -> float:
        return self.fixed_cycles + self.per_neuron_cycles * neurons


def ndp_neuron_cost(model: ModelShape, dimm: Dimm, samples=(64, 256, 1024), seed: int = 0,
                    batch: int = 1) -> NeuronCost:
    """Fit the NDP time of ``k`` activated neurons of ``model``'s MLP on ``dimm`` (see the module
    docstring); ``batch`` tokens share the weight stream."""
    samples = tuple(samples)
    if len(samples) < 2 or any(isinstance(k, bool) or not isinstance(k, int) or k < 1
                               for k in samples) or len(set(samples)) < 2:
        raise ValueError(f"samples must be at least two different neuron counts >= 1, got {samples!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")
    gen = torch.Generator().manual_seed(seed)
    n, h = max(samples), model.hidden
    up = dimm.store_weights((torch.randn(n, h, generator=gen) * 0.05).half())
    down = dimm.store_weights((torch.randn(n, h, generator=gen) * 0.05).half(), layout="axpy")
    x = (torch.randn(batch, h, generator=gen)).half()
    points = []
    try:
        for k in samples:
            idx = torch.randperm(n, generator=gen)[:k].sort().values
            start = dimm.backend.cycle
            for _ in range(2 if model.mlp == "gated" else 1):      # up (and gate) rows
                dimm.gemv(up, x, op="row_gather", idx=idx, fetch=False)
            hk = torch.randn(batch, n, generator=gen).half()
            dimm.gemv(down, hk, op="col_gather", idx=idx, fetch=False)
            points.append((k, dimm.backend.cycle - start))
    finally:
        dimm.free(up.buffer)
        dimm.free(down.buffer)
    ks, cyc = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, fixed = np.polyfit(ks, cyc, 1)
    return NeuronCost(per_neuron_cycles=float(slope), fixed_cycles=float(fixed),
                      samples=tuple(points), backend=dimm.name, hidden=h)
