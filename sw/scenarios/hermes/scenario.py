"""The Hermes scenario: decode of a dense LLM on one consumer GPU plus NDP-DIMMs, with baselines.

One run (:func:`run`, ``ndpdimm hermes``) takes a model and hardware
from the catalogue (``sw/configs/``), a batch size and a DIMM configuration
(:class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig`), and reports
tokens/s, a time breakdown, energy and price for every system of the
comparison, with the predictor's accuracy and the DIMMs' load imbalance. This
module holds the run: the workload and kernel costs (made here unless given),
the offline placement of every system (:func:`_placement`, the ILP of
``sw/scenarios/hermes/partition.py``), the systems' decode runs
(``sw/scenarios/hermes/simulate.py``, where each system's decode step is
described), and the aggregation of their tallies into the result
(:func:`_summary`, energy, price, predictor accuracy, placement, imbalance).

**Where every number comes from.**

* NDP kernels: measured through the driver API on a :class:`Dimm` of the
  chosen backend (``sw/scenarios/hermes/costs.py``): activated cold neurons (row gather
  of up/gate rows + column gather of down columns), dense QKV rows, decode
  attention per (sequence, K/V head) over the cached tokens, and the FP32
  ATOMIC_ADD that merges partial results over DIMM-Link (link model). Each is
  a line fitted to a few measured sizes; the run records the backend (``rtl``:
  the Verilated core's cycles, ``model``: the calibrated performance model)
  and the core configuration.
* GPU kernels: the GPU model (``sw/scenarios/gpu.py``): the measured fit the hardware
  file's ``[gpu] measured`` names, the roofline for what it does not cover; PCIe transfers: ``latency + bytes /
  bandwidth`` (hardware file); the host CPU of the PowerInfer-like baseline:
  ``max(bytes / (bandwidth x efficiency), flops / peak)``.
* Activations: synthetic traces (``sw/scenarios/hermes/traces.py``, parameters in
  :class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig`, made by
  ``sw/scenarios/hermes/workload.py``), one per sequence of the batch; a batch activates
  the union of its sequences' neurons. A *profiling* trace (other seeds, same
  model seed) drives the offline placement and the predictor's table; the
  *run* trace is what the systems execute. ``sample_layers`` distinct layers
  are simulated and layer ``l`` of the model replays sample ``l mod S`` with
  its own placement (the ILP places all layers).
* Energy and price: ``sw/scenarios/energy.py`` (sources in its TOML).
"""

import dataclasses
import time

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.provenance import without
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm, cycles_source
from ndpdimm.sw.scenarios.base import Result, RunContext, quiet
from ndpdimm.sw.scenarios.catalog import ModelShape, load_model
from ndpdimm.sw.scenarios.energy import (
    EnergyModel,
    PriceCatalog,
    Usage,
    load_energy,
    reference_gpu,
)
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.catalog import Hardware, load_hardware
from ndpdimm.sw.scenarios.hermes.config import ABLATIONS, ELEM, SYSTEMS, HermesConfig
from ndpdimm.sw.scenarios.hermes.costs import Costs, measure_costs, with_neuron_pool
from ndpdimm.sw.scenarios.hermes.partition import PartitionProblem, cold_pool, solve_partition
from ndpdimm.sw.scenarios.hermes.simulate import (
    Placement,
    RunShape,
    accelerate_layers,
    cpu_seconds,
    datacenter_run,
    dejavu_predictor_bytes,
    gpu_mlp_seconds,
    gpu_rows_seconds,
    ndp_run,
    offload_run,
    powerinfer_run,
    prefill_seconds,
)
from ndpdimm.sw.scenarios.hermes.traces import ActivationTrace
from ndpdimm.sw.scenarios.hermes.workload import Workload, make_workload

__all__ = ["run", "operating_points", "floor_point", "HermesResult", "SystemResult", "HermesConfig"]


@dataclasses.dataclass(frozen=True)
class SystemResult(Result):
    """One system's (or ablation's) decode: speed, time breakdown, the operator's health figures,
    energy and price (``None`` where a figure does not apply to the system)."""
    tokens_per_s: float                    # decode only: batch / decode step time
    e2e_tokens_per_s: float                # generated tokens / (prefill + decode): the paper's
    ms_per_step: float
    ttft_s: float
    mlp_ms_per_step: float | None          # critical-path time of the MLP blocks (NDP systems)
    predictor_ms_per_step: float           # GPU time of the activation predictor per step
    gpu_busy_ms_per_step: float
    breakdown_ms_per_step: dict            # component -> ms per decode step
    ndp_utilisation: float | None
    pcie_time_share: float
    hot_hit_rate: float | None
    imbalance: float | None                # mean over tokens of max / mean DIMM load
    imbalance_per_token: list
    migrations: int
    energy_j_per_token: dict               # component -> J per token (energy.COMPONENTS, total)
    tokens_per_joule: float
    price_usd: dict
    tokens_per_s_per_kusd: float


