"""pytest entry points of the banked SRAM's cocotb bench (Verilator).

The fast subset runs a small SRAM (4 KiB, 4 banks of 64-bit words, 3 ports) in
``make test``; tests marked ``sim`` (more seeds and traffic, the default
128 KiB / 16 banks / 256-bit / 4-port configuration) run in ``make sim``.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build

BENCH = "ndpdimm.cosim.rtl.benches.sram"
FACTORY = "ndpdimm.hw.memory.sram:BankedSram"

SMALL = {"size_bytes": 4096, "n_banks": 4, "word_bits": 64, "n_ports": 3}
DEFAULT = {"size_bytes": 131072, "n_banks": 16, "word_bits": 256, "n_ports": 4}


def run_bench(params, testcase, seed=1, **env):
    result = rtl_build.run("banked_sram", FACTORY, params, BENCH, testcase=testcase, seed=seed,
                           extra_env={k.upper(): v for k, v in env.items()})
    result.check()
    return result


@pytest.mark.parametrize("seed", [1, 2])
def test_random_traffic(seed):
    run_bench(SMALL, "random_traffic_test", seed=seed, sram_ops=400)


def test_streaming_and_conflicts():
    run_bench(SMALL, ["streaming_throughput", "bank_conflicts"], seed=3)


def test_checker_catches_corrupted_model():
    run_bench(SMALL, "checker_catches_corrupted_model", seed=4)


# ---- full regression (make sim) ------------------------------------------------------------

REGRESSION = [
    {"size_bytes": 2048, "n_banks": 2, "word_bits": 32, "n_ports": 2, "resp_depth": 1},
    {"size_bytes": 8192, "n_banks": 8, "word_bits": 128, "n_ports": 5, "resp_depth": 4},
    {"size_bytes": 1024, "n_banks": 1, "word_bits": 8, "n_ports": 1},
]


@pytest.mark.sim
@pytest.mark.parametrize("params", [SMALL] + REGRESSION,
                         ids=lambda p: "{size_bytes}B-b{n_banks}-w{word_bits}-p{n_ports}"
                         .format(**p))
@pytest.mark.parametrize("seed", [101, 202])
def test_regression_random(params, seed):
    run_bench(params, "random_traffic_test", seed=seed, sram_ops=1500)


@pytest.mark.sim
def test_default_configuration():
    """The default 128 KiB, 16 x 256-bit banks, 4 ports: every bench test."""
    run_bench(DEFAULT, ["random_traffic_test", "streaming_throughput", "bank_conflicts",
                        "checker_catches_corrupted_model"], seed=5, sram_ops=600)
