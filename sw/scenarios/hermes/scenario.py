"""The Hermes scenario: decode of a dense LLM on one consumer GPU plus NDP-DIMMs, with baselines.

One run (:func:`run_hermes`, ``ndpdimm hermes``) takes a model and hardware
from the catalogue (``sw/configs/``), a batch size and a DIMM configuration,
and reports tokens/s, a time breakdown, energy and price for every system of
the comparison, with the predictor's accuracy and the DIMMs' load imbalance.

**Where every number comes from.**

* NDP kernels: measured through the driver API on a :class:`Dimm` of the
  chosen backend (``sw/scenarios/hermes/costs.py``): activated cold neurons (row gather
  of up/gate rows + column gather of down columns), dense QKV rows, decode
  attention per (sequence, K/V head) over the cached tokens, and the FP32
  ATOMIC_ADD that merges partial results over DIMM-Link (link model). Each is
  a line fitted to a few measured sizes; the run records the backend (``rtl``:
  the Verilated core's cycles, ``model``: the calibrated performance model)
  and the core configuration.
* GPU kernels: the roofline model (``sw/scenarios/gpu.py``) with the efficiency
  factors of the hardware file; PCIe transfers: ``latency + bytes /
  bandwidth`` (hardware file); the host CPU of the PowerInfer-like baseline:
  ``max(bytes / (bandwidth x efficiency), flops / peak)``.
* Activations: synthetic traces (``sw/scenarios/hermes/traces.py``, parameters in
  :class:`HermesConfig`), one per sequence of the batch; a batch activates
  the union of its sequences' neurons. A *profiling* trace (other seeds, same
  model seed) drives the offline placement and the predictor's table; the
  *run* trace is what the systems execute. ``sample_layers`` distinct layers
  are simulated and layer ``l`` of the model replays sample ``l mod S`` with
  its own placement (the ILP places all layers).
* Energy and price: ``sw/scenarios/hermes/energy.py`` (sources in its TOML).

**Decode step of one layer, Hermes** (``B`` sequences, context ``c``):

1. QKV: the ILP's share ``q`` of the rows on the GPU, the rest dense on the
   DIMMs (rows split evenly); the normed input goes to the DIMMs over PCIe;
   the GPU's q/K/V rows go to the DIMMs (the KV cache lives there).
2. Attention on the DIMMs: the ``B x kv_heads`` (sequence, K/V head) pairs
   dealt round-robin, each ``attention(c)``; the heads' outputs return over
   PCIe; the output projection runs on the GPU.
3. MLP: the input goes to the DIMMs; the GPU computes its predicted-active hot
   neurons while each DIMM computes its predicted-active cold neurons, the
   DIMMs' FP32 partial sums merge along the chain by ATOMIC_ADD in 4 KiB
   chunks (pipelined: ``(chunks + D - 2)`` chunk times), the merged sum
   returns over PCIe and the GPU adds it.
4. The predictor runs on the GPU (one kernel per layer).

Each phase takes the slower of its concurrent branches; the breakdown charges
a phase to the branch that set its time. The LM head runs on the GPU.

**Baselines** (same GPU, same trace, same predictions):
``flexgen`` keeps a uniform share of every layer on the GPU and streams the
rest over PCIe each token, overlapped with compute (the KV cache stays on the
GPU as far as it fits, the rest in host memory, read over PCIe each step - the
same for the two baselines after it); ``dejavu`` also keeps the
most frequent neurons resident and streams only the predicted-active others
(attention streamed densely); ``powerinfer`` places hot neurons (and a share
of QKV/output rows) on the GPU with the same ILP, the DIMM side replaced by
the host CPU reading host DRAM; ``ndp_dense`` is the NDP system without
sparsity (placement by the ILP with every neuron firing, the DIMMs compute all
cold neurons); ``datacenter`` is ``[datacenter]`` A100s in tensor parallel
(two all-reduces per layer over NVLink). Ablations of Hermes:
``random`` placement (the ILP's hot counts, random neurons, random balanced
DIMMs), ``offline`` (ILP + snake split only), ``online`` (+ every
``adjust_window`` tokens in which the DIMMs' side of the MLP was the slower,
the window's least active hot and most active cold neurons swap between GPU
and DIMMs when the cold one fired ``adjust_margin`` x window more often,
their weights over PCIe), and ``hermes``
(+ window-based DIMM remapping, ``sw/scenarios/hermes/remap.py``, weights over
DIMM-Link). Migrations are charged as time (not overlapped) and logged.

Prefill (TTFT) runs on the GPU for every single-GPU system, streaming the
weights that are not resident over PCIe once per layer (overlapped); NDP
systems also write the prompt's KV cache to the DIMMs.
"""

import dataclasses
import time
import warnings

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ

from ndpdimm.sw.scenarios.hermes.traces import ActivationTrace, synthetic_trace
from ndpdimm.sw.scenarios.catalog import Hardware, ModelShape, load_hardware, load_model
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.costs import (
    link_merge_cost, ndp_attention_cost, ndp_dense_cost, ndp_neuron_cost,
)
from ndpdimm.sw.scenarios.hermes.energy import (
    EnergyModel, PriceCatalog, Usage, reference_gpu, load_energy,
)
from ndpdimm.sw.scenarios.hermes.partition import PartitionProblem, solve_partition
from ndpdimm.sw.scenarios.hermes.predictor import NeuronPredictor
from ndpdimm.sw.scenarios.hermes.remap import rebalance_layer

__all__ = ["HermesConfig", "Workload", "Costs", "make_workload", "measure_costs", "run_hermes",
           "SYSTEMS", "ABLATIONS"]

SYSTEMS = ("flexgen", "dejavu", "powerinfer", "ndp_dense", "hermes", "datacenter")
ABLATIONS = ("random", "offline", "online", "hermes")
MERGE_CHUNK = 4096
ELEM = 2                                   # FP16 weights and activations


@dataclasses.dataclass(frozen=True)
class HermesConfig:
    """One Hermes run. Trace parameters: see ``sw/scenarios/hermes/traces.py``."""
    model: str = "llama2-70b"
    hardware: str = "hermes"
    batch: int = 1
    dimms: int | None = None               # None: the hardware file's
    units: int = 256                       # GEMV multiplier units per NDP core
    act_lanes: int = 256
    backend: str = "model"
    prompt: int = 512                      # prompt tokens (prefill) = initial context
    tokens: int = 64                       # decode steps simulated
    profile_tokens: int = 64
    sample_layers: int = 4
    active_fraction: float = 0.1           # per sequence and token
    skew: float = 1.2
    token_similarity: float = 0.9
    layer_correlation: float = 0.8
    predictor_window: int = 16
    coefficient: float = 0.85
    adjust_window: int = 16
    adjust_swaps: int = 64                 # per layer and window
    adjust_margin: float = 0.25            # a swap needs this share of the window more firings
    remap_window: int = 32
    remap_threshold: float = 1.1
    remap_swaps: int = 64
    gpu_reserve_gb: float = 1.5            # CUDA context, activations, workspace (assumption)
    group: int = 256
    hot_share: float | None = None         # None: the ILP's; else forced share of MLP neurons
    cold_dtype: str = "fp16"               # "int8": cold neurons stored in INT8 on the DIMMs
    solver: str = "highs"
    seed: int = 0

    def __post_init__(self):
        ints = {"batch": (1, 16), "units": (1, 4096), "act_lanes": (1, 4096),
                "prompt": (1, 1 << 20), "tokens": (1, 1 << 16), "profile_tokens": (2, 1 << 16),
                "sample_layers": (1, 4096), "predictor_window": (1, 1024),
                "adjust_window": (1, 1 << 16), "adjust_swaps": (0, 1 << 20),
                "remap_window": (1, 1 << 16), "remap_swaps": (1, 1 << 20), "group": (1, 1 << 20),
                "seed": (0, 2 ** 62)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
        if self.dimms is not None and (isinstance(self.dimms, bool) or not isinstance(self.dimms, int)
                                       or not 1 <= self.dimms <= 64):
            raise ValueError(f"dimms must be an int in [1, 64] or None, got {self.dimms!r}")
        if self.backend not in ("model", "rtl"):
            raise ValueError(f"backend must be 'model' or 'rtl', got {self.backend!r}")
        if self.cold_dtype not in ("fp16", "int8"):
            raise ValueError(f"cold_dtype must be 'fp16' or 'int8', got {self.cold_dtype!r}")
        if self.solver not in ("highs", "cbc"):
            raise ValueError(f"solver must be 'highs' or 'cbc', got {self.solver!r}")
        floats = {"active_fraction": (1e-4, 0.9), "skew": (0.0, 4.0),
                  "token_similarity": (0.0, 0.999), "layer_correlation": (0.0, 1.0),
                  "coefficient": (0.05, 2.0), "remap_threshold": (1.0, 100.0),
                  "adjust_margin": (0.0, 1.0),
                  "gpu_reserve_gb": (0.0, 1e4)}
        for name, (lo, hi) in floats.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
        if self.hot_share is not None and (isinstance(self.hot_share, bool) or not isinstance(
                self.hot_share, (int, float)) or not 0 <= self.hot_share <= 1):
            raise ValueError(f"hot_share must be in [0, 1] or None, got {self.hot_share!r}")

    def core(self) -> CoreConfig:
        return CoreConfig(n_units=self.units, act_lanes=self.act_lanes)


# ---- workload: traces and predictions ----------------------------------------------------------

@dataclasses.dataclass
class Workload:
    """The activations a run executes and what the predictor said about them."""
    model: ModelShape
    batch: int
    profile: ActivationTrace               # [profile_tokens, S, ffn], batch union
    run: ActivationTrace                   # [tokens, S, ffn]
    predicted: np.ndarray                  # [tokens, S, ffn] bool
    predictor_memory: dict                 # bytes per part for one layer (full neuron count)
    fit_seconds: float
    predict_seconds: float


def _batch_trace(cfg: HermesConfig, model: ModelShape, tokens: int, seed_base: int) -> ActivationTrace:
    layers = min(cfg.sample_layers, model.layers)
    active = None
    for b in range(cfg.batch):
        t = synthetic_trace(tokens, layers, model.ffn, active_fraction=cfg.active_fraction,
                            skew=cfg.skew, token_similarity=cfg.token_similarity,
                            layer_correlation=cfg.layer_correlation, seed=seed_base + b,
                            model_seed=cfg.seed)
        active = t.active if active is None else active | t.active
    meta = dict(t.meta, batch=cfg.batch, seed=seed_base, note="union over the batch's sequences")
    return ActivationTrace(active, meta)


def make_workload(cfg: HermesConfig, model: ModelShape | None = None, trace: ActivationTrace | None = None,
                  log=None) -> Workload:
    """Profiling and run traces for ``cfg`` (``trace``: a recorded run trace to replay instead of
    the synthetic one; its layers are the samples) and the predictor's predictions on the run."""
    model = load_model(cfg.model) if model is None else model
    profile = _batch_trace(cfg, model, cfg.profile_tokens, 1_000_003 * (cfg.seed + 1))
    if trace is None:
        run = _batch_trace(cfg, model, cfg.tokens, 7 * (cfg.seed + 1) + 10_000)
    else:
        if not isinstance(trace, ActivationTrace):
            raise ValueError(f"trace must be an ActivationTrace, got {type(trace).__name__}")
        if trace.neurons != model.ffn or trace.layers > model.layers:
            raise ValueError(f"the trace has {trace.layers} layers x {trace.neurons} neurons; "
                             f"{model.name} has {model.layers} x {model.ffn}")
        if trace.tokens < cfg.tokens:
            raise ValueError(f"the trace has {trace.tokens} tokens, fewer than the {cfg.tokens} "
                             f"decode steps asked for")
        run = trace
        if trace.layers != profile.layers:
            profile = ActivationTrace(profile.active[:, :trace.layers] if trace.layers <= profile.layers
                                      else np.tile(profile.active, (1, -(-trace.layers // profile.layers), 1))
                                      [:, :trace.layers], profile.meta)
    t0 = time.perf_counter()
    predictor = NeuronPredictor(run.layers, model.ffn, window=cfg.predictor_window,
                                coefficient=cfg.coefficient, seed=cfg.seed).fit(profile)
    fit_s = time.perf_counter() - t0
    if log:
        log(f"[hermes] predictor table fitted on {profile.tokens} profiling tokens in {fit_s:.1f} s")
    t0 = time.perf_counter()
    predicted = np.zeros(run.active.shape, dtype=bool)
    for t in range(run.tokens):
        for s in range(run.layers):
            prev = run.active[t, s - 1] if s else None
            predicted[t, s] = predictor.predict(s, prev)
            predictor.observe(s, run.active[t, s], prev)
    memory = NeuronPredictor(1, model.ffn, window=cfg.predictor_window).memory_bytes(per_layer=True)
    return Workload(model, cfg.batch, profile, run, predicted, memory, fit_s,
                    time.perf_counter() - t0)


# ---- costs -------------------------------------------------------------------------------------

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
                           "backend": self.neuron.backend},
                "dense_rows": lin(self.dense), "attention": lin(self.attention),
                "merge": lin(self.merge)}


def measure_costs(cfg: HermesConfig, model: ModelShape, hardware: Hardware, log=None,
                  core: CoreConfig | None = None) -> Costs:
    """NDP kernel lines through the driver API on ``cfg.backend`` (see the module docstring);
    ``core`` overrides the core configuration ``cfg`` describes (units, activation lanes)."""
    t0 = time.perf_counter()
    core = cfg.core() if core is None else core
    kwargs = {"functional": False} if cfg.backend == "model" else {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        # the RTL simulates every cycle: smaller samples (the fit is a line either way)
        rows = (64, 256, 1024) if cfg.backend == "model" else (16, 64, 128)
        contexts = (128, 512) if cfg.backend == "model" else (32, 96)
        with Dimm(cfg.backend, core, **kwargs) as dimm:
            neuron = ndp_neuron_cost(model, dimm, samples=rows, batch=cfg.batch,
                                     dtype=cfg.cold_dtype)
            dense = ndp_dense_cost(model, dimm, samples=rows, batch=cfg.batch)
            attention = ndp_attention_cost(model, dimm, samples=contexts)
        merge = link_merge_cost(core)
    if log:
        for w in {str(w.message) for w in caught}:
            log(f"[hermes] note: {w}")
    return Costs(GpuModel(hardware.gpu), hardware, neuron, dense, attention, merge, cfg.backend,
                 core, time.perf_counter() - t0)


# ---- accounting --------------------------------------------------------------------------------

class _Tally:
    """Critical-path time by component, busy times and traffic of one system's run."""

    def __init__(self):
        self.seconds = 0.0
        self.breakdown = {}
        self.gpu_busy = self.ndp_busy = self.cpu_busy = 0.0
        self.pcie_bytes = self.host_dram_bytes = self.dimm_dram_bytes = 0.0
        self.ndp_macs = self.link_bytes = 0.0
        self.active = self.active_on_gpu = 0
        self.imbalance = []                # per token: mean over layers of max/mean DIMM load
        self.migrations = 0
        self.migration_log = []

    def add(self, parts: dict):
        for k, v in parts.items():
            if v:
                self.breakdown[k] = self.breakdown.get(k, 0.0) + v
                self.seconds += v

    def phase(self, *branches):
        """Concurrent branches (dicts of component seconds): the slowest sets the time."""
        self.add(max(branches, key=lambda b: sum(b.values())))


@dataclasses.dataclass
class _Shape:
    """Per-layer sizes of a model at a batch."""
    model: ModelShape
    batch: int
    cold_dtype: str = "fp16"

    def __post_init__(self):
        m = self.model
        self.H, self.F, self.L = m.hidden, m.ffn, m.layers
        self.mats = 3 if m.mlp == "gated" else 2
        self.qkv_rows = m.hidden + 2 * m.kv_dim
        self.neuron_bytes = self.mats * m.hidden * ELEM
        self.cold_neuron_bytes = self.neuron_bytes // (2 if self.cold_dtype == "int8" else 1)
        self.qkv_bytes = self.qkv_rows * m.hidden * ELEM
        self.o_bytes = m.hidden * m.hidden * ELEM
        self.head_bytes = m.vocab * m.hidden * ELEM
        self.layer_bytes = self.qkv_bytes + self.o_bytes + self.F * self.neuron_bytes
        self.x_bytes = self.batch * m.hidden * ELEM

    def kv_bytes(self, context: int) -> float:
        """KV cache of the batch over all layers."""
        return float(self.batch * context * self.model.kv_bytes_per_token(ELEM))


def _gpu_mlp(costs, sh, n):
    """The GPU's share of an MLP: ``n`` neurons (up [and gate] rows, down columns)."""
    if n <= 0:
        return 0.0
    g = costs.gpu
    return (sh.mats - 1) * g.linear(sh.batch, int(n), sh.H).seconds + \
        g.linear(sh.batch, sh.H, int(n)).seconds


def _gpu_rows(costs, sh, rows, n_in=None):
    return costs.gpu.linear(sh.batch, int(rows), sh.H if n_in is None else n_in).seconds \
        if rows > 0 else 0.0


def _prefill(costs, sh, prompt, resident_per_layer, kv_to_dimms):
    """TTFT: every layer's GEMMs over the batch's prompt on the GPU, the weights not resident
    streamed over PCIe (overlapped), the KV cache written to the DIMMs when they hold it."""
    g, m, B = costs.gpu, sh.model, sh.batch
    tok = B * prompt
    t = 0.0
    for l in range(sh.L):
        comp = (g.linear(tok, sh.qkv_rows, sh.H).seconds + g.linear(tok, sh.H, sh.H).seconds +
                (sh.mats - 1) * g.linear(tok, sh.F, sh.H).seconds + g.linear(tok, sh.H, sh.F).seconds +
                g.attention(B, prompt, prompt, m.heads, m.kv_heads, m.head_dim).seconds)
        stream = costs.pcie(max(0.0, sh.layer_bytes - resident_per_layer[l]))
        t += max(comp, stream)
    if kv_to_dimms:
        t += costs.pcie(sh.kv_bytes(prompt))
    return t + g.linear(B, m.vocab, sh.H).seconds


# ---- the NDP systems (Hermes, its ablations, NDP without sparsity) -----------------------------

@dataclasses.dataclass
class _Placement:
    on_gpu: np.ndarray                     # [L, F] bool
    dimm: np.ndarray                       # [L, F] int, -1 on the GPU
    qkv_share: np.ndarray                  # [L] share of QKV rows on the GPU


def _ndp_run(cfg, costs, sh, wl, place, dimms, *, sparse=True, adjust=False, remap=False):
    """Decode ``cfg.tokens`` steps on GPU + ``dimms`` NDP-DIMMs; returns a _Tally."""
    tl = _Tally()
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    on_gpu, dimm = place.on_gpu.copy(), place.dimm.copy()
    g = costs.gpu
    clock = NDP_CLOCK_HZ
    neuron = costs.neuron
    pairs = B * m.kv_heads
    per_dimm_pairs = -(-pairs // dimms)
    merge_bytes = B * H * 4
    chunks = -(-merge_bytes // MERGE_CHUNK)
    merge_s = 0.0 if dimms == 1 else \
        (chunks + dimms - 2) * costs.merge.cycles(min(MERGE_CHUNK, merge_bytes)) / clock
    window = np.zeros((L, sh.F), dtype=np.int32)         # activations since the last adjustment
    side_gpu = side_ndp = 0.0                            # MLP time of each side since then
    remap_window = np.zeros((L, sh.F), dtype=np.int32)
    remap_tokens = []
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        act_t, pred_t = wl.run.active[t], wl.predicted[t]
        ratios = []
        for l in range(L):
            s = l % S
            act, pred = act_t[s], pred_t[s]
            q = float(place.qkv_share[l])
            gpu_rows = int(round(q * sh.qkv_rows))
            ndp_rows = -(-(sh.qkv_rows - gpu_rows) // dimms)
            # 1. QKV
            gpu_qkv = _gpu_rows(costs, sh, gpu_rows)
            ndp_qkv = costs.dense.seconds(ndp_rows) if ndp_rows else 0.0
            tl.phase({"gpu": gpu_qkv, "pcie": costs.pcie(B * gpu_rows * ELEM)},
                     {"pcie": costs.pcie(sh.x_bytes), "ndp": ndp_qkv})
            # 2. attention on the DIMMs, output projection on the GPU
            att = per_dimm_pairs * costs.attention.seconds(c)
            o = _gpu_rows(costs, sh, H)
            tl.add({"ndp": att, "pcie": costs.pcie(B * H * ELEM), "gpu": o})
            # 3. MLP
            if sparse:
                run_gpu = pred & on_gpu[l]
                run_ndp = pred & ~on_gpu[l]
            else:
                run_gpu, run_ndp = on_gpu[l], ~on_gpu[l]
            n_gpu = int(run_gpu.sum())
            k = np.bincount(dimm[l][run_ndp], minlength=dimms)
            ndp_mlp = np.where(k > 0, neuron.fixed_cycles + neuron.per_neuron_cycles * k, 0.0) / clock
            gpu_mlp = _gpu_mlp(costs, sh, n_gpu)
            side_gpu += gpu_mlp
            side_ndp += float(ndp_mlp.max())
            tl.phase({"gpu": gpu_mlp + (g.overhead_s if sparse else 0.0)},       # + predictor
                     {"pcie": costs.pcie(sh.x_bytes) + costs.pcie(merge_bytes),
                      "ndp": float(ndp_mlp.max()), "link": merge_s if k.sum() else 0.0})
            # busy time and traffic
            tl.gpu_busy += gpu_qkv + o + gpu_mlp
            tl.ndp_busy += float(ndp_mlp.sum()) + \
                (costs.dense.seconds(ndp_rows) * dimms if ndp_rows else 0.0) + \
                costs.attention.seconds(c) * pairs
            tl.pcie_bytes += sh.x_bytes * 2 + B * H * ELEM + merge_bytes + B * gpu_rows * ELEM
            kv = 2 * B * c * m.kv_dim * ELEM
            tl.dimm_dram_bytes += int(k.sum()) * sh.cold_neuron_bytes + \
                (sh.qkv_rows - gpu_rows) * H * ELEM + kv
            tl.ndp_macs += B * (int(k.sum()) * sh.mats * H + (sh.qkv_rows - gpu_rows) * H) + \
                2 * B * c * m.heads * m.head_dim
            tl.link_bytes += merge_bytes * (dimms - 1) if k.sum() else 0
            tl.active += int(act.sum())
            tl.active_on_gpu += int((act & on_gpu[l]).sum())
            if dimms > 1 and k.sum():
                ratios.append(float(k.max() / k.mean()))
            window[l] += act
            remap_window[l] += act
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
        tl.imbalance.append(float(np.mean(ratios)) if ratios else 1.0)
        remap_tokens.append(t)
        # online adjustment, only while the DIMMs' side of the MLP was the slower one (moving
        # active neurons to a GPU that is already the bottleneck would slow the step down)
        if adjust and (t + 1) % cfg.adjust_window == 0 and side_ndp > side_gpu:
            moved = _adjust(on_gpu, dimm, window, cfg.adjust_swaps,
                            max(1, int(cfg.adjust_margin * cfg.adjust_window)))
            for l, a, b in moved:
                tl.migration_log.append((t + 1, "gpu<->dimm", l, a, b))
            if moved:
                tl.migrations += 2 * len(moved)
                nbytes = 2 * len(moved) * sh.neuron_bytes
                tl.add({"migration": costs.pcie(nbytes)})
                tl.pcie_bytes += nbytes
        if adjust and (t + 1) % cfg.adjust_window == 0:
            window[:] = 0
            side_gpu = side_ndp = 0.0
        if remap and dimms > 1 and (t + 1) % cfg.remap_window == 0:
            for l in range(L):
                cold = dimm[l] >= 0
                loads = np.bincount(dimm[l, cold], weights=remap_window[l, cold], minlength=dimms)
                if loads.mean() > 0 and loads.max() > cfg.remap_threshold * loads.mean():
                    moves = rebalance_layer(remap_window[l][None], dimm[l], dimms, cfg.remap_swaps)
                    for n, a, b in moves:
                        tl.migration_log.append((t + 1, "dimm->dimm", l, n, (a, b)))
                    if moves:
                        tl.migrations += len(moves)
                        hops = sum(abs(a - b) for _, a, b in moves)
                        tl.link_bytes += hops * sh.neuron_bytes
                        # swaps run in both directions on the chain at once: the longer half
                        per = costs.merge.cycles(sh.neuron_bytes) / clock
                        tl.add({"migration": per * len(moves) / 2})
            remap_window[:] = 0
    return tl


def _adjust(on_gpu, dimm, window, max_swaps, margin):
    """Online adjustment: per layer, swap the window's most active cold neurons with its least
    active hot ones while the cold one fired at least ``margin`` more times (a swap costs two
    neurons' weights over PCIe); the cold one takes the hot one's DIMM slot."""
    moved = []
    for l in range(on_gpu.shape[0]):
        hot, cold = np.flatnonzero(on_gpu[l]), np.flatnonzero(~on_gpu[l])
        if not len(hot) or not len(cold):
            continue
        hot = hot[np.argsort(window[l, hot], kind="stable")][:max_swaps]
        cold = cold[np.argsort(-window[l, cold], kind="stable")][:max_swaps]
        for h, c in zip(hot, cold):
            if window[l, c] < window[l, h] + margin:
                break
            on_gpu[l, h], on_gpu[l, c] = False, True
            dimm[l, h], dimm[l, c] = dimm[l, c], -1
            moved.append((l, int(c), int(h)))
    return moved


# ---- the baselines without NDP -----------------------------------------------------------------

def _offload_run(cfg, costs, sh, wl, resident_share, hot=None, kv_stream=0.0):
    """FlexGen-like (``hot`` None: a uniform ``resident_share`` of every matrix stays on the GPU,
    the rest streams) or Deja Vu-like (``hot`` [L, F]: resident neurons; the predicted-active
    others stream; attention weights stream densely): per layer ``max(GPU, PCIe)``; the KV
    cache the GPU cannot hold streams too (``kv_stream`` bytes per layer and context token)."""
    tl = _Tally()
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    g = costs.gpu
    att_bytes = sh.qkv_bytes + sh.o_bytes
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        for l in range(L):
            s = l % S
            act, pred = wl.run.active[t, s], wl.predicted[t, s]
            att = _gpu_rows(costs, sh, sh.qkv_rows) + _gpu_rows(costs, sh, H) + \
                g.attention(B, 1, c, m.heads, m.kv_heads, m.head_dim).seconds
            if hot is None:
                n = sh.F
                stream = (1 - resident_share) * sh.layer_bytes
                tl.active_on_gpu += int(act.sum() * resident_share)
            else:
                n = int(pred.sum())
                stream = (1 - resident_share) * att_bytes + \
                    int((pred & ~hot[l]).sum()) * sh.neuron_bytes
                tl.active_on_gpu += int((act & hot[l]).sum())
            stream += kv_stream * c
            comp = att + _gpu_mlp(costs, sh, n) + (g.overhead_s if hot is not None else 0.0)
            tl.phase({"gpu": comp}, {"pcie": costs.pcie(stream)})
            tl.gpu_busy += comp
            tl.pcie_bytes += stream
            tl.host_dram_bytes += stream
            tl.active += int(act.sum())
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
    return tl


def _cpu_seconds(costs, sh, n_rows_equiv):
    """Host CPU: ``n_rows_equiv`` rows of the hidden size for the batch."""
    h = costs.hardware.host
    nbytes = n_rows_equiv * sh.H * ELEM
    flops = 2.0 * sh.batch * n_rows_equiv * sh.H
    return max(nbytes / (h.memory_bandwidth_gbs * 1e9 * h.memory_efficiency),
               flops / (h.fp32_tflops * 1e12))


def _powerinfer_run(cfg, costs, sh, wl, place, kv_stream=0.0):
    """Hot neurons and a share of QKV + output rows on the GPU, the rest on the host CPU; the KV
    cache the GPU cannot hold crosses PCIe each step (``kv_stream`` per layer and token)."""
    tl = _Tally()
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    g = costs.gpu
    rows = sh.qkv_rows + H
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        for l in range(L):
            s = l % S
            act, pred = wl.run.active[t, s], wl.predicted[t, s]
            gpu_rows = int(round(place.qkv_share[l] * rows))
            cpu_att = _cpu_seconds(costs, sh, rows - gpu_rows)
            gpu_att = _gpu_rows(costs, sh, gpu_rows)
            sync = costs.pcie(sh.x_bytes) * 2
            tl.phase({"gpu": gpu_att}, {"cpu": cpu_att, "pcie": sync if cpu_att else 0.0})
            attn = g.attention(B, 1, c, m.heads, m.kv_heads, m.head_dim).seconds
            if kv_stream:
                tl.add({"pcie": costs.pcie(kv_stream * c)})
                tl.pcie_bytes += kv_stream * c
                tl.host_dram_bytes += kv_stream * c
            n_gpu, n_cpu = int((pred & place.on_gpu[l]).sum()), int((pred & ~place.on_gpu[l]).sum())
            gpu_mlp = _gpu_mlp(costs, sh, n_gpu) + g.overhead_s
            cpu_mlp = _cpu_seconds(costs, sh, n_cpu * sh.mats)
            tl.add({"gpu": attn})
            tl.phase({"gpu": gpu_mlp}, {"cpu": cpu_mlp, "pcie": sync if n_cpu else 0.0})
            tl.gpu_busy += gpu_att + attn + gpu_mlp
            tl.cpu_busy += cpu_att + cpu_mlp
            tl.host_dram_bytes += ((rows - gpu_rows) + n_cpu * sh.mats) * H * ELEM
            tl.pcie_bytes += 4 * sh.x_bytes
            tl.active += int(act.sum())
            tl.active_on_gpu += int((act & place.on_gpu[l]).sum())
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
    return tl


def _datacenter_run(cfg, sh, dc):
    """``dc.count`` GPUs in tensor parallel: each holds 1/N of every matrix; two all-reduces of
    the batch's hidden vector per layer over NVLink (ring: 2 (N-1)/N of the bytes)."""
    tl = _Tally()
    g = GpuModel(dc.gpu())
    m, B, H, n = sh.model, sh.batch, sh.H, dc.count
    ar = 2 * g.overhead_s + 2 * (n - 1) / n * sh.x_bytes / (dc.nvlink_gbs * 1e9)
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        per_layer = (g.linear(B, -(-sh.qkv_rows // n), H).seconds + g.linear(B, H, -(-H // n)).seconds +
                     (sh.mats - 1) * g.linear(B, -(-sh.F // n), H).seconds +
                     g.linear(B, H, -(-sh.F // n)).seconds +
                     g.attention(B, 1, c, -(-m.heads // n), -(-m.kv_heads // n), m.head_dim).seconds)
        tl.add({"gpu": per_layer * sh.L, "nvlink": 2 * ar * sh.L})
        tl.add({"gpu": g.linear(B, -(-m.vocab // n), H).seconds})
        tl.gpu_busy += n * (per_layer * sh.L + g.linear(B, -(-m.vocab // n), H).seconds)
        tl.active += 1
        tl.active_on_gpu += 1
    return tl


# ---- one run -----------------------------------------------------------------------------------

def _int8_error() -> dict:
    """What INT8 cold neurons cost in accuracy, measured on the reduced model of
    ``sw/scenarios/hermes/decode.py`` (one decode step, batch 2, oracle prediction, model backend): the
    step's error against float64 torch, FP16 and INT8 cold neurons."""
    import torch
    from ndpdimm.sw.scenarios.hermes.decode import (
        HermesNdp, ReducedModel, make_placement, oracle_prediction, prefill,
    )
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


def _frequency(trace: ActivationTrace, layers: int) -> np.ndarray:
    f = trace.active.mean(axis=0)                          # [S, F]
    return f[np.arange(layers) % f.shape[0]]


def _placement(cfg, costs, sh, freq, dimms, *, gpu_budget, side_seconds, dense_rows,
               dense_side_seconds, capacity):
    """The ILP's placement (``side_seconds``: one activated neuron on the other side)."""
    g_neuron = _gpu_mlp(costs, sh, sh.F) / sh.F
    g_dense = _gpu_rows(costs, sh, dense_rows) - costs.gpu.overhead_s
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
        "tokens_per_s": sh.batch / step, "ms_per_step": 1e3 * step, "ttft_s": ttft,
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


def run_hermes(cfg: HermesConfig = HermesConfig(), *, workload: Workload | None = None,
               costs: Costs | None = None, log=print, trace: ActivationTrace | None = None,
               core: CoreConfig | None = None) -> dict:
    """Every system of the comparison and the ablations for ``cfg``; a JSON-ready dict.
    ``workload`` / ``costs``: reuse earlier ones (sweeps); ``trace``: a run trace to replay;
    ``core``: the NDP core's configuration if not the one ``cfg`` describes."""
    t_start = time.perf_counter()
    model, hw = load_model(cfg.model), load_hardware(cfg.hardware)
    dimms = hw.ndp.dimms if cfg.dimms is None else cfg.dimms
    sh = _Shape(model, cfg.batch, cfg.cold_dtype)
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
    energy_cfg = load_energy()
    energy = EnergyModel(energy_cfg, hw)
    prices = PriceCatalog(energy_cfg)
    gpu_bytes = hw.gpu.memory_gb * 1e9 - cfg.gpu_reserve_gb * 1e9 - sh.head_bytes
    kv_end = sh.kv_bytes(cfg.prompt + cfg.tokens)
    dimm_cap = hw.ndp.capacity_gb * 2 ** 30
    results = {}
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
    place = _Placement(part.on_gpu, part.dimm, part.dense_gpu_share)
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
        p.sum(axis=1) * sh.neuron_bytes                                   # noqa: E731

    runs = {}
    log(f"[hermes] decoding {cfg.tokens} steps on each system ...")
    runs["ndp_dense"] = _ndp_run(cfg, costs, sh, workload,
                                 _Placement(dense_part.on_gpu, dense_part.dimm,
                                            dense_part.dense_gpu_share), dimms, sparse=False)
    runs["random"] = _ndp_run(cfg, costs, sh, workload, _Placement(rand_gpu, rand_dimm,
                                                                   part.dense_gpu_share), dimms)
    runs["offline"] = _ndp_run(cfg, costs, sh, workload, place, dimms)
    runs["online"] = _ndp_run(cfg, costs, sh, workload, place, dimms, adjust=True)
    runs["hermes"] = _ndp_run(cfg, costs, sh, workload, place, dimms, adjust=True, remap=True)
    ttft_ndp = _prefill(costs, sh, cfg.prompt, resident(part.on_gpu, part.dense_gpu_share,
                                                        sh.qkv_rows), kv_to_dimms=True)
    ttft_dense = _prefill(costs, sh, cfg.prompt, resident(dense_part.on_gpu,
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
    runs["flexgen"] = _offload_run(cfg, costs, sh, workload, share, kv_stream=kv_stream)
    # Deja Vu-like: attention and the hottest neurons resident in the same proportion
    hot = np.zeros_like(part.on_gpu)
    order = np.argsort(-freq, axis=1, kind="stable")
    n_res = int(share * sh.F)
    for l in range(sh.L):
        hot[l, order[l, :n_res]] = True
    runs["dejavu"] = _offload_run(cfg, costs, sh, workload, share, hot=hot, kv_stream=kv_stream)
    cpu_neuron = _cpu_seconds(costs, sh, sh.mats)
    pi_rows = sh.qkv_rows + sh.H
    pi_part = _placement(cfg, costs, sh, freq, 1, gpu_budget=off_budget,
                         side_seconds=cpu_neuron, dense_rows=pi_rows,
                         dense_side_seconds=_cpu_seconds(costs, sh, pi_rows),
                         capacity=hw.host.memory_gb * 1e9)
    runs["powerinfer"] = _powerinfer_run(cfg, costs, sh, workload,
                                         _Placement(pi_part.on_gpu, pi_part.dimm,
                                                    pi_part.dense_gpu_share), kv_stream)
    ttft_off = _prefill(costs, sh, cfg.prompt, [share * sh.layer_bytes] * sh.L, kv_to_dimms=False)
    ttft_pi = _prefill(costs, sh, cfg.prompt, resident(pi_part.on_gpu, pi_part.dense_gpu_share,
                                                       pi_rows) - sh.o_bytes, kv_to_dimms=False)
    dc = energy_cfg.datacenter
    runs["datacenter"] = _datacenter_run(cfg, sh, dc)
    ttft_dc = _prefill(dataclasses.replace(costs, gpu=GpuModel(reference_gpu())), sh, cfg.prompt,
                       [sh.layer_bytes] * sh.L, kv_to_dimms=False) / dc.count

    ttft = {"flexgen": ttft_off, "dejavu": ttft_off, "powerinfer": ttft_pi,
            "ndp_dense": ttft_dense, "random": ttft_ndp, "offline": ttft_ndp, "online": ttft_ndp,
            "hermes": ttft_ndp, "datacenter": ttft_dc}
    system_of = {"random": "hermes", "offline": "hermes", "online": "hermes"}
    for name in SYSTEMS + ABLATIONS:
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
        results[name] = _summary(tl, cfg, sh, ttft[name], energy, usage, price, nd)
    # predictor accuracy over the cold neurons of the Hermes placement (sample layers' own)
    S = workload.run.layers
    cold = ~part.on_gpu[np.arange(S)]
    act, pred = workload.run.active, workload.predicted
    tp = int((act & pred & cold).sum())
    fp = int((~act & pred & cold).sum())
    fn = int((act & ~pred & cold).sum())
    mem = workload.predictor_memory
    extra = {
        "predictor": {"precision": tp / (tp + fp) if tp + fp else None,
                      "recall": tp / (tp + fn) if tp + fn else None,
                      "cold_active": tp + fn, "cold_predicted": tp + fp,
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
        "imbalance": {"static": results["online"]["imbalance"],
                      "remapped": results["hermes"]["imbalance"],
                      "remap_migrations": sum(1 for e in runs["hermes"].migration_log
                                              if e[1] == "dimm->dimm"),
                      "gpu_dimm_migrations": sum(1 for e in runs["hermes"].migration_log
                                                 if e[1] == "gpu<->dimm")},
        "migration_log": runs["hermes"].migration_log[:2000],
    }
    if cfg.cold_dtype == "int8":
        extra["cold_int8"] = _int8_error()
    return {
        "config": dataclasses.asdict(cfg), "model": dataclasses.asdict(model),
        "hardware": hw.name, "dimms": dimms,
        "provenance": {"ndp": f"{costs.backend} backend ({'Verilated RTL cycles' if costs.backend == 'rtl' else 'calibrated performance model'}), "
                              f"core {costs.core.n_units} units; merges: DIMM-Link model",
                       "gpu": "roofline model (sw/scenarios/gpu.py) with the hardware file's factors",
                       "pcie_cpu": "hardware file figures (sw/configs/hardware)",
                       "energy_price": "sw/configs/energy/hermes_energy.toml",
                       "traces": "synthetic" if trace is None else "replayed",
                       "sample_layers": workload.run.layers},
        "costs": costs.as_dict(),
        "systems": {k: results[k] for k in SYSTEMS},
        "ablations": {k: results[k] for k in ABLATIONS},
        **extra,
        "wall_seconds": time.perf_counter() - t_start,
    }
