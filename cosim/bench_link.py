"""DIMM-Link benchmark: goodput, latency and goodput under bit errors, measured on the RTL.

Every figure comes from the Verilated link pair (``cosim/link_pair.py``: two
complete ends, link layer + PHY + lanes, default ``LinkConfig``: 8 lanes x
25 Gb/s, 1 KiB maximum frame payload) driven by the cocotb bench
``cosim/benches/link_pair.py`` through behavioural channels. Writes
``bench/results/dimm_link.json``:

* ``goodput``: payload bytes per cycle in the steady state of a back-to-back
  stream of packets of each size (64 B .. 1 KiB), as a fraction of the raw
  25 GB/s (25 B per 1 GHz cycle). Transfers larger than the 1 KiB frame
  payload are cut into 1 KiB frames by the transaction layer, so a 2 KiB or
  4 KiB transfer streams at the 1 KiB figure (the JSON says so rather than
  repeating the number).
* ``latency``: one packet on an idle link, cycles (= ns at 1 GHz) from its
  header beat entering ``tx_packet`` at one end to its last beat leaving
  ``rx_packet`` at the other, for the stated channel latency.
* ``ber``: a stream of 1 KiB packets with random bit errors at each BER on
  both directions: goodput, errors injected, replays, CRC errors, and that
  every packet arrived exactly once, bit-exact (the bench checks it). At low
  BERs a simulation of this length sees no error at all; the JSON gives the
  bits simulated so the reader can tell.

Relayout times (4096 x 4096 FP16 across 2, 4, 8 DIMMs) need the relayout unit
and are not measured yet.
"""

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ndpdimm.hw.link_formats import LinkConfig, frame_flits

from . import rtl_build
from .link_pair import LINK_PAIR_FACTORY, LINK_PAIR_TOP

__all__ = ["run_link_bench", "SIZES", "BERS"]

BENCH = "ndpdimm.cosim.benches.link_pair"
SIZES = (64, 128, 256, 512, 1024)
BERS = (0.0, 1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 3e-5, 1e-4)
#: Channel latency used for every figure (cycles = ns): a short board trace plus SerDes.
CHANNEL_LATENCY = 2


def _run(testcase: str, env: dict, seed: int = 1) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        env = {f"LINK_{k.upper()}": v for k, v in env.items()}
        env["LINK_STATS"] = str(stats)
        env.setdefault("LINK_LATENCY", CHANNEL_LATENCY)
        result = rtl_build.run(LINK_PAIR_TOP, LINK_PAIR_FACTORY, {}, BENCH, testcase=testcase,
                               seed=seed, extra_env=env, echo_log=False)
        result.check()
        return json.loads(stats.read_text())


def run_link_bench(out="bench/results/dimm_link.json", sizes=SIZES, bers=BERS, packets=40,
                   ber_packets=60, jobs=2):
    """Measure and write the JSON (see module docstring); returns the dict."""
    config = LinkConfig()
    t0 = time.time()
    print("dimm_link: building the link pair (first run only) ...", flush=True)
    rtl_build.build(LINK_PAIR_TOP, LINK_PAIR_FACTORY, {})
    tasks = {}
    for size in sizes:
        tasks[("stream", size)] = ("stream_test", {"packets_ab": packets, "packets_ba": 0,
                                                   "words": size // 32})
    tasks[("latency", 64)] = ("latency_test", {"words": 2})
    for ber in bers:
        tasks[("ber", ber)] = ("stream_test", {"packets_ab": ber_packets, "packets_ba": 0,
                                               "words": 32, "ber": ber})
    results = {}
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {key: pool.submit(_run, name, env, 1 + i)
                   for i, (key, (name, env)) in enumerate(tasks.items())}
        for key, fut in futures.items():
            results[key] = next(iter(fut.result().values()))
            print(f"dimm_link: {key[0]} {key[1]} done ({time.time() - t0:.0f} s)", flush=True)

    goodput = {}
    for size in sizes:
        s = results[("stream", size)]
        flits = frame_flits(size)
        goodput[str(size)] = {
            "frame_flits": flits,
            "goodput_fraction_of_raw": round(s["goodput_fraction_of_raw"], 4),
            "gbytes_per_s": round(s["steady_bytes_per_cycle"], 3),
            # a flit per 66-bit block time, nothing else on the wire
            "ideal_fraction": round(size / (flits * config.flit_cycles * config.raw_bytes_per_cycle), 4),
            "packets": s["packets"]["ab"], "cycles": s["cycles"],
        }
    for size in (2048, 4096):
        goodput[str(size)] = {"note": f"sent as {size // config.max_payload} frames of "
                                      f"{config.max_payload} B: streams at the "
                                      f"{config.max_payload} B figure",
                              "goodput_fraction_of_raw": goodput[str(config.max_payload)]
                              ["goodput_fraction_of_raw"] if str(config.max_payload) in goodput
                              else None}
    lat = results[("latency", 64)]
    ber_rows = []
    for ber in bers:
        s = results[("ber", ber)]
        c = s["counters"]
        ber_rows.append({
            "ber": ber, "goodput_fraction_of_raw": round(s["goodput_fraction_of_raw"], 4),
            "bits_simulated": s["bits_sent"]["ab"] + s["bits_sent"]["ba"],
            "bit_errors_injected": s["injected_bit_errors"]["ab"] + s["injected_bit_errors"]["ba"],
            "replays": c["a.replays"] + c["b.replays"],
            "crc_errors": c["a.crc_errors"] + c["b.crc_errors"],
            "naks_sent": c["a.naks_sent"] + c["b.naks_sent"],
            "timeouts": c["a.timeouts"] + c["b.timeouts"],
            "phy_sync_errors": c["a.phy_sync_errors"] + c["b.phy_sync_errors"],
            "packets_delivered_exactly_once": s["packets"]["ab"],
        })
    report = {
        "what": "DIMM-Link figures measured on the Verilated link pair (cosim/bench_link.py)",
        "command": "ndpdimm bench --suite dimm_link",
        "config": {"lanes": config.lanes, "lane_gbps": config.lane_gbps,
                   "raw_gbytes_per_s": config.raw_bytes_per_cycle,
                   "max_payload": config.max_payload, "replay_flits": config.replay_flits,
                   "rx_buffer_flits": config.rx_buffer_flits, "line_code": "64b/66b",
                   "channel_latency_cycles": CHANNEL_LATENCY},
        "goodput": goodput,
        "latency_64B": {"cycles": lat["latency_cycles"], "ns_at_1GHz": lat["latency_cycles"],
                        "goal_ns": 50, "meets_goal": lat["latency_cycles"] < 50,
                        "measured": "header beat into tx_packet at one end -> last beat out of "
                                    "rx_packet at the other (link layer + PHY + channel)"},
        "ber": ber_rows,
        "relayout": "not measured yet (relayout unit not built)",
        "wall_seconds": round(time.time() - t0, 1),
    }
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, indent=2) + "\n")
    print(f"dimm_link: wrote {out}")
    return report


if __name__ == "__main__":
    run_link_bench(jobs=int(os.environ.get("JOBS", "2")))
