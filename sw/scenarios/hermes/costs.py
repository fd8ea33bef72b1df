"""What the NDP-DIMM kernels of the Hermes scenario cost, measured through the driver API.

Hermes computes a layer's predicted-active cold neurons on the DIMMs: a
*row gather* of their up-projection rows (and gate rows for a gated MLP) and
a *column gather* of their down-projection vectors. :func:`ndp_neuron_cost`
runs exactly those GEMVs on a :class:`~ndpdimm.sw.driver.dimm.Dimm` of the chosen
backend for a few counts of selected neurons (``samples``) at the model's
hidden size, and fits ``cycles = fixed + per_neuron x k`` by least squares;
the placement ILP (``sw/scenarios/hermes/partition.py``) takes ``per_neuron`` (in
seconds at the NDP clock) as its DIMM cost. The weights used are random FP16
values of the model's shapes (only timing matters here), ``pool`` neurons of
them: the cold neurons one DIMM stores in a layer (a run measures the line
again at its placement's pool, :func:`with_neuron_pool`). The result records
the backend, so every scenario number traces back to RTL cycles or the
calibrated model.

The other kernels Hermes puts on a DIMM are measured the same way, each fitted
to a line (:class:`LinearCost`, ``cycles = fixed + slope x n``):

* :func:`ndp_dense_cost`: a dense GEMV of ``n`` FP16 rows of the hidden size
  (the QKV rows placed on the DIMMs; every row is computed every token);
* :func:`ndp_attention_cost`: one sequence's attention over ``n`` cached
  tokens for one K/V head: scores ``K q`` for the ``heads / kv_heads`` query
  heads that share it (one GEMV batch), scale, softmax per query, ``V^T p``;
* :func:`link_merge_cost`: one FP32 ATOMIC_ADD of ``n`` bytes into the
  neighbouring DIMM over DIMM-Link (two linked DIMMs on the model backend:
  links between RTL DIMMs run only in the cocotb bench, and the link model
  is fitted to it, 6.3 % largest error).

A run's kernel times together: :class:`Costs` holds those lines (the neuron
cost at the run's batch), the GPU roofline model (``sw/scenarios/gpu.py``, the
hardware file's efficiency factors) and the PCIe link (:meth:`Costs.pcie`:
``latency + bytes / bandwidth``, hardware file); :func:`measure_costs`
measures the NDP lines on a ``Dimm`` of the run's backend and core
(:class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig`). A sweep reuses one
per model, batch and core.
"""

import dataclasses
import time
import warnings

import numpy as np
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.system import NdpSystem
from ndpdimm.sw.scenarios.catalog import Hardware, ModelShape
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.config import HermesConfig

__all__ = ["NeuronCost", "ndp_neuron_cost", "LinearCost", "ndp_dense_cost", "ndp_attention_cost",
           "link_merge_cost", "Costs", "measure_costs", "with_neuron_pool", "replay_cold_mlp",
           "replay_qkv_dense", "replay_attention"]


@dataclasses.dataclass(frozen=True)
class NeuronCost:
    per_neuron_cycles: float
    fixed_cycles: float
    samples: tuple            # (neurons, cycles) measured
    backend: str
    hidden: int
    pool: int                 # neurons stored, the activated ones drawn from them

    @property
    def per_neuron_seconds(self) -> float:
        return self.per_neuron_cycles / NDP_CLOCK_HZ

    def cycles(self, neurons: int) -> float:
        return self.fixed_cycles + self.per_neuron_cycles * neurons


def _random(shape, gen, dtype):
    if dtype == "int8":
        return torch.randint(-127, 128, shape, generator=gen, dtype=torch.int8)
    return (torch.randn(*shape, generator=gen) * 0.05).half()


