"""The performance model of one NDP core: a descriptor dispatched to the part that times it, and the refresh debt carried from one descriptor to the next.

:class:`PerfModel` answers, for every descriptor, what the RTL would have reported in
``CQ_CYCLES`` and how the counters would have moved, without simulating anything. It
dispatches on the opcode: a GEMV to ``cosim/model/perf/gemv.py``, a DMA to
``cosim/model/perf/dma.py``, ACT / SOFTMAX / ELTWISE to ``cosim/model/perf/activation.py``;
FENCE and the command processor's rejections complete at dispatch (``complete``), a
rejection by the block a descriptor was handed to a few cycles later (``block_reject``; a
GEMV's ``BAD_INDEX`` after the streamer's pre-scan of the index list). Given the dispatch
cycle, a descriptor that streams DRAM first waits for a refresh the idle ranks are paying
(``cosim/model/perf/refresh.py``), then pays or postpones the refreshes inside it; one
without DRAM traffic leaves the debt to the ranks. Host accesses meanwhile:
``cosim/model/perf/host.py``; counters: ``cosim/model/perf/counters.py``.
"""

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.perf import host
from ndpdimm.cosim.model.perf.activation import ACT_OPCODES, act_cost
from ndpdimm.cosim.model.perf.cost import Cost
from ndpdimm.cosim.model.perf.counters import counter_increments
from ndpdimm.cosim.model.perf.dma import dma_cost
from ndpdimm.cosim.model.perf.gemv import GemvShape, GemvTiming, prescan_cycles
from ndpdimm.cosim.model.perf.params import (
    DEFAULT_CONFIG,
    PerfParams,
    UncalibratedError,
    UncalibratedWarning,
    calibration_path,
    config_key,
    load_calibration,
)
from ndpdimm.cosim.model.perf.refresh import RefreshDebt, idle_refresh, refresh_wait
from ndpdimm.cosim.model.perf.rows import RowOpenings
from ndpdimm.cosim.model.perf.structure import CoreStructure
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

__all__ = ["PerfModel", "Timing", "Dispatched"]


@dataclass(frozen=True)
class Timing:
    """One descriptor's prediction: ``cycles`` (``CQ_CYCLES``), the refresh ``debt`` it leaves
    (``since`` relative to its dispatch until the caller knows its end), whether it streams
    DRAM (``uses_dram``: host accesses then contend with it), whether it is a DMA, and the
    :class:`~ndpdimm.cosim.model.perf.cost.Cost` its part answered (``cost``: the refresh
    boundaries inside it, for ``DRAM_REFRESHES``, and the fraction of its time a GEMV's
    engine waits for weights, ``stall``, for host contention)."""
    cycles: int
    debt: RefreshDebt
    uses_dram: bool
    dma: bool = False
    cost: Cost = field(default_factory=lambda: Cost(0.0), compare=False, repr=False)

    @property
    def refreshes(self) -> float:
        return self.cost.refreshes or 0.0

    @property
    def stall(self) -> float:
        return self.cost.stall


@dataclass(frozen=True)
class Dispatched:
    """A descriptor as dispatched at a known cycle: its ``cycles`` (a float, the wait for a
    refresh under way included), its part's ``cost``, the refresh ``debt`` at its end
    (``since`` relative to its dispatch) and whether it streams DRAM."""
    cycles: float
    cost: Cost
    debt: RefreshDebt
    uses_dram: bool


#: the refresh debt of a core idle since long before a descriptor
_IDLE = RefreshDebt(0, -math.inf)
#: no refresh owed (the debt a caller starts with)
_NOTHING_OWED = RefreshDebt()


