"""pytest entry points of the DIMM-Link cocotb bench (``cosim/rtl/benches/link_pair.py``, Verilator).

Two complete ends (link layer + PHY + lanes) through behavioural channels:
random packets both ways, exactly once, in order and bit-exact, without and
with bit errors, skew, idle senders and slow receivers; a link reset of both
ends and retraining; and a corrupted expectation the checker must catch.
The fast subset uses the default link configuration; longer soaks are ``sim``.
"""

import pytest

from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.link_pair_top import LINK_PAIR_FACTORY, LINK_PAIR_TOP

BENCH = "ndpdimm.cosim.rtl.benches.link_pair"
DEFAULT = {}


def run_bench(testcase, seed=1, params=DEFAULT, **env):
    result = rtl_build.run(LINK_PAIR_TOP, LINK_PAIR_FACTORY, params, BENCH, testcase=testcase,
                           seed=seed, extra_env={f"LINK_{k.upper()}": v for k, v in env.items()})
    result.check()
    return result


def test_clean_link_both_ways_and_latency():
    run_bench(["traffic_test", "latency_test", "checker_catches_corrupted_model"], seed=1,
              packets_ab=12, packets_ba=12, idle=0.2, stall=0.2)


def test_bit_errors_skew_and_back_pressure():
    """BER 1e-4 (an error every ~50 cycles on each direction): replays, nothing lost or wrong."""
    run_bench("traffic_test", seed=2, packets_ab=16, packets_ba=16, ber=1e-4, skew="0,1,0,3,2,0,1,0",
              stall=0.3, latency=5)


def test_link_reset_and_retraining():
    run_bench("reset_test", seed=3)


@pytest.mark.sim
@pytest.mark.parametrize("seed", [11, 12, 13])
@pytest.mark.parametrize("ber", [0.0, 1e-5, 3e-4])
def test_soak(seed, ber):
    run_bench("traffic_test", seed=seed, packets_ab=60, packets_ba=60, ber=ber, idle=0.3, stall=0.4,
              skew="2,0,1,0,0,3,0,1", latency=9)