@dataclasses.dataclass(frozen=True)
class HermesResult(Result):
    """One Hermes run: every system of :data:`SYSTEMS`, the ablations run, the predictor's
    accuracy, the placement, the DIMMs' imbalance and where every number came from;
    ``cold_int8`` with INT8 cold neurons, ``rtl_samples`` when samples were asked for."""
    OPTIONAL = ("cold_int8", "rtl_samples")
    config: HermesConfig
    model: ModelShape
    hardware: str
    dimms: int
    provenance: dict
    costs: Costs
    systems: dict                          # name -> SystemResult, in SYSTEMS order
    ablations: dict                        # name -> SystemResult
    predictor: dict
    placement: dict
    imbalance: dict
    migration_log: list
    cold_int8: dict | None = None
    ndp_kernels: dict = dataclasses.field(default_factory=dict)
    rtl_samples: dict | None = None
    wall_seconds: float = 0.0

    @classmethod
    def from_dict(cls, d: dict) -> "HermesResult":
        """A result back from its JSON (``as_dict()``, e.g. a ``hermes.json`` read back), to
        report or plot again (``costs`` stays the JSON's dict)."""
        d = without(d)     # a written result starts with its provenance fields
        return cls(**{**d, "config": HermesConfig(**d["config"]), "model": ModelShape(**d["model"]),
                      "systems": {k: SystemResult(**v) for k, v in d["systems"].items()},
                      "ablations": {k: SystemResult(**v) for k, v in d["ablations"].items()}})


# ---- one run -----------------------------------------------------------------------------------

def _int8_error() -> dict:
    """What INT8 cold neurons cost in accuracy, measured on the reduced model of
    ``sw/scenarios/hermes/decode.py`` (one decode step, batch 2, oracle prediction, model backend): the
    step's error against float64 torch, FP16 and INT8 cold neurons."""
    import torch

    from ndpdimm.sw.scenarios.hermes.decode import HermesNdp, make_placement
    from ndpdimm.sw.scenarios.hermes.reduced_model import ReducedModel, oracle_prediction, prefill
    m = ReducedModel()
    g = torch.Generator().manual_seed(1)
    cache = prefill(m, torch.randn(2, 6, m.hidden, generator=g))
    x = torch.randn(2, m.hidden, generator=g)
    pl = make_placement(m, 2)
    pred = oracle_prediction(m, cache, x)
    out = {}
    with Dimm("model") as dimm:
        for dt in ("fp16", "int8"):
            with HermesNdp(m, [dimm, dimm], pl, cold_dtype=dt) as ndp:
                out[dt] = ndp.decode_step(cache, x, pred).relative_error
    return {"relative_error_fp16": out["fp16"], "relative_error_int8": out["int8"],
            "what": "||out - float64 reference|| / ||update|| of one decode step of the reduced "
                    "model (sw/scenarios/hermes/decode.py), cold neurons in FP16 vs INT8"}


def _accuracy(active: np.ndarray, predicted: np.ndarray, mask: np.ndarray | None) -> dict:
    """Precision and recall of ``predicted`` against ``active`` ([tokens, S, F] bool) over the
    neurons of ``mask`` ([S, F], None: all); None where undefined."""
    if mask is not None:
        active, predicted = active & mask, predicted & mask
    tp = int((active & predicted).sum())
    fp = int((~active & predicted).sum())
    fn = int((active & ~predicted).sum())
    tn = int(mask.sum()) * active.shape[0] - tp - fp - fn if mask is not None else \
        active.size - tp - fp - fn
    return {"precision": tp / (tp + fp) if tp + fp else None,
            "recall": tp / (tp + fn) if tp + fn else None,
            "accuracy": (tp + tn) / (tp + tn + fp + fn) if tp + tn + fp + fn else None,
            "cold_active": tp + fn, "cold_predicted": tp + fp}