class PerfModel:
    """Cycle and counter predictions for one configuration (see the module docstring).

    ``params``: :class:`~ndpdimm.cosim.model.perf.params.PerfParams` (the model reads them
    at every call, so a fit may replace them); ``source``: where they came from (a file
    path, or a note); ``calibrated``: whether they were fitted on this very configuration.
    """

    def __init__(self, config: CoreConfig = DEFAULT_CONFIG, params: PerfParams = PerfParams(), *,
                 source: str = "built-in defaults", calibrated: bool = False):
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        if not isinstance(params, PerfParams):
            raise ValueError(f"params must be PerfParams, got {params!r}")
        self.config, self.params = config, params
        self.source, self.calibrated = source, calibrated
        self.structure = CoreStructure.of(config)
        self.org, self.timing = self.structure.org, self.structure.timing
        self.gemv = GemvTiming(self.structure)

    @property
    def reaches_dram_bound(self) -> bool:
        """Whether the engine can consume weights faster than the DRAM gives them in every
        dtype (dense, batch 1): only then do descriptors run on the DRAM-bound path."""
        return self.structure.reaches_dram_bound

    @property
    def _block(self) -> int:
        """Bursts in one 64 KiB span (``CoreStructure.span_bursts``; the tests' name)."""
        return self.structure.span_bursts

    # --- construction -----------------------------------------------------------------
    @classmethod
    def for_config(cls, config: CoreConfig = DEFAULT_CONFIG, path=None, *,
                   strict: bool = False) -> "PerfModel":
        """The model of ``config`` with its calibrated parameters.

        ``path``: a calibration file to use instead of ``cosim/model/calibration/<key>.json``. A
        configuration without a file gets the parameters calibrated on ``DEFAULT_CONFIG``
        (its file, else the built-in defaults) and an ``UncalibratedWarning``; with
        ``strict=True`` it raises ``UncalibratedError`` instead.
        """
        own = Path(path) if path is not None else calibration_path(config)
        if own.exists():
            params, _ = load_calibration(own)
            return cls(config, params, source=str(own), calibrated=True)
        if path is not None:
            raise FileNotFoundError(f"calibration file {own} does not exist")
        msg = (f"no performance-model calibration for {config_key(config)} ({own} is missing; "
               f"`ndpdimm calibrate` makes one)")
        if strict:
            raise UncalibratedError(msg)
        fallback = calibration_path(DEFAULT_CONFIG)
        if fallback.exists():
            params, _ = load_calibration(fallback)
            source = f"{fallback} (calibrated on {config_key(DEFAULT_CONFIG)})"
        else:
            params, source = PerfParams(), "built-in defaults (uncalibrated)"
        warnings.warn(f"{msg}: using the parameters of {source}", UncalibratedWarning, stacklevel=2)
        return cls(config, params, source=source, calibrated=False)

    def with_params(self, params: PerfParams) -> "PerfModel":
        return PerfModel(self.config, params, source="explicit parameters", calibrated=False)

    # --- the interface of the model backend -------------------------------------------
    def descriptor_cycles(self, fields: dict, status: Status, start_cycle: int | None = None) -> int:
        """Predicted ``CQ_CYCLES`` of one descriptor (``fields`` decoded with its opcode's
        layout, ``status`` its completion code). ``start_cycle``: the cycle it is dispatched
        (counts the refreshes inside it exactly); ``None``: the expected refresh cost."""
        return max(1, round(self.dispatched(fields, Status(status), start_cycle).cycles))

    def descriptor_timing(self, fields: dict, status: Status, start_cycle: int,
                          debt: RefreshDebt = _NOTHING_OWED) -> Timing:
        """The prediction of one descriptor dispatched at ``start_cycle`` while the ranks owe
        ``debt`` (see :meth:`refresh_wait`): a descriptor that streams DRAM first waits for a
        refresh under way, then pays or postpones the rest with its own; one without DRAM
        traffic lets the ranks go on paying in the background. The returned debt's ``since``
        is relative to the dispatch (add the cycles)."""
        d = self.dispatched(fields, Status(status), start_cycle, debt)
        cycles = max(1, round(d.cycles))
        if not d.uses_dram:                      # no DRAM traffic: the debt is untouched
            return Timing(cycles, debt, False, cost=d.cost)
        return Timing(cycles, RefreshDebt(d.debt.owed, float(cycles)), True,
                      dma=fields.get("opcode") == Opcode.DMA, cost=d.cost)

    def dispatched(self, fields, status, start, debt: RefreshDebt = _IDLE) -> Dispatched:
        """One descriptor dispatched at ``start`` while the ranks owe ``debt`` (by default
        that of a core idle since long before); ``start`` None: the expected refresh cost,
        nothing owed."""
        if start is None:
            cost = self.cost(fields, status, None)
            return Dispatched(cost.cycles, cost, RefreshDebt(), cost.uses_dram)
        debt = idle_refresh(self.structure, self.params, debt, start)
        wait, owed = refresh_wait(self.params, debt, start)
        cost = self.cost(fields, status, start + wait, owed)
        if not cost.uses_dram:
            return Dispatched(cost.cycles, cost, debt, False)
        t = cost.cycles + wait
        return Dispatched(t, cost, RefreshDebt(cost.dram.owed, t), True)

    def refresh_wait(self, debt: RefreshDebt, start: float) -> tuple[float, int]:
        """(cycles a DRAM descriptor dispatched at ``start`` waits for the refresh in
        progress, refreshes still owed after it): ``refresh.refresh_wait``."""
        return refresh_wait(self.params, debt, start)

    def host_contention(self, policy: int, timing: Timing, spacing: float) -> tuple[int, float]:
        """(latency of one host access, cycles it adds to the descriptor) while the descriptor
        predicted as ``timing`` streams DRAM, under arbitration ``policy`` (the ``POLICY``
        register), ``spacing`` cycles after the previous host access
        (``cosim/model/perf/host.py``)."""
        return host.host_contention(self.params, policy, timing.dma, timing.stall, spacing)

    def dispatch_gap(self) -> int:
        """Cycles between a completion and the next dispatch when the queue is not empty."""
        return max(0, round(self.params.gap))

    def host_access_cycles(self, write: bool) -> int:
        """Latency of one 64 B host pass-through access on an idle core."""
        return host.host_access_cycles(self.params, write)

    def counters(self, fields: dict, status: Status, start_cycle: int | None = None) -> dict:
        """Increments of ``COUNTER_NAMES`` caused by one descriptor."""
        status = Status(status)
        cost = self.cost(fields, status, start_cycle)
        return self.counters_of(fields, status, cost.cycles, cost, start_cycle)

    def counters_of(self, fields: dict, status: Status, cycles: float, cost: Cost,
                    start_cycle: int | None = None) -> dict:
        """:meth:`counters` from a prediction already made (``cycles`` and ``cost``, e.g. a
        :class:`Timing`'s, with any host-contention delay added)."""
        return counter_increments(self.structure, self.params, fields, status, cycles, cost,
                                  start_cycle)

    def gather_spread(self, fields, g: GemvShape) -> tuple[float, float]:
        """How much longer a row gather's weight bursts keep the ranks' buses busy than as
        many consecutive bursts, in its full groups and its last group
        (``cosim/model/perf/gather.py``)."""
        return self.gemv.gather_spread(fields, g)

    def row_openings(self, g: GemvShape, fields) -> RowOpenings:
        """The row openings of a DOT GEMV, per group (``cosim/model/perf/rows.py``)."""
        return self.gemv.row_openings(g, fields)

    #: the name the tests and ``docs/perf_model.md`` use for :meth:`row_openings`
    _dot_opens = row_openings

    # --- dispatch -----------------------------------------------------------------------
    def cost(self, fields, status, start, owed=0) -> Cost:
        """What one descriptor costs when it starts at ``start`` (None: the expected refresh
        cost) with ``owed`` refreshes owed, from the part its opcode goes to."""
        p, s = self.params, self.structure
        op = fields.get("opcode")
        if status != Status.OK:
            return Cost(self._rejected(op, fields, status))
        if op == Opcode.GEMV:
            return self.gemv.cost(p, fields, start, owed)
        if op == Opcode.DMA:
            return dma_cost(s, p, fields, start, owed)
        if op in ACT_OPCODES:
            return act_cost(s, p, op, fields)
        return Cost(p.complete)                        # FENCE (or anything completing at once)

    def _rejected(self, op, fields, status) -> float:
        p = self.params
        if op == Opcode.GEMV and status == Status.BAD_INDEX:
            # handed to the streamer, which pre-scans the whole list (8 entries per SRAM word)
            return p.complete + p.block_reject + prescan_cycles(fields.get("n_idx", 0))
        if op == Opcode.DMA and status in (Status.MISALIGNED, Status.SRAM_RANGE) or \
                op in ACT_OPCODES:
            return p.complete + p.block_reject
        return p.complete
