"""Hermes benchmark: tokens/s of every system for every model, and what the scenario costs to run.

``ndpdimm bench --suite hermes`` runs :func:`~ndpdimm.sw.scenarios.hermes.scenario.run` with
the default configuration (8 NDP-DIMMs of 256 units on the calibrated model
backend, the RTX 4090 system, batch 1 and 16, prompt 512, 64 decode steps)
for each model of the catalogue and writes ``bench/results/hermes.json``:

* ``runs``: per model and batch, decode tokens/s and tokens per joule of every system
  and ablation, end-to-end tokens/s (prefill + decode) of every system, Hermes' health figures (NDP utilisation, PCIe time share,
  hot-neuron hit rate), the predictor's operating point (the sparsest with cold recall at
  least the default floor, 0.9) and its precision / recall on cold neurons
  and the placement (hot share, QKV share on the GPU);
* ``timing``: wall seconds of each full-size run, of its placement ILP
  (solve only) and of fitting the predictor's table, measured here.

The figures are model outputs (see ``sw/scenarios/hermes/scenario.py`` for where each number
comes from); the wall times are this machine's.
"""

import os
import platform
import time

from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import list_models
from ndpdimm.sw.scenarios.hermes.config import ABLATIONS, SYSTEMS, HermesConfig
from ndpdimm.sw.scenarios.hermes.scenario import run

__all__ = ["run_hermes_bench"]


def run_hermes_bench(out="bench/results/hermes.json", models=None, batches=(1, 16), log=print) -> dict:
    """Run every model x batch (see the module docstring) and write the JSON; returns it."""
    models = list_models() if models is None else list(models)
    runs, timing = [], []
    t0 = time.perf_counter()
    for i, name in enumerate(models):
        for batch in batches:
            log(f"[bench hermes] {name}, batch {batch} ({i + 1}/{len(models)})")
            cfg = HermesConfig(model=name, batch=batch)
            try:
                r = run(cfg, RunContext(log=None))
            except ValueError as e:          # a configuration that cannot be built: say so, go on
                log(f"    failed: {e}")
                runs.append({"model": name, "batch": batch, "error": str(e)})
                continue
            every = {**r.systems, **r.ablations}
            h = r.systems["hermes"]
            runs.append({
                "model": name, "batch": batch,
                "tokens_per_s": {k: every[k].tokens_per_s for k in SYSTEMS + ABLATIONS},
                "e2e_tokens_per_s": {k: r.systems[k].e2e_tokens_per_s for k in SYSTEMS},
                "tokens_per_joule": {k: r.systems[k].tokens_per_joule for k in SYSTEMS},
                "hermes": {"ndp_utilisation": h.ndp_utilisation,
                           "pcie_time_share": h.pcie_time_share,
                           "hot_hit_rate": h.hot_hit_rate, "imbalance": h.imbalance},
                "speedup_vs": {k: h.tokens_per_s / every[k].tokens_per_s
                               for k in ("accelerate", "flexgen", "dejavu", "powerinfer", "ndp_dense")},
                "predictor": {k: r.predictor[k] for k in ("kind", "operating_point", "precision",
                                                          "recall", "recall_all",
                                                          "memory_kb_per_layer")},
                "placement": {k: r.placement[k] for k in ("hot_share", "qkv_gpu_share",
                                                          "gpu_budget_gb", "ilp_objective_ms",
                                                          "objective_ms")},
            })
            timing.append({"model": name, "batch": batch, "wall_seconds": r.wall_seconds,
                           "ilp_solve_seconds": r.placement["solve_seconds"],
                           "ilp_variables": r.placement["variables"],
                           "predictor_fit_seconds": r.predictor["fit_seconds"]})
            log(f"    hermes {h.tokens_per_s:.2f} tok/s, "
                f"{r.wall_seconds:.1f} s wall, ILP {r.placement['solve_seconds']:.2f} s")
    result = {
        "what": "Hermes scenario, default configuration per model and batch (sw/scenarios/hermes/bench.py)",
        "command": "ndpdimm bench --suite hermes",
        "config": {k: v for k, v in HermesConfig().__dict__.items() if k not in ("model", "batch")},
        "runs": runs, "timing": timing,
        "total_wall_seconds": time.perf_counter() - t0,
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
    }
    path = write_json(result, out)
    log(f"[bench hermes] wrote {path} ({result['total_wall_seconds']:.0f} s)")
    return result
