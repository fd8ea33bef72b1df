"""Held-out scenario streams of a calibration: the scenarios' own kernels, RTL against model.

A calibration (``cosim/model/calibrate/``) fits the performance model to single descriptors
and short sequences. The scenarios charge whole kernels: back-to-back descriptor streams
(a Hermes cold-neuron MLP is index DMAs, row gathers, activations and a DMA out; an attention
step gathers the KV cache; a TriMoE expert is a SwiGLU chain of GEMVs). This module checks the
fitted model on those streams, none of which the fit saw:

1. the caller's kernel logs: one Hermes run (its default set-up, batch 1) and one TriMoE run
   (its default set-up) on the model backend of ``core``, each logging every NDP kernel
   invocation its system charged (``sw/sampling/record.py``;
   :func:`ndpdimm.sw.scenarios.kernel_logs.scenario_logs` runs them: this package imports no
   scenario).
2. :func:`draw_streams`: ``per_kind`` invocations of every kernel kind, drawn with ``seed``
   by charged cycles (``sw/sampling/stats.py``: an invocation is as likely as its share of
   the kind's NDP time).
3. :func:`stream_one`: the invocation's descriptor stream (its
   kernel's ``Shape.run``, ``sw/kernels/``) on the model backend (functional: the golden model's results)
   and on the RTL backend, each on a fresh DIMM, submitted back to back as the scenario's
   kernel code does; every descriptor's cycles are kept (``Dimm(timeline=True)``) and the
   RTL's results must equal the model's bit for bit.
4. :func:`stream_check`: per stream the total-cycle error (model / RTL - 1) and the mean
   absolute per-descriptor error; over all streams the same, which the calibration record
   stores under ``held_out_streams`` (goals: total within 2 %, per descriptor within 5 %).

Streams run on a ``runner(fn, tasks, on_done)`` (``sw/sweep/tasks.py``: ``dask_runner``), one
task per stream, longest first. Cycle behaviour: the RTL side runs at the harness's speed
(about 5.7 k cycles/s at 256 units), so a stream of C model cycles takes about C / 5,700 s.
"""

from __future__ import annotations

import time
import warnings

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels import Shape
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.replay import replay_one
from ndpdimm.sw.sampling.stats import Draw, draw

__all__ = ["draw_streams", "stream_one", "stream_check", "summarise_streams"]

#: Goals of the issue for the held-out streams (percent).
TOTAL_GOAL_PCT = 2.0
PER_DESCRIPTOR_GOAL_PCT = 5.0


def draw_streams(logs: dict[str, KernelLog], per_kind: int, seed: int) -> list[tuple[str, Draw]]:
    """``(scenario, draw)`` for ``per_kind`` invocations of every kind of every log."""
    if isinstance(per_kind, bool) or not isinstance(per_kind, int) or per_kind < 1:
        raise ValueError(f"streams per kernel kind must be an int >= 1, got {per_kind!r}")
    out = []
    for scenario, klog in sorted(logs.items()):
        for kind in klog.kinds():
            out += [(scenario, d) for d in draw(klog.of_kind(kind), per_kind, seed)]
    return out


def stream_one(shape: Shape, seed: int, core: CoreConfig) -> dict:
    """One invocation's descriptor stream on the model and on the RTL backend (module
    docstring, step 3): totals, per-descriptor cycles, bit-exactness, wall seconds."""
    out = replay_one(shape, seed, core, "rtl", descriptors=True)
    out["model_cycles"] = out.pop("model_backend_cycles")
    out["rtl_cycles"] = out.pop("rtl_backend_cycles")
    return out


def _stream_task(task: tuple) -> dict:
    return stream_one(*task)


def _errors(rec: dict) -> dict:
    rtl, model = rec["rtl_descriptor_cycles"], rec["model_descriptor_cycles"]
    per = [abs(m / r - 1) * 100 for m, r in zip(model, rtl) if r > 0]
    return {"total_error_pct": 100 * (rec["model_cycles"] / rec["rtl_cycles"] - 1),
            "descriptors": len(rtl),
            "descriptor_mean_abs_error_pct": sum(per) / len(per) if per else 0.0,
            "descriptor_max_abs_error_pct": max(per) if per else 0.0}


