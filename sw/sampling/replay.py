"""Sampled RTL co-simulation of one scenario run: draw, replay on the RTL in parallel, estimate.

:func:`rtl_check` takes the :class:`~ndpdimm.sw.sampling.record.KernelLog` of a run, draws
``n`` invocations (``sw/sampling/stats.py``), replays each (:func:`replay_one`) and returns
the JSON block every scenario writes under ``rtl_samples``; :func:`format_rtl_check` prints
it beside the model's figure.

A replay runs the invocation's kernel (its shape's ``run``, ``sw/kernels/``) twice, each on a fresh
DIMM of the scenario's core configuration: on the model backend with values
(``functional=True``: its results are the golden model's, ``cosim/golden``) and on
``backend`` (``"rtl"``: the Verilated core in the C++ harness). Every result tensor of the
second must equal the first bit for bit. It returns the RTL's cycles, the model backend's
cycles of the same replay and the wall seconds of each part.

Replays run on the project's Dask runner (``sw/sweep/tasks.py``: a ``LocalCluster`` of
``workers`` single-threaded processes, or a scheduler's address), one task per draw, with
one progress line per finished replay; ``workers=0`` runs them in this process, one after
the other. The RTL harness is built (or found in the build cache) once, here, before
anything is submitted.
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings

import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels import Shape, replay
from ndpdimm.sw.sampling.estimate import estimate_kind
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.stats import (
    CONFIDENCE,
    Design,
    Draw,
    allocate,
    check_samples_request,
    draw,
    interval,
    neyman_weights,
    reestimate,
    t_interval,
)
from ndpdimm.sw.sampling.subsample import Plan, plan

__all__ = ["replay_one", "model_one", "Job", "Runner", "rtl_check", "format_rtl_check", "same_bits"]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two results are identical bit for bit (NaN payloads and signed zeros included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.contiguous().view(view), b.contiguous().view(view)
    return torch.equal(a, b)


def replay_one(shape: Shape, seed: int, core: CoreConfig, backend: str = "rtl",
               descriptors: bool = False, plan: Plan | None = None, before=()) -> dict:
    """One invocation on the model backend (golden results) and on ``backend`` (see the module
    docstring): cycles, bit-exactness and wall seconds. ``descriptors``: also every waited-for
    descriptor's cycles per side (``<role>_descriptor_cycles``) and their ``labels``
    (``RuntimeError`` if the two sides ran different streams). ``plan``: only its groups, after
    its warm-up (``sw/sampling/subsample.py``; None: the whole invocation). ``before``:
    ``(shape, seed, plan)`` invocations replayed first on the same DIMM, untimed (a stream of
    the scenario's preceding kernels: the replay starts in a running state, not from reset)."""
    groups, warm = (None, ()) if plan is None else (plan.groups, plan.warmup)
    out, results, labels = {}, {}, {}
    for role, name, kw in (("model", "model", {"functional": True}), ("rtl", backend, {})):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the model's UncalibratedWarning: said once
            with Dimm(name, core, timeline=descriptors, **kw) as dimm:
                for s0, seed0, p0 in before:
                    replay(dimm, s0, seed0, *(() if p0 is None else (p0.groups, p0.warmup)))
                    if descriptors:
                        dimm.timeline_records.clear()
                out[f"{role}_backend_cycles"], results[role] = replay(dimm, shape, seed, groups, warm)
                if descriptors:
                    out[f"{role}_descriptor_cycles"] = [c.cycles for _, c in dimm.timeline_records]
                    labels[role] = [label for label, _ in dimm.timeline_records]
        out[f"{role}_seconds"] = time.perf_counter() - t0
    if descriptors:
        if labels["model"] != labels["rtl"]:
            raise RuntimeError(f"{shape.kind} ({shape.describe()}): the backends ran different "
                               f"descriptor streams")
        out["labels"] = labels["model"]
    gold, got = results["model"], results["rtl"]
    out["bit_exact"] = len(gold) == len(got) and all(same_bits(a, b) for a, b in zip(gold, got))
    out["outputs_checked"] = len(gold)
    return out


def model_one(shape: Shape, seed: int, core: CoreConfig) -> dict:
    """The whole invocation on the timing-only model backend (a two-phase estimate's first phase,
    ``sw/sampling/estimate.py``): its cycles and wall seconds."""
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with Dimm("model", core, functional=False) as dimm:
            cycles, _ = replay(dimm, shape, seed)
    return {"model_backend_cycles": cycles, "model_seconds": time.perf_counter() - t0}


def _task(role: str, shape: Shape, seed: int, core: CoreConfig, backend: str, plan: Plan | None,
          before=()) -> dict:
    """One job of a sampled run: ``"model"`` (:func:`model_one`), ``"rtl"`` (the plan's groups)
    or ``"full"`` (the whole invocation) (:func:`replay_one`, after ``before``)."""
    if role == "model":
        return model_one(shape, seed, core)
    return replay_one(shape, seed, core, backend, plan=None if role == "full" else plan, before=before)


@dataclasses.dataclass
class Job:
    """One replay of a draw: ``role`` "model", "rtl" (``plan``'s groups) or "full"; ``i`` the
    draw's place in its kind's list; ``before``: untimed invocations first (``replay_one``)."""
    role: str
    kind: str
    i: int
    draw: Draw
    plan: Plan | None
    result: dict | None = None
    before: tuple = ()

    @property
    def expected_cycles(self) -> float:
        """About how many RTL cycles it runs (the longest are submitted first)."""
        if self.role == "model":
            return 0.0
        if self.role == "rtl" and self.plan is not None and not self.plan.whole:
            return self.draw.model_cycles * (len(self.plan.groups) + len(self.plan.warmup)) / self.plan.n_groups
        return self.draw.model_cycles


class Runner:
    """Runs :class:`Job` lists in this process (``workers=0``) or on the Dask cluster it holds
    open (``with Runner(...) as r: r.run(jobs)``), a progress line per replay. Entering it
    builds the RTL harness (or finds it in the build cache) once, before any worker starts."""

    def __init__(self, core, backend, workers, scheduler, log):
        self.core, self.backend, self.workers, self.scheduler, self.log = core, backend, workers, scheduler, log
        self.t0 = time.perf_counter()
        self._cm = None
        self.client = None

    def __enter__(self):
        if self.backend != "model":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Dimm(self.backend, self.core).close()     # the build, once, before the workers start
        if self.workers:
            from ndpdimm.sw.sweep.tasks import cluster_client
            self._cm = cluster_client(self.scheduler, self.workers)
            self.client, desc = self._cm.__enter__()
            self.log(f"[rtl-samples] replays on {desc}")
        return self

    def __exit__(self, *exc):
        if self._cm is not None:
            self._cm.__exit__(*exc)

    def run(self, jobs: list[Job]) -> None:
        if not jobs:
            return
        count = {"model": 0}
        n_model = sum(j.role == "model" for j in jobs)
        n_rtl = len(jobs) - n_model
        done_rtl = [0]

        def done(i, rec, err):
            j = jobs[i]
            j.result = {"error": f"{type(err).__name__}: {err}"} if err is not None else rec
            elapsed = f"[{time.perf_counter() - self.t0:.0f} s]"
            if j.role == "model":
                count["model"] += 1
                if err is not None or count["model"] in (n_model, 1) or count["model"] % 25 == 0:
                    what = j.result.get("error", "ok")
                    self.log(f"[rtl-samples] model phase {count['model']}/{n_model} ({what})  {elapsed}")
                return
            done_rtl[0] += 1
            if err is not None:
                what = j.result["error"]
            else:
                part = "whole" if j.role == "full" or j.plan is None or j.plan.whole else \
                    f"{len(j.plan.groups)} of {j.plan.n_groups} groups"
                what = (f"{part}: RTL {rec['rtl_backend_cycles']:,} / model {rec['model_backend_cycles']:,} "
                        f"cycles = {rec['rtl_backend_cycles'] / rec['model_backend_cycles']:.4f}, "
                        f"{'bit-exact' if rec['bit_exact'] else 'MISMATCH'}, {rec['rtl_seconds']:.1f} s")
            self.log(f"[rtl-samples] {done_rtl[0]}/{n_rtl} {j.role} {j.kind} "
                     f"({j.draw.shape.describe()}): {what}  {elapsed}")

        args = [(j.role, j.draw.shape, j.draw.seed, self.core, self.backend, j.plan, j.before)
                for j in jobs]
        if not self.workers:
            for i, a in enumerate(args):
                try:
                    rec, err = _task(*a), None
                except Exception as e:                      # reported for its sample, run goes on
                    rec, err = None, e
                done(i, rec, err)
            return
        from ndpdimm.sw.sweep.tasks import run_tasks
        # longest first: the last task to start is a short one
        order = sorted(range(len(jobs)), key=lambda i: -jobs[i].expected_cycles)
        run_tasks(self.client, _task, args, order=order, on_done=done)


def _ok(j: Job | None) -> bool:
    return j is not None and j.result is not None and "error" not in j.result


def _estimate(kind: str, jobs: dict, n1: int, n2: int, n3: int, correction: dict | None = None) -> dict:
    """The kind's two-phase estimate from its finished jobs (``sw/sampling/estimate.py``)."""
    x = {}
    for i in range(n1):
        m = jobs.get(("model", kind, i))
        if _ok(m):
            x[i] = m.result["model_backend_cycles"] / m.draw.model_cycles
    rtl, q, vs = [], [], []
    for i in range(n2):
        r = jobs.get(("rtl", kind, i))
        if not _ok(r) or i not in x:
            continue
        rec, c = r.result, r.draw.model_cycles
        sub = r.plan is not None and not r.plan.whole
        yh = x[i] * rec["rtl_backend_cycles"] / rec["model_backend_cycles"] if sub else \
            rec["rtl_backend_cycles"] / c
        rtl.append((x[i], yh, sub))
        vs.append(rec["rtl_backend_cycles"] / rec["model_backend_cycles"])
        f = jobs.get(("full", kind, i))
        if sub and _ok(f) and len(q) < n3:
            q.append((f.result["rtl_backend_cycles"] / c) / yh)
    if not rtl:
        return {}
    est = estimate_kind(list(x.values()), rtl, q, (correction or {}).get(kind))
    est.update(interval(est["mean"], est.get("terms")))
    return {"ratio": est, "ratio_vs_model_backend": t_interval(vs), "n": len(rtl)}


def rtl_check(log: KernelLog, n: int, seed: int, core: CoreConfig, backend: str = "rtl",
              workers: int = 2, scheduler: str | None = None, say=print,
              design: Design | None = None) -> dict:
    """Draw ``n`` of ``log``'s invocations for the RTL, replay them on ``backend`` and estimate
    (see the module docstring, ``sw/sampling/stats.py`` and ``sw/sampling/estimate.py``);
    ``design`` how (default: whole replays, proportional allocation); the ``rtl_samples`` JSON
    block."""
    check_samples_request(n, seed, workers)
    design = design or Design()
    t0 = time.perf_counter()
    totals = {k: log.total_cycles(k) for k in log.kinds()}
    kinds = [k for k in log.kinds() if totals[k] > 0]
    final = allocate(totals, n)
    if design.allocation == "neyman":
        first = allocate(totals, min(n, 2 * len(kinds)))
        upper = {k: n - sum(first.values()) + first[k] for k in kinds}
    else:
        first = upper = final
    lengths = {k: max(design.model_draws, upper.get(k, 0)) for k in kinds}
    draws = draw(log, sum(lengths.values()), seed, alloc=lengths)
    lists: dict[str, list[Draw]] = {k: [] for k in kinds}
    for d in draws:
        lists[d.kind].append(d)
    mb = core.max_batch
    plans = {k: [plan(d.shape, d.model_cycles, d.seed, mb, design.sub_cycles, design.warmup)
                 for d in lists[k]] for k in kinds}
    say(f"[rtl-samples] {n} of {log.invocations():,} NDP kernel invocations, stratified by kind "
        f"(seed {seed}, {design.allocation} allocation"
        f"{'' if design.sub_cycles is None else f', sub-sampled above {design.sub_cycles:,.0f} cycles'}"
        f"{f', {design.model_draws} model draws per kind' if design.model_draws else ''}); replaying "
        f"on the {backend} backend, core {core.n_units} units (building or finding its harness first) ...")
    jobs: dict[tuple, Job] = {}

    def add(role, k, upto, frm=0):
        out = []
        for i in range(frm, upto):
            key = (role, k, i)
            if key not in jobs:
                jobs[key] = Job(role, k, i, lists[k][i], plans[k][i])
                out.append(jobs[key])
        return out

    def round_of(alloc):
        """The jobs not yet made of ``alloc[kind]`` RTL draws per kind: their model phase, the
        RTL draws, and the whole replays of the first ``design.full`` sub-sampled ones."""
        out = []
        for k in kinds:
            out += add("model", k, max(design.model_draws, alloc[k]))
            out += add("rtl", k, alloc[k])
            for i in [i for i in range(alloc[k]) if not plans[k][i].whole][:design.full]:
                out += add("full", k, i + 1, i)
        return out

    with Runner(core, backend, workers, scheduler, say) as runner:
        runner.run(round_of(first))
        pilot = None
        if design.allocation == "neyman" and n > sum(first.values()):
            sd, cost = {}, {}
            for k in kinds:
                rtl = [jobs[("rtl", k, i)] for i in range(first[k])]
                ok = [j for j in rtl if _ok(j)]
                est = _estimate(k, jobs, max(design.model_draws, first[k]), first[k], design.full,
                                design.correction)
                terms = est.get("ratio", {}).get("terms") if est else None
                # one draw's standard deviation: the variance of the mean times n2
                sd[k] = math.sqrt(sum(v for v, _ in terms) * first[k]) if terms else 0.0
                cost[k] = (sum(j.result["rtl_seconds"] for j in ok) / len(ok)) if ok else 1.0
            final = allocate(totals, n, neyman_weights({k: totals[k] for k in kinds}, sd, cost))
            pilot = {"stdev_per_draw": sd, "rtl_seconds_per_draw": cost, "allocation": final}
            say(f"[rtl-samples] Neyman allocation from the pilot: "
                f"{', '.join(f'{k} {final[k]}' for k in kinds)}")
            runner.run(round_of(final))
    samples, model_rows, kinds_out, ratios = [], [], {}, {}
    for j in jobs.values():
        d = j.draw
        if j.role == "model":
            model_rows.append({"kind": d.kind, "index": j.i, "seed": d.seed, "params": d.params,
                               "model_cycles": d.model_cycles, **(j.result or {"error": "not run"})})
            continue
        s = {"role": j.role, "kind": d.kind, "index": j.i, "params": d.params, "seed": d.seed,
             "model_cycles": d.model_cycles, **(j.result or {"error": "not run"})}
        if j.role == "rtl" and j.plan is not None:
            s["plan"] = j.plan.as_dict()
        if _ok(j):
            s["ratio_vs_model_backend"] = j.result["rtl_backend_cycles"] / j.result["model_backend_cycles"]
            if j.role == "full" or j.plan is None or j.plan.whole:
                s["ratio"] = j.result["rtl_backend_cycles"] / d.model_cycles
        samples.append(s)
    for k in log.kinds():
        entry = {"invocations": log.invocations(k), "shapes": len(log.entries(k)),
                 "model_cycles": totals[k], "n": 0}
        if k in kinds:
            n1 = max(design.model_draws, final[k])
            est = _estimate(k, jobs, n1, final[k], design.full, design.correction)
            entry.update(est)
            entry["n_model"] = n1
            rt = [jobs[("rtl", k, i)] for i in range(final[k]) if _ok(jobs.get(("rtl", k, i)))]
            if rt:
                entry["replay_seconds_mean"] = sum(j.result["rtl_seconds"] for j in rt) / len(rt)
            if est and est["ratio"]["mean"] is not None:
                ratios[k] = est["ratio"]
        kinds_out[k] = entry
    ndp = reestimate(totals, ratios)
    for key in ("model", "rtl", "low", "high", "half_width"):
        src = {"model": "model_cycles", "rtl": "rtl_cycles"}.get(key, key)
        ndp[f"{key}_seconds"] = None if ndp[src] is None else ndp[src] / NDP_CLOCK_HZ
    errors = [s for s in samples + model_rows if "error" in s]
    ok = [s for s in samples if "error" not in s]
    return {"method": design.method, "confidence": CONFIDENCE, "backend": backend,
            "core": core.as_dict(), "seed": seed, "n": n, "design": design.as_dict(),
            "replayed": sum(s["role"] == "rtl" for s in ok), "full_replays": sum(s["role"] == "full" for s in ok),
            "errors": len(errors),
            "bit_exact": bool(ok) and not errors and all(s["bit_exact"] for s in ok),
            "rtl_cycles_replayed": sum(s["rtl_backend_cycles"] for s in ok),
            "pilot": pilot, "kinds": kinds_out, "ndp_time": ndp,
            "wall_seconds": time.perf_counter() - t0, "samples": samples, "model_draws": model_rows,
            "note": "model_cycles are what the scenario charged (its cost lines); ratio = RTL "
                    "cycles / charged cycles, per kind the two-phase estimate of "
                    "sw/sampling/estimate.py (with whole replays and no extra model draws: the "
                    "mean ratio); ratio_vs_model_backend compares with the model backend's own "
                    "cycles for the same replay (the cost lines' fit error excluded). Replays are "
                    "shape-faithful: the scenario's shapes and descriptor stream on synthetic data "
                    "from each sample's seed."}


def _ci(iv: dict, fmt: str = "{:.4f}") -> str:
    if iv.get("half_width") is None:
        return fmt.format(iv["mean"]) + " (n < 2: no interval)"
    return f"{fmt.format(iv['mean'])} [{fmt.format(iv['low'])}, {fmt.format(iv['high'])}]"


def format_rtl_check(r: dict) -> str:
    """The sampled co-simulation's lines: per kind, and the NDP time beside the model's."""
    core = r["core"]
    lines = [f"-- sampled RTL co-simulation: {r['replayed']} of {r['n']} replays on the "
             f"{r['backend']} backend ({core['n_units']} units), seed {r['seed']}, "
             f"{r['wall_seconds']:.0f} s; outputs "
             f"{'bit-exact vs golden' if r['bit_exact'] else 'NOT all bit-exact / some failed'} --",
             f"{'kind':<11} {'invocations':>12} {'model Mcyc':>11} {'n':>3}  "
             f"RTL/model ratio, mean [95 % t-interval]    vs model backend"]
    for k, e in r["kinds"].items():
        ratio = _ci(e["ratio"]) if "ratio" in e else "not sampled"
        vs = _ci(e["ratio_vs_model_backend"]) if "ratio" in e else ""
        lines.append(f"{k:<11} {e['invocations']:>12,} {e['model_cycles'] / 1e6:>11.2f} "
                     f"{e['n']:>3}  {ratio:<40} {vs}")
    t = r["ndp_time"]
    model_ms = 1e3 * t["model_seconds"]
    if t["rtl_seconds"] is None:
        lines.append(f"NDP kernel time (all DIMMs): model {model_ms:.2f} ms; RTL-anchored: {t['note']}")
    elif t["half_width"] is None:
        lines.append(f"NDP kernel time (all DIMMs): model {model_ms:.2f} ms; RTL-anchored {1e3 * t['rtl_seconds']:.2f}"
                     f" ms (a kind has n < 2: no interval)")
    else:
        lines.append(f"NDP kernel time (all DIMMs): model {model_ms:.2f} ms; RTL-anchored {1e3 * t['rtl_seconds']:.2f}"
                     f" ms, 95 % interval [{1e3 * t['low_seconds']:.2f}, "
                     f"{1e3 * t['high_seconds']:.2f}] ms (+-{100 * t['relative_half_width']:.2f} %)")
    return "\n".join(lines)
