"""pytest entry points of the GEMV engine's cocotb bench (Verilator).

The fast subset runs in ``make test``; tests marked ``sim`` (more seeds, more
jobs, larger engines, the default 256-unit configuration) run in ``make sim``.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build

BENCH = "ndpdimm.cosim.rtl.benches.engine"
FACTORY = "ndpdimm.hw.gemv.engine:engine_verilog"


def run_bench(params, testcase, seed=1, **env):
    result = rtl_build.run("gemv_engine", FACTORY, params, BENCH, testcase=testcase, seed=seed,
                           extra_env={k.upper(): v for k, v in env.items()})
    result.check()
    return result


SMALL = {"n_units": 4, "max_batch": 4, "radix_bits": 1}
ODD = {"n_units": 3, "max_batch": 3, "radix_bits": 3}


@pytest.mark.parametrize("params", [SMALL, ODD], ids=["u4b4r1", "u3b3r3"])
def test_corner_cases(params):
    run_bench(params, "corner_cases")


@pytest.mark.parametrize("params,seed", [(SMALL, 11), (ODD, 12)], ids=["u4b4r1", "u3b3r3"])
def test_random_traffic(params, seed):
    run_bench(params, "random_traffic", seed=seed, gemv_jobs=45)


def test_reserved_dtype_and_checker():
    run_bench(SMALL, ["reserved_dtype_rejected", "checker_catches_corrupted_model"])


def test_streaming_throughput():
    run_bench(SMALL, "streaming_throughput", gemv_throughput_k=64)


# ---- full regression (make sim) ------------------------------------------------------------

REGRESSION = [
    {"n_units": 8, "max_batch": 16, "radix_bits": 1},
    {"n_units": 5, "max_batch": 2, "radix_bits": 2},
    {"n_units": 16, "max_batch": 8, "radix_bits": 4},
    {"n_units": 1, "max_batch": 1, "radix_bits": 1},
]


@pytest.mark.sim
@pytest.mark.parametrize("params", REGRESSION, ids=lambda p: "u{n_units}b{max_batch}r{radix_bits}".format(**p))
@pytest.mark.parametrize("seed", [101, 202, 303])
def test_regression_random(params, seed):
    run_bench(params, "random_traffic", seed=seed, gemv_jobs=120, gemv_max_in=80)


@pytest.mark.sim
@pytest.mark.parametrize("params", REGRESSION, ids=lambda p: "u{n_units}b{max_batch}r{radix_bits}".format(**p))
def test_regression_corners(params):
    run_bench(params, "corner_cases", seed=7)


@pytest.mark.sim
def test_default_configuration():
    """The default 256-unit, batch-16 engine: corner cases and random traffic."""
    params = {"n_units": 256, "max_batch": 16, "radix_bits": 1}
    run_bench(params, ["corner_cases", "random_traffic"], seed=5, gemv_jobs=6, gemv_max_in=24)
