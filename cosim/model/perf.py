"""Transaction-level performance model of one NDP core: the cycles of a descriptor from its fields.

The model backend (``cosim/model/backend.py``) asks it, for every descriptor,
what the RTL would have reported in ``CQ_CYCLES`` and how the performance
counters would have moved, without simulating anything: each answer is
arithmetic on the descriptor's fields and the build parameters
(:class:`~ndpdimm.cosim.backend.CoreConfig`); a GEMV walks the weight
accesses of one or two output groups (at most 32 each, the pattern is
periodic) and extrapolates, so no answer depends on the size of the
operation. Equations, parameters, calibration and measured error:
``docs/perf_model.md``.

Structure, from how the hardware works (module docstrings of ``hw/``):

* **GEMV** (``hw/gemv/engine.py``, ``hw/memory/weight_streamer.py``). The engine
  runs ``groups = ceil(n_out / outs_per_group)`` output groups of
  ``steps x batch`` slots, ``P = slot_cycles(dtype, radix)`` cycles each
  (``hw/formats.py``); after each group it drains ``batch x ceil(outs/8)``
  result beats (two cycles a beat with ``accumulate``) plus
  ``max(D, L + 3) - P`` cycles of pipeline turn-around (derived from the
  engine's RTL; 0 for FP16, 3 for BF16 and INT8). Weights arrive in
  accesses - DOT chunks of 4 words per unit, AXPY beats of one word per
  unit - and the streamer's ring holds ``R`` of them (``ring_beats / 4``
  chunks or ``ring_beats`` beats): access ``i`` is requested when access
  ``i - R`` has been consumed and arrives ``X_i`` later (issue, memory
  latency, and the extra latency of opening rows: a DOT GEMV's openings are
  replayed over every group with one open 64 KiB span per bank). The engine
  starts an access when the previous one is done and its data are there. At
  many units the DRAM bounds the stream instead: bursts at the sustained
  bandwidth plus a penalty per row-opening access and per bank conflict.
  The answer is the larger of the two paths - per phase: the full groups,
  then a short last group - plus fixed start/end costs, plus the refreshes
  that fall inside the operation (each stalls the stream for about ``tRFC``
  less what the ring still holds; a DRAM-bound stream postpones up to 8 of
  them).
* **DMA** (``hw/memory/dma.py``): a burst every ``max(64 B / SRAM word,
  round trip / outstanding)`` cycles plus latency and row openings; its
  refreshes wait for its end (the transfer keeps the rank queues busy).
* **ACT / SOFTMAX / ELTWISE** (``hw/activation/sequencer.py``): per pass
  the SRAM words it moves, one a cycle per port: all reads and the last
  beat's writes, or the first beat's reads and all writes, whichever is
  longer (a partial last beat moves only the words its elements fill),
  plus the pass's pipeline latency (reductions add the tree depth);
  SOFTMAX is MAX, SUMEXP, a one-beat RECIP pass and EXP.
* Rejected descriptors complete at dispatch (command-processor checks) or
  a few cycles later (checks of the block they were handed to; a GEMV's
  ``BAD_INDEX`` after the streamer's pre-scan of the index list).

Refresh depends on *when* an operation runs (the ranks refresh every tREFI
from reset, all together in the core's ``aligned`` mode). Given the cycle
at which a descriptor is dispatched (``start_cycle``), the model counts the
refresh boundaries inside it; without it, it charges the expected number.

Parameters (:class:`PerfParams`) are few and physical; the fitted ones come
from ``cosim/model/calibrate.py`` runs against the RTL backend and live in
``cosim/model/calibration/<config key>.json``. :meth:`PerfModel.for_config` loads
the file of a configuration; a configuration without one gets the default
configuration's parameters with a :class:`UncalibratedWarning` (the
structural part - units, lanes, ring, DRAM timing - is always the
configuration's own), or ``UncalibratedError`` with ``strict=True``.
"""

import collections
import dataclasses
import json
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import NDP_CLOCK_HZ, Dtype, serial_digits, slot_cycles
from ndpdimm.hw.memory.address_map import AddressMap
from ndpdimm.hw.memory.controller import POLICIES
from ndpdimm.hw.memory.port import Status

__all__ = ["PerfParams", "PerfModel", "GemvShape", "gemv_shape", "config_key", "calibration_path",
           "CALIBRATION_DIR", "DEFAULT_CONFIG", "UncalibratedWarning", "UncalibratedError",
           "COUNTER_NAMES", "FITTED", "DRAM_FITTED", "act_op_codes", "RefreshDebt", "Timing", "POLICY_NAMES"]

#: Where calibrated parameter files live (one JSON file per configuration).
CALIBRATION_DIR = Path(__file__).resolve().parent / "calibration"
#: The configuration whose parameters are the fallback for uncalibrated ones.
DEFAULT_CONFIG = CoreConfig()
#: Counter registers :meth:`PerfModel.counters` predicts (increments per descriptor).
COUNTER_NAMES = ("GEMV_BUSY_CYCLES", "ACT_BUSY_CYCLES", "DMA_BUSY_CYCLES", "DRAM_BURSTS_READ",
                 "DRAM_ROW_HITS", "DRAM_ROW_MISSES", "DRAM_REFRESHES")

# Fixed structure of the RTL (documented in the blocks' docstrings, not fitted).
_BURST = 64                  # bytes per DRAM burst
_BLOCK_BURSTS = 1024         # bursts in one 64 KiB span of the default address map: 8 rows
                             # (4 ranks x 2 bank groups) of one bank, 128 columns each
_PAIRS = 8                   # (rank, bank group) pairs a block spreads over
_SRAM_WORD = 32              # bytes per SRAM word (one port moves one per cycle)
_DMA_OUTSTANDING = 16        # DmaEngine max_outstanding in NdpCore
_ISSUE_PER_CYCLE = 2         # weight streamer: request lanes
_WINDOW = 32                 # weight accesses per group simulated before extrapolating
_DRAM_BOUND = 0.9            # stream utilisation above which the rank queues never drain
                             # (refresh postponed up to max_postponed_refs)
#: batch x slot cycles up to which a GEMV's weight requests come too densely for a rank to idle
#: the 64 cycles it refreshes after, so it holds its refreshes too (batch-1 FP16 / BF16). From
#: the RTL's refresh counters on the calibration points that span two or more refresh
#: boundaries: such GEMVs issued fewer REF rounds than boundaries in 3 of 3 at 256 units, 29 of
#: 29 at 16 and 30 of 34 at 8; with batch x slot cycles of 22 or more they paid every one inside
#: in 6 of 7, 28 of 28 and 13 of 13 (INT8 at batch 1, 16, is mixed).
_DENSE_REQUESTS_BP = 11


