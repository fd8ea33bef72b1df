"""pytest entry points of the constrained-random full-chip benches (``cosim/rtl/benches/random_traffic.py``).

The small configuration of ``tests/hw/core/test_ndp_core_cocotb.py`` (8 GEMV units,
16 KiB SRAM). ``make test`` runs one short seed of each bench and the check
that the checkers can fail; ``make sim`` (marker ``sim``) runs longer streams
and more fuzzed descriptors over several seeds. Length goes through the
benches' environment variables ``NDP_RANDOM_ROUNDS`` and ``NDP_FUZZ_COUNT``.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.core_top import SIM_TOP

BENCH = "ndpdimm.cosim.rtl.benches.random_traffic"
FACTORY = "ndpdimm.cosim.rtl.core_top:ndp_core_sim_verilog"   # ndp_core, resets registered
SMALL = {"n_units": 8, "max_batch": 4, "sram_size": 16384, "sram_banks": 4}


def test_random_streams_and_fuzzing_short():
    rtl_build.run(SIM_TOP, FACTORY, SMALL, BENCH,
                  testcase=["random_descriptor_streams", "fuzz_descriptors",
                            "checkers_catch_wrong_expectations"],
                  seed=1, extra_env={"NDP_RANDOM_ROUNDS": 6, "NDP_FUZZ_COUNT": 400}).check()


@pytest.mark.sim
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_random_descriptor_streams_long(seed):
    rtl_build.run(SIM_TOP, FACTORY, SMALL, BENCH, testcase=["random_descriptor_streams"],
                  seed=seed, extra_env={"NDP_RANDOM_ROUNDS": 16}).check()


@pytest.mark.sim
@pytest.mark.parametrize("seed", [2, 3, 4])
def test_fuzz_descriptors_long(seed):
    rtl_build.run(SIM_TOP, FACTORY, SMALL, BENCH, testcase=["fuzz_descriptors"],
                  seed=seed, extra_env={"NDP_FUZZ_COUNT": 1000}).check()
