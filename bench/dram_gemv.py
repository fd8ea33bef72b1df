"""``ndpdimm bench --suite dram_gemv``: GEMV streaming from DRAM against the DIMM's physical limit.

Runs the GEMV datapath RTL (``hw/gemv/datapath.py``: memory system with the
real DRAM controller, weight streamer, DMA, SRAM and the GEMV engine, default
256 units) under Verilator/cocotb against the DRAM model, which checks every
command against every timing constraint (a violation aborts the run), with
refresh on. Every GEMV's output is checked bit for bit against the golden
model. Points:

* dense FP16 and INT8, 4096 x 4096, batch 1 (DRAM-bound: the engine could take
  372 / 256 B per cycle);
* row gather at 10 %, 25 % and 50 % of the rows, random and clustered index
  lists (FP16);
* dense FP16 with host pass-through traffic competing (a random 64 B host
  read or write every ``host_every`` cycles), once per arbitration policy.

Figure of merit per point: DRAM bytes read per NDP cycle (descriptor accepted
-> streamer status) / peak internal bandwidth (102.4 B per 1 GHz cycle for
DDR4-3200 x 4 ranks, derived from ``hw/configs/ddr4-3200.toml``).
Each point also reports the refreshes owed (postponed) at its start and end and
``steady_state_utilisation``: the change in that debt charged at tRFC of rank
time per refresh (credited when the point paid off earlier debt), so points
that happen to postpone refreshes are not flattered.
Results go to ``bench/results/dram_gemv.json``.
"""

import concurrent.futures
import json
import multiprocessing
import os
import tempfile
import time
from pathlib import Path

from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.provenance import dumps_finite
from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.hw.memory.controller import RANK_QUEUE_DEPTH

__all__ = ["run_dram_bench", "bench_points", "load_points"]

FACTORY = "ndpdimm.hw.gemv.datapath:gemv_datapath_verilog"
BENCH = "ndpdimm.cosim.rtl.benches.datapath"


def bench_points(rows=4096, cols=4096, host_every=20):
    pts = [{"name": f"dense-fp16-{rows}x{cols}", "op": "dense", "dtype": "fp16",
            "rows": rows, "cols": cols},
           {"name": f"dense-int8-{rows}x{cols}", "op": "dense", "dtype": "int8",
            "rows": rows, "cols": cols}]
    for active in (0.10, 0.25, 0.50):
        for pattern in ("random", "clustered"):
            pts.append({"name": f"row-gather-fp16-{int(active * 100)}pct-{pattern}",
                        "op": "row_gather", "dtype": "fp16", "rows": rows, "cols": cols,
                        "active": active, "pattern": pattern})
    for policy in ("host_first", "fair", "ndp_first"):
        pts.append({"name": f"dense-fp16-host-traffic-{policy}", "op": "dense", "dtype": "fp16",
                    "rows": rows // 4, "cols": cols, "host_every": host_every, "policy": policy})
    return pts


_POINT_KEYS = {"name", "op", "dtype", "rows", "cols", "batch", "active", "pattern",
               "host_every", "policy"}
_POLICIES = ("host_first", "fair", "ndp_first")


def load_points(path) -> list:
    """Points from a JSON file (a list of point objects, as :func:`bench_points` makes them).

    ``ValueError`` naming the file and the entry for anything malformed; nothing is simulated.
    """
    try:
        points = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"points file {path}: {e}") from None
    if not isinstance(points, list) or not points:
        raise ValueError(f"points file {path}: expected a non-empty JSON list of points")
    names = set()
    for i, p in enumerate(points):
        where = f"points file {path}, entry {i}"
        if not isinstance(p, dict):
            raise ValueError(f"{where}: expected an object, got {p!r}")
        unknown = set(p) - _POINT_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}")
        for key in ("name", "op", "dtype", "rows", "cols"):
            if key not in p:
                raise ValueError(f"{where}: missing {key!r}")
        if p["name"] in names:
            raise ValueError(f"{where}: duplicate name {p['name']!r}")
        names.add(p["name"])
        if p["op"] not in ("dense", "row_gather"):
            raise ValueError(f"{where}: op must be dense or row_gather, got {p['op']!r}")
        if p["dtype"] not in ("fp16", "bf16", "int8"):
            raise ValueError(f"{where}: dtype must be fp16, bf16 or int8, got {p['dtype']!r}")
        for key in ("rows", "cols", "batch", "host_every"):
            if key in p and (not isinstance(p[key], int) or isinstance(p[key], bool) or p[key] < 1):
                raise ValueError(f"{where}: {key} must be a positive integer, got {p[key]!r}")
        if "active" in p and not (isinstance(p["active"], (int, float)) and 0 < p["active"] <= 1):
            raise ValueError(f"{where}: active must be in (0, 1], got {p['active']!r}")
        if p.get("pattern", "random") not in ("random", "clustered"):
            raise ValueError(f"{where}: pattern must be random or clustered, got {p['pattern']!r}")
        if p.get("policy", "host_first") not in _POLICIES:
            raise ValueError(f"{where}: policy must be one of {', '.join(_POLICIES)}, "
                             f"got {p['policy']!r}")
    return points