@dataclass(frozen=True)
class RefreshDebt:
    """Refreshes the ranks owe after a descriptor that kept their queues busy (all ranks
    together, the core's ``aligned`` refresh mode), and the cycle from which they are free to
    pay them (the descriptor's end)."""
    owed: int = 0
    since: float = 0.0


@dataclass(frozen=True)
class Timing:
    """One descriptor's prediction: ``cycles`` (``CQ_CYCLES``), the refresh ``debt`` it leaves
    (``since`` relative to its dispatch until the caller knows its end), whether it streams
    DRAM (``uses_dram``: host accesses then contend with it), the refresh boundaries inside
    it (for ``DRAM_REFRESHES``), and for host contention whether it is a DMA and the fraction
    of its time a GEMV's engine waits for weights (``stall``); the last two come from the
    model's details of the descriptor (``info``)."""
    cycles: int
    debt: RefreshDebt
    uses_dram: bool
    dma: bool = False
    info: dict = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def refreshes(self) -> float:
        return self.info.get("refreshes", 0.0)

    @property
    def stall(self) -> float:
        return self.info.get("stall", 0.0)


class UncalibratedWarning(UserWarning):
    """A configuration has no calibration file: the default configuration's parameters are used."""


class UncalibratedError(LookupError):
    """``strict=True`` and a configuration has no calibration file."""


@dataclass(frozen=True)
class PerfParams:
    """Fitted constants of the model, in NDP cycles unless stated (``docs/perf_model.md``).

    Everything else (units, lanes, ring size, slot cycles, DRAM timing,
    refresh interval, SRAM word) comes from the configuration itself.
    """
    #: CQ cycles of a descriptor the command processor completes at dispatch: FENCE, opcode /
    #: field / window rejections (pop, decode, check, completion write).
    complete: float = 2.0
    #: extra cycles when the rejection comes from the block a descriptor was handed to (DMA
    #: engine, activation sequencer, weight streamer) rather than the command processor.
    block_reject: float = 4.0
    #: cycles between a completion and the next dispatch when the queue is not empty.
    gap: float = 1.0
    #: latency of a 64 B host pass-through read / write on an idle core (request to response).
    host_read: float = 45.0
    host_write: float = 40.0

    #: GEMV: fixed cycles besides compute, streaming and drains (dispatch, streamer checks,
    #: engine fill ``D + L``, result writer and completion).
    gemv_fixed: float = 20.0
    #: GEMV: memory latency of a weight request for a row hit, crossings and controller included
    #: (request issued to data in the ring), NDP cycles. Not fitted (at 16 units it only adds to
    #: the other latencies): the idle host read's row-hit latency, 35, less the CSR side.
    mem_latency: float = 33.0
    #: GEMV: extra latency of an access that opens new rows (precharge, activate, and the
    #: scheduler opening one row per rank at a time), NDP cycles.
    open_latency: float = 45.0
    #: GEMV: the same when consecutive accesses are whole 64 KiB spans apart, so that every
    #: access opens rows at the same column offset (measured lower: the activations of one
    #: access overlap the previous access's column reads).
    open_latency_aligned: float = 25.0
    #: GEMV: extra latency of an access whose rows are in the bank the access just before it
    #: opened another row of (back to back: the precharge waits for tRAS, then tRP + tRCD).
    conflict_latency: float = 60.0
    #: GEMV: extra latency of a gather access (index cache loads, bursts scattered over the
    #: rows so some (rank, bank group) pairs get several bursts in a row).
    gather_latency: float = 5.0
    #: GEMV: extra cycles per output group beyond the drain beats and the derived turn-around.
    group_fixed: float = 0.0
    #: GEMV DRAM-bound path: sustained fraction of the peak burst rate for a row-hit stream.
    stream_efficiency: float = 0.99
    #: GEMV DRAM-bound path: cycles lost per chunk that opens new rows.
    open_penalty: float = 5.0
    #: GEMV DRAM-bound path: cycles lost per conflict, an access whose first span opens rows in
    #: the bank the access before it ended in (the bank closes a row still being read, then
    #: opens the next; 24.5-26.9 cycles per conflict on the RTL at row strides at or near a
    #: multiple of the 64 KiB span, ``PerfModel._dot_opens``).
    conflict_penalty: float = 0.0
    #: cycles a refresh costs a stream beyond tRFC (precharge, re-activation, latency).
    refresh_extra: float = 40.0
    #: cycles per refresh when the ranks pay owed refreshes back to back with no traffic
    #: (precharge, REF, tRFC; measured about 400 between REFs in the RTL).
    refresh_idle: float = 400.0
    #: cycles from a descriptor's dispatch until its first DRAM request reaches the ranks: a
    #: refresh still running then delays it by what is left beyond this. Measured, not fitted
    #: (the refresh-debt runs fix only ``refresh_idle - refresh_lead``): on the RTL a 4 KiB
    #: DMA can wait for a refresh falling due up to 4-7 cycles after its dispatch (into SRAM)
    #: or 16 (out of SRAM, which reads the SRAM first), never later (the sweep of
    #: ``test_refresh_lead_is_where_the_rtl_stops_waiting``).
    refresh_lead: float = 12.0

    #: host contention, per ``POLICY`` (host_first, ndp_first, fair). A 64 B host access
    #: during a GEMV delays it by ``host_slow_<policy> * w * min(1, spacing /
    #: host_slow_span)``: ``w`` is the fraction of the GEMV's time its engine waits for
    #: weights (a host access that closes a row the stream uses costs it a re-open only where
    #: the stream is latency-bound), ``spacing`` the cycles since the previous host access
    #: (dense host traffic saturates: the stream cannot lose more than one re-open per
    #: ``host_slow_span`` cycles). DMAs (16 requests outstanding) were measured unaffected.
    host_slow_host_first: float = 250.0
    host_slow_ndp_first: float = 250.0
    host_slow_fair: float = 250.0
    host_slow_span: float = 250.0
    #: host access latency while a GEMV / a DMA streams DRAM (mean over the calibration runs).
    host_busy_host_first: float = 60.0
    host_busy_ndp_first: float = 60.0
    host_busy_fair: float = 60.0
    host_busy_dma_host_first: float = 60.0
    host_busy_dma_ndp_first: float = 60.0
    host_busy_dma_fair: float = 60.0

    #: DMA DRAM -> SRAM: fixed cycles (dispatch, checks, first access latency, status).
    dma_fixed: float = 40.0
    #: DMA SRAM -> DRAM: fixed cycles (as above, write acknowledgement latency).
    dma_write_fixed: float = 40.0
    #: DMA: round trip of one burst (request to response taken), so a burst every
    #: ``max(words per burst, round trip / outstanding)`` cycles.
    dma_round_trip: float = 32.0
    #: DMA: cycles lost per 64 KiB span (8 rows opened).
    dma_open_penalty: float = 10.0

    #: ACT/SOFTMAX/ELTWISE: fixed cycles per descriptor (dispatch, checks, status).
    act_fixed: float = 6.0
    #: cycles per pass besides its SRAM words (command, unit latency 7, read response).
    act_pass: float = 10.0
    #: extra cycles of a reduction pass beyond the tree depth.
    act_reduce: float = 1.0
    #: extra cycles per beat, times (words written / words read), when one source stream
    #: reads more SRAM words per beat than the pass writes (FP32 in, FP16/BF16 out): the
    #: faster read stream keeps running into the write stream's bank and loses arbitrations.
    act_mixed: float = 0.75

    #: counters: CQ cycles minus the block's busy cycles, per block.
    gemv_busy_offset: float = 8.0
    act_busy_offset: float = 4.0
    dma_busy_offset: float = 4.0

    def replace(self, **kw) -> "PerfParams":
        return dataclasses.replace(self, **kw)

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "PerfParams":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"unknown perf model parameters {sorted(unknown)}; known: {sorted(names)}")
        return cls(**{k: float(v) for k, v in d.items()})


