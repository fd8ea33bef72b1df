"""TriMoE benchmark: the results table for every model and batch, and what the scenario costs to run.

``ndpdimm bench --suite trimoe`` runs :func:`~ndpdimm.sw.scenarios.trimoe.scenario.run` with
the default configuration (16 NDP-DIMMs of 256 units on the calibrated model
backend, the H100 + Xeon AMX system, 16 steps x 4 sampled MoE layers) for
each model of the catalogue at 64, 256 and 768 tokens per step, and writes
``bench/results/trimoe.json``:

* ``runs``: per model and batch, every system's MoE layer latency, throughput,
  per-domain utilisation, expert execution shares, GPU hit rate, migration
  share, and the EMA predictor's accuracy;
* ``scheduler``: the scheduler's wall time per layer (mean and max over every
  layer of every step and system) and its refinement moves, per model (the
  number of routed experts per layer is the model's: 160 for DeepSeek-V2);
* ``timing``: wall seconds of measuring the costs (once per model) and of
  each full run, this machine's.

The figures are model outputs (``sw/scenarios/trimoe/scenario.py`` says where each comes from).
"""

import os
import platform
import time

from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.scenarios.base import RunContext, cost_dimm
from ndpdimm.sw.scenarios.trimoe.catalog import (
    list_moe_models,
    load_moe_model,
    load_trimoe_hardware,
)
from ndpdimm.sw.scenarios.trimoe.costs import measure_domain_costs
from ndpdimm.sw.scenarios.trimoe.scenario import SYSTEMS, TriMoeConfig, run

__all__ = ["run_trimoe_bench", "BATCHES"]

BATCHES = (64, 256, 768)


def run_trimoe_bench(out="bench/results/trimoe.json", models=None, batches=BATCHES, steps=None,
                     log=print) -> dict:
    """Run every model x batch (see the module docstring) and write the JSON; returns it."""
    models = list_moe_models() if models is None else list(models)
    runs, sched, timing = [], [], []
    t0 = time.perf_counter()
    for name in models:
        base = TriMoeConfig(model=name) if steps is None else TriMoeConfig(model=name, steps=steps)
        model, hw = load_moe_model(name), load_trimoe_hardware(base.hardware)
        tc = time.perf_counter()
        with cost_dimm("model", base.core()) as dimm:
            costs = measure_domain_costs(model, hw, dimm, seed=base.seed)
        cost_s = time.perf_counter() - tc
        for batch in batches:
            cfg = TriMoeConfig(**{**base.__dict__, "batch": batch})
            log(f"[bench trimoe] {name}, {batch} tokens/step")
            tr = time.perf_counter()
            r = run(cfg, RunContext(log=None), costs=costs)
            wall = time.perf_counter() - tr
            systems = r.systems

            def each(field, systems=systems):
                return {k: getattr(systems[k], field) for k in SYSTEMS}

            runs.append({
                "model": name, "batch": batch,
                **{f: each(f) for f in ("moe_layer_latency_ms", "throughput_tokens_per_s",
                                        "speedup_vs_gpu_only", "utilisation", "execution_share",
                                        "gpu_hit_rate", "migration_stall_share",
                                        "migration_ndp_share")},
                "predictor": systems["trimoe"].predictor,
                "active_experts_per_layer": r.trace["active_experts_per_layer"],
            })
            timing.append({"model": name, "batch": batch, "wall_seconds": wall})
            sched.append({"model": name, "batch": batch, "experts": model.experts,
                          "seconds_per_layer_mean": {k: systems[k].scheduler["seconds_per_layer_mean"]
                                                     for k in SYSTEMS},
                          "seconds_per_layer_max": max(systems[k].scheduler["seconds_per_layer_max"]
                                                       for k in SYSTEMS),
                          "refinement_moves_mean": {k: systems[k].scheduler["iterations_mean"]
                                                    for k in SYSTEMS}})
            t = systems["trimoe"]
            log(f"    TriMoE {t.moe_layer_latency_ms:.3f} ms/layer "
                f"({t.speedup_vs_gpu_only:.2f}x GPU only), {wall:.1f} s wall")
        timing.append({"model": name, "cost_measurement_seconds": cost_s})
    result = {
        "what": "TriMoE scenario, default configuration per model and batch (sw/scenarios/trimoe/bench.py)",
        "command": "ndpdimm bench --suite trimoe",
        "config": {k: v for k, v in TriMoeConfig().__dict__.items() if k not in ("model", "batch")},
        "runs": runs, "scheduler": sched, "timing": timing,
        "total_wall_seconds": time.perf_counter() - t0,
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
    }
    path = write_json(result, out)
    log(f"[bench trimoe] wrote {path} ({result['total_wall_seconds']:.0f} s)")
    return result
