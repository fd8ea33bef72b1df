"""What the three scenarios share: the core choice, the run context, the cost DIMM, the tally, results.

Every scenario package (``hermes/``, ``trimoe/``, ``rapid/``) has the same modules for the same
roles: ``config`` (its configuration dataclass, a :class:`CoreChoice`), ``workload`` (traces
and arrivals), ``costs`` (its kernels' and devices' costs, NDP lines measured through the
driver on a :func:`cost_dimm`), ``simulate`` (the system simulation, accounted in a
:class:`Tally`), ``scenario`` (``run(cfg, ctx) -> Result``), ``report`` (``ndpdimm <scenario>``)
and ``bench`` (``ndpdimm bench --suite <scenario>``).

* :class:`CoreChoice`: the NDP core a run charges its kernels on (``backend``: ``model`` or
  ``rtl``; ``units``; ``act_lanes``): every configuration embeds it (its fields first).
* :class:`RunContext`: what a run reports to and records beside its result: the ``log``
  callable, the ``timeline`` (``--timeline``), the kernel log of its NDP kernels
  (``sw/sampling/record.py``) and the request to replay a sample of them on the RTL
  (``--rtl-samples``, :meth:`RunContext.rtl_check`).
* :func:`cost_dimm`: the DIMM a scenario measures its NDP cost lines on: timing only on the
  model backend (no values computed), the Verilated core on the RTL.
* :class:`Tally`: the base of each simulation's accounting: the timeline process it lays its
  slices on and the DIMM track names.
* :class:`Result`: the base of the scenarios' frozen, typed results: ``as_dict()`` is the JSON
  a run writes (fields in order, nested results and dataclasses as dicts, optional blocks left
  out while ``None``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from ndpdimm.cosim.backend import CoreConfig

# the driver and the sampling modules import torch (seconds): they are imported where they are
# used, so that a configuration, and the options the CLI makes of its fields, imports quickly
if TYPE_CHECKING:
    from ndpdimm.sw.driver.dimm import Dimm
    from ndpdimm.sw.sampling.record import KernelLog

__all__ = ["BACKENDS", "CoreChoice", "RunContext", "cost_dimm", "Tally", "Result", "as_json", "quiet"]

#: The backends a scenario's NDP kernels are charged on (``sw/driver``).
BACKENDS = ("model", "rtl")
#: Largest NDP core a scenario accepts (GEMV units, activation lanes).
MAX_UNITS = 4096


@dataclasses.dataclass(frozen=True)
class CoreChoice:
    """The NDP core of a run: ``backend`` (``model``: the calibrated performance model; ``rtl``:
    the Verilated core), ``units`` (GEMV multiplier units) and ``act_lanes`` (activation-unit
    lanes). ``act_lanes`` None: ``min(units, 256)``. A bad value raises ``ValueError`` naming it,
    and so does a core the RTL cannot build (``units=12``: not a power of two), on either backend.
    Each field's ``metadata`` is what its command-line option needs (``sw/commands/options.py``)."""
    backend: str = dataclasses.field(default="model", metadata={
        "choices": BACKENDS,
        "help": "where NDP kernel cycles come from (rtl: the Verilated core; needs a small "
                "--units, e.g. 16, and --act-lanes 16)"})
    units: int | None = dataclasses.field(default=256, metadata={
        "positive": True, "help": "GEMV multiplier units per NDP core"})
    act_lanes: int | None = dataclasses.field(default=256, metadata={
        "positive": True, "help": "activation unit lanes"})

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be 'model' or 'rtl', got {self.backend!r}")
        for name in ("units", "act_lanes"):
            v, optional = getattr(self, name), self._default(name) is None
            if v is None and optional:
                continue
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_UNITS:
                extra = " or None" if optional else ""
                raise ValueError(f"{name} must be an int in [1, {MAX_UNITS}]{extra}, got {v!r}")
        self.core()          # a core the RTL cannot build is refused here (CoreConfig's check)

    @classmethod
    def _default(cls, name: str):
        """A field's default in this configuration (None: the field may be left None)."""
        return next(f.default for f in dataclasses.fields(cls) if f.name == name)

    @property
    def core_units(self) -> int:
        """GEMV units of the core (``units``; where a configuration leaves it None: 256 on the
        model, 16 on the RTL, whose 256-unit build takes minutes)."""
        if self.units is not None:
            return self.units
        return 256 if self.backend == "model" else 16

    def core(self) -> CoreConfig:
        units = self.core_units
        lanes = self.act_lanes if self.act_lanes is not None else min(units, 256)
        return CoreConfig(n_units=units, act_lanes=lanes)