#: ``POLICY`` register values by code (``hw/memory/controller.POLICIES``; the reserved code 3
#: is neither host_first nor ndp_first there, so it behaves as fair).
POLICY_NAMES = POLICIES + ("fair",)

#: Parameters fitted to CQ cycles by least squares (the rest are measured directly: the
#: counter offsets, the gap, host latencies). The DRAM-bound path's :data:`DRAM_FITTED` join
#: them on a core that reaches it (:attr:`PerfModel.reaches_dram_bound`); a smaller core
#: (16 units) never does and takes them from the 256-unit bandwidth bench.
FITTED = ("complete", "block_reject", "gemv_fixed", "open_latency", "open_latency_aligned",
          "conflict_latency", "gather_latency", "group_fixed", "refresh_extra", "dma_fixed", "dma_write_fixed", "dma_round_trip", "dma_open_penalty",
          "act_fixed", "act_pass", "act_reduce", "act_mixed")
DRAM_FITTED = ("stream_efficiency", "open_penalty", "conflict_penalty")


def config_key(config: CoreConfig) -> str:
    """File-name key of a configuration: every build parameter, and the DRAM config's name."""
    p = config.core_params()
    dram = "ddr4-3200" if config.dram_config is None else Path(config.dram_config).stem
    return (f"u{p['n_units']}-b{p['max_batch']}-r{p['radix_bits']}-ring{p['ring_beats']}"
            f"-sram{p['sram_size']}x{p['sram_banks']}-act{p['act_lanes']}-q{p['desc_queue']}"
            f"-cq{p['cq_depth']}-{dram}")


def calibration_path(config: CoreConfig) -> Path:
    return CALIBRATION_DIR / f"{config_key(config)}.json"


def act_op_codes():
    """(reduction op codes, binary op codes) of the activation unit."""
    from ndpdimm.hw.activation.unit import BINARY_OPS, REDUCTION_OPS
    return tuple(int(o) for o in REDUCTION_OPS), tuple(int(o) for o in BINARY_OPS)


_REDUCTION_OPS, _BINARY_OPS = (9, 10), (7, 8)     # ActOp MAX, SUMEXP / ADD, MUL (checked in tests)
_FP32 = 2                                          # ActFmt.FP32


@dataclass(frozen=True)
class GemvShape:
    """What a GEMV descriptor means to the engine and the streamer."""
    axpy: bool
    gather: bool
    dtype: Dtype
    batch: int
    n_out: int
    steps: int            # weight words per unit per group (DOT: ceil(K/lanes); AXPY: n_idx)
    per_group: int        # outputs per group
    groups: int
    last_outs: int        # outputs in the last group
    bpr: int              # bursts per stored neuron
    bursts: int           # weight bursts read (DRAM_BURSTS_READ)
    result_beats: int     # result beats drained, all groups


