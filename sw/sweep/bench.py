"""Sweep benchmark: how a fixed sweep scales from 1 to 2 Dask workers, and what a task costs.

``ndpdimm bench --suite sweep`` writes ``bench/results/sweep.json`` with, on a
``LocalCluster`` of this machine (cache off, so every point is computed):

* ``scaling``: a fixed sweep of real scenario points (``rapid``: the mixed workload, static and
  coalesced systems, 120 s of trace, ``SCALING_POINTS`` load levels) on 1 and on 2 worker
  processes: wall seconds, tasks per second, and the speed-up from 1 to 2 workers; the
  in-process run of the same points for reference (``ndpdimm sweep --in-process``);
* ``overhead``: ``OVERHEAD_TASKS`` ``probe`` points that do nothing (``seconds = 0``) on one
  worker: wall time per task once the cluster is up, i.e. the scheduling and result-collection
  overhead a sweep pays per point (cluster start-up reported separately);
* the command, the date (UTC) and the machine.
"""

import os
import platform
import tempfile
import time

from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.sweep.jobs import check_point
from ndpdimm.sw.sweep.run import Sweep, run_sweep
from ndpdimm.sw.sweep.tasks import cluster_client

__all__ = ["run_sweep_bench", "SCALING_POINTS", "OVERHEAD_TASKS"]

SCALING_POINTS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1)
OVERHEAD_TASKS = 200


def _scaling_sweep(rates, duration_s) -> Sweep:
    points = tuple(check_point("rapid", {"workload": "mixed", "pattern": "steady",
                                         "duration_s": duration_s, "mode": "static",
                                         "ndp": False, "ttft_slo_s": 0.3, "rate_scale": r})
                   for r in rates)
    return Sweep("bench-scaling", "rapid", points)


def _timed(sweep, log, **kw) -> dict:
    with tempfile.TemporaryDirectory() as cache:
        t0 = time.perf_counter()
        r = run_sweep(sweep, cache_dir=cache, use_cache=False, progress=False, log=log, **kw)
        wall = time.perf_counter() - t0
    if r.count("ok") != len(sweep.points):
        raise RuntimeError(f"benchmark sweep failed: {r.summary['failures']}")
    return {"tasks": len(sweep.points), "wall_s": wall, "tasks_per_s": len(sweep.points) / wall,
            "task_seconds_sum": sum(x["task_seconds"] for x in r.records)}


def _overhead(n, log) -> dict:
    sweep = Sweep("bench-overhead", "probe",
                  tuple(check_point("probe", {"value": i}) for i in range(n)))
    t0 = time.perf_counter()
    with cluster_client(None, 1) as (client, _):
        client.submit(sum, [1]).result()            # worker up and reachable
        startup = time.perf_counter() - t0
        timed = _timed(sweep, log, client=client)
    return {"tasks": n, "cluster_startup_s": startup, "wall_s": timed["wall_s"],
            "per_task_ms": 1e3 * timed["wall_s"] / n,
            "task_body_ms_mean": 1e3 * timed["task_seconds_sum"] / n}


def run_sweep_bench(out="bench/results/sweep.json", rates=SCALING_POINTS, duration_s=120.0,
                    overhead_tasks=OVERHEAD_TASKS, log=print) -> dict:
    """The figures of the module docstring; writes the JSON and returns it."""
    quiet = (lambda *a: None)
    sweep = _scaling_sweep(rates, duration_s)
    log(f"[bench sweep] {len(sweep.points)} rapid points in process ...")
    inproc = _timed(sweep, quiet, in_process=True)
    scaling = {"in_process": inproc}
    for workers in (1, 2):
        log(f"[bench sweep] {len(sweep.points)} rapid points on {workers} worker(s) ...")
        scaling[f"workers_{workers}"] = _timed(sweep, quiet, workers=workers)
    scaling["speedup_1_to_2"] = scaling["workers_2"]["tasks_per_s"] / \
        scaling["workers_1"]["tasks_per_s"]
    log(f"[bench sweep] {overhead_tasks} empty probe tasks on 1 worker ...")
    overhead = _overhead(overhead_tasks, quiet)
    result = {
        "what": "sweep engine (sw/sweep/run.py) on Dask LocalCluster: scaling 1 -> 2 workers and "
                "per-task overhead",
        "command": "ndpdimm bench --suite sweep",
        "scaling": {"sweep": {"job": "rapid", "rate_scale": list(rates),
                              "duration_s": duration_s, "mode": "static"}, **scaling},
        "overhead": overhead,
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
    }
    path = write_json(result, out)
    log(f"[bench sweep] 1 worker {scaling['workers_1']['tasks_per_s']:.2f} tasks/s, 2 workers "
        f"{scaling['workers_2']['tasks_per_s']:.2f} tasks/s ({scaling['speedup_1_to_2']:.2f}x); "
        f"{overhead['per_task_ms']:.1f} ms per empty task; wrote {path}")
    return result
