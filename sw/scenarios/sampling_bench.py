"""Sampled RTL co-simulation benchmark: ``ndpdimm bench --suite sampling``.

Writes ``bench/results/sampling.json`` section by section (``--section``; each section keeps
its own commit, command and date, and the file keeps the sections not rerun), on the 256-unit
core (256 activation lanes), seed 0, two Dask workers:

* ``runs``: the issue's three goal runs end to end (the scenario on the model backend, its
  kernel log, the sampled RTL replays and the estimate): Hermes LLaMA2-70B batch 1 and 16 and
  TriMoE DeepSeek-V2 at 768 tokens per step, each with its sample design (:data:`CASES`):
  NDP-time interval, wall time, RTL cycles replayed, against the goals. Batch 16 and TriMoE
  sub-sample and take the sub-sample correction from this file's ``coverage`` section (a whole
  batch-16 cold-neuron replay is about 8 M cycles, 13 minutes: no whole replay fits the goal's
  time); the batch-16 kinds' correction is the one measured on batch 1's shapes, an assumption
  the run states.
* ``coverage``: per sub-sampled kind, ``COVERAGE_N[kind]`` invocations drawn at random (every
  invocation equally likely, which keeps the whole replays affordable) and replayed both ways, sub-sampled (a quarter of the groups after a warm-up group, scaled by the
  model: ``y^``) and whole (``y``). The correction ``q = y / y^``; each invocation's
  leave-one-out 95 % prediction interval ``mean(q_-i) +- t(n-2) s(q_-i) sqrt(1 + 1/(n-1))``
  either holds its own ``q`` or not: the coverage. Kinds and logs: Hermes batch 1's
  ``cold_mlp`` and ``qkv_dense``, TriMoE's ``expert`` (attention is one group: never
  sub-sampled).
* ``warmup``: per kind, ``WARMUP_N[kind]`` invocations (equally likely) replayed whole from reset and after a stream of
  the scenario's preceding kernel (about 100 k cycles of it, sub-sampled): the difference of
  their cycles (mean, t-interval), the cold start's bias of a whole replay.
* ``runs`` also holds Hermes batch 1 at N = 24, on one worker, and with Neyman's allocation:
  how N, the workers and the allocation trade against the interval and the wall time.
* ``allocation`` (inside each run): per goal run, the interval Neyman's allocation would give against the
  proportional one at the same RTL seconds, predicted from the run's own per-kind spread and
  replay cost (``stats.neyman_weights``).

Cycle behaviour: RTL time dominates: ``runs`` about 15 + 15 + 4 minutes, ``coverage`` and
``warmup`` about half an hour each on two cores (the harness's speed, ``bench/results/cosim.json``).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.replay import Job, Runner
from ndpdimm.sw.sampling.stats import (
    Design,
    allocate,
    draw,
    neyman_weights,
    stored_corrections,
    t_interval,
)
from ndpdimm.sw.sampling.subsample import plan
from ndpdimm.sw.scenarios.base import RunContext, quiet

__all__ = ["CASES", "SECTIONS", "run_sampling_bench", "scenario_log", "coverage_of"]

CORE = CoreConfig(n_units=256, act_lanes=256)
SEED = 0
WORKERS = 2
#: invocations per kind of the coverage and warm-up sections: the expert's are fewer, as the
#: 256-lane core simulates its activation-heavy chain at about 3 k cycles/s (a whole expert
#: replay is 5-8 minutes), against 15-20 k for the gathers
COVERAGE_N = {"cold_mlp": 20, "qkv_dense": 20, "expert": 4}
WARMUP_N = {"attention": 4, "qkv_dense": 4, "cold_mlp": 4, "expert": 2}
#: a coverage sub-sample runs about this share of an invocation's groups
COVERAGE_SHARE = 0.25
#: cycles of the preceding kernel replayed before a warm-started replay
STREAM_CYCLES = 100_000


@dataclasses.dataclass(frozen=True)
class Case:
    scenario: str
    params: dict
    n: int
    design: Design
    goal_pct: float
    goal_seconds: float
    workers: int = WORKERS
    #: the sub-sample correction from this file's coverage section instead of whole replays
    stored_correction: bool = False


#: the issue's goal runs and their sample designs
CASES = {
    "hermes_b1": Case("hermes", {"model": "llama2-70b", "batch": 1}, 12,
                      Design(model_draws=48), 2.0, 180.0),
    "hermes_b16": Case("hermes", {"model": "llama2-70b", "batch": 16}, 12,
                       Design(sub_cycles=400_000, model_draws=32), 3.0, 900.0,
                       stored_correction=True),
    "trimoe_768": Case("trimoe", {"model": "deepseek-v2", "batch": 768}, 12,
                       Design(sub_cycles=500_000, model_draws=32), 3.0, 900.0,
                       stored_correction=True),
    # how N, the workers and the allocation trade against the interval and the wall time
    "hermes_b1_n24": Case("hermes", {"model": "llama2-70b", "batch": 1}, 24,
                          Design(model_draws=48), 2.0, 180.0),
    "hermes_b1_workers1": Case("hermes", {"model": "llama2-70b", "batch": 1}, 12,
                               Design(model_draws=48), 2.0, 180.0, workers=1),
    "hermes_b1_neyman": Case("hermes", {"model": "llama2-70b", "batch": 1}, 12,
                             Design(model_draws=48, allocation="neyman"), 2.0, 180.0),
}
#: the scenario whose preceding kernel warms each kind (Hermes' layer: QKV, attention, MLP)
PRECEDING = {"attention": "qkv_dense", "cold_mlp": "attention", "qkv_dense": "cold_mlp",
             "expert": "expert"}


def _config(case: Case):
    if case.scenario == "hermes":
        from ndpdimm.sw.scenarios.hermes.config import HermesConfig
        return dataclasses.replace(HermesConfig(), units=CORE.n_units, **case.params)
    from ndpdimm.sw.scenarios.trimoe.scenario import TriMoeConfig
    return dataclasses.replace(TriMoeConfig(), units=CORE.n_units, act_lanes=CORE.act_lanes,
                               **case.params)


def _run(case: Case, ctx: RunContext):
    if case.scenario == "hermes":
        from ndpdimm.sw.scenarios.hermes.scenario import run
        return run(_config(case), ctx, core=CORE)
    from ndpdimm.sw.scenarios.trimoe.scenario import run
    return run(_config(case), ctx)


def scenario_log(name: str) -> KernelLog:
    """The kernel log of case ``name``'s scenario run on the model backend (no replays)."""
    log = KernelLog()
    _run(CASES[name], RunContext(log=quiet, kernels=log))
    return log


