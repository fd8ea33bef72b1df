"""The RAPID scenario: power-aware disaggregated prefill/decode serving on one 8-GPU node, with an
NDP-DIMM decode tier, all configurations on the same trace in one run.

Configurations (``SYSTEMS``), every one under the node budget (checked before it runs):

* ``coalesced``: no disaggregation; every GPU prefills and decodes its own requests, all at
  ``budget / gpus`` (600 W by default);
* ``static-4p4d``: 4 prefill + 4 decode GPUs at 600 W; ``static-4p750-4d450``: the same roles,
  prefill at 750 W and decode at 450 W;
* ``dynamic-power``: starts as ``static-4p4d``; the controller moves power between phases;
* ``dynamic``: also switches GPU roles (fully dynamic);
* ``<system>+ndp``: the same with the decode tier's attention on NDP-DIMMs. The DIMMs' peak
  draw is taken out of the node budget first, from the decode GPUs' caps (in 10 W steps, down
  to the minimum cap, then from the prefill GPUs'), so the comparison holds the node's power
  constant; a tier whose reserve does not fit is refused before anything runs.

``mode`` picks which controlled systems run: ``static`` (none), ``dynamic-power``, ``dynamic``
or ``all``; the NDP variant is made of the controlled system (``static-4p4d`` in ``static``
mode), and of both in ``all``.

SLOs: TTFT defaults to the ``baseline_percentile`` (90th) TTFT of ``static-4p4d`` on the steady
version of the same workload (same duration and seed; a recorded trace is its own baseline);
TPOT defaults to 50 ms (``DEFAULT_TPOT_SLO_S``, an interactive-serving target: DistServe and
Splitwise use 0.1-0.2 s for chat, tighter for coding). Both can be given.

The NDP tier's attention cycles are measured through the driver API on ``backend``
(:func:`ndpdimm.sw.kernels.attention.ndp_attention_cost`): ``model`` (calibrated model, the default
256-unit core) or ``rtl`` (the Verilated core, 16 units: the 256-unit RTL build takes tens of
minutes). Everything else comes from the documented models of ``sw/scenarios/rapid/perf.py`` with the
numbers of ``sw/configs/rapid/`` and ``sw/configs/serving_models/``; the result records which.
"""

import dataclasses
import math
import time
import warnings

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.attention import ndp_attention_cost
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.stats import check_samples_request
from ndpdimm.sw.scenarios.energy import load_energy
from ndpdimm.sw.scenarios.rapid.catalog import KV_PATHS, load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.controller import Controller
from ndpdimm.sw.scenarios.rapid.perf import NdpAttention, ServingPerf
from ndpdimm.sw.scenarios.rapid.simulator import ServingSim
from ndpdimm.sw.scenarios.rapid.timeline import lay_run
from ndpdimm.sw.scenarios.rapid.workload import PATTERNS, generate_trace, load_trace, load_workload

__all__ = ["RapidConfig", "run_rapid", "systems_for", "MODES", "DEFAULT_TPOT_SLO_S",
           "measure_ndp_attention", "summarize", "baseline_ttft_slo"]

MODES = ("static", "dynamic-power", "dynamic", "all")
DEFAULT_TPOT_SLO_S = 0.05
_BASE = ("coalesced", "static-4p4d", "static-4p750-4d450")


