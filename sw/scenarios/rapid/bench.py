"""RAPID benchmark: how fast the serving simulator runs, and the results table per workload.

``ndpdimm bench --suite rapid`` writes ``bench/results/rapid.json`` with:

* ``simulator_speed``: a one-hour trace at peak load - the workload's burst rate (the highest
  rate of its bursty cycle, 45 rps for ``mixed``) held as a steady Poisson rate, i.e.
  :func:`~ndpdimm.sw.scenarios.rapid.workload.generate_trace` with pattern ``steady`` and ``rate_scale =
  burst rate / steady rate`` - simulated for the ``dynamic`` system alone (GPUs only, the
  controller in the loop, the TTFT SLO from ``static-4p4d`` on the steady workload as
  :func:`~ndpdimm.sw.scenarios.rapid.scenario.run` takes it). Reported: requests, trace and simulated
  seconds, wall seconds of the simulation alone, requests per wall second, and whether the
  goal "a one-hour trace at peak load in under a minute" is met on this machine (measured:
  false when the trace is shorter than an hour or the wall time a minute or more);
* ``runs``: per workload (``mixed``, ``long-context``) and pattern (``steady``, ``bursty``),
  :func:`~ndpdimm.sw.scenarios.rapid.scenario.run` with mode ``all`` and the NDP tier on for 600 s: per
  system goodput, SLO attainment, QPS/W, mean power, p50/p99 TTFT and TPOT, power moves and
  role switches, with the SLOs and the run's wall time;
* ``ndp_dimm_sweep``: the ``mixed`` steady workload in ``dynamic`` mode with the NDP tier at
  several DIMM counts (``DIMM_COUNTS``): goodput, attainment, TPOT and QPS/W of ``dynamic`` and
  ``dynamic+ndp``, the tier's reserved power and the decode GPUs' caps it leaves, i.e. how
  many DIMMs the tier needs to match GPU decode under the same budget;
* the command, the date (UTC), the configuration and the machine.

The figures are model outputs (``sw/scenarios/rapid/scenario.py`` says where each comes from).
"""

import dataclasses
import os
import platform
import time

from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.costs import ServingPerf
from ndpdimm.sw.scenarios.rapid.scenario import (
    RapidConfig,
    SystemResult,
    baseline_ttft_slo,
    run,
    simulate_system,
    summarize,
)
from ndpdimm.sw.scenarios.rapid.workload import generate_trace, load_workload

__all__ = ["run_rapid_bench", "measure_simulator_speed", "ndp_dimm_sweep", "WORKLOADS",
           "DIMM_COUNTS", "GOAL_WALL_S", "GOAL_TRACE_S"]

WORKLOADS = ("mixed", "long-context")
PATTERNS = ("steady", "bursty")     # the results table's (a 600 s run is half a diurnal day)
DIMM_COUNTS = (32, 64, 96, 128, 160)
GOAL_TRACE_S = 3600.0        # "a one-hour trace ..."
GOAL_WALL_S = 60.0           # "... at peak load in under a minute"
_ROW_KEYS = ("goodput_rps", "slo_attainment", "ttft_attainment", "tpot_attainment", "qps_per_w",
             "goodput_per_w", "mean_power_w", "power_moves", "role_switches", "requests")


def measure_simulator_speed(workload="mixed", duration_s=GOAL_TRACE_S, baseline_duration_s=600.0,
                            seed=0, log=print) -> dict:
    """Simulate ``dynamic`` alone on ``duration_s`` of ``workload`` at its burst rate held
    steady (module docstring); the SLO baseline is ``baseline_duration_s`` of the steady
    workload at its nominal rate. Returns the speed figures."""
    spec = load_workload(workload)
    peak = max(spec.bursty_phase_rate_rps)
    scale = peak / spec.steady_rate_rps
    cfg = RapidConfig(workload=workload, pattern="steady", duration_s=duration_s, seed=seed,
                      rate_scale=scale, mode="dynamic", ndp=False)
    model, node = load_serving_model(cfg.model), load_node(cfg.node)
    perf = ServingPerf(model, node)
    base = generate_trace(spec, baseline_duration_s, "steady", seed=seed)
    slo = (baseline_ttft_slo(perf, base, cfg), cfg.tpot_slo_s)
    trace = generate_trace(spec, duration_s, "steady", seed=seed, rate_scale=scale)
    log(f"[bench rapid] simulator speed: dynamic on {len(trace)} requests of {workload} at "
        f"{peak:g} rps steady over {duration_s:.0f} s (TTFT SLO {1e3 * slo[0]:.0f} ms) ...")
    sim, wall = simulate_system(perf, trace, "dynamic", node, cfg, slo, log)
    s = SystemResult(**summarize("dynamic", sim, slo[0], slo[1], duration_s, wall))
    met = duration_s >= GOAL_TRACE_S and wall < GOAL_WALL_S
    out = {
        "system": "dynamic", "workload": workload, "trace": trace.name,
        "peak_rate_rps": peak, "rate_scale": scale, "requests": len(trace),
        "trace_duration_s": duration_s, "simulated_s": sim.end_t, "wall_s": wall,
        "requests_per_wall_s": len(trace) / wall if wall > 0 else None,
        "simulated_s_per_wall_s": sim.end_t / wall if wall > 0 else None,
        "slo": {"ttft_s": slo[0], "tpot_s": slo[1], "ttft_baseline_trace": base.name,
                "ttft_baseline_requests": len(base)},
        "goal": {"what": f"a {GOAL_TRACE_S / 3600:g}-hour trace at peak load simulated in "
                         f"under {GOAL_WALL_S:g} s of wall time",
                 "trace_s": GOAL_TRACE_S, "wall_s": GOAL_WALL_S, "met": bool(met)},
        "results": {k: getattr(s, k) for k in _ROW_KEYS} | {"ttft_s": s.ttft_s, "tpot_s": s.tpot_s},
    }
    log(f"[bench rapid]   {len(trace)} requests, {sim.end_t:.0f} s simulated in {wall:.1f} s "
        f"wall ({out['requests_per_wall_s']:.0f} requests/s): goal "
        f"{'met' if met else 'NOT met'}")
    return out


