"""The calibration's fits: the performance model's parameters from the measured points.

In the order :func:`fit_calibration` runs them:

1. :func:`measured_params`: what is measured directly (dispatch gap, host pass-through
   latencies, busy-counter offsets);
2. the DRAM-bound path: fitted with the rest (:func:`fit`) when the calibration points reach
   it, else (:func:`fit_dram_bound`) to the 256-unit bandwidth bench (:data:`BENCH_256`,
   :data:`BENCH_FITTED`); :func:`bench_comparison` is the model against that bench;
3. :func:`fit`: ``cosim.model.perf.FITTED`` by least squares on the relative error of the
   calibration points (bounded trust region, several starts, :data:`BOUNDS`);
4. :func:`sequence_params` (host latencies under traffic, per policy, measured directly) and
   :func:`fit_debt` (:data:`DEBT_FITTED`, to the refresh-debt runs and the DMA points);
5. :func:`fit_host` (:data:`HOST_FITTED`, to the GEMV host-traffic runs).

The sequence fits replay each run on the model backend at the RTL's cycles
(``measure.replay_sequence``). Deterministic: the random starts come from a seeded generator.
"""

import json
import random
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.calibrate.measure import replay_sequence
from ndpdimm.cosim.model.calibrate.points import POLICIES, model_fields
from ndpdimm.cosim.model.perf import DRAM_FITTED, FITTED, PerfModel, PerfParams
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status

__all__ = ["REPO", "BENCH_256", "BOUNDS", "BENCH_FITTED", "HOST_FITTED", "DEBT_FITTED", "fit",
           "bench_comparison", "fit_dram_bound", "measured_params", "sequence_params", "fit_host",
           "fit_debt", "fit_calibration"]

#: The repository (or installed package) root: ``cosim/model/calibrate/`` is three below it.
REPO = Path(__file__).resolve().parents[3]
#: The 256-unit GEMV bandwidth bench that pins the DRAM-bound path.
BENCH_256 = REPO / "bench" / "results" / "dram_gemv.json"

#: Bounds of the fitted parameters (physical ranges, in NDP cycles unless a fraction).
BOUNDS = {"complete": (0, 10), "block_reject": (0, 20), "gemv_fixed": (0, 200),
          "mem_latency": (5, 150), "open_latency": (0, 200), "open_latency_aligned": (0, 200), "gather_latency": (0, 100), "conflict_latency": (0, 300), "group_fixed": (-5, 50),
          "refresh_extra": (-100, 400), "dma_fixed": (0, 300), "dma_write_fixed": (0, 300),
          "dma_round_trip": (0, 200), "dma_open_penalty": (0, 200), "act_fixed": (0, 50),
          "act_pass": (0, 50), "act_reduce": (-10, 30), "act_mixed": (0, 3),
          "stream_efficiency": (0.8, 1.0), "open_penalty": (0.0, 60.0),
          "conflict_penalty": (0.0, 200.0)}


def _predict(model, rec, use_start=True):
    return model.dispatched(model_fields(rec), Status[rec["status"]],
                            rec["start_cycle"] if use_start else None).cycles


def fit(config: CoreConfig, records: list, *, start: PerfParams = PerfParams(),
        names=FITTED, starts: int = 4, seed: int = 1) -> PerfParams:
    """Least-squares fit of ``names`` to the records' RTL cycles (relative residuals)."""
    import numpy as np
    from scipy.optimize import least_squares
    names = [n for n in names if n in BOUNDS]
    lo = np.array([BOUNDS[n][0] for n in names], float)
    hi = np.array([BOUNDS[n][1] for n in names], float)
    base = start.as_dict()
    targets = np.array([float(r["rtl_cycles"]) for r in records])
    model = PerfModel(config, start)

    def residuals(x):
        model.params = PerfParams(**{**base, **dict(zip(names, x))})
        pred = np.array([_predict(model, r) for r in records])
        return (pred - targets) / np.maximum(targets, 1.0)

    rng = random.Random(seed)
    x0 = np.clip(np.array([base[n] for n in names], float), lo, hi)
    best = None
    for k in range(starts):
        x = x0 if k == 0 else lo + np.array([rng.random() for _ in names]) * (hi - lo)
        r = least_squares(residuals, x, bounds=(lo, hi), method="trf", x_scale="jac",
                          diff_step=1e-3, max_nfev=400 * len(names))
        if best is None or r.cost < best.cost:
            best = r
    return PerfParams(**{**base, **dict(zip(names, (float(v) for v in best.x)))})