def _cost(p) -> float:
    """Rough simulated time of a point, for balancing only: weight bytes over the utilisation
    such points reached at 256 units (gathers ~2.5 x their active share, host traffic ~45 %)."""
    e = 1 if p["dtype"] == "int8" else 2
    nbytes = p["rows"] * p["cols"] * e
    if p["op"] == "row_gather":
        active = p.get("active", 0.25)
        return nbytes * active / min(0.95, 2.5 * active)
    return nbytes / (0.45 if p.get("host_every") else 0.95)


def _balance(points, n_proc) -> list:
    """Longest point first onto the least loaded process."""
    shares, loads = [[] for _ in range(n_proc)], [0.0] * n_proc
    for p in sorted(points, key=_cost, reverse=True):
        i = loads.index(min(loads))
        shares[i].append(p)
        loads[i] += _cost(p)
    return [s for s in shares if s]


def _run_points(params, points, stats_path, log, seed):
    result = rtl_build.run("gemv_datapath", FACTORY, params, BENCH, testcase="jobs_from_env",
                           seed=seed, extra_env={"DG_JOBS": json.dumps(points),
                                                 "DG_STATS": str(stats_path)},
                           progress=lambda line: log(f"  {line.split('gemv_datapath', 1)[-1].strip()}")
                           if " B/cycle " in line else None)
    result.check()
    return str(result.build_dir), json.loads(Path(stats_path).read_text())["jobs_from_env"]


