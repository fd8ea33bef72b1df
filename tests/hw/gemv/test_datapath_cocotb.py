"""pytest entry points of the GEMV-from-DRAM cocotb bench (``cosim/rtl/benches/datapath.py``).

A small configuration (8 GEMV units, 16 KiB SRAM) runs in ``make test``;
``make sim`` adds the default 256-unit, 128 KiB configuration on one dense
FP16 job of realistic shape.
"""

import json

import pytest

from ndpdimm.cosim.rtl import build as rtl_build

BENCH = "ndpdimm.cosim.rtl.benches.datapath"
FACTORY = "ndpdimm.hw.gemv.datapath:gemv_datapath_verilog"
SMALL = {"n_units": 8, "max_batch": 4, "sram_size": 16384, "sram_banks": 4}


def run_bench(params, testcase, seed=1, **env):
    result = rtl_build.run("gemv_datapath", FACTORY, params, BENCH, testcase=testcase, seed=seed,
                           extra_env={k.upper(): str(v) for k, v in env.items()})
    result.check()
    return result


def test_end_to_end_jobs():
    run_bench(SMALL, "end_to_end_jobs", seed=1)


def test_checker_and_bad_descriptors():
    run_bench(SMALL, ["checker_catches_wrong_result", "bad_descriptors_change_nothing",
                      "dma_round_trip_and_host_reads"], seed=2)


@pytest.mark.sim
def test_default_configuration_dense_fp16():
    jobs = [{"name": "dense-fp16-512x1024", "op": "dense", "dtype": "fp16", "rows": 512,
             "cols": 1024}]
    # the parameters of ``ndpdimm bench --suite dram_gemv``, so the two share one Verilator build
    run_bench({"n_units": 256, "ring_beats": 8}, "jobs_from_env", seed=3, dg_jobs=json.dumps(jobs))
