"""The RAPID scenario: power-aware disaggregated prefill/decode serving on one 8-GPU node, with an
NDP-DIMM decode tier, all configurations on the same trace in one run.

Configurations (``SYSTEMS``), every one under the node budget (checked before it runs):

* ``coalesced``: no disaggregation; every GPU prefills and decodes its own requests, all at
  ``budget / gpus`` (600 W by default);
* ``static-4p4d``: 4 prefill + 4 decode GPUs at 600 W; ``static-4p750-4d450``: the same roles,
  prefill at 750 W and decode at 450 W;
* ``dynamic-power``: starts as ``static-4p4d``; the controller moves power between phases;
* ``dynamic``: also switches GPU roles (fully dynamic);
* ``<controlled system>+shift`` (``time_shift``): the same controller with power time-shifting
  (``timeshift.py``: in low-load periods the prefill GPUs' caps are raised with power decode does
  not need, and restored when the load rises);
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
minutes). Everything else comes from the documented models of ``sw/scenarios/rapid/costs.py`` with the
numbers of ``sw/configs/rapid/`` and ``sw/configs/serving_models/``; the result records which.
"""

import dataclasses
import math
import time

import numpy as np

from ndpdimm.cosim.provenance import without
from ndpdimm.sw.driver.dimm import cycles_source
from ndpdimm.sw.scenarios.base import Result, RunContext
from ndpdimm.sw.scenarios.catalog import ModelShape
from ndpdimm.sw.scenarios.energy import load_energy
from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.config import (
    DEFAULT_TPOT_SLO_S,
    MODES,
    TIME_SHIFT_SUFFIX,
    RapidConfig,
    systems_for,
)
from ndpdimm.sw.scenarios.rapid.controller import Controller
from ndpdimm.sw.scenarios.rapid.costs import ServingPerf, measure_ndp_attention
from ndpdimm.sw.scenarios.rapid.simulate import ServingSim
from ndpdimm.sw.scenarios.rapid.timeline import lay_run
from ndpdimm.sw.scenarios.rapid.workload import make_trace

__all__ = ["RapidConfig", "RapidResult", "SystemResult", "run", "systems_for", "MODES",
           "DEFAULT_TPOT_SLO_S", "baseline_ttft_slo", "timeline_default", "layout", "simulate_system",
           "summarize"]


def layout(system: str, node, ndp_reserved_w: float) -> tuple:
    """(roles, caps, controller mode or None) of a configuration."""
    n, budget = node.node.gpus, node.node.power_budget_w
    even = math.floor(budget / n / 10) * 10
    base = system.removesuffix("+ndp").removesuffix(TIME_SHIFT_SUFFIX)
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


def simulate_system(perf, trace, system, node, cfg, slo, log, controlled=True, record=False,
                    kernels=None):
    """``(ServingSim run to its end, wall seconds)`` of configuration ``system`` serving ``trace``
    on ``node`` (its roles and caps from :func:`layout`, its controller when ``controlled``,
    time-shifting for a ``+shift`` system) under the SLOs ``slo`` (TTFT, TPOT seconds);
    ``record``: keep what the timeline needs; ``kernels``: a kernel log of the NDP tier's
    attention."""
    roles, caps, mode = layout(system, node, perf.ndp_reserved_w)
    shift = node.time_shift if system.endswith(TIME_SHIFT_SUFFIX) else None
    ctrl = Controller(node.controller, mode, *slo, time_shift=shift) if mode and controlled else None
    t0 = time.perf_counter()

    def progress(done, total):
        if log and done % max(1, total // 4) < max(1, total // 100):
            log(f"[rapid]   {system}: {done}/{total} requests done")
    sim = ServingSim(perf, trace, roles, caps, kv_path=cfg.kv_path, controller=ctrl,
                     slo_ttft_s=slo[0], slo_tpot_s=slo[1], progress=progress, record=record,
                     kernels=kernels).run()
    return sim, time.perf_counter() - t0


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
                   "max_node_power_w": sim.max_draw_w + sim.ledger.reserved_other_w,
                   "finished_once": int(sim.finished) == n},
        "timeline": {"t": [x[0] for x in s], "roles": [list(x[1]) for x in s],
                     "caps_w": [list(x[2]) for x in s], "draw_w": [list(x[3]) for x in s],
                     "prefill_queue": [x[4] for x in s], "kv_ring": [x[5] for x in s],
                     "handover_wait": [x[6] for x in s], "decoding": [x[7] for x in s]},
    }


