"""DIMM-Link benchmark: goodput, latency and goodput under bit errors, measured on the RTL.

Every figure comes from the Verilated link pair (``cosim/rtl/link_pair_top.py``: two
complete ends, link layer + PHY + lanes, default ``LinkConfig``: 8 lanes x
25 Gb/s, 1 KiB maximum frame payload) driven by the cocotb bench
``cosim/rtl/benches/link_pair.py`` through behavioural channels. Writes
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

* ``system``: three RTL NDP cores joined by two links (``cosim/rtl/system_top.py``,
  bench ``cosim/rtl/benches/system.py``): every link descriptor of the timing
  test (writes, reads, atomic adds of 32 B .. 2 KiB over 0, 1, 2 hops) with
  the RTL's ``CQ_CYCLES`` next to the link model's prediction and the error;
  a relayout round trip (``RELAYOUT_BLOCKS`` blocks of ``RELAYOUT_BLOCK`` B)
  with the RTL's cycles next to the model's.
* ``system_fast_harness``: the same three cores in the fast C++ harness
  (``RtlSystem`` via ``NdpSystem(3, "rtl", ...)``): a split GEMV merged by
  atomic adds (bit-exact check), link writes over 0-2 hops and relayout round
  trips over groups of 2 and 3 DIMMs next to the model, and the simulation
  speed of the whole run (NDP cycles per CPU second).
* ``relayout``: a 4096 x 4096 FP16 tensor (32 MiB) in 4 KiB blocks, striped
  over 2, 4 and 8 DIMMs, to localized on the first DIMM and back: the time
  until every member's descriptor completed. These come from the model
  backend (``cosim/link/model.py``; a 32 MiB relayout is millions of cycles
  of several full cores, out of reach of the RTL simulation), whose relayout
  timing the ``system`` rows check against the RTL.
"""

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ndpdimm.cosim.provenance import write_result
from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.link_pair_top import LINK_PAIR_FACTORY, LINK_PAIR_TOP
from ndpdimm.cosim.rtl.system_top import LINK_SYSTEM_FACTORY, LINK_SYSTEM_TOP
from ndpdimm.hw.link.formats import LinkConfig, frame_flits
from ndpdimm.sw.driver.system import NdpSystem, relayout_round_trip_cycles

__all__ = ["run_link_bench", "relayout_figures", "system_figures", "harness_system_figures", "SIZES",
           "BERS", "SYSTEM_PARAMS"]

BENCH = "ndpdimm.cosim.rtl.benches.link_pair"
SYSTEM_BENCH = "ndpdimm.cosim.rtl.benches.system"
#: The multi-core system of the ``system`` figures (as tests/cosim/rtl/test_system_top.py builds it).
SYSTEM_PARAMS = {"n_cores": 3, "n_units": 8, "max_batch": 4, "sram_size": 16384, "sram_banks": 4}
#: The relayout figure's tensor and striping block.
RELAYOUT_SHAPE = (4096, 4096)
RELAYOUT_BLOCK = 4096
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


def system_figures(relayout_block=2048, relayout_blocks=16) -> dict:
    """Three RTL cores: link timing against the model, and a relayout against the model."""
    from ndpdimm.cosim.backend import CoreConfig

    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        env = {"LINK_STATS": str(stats), "RELAYOUT_BLOCK": relayout_block,
               "RELAYOUT_BLOCKS": relayout_blocks}
        result = rtl_build.run(LINK_SYSTEM_TOP, LINK_SYSTEM_FACTORY, SYSTEM_PARAMS, SYSTEM_BENCH,
                               testcase=["link_timing_against_model", "relayout_round_trip"],
                               seed=1, extra_env=env, echo_log=False)
        result.check()
        figures = json.loads(stats.read_text())
    rtl = figures["relayout_round_trip"]
    params = {k: v for k, v in SYSTEM_PARAMS.items() if k != "n_cores"}
    model = relayout_round_trip_cycles(SYSTEM_PARAMS["n_cores"], relayout_block, relayout_blocks,
                           CoreConfig(link=True, **params))
    rows = []
    for phase, m in zip(rtl["phases"], model):
        r = max(phase["cycles"])
        rows.append({"to_localized": bool(phase["to_localized"]), "rtl_cycles": r,
                     "model_cycles": m, "error": round((m - r) / r, 4)})
    return {"what": "3 RTL NdpCores (8 units, 16 KiB SRAM) joined by 2 DIMM-Links, cocotb + "
                    "Verilator, 2-cycle channels",
            "link_timing": figures["link_timing_against_model"],
            "relayout": {"dimms": rtl["dimms"], "block_bytes": relayout_block,
                         "n_blocks": relayout_blocks, "target": rtl["dimms"] - 1, "rows": rows}}