def ndp_neuron_cost(model: ModelShape, dimm: Dimm, samples=(64, 256, 1024), seed: int = 0,
                    batch: int = 1, dtype: str = "fp16", pool: int | None = None) -> NeuronCost:
    """Fit the NDP time of ``k`` activated neurons of ``model``'s MLP on ``dimm`` (see the module
    docstring); ``batch`` tokens share the weight stream; ``dtype`` "fp16" or "int8" (the
    neurons' weights and the activations stored in INT8: half the DRAM bytes). ``pool``: the
    neurons the DIMM stores, the ``k`` drawn from them (default ``max(samples)``): where their
    rows fall over the ranks and bank groups sets a random gather's spread, so the line is
    measured at the placement's own pool (``sw/scenarios/hermes/scenario.py``)."""
    samples = tuple(samples)
    _check_samples(samples, batch)
    if dtype not in ("fp16", "int8"):
        raise ValueError(f"dtype must be 'fp16' or 'int8', got {dtype!r}")
    pool = max(samples) if pool is None else pool
    _check_pool(pool, max(samples), "the largest sample")
    gen = torch.Generator().manual_seed(seed)
    n, h = pool, model.hidden
    up = dimm.store_weights(_random((n, h), gen, dtype))
    down = dimm.store_weights(_random((n, h), gen, dtype), layout="axpy")
    x = _random((batch, h), gen, dtype)
    points = []
    try:
        for k in samples:
            idx = torch.randperm(n, generator=gen)[:k].sort().values
            start = dimm.backend.cycle
            _neuron_kernel(dimm, up, down, x, lambda: _random((batch, n), gen, dtype), idx,
                           model.mlp == "gated", fetch=False)
            points.append((k, dimm.backend.cycle - start))
    finally:
        dimm.free(up.buffer)
        dimm.free(down.buffer)
    slope, fixed = _fit(points)
    return NeuronCost(per_neuron_cycles=slope, fixed_cycles=fixed,
                      samples=tuple(points), backend=dimm.name, hidden=h, pool=n)


def _check_pool(pool, least: int, what: str) -> None:
    """A neuron pool is an int of at least ``least`` (``what`` names it in the error)."""
    if isinstance(pool, bool) or not isinstance(pool, int) or pool < least:
        raise ValueError(f"the DIMM's neuron pool must be an int >= {what} ({least}), "
                         f"got {pool!r}")


def _neuron_kernel(dimm: Dimm, up, down, x, make_hk, idx, gated: bool, fetch: bool) -> list:
    """The activated cold neurons ``idx`` of one DIMM: row gathers of their up (and gate) rows,
    then the column gather of their down vectors weighted by ``make_hk()`` [B, n]."""
    outs = [dimm.gemv(up, x, op="row_gather", idx=idx, fetch=fetch)
            for _ in range(2 if gated else 1)]
    outs.append(dimm.gemv(down, make_hk(), op="col_gather", idx=idx, fetch=fetch))
    return outs


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


def _check_samples(samples, batch=1, what="neuron counts"):
    if len(samples) < 2 or any(isinstance(k, bool) or not isinstance(k, int) or k < 1
                               for k in samples) or len(set(samples)) < 2:
        raise ValueError(f"samples must be at least two different {what} >= 1, got {samples!r}")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be an int >= 1, got {batch!r}")


def _fit(points) -> tuple:
    ks, cyc = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, fixed = np.polyfit(ks, cyc, 1)
    return float(slope), float(fixed)


def _timed(dimm: Dimm, run) -> int:
    start = dimm.backend.cycle
    run()
    return dimm.backend.cycle - start


def ndp_dense_cost(model: ModelShape, dimm: Dimm, samples=(64, 256, 1024), seed: int = 0,
                   batch: int = 1) -> LinearCost:
    """Cycles of a dense FP16 GEMV of ``n`` rows x ``model.hidden`` for ``batch`` tokens."""
    samples = tuple(samples)
    _check_samples(samples, batch, "row counts")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, model.hidden, generator=gen).half()
    points = []
    for n in samples:
        w = dimm.store_weights((torch.randn(n, model.hidden, generator=gen) * 0.05).half())
        try:
            points.append((n, _timed(dimm, lambda: dimm.gemv(w, x, fetch=False))))
        finally:
            dimm.free(w.buffer)
    slope, fixed = _fit(points)
    return LinearCost(f"dense GEMV rows x {model.hidden}, batch {batch}", slope, fixed,
                      tuple(points), dimm.name)


