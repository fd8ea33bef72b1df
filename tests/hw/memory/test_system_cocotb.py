"""pytest entry points of the memory-system cocotb bench (clock crossing + DRAM controller + DRAM model).

Fast subset in ``make test``; more seeds, every arbitration policy and both
refresh modes over runs long enough to refresh every rank several times
(tREFI = 12480 DRAM cycles) are marked ``sim``.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build

BENCH = "ndpdimm.cosim.rtl.benches.memory"
FACTORY = "ndpdimm.hw.memory.system:memory_system_from_config"
PARAMS = {"n_clients": 1}


def run_bench(params, testcase, seed=1, **env):
    result = rtl_build.run("memory_system", FACTORY, params, BENCH, testcase=testcase, seed=seed,
                           extra_env={k.upper(): str(v) for k, v in env.items()})
    result.check()
    return result


@pytest.mark.parametrize("seed", [1, 2])
def test_random_traffic_integrity(seed):
    run_bench(PARAMS, "random_traffic", seed=seed, ms_ops=250)


def test_checker_catches_corrupted_read():
    run_bench(PARAMS, "random_traffic", seed=3, ms_ops=100, ms_corrupt=1)


@pytest.mark.sim
@pytest.mark.parametrize("policy", ["host_first", "ndp_first", "fair"])
@pytest.mark.parametrize("refresh", ["staggered", "aligned"])
def test_policies_and_refresh_over_many_refresh_intervals(policy, refresh):
    run_bench({**PARAMS, "policy": policy, "refresh": refresh}, "random_traffic", seed=11,
              ms_ops=1500, ms_idle=0.6, ms_min_cycles=40000)
