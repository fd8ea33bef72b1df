"""pytest entry points of the full-chip NDP core bench (``cosim/rtl/benches/core.py``).

A small configuration (8 GEMV units, 16 KiB SRAM, 16 activation lanes) in ``make test``;
``make sim`` adds the whole bench at 16 units with the default 128 KiB SRAM and batch 16, two
seeds.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.core_top import SIM_TOP

BENCH = "ndpdimm.cosim.rtl.benches.core"
FACTORY = "ndpdimm.cosim.rtl.core_top:ndp_core_sim_verilog"   # ndp_core, resets registered
SMALL = {"n_units": 8, "max_batch": 4, "sram_size": 16384, "sram_banks": 4}


def test_full_chip_gemv_programs_and_invalid_descriptors():
    rtl_build.run(SIM_TOP, FACTORY, SMALL, BENCH,
                  testcase=["gemv_programs", "invalid_descriptors_change_nothing"], seed=1).check()


def test_full_chip_mlp_block_and_attention_step():
    """Whole sequences on chip (GEMV + activation descriptors), bit-exact against the golden model."""
    rtl_build.run(SIM_TOP, FACTORY, SMALL, BENCH,
                  testcase=["mlp_block", "attention_step"], seed=2).check()


@pytest.mark.sim
@pytest.mark.parametrize("seed", [3, 4])
def test_full_chip_regression_default_sram(seed):
    rtl_build.run(SIM_TOP, FACTORY, {"n_units": 16, "max_batch": 16}, BENCH,
                  testcase=["gemv_programs", "invalid_descriptors_change_nothing", "mlp_block",
                            "attention_step"], seed=seed).check()