def baseline_ttft_slo(perf: ServingPerf, trace, cfg: RapidConfig) -> float:
    """The default TTFT SLO: the node's ``baseline_percentile`` of TTFT when ``static-4p4d``
    (GPU decode) serves ``trace`` without SLOs."""
    sim, _ = simulate_system(perf, trace, "static-4p4d", perf.node, cfg, (math.inf, math.inf), None)
    return float(np.percentile(sim.latencies()[1], perf.node.controller.baseline_percentile))


def timeline_default(mode: str) -> str:
    """The system ``--timeline`` records unless told: the mode's controlled system (the last
    one for ``all``), ``static-4p4d`` for ``static``."""
    return {"static": "static-4p4d", "dynamic-power": "dynamic-power"}.get(mode, "dynamic")


@dataclasses.dataclass(frozen=True)
class SystemResult(Result):
    """One configuration's metrics, time series and checks (``simulate.summarize``)."""
    system: str
    requests: int
    ndp_tier: bool
    kv_path: str
    goodput_rps: float
    slo_attainment: float
    ttft_attainment: float
    tpot_attainment: float
    throughput_rps: float
    mean_power_w: float
    qps_per_w: float
    goodput_per_w: float
    energy_j: float
    gpu_energy_j: float
    ndp_energy_j: float
    ttft_s: dict                          # p50, p90, p99
    tpot_s: dict
    ttft_cdf_s: list
    tpot_cdf_s: list
    makespan_s: float
    wall_s: float
    sim_requests_per_wall_s: float
    handovers: int
    power_moves: int
    role_switches: int
    actions: list
    decisions: list
    checks: dict
    timeline: dict


@dataclasses.dataclass(frozen=True)
class RapidResult(Result):
    """One RAPID run: every configuration on one trace, the SLOs and where the numbers came from;
    ``ndp_kernels`` / ``rtl_samples`` only with the NDP tier / when samples were asked for."""
    OPTIONAL = ("ndp_kernels", "rtl_samples")
    scenario: str
    config: RapidConfig
    model: ModelShape
    node: str
    trace: dict
    slo: dict
    power_budget_w: float
    ndp_dimms: int
    systems: list                         # SystemResult, in run order
    provenance: dict
    wall_s: float
    ndp_kernels: dict | None = None
    rtl_samples: dict | None = None

    @classmethod
    def from_dict(cls, d: dict) -> "RapidResult":
        """A result back from its JSON (``as_dict()``, e.g. a ``rapid.json`` read back), to report
        or plot again."""
        d = without(d)     # a written result starts with its provenance fields
        return cls(**{**d, "config": RapidConfig(**d["config"]), "model": ModelShape(**d["model"]),
                      "systems": [SystemResult(**s) for s in d["systems"]]})

    def system(self, name: str) -> SystemResult:
        """The configuration ``name``'s result (``KeyError`` naming the ones run)."""
        for s in self.systems:
            if s.system == name:
                return s
        raise KeyError(f"{name!r} was not run (ran: {', '.join(s.system for s in self.systems)})")