def _operating_points(workload: Workload, part, thresholds) -> list[dict]:
    """The predictor's accuracy at each of ``thresholds`` on the cold neurons of ``part`` (the
    sample layers' own placement) and over all neurons."""
    act = workload.run.active
    cold = ~part.on_gpu[np.arange(workload.run.layers)]
    points = []
    for th in thresholds:
        pred_th = workload.at_threshold(th).predicted
        a_cold, a_all = _accuracy(act, pred_th, cold), _accuracy(act, pred_th, None)
        points.append({"threshold": float(th), "recall": a_cold["recall"],
                       "precision": a_cold["precision"], "recall_all": a_all["recall"],
                       "predicted_share": float(pred_th.mean())})
    return points


def floor_point(workload: Workload, part, floor: float) -> dict:
    """The sparsest operating point (highest score threshold) at which the predictor's recall on
    the activated cold neurons of the run (those of ``part``'s sample layers off the GPU) is at
    least ``floor``: the ``ceil(floor x n)``-th highest score among the ``n`` activated cold
    neurons (every neuron scoring at least it is computed). ``floor`` 0 keeps the predictor's
    own rule (``threshold`` None). The point is chosen on the run's own activations: it
    guarantees the computed model, it does not claim a deployable predictor's accuracy."""
    out = {"recall_floor": float(floor), "threshold": None}
    if floor <= 0:
        return out
    if workload.scores is None:
        raise ValueError("a recall floor needs the predictor's scores (a workload of make_workload)")
    cold = ~part.on_gpu[np.arange(workload.run.layers)]
    s = workload.scores[workload.run.active & cold[None]]
    if s.size == 0:
        return out
    k = int(np.ceil(floor * s.size - 1e-9))
    out["threshold"] = float(np.partition(s, s.size - k)[s.size - k])
    return out


def _frequency(trace: ActivationTrace, layers: int) -> np.ndarray:
    f = trace.active.mean(axis=0)                          # [S, F]
    return f[np.arange(layers) % f.shape[0]]


def _placement(cfg, costs, sh, freq, dimms, *, gpu_budget, side_seconds, dense_rows,
               dense_side_seconds, capacity):
    """The ILP's placement (``side_seconds``: one activated neuron on the other side)."""
    g_neuron = gpu_mlp_seconds(costs, sh, sh.F) / sh.F
    g_dense = gpu_rows_seconds(costs, sh, dense_rows) - costs.gpu.overhead_s
    hot_groups = None if cfg.hot_share is None else int(round(cfg.hot_share * sh.F / cfg.group))
    if hot_groups is not None:
        need = sh.L * min(sh.F, hot_groups * cfg.group) * sh.neuron_bytes
        if need > gpu_budget:
            raise ValueError(f"hot share {cfg.hot_share} needs {need / 1e9:.1f} GB of GPU memory "
                             f"for the hot neurons; the budget is {gpu_budget / 1e9:.1f} GB")
    p = PartitionProblem(freq, neuron_bytes=sh.neuron_bytes, gpu_seconds_per_neuron=g_neuron,
                         ndp_seconds_per_neuron=side_seconds, gpu_budget_bytes=gpu_budget,
                         dimms=dimms, dimm_capacity_bytes=capacity, group=cfg.group,
                         dense_bytes=dense_rows * sh.H * ELEM, dense_gpu_seconds=g_dense,
                         dense_ndp_seconds=dense_side_seconds, hot_groups=hot_groups)
    return solve_partition(p, solver=cfg.solver)


def _summary(tl, cfg, sh, ttft, energy_model, usage, price, dimms):
    step = tl.seconds / cfg.tokens
    tokens = cfg.tokens * sh.batch
    e = energy_model.energy(usage)
    pcie = tl.breakdown.get("pcie", 0.0) + tl.breakdown.get("migration", 0.0)
    return {
        "tokens_per_s": sh.batch / step, "e2e_tokens_per_s": tokens / (ttft + tl.seconds),
        "ms_per_step": 1e3 * step, "ttft_s": ttft,
        "mlp_ms_per_step": 1e3 * tl.mlp_seconds / cfg.tokens if tl.mlp_seconds else None,
        "predictor_ms_per_step": 1e3 * tl.predictor_busy / cfg.tokens,
        "gpu_busy_ms_per_step": 1e3 * tl.gpu_busy / cfg.tokens,
        "breakdown_ms_per_step": {k: 1e3 * v / cfg.tokens for k, v in sorted(tl.breakdown.items())},
        "ndp_utilisation": (tl.ndp_busy / (dimms * tl.seconds)) if dimms else None,
        "pcie_time_share": pcie / tl.seconds,
        "hot_hit_rate": tl.active_on_gpu / tl.active if tl.active else None,
        "imbalance": float(np.mean(tl.imbalance)) if tl.imbalance else None,
        "imbalance_per_token": tl.imbalance,
        "migrations": tl.migrations,
        "energy_j_per_token": {k: v / tokens for k, v in e.items()},
        "tokens_per_joule": tokens / e["total"],
        "price_usd": price,
        "tokens_per_s_per_kusd": sh.batch / step / (price["total"] / 1e3),
    }


