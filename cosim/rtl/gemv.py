"""Run GEMV jobs on the engine RTL (Verilator + cocotb) and get their outputs and cycle counts.

This is the RTL path used by ``ndpdimm demo`` and ``ndpdimm bench`` until the
fast harness exists: the jobs are saved to a file, a cocotb bench drives each
through the RTL, checks it bit for bit against the golden model, and saves
what came out. Two targets:

* the GEMV engine alone, its weight stream driven by the bench
  (``benches/gemv_engine.py::run_job_file``);
* ``from_dram=True``: the GEMV datapath (``hw/gemv/datapath.py``), weights laid
  out in the DRAM model and fetched by the weight streamer through the real
  DRAM controller, index lists copied to the SRAM by the DMA engine
  (``benches/gemv_datapath.py::run_job_file``); each result then also carries
  the DRAM figures of its run (``dram``: bursts, bytes per cycle, row hits ...).
"""

import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden.numerics import result_values
from ndpdimm.cosim.rtl import build as rtl_build

__all__ = ["RtlJobResult", "run_jobs", "engine_params", "BENCH", "FACTORY"]

BENCH = "ndpdimm.cosim.rtl.benches.engine"
FACTORY = "ndpdimm.hw.gemv.engine:engine_verilog"
DATAPATH_BENCH = "ndpdimm.cosim.rtl.benches.datapath"
DATAPATH_FACTORY = "ndpdimm.hw.gemv.datapath:gemv_datapath_verilog"


@dataclass
class RtlJobResult:
    label: str
    bits: np.ndarray          # [B, n_out] uint32 result bit patterns
    cycles: int               # command accepted -> done, inclusive
    wall_seconds: float
    dram: dict | None = None  # from_dram runs: bursts, bytes per cycle, row hits/misses ...

    def values(self, job: GemvJob) -> torch.Tensor:
        return result_values(self.bits.astype(np.int64), job.dtype.info.is_float)


def _job_progress(log, n_jobs):
    """Turn the bench's per-job log lines into ``[rtl] k/n label: cycles`` reports."""
    done = [0]

    def report(line):
        for tag in ("cocotb.gemv_engine", "cocotb.gemv_datapath"):
            if " cycles" in line and tag in line and ":" in line.split(tag, 1)[1]:
                done[0] += 1
                log(f"[rtl] {done[0]}/{n_jobs} {line.split(tag, 1)[1].strip()}")
    return report


def engine_params(shape: EngineShape) -> dict:
    return {"n_units": shape.n_units, "max_batch": shape.max_batch, "radix_bits": shape.radix_bits,
            "index_bits": shape.index_bits, "step_bits": shape.step_bits}


def run_jobs(jobs: list, labels=None, *, idle=0.0, stall=0.0, seed=1, echo_log=False,
             log=print, from_dram=False):
    """Run ``jobs`` (all with the same ``EngineShape``) on one RTL build; returns results + stats.

    Each finished job is reported through ``log`` while the simulation runs.
    ``from_dram``: run them on the GEMV datapath, weights streamed from the DRAM model.
    """
    if not jobs:
        raise ValueError("no jobs to run")
    shape = jobs[0].shape
    if any(j.shape != shape for j in jobs):
        raise ValueError("all jobs of one RTL run must target the same engine shape")
    labels = labels or [f"job {n}" for n in range(len(jobs))]
    params = engine_params(shape)
    toplevel, factory, bench = "gemv_engine", FACTORY, BENCH
    if from_dram:
        params = {k: params[k] for k in ("n_units", "max_batch", "radix_bits")}
        toplevel, factory, bench = "gemv_datapath", DATAPATH_FACTORY, DATAPATH_BENCH
    with tempfile.TemporaryDirectory(prefix="gemv_rtl_") as tmp:
        job_file, result_file = Path(tmp) / "jobs.pt", Path(tmp) / "results.pt"
        torch.save({"jobs": [{"op": j.op, "dtype": int(j.dtype), "W": j.W, "X": j.X, "idx": j.idx,
                              "label": label} for j, label in zip(jobs, labels)],
                    "idle": idle, "stall": stall, "result_file": str(result_file)}, job_file)
        result = rtl_build.run(toplevel, factory, params, bench, testcase="run_job_file",
                               seed=seed, extra_env={"GEMV_JOB_FILE": str(job_file)},
                               echo_log=echo_log, progress=_job_progress(log, len(jobs)))
        result.check()
        saved = torch.load(result_file, weights_only=False)
    outputs = [RtlJobResult(o["label"], o["bits"].numpy().astype(np.uint32), int(o["cycles"]),
                            float(o["wall_seconds"]), o.get("dram")) for o in saved["outputs"]]
    stats = {"cycles_simulated": int(saved["cycles_simulated"]),
             "wall_seconds": float(saved["wall_seconds"]),
             "build_dir": str(result.build_dir)}
    return outputs, stats