def _bench_points(bench_path):
    """(config, points without host traffic) of the 256-unit bandwidth bench, or None."""
    bench_path = Path(bench_path)
    if not bench_path.exists():
        return None
    bench = json.loads(bench_path.read_text())
    design = bench["design"]
    config = CoreConfig(n_units=design["n_units"], ring_beats=design["ring_beats"])
    return config, [p for p in bench["points"] if not p.get("host_requests")]


def _bench_fields(p):
    op = ("dense", "row_gather", "col_gather").index(p["op"])
    return {"opcode": Opcode.GEMV, "op": op, "dtype": int(Dtype.parse(p["dtype"])),
            "batch_minus_one": p["batch"] - 1, "accumulate": 0, "w_base": 0,
            "n_rows": p["rows"], "n_cols": p["cols"], "idx_addr": 0, "n_idx": p["selected"] or 0,
            "x_addr": 0, "x_pitch": 0, "y_addr": 0, "y_pitch": 0}


def _bench_rows(model, pts):
    rows = []
    for p in pts:
        m = model.descriptor_cycles(_bench_fields(p), Status.OK)
        rows.append({"name": p["name"], "rtl_cycles": p["cycles"], "model_cycles": m,
                     "error_pct": 100 * (m / p["cycles"] - 1)})
    return rows


def bench_comparison(params: PerfParams, bench_path=BENCH_256) -> list:
    """The model with ``params`` against the 256-unit bandwidth bench's points (``[]`` without
    the file). The bench's index lists are not in its file: a gather is modelled from its
    count alone, as the random and clustered points of one count are the same descriptor."""
    bench = _bench_points(bench_path)
    return _bench_rows(PerfModel(bench[0], params), bench[1]) if bench else []


#: The DRAM-bound parameters the bandwidth bench fixes for a core that never reaches that path
#: (the bench's shapes have no bank conflicts, so ``conflict_penalty`` keeps its value).
BENCH_FITTED = ("stream_efficiency", "open_penalty")


def fit_dram_bound(params: PerfParams, bench_path=BENCH_256):
    """Fit :data:`BENCH_FITTED` to the 256-unit bandwidth bench; (params, per-point comparison)
    - unchanged params and ``[]`` if the bench file is missing."""
    bench = _bench_points(bench_path)
    if bench is None:
        return params, []
    import numpy as np
    from scipy.optimize import least_squares
    config, pts = bench

    model = PerfModel(config, params)
    target = np.array([float(p["cycles"]) for p in pts])

    def res(x):
        model.params = params.replace(**dict(zip(BENCH_FITTED, map(float, x))))
        return np.array([model.cost(_bench_fields(p), Status.OK, None).cycles for p in pts]) / target - 1

    if not pts:
        return params, []
    lo, hi = zip(*(BOUNDS[n] for n in BENCH_FITTED))
    r = least_squares(res, [getattr(params, n) for n in BENCH_FITTED], bounds=(lo, hi))
    params = params.replace(**dict(zip(BENCH_FITTED, map(float, r.x))))
    model.params = params
    return params, _bench_rows(model, pts)


def measured_params(params: PerfParams, records: list, extras: dict | None) -> PerfParams:
    """Parameters measured directly: dispatch gap, host latencies, busy-counter offsets."""
    import statistics
    upd = {}
    if extras:
        if extras.get("gap_samples"):
            upd["gap"] = float(statistics.median(extras["gap_samples"]))
        for k in ("host_read", "host_write"):
            if extras.get(k):
                upd[k] = float(statistics.median(extras[k]))
    for key, opcodes, counter in (("gemv_busy_offset", (Opcode.GEMV,), "GEMV_BUSY_CYCLES"),
                                  ("act_busy_offset", (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE),
                                   "ACT_BUSY_CYCLES"),
                                  ("dma_busy_offset", (Opcode.DMA,), "DMA_BUSY_CYCLES")):
        vals = [r["rtl_cycles"] - r["rtl_counters"][counter] for r in records
                if r["status"] == "OK" and r["fields"]["opcode"] in opcodes
                and r["rtl_counters"][counter] > 0]
        if vals:
            upd[key] = float(statistics.median(vals))
    return params.replace(**upd)


def sequence_params(params: PerfParams, recs: list) -> PerfParams:
    """Host latencies measured directly from the calibration ``host`` runs, per policy: the
    mean latency of the accesses made while a GEMV ran (``host_busy_<policy>``, hundreds of
    accesses), the median of those made while a DMA ran (``host_busy_dma_<policy>``: a few
    accesses per run, and under ndp_first one can wait for the rest of the transfer, an
    outlier a mean of so few would follow)."""
    import statistics
    upd = {}
    for pol in POLICIES:
        for prefix, kind, stat in (("host_busy", "gemv", statistics.fmean),
                                   ("host_busy_dma", "dma", statistics.median)):
            lat = [t for r in recs if r["spec"]["kind"] == "host" and r["spec"]["policy"] == pol
                   and r["spec"]["point"]["kind"] == kind for t in r["host_latencies"]]
            if lat:
                upd[f"{prefix}_{pol}"] = float(stat(lat))
    return params.replace(**upd)