@dataclasses.dataclass
class RunContext:
    """What a run reports to and records beside its result (see the module docstring).
    ``kernels``: the log the run's NDP kernel invocations go into (a fresh one if None);
    ``rtl_samples`` / ``rtl_seed`` / ``rtl_workers``: replay that many of them on the RTL of
    the same core (``sw/sampling/``) with that seed on that many Dask workers (0: in this
    process); ``rtl_design``: how (a :class:`~ndpdimm.sw.sampling.stats.Design`; None: whole
    replays, proportional allocation)."""
    log: Callable[..., Any] = print
    timeline: Any = None
    kernels: KernelLog | None = None
    rtl_samples: int = 0
    rtl_seed: int = 0
    rtl_workers: int = 2
    rtl_design: Any = None

    def __post_init__(self):
        from ndpdimm.sw.sampling.record import KernelLog
        from ndpdimm.sw.sampling.stats import check_samples_request
        check_samples_request(self.rtl_samples, self.rtl_seed, self.rtl_workers)
        if self.kernels is None:
            self.kernels = KernelLog()
        if self.log is None:
            self.log = quiet

    def rtl_check(self, core: CoreConfig) -> dict | None:
        """The ``rtl_samples`` block of the run's kernels replayed on the RTL of ``core``, or None
        when no samples were asked for."""
        if not self.rtl_samples:
            return None
        from ndpdimm.sw.sampling.replay import rtl_check
        return rtl_check(self.kernels, self.rtl_samples, self.rtl_seed, core,
                         workers=self.rtl_workers, say=self.log, design=self.rtl_design)


def quiet(*_: Any, **__: Any) -> None:
    """A log that prints nothing."""


def cost_dimm(backend: str, core: CoreConfig) -> Dimm:
    """The DIMM NDP cost lines are measured on: ``Dimm("model", core, functional=False)`` (timing
    only) or ``Dimm("rtl", core)``."""
    from ndpdimm.sw.driver.dimm import Dimm
    if backend not in BACKENDS:
        raise ValueError(f"backend must be 'model' or 'rtl', got {backend!r}")
    return Dimm(backend, core, functional=False) if backend == "model" else Dimm(backend, core)


class Tally:
    """The base of a simulation's accounting: ``timeline`` (a
    :class:`~ndpdimm.cosim.timeline.Timeline` the run lays its slices on, or None) and the
    ``process`` its tracks belong to."""
    #: tracks whose slices may overlap (spread over lanes by the timeline writer)
    SHARED_TRACKS: ClassVar[tuple] = ()

    def __init__(self, timeline=None, process: str = ""):
        self.timeline, self.process = timeline, process

    @staticmethod
    def dimm_track(j: int) -> str:
        return f"DIMM {j} NDP core"

    def lay(self, track: str, name: str, start: float, dur: float, **args) -> float:
        """Slice ``name`` on ``track`` from ``start`` for ``dur`` seconds if a timeline is
        recorded; returns the end either way."""
        if self.timeline is not None:
            self.timeline.slice(self.process, track, name, start, dur, args,
                                exclusive=track not in self.SHARED_TRACKS)
        return start + dur


def as_json(v):
    """``v`` as the JSON a result writes: results and dataclasses as dicts, containers walked."""
    if callable(getattr(v, "as_dict", None)):
        return v.as_dict()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: as_json(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [as_json(x) for x in v]
    return v


@dataclasses.dataclass(frozen=True)
class Result:
    """The base of a scenario's typed results (see the module docstring). Fields named in
    ``OPTIONAL`` are left out of the JSON while None (blocks a run writes only when asked)."""
    OPTIONAL: ClassVar[tuple] = ()

    def as_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.name in self.OPTIONAL:
                continue
            out[f.name] = as_json(v)
        return out
