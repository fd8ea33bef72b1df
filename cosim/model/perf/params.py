"""The performance model's parameters: the fitted and measured constants, their grouping by hardware part, and the calibration files they are stored in.

:class:`PerfParams` holds the few physical constants the model cannot read from the
hardware description (NDP cycles unless stated); :data:`PARAMETER_GROUPS` says which part of
the model (``cosim/model/perf/``) each one belongs to. The fitted ones come from
``ndpdimm calibrate`` (``cosim/model/calibrate/``) runs against the RTL backend and live
in ``cosim/model/calibration/<config key>.json``, one file per configuration
(:func:`config_key`, :func:`calibration_path`, :func:`load_calibration`). No cycle behaviour
lives here.
"""

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig

__all__ = ["PerfParams", "PARAMETER_GROUPS", "FITTED", "DRAM_FITTED", "CALIBRATION_DIR",
           "DEFAULT_CONFIG", "config_key", "calibration_path", "calibration_words", "load_calibration",
           "UncalibratedWarning", "UncalibratedError"]

#: Where calibrated parameter files live (one JSON file per configuration).
CALIBRATION_DIR = Path(__file__).resolve().parents[1] / "calibration"
#: The configuration whose parameters are the fallback for uncalibrated ones.
DEFAULT_CONFIG = CoreConfig()


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
    #: multiple of the 64 KiB span, ``cosim/model/perf/rows.py``).
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

#: The parameters by the part of the model that uses them (each parameter in exactly one
#: group; the order within a group is :class:`PerfParams`'s).
PARAMETER_GROUPS = {
    "dispatch": ("complete", "block_reject", "gap"),
    "gemv": ("gemv_fixed", "mem_latency", "open_latency", "open_latency_aligned",
             "conflict_latency", "gather_latency", "group_fixed"),
    "dram_bound": ("stream_efficiency", "open_penalty", "conflict_penalty"),
    "refresh": ("refresh_extra", "refresh_idle", "refresh_lead"),
    "host": ("host_read", "host_write", "host_slow_host_first", "host_slow_ndp_first",
             "host_slow_fair", "host_slow_span", "host_busy_host_first", "host_busy_ndp_first",
             "host_busy_fair", "host_busy_dma_host_first", "host_busy_dma_ndp_first",
             "host_busy_dma_fair"),
    "dma": ("dma_fixed", "dma_write_fixed", "dma_round_trip", "dma_open_penalty"),
    "activation": ("act_fixed", "act_pass", "act_reduce", "act_mixed"),
    "counters": ("gemv_busy_offset", "act_busy_offset", "dma_busy_offset"),
}
_grouped = [n for names in PARAMETER_GROUPS.values() for n in names]
if sorted(_grouped) != sorted(f.name for f in dataclasses.fields(PerfParams)):
    raise AssertionError("PARAMETER_GROUPS must name every PerfParams field exactly once")

#: Parameters fitted to CQ cycles by least squares (the rest are measured directly: the
#: counter offsets, the gap, host latencies). The DRAM-bound path's :data:`DRAM_FITTED` join
#: them on a core that reaches it (``PerfModel.reaches_dram_bound``); a smaller core
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


def calibration_words(config: CoreConfig) -> tuple[str, bool]:
    """``(words, calibrated)`` for a table's header and a result's provenance: whether
    ``config`` has its own calibration file, as ``PerfModel.for_config`` decides; without one the
    model runs with the parameters calibrated on ``DEFAULT_CONFIG`` and the words say so."""
    if calibration_path(config).exists():
        return "calibrated performance model", True
    return (f"UNCALIBRATED performance model: no calibration of this core ({config_key(config)}), "
            f"the parameters calibrated on {config_key(DEFAULT_CONFIG)}", False)


def load_calibration(path) -> tuple[PerfParams, dict]:
    """(parameters, the whole record) of a calibration file."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
        params = PerfParams.from_dict(record["params"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"calibration file {path} is not usable: {exc}") from None
    return params, record
