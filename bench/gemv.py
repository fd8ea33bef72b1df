"""``ndpdimm bench``: GEMV engine performance measured on the RTL, written as JSON.

For every dtype and batch size it runs a large dense GEMV (and a column
gather) through the Verilated engine with no idle cycles and no
back-pressure, takes the cycle count from command accept to ``done``, and
reports

* MACs/cycle measured, against the engine's peak ``n_units * lanes / P``
  (``P = max(serial digits, lanes)`` cycles per slot, see ``hw/gemv/engine.py``);
* weight bytes the engine consumed per cycle, against the 102.4 B/cycle a
  DIMM's four DDR4-3200 ranks deliver at the 1 GHz NDP clock - above 100 %
  means the engine out-runs the DRAM and the GEMV is memory-bound;
* simulation speed: simulated cycles per wall-clock second of cocotb +
  Verilator, and the build time of the Verilator model.

Every result of every run is checked bit for bit against the golden model
(the bench fails otherwise), so the figures come from a verified datapath.
"""

import json
import os
import platform
import random
import time
from pathlib import Path

from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.provenance import dumps_finite, stamp
from ndpdimm.cosim.rtl.gemv import run_jobs
from ndpdimm.hw.formats import Dtype, peak_macs_per_cycle
from ndpdimm.hw.memory.dram import DIMM_DRAM_BYTES_PER_CYCLE

__all__ = ["run_bench", "bench_header"]

BATCHES = (1, 2, 4, 8, 16)


def bench_header(benchmark: str, command: str) -> dict:
    """The fields every benchmark JSON starts with: what, then the provenance fields
    (``cosim/provenance.py``: which code, dirty or not, how to reproduce, when), then where."""
    return {
        "benchmark": benchmark,
        **stamp(command),
        "machine": {"cpu_count": os.cpu_count(), "python": platform.python_version()},
    }


def bench_jobs(shape: EngineShape, k: int, seed=2026):
    """The benchmark points: dense GEMVs (2 output groups, K columns) and column gathers."""
    g = random.Random(seed)
    jobs, labels = [], []
    for dtype in Dtype:
        for batch in [b for b in BATCHES if b <= shape.max_batch]:
            W = random_values((2 * shape.n_units, k), dtype, g)
            X = random_values((batch, k), dtype, g)
            jobs.append(GemvJob("dense", dtype, W, X, None, shape))
            labels.append(f"dense {dtype.name} B={batch}")
        for batch in sorted({1, shape.max_batch}):
            n_out = shape.n_units * dtype.info.lanes
            Wt = random_values((k, n_out), dtype, g)
            H = random_values((batch, k), dtype, g)
            idx = sorted(g.sample(range(k), k // 2))
            jobs.append(GemvJob("col_gather", dtype, Wt, H, idx, shape))
            labels.append(f"col_gather {dtype.name} B={batch}")
    return jobs, labels


def run_bench(units=256, k=512, max_batch=16, out="bench/results/gemv_engine.json", log=print):
    shape = EngineShape(n_units=units, max_batch=max_batch)
    jobs, labels = bench_jobs(shape, k)
    total_est = sum(j.estimated_cycles for j in jobs)
    log(f"[bench] GEMV engine, {units} units, max batch {max_batch}: {len(jobs)} jobs, "
        f"~{total_est:,} cycles on the RTL (the first run builds the Verilator model; "
        f"at 256 units that takes a while, later runs reuse it)")
    t0 = time.monotonic()
    outputs, stats = run_jobs(jobs, labels)
    points = []
    for job, res in zip(jobs, outputs):
        peak = peak_macs_per_cycle(shape.n_units, job.dtype, shape.radix_bits)
        mpc = job.macs / res.cycles
        bpc = job.weight_bytes / res.cycles
        points.append({
            "label": res.label, "op": job.op, "dtype": job.dtype.name.lower(), "batch": job.batch,
            "weights_shape": list(job.W.shape),
            "index_list": None if job.idx is None else len(job.idx),
            "cycles": res.cycles, "macs": job.macs,
            "macs_per_cycle": round(mpc, 3), "peak_macs_per_cycle": round(peak, 3),
            "utilisation": round(mpc / peak, 4),
            "weight_bytes": job.weight_bytes, "weight_bytes_per_cycle": round(bpc, 3),
            "weight_demand_vs_dimm_dram": round(bpc / DIMM_DRAM_BYTES_PER_CYCLE, 4),
            "memory_bound": bpc > DIMM_DRAM_BYTES_PER_CYCLE,
        })
    build_info = json.loads((Path(stats["build_dir"]) / "build.done.json").read_text())
    result = {
        **bench_header("gemv_engine", f"ndpdimm bench --suite gemv_engine --units {units} --k {k}"),
        "engine": {"n_units": units, "max_batch": max_batch, "radix_bits": shape.radix_bits,
                   "clock_ghz": 1.0},
        "dimm_dram_bytes_per_cycle": DIMM_DRAM_BYTES_PER_CYCLE,
        "source_of_numbers": "cycle counts from RTL simulation (Verilator), results checked "
                             "bit-exact against the golden model",
        "points": points,
        "peak_macs_per_cycle_measured": {
            d.name.lower(): max(p["macs_per_cycle"] for p in points
                                if p["dtype"] == d.name.lower() and p["op"] == "dense")
            for d in Dtype},
        "simulation": {
            "simulator": "cocotb 2.1 + Verilator 5.48",
            "cycles_simulated": stats["cycles_simulated"],
            "wall_seconds": round(stats["wall_seconds"], 2),
            "cycles_per_second": round(stats["cycles_simulated"] / stats["wall_seconds"], 1),
            "verilator_build_seconds": build_info.get("seconds"),
            "verilog_lines": build_info.get("verilog_lines"),
        },
        "bench_wall_seconds": round(time.monotonic() - t0, 1),
    }
    log(f"{'point':26} {'cycles':>9} {'MAC/cyc':>8} {'peak':>7} {'util':>6} {'W B/cyc':>8} {'vs DRAM':>8}")
    for p in points:
        log(f"{p['label']:26} {p['cycles']:>9,} {p['macs_per_cycle']:>8.1f} "
            f"{p['peak_macs_per_cycle']:>7.1f} {100 * p['utilisation']:>5.1f}% "
            f"{p['weight_bytes_per_cycle']:>8.1f} {100 * p['weight_demand_vs_dimm_dram']:>7.0f}%")
    sim = result["simulation"]
    log(f"simulated {sim['cycles_simulated']:,} cycles in {sim['wall_seconds']} s: "
        f"{sim['cycles_per_second']:,.0f} cycles/s (cocotb + Verilator)")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_finite(result, path) + "\n")
    log(f"wrote {path}")
    return result
