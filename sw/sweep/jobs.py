"""The jobs a sweep can run: each a pure function of its parameters returning a flat row.

A job names its parameters (with their types and defaults) and turns one point's parameters
into one table row of numbers and strings (:func:`run_job`). The scenario jobs take exactly
the fields of their configuration dataclass, so a sweep file uses the names the CLI and the
docs use:

* ``hermes``: :class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig` -> tokens/s, ms/step and tokens/J of
  every system, tokens/s of every ablation, the placed hot share, the ILP time and the Hermes
  system's hot-neuron hit rate and NDP utilisation (``ndpdimm hermes --sweep`` runs this job);
* ``trimoe``: :class:`~ndpdimm.sw.scenarios.trimoe.config.TriMoeConfig` -> MoE-layer latency and tokens/s of
  every system;
* ``rapid``: :class:`~ndpdimm.sw.scenarios.rapid.config.RapidConfig` -> goodput, SLO attainment (both SLOs,
  TTFT alone, TPOT alone), QPS/W, mean power and throughput of every system;
* ``rtl-gemv``: one dense GEMV of ``rows x cols`` (``dtype``, ``batch``, random values from
  ``seed``) through the driver on the ``backend`` (default ``rtl``: the Verilated core with
  ``units`` GEMV units; its build is cached per parameter set and shared by every task on the
  machine) -> cycles, weight bytes per cycle and whether the result is bit-exact against the
  golden model (a mismatch is a failed point, not a row);
* ``probe``: sleeps ``seconds`` and returns ``value`` squared: a measurement job, used to time
  the scheduling overhead per task and to test worker loss.

Jobs run in whatever process the scheduler picks; they import lazily so that a worker pays
only for the job it runs, and print nothing.
"""

import dataclasses
import math
import os
import time
import typing

__all__ = ["JOBS", "Job", "run_job", "job_parameters", "JobError"]


class JobError(RuntimeError):
    """A point ran but its result is wrong (e.g. RTL not bit-exact)."""


@dataclasses.dataclass(frozen=True)
class Job:
    name: str
    summary: str
    config: str | None          # "module:Class" of the configuration dataclass, or None
    params: dict                # name -> (type, default) when there is no dataclass
    default_x: str              # the plot's default x and y
    default_y: tuple


def _hermes(p):
    from ndpdimm.sw.scenarios.base import RunContext
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    from ndpdimm.sw.scenarios.hermes.scenario import run
    r = run(HermesConfig(**p), RunContext(log=None))
    h = r.systems["hermes"]
    row = {"hot_share": r.placement["hot_share"], "ilp_seconds": r.placement["solve_seconds"],
           "hermes_hot_hit_rate": h.hot_hit_rate, "hermes_ndp_utilisation": h.ndp_utilisation}
    for name, s in r.systems.items():
        row[f"{name}_tokens_per_s"] = s.tokens_per_s
        row[f"{name}_ms_per_step"] = s.ms_per_step
        row[f"{name}_tokens_per_j"] = s.tokens_per_joule
    for name, s in r.ablations.items():
        row[f"{name}_tokens_per_s"] = s.tokens_per_s
    return row


def _trimoe(p):
    from ndpdimm.sw.scenarios.base import RunContext
    from ndpdimm.sw.scenarios.trimoe.scenario import TriMoeConfig, run
    if "systems" in p:
        p = {**p, "systems": tuple(p["systems"])}
    r = run(TriMoeConfig(**p), RunContext(log=None))
    row = {}
    for name, s in r.systems.items():
        row[f"{name}_latency_ms"] = s.moe_layer_latency_ms
        row[f"{name}_tokens_per_s"] = s.throughput_tokens_per_s
    return row


def _rapid(p):
    from ndpdimm.sw.scenarios.base import RunContext
    from ndpdimm.sw.scenarios.rapid.scenario import RapidConfig, run
    r = run(RapidConfig(**p), RunContext(log=None))
    row = {"ttft_slo_s": r.slo["ttft_s"], "requests": r.trace["requests"]}
    for s in r.systems:
        for key in ("goodput_rps", "slo_attainment", "qps_per_w", "ttft_attainment",
                    "tpot_attainment", "mean_power_w", "throughput_rps"):
            row[f"{s.system}_{key}"] = getattr(s, key)
    return row


def _rtl_gemv(p):
    import torch

    from ndpdimm.cosim.backend import CoreConfig
    from ndpdimm.cosim.golden import numerics as golden
    from ndpdimm.hw.formats import Dtype
    from ndpdimm.sw.driver.dimm import Dimm
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "int8": torch.int8}[p["dtype"]]
    gen = torch.Generator().manual_seed(p["seed"])
    shape_w, shape_x = (p["rows"], p["cols"]), (p["batch"], p["cols"])
    if dtype is torch.int8:
        w = torch.randint(-128, 128, shape_w, generator=gen, dtype=torch.int8)
        x = torch.randint(-128, 128, shape_x, generator=gen, dtype=torch.int8)
    else:
        w = torch.randn(shape_w, generator=gen).to(dtype)
        x = torch.randn(shape_x, generator=gen).to(dtype)
    with Dimm(p["backend"], CoreConfig(n_units=p["units"])) as dimm:
        weights = dimm.store_weights(w)
        with dimm.measure("rtl-gemv") as m:
            y = dimm.gemv(weights, x)
        cycles = m.cycles
    want = golden.gemv_dot(w, x, Dtype[p["dtype"].upper()])
    if y.dtype == torch.float32:
        y, want = y.view(torch.int32), want.view(torch.int32)
    exact = bool(torch.equal(y, want))
    if not exact:
        raise JobError(f"GEMV {p['rows']}x{p['cols']} {p['dtype']} batch {p['batch']} seed "
                       f"{p['seed']} on {p['backend']}: result differs from the golden model")
    return {"cycles": cycles, "weight_bytes_per_cycle": w.numel() * w.element_size() / cycles,
            "bit_exact": exact}


