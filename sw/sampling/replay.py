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

import time
import warnings

import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels import Shape, replay
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.stats import (
    CONFIDENCE,
    METHOD,
    Draw,
    check_samples_request,
    draw,
    reestimate,
    t_interval,
)

__all__ = ["replay_one", "rtl_check", "format_rtl_check", "same_bits"]


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two results are identical bit for bit (NaN payloads and signed zeros included)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.is_floating_point:
        view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
        a, b = a.contiguous().view(view), b.contiguous().view(view)
    return torch.equal(a, b)


def replay_one(shape: Shape, seed: int, core: CoreConfig, backend: str = "rtl",
               descriptors: bool = False) -> dict:
    """One invocation on the model backend (golden results) and on ``backend`` (see the module
    docstring): cycles, bit-exactness and wall seconds. ``descriptors``: also every waited-for
    descriptor's cycles per side (``<role>_descriptor_cycles``) and their ``labels``
    (``RuntimeError`` if the two sides ran different streams)."""
    out, results, labels = {}, {}, {}
    for role, name, kw in (("model", "model", {"functional": True}), ("rtl", backend, {})):
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # the model's UncalibratedWarning: said once
            with Dimm(name, core, timeline=descriptors, **kw) as dimm:
                out[f"{role}_backend_cycles"], results[role] = replay(dimm, shape, seed)
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


def _run(draws: list[Draw], core: CoreConfig, backend: str, workers: int, scheduler, log) -> list:
    args = [(d.shape, d.seed, core, backend) for d in draws]
    results: list = [None] * len(draws)
    t0 = time.perf_counter()

    def done(i, rec, err):
        d = draws[i]
        if err is not None:
            rec = {"error": f"{type(err).__name__}: {err}"}
        results[i] = rec
        finished = sum(r is not None for r in results)
        shape = d.shape.describe()
        if err is not None:
            what = rec["error"]
        else:
            what = (f"RTL {rec['rtl_backend_cycles']:,} / charged {d.model_cycles:,.0f} cycles = "
                    f"{rec['rtl_backend_cycles'] / d.model_cycles:.4f}, "
                    f"{'bit-exact' if rec['bit_exact'] else 'MISMATCH'}, {rec['rtl_seconds']:.1f} s")
        log(f"[rtl-samples] {finished}/{len(draws)} {d.kind} ({shape}): {what}  "
            f"[{time.perf_counter() - t0:.0f} s]")

    if workers == 0:
        for i, a in enumerate(args):
            try:
                rec, err = replay_one(*a), None
            except Exception as e:                      # reported for its sample, run goes on
                rec, err = None, e
            done(i, rec, err)
        return results
    from ndpdimm.sw.sweep.tasks import cluster_client, run_tasks
    with cluster_client(scheduler, workers) as (client, desc):
        log(f"[rtl-samples] {len(draws)} replays on {desc}")
        # longest first: the last task to start is a short one
        order = sorted(range(len(draws)), key=lambda i: -draws[i].model_cycles)
        run_tasks(client, replay_one, args, order=order, on_done=done)
    return results


def rtl_check(log: KernelLog, n: int, seed: int, core: CoreConfig, backend: str = "rtl",
              workers: int = 2, scheduler: str | None = None, say=print) -> dict:
    """Draw ``n`` of ``log``'s invocations, replay them on ``backend`` and estimate (see the
    module docstring and ``sw/sampling/stats.py``); the ``rtl_samples`` JSON block."""
    check_samples_request(n, seed, workers)
    t0 = time.perf_counter()
    draws = draw(log, n, seed)
    say(f"[rtl-samples] {n} of {log.invocations():,} NDP kernel invocations, stratified by kind "
        f"(seed {seed}); replaying on the {backend} backend, core {core.n_units} units "
        f"(building or finding its harness first) ...")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Dimm(backend, core).close()                   # the build, once, before the workers start
    results = _run(draws, core, backend, workers, scheduler, say)
    samples, kinds = [], {}
    for d, r in zip(draws, results):
        s = {"kind": d.kind, "params": d.params, "seed": d.seed, "model_cycles": d.model_cycles,
             **r}
        if "error" not in r:
            s["ratio"] = r["rtl_backend_cycles"] / d.model_cycles
            s["ratio_vs_model_backend"] = r["rtl_backend_cycles"] / r["model_backend_cycles"]
        samples.append(s)
    ok = [s for s in samples if "ratio" in s]
    totals = {k: log.total_cycles(k) for k in log.kinds()}
    ratios = {}
    for k in log.kinds():
        mine = [s for s in ok if s["kind"] == k]
        entry = {"invocations": log.invocations(k), "shapes": len(log.entries(k)),
                 "model_cycles": totals[k], "n": len(mine)}
        if mine:
            ratios[k] = t_interval(s["ratio"] for s in mine)
            entry["ratio"] = ratios[k]
            entry["ratio_vs_model_backend"] = t_interval(s["ratio_vs_model_backend"] for s in mine)
            entry["replay_seconds_mean"] = sum(s["rtl_seconds"] for s in mine) / len(mine)
        kinds[k] = entry
    ndp = reestimate(totals, ratios)
    for key in ("model", "rtl", "low", "high", "half_width"):
        src = {"model": "model_cycles", "rtl": "rtl_cycles"}.get(key, key)
        ndp[f"{key}_seconds"] = None if ndp[src] is None else ndp[src] / NDP_CLOCK_HZ
    errors = [s for s in samples if "error" in s]
    return {"method": METHOD, "confidence": CONFIDENCE, "backend": backend,
            "core": core.as_dict(), "seed": seed, "n": n, "replayed": len(ok),
            "errors": len(errors),
            "bit_exact": bool(ok) and not errors and all(s["bit_exact"] for s in ok),
            "kinds": kinds, "ndp_time": ndp, "wall_seconds": time.perf_counter() - t0,
            "samples": samples,
            "note": "model_cycles are what the scenario charged (its cost lines); ratio = RTL "
                    "cycles / charged cycles; ratio_vs_model_backend compares with the model "
                    "backend's own cycles for the same replay (the cost lines' fit error "
                    "excluded). Replays are shape-faithful: the scenario's shapes and descriptor "
                    "stream on synthetic data from each sample's seed."}


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
