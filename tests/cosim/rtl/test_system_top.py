"""pytest entry points of the multi-core bench (``cosim/rtl/benches/system.py``, Verilator).

Three RTL NDP cores (8 GEMV units, 16 KiB SRAM, ``link=True``) in one
simulation, joined by two DIMM-Links (four ``LinkPort`` ends) through
behavioural channels: a split GEMV merged by atomic adds bit for bit, random
remote traffic from every core at once checked against a mirror of every
SRAM, the link model's timing against the RTL over 0-2 hops, relayout round
trips (with the model's relayout time against the RTL's), bad requests, and
fault injection (bit errors from 1e-9 to 1e-4, dropped chunks).

All ``sim`` (``make sim``): the system's Verilator build alone takes about 8
minutes on this machine, which the fast suite cannot afford next to the
single-core and link-pair builds it already makes. The parts are in the
fast suite: one core with the link through the harness
(``tests/cosim/rtl/test_link_core.py``), two link ports (``tests/hw/link/test_port.py``),
chains of transaction layers and routers (``tests/hw/link/test_transaction.py``,
``tests/hw/link/test_relayout.py``) and the multi-DIMM model
(``tests/cosim/link/test_model.py``).
"""

import json

import pytest

from ndpdimm.bench.link import SYSTEM_PARAMS
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.system_top import LINK_SYSTEM_FACTORY, LINK_SYSTEM_TOP
from ndpdimm.sw.driver.system import relayout_round_trip_cycles

pytestmark = pytest.mark.sim

BENCH = "ndpdimm.cosim.rtl.benches.system"
#: Largest |model - RTL| / RTL accepted for a relayout's group time (the model gives every
#: sender the group's finish time; 26 % is the worst measured case, 64 B blocks).
RELAYOUT_TOLERANCE = 0.3


def run_bench(testcase, seed=1, stats=None, **env):
    extra = {k.upper() if k.startswith("relayout") else f"LINK_{k.upper()}": v
             for k, v in env.items()}
    if stats is not None:
        extra["LINK_STATS"] = str(stats)
    result = rtl_build.run(LINK_SYSTEM_TOP, LINK_SYSTEM_FACTORY, SYSTEM_PARAMS, BENCH,
                           testcase=testcase, seed=seed, extra_env=extra)
    result.check()
    return result


def test_three_cores_merge_traffic_timing_bad_requests(tmp_path):
    stats = tmp_path / "stats.json"
    run_bench(["split_gemv_merged_by_atomic_add", "remote_traffic_is_exact",
               "link_timing_against_model", "bad_requests_change_nothing"], stats=stats)
    rows = json.loads(stats.read_text())["link_timing_against_model"]["rows"]
    assert {(r["kind"], r["hops"]) for r in rows} == {
        (k, h) for k in ("write", "read", "atomic_fp32", "dram_write") for h in range(3)}


@pytest.mark.parametrize("block, n_blocks", [(64, 20), (512, 10), (2048, 16)])
def test_relayout_round_trip_and_model(block, n_blocks, tmp_path):
    stats = tmp_path / "stats.json"
    run_bench("relayout_round_trip", stats=stats, relayout_block=block, relayout_blocks=n_blocks)
    rtl = json.loads(stats.read_text())["relayout_round_trip"]
    params = {k: v for k, v in SYSTEM_PARAMS.items() if k != "n_cores"}
    model = relayout_round_trip_cycles(SYSTEM_PARAMS["n_cores"], block, n_blocks, CoreConfig(link=True, **params))
    for phase, m in zip(rtl["phases"], model):
        r = max(phase["cycles"])
        assert abs(m - r) <= RELAYOUT_TOLERANCE * r, f"{phase}: model {m} cycles, RTL {r}"


@pytest.mark.parametrize("ber, drop_every", [(1e-9, 0), (1e-7, 0), (1e-5, 0), (1e-4, 0),
                                             (1e-5, 2000)])
def test_fault_injection(ber, drop_every, tmp_path):
    """Zero wrong or lost deliveries with bit errors and dropped chunks on every link."""
    stats = tmp_path / "stats.json"
    run_bench("remote_traffic_is_exact", seed=7, stats=stats, ber=ber, drop_every=drop_every,
              ops=24)
    figures = json.loads(stats.read_text())["remote_traffic_is_exact"]
    if ber >= 1e-5 or drop_every:     # enough bits cross the links for faults to be certain
        assert figures["injected_bit_errors"] + figures["dropped_chunks"] > 0
        assert sum(c["replays"] for c in figures["counters"].values()) > 0