@dataclasses.dataclass(frozen=True)
class RapidConfig:
    model: str = "llama3.1-8b"
    node: str = "mi300x-node"
    workload: str = "mixed"
    pattern: str = "bursty"
    duration_s: float = 600.0
    rate_scale: float = 1.0
    seed: int = 0
    trace: str | None = None                # a recorded trace file instead of the generator
    kv_path: str = "direct"
    mode: str = "dynamic"
    ndp: bool = True                        # also run the NDP-DIMM decode tier variant(s)
    backend: str = "model"
    units: int | None = None                # GEMV units of the NDP core (None: 256 model, 16 rtl)
    ndp_dimms: int | None = None            # NDP-DIMMs in the node (None: the node file's)
    ttft_slo_s: float | None = None         # None: from the baseline (see the module docstring)
    tpot_slo_s: float = DEFAULT_TPOT_SLO_S

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.kv_path not in KV_PATHS:
            raise ValueError(f"kv_path must be one of {', '.join(KV_PATHS)}, got {self.kv_path!r}")
        if self.backend not in ("model", "rtl"):
            raise ValueError(f"backend must be 'model' or 'rtl', got {self.backend!r}")
        for name in ("duration_s", "rate_scale"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("ttft_slo_s", "tpot_slo_s"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not 0 < v < math.inf):
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.units is not None and (isinstance(self.units, bool) or not isinstance(
                self.units, int) or not 1 <= self.units <= 4096):
            raise ValueError(f"units must be an int in [1, 4096] or None, got {self.units!r}")
        if self.ndp_dimms is not None and (isinstance(self.ndp_dimms, bool) or not isinstance(
                self.ndp_dimms, int) or not 1 <= self.ndp_dimms <= 1024):
            raise ValueError(f"ndp_dimms must be an int in [1, 1024] or None, got "
                             f"{self.ndp_dimms!r}")

    @property
    def core_units(self) -> int:
        return self.units if self.units is not None else (256 if self.backend == "model" else 16)


def systems_for(mode: str, ndp: bool) -> list:
    """The configurations a run compares (see the module docstring)."""
    controlled = {"static": [], "dynamic-power": ["dynamic-power"], "dynamic": ["dynamic"],
                  "all": ["dynamic-power", "dynamic"]}[mode]
    out = list(_BASE) + controlled
    if ndp:
        out += [f"{s}+ndp" for s in (controlled or ["static-4p4d"])]
    return out


def _layout(system: str, node, ndp_reserved_w: float) -> tuple:
    """(roles, caps, controller mode or None) of a configuration."""
    n, budget = node.node.gpus, node.node.power_budget_w
    even = math.floor(budget / n / 10) * 10
    base = system.removesuffix("+ndp")
    if base == "coalesced":
        return ["coalesced"] * n, [even] * n, None
    half = n // 2
    roles = ["prefill"] * half + ["decode"] * (n - half)
    if base == "static-4p750-4d450":
        caps = [750.0] * half + [450.0] * (n - half)
    elif base in ("static-4p4d", "dynamic-power", "dynamic"):
        caps = [even] * n
    else:
        raise ValueError(f"unknown system {system!r}")
    if ndp_reserved_w:
        # the DIMMs' reserve comes out of the decode caps, down to the minimum, then prefill's
        floor = node.node.gpu_min_cap_w
        need = ndp_reserved_w
        for part in (range(half, n), range(half)):
            room = sum(caps[i] - floor for i in part)
            take = min(need, room)
            cut = math.ceil(take / len(part) / 10) * 10
            for i in part:
                caps[i] = max(floor, caps[i] - cut)
            need -= take
        if need > 1e-9 or sum(caps) + ndp_reserved_w > budget:
            raise ValueError(f"the NDP-DIMM tier's {ndp_reserved_w:.0f} W peak reserve does not "
                             f"fit the {budget:.0f} W budget above every GPU's minimum cap")
    return roles, [float(c) for c in caps], (base if base.startswith("dynamic") else None)


def _core(cfg: RapidConfig) -> CoreConfig:
    return CoreConfig(n_units=cfg.core_units, act_lanes=min(cfg.core_units, 256))


def measure_ndp_attention(cfg: RapidConfig, model, log=None) -> NdpAttention:
    """The attention line through the driver API on ``cfg.backend`` (see the module docstring)."""
    core = _core(cfg)
    kwargs = {"functional": False} if cfg.backend == "model" else {}
    contexts = (128, 512) if cfg.backend == "model" else (32, 96)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with Dimm(cfg.backend, core, **kwargs) as dimm:
            line = ndp_attention_cost(model.head_dim, model.heads // model.kv_heads, dimm,
                                          samples=contexts)
    if log:
        for w in {str(w.message) for w in caught}:
            log(f"[rapid] note: {w}")
    return NdpAttention(line.fixed, line.slope, cfg.backend, cfg.core_units, line.samples)


def _percentiles(x, ps=(50, 90, 99)) -> dict:
    return {f"p{p}": float(np.percentile(x, p)) for p in ps} if len(x) else {}


def summarize(system: str, sim: ServingSim, slo_ttft_s: float, slo_tpot_s: float,
              duration_s: float, wall_s: float) -> dict:
    """One configuration's metrics, time series and checks (JSON-ready)."""
    arrival, ttft, tpot, moves = sim.latencies()
    met = (ttft <= slo_ttft_s) & (tpot <= slo_tpot_s)
    n = len(ttft)
    energy = sim.gpu_energy_j() + sim.ndp_energy_j()
    power = energy / sim.end_t if sim.end_t > 0 else 0.0
    qps = n / duration_s
    cdf_q = np.linspace(0, 100, 101)
    s = sim.samples
    ctrl = sim.controller
    return {
        "system": system, "requests": n, "ndp_tier": sim.perf.ndp is not None,
        "kv_path": sim.kv_path_name,
        "goodput_rps": float(met.sum() / duration_s),
        "slo_attainment": float(met.mean()) if n else 0.0,
        "ttft_attainment": float((ttft <= slo_ttft_s).mean()) if n else 0.0,
        "tpot_attainment": float((tpot <= slo_tpot_s).mean()) if n else 0.0,
        "throughput_rps": qps, "mean_power_w": power, "qps_per_w": qps / power if power else 0.0,
        "goodput_per_w": float(met.sum() / duration_s) / power if power else 0.0,
        "energy_j": energy, "gpu_energy_j": sim.gpu_energy_j(), "ndp_energy_j": sim.ndp_energy_j(),
        "ttft_s": _percentiles(ttft), "tpot_s": _percentiles(tpot),
        "ttft_cdf_s": np.percentile(ttft, cdf_q).tolist() if n else [],
        "tpot_cdf_s": np.percentile(tpot, cdf_q).tolist() if n else [],
        "makespan_s": sim.end_t, "wall_s": wall_s,
        "sim_requests_per_wall_s": n / wall_s if wall_s > 0 else 0.0,
        "handovers": int(moves.sum()),
        "power_moves": sum(1 for a in sim.actions if a[1] == "power"),
        "role_switches": sum(1 for a in sim.actions if a[1] == "role"),
        "actions": [[t, k, d] for t, k, d in sim.actions],
        "decisions": [[t, p, d, a] for t, p, d, a in ctrl.history if a] if ctrl else [],
        "checks": {"budget_w": sim.ledger.budget_w,
                   "ndp_reserved_w": sim.ledger.reserved_other_w,
                   "max_reserved_w": sim.ledger.max_reserved_w,
                   "max_gpu_draw_w": sim.max_draw_w,
                   "finished_once": int(sim.finished) == n},
        "timeline": {"t": [x[0] for x in s], "roles": [list(x[1]) for x in s],
                     "caps_w": [list(x[2]) for x in s], "draw_w": [list(x[3]) for x in s],
                     "prefill_queue": [x[4] for x in s], "kv_ring": [x[5] for x in s],
                     "handover_wait": [x[6] for x in s], "decoding": [x[7] for x in s]},
    }


def _trace(cfg: RapidConfig, pattern: str):
    if cfg.trace is not None:
        return load_trace(cfg.trace)
    spec = load_workload(cfg.workload)
    return generate_trace(spec, cfg.duration_s, pattern=pattern, seed=cfg.seed,
                          rate_scale=cfg.rate_scale)


def _simulate(perf, trace, system, node, cfg, slo, log, controlled=True, record=False, kernels=None):
    roles, caps, mode = _layout(system, node, perf.ndp_reserved_w)
    ctrl = Controller(node.controller, mode, *slo) if mode and controlled else None
    t0 = time.perf_counter()

    def progress(done, total):
        if log and done % max(1, total // 4) < max(1, total // 100):
            log(f"[rapid]   {system}: {done}/{total} requests done")
    sim = ServingSim(perf, trace, roles, caps, kv_path=cfg.kv_path, controller=ctrl,
                     slo_ttft_s=slo[0], slo_tpot_s=slo[1], progress=progress, record=record,
                     kernels=kernels).run()
    return sim, time.perf_counter() - t0


def baseline_ttft_slo(perf: ServingPerf, trace, cfg: RapidConfig) -> float:
    """The default TTFT SLO: the node's ``baseline_percentile`` of TTFT when ``static-4p4d``
    (GPU decode) serves ``trace`` without SLOs."""
    sim, _ = _simulate(perf, trace, "static-4p4d", perf.node, cfg, (math.inf, math.inf), None)
    return float(np.percentile(sim.latencies()[1], perf.node.controller.baseline_percentile))


def timeline_default(mode: str) -> str:
    """The system ``--timeline`` records unless told: the mode's controlled system (the last
    one for ``all``), ``static-4p4d`` for ``static``."""
    return {"static": "static-4p4d", "dynamic-power": "dynamic-power"}.get(mode, "dynamic")


def run_rapid(cfg: RapidConfig = RapidConfig(), log=None, timeline=None,
              timeline_system: str | None = None, rtl_samples: int = 0, rtl_seed: int = 0,
              rtl_workers: int = 2) -> dict:
    """Every configuration of ``cfg`` on one trace; the result dict of the whole run.
    ``timeline``: the run of ``timeline_system`` (default :func:`timeline_default`) is laid on
    it (``--timeline``, docs/rapid.md). ``rtl_samples``: replay that many of the first NDP
    system's attention invocations on the RTL of the same core (``sw/sampling/``; seed
    ``rtl_seed``, ``rtl_workers`` Dask workers), the result's ``rtl_samples`` block."""
    check_samples_request(rtl_samples, rtl_seed, rtl_workers)
    if rtl_samples and not cfg.ndp:
        raise ValueError("--rtl-samples replays the NDP tier's kernels: it needs the NDP systems "
                         "(drop --no-ndp)")
    t_start = time.perf_counter()
    if timeline is not None:                       # before any simulation
        timeline_system = timeline_system or timeline_default(cfg.mode)
        if timeline_system not in systems_for(cfg.mode, cfg.ndp):
            raise ValueError(f"--timeline-system {timeline_system!r} is not run by --mode "
                             f"{cfg.mode}: one of {', '.join(systems_for(cfg.mode, cfg.ndp))}")
    model, node = load_serving_model(cfg.model), load_node(cfg.node)
    if cfg.ndp_dimms is not None:
        node = dataclasses.replace(node, ndp=dataclasses.replace(node.ndp, dimms=cfg.ndp_dimms))
    energy = load_energy()
    trace = _trace(cfg, cfg.pattern)
    if len(trace) == 0:
        raise ValueError("the trace has no requests: raise duration_s or rate_scale")
    duration = max(trace.duration_s, cfg.duration_s if cfg.trace is None else 0.0) or 1.0
    gpu_perf = ServingPerf(model, node)
    if log:
        log(f"[rapid] {model.name} on {node.name}: {len(trace)} requests ({trace.name}, "
            f"{duration:.0f} s), KV path {cfg.kv_path}")
    slo_ttft = cfg.ttft_slo_s
    baseline = None
    if slo_ttft is None:
        base_trace = trace if cfg.trace is not None or cfg.pattern == "steady" else _trace(cfg, "steady")
        if log:
            log(f"[rapid] TTFT SLO from static-4p4d on {base_trace.name} ...")
        slo_ttft = baseline_ttft_slo(gpu_perf, base_trace, cfg)
        baseline = {"trace": base_trace.name, "requests": len(base_trace),
                    "percentile": node.controller.baseline_percentile, "ttft_s": slo_ttft}
    slo = (slo_ttft, cfg.tpot_slo_s)
    if log:
        log(f"[rapid] SLOs: TTFT {slo[0] * 1e3:.0f} ms, TPOT {slo[1] * 1e3:.0f} ms")
    systems = systems_for(cfg.mode, cfg.ndp)
    ndp_perf = attention = None
    if cfg.ndp:
        if log:
            log(f"[rapid] NDP attention through the driver ({cfg.backend} backend, "
                f"{cfg.core_units} units) ...")
        attention = measure_ndp_attention(cfg, model, log)
        e = energy
        ndp_perf = ServingPerf(model, node, attention, e.dram.dimm_background_w, e.ndp.idle_w,
                               e.ndp.core_busy_w, e.dram.dimm_pj_per_bit, e.ndp.mac_pj)
        for system in systems:                     # fail before any run, not midway
            if system.endswith("+ndp"):
                _layout(system, node, ndp_perf.ndp_reserved_w)
    results = []
    kernels, logged = KernelLog(), None
    for system in systems:
        perf = ndp_perf if system.endswith("+ndp") else gpu_perf
        if log:
            log(f"[rapid] {system} ...")
        recorded = timeline is not None and system == timeline_system
        mine = logged is None and system.endswith("+ndp")
        logged = system if mine else logged
        sim, wall = _simulate(perf, trace, system, node, cfg, slo, log, record=recorded,
                              kernels=kernels if mine else None)
        results.append(summarize(system, sim, slo[0], slo[1], duration, wall))
        if recorded:
            lay_run(sim, timeline, system)
            timeline.metadata.update({
                "scenario": "rapid", "system": system, "model": model.name, "node": node.name,
                "trace": trace.name, "requests": len(trace),
                "power_budget_w": node.node.power_budget_w,
                "ndp_reserved_w": perf.ndp_reserved_w, "time_unit": "simulated seconds",
                "simulated": f"every request of the trace on {system}, event by event",
                "end_s": sim.end_t})
    extra = {}
    if logged:
        extra["ndp_kernels"] = {"system": logged, "backend": attention.backend,
                                "kinds": kernels.summary(),
                                "note": "the decode tier's attention: per iteration, batch x "
                                        "layers x K/V heads invocations at the batch's mean "
                                        "context, cycles as charged (the line is linear in the "
                                        "context, so the total is exact)"}
    if rtl_samples:
        from ndpdimm.sw.sampling.replay import rtl_check  # imports the scenarios' recipes
        extra["rtl_samples"] = rtl_check(kernels, rtl_samples, rtl_seed, _core(cfg),
                                         workers=rtl_workers, say=log or print)
    out = {
        "scenario": "rapid",
        "config": dataclasses.asdict(cfg),
        "model": dataclasses.asdict(model), "node": node.name,
        "trace": {"name": trace.name, "requests": len(trace), "duration_s": duration,
                  "mean_input_tokens": float(np.mean(trace.input_tokens)),
                  "mean_output_tokens": float(np.mean(trace.output_tokens))},
        "slo": {"ttft_s": slo[0], "tpot_s": slo[1], "ttft_baseline": baseline},
        "power_budget_w": node.node.power_budget_w,
        "ndp_dimms": node.ndp.dimms,
        "systems": results,
        "provenance": {
            "gpu": "documented roofline and power-curve models (sw/scenarios/rapid/perf.py) with the "
                   f"numbers of sw/configs/rapid/{node.name}.toml",
            "ndp_attention": (f"{attention.backend} backend ("
                              f"{'Verilated RTL cycles' if attention.backend == 'rtl' else 'calibrated performance model'}, "
                              f"{attention.units} units): {attention.fixed_cycles:.0f} + "
                              f"{attention.slope_cycles:.2f} x context cycles per sequence, K/V "
                              f"head and layer") if attention else None,
            "ndp_power": "sw/configs/energy/hermes_energy.toml" if attention else None,
            "ndp_reserved_w": ndp_perf.ndp_reserved_w if ndp_perf else 0.0},
        "wall_s": time.perf_counter() - t_start,
        **extra,
    }
    return out
