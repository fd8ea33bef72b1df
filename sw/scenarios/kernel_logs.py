"""The NDP kernels of one default run of each scenario, logged: the calibration's held-out streams.

:func:`scenario_logs` runs Hermes (its default set-up, batch 1, the Hermes system only) and
TriMoE (its default set-up) on the model backend of a core, each logging every NDP kernel
invocation its system charged (``sw/sampling/record.py``). ``ndpdimm calibrate --streams N``
draws its held-out streams from them (``sw/sampling/streams.py``, which imports no scenario):
:func:`calibration_streams` is the provider that command finds through the entry point group
``ndpdimm.calibration_streams`` (``pyproject.toml``; ``cosim/model/calibrate/command.py``,
which may not import ``ndpdimm.sw``).
Cycle behaviour: none of its own; both runs take tens of seconds on the model backend.
"""

from __future__ import annotations

import dataclasses
import time

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.scenarios.base import RunContext, quiet

__all__ = ["scenario_logs", "calibration_streams"]


def scenario_logs(core: CoreConfig, log=print) -> dict[str, KernelLog]:
    """``{"hermes": log, "trimoe": log}``: the kernels of one default run of each scenario on the
    model backend of ``core`` (Hermes batch 1; TriMoE with ``core``'s units)."""
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    from ndpdimm.sw.scenarios.hermes.scenario import run as run_hermes
    from ndpdimm.sw.scenarios.trimoe.scenario import TriMoeConfig
    from ndpdimm.sw.scenarios.trimoe.scenario import run as run_trimoe
    logs = {"hermes": KernelLog(), "trimoe": KernelLog()}
    t0 = time.perf_counter()
    run_hermes(dataclasses.replace(HermesConfig(), units=core.n_units),
               RunContext(log=quiet, kernels=logs["hermes"]), core=core,
               ablations=False)                              # the Hermes system's kernels only
    log(f"[streams] Hermes run logged {logs['hermes'].invocations():,} kernel invocations "
        f"({time.perf_counter() - t0:.0f} s)")
    t0 = time.perf_counter()
    tcfg = dataclasses.replace(TriMoeConfig(), units=core.n_units, act_lanes=core.act_lanes)
    run_trimoe(tcfg, RunContext(log=quiet, kernels=logs["trimoe"]))
    log(f"[streams] TriMoE run logged {logs['trimoe'].invocations():,} kernel invocations "
        f"({time.perf_counter() - t0:.0f} s)")
    return logs


def calibration_streams(core: CoreConfig, per_kind: int, seed: int, runner) -> dict:
    """The ``held_out_streams`` block of ``ndpdimm calibrate --streams per_kind``: ``per_kind``
    streams of every kernel kind of :func:`scenario_logs`'s runs on ``core``, drawn with
    ``seed`` and run on ``runner`` (:func:`ndpdimm.sw.sampling.streams.stream_check`)."""
    from ndpdimm.sw.sampling.streams import stream_check
    return stream_check(scenario_logs(core), core, per_kind, seed, runner)
