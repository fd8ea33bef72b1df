"""The TriMoE scenario: MoE layers across a GPU, an AMX CPU and NDP-DIMMs, with baselines.

One run (:func:`run_trimoe`, ``ndpdimm trimoe``) takes an MoE model and the hardware from the
catalogue (``sw/scenarios/trimoe/catalog.py``), a batch of tokens per step and a routing trace
(``sw/scenarios/trimoe/workload.py``), measures the devices' costs (``costs.py``: the NDP
expert through the driver), simulates the MoE layers of every system
(``simulate.py``, where the systems, the scheduling and the layout management are described)
and returns the typed result.
"""

import dataclasses
import time
import warnings

from ndpdimm.sw.driver.dimm import cycles_source
from ndpdimm.sw.scenarios.base import Result, RunContext, cost_dimm
from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model, load_trimoe_hardware
from ndpdimm.sw.scenarios.trimoe.config import SYSTEMS, TriMoeConfig
from ndpdimm.sw.scenarios.trimoe.costs import ELEM, DomainCosts, measure_domain_costs
from ndpdimm.sw.scenarios.trimoe.simulate import SystemResult, simulate
from ndpdimm.sw.scenarios.trimoe.workload import make_traces

__all__ = ["TriMoeConfig", "SYSTEMS", "SystemResult", "TriMoeResult", "run"]


@dataclasses.dataclass(frozen=True)
class TriMoeResult(Result):
    """One TriMoE run: every system of ``config.systems``, the trace, the measured costs and where
    every number came from; ``ndp_kernels`` / ``rtl_samples`` only when there were NDP kernels /
    samples were asked for."""
    OPTIONAL = ("ndp_kernels", "rtl_samples")
    config: TriMoeConfig
    model: object                        # catalog.MoeShape
    hardware: object                     # catalog.TriMoeHardware
    trace: dict
    provenance: dict
    costs: DomainCosts
    systems: dict                        # name -> SystemResult
    wall_seconds: dict
    tokens_per_step: int
    moe_layers: int
    notes: str
    ndp_kernels: dict | None = None
    rtl_samples: dict | None = None


def check_setup(model, hw) -> None:
    """Refuse, before any work, a model whose routed experts do not fit the DIMMs that hold them
    (the CPU's memory is the NDP-DIMMs; the GPU caches some): ``ValueError`` with the sizes."""
    need = model.moe_layers * model.experts * model.expert_bytes(ELEM)
    room = hw.ndp.dimms * hw.ndp.capacity_gb * 1e9
    if need > room:
        raise ValueError(f"{model.name}: its routed experts ({model.moe_layers} MoE layers x "
                         f"{model.experts} x {model.expert_bytes(ELEM) / 1e6:.1f} MB = "
                         f"{need / 1e9:.1f} GB) do not fit the {hw.ndp.dimms} NDP-DIMMs of "
                         f"{hw.name} ({room / 1e9:.1f} GB): give a --hardware file with more or "
                         "larger DIMMs")


