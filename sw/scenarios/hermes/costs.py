"""What the NDP-DIMM kernels of the Hermes scenario cost: the lines a run charges, measured through the driver.

Hermes puts four kernels on the DIMMs (``sw/kernels/``): a layer's predicted-active cold
neurons (``cold_mlp``: row gathers of their up and gate rows, the column gather of their
down vectors; ``cycles = fixed + per_neuron x k``, the placement ILP takes ``per_neuron`` as
its DIMM cost), the QKV rows placed on the DIMMs (``dense``), one (sequence, K/V head) of
decode attention (``attention``) and the merge of partial outputs into the neighbouring DIMM
(``merge``). Each is measured on random FP16 values of the model's shapes (only timing
matters here) on a :class:`~ndpdimm.sw.driver.dimm.Dimm` of the run's backend, and fitted to
a line that records the backend, so every scenario number traces back to RTL cycles or the
calibrated model. The neuron line is measured at ``pool`` neurons, the cold neurons one DIMM
stores in a layer (a run measures it again at its placement's pool, :func:`with_neuron_pool`).

A run's kernel times together: :class:`Costs` holds those lines (the neuron cost at the
run's batch), the GPU model (``sw/scenarios/gpu.py``: the measured fit the hardware file
names, the roofline beside it) and the PCIe link (:meth:`Costs.pcie`: ``latency + bytes /
bandwidth``, hardware file); :func:`measure_costs` measures the NDP lines on a ``Dimm`` of
the run's backend and core (:class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig`). A
sweep reuses one per model, batch and core.
"""

import dataclasses
import time
import warnings

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.attention import ndp_attention_cost
from ndpdimm.sw.kernels.base import LinearCost
from ndpdimm.sw.kernels.cold_mlp import NeuronCost, ndp_neuron_cost
from ndpdimm.sw.kernels.dense import ndp_dense_cost
from ndpdimm.sw.kernels.merge import link_merge_cost
from ndpdimm.sw.scenarios.catalog import ModelShape
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.catalog import Hardware
from ndpdimm.sw.scenarios.hermes.config import HermesConfig

__all__ = ["Costs", "measure_costs", "with_neuron_pool"]


# ---- the kernel times of a run -----------------------------------------------------------------

@dataclasses.dataclass
class Costs:
    """The kernel times of a run (see the module docstring)."""
    gpu: GpuModel
    hardware: Hardware
    neuron: NeuronCost                     # NDP, at the run's batch
    dense: LinearCost                      # QKV rows on one DIMM
    attention: LinearCost                  # one (sequence, K/V head) per cached token
    merge: LinearCost                      # ATOMIC_ADD bytes into the neighbour
    backend: str
    core: CoreConfig
    seconds: float                         # wall time of the measurements

    def pcie(self, n_bytes: float) -> float:
        if n_bytes <= 0:
            return 0.0
        p = self.hardware.pcie
        return p.latency_us * 1e-6 + n_bytes / (p.gbytes_per_s * 1e9)

    def as_dict(self) -> dict:
        return {"backend": self.backend, "core": dataclasses.asdict(self.core),
                "ndp_clock_hz": NDP_CLOCK_HZ, "measure_seconds": self.seconds,
                "neuron": self.neuron.as_dict(), "dense_rows": self.dense.as_dict(),
                "attention": self.attention.as_dict(), "merge": self.merge.as_dict()}


def _cost_dimm(cfg: HermesConfig, core: CoreConfig) -> Dimm:
    """The DIMM the NDP lines are measured on (``cfg.backend``, timing only on the model)."""
    kwargs = {"functional": False} if cfg.backend == "model" else {}
    return Dimm(cfg.backend, core, **kwargs)


def _row_samples(cfg: HermesConfig) -> tuple:
    """Neuron / row counts the lines are measured at: (64, 256, 1024) on the model, (16, 64,
    128) on the RTL (it simulates every cycle; the fit is a line either way)."""
    return (64, 256, 1024) if cfg.backend == "model" else (16, 64, 128)


def _neuron_line(cfg: HermesConfig, model: ModelShape, dimm: Dimm,
                 pool: int | None = None) -> NeuronCost:
    """The neuron line of ``cfg``'s batch and cold dtype at ``pool`` (default: the largest
    sample), its activated-neuron counts within ``pool``."""
    rows = _row_samples(cfg)
    if pool is not None and pool < max(rows):
        rows = tuple(sorted({max(1, pool // 16), max(2, pool // 4), pool}))
    return ndp_neuron_cost(model.hidden, model.mlp == "gated", dimm, samples=rows, batch=cfg.batch,
                           dtype=cfg.cold_dtype, pool=pool)


def measure_costs(cfg: HermesConfig, model: ModelShape, hardware: Hardware, log=None,
                  core: CoreConfig | None = None) -> Costs:
    """NDP kernel lines through the driver API on ``cfg.backend`` (see the module docstring);
    ``core`` overrides the core configuration ``cfg`` describes (units, activation lanes)."""
    t0 = time.perf_counter()
    core = cfg.core() if core is None else core
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rows = _row_samples(cfg)
        contexts = (128, 512) if cfg.backend == "model" else (32, 96)
        with _cost_dimm(cfg, core) as dimm:
            neuron = _neuron_line(cfg, model, dimm)
            dense = ndp_dense_cost(model.hidden, dimm, samples=rows, batch=cfg.batch)
            attention = ndp_attention_cost(model.head_dim, model.heads // model.kv_heads, dimm,
                                           samples=contexts)
        merge = link_merge_cost(core)
    if log:
        for w in {str(w.message) for w in caught}:
            log(f"[hermes] note: {w}")
    return Costs(GpuModel(hardware.gpu), hardware, neuron, dense, attention, merge, cfg.backend,
                 core, time.perf_counter() - t0)


def with_neuron_pool(costs: Costs, cfg: HermesConfig, model: ModelShape, pool: int) -> Costs:
    """``costs`` with the neuron line measured again at ``pool`` cold neurons a DIMM (on the
    same backend and core); ``costs`` itself if it was measured at that pool."""
    if costs.neuron.pool == pool:
        return costs
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with _cost_dimm(cfg, costs.core) as dimm:
            neuron = _neuron_line(cfg, model, dimm, pool)
    return dataclasses.replace(costs, neuron=neuron,
                               seconds=costs.seconds + time.perf_counter() - t0)