def run_case(name: str, log=print, corrections: dict | None = None) -> dict:
    """One goal run end to end (module docstring, ``runs``); ``corrections``: the stored
    sub-sample corrections of a case that takes them (``stats.stored_corrections``)."""
    case = CASES[name]
    design = case.design
    if case.stored_correction:
        if not corrections:
            raise ValueError(f"{name} takes its sub-sample correction from the coverage section: "
                             f"run --section coverage first")
        design = dataclasses.replace(design, correction=corrections)
    t0 = time.perf_counter()
    r = _run(case, RunContext(log=log, rtl_samples=case.n, rtl_seed=SEED, rtl_workers=case.workers,
                              rtl_design=design))
    wall = time.perf_counter() - t0
    s = r.rtl_samples
    ndp = s["ndp_time"]
    rel = ndp["relative_half_width"]
    return {"scenario": case.scenario, "params": case.params, "n": case.n, "workers": case.workers,
            "design": design.as_dict(), "wall_seconds": wall,
            "replay_seconds": s["wall_seconds"], "relative_half_width_pct": None if rel is None else 100 * rel,
            "goal": {"half_width_pct": case.goal_pct, "wall_seconds": case.goal_seconds,
                     "met": rel is not None and 100 * rel <= case.goal_pct and wall <= case.goal_seconds},
            "rtl_samples": s}