def _row(s: SystemResult) -> dict:
    return {"system": s.system, **{k: getattr(s, k) for k in _ROW_KEYS},
            "ttft_ms": {p: 1e3 * v for p, v in s.ttft_s.items() if p in ("p50", "p99")},
            "tpot_ms": {p: 1e3 * v for p, v in s.tpot_s.items() if p in ("p50", "p99")}}


def ndp_dimm_sweep(dimm_counts=DIMM_COUNTS, duration_s=600.0, seed=0, log=print) -> list:
    """``dynamic`` against ``dynamic+ndp`` on the steady mixed workload per DIMM count."""
    out = []
    for dimms in dimm_counts:
        cfg = RapidConfig(workload="mixed", pattern="steady", duration_s=duration_s, seed=seed,
                          mode="dynamic", ndp=True, ndp_dimms=dimms)
        r = run(cfg, RunContext(log=None))
        gpu, ndp = r.system("dynamic"), r.system("dynamic+ndp")
        entry = {"dimms": dimms, "ndp_reserved_w": r.provenance["ndp_reserved_w"],
                 "ndp_decode_caps_w": ndp.timeline["caps_w"][0][4:],
                 "ndp_prefill_caps_w": ndp.timeline["caps_w"][0][:4],
                 "dynamic": _row(gpu), "dynamic+ndp": _row(ndp)}
        out.append(entry)
        log(f"[bench rapid] {dimms} NDP-DIMMs ({entry['ndp_reserved_w']:.0f} W reserved): "
            f"dynamic+ndp goodput {ndp.goodput_rps:.2f} req/s, TPOT p50 "
            f"{1e3 * ndp.tpot_s['p50']:.1f} ms against dynamic {gpu.goodput_rps:.2f}, "
            f"{1e3 * gpu.tpot_s['p50']:.1f} ms")
    return out


def run_rapid_bench(out="bench/results/rapid.json", workloads=WORKLOADS, patterns=PATTERNS,
                    duration_s=600.0, speed_workload="mixed", speed_duration_s=GOAL_TRACE_S,
                    dimm_counts=DIMM_COUNTS, seed=0, log=print) -> dict:
    """Simulator speed and the results table (module docstring); writes the JSON, returns it.
    Smaller ``duration_s``, ``speed_duration_s``, ``workloads`` and ``patterns`` give a quick run."""
    t0 = time.perf_counter()
    speed = measure_simulator_speed(speed_workload, speed_duration_s,
                                    baseline_duration_s=duration_s, seed=seed, log=log)
    runs = []
    for workload in workloads:
        for pattern in patterns:
            cfg = RapidConfig(workload=workload, pattern=pattern, duration_s=duration_s,
                              seed=seed, mode="all", ndp=True)
            log(f"[bench rapid] {workload}, {pattern}, {duration_s:.0f} s, mode all + NDP tier")
            r = run(cfg, RunContext(log=log))
            rows = [_row(s) for s in r.systems]
            runs.append({"workload": workload, "pattern": pattern, "trace": r.trace,
                         "slo": {"ttft_s": r.slo["ttft_s"], "tpot_s": r.slo["tpot_s"]},
                         "ndp_reserved_w": r.provenance["ndp_reserved_w"],
                         "systems": rows, "wall_s": r.wall_s})
            for row in rows:
                log(f"    {row['system']:20s} goodput {row['goodput_rps']:7.2f} req/s, SLO "
                    f"{100 * row['slo_attainment']:5.1f} %, {row['qps_per_w']:.4f} QPS/W, "
                    f"{row['power_moves']} power moves, {row['role_switches']} role switches")
    sweep = ndp_dimm_sweep(dimm_counts, duration_s, seed, log)
    base = RapidConfig(duration_s=duration_s, seed=seed, mode="all", ndp=True)
    result = {
        "what": "RAPID scenario: simulator speed at peak load and the results table per "
                "workload and pattern (sw/scenarios/rapid/bench.py)",
        "command": "ndpdimm bench --suite rapid",
        "config": {k: v for k, v in dataclasses.asdict(base).items()
                   if k not in ("workload", "pattern")},
        "simulator_speed": speed,
        "runs": runs,
        "ndp_dimm_sweep": sweep,
        "total_wall_seconds": time.perf_counter() - t0,
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
    }
    path = write_json(result, out)
    log(f"[bench rapid] wrote {path} ({result['total_wall_seconds']:.0f} s)")
    return result