def run(cfg: RapidConfig | None = None, ctx: RunContext | None = None, *,
        timeline_system: str | None = None) -> RapidResult:
    """Every configuration of ``cfg`` (default :class:`RapidConfig`) on one trace. ``ctx``
    (:class:`~ndpdimm.sw.scenarios.base.RunContext`): the log, the timeline the run of
    ``timeline_system`` (default :func:`timeline_default`) is laid on (``--timeline``,
    docs/rapid.md), the kernel log the first NDP system's attention invocations go into and the
    request to replay a sample of them on the RTL of the same core (``rtl_samples``)."""
    cfg = RapidConfig() if cfg is None else cfg
    ctx = RunContext() if ctx is None else ctx
    log, timeline, kernels = ctx.log, ctx.timeline, ctx.kernels
    if ctx.rtl_samples and not cfg.ndp:
        raise ValueError("--rtl-samples replays the NDP tier's kernels: it needs the NDP systems "
                         "(drop --no-ndp)")
    t_start = time.perf_counter()
    if timeline is not None:                       # before any simulation
        timeline_system = timeline_system or timeline_default(cfg.mode)
        run_systems = systems_for(cfg.mode, cfg.ndp, cfg.time_shift)
        if timeline_system not in run_systems:
            raise ValueError(f"--timeline-system {timeline_system!r} is not run by --mode "
                             f"{cfg.mode}: one of {', '.join(run_systems)}")
    model, node = load_serving_model(cfg.model), load_node(cfg.node)
    if cfg.ndp_dimms is not None:
        node = dataclasses.replace(node, ndp=dataclasses.replace(node.ndp, dimms=cfg.ndp_dimms))
    gpu_perf = ServingPerf(model, node)
    gpu_perf.check_fits()
    energy = load_energy()
    trace = make_trace(cfg, cfg.pattern)
    if len(trace) == 0:
        raise ValueError("the trace has no requests: raise duration_s or rate_scale")
    duration = max(trace.duration_s, cfg.duration_s if cfg.trace is None else 0.0) or 1.0
    log(f"[rapid] {model.name} on {node.name}: {len(trace)} requests ({trace.name}, "
        f"{duration:.0f} s), KV path {cfg.kv_path}")
    slo_ttft = cfg.ttft_slo_s
    baseline = None
    if slo_ttft is None:
        base_trace = trace if cfg.trace is not None or cfg.pattern == "steady" else make_trace(cfg, "steady")
        log(f"[rapid] TTFT SLO from static-4p4d on {base_trace.name} ...")
        slo_ttft = baseline_ttft_slo(gpu_perf, base_trace, cfg)
        baseline = {"trace": base_trace.name, "requests": len(base_trace),
                    "percentile": node.controller.baseline_percentile, "ttft_s": slo_ttft}
    slo = (slo_ttft, cfg.tpot_slo_s)
    log(f"[rapid] SLOs: TTFT {slo[0] * 1e3:.0f} ms, TPOT {slo[1] * 1e3:.0f} ms")
    systems = systems_for(cfg.mode, cfg.ndp, cfg.time_shift)
    ndp_perf = attention = None
    if cfg.ndp:
        log(f"[rapid] NDP attention through the driver ({cfg.backend} backend, "
            f"{cfg.core_units} units) ...")
        attention = measure_ndp_attention(cfg, model, log)
        e = energy
        ndp_perf = ServingPerf(model, node, attention, e.dram.dimm_background_w, e.ndp.idle_w,
                               e.ndp.core_busy_w, e.dram.dimm_pj_per_bit, e.ndp.mac_pj)
        for system in systems:                     # fail before any run, not midway
            if system.endswith("+ndp"):
                layout(system, node, ndp_perf.ndp_reserved_w)
    results = []
    logged = None
    for system in systems:
        perf = ndp_perf if system.endswith("+ndp") else gpu_perf
        log(f"[rapid] {system} ...")
        recorded = timeline is not None and system == timeline_system
        mine = logged is None and system.endswith("+ndp")
        logged = system if mine else logged
        sim, wall = simulate_system(perf, trace, system, node, cfg, slo, log, record=recorded,
                                    kernels=kernels if mine else None)
        results.append(SystemResult(**summarize(system, sim, slo[0], slo[1], duration, wall)))
        if recorded:
            lay_run(sim, timeline, system)
            timeline.metadata.update({
                "scenario": "rapid", "system": system, "model": model.name, "node": node.name,
                "trace": trace.name, "requests": len(trace),
                "power_budget_w": node.node.power_budget_w,
                "ndp_reserved_w": perf.ndp_reserved_w, "time_unit": "simulated seconds",
                "simulated": f"every request of the trace on {system}, event by event",
                "end_s": sim.end_t})
    ndp_kernels = None
    if logged:
        ndp_kernels = {"system": logged, "backend": attention.backend, "kinds": kernels.summary(),
                       "note": "the decode tier's attention: per iteration, batch x "
                               "layers x K/V heads invocations at the batch's mean "
                               "context, cycles as charged (the line is linear in the "
                               "context, so the total is exact)"}
    rtl_samples = ctx.rtl_check(cfg.core())
    ndp_words, ndp_calibrated = cycles_source(attention.backend, cfg.core()) if attention \
        else (None, None)
    return RapidResult(
        scenario="rapid", config=cfg, model=model, node=node.name,
        trace={"name": trace.name, "requests": len(trace), "duration_s": duration,
               "mean_input_tokens": float(np.mean(trace.input_tokens)),
               "mean_output_tokens": float(np.mean(trace.output_tokens))},
        slo={"ttft_s": slo[0], "tpot_s": slo[1], "ttft_baseline": baseline},
        power_budget_w=node.node.power_budget_w, ndp_dimms=node.ndp.dimms, systems=results,
        provenance={
            "gpu": "documented roofline and power-curve models (sw/scenarios/rapid/costs.py) with the "
                   f"numbers of sw/configs/rapid/{node.name}.toml",
            "ndp_attention": (f"{attention.backend} backend ({ndp_words}, "
                              f"{attention.units} units): {attention.fixed_cycles:.0f} + "
                              f"{attention.slope_cycles:.2f} x context cycles per sequence, K/V "
                              f"head and layer") if attention else None,
            "ndp_calibrated": ndp_calibrated,
            "ndp_power": "sw/configs/energy/hermes_energy.toml" if attention else None,
            "ndp_reserved_w": ndp_perf.ndp_reserved_w if ndp_perf else 0.0},
        wall_s=time.perf_counter() - t_start, ndp_kernels=ndp_kernels, rtl_samples=rtl_samples)