def harness_system_figures(relayout_block=2048, relayout_blocks=64, gemv_shape=(64, 1536)) -> dict:
    """The same three-core system in the fast C++ harness (``RtlSystem`` through
    ``NdpSystem(3, "rtl", ...)``): a GEMV split by columns over the cores merged into core 0 by
    FP32 atomic adds (bit-exact check), link writes over 0-2 hops next to the model, relayout
    round trips over groups of 2 and 3 DIMMs next to the model; simulated NDP cycles per CPU
    second of the whole run."""
    import numpy as np
    import torch

    from ndpdimm.cosim.backend import CoreConfig
    from ndpdimm.cosim.golden import numerics as golden

    params = {k: v for k, v in SYSTEM_PARAMS.items() if k != "n_cores"}
    config = CoreConfig(link=True, **params)
    n = SYSTEM_PARAMS["n_cores"]
    system = NdpSystem(n, "rtl", config)
    model = NdpSystem(n, "model", config)
    cpu0, start = time.process_time(), system[0].backend.cycle
    try:
        torch.manual_seed(11)
        rows_, cols = gemv_shape
        W, x = torch.randn(rows_, cols).half(), torch.randn(2, cols).half()
        got, partial, merge_cycles = system.gemv_merged(W, x)
        acc = partial[0].numpy().view(np.uint32)
        for y in partial[1:]:
            acc = golden.accumulate_bits(acc, y.numpy().view(np.uint32), is_int=False)
        bit_exact = bool(np.array_equal(got.numpy().view(np.uint32), np.asarray(acc, dtype=np.uint32)))

        timing = []
        a, m = system[0], model[0]
        src, msrc = a.alloc_sram(4096), m.alloc_sram(4096)
        dests = [system[i].alloc_sram(4096) for i in range(n)]
        mdests = [model[i].alloc_sram(4096) for i in range(n)]
        for hops in range(n):
            for size in (64, 1024, 4096):
                r = a.run([a.link_descriptor(hops, dests[hops].addr, src.addr, size)], "w")[0].cycles
                p = m.run([m.link_descriptor(hops, mdests[hops].addr, msrc.addr, size)], "w")[0].cycles
                timing.append({"kind": "write", "hops": hops, "bytes": size, "rtl_cycles": r,
                               "model_cycles": p, "error": round((p - r) / r, 4)})
        relayout = []
        for group in (2, n):
            rtl = relayout_round_trip_cycles(group, relayout_block, relayout_blocks, config, system=system)
            mod = relayout_round_trip_cycles(group, relayout_block, relayout_blocks, config, system=model)
            for k, phase in enumerate(("to_localized", "to_striped")):
                relayout.append({"dimms": group, "phase": phase, "rtl_cycles": rtl[k],
                                 "model_cycles": mod[k], "error": round((mod[k] - rtl[k]) / rtl[k], 4)})
        cycles = system[0].backend.cycle - start
        cpu = time.process_time() - cpu0
    finally:
        system.close()
        model.close()
    return {"what": f"{n} RTL NdpCores (8 units, 16 KiB SRAM) joined by {n - 1} DIMM-Links in the "
                    "fast C++ harness (cosim/rtl/harness.py RtlSystem: 2-cycle channels, random "
                    "bit offsets per lane), driven through NdpSystem(3, 'rtl', ...)",
            "split_gemv": {"shape": list(gemv_shape), "batch": 2, "merge_cycles": merge_cycles,
                           "bit_exact_vs_golden": bit_exact},
            "link_timing": timing,
            "relayout": {"block_bytes": relayout_block, "n_blocks": relayout_blocks,
                         "target": "the group's last DIMM", "rows": relayout},
            "simulated_cycles": cycles, "cpu_seconds": round(cpu, 2),
            "cycles_per_second": round(cycles / cpu) if cpu else None}


def relayout_figures(dimms=(2, 4, 8), shape=RELAYOUT_SHAPE, block=RELAYOUT_BLOCK) -> dict:
    """The 4096 x 4096 FP16 relayout over ``dimms`` on the model backend."""
    from ndpdimm.cosim.backend import CoreConfig

    n_bytes = shape[0] * shape[1] * 2
    rows = []
    for n in dimms:
        there, back = relayout_round_trip_cycles(n, block, n_bytes // block, CoreConfig(link=True), target=0)
        rows.append({"dimms": n, "to_localized_cycles": there, "to_striped_cycles": back,
                     "to_localized_ms": round(there / 1e6, 3), "to_striped_ms": round(back / 1e6, 3),
                     "gbytes_per_s_to_localized": round(n_bytes / there, 2)})
    return {"tensor": f"{shape[0]} x {shape[1]} FP16 ({n_bytes >> 20} MiB)", "block_bytes": block,
            "target": "DIMM 0 (the chain's end)", "backend": "model (cosim/link/model.py)",
            "rows": rows}


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
        "what": "DIMM-Link figures measured on the Verilated link pair (bench/link.py)",
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
        "system": system_figures(),
        "system_fast_harness": harness_system_figures(),
        "relayout": relayout_figures(),
        "wall_seconds": round(time.time() - t0, 1),
    }
    write_result(report, out, indent=2)
    print(f"dimm_link: wrote {out}")
    return report


if __name__ == "__main__":
    run_link_bench(jobs=int(os.environ.get("JOBS", "2")))