def run(cfg: TriMoeConfig | None = None, ctx: RunContext | None = None, *,
        costs: DomainCosts | None = None, progress=None) -> TriMoeResult:
    """The whole comparison (see the module docstring) of ``cfg`` (default
    :class:`TriMoeConfig`). ``ctx`` (:class:`~ndpdimm.sw.scenarios.base.RunContext`): the log, the
    timeline every system's schedule is laid on (``--timeline``, docs/trimoe.md), the kernel log
    the ``trimoe`` system's NDP expert executions go into and the request to replay a sample of
    them on the RTL of the same core (the result's ``rtl_samples``). ``costs`` reuses measured
    costs (else measured here); ``progress(system, step, steps)`` is called after each
    simulated step."""
    cfg = TriMoeConfig() if cfg is None else cfg
    ctx = RunContext() if ctx is None else ctx
    timeline, kernels = ctx.timeline, ctx.kernels
    t0 = time.perf_counter()
    model = load_moe_model(cfg.model)
    hw = load_trimoe_hardware(cfg.hardware)
    check_setup(model, hw)
    profile, run_loads, meta = make_traces(cfg, model)
    core = cfg.core()
    t_cost = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if costs is None:
            ctx.log(f"measuring NDP expert and DIMM-Link costs on the {cfg.backend} backend ...")
            with cost_dimm(cfg.backend, core) as dimm:
                costs = measure_domain_costs(model, hw, dimm, seed=cfg.seed, link_ber=cfg.link_ber)
    t_cost = time.perf_counter() - t_cost
    summaries = {s: simulate(s, cfg, model, hw, costs, profile, run_loads, progress, timeline,
                             kernels if s == "trimoe" else None) for s in cfg.systems}
    if timeline is not None:
        timeline.metadata.update({
            "scenario": "trimoe", "model": model.name, "systems": list(cfg.systems),
            "tokens_per_step": cfg.batch, "steps": int(run_loads.shape[0]),
            "sample_layers": int(run_loads.shape[1]), "moe_layers": model.moe_layers,
            "simulated": f"{run_loads.shape[1]} sampled MoE layers of {model.moe_layers} per step, "
                         f"{run_loads.shape[0]} steps, one process per system",
            "ndp_backend": costs.ndp_cost.backend, "time_unit": "seconds of each system's run",
            "layout": "layers one after another, each as long as its contended makespan; each "
                      "device runs its tasks in turn from the layer's start; the time charged "
                      "beyond the layers (relayouts back, rebalancing, prefetch stall) after "
                      "each step's layers (sw/scenarios/trimoe/simulate.py)"})
    ndp_kernels = None
    if kernels.invocations():
        ndp_kernels = {"system": "trimoe", "backend": costs.ndp_cost.backend,
                       "kinds": kernels.summary(),
                       "note": "every NDP expert execution of the trimoe system's run, "
                               "uncontended cycles as its cost line gives them (the "
                               "host-read contention factor applied on top is not "
                               "replayed)"}
    if ctx.rtl_samples and not kernels.invocations():
        raise ValueError("--rtl-samples needs the trimoe system (with its NDP-DIMMs) in "
                         f"--systems, got {','.join(cfg.systems)}")
    rtl_samples = ctx.rtl_check(core)
    base = summaries.get("gpu_only")
    systems = {
        name: dataclasses.replace(r, speedup_vs_gpu_only=(
            base.moe_layer_latency_ms / r.moe_layer_latency_ms
            if base and r.moe_layer_latency_ms else None))
        for name, r in summaries.items()}
    ndp_words, ndp_calibrated = cycles_source(costs.ndp_cost.backend, core)
    return TriMoeResult(
        config=cfg, model=model, hardware=hw,
        trace={"meta": meta, "profile_steps": int(profile.shape[0]),
               "run_steps": int(run_loads.shape[0]),
               "mean_tokens_per_active_expert": float(run_loads[run_loads > 0].mean()),
               "active_experts_per_layer": float((run_loads > 0).sum(axis=2).mean())},
        provenance={
            "ndp_expert": f"{costs.ndp_cost.backend} backend ({ndp_words}), NdpCore "
                          f"{core.n_units} units, {core.act_lanes} activation lanes (driver API, "
                          "sw/kernels/expert.py)",
            "ndp_calibrated": ndp_calibrated,
            "dimm_link": None if costs.link is None else
            f"{costs.link.backend}, bit-error rate {costs.link.ber:g}",
            "gpu": f"an expert's three GEMMs on the {costs.gpu_model.source} "
                   "(sw/scenarios/gpu.py, sw/scenarios/trimoe/costs.py)",
            "cpu": "AMX roofline with the hardware file's efficiency curve "
                   "(sw/scenarios/trimoe/costs.py)",
            "warnings": sorted({str(w.message) for w in caught})},
        costs=costs, systems=systems,
        wall_seconds={"costs": t_cost, "total": time.perf_counter() - t0},
        tokens_per_step=cfg.batch, moe_layers=model.moe_layers,
        notes="MoE layers only; layer latency is the scheduled makespan with NDP contention",
        ndp_kernels=ndp_kernels, rtl_samples=rtl_samples)