@dataclasses.dataclass
class _Offline:
    """What every system of a run shares, up to the offline placement of the Hermes system."""
    t_start: float
    model: ModelShape
    hw: Hardware
    dimms: int
    sh: RunShape
    workload: Workload
    costs: Costs
    thresholds: list
    gpu_bytes: float
    kv_end: float
    freq: np.ndarray
    ndp_budget: float
    dimm_room: float
    part: object                           # partition.Partition of the Hermes system


def check_setup(cfg: HermesConfig, model: ModelShape, hw, dimms: int, sh: RunShape) -> None:
    """Refuse, before any work, a run no system of the set-up can make: a context (prompt and
    decode tokens) beyond the model's positions, or weights and KV cache larger than where a
    system keeps them: the offloading baselines in GPU and host memory, the NDP systems in GPU
    memory and the DIMMs (cold neurons in ``cold_dtype``). ``ValueError`` with the sizes."""
    context = cfg.prompt + cfg.tokens
    if context > model.max_positions:
        raise ValueError(f"{model.name}: prompt {cfg.prompt} + {cfg.tokens} decode tokens = "
                         f"{context} positions, the model has {model.max_positions}")
    gpu = (hw.gpu.memory_gb - cfg.gpu_reserve_gb) * 1e9
    kv = sh.kv_bytes(context)
    dense = sh.L * (sh.qkv_bytes + sh.o_bytes) + sh.head_bytes
    stores = (("the offloading baselines", "GPU + host memory", gpu + hw.host.memory_gb * 1e9,
               dense + sh.L * sh.F * sh.neuron_bytes + kv),
              ("the NDP systems", f"GPU + {dimms} DIMMs", gpu + dimms * hw.ndp.capacity_gb * 2 ** 30,
               dense + sh.L * sh.F * sh.cold_neuron_bytes + kv))
    for who, where, room, need in stores:
        if need > room:
            raise ValueError(f"{model.name}: {need / 1e9:.1f} GB of weights and KV cache (batch "
                             f"{cfg.batch}, {context} positions) do not fit {who}' "
                             f"{where} ({room / 1e9:.1f} GB): give a --hardware file with more "
                             f"memory, or more --dimms")


def _offline(cfg: HermesConfig, log, workload, costs, trace, core, recall_thresholds) -> _Offline:
    """The workload and kernel costs (made here unless given) and the ILP's placement."""
    thresholds = list(recall_thresholds)
    for th in thresholds:
        if isinstance(th, bool) or not isinstance(th, (int, float)) or not 0.0 <= th <= 1.0:
            raise ValueError(f"recall thresholds must be numbers in [0, 1], got {th!r}")
    t_start = time.perf_counter()
    model, hw = load_model(cfg.model), load_hardware(cfg.hardware, cfg.gpu)
    dimms = hw.ndp.dimms if cfg.dimms is None else cfg.dimms
    sh = RunShape(model, cfg.batch, cfg.cold_dtype)
    check_setup(cfg, model, hw, dimms, sh)
    if workload is None:
        log(f"[hermes] {model.name}: traces ({cfg.sample_layers} sample layers x {model.ffn} "
            f"neurons, batch {cfg.batch}) and predictor ...")
        workload = make_workload(cfg, model, trace, log)
    elif workload.model != model or workload.batch != cfg.batch:
        raise ValueError("the workload was made for another model or batch")
    if costs is None:
        log(f"[hermes] NDP kernel costs through the driver ({cfg.backend} backend, "
            f"{(core or cfg.core()).n_units} units) ...")
        costs = measure_costs(cfg, model, hw, log, core)
    gpu_bytes = hw.gpu.memory_gb * 1e9 - cfg.gpu_reserve_gb * 1e9 - sh.head_bytes
    kv_end = sh.kv_bytes(cfg.prompt + cfg.tokens)
    dimm_cap = hw.ndp.capacity_gb * 2 ** 30
    freq = _frequency(workload.profile, sh.L)

    # NDP systems: output projections stay on the GPU, QKV shared by the ILP, KV cache on the DIMMs
    ndp_budget = gpu_bytes - sh.L * sh.o_bytes
    if ndp_budget < 0:
        raise ValueError(f"{model.name}: the output projections and LM head alone "
                         f"({(sh.L * sh.o_bytes + sh.head_bytes) / 1e9:.1f} GB) exceed the GPU's "
                         f"{hw.gpu.memory_gb} GB")
    dimm_room = dimm_cap - kv_end / dimms
    log("[hermes] offline placement (ILP) ...")
    part = _placement(cfg, costs, sh, freq, dimms, gpu_budget=ndp_budget,
                      side_seconds=costs.neuron.per_neuron_seconds, dense_rows=sh.qkv_rows,
                      dense_side_seconds=costs.dense.seconds(sh.qkv_rows) - costs.dense.fixed
                      / NDP_CLOCK_HZ, capacity=dimm_room)
    return _Offline(t_start, model, hw, dimms, sh, workload, costs, thresholds, gpu_bytes, kv_end,
                    freq, ndp_budget, dimm_room, part)


