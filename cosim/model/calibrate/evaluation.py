"""The calibrated model against the RTL: per-point and per-sequence errors, their summary, speed.

* :func:`evaluate`: per point, the RTL's cycles against the model's (with the dispatch cycle
  given, as the model backend knows its own time, and without) and the counters;
* :func:`evaluate_sequences`: per sequence, the model backend's replay at the RTL's cycles
  against the RTL (the measured descriptor, the host latency, a debt run's first DMA);
* :func:`error_summary` (mean and max absolute percentage error of rows) and
  :func:`summarise` (the ``summary`` block of a calibration record: per set, per family, the
  256-unit bench, the sequences);
* :func:`speed`: RTL cycles per wall-second against model predictions per second on the same
  descriptors.

Everything but :func:`speed` (wall-clock times) is deterministic.
"""

import time

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.calibrate.measure import replay_sequence
from ndpdimm.cosim.model.calibrate.points import model_fields
from ndpdimm.cosim.model.perf import PerfModel
from ndpdimm.hw.memory.port import Status

__all__ = ["evaluate", "evaluate_sequences", "error_summary", "summarise", "speed"]


def evaluate_sequences(model: PerfModel, config: CoreConfig, recs: list) -> list:
    """Per sequence: RTL vs model (replayed at the RTL's cycles) for the measured descriptor
    (host runs; the probe of debt runs) and, for host runs, the mean host latency."""
    out = []
    for r in recs:
        m = replay_sequence(model, config, r)
        row = {**r, "model_cycles": m["cycles"],
               "error_pct": 100.0 * (m["cycles"] - r["cycles"]) / r["cycles"]}
        if r["spec"]["kind"] == "host":
            row["model_mean_host_latency"] = m["mean_host_latency"]
            row["model_host_accesses"] = m["host_accesses"]
            if r["mean_host_latency"] and m["mean_host_latency"]:
                row["host_latency_error_pct"] = 100.0 * (m["mean_host_latency"] /
                                                         r["mean_host_latency"] - 1)
        else:
            row["model_first_cycles"] = m["first_cycles"]
            row["first_error_pct"] = 100.0 * (m["first_cycles"] / r["first_cycles"] - 1)
        out.append(row)
    return out


def error_summary(rows: list, key="error_pct") -> dict:
    """``n``, mean and max of ``|row[key]|`` over ``rows`` and the name of the worst row
    (``{"n": 0}`` for no rows)."""
    errs = [abs(r[key]) for r in rows]
    if not errs:
        return {"n": 0}
    worst = max(rows, key=lambda r: abs(r[key]))
    return {"n": len(errs), "mean_abs_pct": sum(errs) / len(errs), "max_abs_pct": max(errs),
            "max_point": worst["name"]}


def evaluate(model: PerfModel, records: list) -> list:
    """Per point: RTL vs model cycles (with and without the dispatch cycle) and counters."""
    out = []
    for r in records:
        status = Status[r["status"]]
        fields = model_fields(r)
        pred = model.descriptor_cycles(fields, status, r["start_cycle"])
        pred_nostart = model.descriptor_cycles(fields, status)
        rtl = r["rtl_cycles"]
        out.append({**r, "model_cycles": pred, "model_cycles_no_start": pred_nostart,
                    "error_pct": 100.0 * (pred - rtl) / rtl,
                    "error_pct_no_start": 100.0 * (pred_nostart - rtl) / rtl,
                    "model_counters": model.counters(fields, status, r["start_cycle"])})
    return out


def speed(model: PerfModel, rows: list) -> dict:
    """RTL cycles/s and model predictions/s on the same descriptors, and their ratio."""
    reps = 200
    per_point = []
    t_model_total = 0.0
    for r in rows:
        status = Status[r["status"]]
        t0 = time.perf_counter()
        for _ in range(reps):
            model.descriptor_cycles(model_fields(r), status, r["start_cycle"])
        t = (time.perf_counter() - t0) / reps
        t_model_total += t
        # a model time below the clock's resolution has no ratio: None (null), never the
        # infinity it was, which JSON cannot hold
        per_point.append((r["rtl_wall_s"] / t if t else None, r["name"], r["rtl_cycles"]))
    timed = [p for p in per_point if p[0] is not None]
    big = [p for p in timed if p[2] >= 1000]
    rtl_wall = sum(r["rtl_wall_s"] for r in rows)
    rtl_cycles = sum(r["rtl_sim_cycles"] for r in rows)
    worst = min(big) if big else min(timed) if timed else (None, None, None)
    return {"rtl_wall_s": rtl_wall, "rtl_sim_cycles": rtl_cycles,
            "rtl_cycles_per_s": rtl_cycles / rtl_wall if rtl_wall else None,
            "model_wall_s": t_model_total,
            "model_predictions_per_s": len(rows) / t_model_total if t_model_total else None,
            "model_cycles_per_s": (sum(r["rtl_cycles"] for r in rows) / t_model_total
                                   if t_model_total else None),
            "speed_ratio_total": rtl_wall / t_model_total if t_model_total else None,
            "speed_ratio_min_point": worst[0], "speed_ratio_min_point_name": worst[1],
            "note": "per point: RTL wall time of submit+run of the one descriptor over the "
                    "model's time for one descriptor_cycles call; min over points of >= 1000 cycles "
                    "(null where the model's time was below the clock's resolution)"}


def summarise(cal_rows: list, held_rows: list, bench_rows: list, seq_rows: list) -> dict:
    """The ``summary`` block of a calibration record: :func:`error_summary` of the evaluated
    calibration and held-out points (all, without the start cycle, per family, OK only), of
    the 256-unit bench comparison (None without it) and of the sequences per set."""
    summary = {
        "calibration": error_summary(cal_rows),
        "held_out": error_summary(held_rows),
        "held_out_without_start_cycle": error_summary(held_rows, "error_pct_no_start"),
        "held_out_gemv": error_summary([r for r in held_rows if r["spec"]["kind"] == "gemv"]),
        "held_out_gemv_and_act": error_summary([r for r in held_rows
                                                if r["spec"]["kind"] in ("gemv", "act")]),
        "held_out_act": error_summary([r for r in held_rows if r["spec"]["kind"] == "act"]),
        "held_out_dma": error_summary([r for r in held_rows if r["spec"]["kind"] == "dma"]),
        "held_out_ok_ops": error_summary([r for r in held_rows if r["status"] == "OK"]),
        "bench_256_units": error_summary(bench_rows) if bench_rows else None,
    }
    for set_ in ("calibration", "held_out"):
        rows = [r for r in seq_rows if r["set"] == set_]
        summary[f"sequences_{set_}_host_cycles"] = error_summary(
            [r for r in rows if r["spec"]["kind"] == "host"])
        summary[f"sequences_{set_}_host_latency"] = error_summary(
            [r for r in rows if "host_latency_error_pct" in r], "host_latency_error_pct")
        summary[f"sequences_{set_}_debt_probe"] = error_summary(
            [r for r in rows if r["spec"]["kind"] == "debt"])
    return summary