def ndp_attention_cost(model: ModelShape, dimm: Dimm, samples=(128, 512), seed: int = 0) -> LinearCost:
    """Cycles of one sequence's decode attention over ``n`` cached tokens for one K/V head (its
    ``heads / kv_heads`` query heads batched over the shared K and V)."""
    samples = tuple(samples)
    _check_samples(samples, 1, "context lengths")
    gen = torch.Generator().manual_seed(seed)
    d, group = model.head_dim, model.heads // model.kv_heads
    scale = d ** -0.5
    q = torch.randn(group, d, generator=gen).half()
    data = getattr(dimm.backend, "functional", True)
    points = []
    for n in samples:
        k = dimm.store_weights((torch.randn(n, d, generator=gen)).half())
        vt = dimm.store_weights((torch.randn(d, n, generator=gen)).half())
        try:
            points.append((n, _timed(dimm, lambda: _attention_kernel(dimm, k, vt, q, scale,
                                                                      data, False))))
        finally:
            dimm.free(k.buffer)
            dimm.free(vt.buffer)
    slope, fixed = _fit(points)
    return LinearCost(f"attention, {group} query head(s) of {d} per K/V head, per cached token",
                      slope, fixed, tuple(points), dimm.name)


def _attention_kernel(dimm: Dimm, k, vt, q, scale: float, data: bool, fetch: bool) -> list:
    """One (sequence, K/V head) of decode attention: scores ``K q`` for the group's query heads,
    scale, softmax per query, ``V^T p``; the intermediate results and the output."""
    group, n = q.shape[0], k.shape[0]
    # a timing-only model has no values to pass on: zeros stand in (the activation unit's
    # time does not depend on them)
    s = dimm.gemv(k, q, fetch=data)                        # scores [group, n]
    s = torch.zeros(group, n) if s is None else s
    ss = dimm.activation("scale", s, k=scale, fetch=data)
    ss = torch.zeros(group, n) if ss is None else ss
    p = dimm.softmax(ss, out_dtype=torch.float16, fetch=data)
    p = torch.zeros(group, n, dtype=torch.float16) if p is None else p
    return [s, ss, p, dimm.gemv(vt, p, fetch=fetch)]       # V^T p


# ---- replay recipes of sampled RTL co-simulation (sw/sampling/): one logged invocation ------

def replay_cold_mlp(dimm: Dimm, p: dict, seed: int) -> list:
    """One DIMM's activated cold neurons (``k`` of ``hidden``, batch ``batch``, ``dtype``,
    ``gated``) on synthetic weights from ``seed``: ``k`` neurons drawn from the DIMM's
    ``pool`` of cold neurons in that layer, as the scenario placed them (the cost line is
    measured the same way). Returns the kernels' outputs."""
    gen = torch.Generator().manual_seed(seed)
    k, h, b, dt = p["k"], p["hidden"], p["batch"], p["dtype"]
    pool = p.get("pool")
    _check_pool(pool, k, "k")
    up = dimm.store_weights(_random((pool, h), gen, dt))
    down = dimm.store_weights(_random((pool, h), gen, dt), layout="axpy")
    try:
        idx = torch.randperm(pool, generator=gen)[:k].sort().values
        return _neuron_kernel(dimm, up, down, _random((b, h), gen, dt),
                              lambda: _random((b, pool), gen, dt), idx, p["gated"], fetch=True)
    finally:
        dimm.free(up.buffer)
        dimm.free(down.buffer)


def replay_qkv_dense(dimm: Dimm, p: dict, seed: int) -> list:
    """One DIMM's dense QKV rows (``rows`` x ``hidden`` FP16, batch ``batch``)."""
    gen = torch.Generator().manual_seed(seed)
    w = dimm.store_weights((torch.randn(p["rows"], p["hidden"], generator=gen) * 0.05).half())
    try:
        return [dimm.gemv(w, torch.randn(p["batch"], p["hidden"], generator=gen).half())]
    finally:
        dimm.free(w.buffer)