def predicted_allocation(run: dict) -> dict:
    """Neyman against proportional at the run's own RTL seconds (module docstring)."""
    s = run["rtl_samples"]
    kinds = {k: e for k, e in s["kinds"].items() if e.get("ratio") and e["ratio"].get("terms")}
    if len(kinds) != len([k for k, e in s["kinds"].items() if e["model_cycles"] > 0]):
        return {"note": "a kind has no interval: nothing to compare"}
    totals = {k: e["model_cycles"] for k, e in kinds.items()}
    sd = {k: math.sqrt(sum(v for v, _ in e["ratio"]["terms"]) * e["n"]) for k, e in kinds.items()}
    cost = {k: e["replay_seconds_mean"] for k, e in kinds.items()}
    budget = sum(e["n"] * cost[k] for k, e in kinds.items())
    n = sum(e["n"] for e in kinds.values())

    def at_budget(weights):
        # the allocation's shares scaled to the budget (fractional draws: the comparison's basis)
        alloc = allocate(totals, n, weights)
        scale = budget / sum(alloc[k] * cost[k] for k in totals)
        var = sum(totals[k] ** 2 * sd[k] ** 2 / (alloc[k] * scale) for k in totals)
        est = sum(totals[k] * kinds[k]["ratio"]["mean"] for k in totals)
        return {"allocation": alloc, "scaled_to_seconds": budget, "relative_sd_pct": 100 * math.sqrt(var) / est}
    return {"rtl_seconds": budget, "proportional": at_budget(None),
            "neyman": at_budget(neyman_weights(totals, sd, cost)),
            "stdev_per_draw": sd, "replay_seconds": cost}


def coverage_of(q: list[float]) -> dict:
    """Leave-one-out 95 % prediction intervals of the corrections ``q`` (module docstring)."""
    from scipy.stats import t
    q = np.asarray(q, float)
    n = q.size
    hits = []
    for i in range(n):
        rest = np.delete(q, i)
        m, s = rest.mean(), rest.std(ddof=1)
        half = float(t.ppf(0.975, n - 2)) * s * math.sqrt(1 + 1 / (n - 1))
        hits.append(bool(abs(q[i] - m) <= half))
    return {"n": int(n), "covered": int(sum(hits)), "coverage": sum(hits) / n,
            "q_mean": float(q.mean()), "q_stdev": float(q.std(ddof=1)),
            "q_min": float(q.min()), "q_max": float(q.max())}


def run_coverage(logs: dict, n: int | None = None, log=print) -> dict:
    """The ``coverage`` section (module docstring); ``n`` per kind (default :data:`COVERAGE_N`)."""
    jobs, per_kind = [], {}
    for source, kind in (("hermes_b1", "cold_mlp"), ("hermes_b1", "qkv_dense"), ("trimoe_768", "expert")):
        n_kind = COVERAGE_N[kind] if n is None else n
        klog = logs[source].of_kind(kind)
        chosen = []
        for d in draw(klog, 40 * n_kind, SEED, alloc={kind: 40 * n_kind}, by="invocations"):
            p = plan(d.shape, d.model_cycles, d.seed, CORE.max_batch, COVERAGE_SHARE * d.model_cycles)
            if not p.whole:
                chosen.append((d, p))
            if len(chosen) == n_kind:
                break
        per_kind[kind] = {"source": source, "drawn": len(chosen)}
        for i, (d, p) in enumerate(chosen):
            jobs += [Job("model", kind, i, d, p), Job("rtl", kind, i, d, p), Job("full", kind, i, d, p)]
    with Runner(CORE, "rtl", WORKERS, None, log) as runner:
        runner.run(jobs)
    out = {}
    for kind, info in per_kind.items():
        by = {(j.role, j.i): j for j in jobs if j.kind == kind}
        rows = []
        for i in range(info["drawn"]):
            m, r, f = by[("model", i)], by[("rtl", i)], by[("full", i)]
            if any(j.result is None or "error" in j.result for j in (m, r, f)):
                continue
            x = m.result["model_backend_cycles"] / m.draw.model_cycles
            yh = x * r.result["rtl_backend_cycles"] / r.result["model_backend_cycles"]
            y = f.result["rtl_backend_cycles"] / f.draw.model_cycles
            rows.append({"params": m.draw.params, "seed": m.draw.seed, "plan": r.plan.as_dict(),
                         "sub_rtl_cycles": r.result["rtl_backend_cycles"],
                         "sub_model_cycles": r.result["model_backend_cycles"],
                         "whole_model_cycles": m.result["model_backend_cycles"],
                         "whole_rtl_cycles": f.result["rtl_backend_cycles"],
                         "bit_exact": r.result["bit_exact"] and f.result["bit_exact"],
                         "q": y / yh})
        out[kind] = {**info, **(coverage_of([row["q"] for row in rows]) if len(rows) >= 3 else {}),
                     "rows": rows}
    return out


