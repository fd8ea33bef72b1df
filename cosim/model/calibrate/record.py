"""The calibration procedure end to end, and the record it writes.

:func:`calibrate` runs the steps of the package docstring: the points measured on the RTL
(``measure.run_points``; their raw records kept under the shared cache before any fit) or read
back from a file (``--refit``), the fits (``fitting.fit_calibration``), the evaluation
(``evaluation``), then the record: configuration, provenance (``cosim/provenance.py``),
parameters, every point and sequence with its RTL and model cycles, the error summary and the
speeds, written to ``cosim/model/calibration/<config key>.json``.

:func:`load_record` reads a configuration's record back, :func:`add_held_out_streams` adds a
held-out streams block to it, :func:`report` and :func:`held_out_table` print it.
"""

import json
import time
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.cache import build_cache_dir
from ndpdimm.cosim.model.calibrate.evaluation import evaluate, evaluate_sequences, speed, summarise
from ndpdimm.cosim.model.calibrate.fitting import BENCH_256, REPO, fit_calibration
from ndpdimm.cosim.model.calibrate.measure import run_points
from ndpdimm.cosim.model.calibrate.points import point_sets, sequence_runs
from ndpdimm.cosim.model.perf import DRAM_FITTED, FITTED, PerfModel, calibration_path, config_key
from ndpdimm.cosim.provenance import dumps_finite, stamp

__all__ = ["calibrate", "add_held_out_streams", "load_record", "report", "held_out_table"]

#: The provenance fields (``cosim.provenance.FIELDS``) in the order a calibration record has
#: always listed them: at its top level, and in ``rtl_measured`` (as a refit copies them from
#: an older file's top level).
RECORD_FIELDS = ("git_commit", "git_dirty", "date", "command")
MEASURED_FIELDS = ("date", "command", "git_commit", "git_dirty")


def _provenance(command, order) -> dict:
    """``cosim.provenance.stamp`` of ``command`` (default ``ndpdimm calibrate``), its four
    fields in ``order``."""
    fields = stamp(command or "ndpdimm calibrate")
    return {k: fields[k] for k in order}


def _read_refit(refit, config: CoreConfig, log) -> tuple:
    """(calibration, held-out, extras, sequences, rtl_measured) of the RTL runs stored in the
    file ``refit`` (a record or a raw ``.rtl.json``); ``ValueError`` if of another configuration."""
    old = json.loads(Path(refit).read_text())
    if old.get("config") != config.as_dict():
        raise ValueError(f"{refit} holds RTL runs of {old.get('config_key', old.get('config'))}, "
                         f"not of {config_key(config)}: give the same configuration options "
                         "(--units, --max-batch, --sram-size, ...) as the run that made it")
    cal = [r for r in old["points"] if r["set"] == "calibration"]
    held = [r for r in old["points"] if r["set"] == "held_out"]
    extras = old.get("extras")
    seq_recs = [{k: v for k, v in r.items() if not k.startswith("model_") and "error" not in k}
                for r in old.get("sequences", [])]
    measured = old.get("rtl_measured")
    if not isinstance(measured, dict):      # the file's RTL runs were made by its command
        measured = {k: old.get(k) for k in MEASURED_FIELDS}
    log(f"refitting from {refit}: {len(cal)} calibration, {len(held)} held-out points")
    return cal, held, extras, seq_recs, measured


def _measure(config: CoreConfig, sets: dict, *, jobs, progress, command, runner, resume,
             log) -> tuple:
    """(calibration, held-out, extras, sequences) measured on the RTL; the raw records are
    saved to ``<cache>/calibration/<config key>.rtl.json`` (what ``--refit`` reads) first."""
    pts = sets["calibration"] + sets["held_out"]
    seqs = sequence_runs(config)
    log(f"calibrating {config_key(config)}: {len(sets['calibration'])} calibration + "
        f"{len(sets['held_out'])} held-out points and {len(seqs)} sequences (host traffic, "
        f"refresh debt) on the RTL backend, "
        f"{getattr(runner, 'description', None) or f'{jobs} process(es)'}")
    recs, extras = run_points(config, pts + seqs, jobs=jobs, progress=progress,
                              runner=runner, store=resume, log=log)
    n_cal = len(sets["calibration"])
    cal, held, seq_recs = recs[:n_cal], recs[n_cal:len(pts)], recs[len(pts):]
    # the RTL runs are the expensive part: keep them before fitting (``--refit`` reads this)
    raw = build_cache_dir("calibration") / f"{config_key(config)}.rtl.json"
    raw.write_text(dumps_finite({
        "config": config.as_dict(), "config_key": config_key(config), "extras": extras,
        "points": [{**r, "set": s} for s, rs in (("calibration", cal), ("held_out", held))
                   for r in rs],
        "sequences": seq_recs,
        "rtl_measured": _provenance(command, MEASURED_FIELDS)}, raw, indent=None) + "\n")
    log(f"RTL runs saved to {raw} (`--refit` it if the fit fails)")
    return cal, held, extras, seq_recs