def operating_points(cfg: HermesConfig, recall_thresholds, log=None, *,
                     workload: Workload | None = None, costs: Costs | None = None,
                     trace: ActivationTrace | None = None, core: CoreConfig | None = None) -> dict:
    """The predictor's accuracy at each score threshold of ``recall_thresholds`` (in [0, 1],
    :meth:`Workload.at_threshold`) on the cold neurons of the Hermes placement, without decoding
    any system: ``{"predictor": {"operating_points": [...]}, "wall_seconds": ...}``. Arguments
    as :func:`run`'s."""
    o = _offline(cfg, log or quiet, workload, costs, trace, core, recall_thresholds)
    return {"predictor": {"operating_points": _operating_points(o.workload, o.part, o.thresholds)},
            "wall_seconds": time.perf_counter() - o.t_start}


def run(cfg: HermesConfig | None = None, ctx: RunContext | None = None, *,
        workload: Workload | None = None, costs: Costs | None = None,
        trace: ActivationTrace | None = None, core: CoreConfig | None = None,
        ablations: bool = True, recall_thresholds=()) -> HermesResult:
    """Every system of the comparison and the ablations for ``cfg`` (default
    :class:`HermesConfig`). ``ctx`` (:class:`~ndpdimm.sw.scenarios.base.RunContext`): the log,
    the timeline the Hermes system's decode steps are laid on (``--timeline``, docs/hermes.md),
    the kernel log its NDP kernel invocations go into and the request to replay a sample of them
    on the RTL of the same core (the result's ``rtl_samples``). ``workload`` / ``costs``: reuse
    earlier ones (sweeps); ``trace``: a run trace to replay; ``core``: the NDP core's
    configuration if not the one ``cfg`` describes. ``ablations=False``: skip the ``random``,
    ``offline`` and ``online`` ablations (the result's ``ablations`` then holds ``hermes`` only
    and ``imbalance["static"]`` is None) - three of the five NDP runs, for callers that only
    compare the systems (``ndpdimm reproduce hermes``). ``recall_thresholds``: score thresholds
    (in [0, 1]) at which the predictor's accuracy is also reported, on the same placement
    (``predictor["operating_points"]``; the systems run at ``workload``'s own predictions)."""
    cfg = HermesConfig() if cfg is None else cfg
    ctx = RunContext() if ctx is None else ctx
    log, timeline, kernels = ctx.log, ctx.timeline, ctx.kernels
    o = _offline(cfg, log, workload, costs, trace, core, recall_thresholds)
    operating = floor_point(o.workload, o.part, cfg.recall_floor)
    if operating["threshold"] is not None:
        o.workload = o.workload.at_threshold(operating["threshold"])
        log(f"[hermes] operating point: score >= {operating['threshold']:.4f} for cold recall >= "
            f"{cfg.recall_floor}")
    t_start, model, hw, dimms, sh = o.t_start, o.model, o.hw, o.dimms, o.sh
    workload, costs, thresholds, part = o.workload, o.costs, o.thresholds, o.part
    gpu_bytes, kv_end, freq, ndp_budget, dimm_room = (o.gpu_bytes, o.kv_end, o.freq, o.ndp_budget,
                                                      o.dimm_room)
    energy_cfg = load_energy()
    energy = EnergyModel(energy_cfg, hw.gpu)
    prices = PriceCatalog(energy_cfg)
    results = {}
    place = Placement(part.on_gpu, part.dimm, part.dense_gpu_share)
    # the activated cold neurons are drawn from the DIMM's own cold neurons of the layer: where
    # their rows fall sets a gather's spread, so the decode charges the line at that pool (the
    # ILP above placed with the line at the default pool; the per-neuron slope it needs moves
    # little)
    pool = cold_pool(part.dimm, dimms)
    if pool >= 2 and pool != costs.neuron.pool:       # a line needs two neuron counts
        log(f"[hermes] cold-neuron line again at the placement's pool ({pool} neurons a DIMM "
            f"and layer) ...")
        costs = with_neuron_pool(costs, cfg, model, pool)
    dense_part = _placement(cfg, costs, sh, np.ones_like(freq), dimms, gpu_budget=ndp_budget,
                            side_seconds=costs.neuron.per_neuron_seconds, dense_rows=sh.qkv_rows,
                            dense_side_seconds=costs.dense.seconds(sh.qkv_rows) - costs.dense.fixed
                            / NDP_CLOCK_HZ, capacity=dimm_room)
    rng = np.random.default_rng(cfg.seed)
    rand_gpu = np.zeros_like(part.on_gpu)
    rand_dimm = np.full_like(part.dimm, -1)
    for l in range(sh.L):
        perm = rng.permutation(sh.F)
        n_hot = int(part.on_gpu[l].sum())
        rand_gpu[l, perm[:n_hot]] = True
        rand_dimm[l, perm[n_hot:]] = np.arange(sh.F - n_hot) % dimms
    resident = lambda p, share, rows: share * rows * sh.H * ELEM + sh.o_bytes + \
        p.sum(axis=1) * sh.neuron_bytes

    runs = {}
    log(f"[hermes] decoding {cfg.tokens} steps on each system ...")
    runs["ndp_dense"] = ndp_run(cfg, costs, sh, workload,
                                 Placement(dense_part.on_gpu, dense_part.dimm,
                                            dense_part.dense_gpu_share), dimms, sparse=False)
    if ablations:
        runs["random"] = ndp_run(cfg, costs, sh, workload, Placement(rand_gpu, rand_dimm,
                                                                       part.dense_gpu_share), dimms)
        runs["offline"] = ndp_run(cfg, costs, sh, workload, place, dimms)
        runs["online"] = ndp_run(cfg, costs, sh, workload, place, dimms, adjust=True)
    runs["hermes"] = ndp_run(cfg, costs, sh, workload, place, dimms, adjust=True, remap=True,
                              timeline=timeline, kernels=kernels)
    if timeline is not None:
        timeline.metadata.update({
            "scenario": "hermes", "system": "hermes", "model": model.name, "batch": cfg.batch,
            "dimms": dimms, "decode_steps": cfg.tokens, "prompt_tokens": cfg.prompt,
            "layers": sh.L, "sample_layers": workload.run.layers,
            "simulated": f"all {sh.L} layers of {cfg.tokens} decode steps; layer l replays the "
                         f"activations of sample layer l mod {workload.run.layers}",
            "ms_per_step": 1e3 * runs["hermes"].seconds / cfg.tokens,
            "ndp_backend": costs.backend, "time_unit": "seconds of the scenario's critical path",
            "layout": "phases in order, each starting when the previous one's slowest branch "
                      "ended (sw/scenarios/hermes/simulate.py)"})
    ttft_ndp = prefill_seconds(costs, sh, cfg.prompt, resident(part.on_gpu, part.dense_gpu_share,
                                                        sh.qkv_rows), kv_to_dimms=True)
    ttft_dense = prefill_seconds(costs, sh, cfg.prompt, resident(dense_part.on_gpu,
                                                          dense_part.dense_gpu_share,
                                                          sh.qkv_rows), kv_to_dimms=True)

    # Baselines without NDP: the KV cache on the GPU first; what does not fit stays in host
    # memory and crosses PCIe every step (FlexGen-style), in proportion to the context
    if gpu_bytes <= 0:
        raise ValueError(f"{model.name}: the LM head and the reserve exceed the GPU's "
                         f"{hw.gpu.memory_gb} GB")
    kv_host = max(0.0, kv_end - gpu_bytes)
    off_budget = gpu_bytes - (kv_end - kv_host)
    kv_stream = kv_host / sh.L / (cfg.prompt + cfg.tokens)       # per layer and context token
    share = min(1.0, off_budget / (sh.L * sh.layer_bytes))
    runs["flexgen"] = offload_run(cfg, costs, sh, workload, share, kv_stream=kv_stream)
    # Accelerate-like (device_map="auto"): whole decoder layers on the GPU in order while they
    # fit, the others in host memory, moved to the GPU just before their forward (no overlap)
    on_gpu_layers = accelerate_layers(off_budget, sh.layer_bytes, sh.L)
    acc_share = [1.0] * on_gpu_layers + [0.0] * (sh.L - on_gpu_layers)
    runs["accelerate"] = offload_run(cfg, costs, sh, workload, acc_share, kv_stream=kv_stream,
                                      overlap=False)
    # Deja Vu-like: attention and the hottest neurons resident in the same proportion of what
    # its MLP predictors leave of the budget
    dv_share = max(0.0, min(1.0, (off_budget - dejavu_predictor_bytes(sh)) / (sh.L * sh.layer_bytes)))
    hot = np.zeros_like(part.on_gpu)
    order = np.argsort(-freq, axis=1, kind="stable")
    n_res = int(dv_share * sh.F)
    for l in range(sh.L):
        hot[l, order[l, :n_res]] = True
    runs["dejavu"] = offload_run(cfg, costs, sh, workload, dv_share, hot=hot, kv_stream=kv_stream)
    cpu_neuron = cpu_seconds(costs, sh, sh.mats)
    pi_rows = sh.qkv_rows + sh.H
    pi_part = _placement(cfg, costs, sh, freq, 1, gpu_budget=off_budget,
                         side_seconds=cpu_neuron, dense_rows=pi_rows,
                         dense_side_seconds=cpu_seconds(costs, sh, pi_rows),
                         capacity=hw.host.memory_gb * 1e9)
    runs["powerinfer"] = powerinfer_run(cfg, costs, sh, workload,
                                         Placement(pi_part.on_gpu, pi_part.dimm,
                                                    pi_part.dense_gpu_share), kv_stream)
    ttft_off = prefill_seconds(costs, sh, cfg.prompt, [share * sh.layer_bytes] * sh.L, kv_to_dimms=False)
    ttft_pi = prefill_seconds(costs, sh, cfg.prompt, resident(pi_part.on_gpu, pi_part.dense_gpu_share,
                                                       pi_rows) - sh.o_bytes, kv_to_dimms=False)
    dc = energy_cfg.datacenter
    runs["datacenter"] = datacenter_run(cfg, sh, dc)
    ttft_dc = prefill_seconds(dataclasses.replace(costs, gpu=GpuModel(reference_gpu())), sh, cfg.prompt,
                       [sh.layer_bytes] * sh.L, kv_to_dimms=False) / dc.count

    ttft_acc = prefill_seconds(costs, sh, cfg.prompt, [a * sh.layer_bytes for a in acc_share],
                        kv_to_dimms=False, overlap=False)
    ttft_dv = prefill_seconds(costs, sh, cfg.prompt, [dv_share * sh.layer_bytes] * sh.L,
                              kv_to_dimms=False)
    ttft = {"accelerate": ttft_acc, "flexgen": ttft_off, "dejavu": ttft_dv, "powerinfer": ttft_pi,
            "ndp_dense": ttft_dense, "random": ttft_ndp, "offline": ttft_ndp, "online": ttft_ndp,
            "hermes": ttft_ndp, "datacenter": ttft_dc}
    system_of = {"random": "hermes", "offline": "hermes", "online": "hermes"}
    for name in SYSTEMS + ABLATIONS:
        if name not in runs:
            continue
        tl = runs[name]
        kind = system_of.get(name, name)
        nd = dimms if kind in ("ndp_dense", "hermes") else 0
        if kind == "datacenter":
            usage = energy.datacenter_usage(tl.seconds, tl.gpu_busy)
        else:
            usage = Usage(seconds=tl.seconds, gpu_busy_s=min(tl.gpu_busy, tl.seconds),
                          pcie_bytes=tl.pcie_bytes, host_dram_bytes=tl.host_dram_bytes,
                          host_cpu_busy_s=min(tl.cpu_busy, tl.seconds),
                          dimm_dram_bytes=tl.dimm_dram_bytes if nd else 0.0,
                          ndp_macs=tl.ndp_macs if nd else 0.0,
                          ndp_busy_s=min(tl.ndp_busy, nd * tl.seconds) if nd else 0.0,
                          link_bytes=tl.link_bytes if nd else 0.0, dimms=nd)
        price = prices.system_price(kind, dimms=dimms)
        results[name] = SystemResult(**_summary(tl, cfg, sh, ttft[name], energy, usage, price, nd))
    # predictor accuracy over the cold neurons of the Hermes placement (sample layers' own)
    S = workload.run.layers
    cold = ~part.on_gpu[np.arange(S)]
    act = workload.run.active
    acc = _accuracy(act, workload.predicted, cold)
    acc_all = _accuracy(act, workload.predicted, None)
    mem = workload.predictor_memory
    points = _operating_points(workload, part, thresholds)
    extra = {
        "predictor": {**acc, "kind": cfg.predictor, "operating_point": operating,
                      "recall_all": acc_all["recall"], "precision_all": acc_all["precision"],
                      "accuracy_all": acc_all["accuracy"],
                      "operating_points": points,
                      "memory_bytes_per_layer": mem, "memory_kb_per_layer": sum(mem.values()) / 1e3,
                      "memory_mb_all_layers": sum(mem.values()) * sh.L / 1e6,
                      "fit_seconds": workload.fit_seconds,
                      "predict_seconds": workload.predict_seconds},
        "placement": {"solver": part.solver, "status": part.status,
                      "solve_seconds": part.solve_seconds, "variables": part.variables,
                      "ilp_objective_ms": 1e3 * part.ilp_objective,
                      "objective_ms": 1e3 * part.objective,
                      "group_gap_bound_ms": 1e3 * part.group_gap_bound,
                      "hot_share": part.hot_share,
                      "qkv_gpu_share": float(part.dense_gpu_share.mean()),
                      "gpu_budget_gb": ndp_budget / 1e9,
                      "gpu_used_gb": float(part.on_gpu.sum() * sh.neuron_bytes +
                                           part.dense_gpu_share.sum() * sh.qkv_bytes) / 1e9,
                      "dimm_used_gb": [float(b) / 1e9 for b in
                                       np.bincount(part.dimm[part.dimm >= 0], minlength=dimms)
                                       * sh.neuron_bytes + (1 - part.dense_gpu_share).sum()
                                       * sh.qkv_bytes / dimms],
                      "dimm_capacity_gb": dimm_room / 1e9},
        "imbalance": {"static": results["online"].imbalance if "online" in results else None,
                      "remapped": results["hermes"].imbalance,
                      "remap_migrations": sum(1 for e in runs["hermes"].migration_log
                                              if e[1] == "dimm->dimm"),
                      "gpu_dimm_migrations": sum(1 for e in runs["hermes"].migration_log
                                                 if e[1] == "gpu<->dimm")},
        "migration_log": runs["hermes"].migration_log[:2000],
    }
    cold_int8 = _int8_error() if cfg.cold_dtype == "int8" else None
    ndp_kernels = {"system": "hermes", "backend": costs.backend,
                   "kinds": kernels.summary(), "ndp_busy_seconds": runs["hermes"].ndp_busy,
                   "note": "every NDP-core kernel the Hermes system's decode charged "
                           "(DIMM-Link merges excepted), cycles as charged"}
    rtl_samples = ctx.rtl_check(costs.core)
    ndp_words, ndp_calibrated = cycles_source(costs.backend, costs.core)
    return HermesResult(
        config=cfg, model=model, hardware=hw.name, dimms=dimms,
        provenance={"ndp": f"{costs.backend} backend ({ndp_words}), core {costs.core.n_units} "
                           "units; merges: DIMM-Link model",
                    "ndp_calibrated": ndp_calibrated,
                    "gpu": f"{costs.gpu.source}; other kernels on the roofline (sw/scenarios/gpu.py)",
                    "datacenter_gpu": f"{GpuModel(energy_cfg.datacenter.gpu()).source}; all-reduces "
                                      "from its measured table where the fit has one",
                    "pcie_cpu": "hardware file figures (sw/configs/hardware)",
                    "energy_price": "sw/configs/energy/hermes_energy.toml",
                    "traces": "synthetic" if trace is None else "replayed",
                    "sample_layers": workload.run.layers},
        costs=costs,
        systems={k: results[k] for k in SYSTEMS},
        ablations={k: results[k] for k in ABLATIONS if k in results},
        **extra, cold_int8=cold_int8, ndp_kernels=ndp_kernels, rtl_samples=rtl_samples,
        wall_seconds=time.perf_counter() - t_start)