def replay_attention(dimm: Dimm, p: dict, seed: int) -> list:
    """One (sequence, K/V head) of decode attention over ``context`` cached tokens
    (``group`` query heads of ``head_dim``)."""
    gen = torch.Generator().manual_seed(seed)
    n, d, group = p["context"], p["head_dim"], p["group"]
    q = torch.randn(group, d, generator=gen).half()
    k = dimm.store_weights(torch.randn(n, d, generator=gen).half())
    vt = dimm.store_weights(torch.randn(d, n, generator=gen).half())
    try:
        return _attention_kernel(dimm, k, vt, q, d ** -0.5, True, True)
    finally:
        dimm.free(k.buffer)
        dimm.free(vt.buffer)


def link_merge_cost(config, samples=(1024, 4096, 16384)) -> LinearCost:
    """Cycles of one FP32 ATOMIC_ADD of ``n`` bytes from a DIMM into its neighbour's SRAM, on two
    DIMMs joined by DIMM-Link (model backend; ``config`` a CoreConfig, ``link`` forced on)."""
    samples = tuple(samples)
    _check_samples(samples, 1, "byte counts")
    if any(n % 4 for n in samples):
        raise ValueError(f"merge sizes must be whole FP32 words, got {samples!r}")
    system = NdpSystem(2, "model", dataclasses.replace(config, link=True), functional=False)
    try:
        src = system[1]
        points = []
        for n in samples:
            local, remote = src.alloc_sram(n), system[0].alloc_sram(n)
            try:
                points.append((n, _timed(src, lambda: src.run(
                    [src.atomic_add_descriptor(0, remote.addr, local.addr, n)], "merge"))))
            finally:
                src.free(local)
                system[0].free(remote)
    finally:
        system.close()
    slope, fixed = _fit(points)
    return LinearCost("FP32 ATOMIC_ADD into the neighbouring DIMM, per byte", slope, fixed,
                      tuple(points), "model (DIMM-Link model)")


# ---- the kernel times of a run -----------------------------------------------------------------

@dataclasses.dataclass
class Costs:
    """The kernel times of a run (see the module docstring)."""
    gpu: GpuModel
    hardware: Hardware
    neuron: object                         # NeuronCost, NDP, at the run's batch
    dense: object                          # LinearCost: QKV rows on one DIMM
    attention: object                      # LinearCost: one (sequence, K/V head) per cached token
    merge: object                          # LinearCost: ATOMIC_ADD bytes into the neighbour
    backend: str
    core: CoreConfig
    seconds: float                         # wall time of the measurements

    def pcie(self, n_bytes: float) -> float:
        if n_bytes <= 0:
            return 0.0
        p = self.hardware.pcie
        return p.latency_us * 1e-6 + n_bytes / (p.gbytes_per_s * 1e9)

    def as_dict(self) -> dict:
        def lin(c):
            return {"what": c.what, "fixed_cycles": c.fixed, "slope_cycles": c.slope,
                    "samples": [list(p) for p in c.samples], "backend": c.backend}
        return {"backend": self.backend, "core": dataclasses.asdict(self.core),
                "ndp_clock_hz": NDP_CLOCK_HZ, "measure_seconds": self.seconds,
                "neuron": {"per_neuron_cycles": self.neuron.per_neuron_cycles,
                           "fixed_cycles": self.neuron.fixed_cycles,
                           "samples": [list(p) for p in self.neuron.samples],
                           "pool": self.neuron.pool, "backend": self.neuron.backend},
                "dense_rows": lin(self.dense), "attention": lin(self.attention),
                "merge": lin(self.merge)}


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
    return ndp_neuron_cost(model, dimm, samples=rows, batch=cfg.batch, dtype=cfg.cold_dtype,
                           pool=pool)


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
            dense = ndp_dense_cost(model, dimm, samples=rows, batch=cfg.batch)
            attention = ndp_attention_cost(model, dimm, samples=contexts)
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