def gemv_shape(fields: dict, n_units: int) -> GemvShape:
    """Derived quantities of a (valid) GEMV descriptor, as the command processor derives them."""
    dtype = Dtype(fields["dtype"])
    lanes = dtype.info.lanes
    e = dtype.info.elem_bits // 8
    op = fields["op"]
    axpy, gather = op == GemvOp.COL_GATHER, op != GemvOp.DENSE
    n_rows, n_cols, n_idx = fields["n_rows"], fields["n_cols"], fields["n_idx"]
    batch = fields["batch_minus_one"] + 1
    bpr = -(-n_cols * e // _BURST)
    if axpy:
        n_out, steps, per_group = n_cols, n_idx, n_units * lanes
    else:
        n_out = n_idx if gather else n_rows
        steps, per_group = -(-n_cols // lanes), n_units
    groups = -(-n_out // per_group)
    last = n_out - (groups - 1) * per_group if groups else 0
    if steps == 0 or n_out == 0:
        bursts = 0
    else:
        bursts = n_idx * bpr if axpy else n_out * bpr
    beats_full = -(-per_group // 8)
    beats = batch * ((groups - 1) * beats_full + -(-last // 8)) if groups else 0
    return GemvShape(axpy, gather, dtype, batch, n_out, steps, per_group, groups, last, bpr,
                     bursts, beats)


class PerfModel:
    """Cycle and counter predictions for one configuration (see the module docstring).

    ``params``: :class:`PerfParams`; ``source``: where they came from (a file path, or a
    note); ``calibrated``: whether they were fitted on this very configuration.
    """

    def __init__(self, config: CoreConfig = DEFAULT_CONFIG, params: PerfParams = PerfParams(), *,
                 source: str = "built-in defaults", calibrated: bool = False):
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        if not isinstance(params, PerfParams):
            raise ValueError(f"params must be PerfParams, got {params!r}")
        self.config, self.params = config, params
        self.source, self.calibrated = source, calibrated
        org, t = config.dram()
        self.org, self.timing = org, t
        ns = 1e9 / NDP_CLOCK_HZ                                  # ns per NDP cycle
        dram = t.tCK_ns / ns                                     # NDP cycles per DRAM cycle
        self._dram_cycle = dram
        self._burst_rate = org.ranks / (t.tBL * dram)            # peak bursts per NDP cycle
        self._hit = (t.tCL + t.tBL) * dram                       # column latency on the bus
        self._miss = (t.tRP + t.tRCD) * dram                     # row conflict adds
        self._trfc = t.tRFC * dram
        self._trefi = t.tREFI * dram
        self._postponed = t.max_postponed_refs
        self._ring_chunks = max(config.ring_beats // 4, 1)
        self._words_per_burst = _BURST // _SRAM_WORD
        self._tree = max(config.act_lanes - 1, 0).bit_length()
        self._pairs = min(_PAIRS, org.ranks * org.bank_groups)
        self._banks = org.banks_per_group
        self._block = org.ranks * org.bank_groups * org.bursts_per_row
        self._address_map = AddressMap(org)
        self._opens_cache = {}
        # per dtype: multiplier digits, reducer lanes, slot cycles
        self._slot = {d: (serial_digits(d, config.radix_bits), d.info.lanes,
                          slot_cycles(d, config.radix_bits)) for d in Dtype}

    @property
    def reaches_dram_bound(self) -> bool:
        """Whether the engine can consume weights faster than the DRAM gives them in every
        dtype (dense, batch 1): only then do descriptors run on the DRAM-bound path."""
        peak = self._burst_rate * _BURST
        return all(self.config.n_units * d.info.lanes * d.info.elem_bits / 8 / slot >= peak
                   for d, (_, _, slot) in self._slot.items())

    # --- construction -----------------------------------------------------------------
    @classmethod
    def for_config(cls, config: CoreConfig = DEFAULT_CONFIG, path=None, *,
                   strict: bool = False) -> "PerfModel":
        """The model of ``config`` with its calibrated parameters.

        ``path``: a calibration file to use instead of ``cosim/model/calibration/<key>.json``. A
        configuration without a file gets the parameters calibrated on :data:`DEFAULT_CONFIG`
        (its file, else the built-in defaults) and an :class:`UncalibratedWarning`; with
        ``strict=True`` it raises :class:`UncalibratedError` instead.
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
        return max(1, round(self._timed(fields, Status(status), start_cycle)[0]))

    def descriptor_timing(self, fields: dict, status: Status, start_cycle: int,
                          debt: RefreshDebt = RefreshDebt()) -> Timing:
        """The prediction of one descriptor dispatched at ``start_cycle`` while the ranks owe
        ``debt`` (see :meth:`refresh_wait` and :meth:`_with_refresh`): a descriptor that
        streams DRAM first waits for a refresh under way, then pays or postpones the rest
        with its own; one without DRAM traffic lets the ranks go on paying in the background.
        The returned debt's ``since`` is relative to the dispatch (add the cycles)."""
        t, info, debt_out, uses_dram = self._timed(fields, Status(status), start_cycle, debt)
        cycles = max(1, round(t))
        if not uses_dram:                        # no DRAM traffic: the debt is untouched
            return Timing(cycles, debt, False, info=info)
        return Timing(cycles, RefreshDebt(debt_out.owed, float(cycles)), True,
                      dma=fields.get("opcode") == Opcode.DMA, info=info)

    def _timed(self, fields, status, start, debt=RefreshDebt(0, -math.inf)):
        """(float cycles, details, debt at the end, streams DRAM) of one descriptor; the
        default debt is that of a core idle since long before ``start``."""
        if start is None:
            t, info = self._cycles(fields, status, None)
            return t, info, RefreshDebt(), info.get("regime") is not None
        debt = self._idle_refresh(debt, start)
        wait, owed = self.refresh_wait(debt, start)
        t, info = self._cycles(fields, status, start + wait, owed)
        if info.get("regime") is None:
            return t, info, debt, False
        return t + wait, info, RefreshDebt(info["owed"], t + wait), True

    def _idle_refresh(self, debt: RefreshDebt, start: float) -> RefreshDebt:
        """``debt`` plus the refresh that fell due while the ranks had no traffic (after
        ``debt.since``, by the time the descriptor's first request arrives): the ranks issued it
        at once, after any owed ones, and a descriptor arriving during it waits."""
        arrive = start + self.params.refresh_lead
        b = math.floor(arrive / self._trefi) * self._trefi
        if b <= 0 or b < debt.since:                 # the first refresh falls due at tREFI
            return debt
        if debt.owed <= 0:
            return RefreshDebt(1, b)
        return RefreshDebt(debt.owed + 1, debt.since)

    def host_contention(self, policy: int, timing: Timing, spacing: float) -> tuple[int, float]:
        """(latency of one host access, cycles it adds to the descriptor) while the descriptor
        predicted as ``timing`` streams DRAM, under arbitration ``policy`` (the ``POLICY``
        register), ``spacing`` cycles after the previous host access (see
        :class:`PerfParams`)."""
        name = POLICY_NAMES[policy & 3]
        p = self.params
        if timing.dma:
            return max(1, round(getattr(p, f"host_busy_dma_{name}"))), 0
        span = max(p.host_slow_span, 1.0)
        slow = getattr(p, f"host_slow_{name}") * timing.stall * min(1.0, spacing / span)
        # the stream loses at most the part of the time since the previous access that it spent
        # waiting for DRAM: host traffic slows a descriptor but never stops it
        slow = min(slow, timing.stall * spacing)
        return max(1, round(getattr(p, f"host_busy_{name}"))), max(0.0, slow)

    def dispatch_gap(self) -> int:
        """Cycles between a completion and the next dispatch when the queue is not empty."""
        return max(0, round(self.params.gap))

    def host_access_cycles(self, write: bool) -> int:
        """Latency of one 64 B host pass-through access on an idle core."""
        return max(1, round(self.params.host_write if write else self.params.host_read))

    def counters(self, fields: dict, status: Status, start_cycle: int | None = None) -> dict:
        """Increments of :data:`COUNTER_NAMES` caused by one descriptor."""
        status = Status(status)
        cycles, info = self._cycles(fields, status, start_cycle)
        return self.counters_of(fields, status, cycles, info, start_cycle)

    def counters_of(self, fields: dict, status: Status, cycles: float, info: dict,
                    start_cycle: int | None = None) -> dict:
        """:meth:`counters` from a prediction already made (``cycles`` and ``info``, e.g. a
        :class:`Timing`'s, with any host-contention delay added)."""
        p = self.params
        out = dict.fromkeys(COUNTER_NAMES, 0)
        op = fields.get("opcode")
        # refresh boundaries inside the descriptor, whether or not they cost it anything
        refreshes = info.get("refreshes")
        if refreshes is None:
            refreshes = self._refreshes(start_cycle, cycles)
        out["DRAM_REFRESHES"] = round(refreshes * self.org.ranks)
        if status != Status.OK:
            if op == Opcode.DMA and status != Status.DRAM_RANGE:
                out["DMA_BUSY_CYCLES"] = max(0, round(cycles - p.dma_busy_offset))
            elif op in (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE):
                out["ACT_BUSY_CYCLES"] = max(0, round(cycles - p.act_busy_offset))
            return out
        if op == Opcode.GEMV:
            g = info["shape"]
            if g.n_out:
                out["GEMV_BUSY_CYCLES"] = max(0, round(cycles - p.gemv_busy_offset))
            out["DRAM_BURSTS_READ"] = g.bursts
            misses = min(g.bursts, round(info["misses"]))
            out["DRAM_ROW_MISSES"], out["DRAM_ROW_HITS"] = misses, g.bursts - misses
        elif op == Opcode.DMA:
            out["DMA_BUSY_CYCLES"] = max(0, round(cycles - p.dma_busy_offset))
            n = fields["n_bytes"] // _BURST
            misses = min(n, round(info["misses"]))
            out["DRAM_ROW_MISSES"], out["DRAM_ROW_HITS"] = misses, n - misses
        elif op in (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE):
            out["ACT_BUSY_CYCLES"] = max(0, round(cycles - p.act_busy_offset))
        return out

    # --- the model ----------------------------------------------------------------------
    def _cycles(self, fields, status, start, owed=0):
        """(cycles as a float, details) of one descriptor that starts with ``owed`` refreshes
        owed (details of a GEMV / DMA: ``regime`` - None without DRAM traffic - and ``owed``
        at its end)."""
        p = self.params
        op = fields.get("opcode")
        if status != Status.OK:
            return self._rejected(op, fields, status), {}
        if op == Opcode.GEMV:
            return self._gemv(fields, start, owed)
        if op == Opcode.DMA:
            return self._dma(fields, start, owed)
        if op in (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE):
            return self._act(op, fields), {}
        return p.complete, {}                          # FENCE (or anything completing at once)

    def _rejected(self, op, fields, status):
        p = self.params
        if op == Opcode.GEMV and status == Status.BAD_INDEX:
            # handed to the streamer, which pre-scans the whole list (8 entries per SRAM word)
            return p.complete + p.block_reject + -(-fields.get("n_idx", 0) // 8)
        if op == Opcode.DMA and status in (Status.MISALIGNED, Status.SRAM_RANGE) or \
                op in (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE):
            return p.complete + p.block_reject
        return p.complete

    def _refreshes(self, start, duration):
        """Refresh boundaries (all ranks together) inside ``[start, start + duration)``; the
        expected number when ``start`` is None."""
        if duration <= 0:
            return 0.0
        if start is None:
            return duration / self._trefi
        return float(math.floor((start + duration) / self._trefi) - math.floor(start / self._trefi))

    def _with_refresh(self, base, start, loss_per, regime, owed=0):
        """(duration, refreshes paid inside, refreshes owed at the end) of an operation of
        ``base`` cycles without refresh that starts owing ``owed``. How the ranks treat a due
        refresh depends on their queues (``RankScheduler``: REF when the queue is empty or
        ``max_postponed_refs`` are owed):

        * ``prompt``: the queues empty often: every refresh (the owed ones at once) is paid
          when due, each costing ``loss_per`` (every GEMV that is not DRAM-bound; see
          docs/perf_model.md for the latency-bound streams where the RTL postpones instead);
        * ``hold``: the queues never empty (DMA, DRAM-bound GEMV, batch-1 FP16 / BF16 GEMV:
          ``_DENSE_REQUESTS_BP``): past ``max_postponed_refs``
          one refresh per interval is paid, the rest stay owed.

        Without ``start`` the expected number of boundaries is used and nothing is owed."""
        cap = self._postponed
        t = base
        for _ in range(3):                            # fixed point: refreshes lengthen t
            n = self._refreshes(start, t)
            total = owed + n
            if start is None:
                paid = max(0.0, n - cap) if regime == "hold" else n
            elif regime == "prompt":
                paid = total
            else:
                paid = max(0.0, total - cap)
            t = base + paid * loss_per
        owed_out = 0 if start is None else int(total - paid)
        return t, paid, owed_out

    def refresh_wait(self, debt: RefreshDebt, start: float) -> tuple[float, int]:
        """(cycles a DRAM descriptor dispatched at ``start`` waits for the refresh in progress,
        refreshes still owed after it): from ``debt.since`` the idle ranks pay their debt back
        to back, ``refresh_idle`` cycles each; the descriptor's first request arrives
        ``refresh_lead`` cycles after dispatch and then only waits for the REF under way (with
        fewer than ``max_postponed_refs`` owed, a rank with queued requests serves them)."""
        if debt.owed <= 0:
            return 0.0, 0
        R = max(self.params.refresh_idle, 1.0)
        arrive = start + self.params.refresh_lead
        elapsed = max(0.0, arrive - debt.since)
        k = int(elapsed // R)
        if k >= debt.owed:
            return 0.0, 0
        return (k + 1) * R - elapsed, debt.owed - k - 1

    # GEMV ------------------------------------------------------------------------------
    def _accesses(self, g: GemvShape, fields):
        """One output group's weight accesses, in streamer order: DOT chunks (4 words of every
        unit) or AXPY beats (one word of every unit). Returns ``(n, beats, bursts, opens,
        ring, spans)``: accesses per group, then beats / bursts / row-opening flags of the
        first ``min(n, _WINDOW)`` of them (the pattern is periodic), the ring's capacity in
        accesses and the 64 KiB spans the sweep touches; ``opens`` and ``spans`` are None for
        DOT (:meth:`_dot_opens` replays every group's openings). An AXPY access opens rows when it enters
        another 64 KiB span than the access before it and that span's bank holds other spans
        of the same sweep (else its rows stay open from the previous group); see
        docs/perf_model.md."""
        c = self.config
        U, blk = c.n_units, self._block
        if not g.axpy:
            n = g.bpr
            w = min(n, _WINDOW)
            beats = [4] * w
            if n <= _WINDOW and g.steps % 4:
                beats[-1] = g.steps % 4
            u = min(U, g.n_out)
            return n, beats, [u] * w, None, self._ring_chunks, None
        base = fields["w_base"] // _BURST
        n = g.steps
        w = min(n, _WINDOW)
        per = min(U // 4, g.bpr)
        spacing = fields["n_rows"] / max(n, 1)              # neurons between selected ones
        starts = [base + int(i * spacing) * g.bpr for i in range(w)]
        last = base + int((n - 1) * spacing) * g.bpr
        beats, bursts, ring = [1] * w, [per] * w, c.ring_beats
        blocks = [s // blk for s in starts]
        first, final = blocks[0], last // blk
        banks = [self._span_bank(b) for b in blocks]
        final_bank = self._span_bank(final)
        if n > _WINDOW:
            sweep = set(range(first, final + 1)) if final - first < 4 * _WINDOW else None
        else:
            sweep = set(blocks)
        per_bank = [0] * self._banks
        if sweep is not None:
            for b in sweep:
                per_bank[self._span_bank(b)] += 1
        opens = []
        for i, b in enumerate(blocks):
            prev, prev_bank = (blocks[i - 1], banks[i - 1]) if i else (final, final_bank)
            # 1: opens rows; 2: right after another row of the same bank was opened
            if b == prev or (sweep is not None and per_bank[banks[i]] < 2):
                opens.append(0)                 # same span, or its rows stay open across groups
            else:
                opens.append(2 if banks[i] == prev_bank else 1)
        spans = final - first + 1 if sweep is None else len(sweep)
        return n, beats, bursts, opens, ring, spans

    def _span_bank(self, span: int) -> int:
        """The bank a 64 KiB span of the weight layout lies in: the address map's bank field
        with its row rotation (``hw/memory/address_map.py``)."""
        return int(self._address_map.field("bank", span * self._block * _BURST))

    def _dot_opens(self, g: GemvShape, fields) -> tuple:
        """Row openings of a DOT GEMV (dense or row gather), replayed in the streamer's order
        over every group: access ``j`` of a group reads burst ``base + j*N + row`` of each of
        the group's rows (``cosim/gemv/weight_layout.py``), so it touches the 64 KiB spans
        those bursts fall in (8 rows: every rank and bank group of one bank); a span opens rows
        unless it is the span its bank last opened. Returns ``(flags, opening accesses,
        conflicts, spans opened)``, each per group: the flags of its first ``min(bpr,
        _WINDOW)`` accesses (0: all its spans open; 1: opens rows; 2: a *conflict*: its first
        span opens rows in the bank of the span the access before it ended in), how many of
        its accesses open rows, how many of those conflict, how many spans they open. Measured: the spans opened
        x 8 are the RTL's ``DRAM_ROW_MISSES`` on 17 of the 20 dense and row-gather calibration
        points of the scenario core without a refresh (docs/perf_model.md). A row gather's
        rows are ``fields["indices"]``; without them, evenly spread over the ``N`` stored
        ones. Cached per shape and index list."""
        idx = None
        if g.gather:
            idx = fields.get("indices")
            idx = (np.arange(g.n_out, dtype=np.int64) * fields["n_rows"] // max(g.n_out, 1)
                   if idx is None else np.asarray(idx, dtype=np.int64)[:g.n_out])
        key = (fields["w_base"], fields["n_rows"], g.bpr, g.n_out, g.per_group,
               None if idx is None else idx.tobytes())
        hit = self._opens_cache.get(key)
        if hit is not None:
            return hit
        blk, N, u = self._block, fields["n_rows"], g.per_group
        base = fields["w_base"] // _BURST
        w = min(g.bpr, _WINDOW)
        open_span = [-1] * self._banks
        bank_of = {}                        # span -> bank, over this replay
        flags, accesses, conflicts, spans, prev_bank = [], [], [], [], -1
        for grp in range(g.groups):
            lo_row, hi_row = grp * u, min(g.n_out, (grp + 1) * u)
            if idx is None:
                row0 = base + np.arange(g.bpr, dtype=np.int64) * N
                first_span = ((row0 + lo_row) // blk).tolist()
                last_span = ((row0 + hi_row - 1) // blk).tolist()
                touched = [range(a, b + 1) for a, b in zip(first_span, last_span)]
            else:
                sel = np.sort(idx[lo_row:hi_row])
                spans_of = (base + np.arange(g.bpr, dtype=np.int64)[:, None] * N + sel) // blk
                keep = np.ones(spans_of.shape, dtype=bool)
                keep[:, 1:] = spans_of[:, 1:] != spans_of[:, :-1]
                touched = [row[k].tolist() for row, k in zip(spans_of, keep)]
            group_flags, n_access, n_conflict, n_span = [], 0, 0, 0
            for j, blocks in enumerate(touched):
                opened = []
                first_bank = bank_of.get(blocks[0])
                if first_bank is None:
                    first_bank = bank_of[blocks[0]] = self._span_bank(blocks[0])
                # a conflict: its first span opens rows in the bank the access before it ended
                # in, so the precharge waits for those reads
                conflict = open_span[first_bank] != blocks[0] and first_bank == prev_bank
                for b in blocks:
                    bank = bank_of.get(b)
                    if bank is None:
                        bank = bank_of[b] = self._span_bank(b)
                    if open_span[bank] != b:
                        open_span[bank] = b
                        opened.append(bank)
                    prev_bank = bank
                flag = 0 if not opened else 2 if conflict else 1
                if opened:
                    n_access += 1
                    n_conflict += flag == 2
                    n_span += len(opened)
                if j < w:
                    group_flags.append(flag)
            flags.append(tuple(group_flags))
            accesses.append(n_access)
            conflicts.append(n_conflict)
            spans.append(n_span)
        out = (flags, accesses, conflicts, spans)
        if len(self._opens_cache) > 4096:
            self._opens_cache.clear()
        self._opens_cache[key] = out
        return out

    def _stream(self, n, beats, bursts, opens, ring, BP, drain, groups, extra_latency=0.0,
                aligned=False, continued=False):
        """Compute path of the GEMV: the streamer/engine recurrence over two groups of the
        access pattern (see the module docstring), extrapolated to ``groups`` groups of ``n``
        accesses. Returns (cycles to the end of the last drain, steady-state cycles per group).
        ``continued``: the groups follow others, so the first access's latency is hidden."""
        p = self.params
        w = len(beats)
        issue_rate = min(_ISSUE_PER_CYCLE, self._burst_rate * p.stream_efficiency)
        X = [bursts[i] / issue_rate + p.mem_latency + extra_latency
             + (0.0 if not opens[i] else
                p.open_latency_aligned if aligned and opens[i - 1] else p.open_latency)
             + (p.conflict_latency if opens[i] == 2 else 0.0)
             for i in range(w)]
        if max(X) <= ((ring - 1) * min(beats) + 1) * BP:
            # every access arrives before the engine needs it: no stall after the first one
            per_group = n * beats[0] * BP if n > w else sum(beats) * BP
            if n > w and beats[-1] != beats[0]:
                per_group = (n - 1) * beats[0] * BP + beats[-1] * BP
            return (0.0 if continued else X[0]) + groups * (per_group + drain), per_group + drain
        done = []          # time the access's last beat is accepted (frees its ring room)
        t_end = 0.0        # end of the previous access's slots (+ drain at a group boundary)
        ends, tau = [], 0.0
        k = 0
        marks = {}
        for grp in range(min(groups, 2)):
            for i in range(w):
                req = done[k - ring] if k >= ring else sum(bursts[:i + 1]) / issue_rate - bursts[i] / issue_rate
                s = max(t_end, req + X[i])
                if i == w // 2:
                    marks[grp] = s
                done.append(s + (beats[i] - 1) * BP)
                t_end = s + beats[i] * BP
                k += 1
            if w > 2:                  # steady time per access: the last group simulated
                tau = (t_end - marks[grp]) / (w - w // 2)
            t_end += drain
            ends.append(t_end)
        extra = (n - w) * tau if n > w else 0.0
        if groups == 1:
            total = ends[0] + extra
        else:
            total = ends[0] + extra + (groups - 1) * (ends[1] - ends[0] + extra)
        period = (ends[1] - ends[0] if len(ends) > 1 else ends[0]) + extra
        return total - (X[0] if continued else 0.0), period

    def _gemv(self, fields, start, owed=0):
        p, c = self.params, self.config
        g = gemv_shape(fields, c.n_units)
        B, S = g.batch, g.steps
        D, L, P = self._slot[g.dtype]
        BP = B * P
        wb = 2 if fields.get("accumulate") else 1               # writer cycles per result beat
        prescan = -(-fields["n_idx"] // 8) if g.gather else 0
        info = {"shape": g, "misses": 0.0, "refreshes": 0.0, "owed": owed, "regime": None}
        if g.n_out == 0:
            return p.complete + p.block_reject + prescan, info
        turn = max(D, L + 3) - P
        beats_full = B * -(-g.per_group // 8)
        drain = turn + p.group_fixed + wb * beats_full
        # the last group drains only its own outputs
        short = wb * (beats_full * g.groups - g.result_beats)
        ring, X_hit = self._ring_chunks, p.mem_latency
        pure = g.groups * S * BP                                 # the engine's slots alone
        spread, spread_last = self.gather_spread(fields, g)
        info["spread"] = spread
        if S and g.bursts:
            n, beats, bursts, opens, ring, spans = self._accesses(g, fields)
            stride = (fields["n_rows"] / max(g.steps, 1) if g.axpy else fields["n_rows"]) * \
                (g.bpr if g.axpy else 1)
            extra, aligned = p.gather_latency if g.gather else 0.0, stride >= self._block
            u = min(c.n_units, g.n_out)
            if g.axpy:
                compute_path, _ = self._stream(n, beats, bursts, opens, ring, BP, drain,
                                               g.groups, extra, aligned)
                opens_total = g.groups * sum(1 for o in opens if o) * (n / len(opens))
                conflicts = g.groups * sum(1 for o in opens if o == 2) * (n / len(opens))
                info["misses"] = max(opens_total, spans) * min(self._pairs, bursts[0])
                parts = [(compute_path, g.bursts * spread_last, opens_total, conflicts)]
            else:
                flags, opening, conflicts, spans_opened = self._dot_opens(g, fields)
                full = g.groups if g.last_outs == u else g.groups - 1
                # the groups by their row openings (a periodic pattern: a few kinds of group)
                kinds = collections.Counter(flags[:full])
                compute_path = 0.0
                for k, (f, count) in enumerate(kinds.items()):
                    compute_path += self._stream(n, beats, bursts, list(f), ring, BP, drain,
                                                 count, extra, aligned, continued=k > 0)[0]
                info["misses"] = sum(spans_opened) * min(self._pairs, bursts[0])
                if full == g.groups:
                    weighted = g.bursts * spread_last if g.groups == 1 else \
                        (g.bursts - u * g.bpr) * spread + u * g.bpr * spread_last
                    parts = [(compute_path, weighted, sum(opening), sum(conflicts))]
                else:
                    # a short last group is a phase of its own: it reads only its own rows'
                    # bursts (a DOT access is one burst per output), so it is often latency-bound
                    # after DRAM-bound full groups; its first requests go out while the group
                    # before it runs
                    last = [b * g.last_outs / u for b in bursts]
                    last_path = self._stream(n, beats, last, list(flags[-1]), ring, BP, drain,
                                             1, extra, aligned, continued=full > 0)[0]
                    parts = [(compute_path, full * u * g.bpr * spread, sum(opening[:full]),
                              sum(conflicts[:full])),
                             (last_path, g.last_outs * g.bpr * spread_last, opening[-1],
                              conflicts[-1])]
        else:
            parts = [(g.groups * (S * BP + drain), 0.0, 0.0, 0.0)]
        # DRAM path of each phase: every burst at the sustained rate, plus a penalty per
        # row-opening access and one per conflict. A row gather's uneven spread over ranks and
        # bank groups lengthens the DRAM path only: an access's latency is hidden by the
        # accesses in flight (calibration error 1.70 vs 1.92 % at 8 units, 1.81 vs 1.99 % at 16,
        # equal at 256 with it in the access latency). The last phase drains only its own
        # outputs (``short``).
        rate = self._burst_rate * p.stream_efficiency
        compute_path = sum(q[0] for q in parts) - short
        weighted = sum(q[1] for q in parts)
        info["stall"] = max(0.0, 1.0 - pure / compute_path) if compute_path > 0 else 0.0
        path = 0.0
        for k, (cp, w_bursts, opened, conflicted) in enumerate(parts):
            end = short if k == len(parts) - 1 else 0.0
            path += max(cp - end, w_bursts / rate + opened * p.open_penalty
                        + conflicted * p.conflict_penalty + drain - end)
        util = (weighted / rate) / compute_path if compute_path else 0.0
        base = p.gemv_fixed + prescan + path
        dram_bound = util >= _DRAM_BOUND
        if dram_bound or BP <= _DENSE_REQUESTS_BP:
            loss, regime = self._trfc + p.refresh_extra, "hold"
        else:
            cover = (ring * (1 if g.axpy else 4) - 1) * BP if g.bursts else float("inf")
            loss = max(0.0, self._trfc + p.refresh_extra + X_hit - cover)
            regime = "prompt"
        if not g.bursts:
            regime = None
        t, n_ref, info["owed"] = self._with_refresh(base, start, loss, regime or "prompt", owed)
        info["refreshes"], info["regime"] = n_ref, regime
        info["misses"] += n_ref * self._pairs                    # a refresh closes the open rows
        return t, info

    def gather_spread(self, fields, g: GemvShape) -> tuple[float, float]:
        """How much longer a row gather's weight bursts keep the ranks' buses busy than the
        same number of consecutive bursts, in its full groups and in its last group: (1.0,
        1.0) without ``fields["indices"]``, the index list, which the model backend reads
        from the SRAM.

        An access reads chunk ``j`` of every selected row of a group, one burst each, at
        ``base + j*N + index`` (``cosim/gemv/weight_layout.py``). Consecutive bursts alternate
        bank groups and ranks (``AddressMap``), so a dense access spreads evenly; the selected
        rows of a gather fall unevenly, and a rank then takes ``max(tBL * its bursts,
        tCCD_L * its busiest bank group's bursts)``. The factor is the slowest rank's time
        over the even share, over a group's first 8 accesses together: the offsets ``j*N``
        rotate the low address bits (unless ``N`` is a multiple of 8), so consecutive
        accesses load other ranks, and the rank queues and the ring overlap them (measured:
        a 153-of-306-row gather runs 1.13x the evenly spread model, its load over the 4
        rotations 1.14x, its worst single access 1.25x)."""
        idx = fields.get("indices")
        if idx is None or not g.gather or g.axpy or not g.n_out:
            return 1.0, 1.0
        idx = np.asarray(idx, dtype=np.int64)[:g.n_out]
        t, org = self.timing, self.org
        ranks, groups_per_rank = org.ranks, org.bank_groups
        group = np.arange(len(idx)) // g.per_group
        n_groups = int(group[-1]) + 1
        amap = self._address_map
        base = fields["w_base"] // _BURST
        bus = max(t.tBL, t.tCCD_S)
        counts = np.zeros(n_groups * ranks * groups_per_rank)
        for j in range(min(g.bpr, 8)):
            addr = (base + j * fields["n_rows"] + idx) * _BURST
            cls = amap.field("rank", addr) * groups_per_rank + amap.field("bank_group", addr)
            counts += np.bincount(group * (ranks * groups_per_rank) + cls,
                                  minlength=n_groups * ranks * groups_per_rank)
        counts = counts.reshape(n_groups, ranks, groups_per_rank)
        busy = np.maximum(bus * counts.sum(2), t.tCCD_L * counts.max(2)).max(1)
        even = bus * counts.sum((1, 2)) / ranks
        last = max(1.0, float(busy[-1] / even[-1]))
        if n_groups == 1:
            return last, last
        return max(1.0, float(busy[:-1].sum() / even[:-1].sum())), last

    # DMA -------------------------------------------------------------------------------
    def _dma(self, fields, start, owed=0):
        p = self.params
        n = fields["n_bytes"] // _BURST
        info = {"misses": 0.0, "refreshes": 0.0, "owed": owed, "regime": None}
        if n == 0:
            return p.complete + p.block_reject, info
        off = (fields["dram"] // _BURST) % self._block
        blocks = -(-(off + n) // self._block)
        info["misses"] = blocks * min(self._pairs, n)
        per = max(self._words_per_burst, p.dma_round_trip / _DMA_OUTSTANDING)
        fixed = p.dma_write_fixed if fields.get("to_dram") else p.dma_fixed
        base = fixed + n * per + blocks * p.dma_open_penalty
        # a DMA keeps its ranks' queues busy: a refresh that falls due waits for the end of the
        # transfer (up to max_postponed_refs of them), so it costs the next descriptor's idle gap;
        # the transfer itself does not slow (RTL: a 96 KiB DMA takes 3,120 cycles with a
        # refresh falling due 500 or 1,500 cycles in, 3,121 with none)
        t, r, info["owed"] = self._with_refresh(base, start, self._trfc + p.refresh_extra, "hold",
                                                owed)
        info["refreshes"], info["regime"] = r, "hold"
        info["misses"] += r * self._pairs
        return t, info

    # ACT -------------------------------------------------------------------------------
    def _pass(self, n, in_fmt, out_fmt, binary=False, reduce=False):
        """Cycles of one pass over ``n`` elements, timed in SRAM words (one a cycle per port).

        Beats are ``lanes`` elements, the last one partial, and each reads (writes) only the
        words its elements fill. Reads stream back to back; a beat's writes start once the
        unit returns it and follow the previous beat's, so the pass ends after either all
        reads and the last beat's writes or the first beat's reads and all writes, whichever
        is later (at 16 lanes a beat is one word; at 256 a full FP16 beat is 16)."""
        lanes = self.config.act_lanes
        beats = -(-n // lanes)
        last = n - (beats - 1) * lanes

        def words(count, fmt):
            return -(-count * (4 if fmt == _FP32 else 2) // _SRAM_WORD)

        sources = 2 if binary else 1
        rd_full, rd_last = sources * words(lanes, in_fmt), sources * words(last, in_fmt)
        reads = (beats - 1) * rd_full + rd_last
        if reduce:
            return reads + self.params.act_pass + self._tree + self.params.act_reduce
        wr_full, wr_last = words(lanes, out_fmt), words(last, out_fmt)
        writes = (beats - 1) * wr_full + wr_last
        t = max(reads + wr_last, (rd_full if beats > 1 else rd_last) + writes)
        if words(lanes, in_fmt) > wr_full:  # a source stream outruns the write stream (FP32 -> 16 bit)
            t += self.params.act_mixed * beats * wr_full / rd_full
        return t + self.params.act_pass

    def _act(self, op, f):
        p = self.params
        n = f["n"]
        if n == 0:
            return p.complete + p.block_reject
        t = p.complete + p.act_fixed
        if op == Opcode.SOFTMAX:
            t += self._pass(n, f["in_fmt"], _FP32, reduce=True)          # MAX
            t += self._pass(n, f["in_fmt"], _FP32, reduce=True)          # SUMEXP
            t += 1 + p.act_pass                                           # RECIP: one beat
            t += self._pass(n, f["in_fmt"], f["out_fmt"])                 # EXP * 1/sum
        elif op == Opcode.ELTWISE:
            t += self._pass(n, f["in_fmt"], f["out_fmt"], binary=True)
        else:
            t += self._pass(n, f["in_fmt"], f["out_fmt"], reduce=f["op"] in _REDUCTION_OPS)
        return t


def load_calibration(path) -> tuple[PerfParams, dict]:
    """(parameters, the whole record) of a calibration file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
        params = PerfParams.from_dict(record["params"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"calibration file {path} is not usable: {exc}") from None
    return params, record