def run_warmup(logs: dict, n: int | None = None, log=print) -> dict:
    """The ``warmup`` section (module docstring); ``n`` per kind (default :data:`WARMUP_N`)."""
    jobs, info, sizes = [], {}, {}
    for source, kind in (("hermes_b1", "attention"), ("hermes_b1", "qkv_dense"),
                         ("hermes_b1", "cold_mlp"), ("trimoe_768", "expert")):
        sizes[kind] = nk = WARMUP_N[kind] if n is None else n
        targets = draw(logs[source].of_kind(kind), nk, SEED, alloc={kind: nk}, by="invocations")
        prev = draw(logs[source].of_kind(PRECEDING[kind]), nk, SEED + 1, alloc={PRECEDING[kind]: nk},
                    by="invocations")
        info[kind] = {"source": source, "preceding": PRECEDING[kind]}
        for i, (d, p) in enumerate(zip(targets, prev)):
            pp = plan(p.shape, p.model_cycles, p.seed, CORE.max_batch, STREAM_CYCLES, warmup=0)
            jobs += [Job("full", kind, i, d, None),
                     Job("full", kind, nk + i, d, None, before=((p.shape, p.seed, None if pp.whole else pp),))]
    with Runner(CORE, "rtl", WORKERS, None, log) as runner:
        runner.run(jobs)
    out = {}
    for kind, meta in info.items():
        by = {j.i: j for j in jobs if j.kind == kind}
        rows, nk = [], sizes[kind]
        for i in range(nk):
            a, b = by[i], by[nk + i]
            if any(j.result is None or "error" in j.result for j in (a, b)):
                continue
            rows.append({"params": a.draw.params, "seed": a.draw.seed,
                         "from_reset_cycles": a.result["rtl_backend_cycles"],
                         "warm_cycles": b.result["rtl_backend_cycles"],
                         "relative_difference": b.result["rtl_backend_cycles"] / a.result["rtl_backend_cycles"] - 1,
                         "bit_exact": a.result["bit_exact"] and b.result["bit_exact"]})
        out[kind] = {**meta, "rows": rows,
                     "relative_difference": t_interval(r["relative_difference"] for r in rows) if rows else None}
    return out


SECTIONS = ("runs", "coverage", "warmup")


def run_sampling_bench(out="bench/results/sampling.json", sections=SECTIONS, cases=tuple(CASES),
                       log=print) -> dict:
    """Run ``sections`` (module docstring) and write them into ``out``, keeping its other sections."""
    import json

    from ndpdimm.cosim.provenance import stamp as provenance
    path = Path(out)
    data = json.loads(path.read_text()) if path.exists() else {}
    data = {k: v for k, v in data.items() if k in SECTIONS}
    stamp = provenance()
    logs = None
    for section in sections:
        t0 = time.perf_counter()
        if section == "runs":
            runs = dict(data.get("runs", {}).get("cases", {}))
            corrections = stored_corrections(path) if "coverage" in data else None
            for name in cases:
                log(f"[bench sampling] {name}")
                runs[name] = run_case(name, log, corrections)
                runs[name]["allocation"] = predicted_allocation(runs[name])
            body = {"cases": runs}
        else:
            if logs is None:
                log("[bench sampling] the kernel logs of Hermes batch 1 and TriMoE 768 (model backend)")
                logs = {k: scenario_log(k) for k in ("hermes_b1", "trimoe_768")}
            body = run_coverage(logs, log=log) if section == "coverage" else run_warmup(logs, log=log)
        data[section] = {**stamp,
                         "wall_seconds": time.perf_counter() - t0, "core": CORE.as_dict(),
                         "seed": SEED, "workers": WORKERS, **body}
        write_json({"benchmark": "sampling", **data}, path)
        log(f"[bench sampling] {section} written to {path}")
    return data