def summarise_streams(rows: list) -> dict:
    """Totals over the measured streams (the record's ``held_out_streams.summary``)."""
    ok = [r for r in rows if "error" not in r]
    if not ok:
        return {"streams": 0, "failed": len(rows)}
    rtl = sum(r["rtl_cycles"] for r in ok)
    model = sum(r["model_cycles"] for r in ok)
    n_desc = sum(r["descriptors"] for r in ok)
    worst = max(ok, key=lambda r: abs(r["total_error_pct"]))
    return {
        "streams": len(ok), "failed": len(rows) - len(ok), "descriptors": n_desc,
        "rtl_cycles": rtl, "model_cycles": model,
        "total_error_pct": 100 * (model / rtl - 1),
        "stream_mean_abs_total_error_pct": sum(abs(r["total_error_pct"]) for r in ok) / len(ok),
        "stream_max_abs_total_error_pct": abs(worst["total_error_pct"]),
        "stream_max_point": f"{worst['scenario']}:{worst['kind']}",
        # every descriptor weighs the same
        "descriptor_mean_abs_error_pct": sum(r["descriptor_mean_abs_error_pct"] * r["descriptors"]
                                             for r in ok) / n_desc if n_desc else 0.0,
        "all_bit_exact": all(r["bit_exact"] for r in ok),
        "goals": {"total_within_pct": TOTAL_GOAL_PCT,
                  "descriptor_mean_within_pct": PER_DESCRIPTOR_GOAL_PCT},
    }


def stream_check(logs: dict[str, KernelLog], core: CoreConfig, per_kind: int, seed: int, runner,
                 log=print) -> dict:
    """The ``held_out_streams`` block of a calibration record (module docstring): ``logs`` the
    kernel logs of the scenarios' runs on the model backend of ``core``
    (:func:`ndpdimm.sw.scenarios.kernel_logs.scenario_logs`)."""
    streams = draw_streams(logs, per_kind, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Dimm("rtl", core).close()                 # the harness build, once, before the workers
    order = sorted(range(len(streams)), key=lambda i: -streams[i][1].model_cycles)
    tasks = [(streams[i][1].shape, streams[i][1].seed, core) for i in order]
    rows: list = [None] * len(tasks)
    t0 = time.perf_counter()
    log(f"[streams] {len(tasks)} held-out streams ({per_kind} per kernel kind, seed {seed}) on "
        f"the RTL of {core.n_units} units, {getattr(runner, 'description', 'runner')}")

    def done(k, rec, err):
        scenario, d = streams[order[k]]
        row = {"scenario": scenario, "kind": d.kind, "params": d.params, "seed": d.seed,
               "charged_cycles_each": d.model_cycles}
        if err is not None:
            row["error"] = f"{type(err).__name__}: {err}"
            what = row["error"]
        else:
            row.update(rec)
            row.update(_errors(rec))
            what = (f"RTL {rec['rtl_cycles']:,} model {rec['model_cycles']:,} cycles "
                    f"({row['total_error_pct']:+.2f} %), {row['descriptors']} descriptors "
                    f"(mean |error| {row['descriptor_mean_abs_error_pct']:.2f} %), "
                    f"{'bit-exact' if rec['bit_exact'] else 'MISMATCH'}")
        rows[k] = row
        log(f"[streams] {sum(r is not None for r in rows)}/{len(rows)} {scenario} {d.kind}: "
            f"{what}  [{time.perf_counter() - t0:.0f} s]")

    runner(_stream_task, tasks, done)
    return {"what": "held-out back-to-back descriptor streams drawn from the scenarios' own "
                    "kernel logs (sw/sampling/streams.py); model = the calibrated model backend",
            "per_kind": per_kind, "seed": seed, "scenarios": {k: v.summary() for k, v in logs.items()},
            "streams": rows, "summary": summarise_streams(rows)}