def _probe(p):
    time.sleep(p["seconds"])
    return {"square": p["value"] * p["value"]}


JOBS = {
    "hermes": Job("hermes", "Hermes scenario (sw/scenarios/hermes/scenario.py)", "ndpdimm.sw.scenarios.hermes.config:HermesConfig",
                  {}, "dimms", ("hermes_tokens_per_s",)),
    "trimoe": Job("trimoe", "TriMoE scenario (sw/scenarios/trimoe/scenario.py)", "ndpdimm.sw.scenarios.trimoe.config:TriMoeConfig",
                  {}, "batch", ("trimoe_latency_ms",)),
    "rapid": Job("rapid", "RAPID scenario (sw/scenarios/rapid/scenario.py)", "ndpdimm.sw.scenarios.rapid.config:RapidConfig",
                 {}, "rate_scale", ("dynamic_goodput_rps",)),
    "rtl-gemv": Job("rtl-gemv", "one GEMV through the driver, checked bit for bit (RTL build "
                    "cached per parameter set)", None,
                    {"units": (int, 16), "rows": (int, 64), "cols": (int, 256),
                     "batch": (int, 1), "dtype": (str, "fp16"), "seed": (int, 0),
                     "backend": (str, "rtl")}, "rows", ("weight_bytes_per_cycle",)),
    "probe": Job("probe", "sleep and square a number: scheduling measurements and tests", None,
                 {"seconds": (float, 0.0), "value": (int, 0)}, "value", ("square",)),
}
_RUNNERS = {"hermes": _hermes, "trimoe": _trimoe, "rapid": _rapid, "rtl-gemv": _rtl_gemv,
            "probe": _probe}
_CHOICES = {("rtl-gemv", "dtype"): ("fp16", "bf16", "int8"),
            ("rtl-gemv", "backend"): ("rtl", "model")}


def _config_class(job: Job):
    import importlib
    module, name = job.config.split(":")
    return getattr(importlib.import_module(module), name)


def job_parameters(name: str) -> dict:
    """``{parameter: (type, default)}`` of job ``name``."""
    job = JOBS[name]
    if job.config is None:
        return dict(job.params)
    cls = _config_class(job)
    hints = typing.get_type_hints(cls)
    out = {}
    for f in dataclasses.fields(cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        out[f.name] = (hints[f.name], default)
    return out


def _type_ok(value, hint) -> bool:
    """Whether a sweep-file value fits a dataclass field's annotation."""
    args = typing.get_args(hint)
    if args and type(None) in args:
        return value is None or any(_type_ok(value, a) for a in args if a is not type(None))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and \
            math.isfinite(value)
    if hint is str:
        return isinstance(value, str)
    if hint is tuple:
        return isinstance(value, (list, tuple))
    return True


def check_point(name: str, params: dict) -> dict:
    """``params`` with the job's defaults filled in; ``ValueError`` naming the parameter for an
    unknown name, a value of the wrong type or one the configuration rejects."""
    known = job_parameters(name)
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown parameter{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(unknown)} for job {name!r}; it takes "
                         f"{', '.join(sorted(known))}")
    for key, value in params.items():
        hint = known[key][0]
        if not _type_ok(value, hint):
            shown = getattr(hint, "__name__", str(hint))
            raise ValueError(f"{key} = {value!r}: job {name!r} wants {shown}")
        choices = _CHOICES.get((name, key))
        if choices and value not in choices:
            raise ValueError(f"{key} = {value!r}: job {name!r} wants one of {', '.join(choices)}")
    full = {k: params.get(k, d) for k, (_, d) in known.items()}
    job = JOBS[name]
    if job.config is not None:
        conv = {k: tuple(v) if isinstance(v, list) else v for k, v in full.items()}
        _config_class(job)(**conv)              # its __post_init__ checks the values
    elif name == "rtl-gemv":
        for key in ("units", "rows", "cols", "batch"):
            if full[key] < 1:
                raise ValueError(f"{key} = {full[key]!r}: must be at least 1")
    elif name == "probe" and full["seconds"] < 0:
        raise ValueError(f"seconds = {full['seconds']!r}: must not be negative")
    return {k: list(v) if isinstance(v, tuple) else v for k, v in full.items()}


def run_job(name: str, params: dict) -> dict:
    """One point: ``{"status": "ok", "result": row, ...}`` or ``{"status": "error", "error":
    message, ...}``; never raises for a failing point (the sweep goes on)."""
    import traceback
    t0 = time.perf_counter()
    out = {"worker_pid": os.getpid()}
    try:
        out.update(status="ok", result=_RUNNERS[name](dict(params)))
    except Exception as e:                          # any error: reported per point
        out.update(status="error", error=f"{type(e).__name__}: {e}",
                   traceback=traceback.format_exc(limit=8))
    out["task_seconds"] = time.perf_counter() - t0
    return out