def calibrate(config: CoreConfig, *, jobs: int = 1, out=None, refit=None, progress=True,
              command=None, runner=None, resume: bool = True, log=print) -> dict:
    """The whole procedure (package docstring); returns the record written to ``out``."""
    sets = point_sets(config)
    t_start = time.perf_counter()
    if refit is not None:
        cal, held, extras, seq_recs, measured = _read_refit(refit, config, log)
    else:
        cal, held, extras, seq_recs = _measure(config, sets, jobs=jobs, progress=progress,
                                               command=command, runner=runner, resume=resume,
                                               log=log)
        measured = None
    seq_cal = [r for r in seq_recs if r["set"] == "calibration"]
    params, joint, bench_rows = fit_calibration(config, cal, seq_cal, extras)
    model = PerfModel(config, params, source="calibration", calibrated=True)
    seq_rows = evaluate_sequences(model, config, seq_recs)
    cal_rows = evaluate(model, cal)
    held_rows = evaluate(model, held)
    for r in cal_rows:
        r["set"] = "calibration"
    for r in held_rows:
        r["set"] = "held_out"
    summary = summarise(cal_rows, held_rows, bench_rows, seq_rows)
    record = {
        "what": "performance-model calibration against the RTL backend (cosim/model/calibrate/)",
        "config": config.as_dict(), "config_key": config_key(config),
        **_provenance(command, RECORD_FIELDS),
        "rtl_measured": measured or "by this command",
        "params": params.as_dict(), "fitted": list(FITTED + (DRAM_FITTED if joint else ())),
        "dram_bound_source": ("calibration points (fitted with the rest)" if joint else
                              str(BENCH_256.relative_to(REPO)) if bench_rows else None),
        "summary": summary, "speed": speed(model, held_rows + cal_rows),
        "extras": extras, "bench_256_units": bench_rows,
        "points": cal_rows + held_rows, "sequences": seq_rows,
        "wall_s": time.perf_counter() - t_start,
    }
    out = Path(out) if out is not None else calibration_path(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dumps_finite(record, out) + "\n")
    log(report(record))
    log(f"wrote {out}")
    return record


def add_held_out_streams(record: dict, block: dict, path) -> None:
    """Store a ``held_out_streams`` block (``sw/sampling/streams.py``) in ``record`` and its
    file ``path``; its summary also under ``summary.held_out_streams``."""
    record["held_out_streams"] = block
    record["summary"]["held_out_streams"] = block["summary"]
    Path(path).write_text(dumps_finite(record, path) + "\n")


def load_record(config: CoreConfig, path=None) -> tuple[dict, Path]:
    """The calibration record of ``config`` (``path`` or the configuration's file) and its path;
    ``ValueError`` naming the file if it is missing or of another configuration."""
    path = Path(path) if path is not None else calibration_path(config)
    if not path.exists():
        raise ValueError(f"{path}: no calibration of {config_key(config)} to add streams "
                                "to (run `ndpdimm calibrate` with the same options first)")
    record = json.loads(path.read_text())
    if record.get("config") != config.as_dict():
        raise ValueError(f"{path} calibrates {record.get('config_key')}, not {config_key(config)}")
    return record, path


def report(record: dict) -> str:
    """A calibration record's summary as text: error per set and family, the held-out streams
    if it has them, and the speeds."""
    s, sp = record["summary"], record["speed"]
    lines = [f"performance model {record['config_key']}:"]
    for key, label in (("calibration", "calibration"), ("held_out", "held-out"),
                       ("held_out_without_start_cycle", "held-out, no start cycle"),
                       ("held_out_gemv", "held-out GEMV"),
                       ("held_out_gemv_and_act", "held-out GEMV + activation"),
                       ("held_out_act", "held-out activation"),
                       ("held_out_dma", "held-out DMA"), ("bench_256_units", "256-unit bench"),
                       ("sequences_calibration_host_cycles", "host traffic: cycles (cal)"),
                       ("sequences_held_out_host_cycles", "host traffic: cycles"),
                       ("sequences_held_out_host_latency", "host traffic: host latency"),
                       ("sequences_calibration_debt_probe", "refresh debt: probe (cal)"),
                       ("sequences_held_out_debt_probe", "refresh debt: probe")):
        v = s.get(key)
        if v and v.get("n"):
            lines.append(f"  {label:26s} {v['n']:3d} points: mean |error| {v['mean_abs_pct']:.2f} %, "
                         f"max {v['max_abs_pct']:.2f} % ({v['max_point']})")
    st = s.get("held_out_streams")
    if st and st.get("streams"):
        lines.append(f"  held-out scenario streams  {st['streams']:3d} streams, "
                     f"{st['descriptors']} descriptors: total {st['total_error_pct']:+.2f} %, "
                     f"per stream mean |error| {st['stream_mean_abs_total_error_pct']:.2f} % "
                     f"(max {st['stream_max_abs_total_error_pct']:.2f} %, {st['stream_max_point']}), "
                     f"per descriptor mean |error| {st['descriptor_mean_abs_error_pct']:.2f} %"
                     f"{'' if st['all_bit_exact'] else ', RESULTS DIFFER FROM THE GOLDEN MODEL'}")
    lines.append(f"  RTL {sp['rtl_cycles_per_s']:.0f} cycles/s; model "
                 f"{sp['model_predictions_per_s']:.0f} descriptors/s; speed ratio "
                 f"{_ratio(sp['speed_ratio_total'])} overall, min "
                 f"{_ratio(sp['speed_ratio_min_point'])} ({sp['speed_ratio_min_point_name']})")
    return "\n".join(lines)


def _ratio(x) -> str:
    """A speed ratio as the report shows it (``-`` where the model's time was not measurable)."""
    return "-" if x is None else f"{x:.0f}x"


def held_out_table(record: dict) -> str:
    """The held-out points of a calibration record as a Markdown table (docs/perf_model.md)."""
    lines = ["| held-out point | status | RTL cycles | model cycles | error |", "|---|---|---|---|---|"]
    for p in record["points"]:
        if p["set"] == "held_out":
            lines.append(f"| `{p['name']}` | {p['status']} | {p['rtl_cycles']:,} | "
                         f"{p['model_cycles']:,} | {p['error_pct']:+.2f} % |")
    return "\n".join(lines)

