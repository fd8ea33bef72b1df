"""``ndpdimm bench --suite dram_trace``: trace files, the generated streams and a tiny replay.

The replay test runs the memory-system RTL (Verilator, the build the memory
system's own cocotb tests use) on a hand-made trace whose DRAM commands are
known in advance, and on every generated stream cut to a few hundred bursts,
through :func:`run_trace_bench`, so the JSON's structure is checked on a real
run.
"""

import json

import numpy as np
import pytest

from ndpdimm.bench.dram_trace import fetch_order, load_trace, random_read_bound, run_trace_bench, stream_traces
from ndpdimm.hw.memory.address_map import AddressMap, DramCoord
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.sw.cli import main

ORG, TIMING = load_dram_config()
AMAP = AddressMap(ORG)


def _line(cycle, coord, access, source):
    return f"{cycle},{AMAP.encode(DramCoord(*coord)):#x},{access},{source}"


#: rank 0 bank (0, 0) row 5: 8 NDP reads (1 ACT, 1 miss + 7 hits); rank 1 bank (1, 2) row 9:
#: a host read and a host write (1 ACT, 1 miss + 1 hit); rank 2 bank (0, 1): rows 1 then 2
#: (2 ACT, 1 PRE, 2 misses). Far from any refresh (the first is due after ~3100 DRAM cycles).
KNOWN_TRACE = "\n".join(
    ["# cycle,address,R|W,source"]
    + [_line(0, (0, 0, 0, 5, c), "R", "ndp") for c in range(8)]
    + [_line(10, (1, 1, 2, 9, 0), "R", "host"), _line(12, (1, 1, 2, 9, 1), "W", "host")]
    + [_line(0, (2, 0, 1, 1, 0), "R", "ndp"), _line(0, (2, 0, 1, 2, 0), "R", "ndp") + "  # conflict"]
) + "\n"


def test_random_read_bound_between_one_bank_and_all_banks():
    # One request queued: ACT -> RD (tRCD) per request, a tRC wait when the next lands on the same
    # bank (1 in 8): tBL / (tRCD + tRC / 8) within a few %. Deep queues approach all banks busy,
    # tBL * banks / tRC, and never pass it; the bound grows with the depth.
    banks = ORG.bank_groups * ORG.banks_per_group
    all_busy = TIMING.tBL * banks / TIMING.tRC
    one = random_read_bound(1, cycles=40_000)
    assert one == pytest.approx(TIMING.tBL / (TIMING.tRCD + TIMING.tRC / banks), rel=0.08)
    depths = [random_read_bound(q, cycles=40_000) for q in (4, 16, 64)]
    assert one < depths[0] < depths[1] < depths[2] < all_busy
    assert depths[2] > 0.9 * all_busy
    with pytest.raises(ValueError, match="queue_depth"):
        random_read_bound(0)


def test_fetch_order_is_the_dot_layout():
    # 40 FP16 columns = 80 B -> 2 chunks; groups of 2 units: [7, 3] then [5]; burst j*N + row
    order = fetch_order([7, 3, 5], n_rows=8, n_cols=40, units=2)
    assert order.tolist() == [7, 3, 15, 11, 5, 13]
    traces = stream_traces(bursts=600)
    assert traces["stream"]["burst"][:3].tolist() == [0, 1, 2]
    assert traces["stream"]["burst"][256] == 4096          # chunk 1 of group 0
    mix = traces["mix"]
    host = mix["host"] == 1
    assert (np.diff(mix["cycle"][host]) == 20).all() and (mix["cycle"][~host] == 0).all()
    assert len(traces["random"]["burst"]) == 300
    for name in ("gather-10pct-random", "gather-50pct-clustered"):
        assert len(set(traces[name]["burst"].tolist())) == len(traces[name]["burst"])


@pytest.mark.parametrize("content,message", [
    ("", "no requests"),
    ("1,0x40,R\n", "expected 4 fields"),
    ("x,0x40,R,ndp\n", "must be integers"),
    ("-1,0x40,R,ndp\n", "cycle must be >= 0"),
    ("0,0x41,R,ndp\n", "multiple of 64"),
    (f"0,{ORG.capacity_bytes},R,ndp\n", "multiple of 64"),
    ("0,0x40,X,ndp\n", "access must be R or W"),
    ("0,0x40,R,cpu\n", "source must be host or ndp"),
])
def test_bad_trace_file_is_refused_before_any_work(tmp_path, capsys, content, message):
    path = tmp_path / "t.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=message):
        load_trace(path)
    out_dir = tmp_path / "out"
    assert main(["bench", "--suite", "dram_trace", "--trace", str(path), "--out-dir", str(out_dir)]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err
    assert not out_dir.exists()


def test_replay_counts_and_json(tmp_path):
    path = tmp_path / "known.csv"
    path.write_text(KNOWN_TRACE)
    out = tmp_path / "dram_trace.json"
    doc = run_trace_bench(bursts=256, trace_file=path, out=out, log=lambda s: None)
    assert json.loads(out.read_text()) == doc
    names = [p["name"] for p in doc["points"]]
    assert names[:3] == ["stream", "random", "mix"]
    assert {f"gather-{a}pct-{p}" for a in (10, 25, 50) for p in ("random", "clustered")} <= set(names)
    for p in doc["points"]:
        for key in ("bytes_per_dram_cycle", "fraction_of_peak", "steady_state_fraction_of_peak",
                    "row_hit_rate", "refresh_share", "refreshes_owed_at_end", "host_mean_latency_ns",
                    "host_p99_latency_ns"):
            assert key in p, (p["name"], key)
        assert 0 < p["steady_state_fraction_of_peak"] <= p["fraction_of_peak"] <= 1
        assert p["commands"]["RD"] + p["commands"]["WR"] == p["ndp_requests"] + p["host_requests"]
    mix = doc["points"][names.index("mix")]
    assert mix["host_requests"] > 0 and mix["host_mean_latency_ns"] <= mix["host_p99_latency_ns"]
    known = doc["points"][-1]
    assert known["name"] == "trace:known.csv"
    assert known["commands"] == {"ACT": 4, "RD": 11, "WR": 1, "PRE": 1, "REF": 0}
    assert known["ndp_requests"] == 10 and known["host_requests"] == 2
    assert known["row_hit_rate"] == round(8 / 12, 4)
    assert known["refreshes"] == 0 and known["refreshes_owed_at_end"] == 0
    # NDP is the measured source: 10 bursts over the whole run
    assert known["bytes_per_dram_cycle"] == round(10 * 64 / known["dram_cycles"], 3)
    assert known["host_mean_latency_ns"] > (TIMING.tRCD + TIMING.tCL) * TIMING.tCK_ns