def _fit_replayed(config: CoreConfig, params: PerfParams, bounds: dict, runs: list,
                  residuals, points: tuple = ()) -> PerfParams:
    """Least squares of the parameters in ``bounds`` (name -> (lo, hi)), each evaluation
    replaying ``runs`` on the model backend; ``residuals(rtl_record, model_record)`` gives
    each run's relative residuals. ``points``: single-descriptor records whose relative
    residuals join them (records the same parameters also time)."""
    if not runs:
        return params
    import numpy as np
    from scipy.optimize import least_squares
    names = list(bounds)

    def res(x):
        model = PerfModel(config, params.replace(**dict(zip(names, map(float, x)))))
        return np.array([e for r in runs
                         for e in residuals(r, replay_sequence(model, config, r))] +
                        [_predict(model, p) / p["rtl_cycles"] - 1 for p in points])

    lo = [bounds[n][0] for n in names]
    hi = [bounds[n][1] for n in names]
    x0 = np.clip([getattr(params, n) for n in names], lo, hi)
    r = least_squares(res, x0, bounds=(lo, hi), diff_step=1e-2)
    return params.replace(**dict(zip(names, map(float, r.x))))


#: Host slowdown parameters fitted to the calibration GEMV host runs (replayed).
HOST_FITTED = {**{f"host_slow_{p}": (0, 2000) for p in POLICIES}, "host_slow_span": (50, 2000)}


def fit_host(config: CoreConfig, params: PerfParams, recs: list) -> PerfParams:
    """Least squares of :data:`HOST_FITTED` to the descriptor cycles of the calibration host
    runs over GEMVs, replayed on the model backend at the RTL's cycles; the residual is the
    cycles the traffic added (model vs RTL, each against its own run of the descriptor alone)
    over the RTL's cycles alone."""
    runs = [r for r in recs if r["spec"]["kind"] == "host" and r["spec"]["point"]["kind"] == "gemv"]
    return _fit_replayed(config, params, HOST_FITTED, runs, lambda r, m: [
        ((m["cycles"] - m["alone_cycles"]) - (r["cycles"] - r["alone_cycles"])) / r["alone_cycles"]])


#: Parameters fitted to the calibration ``debt`` runs (replayed on the model backend).
#: ``refresh_lead`` is measured (``PerfParams``): the debt runs' probes fix only
#: ``refresh_idle - refresh_lead``.
DEBT_FITTED = {"refresh_idle": (300, 600)}


def fit_debt(config: CoreConfig, params: PerfParams, recs: list, points: list = ()) -> PerfParams:
    """Least squares of :data:`DEBT_FITTED` to the calibration debt runs (the cycles of the
    DMA a refresh falls due in, and of the probe after it) and the calibration DMA ``points``
    (a DMA dispatched just after a refresh fell due waits for it)."""
    runs = [r for r in recs if r["spec"]["kind"] == "debt"]
    dmas = tuple(p for p in points if p["spec"]["kind"] == "dma" and p["status"] == "OK")
    return _fit_replayed(config, params, DEBT_FITTED, runs, lambda r, m: [
        m["cycles"] / r["cycles"] - 1, m["first_cycles"] / r["first_cycles"] - 1], dmas)


def fit_calibration(config: CoreConfig, cal: list, seq_cal: list, extras: dict | None) -> tuple:
    """Every fit, in order (module docstring), of the calibration points ``cal``, the
    calibration sequences ``seq_cal`` and the ``extras`` measurement: (params, whether the
    DRAM-bound path was fitted with the rest, the 256-unit bench comparison rows)."""
    params = measured_params(PerfParams(), cal, extras)
    joint = PerfModel(config, params).reaches_dram_bound
    if joint:
        # the calibration points themselves run on the DRAM-bound path: fit its parameters
        # with the rest; the bandwidth bench (another harness, other shapes) is a check only
        params = fit(config, cal, start=params, names=FITTED + DRAM_FITTED)
        bench_rows = bench_comparison(params)
    else:
        params, bench_rows = fit_dram_bound(params)
        params = fit(config, cal, start=params)
    params = fit_debt(config, sequence_params(params, seq_cal), seq_cal, cal)
    params = fit_host(config, params, seq_cal)
    return params, joint, bench_rows