def run_dram_bench(units=256, rows=4096, cols=4096, ring_beats=8, host_every=20,
                   out="bench/results/dram_gemv.json", jobs=None, points_file=None, log=print):
    """Run the points (``bench_points(rows, cols)``, or those of ``points_file``) in ``jobs``
    simulator processes at once (default: one per CPU, at most 4), longest first; each point is
    independent (its own weights, fresh DRAM state is not needed)."""
    params = {"n_units": units, "ring_beats": ring_beats}
    points = load_points(points_file) if points_file else bench_points(rows, cols, host_every)
    shape = (f"from {points_file}" if points_file else f"{rows}x{cols}")
    log(f"[bench] GEMV from DRAM, {units} units, ring {ring_beats} beats: {len(points)} points "
        f"({shape}); the first run builds the Verilator model (at 256 units this takes "
        f"a long while, later runs reuse it)")
    t0 = time.monotonic()
    n_proc = max(1, min(jobs or os.cpu_count() or 1, 4, len(points)))
    # build once (cached), then split the points over n_proc simulator processes
    rtl_build.build("gemv_datapath", FACTORY, params)
    shares = _balance(points, n_proc)
    n_proc = len(shares)
    # Separate processes, not threads: the cocotb runner reads os.environ, so rtl_build.run
    # holds a process-wide lock for the whole simulation and threads would run one at a time.
    # Forked, so that they inherit the elaborated Verilog (minutes at 256 units) from build().
    with tempfile.TemporaryDirectory() as tmp:
        ctx = multiprocessing.get_context("fork")
        with concurrent.futures.ProcessPoolExecutor(max_workers=n_proc, mp_context=ctx) as pool:
            futures = [pool.submit(_run_points, params, shares[i], Path(tmp) / f"stats{i}.json",
                                   log, 2026 + i) for i in range(n_proc)]
            outcomes = [f.result() for f in futures]    # the first failure is raised here
    build_dir = outcomes[0][0]
    by_name = {j["name"]: j for _, st in outcomes for j in st["jobs"]}
    stats = {"jobs": [by_name[p["name"]] for p in points],
             "ndp_cycles_simulated": sum(st["ndp_cycles_simulated"] for _, st in outcomes),
             "dram_cycles_simulated": sum(st["dram_cycles_simulated"] for _, st in outcomes),
             "wall_seconds": max(st["wall_seconds"] for _, st in outcomes),
             "processes": n_proc}
    build_info = json.loads((Path(build_dir) / "build.done.json").read_text())
    jobs = stats["jobs"]
    dense = [j for j in jobs if j["op"] == "dense" and not j["host_requests"]]
    # --jobs is part of the command: each process seeds its points' index lists by their
    # place in its share, so the random gathers depend on how the points were split
    doc = {
        **bench_header("dram_gemv", f"ndpdimm bench --suite dram_gemv --units {units} "
                                    + (f"--points-file {points_file}" if points_file else
                                       f"--rows {rows} --cols {cols}")
                                    + f" --ring-beats {ring_beats} --jobs {n_proc}"),
        "design": {"n_units": units, "ring_beats": ring_beats, "refresh": "aligned",
                   "rank_queue_depth": RANK_QUEUE_DEPTH,
                   "dram_config": "hw/configs/ddr4-3200.toml", "ndp_clock_ghz": 1.0},
        "figure_of_merit": "DRAM bytes read per NDP cycle (descriptor accepted -> streamer "
                           "status) / peak internal bandwidth",
        "source_of_numbers": "cycle counts from RTL simulation (Verilator + cocotb) against the "
                             "DRAM timing model; refresh on; every command timing-checked; every "
                             "output bit-exact against the golden model",
        "goal": ">= 0.90 of peak on dense batch-1 streaming",
        "dense_batch1_min_utilisation": min(j["utilisation"] for j in dense) if dense else None,
        "points": jobs,
        "simulation": {
            "ndp_cycles_simulated": stats["ndp_cycles_simulated"],
            "dram_cycles_simulated": stats["dram_cycles_simulated"],
            "wall_seconds": round(stats["wall_seconds"], 1),
            "simulator_processes": stats["processes"],
            "ndp_cycles_per_second_per_process": round(
                stats["ndp_cycles_simulated"] / stats["processes"] / stats["wall_seconds"], 1),
            "verilator_build_seconds": build_info.get("seconds"),
            "verilog_lines": build_info.get("verilog_lines"),
        },
        "bench_wall_seconds": round(time.monotonic() - t0, 1),
    }
    log(f"{'point':38} {'cycles':>9} {'B/cycle':>8} {'util':>7} {'steady':>7} {'hits':>8} {'miss':>6} "
        f"{'REF':>4} {'owed':>7} {'host lat':>8}")
    for j in jobs:
        lat = j["host_mean_latency_cycles_reads_and_writes"]
        log(f"{j['name']:38} {j['stream_cycles']:>9,} {j['bytes_per_cycle']:>8.1f} "
            f"{100 * j['utilisation']:>6.1f}% {100 * j['steady_state_utilisation']:>6.1f}% "
            f"{j['row_hits']:>8} {j['row_misses']:>6} {j['refreshes']:>4} "
            f"{j['refreshes_owed_at_start']:>3}->{j['refreshes_owed_at_end']:<3} "
            f"{'' if lat is None else f'{lat:8.1f}'}")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_finite(doc, path) + "\n")
    log(f"wrote {path}")
    return doc
