"""``ndpdimm bench --suite dram_trace``: 64 B address streams replayed through the memory-system RTL.

Each point is a trace of 64 B requests (cycle, burst address, read/write,
source) replayed by ``cosim/rtl/benches/dram_trace.py`` (cocotb + Verilator)
through ``MemorySystem`` - clock crossing, host/NDP arbitration, four rank
schedulers with refresh - against the DRAM model, which checks every command
against every DDR4 timing constraint (a violation fails the run). The fast
C++ harness (``cosim/rtl/cpp``) is not used: it drives a whole ``NdpCore``
through its CSR port, so a raw request stream would need a second top level
and a second driver loop in C++; at the lengths used here (tens of thousands
of bursts) cocotb replays a point in well under a minute.

Streams (fixed seeds, ``bursts`` NDP requests each):

* ``stream``: the weight streamer's fetch order for a dense 4096 x 4096 FP16
  GEMV at 256 units (DOT layout: group g, chunk j, unit u ->
  burst ``j*N + g*256 + u``), its first ``bursts`` bursts;
* ``random``: uniform random 64 B reads over the whole DIMM (``bursts / 2``);
* ``mix``: ``stream`` plus one random host read every 20 ns (NDP bytes count;
  host reads due after the stream's last request are not issued);
* ``gather-<p>pct-<random|clustered>``: a Hermes-like row gather, p = 10, 25,
  50 % of the 4096 rows (random order, or runs of 32 consecutive rows), in
  the streamer's fetch order;
* any trace file (``--trace FILE``): lines ``cycle,address,R|W,host|ndp``
  (address a 64 B-aligned byte address, decimal or 0x hex; ``#`` comments).

Figures per point: ``bytes_per_dram_cycle`` (bytes of the measured source -
NDP if the trace has NDP requests, else host - over the DRAM cycles from the
first request to the last data burst), ``fraction_of_peak`` (over 64 B per
DRAM cycle = 102.4 B/ns), ``steady_state_fraction_of_peak`` (refreshes still
owed at the end charged at tRFC of rank time each), row-hit rate, refresh
share of rank time, refreshes owed, host mean and p99 latency in ns.

The ``random`` point also carries ``ideal_scheduler_bound``: what any
scheduler could reach on uniform random reads with ``queue_depth`` requests
queued per rank (:func:`random_read_bound`), at the RTL's queue depth and at
the depths around it, so the measured figure can be read against it.
"""

import json
import tempfile
import time
from pathlib import Path

import numpy as np

from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.provenance import dumps_finite
from ndpdimm.cosim.rtl import build as rtl_build
from ndpdimm.cosim.rtl.benches.dram_device import steady_state
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.controller import RANK_QUEUE_DEPTH
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import BURST_BYTES

__all__ = ["stream_traces", "load_trace", "summarise", "run_trace_bench", "replay", "random_read_bound"]

FACTORY = "ndpdimm.hw.memory.system:memory_system_from_config"
BENCH = "ndpdimm.cosim.rtl.benches.dram_trace"
#: One NDP client; refresh aligned over the ranks like the NDP core's memory system
#: (``hw/core/ndp_core.py``): staggered refresh stalls a lock-step stream once per rank.
PARAMS = {"n_clients": 1, "refresh": "aligned"}
UNITS, ROWS, COLS = 256, 4096, 4096
SEED = 2027
HOST_EVERY = 20


def _trace(cycle, burst, write=None, host=None) -> dict:
    n = len(burst)
    return {"cycle": np.asarray(cycle, np.int64).reshape(n), "burst": np.asarray(burst, np.int64),
            "write": np.zeros(n, np.uint8) if write is None else np.asarray(write, np.uint8),
            "host": np.zeros(n, np.uint8) if host is None else np.asarray(host, np.uint8)}


def fetch_order(rows_selected, n_rows=ROWS, n_cols=COLS, units=UNITS, dtype=Dtype.FP16) -> np.ndarray:
    """Burst addresses of a DOT (dense / row gather) GEMV in the weight streamer's issue order:
    per group of ``units`` selected rows, per 64 B chunk j, per unit: burst ``j*n_rows + row``
    (the DOT layout of ``cosim/gemv/weight_layout.py``)."""
    rows = np.asarray(rows_selected, np.int64)
    chunks = weight_layout.bursts_per_row(n_cols, dtype)
    out = []
    for g in range(0, len(rows), units):
        grp = rows[g:g + units]
        out.append((np.arange(chunks, dtype=np.int64)[:, None] * n_rows + grp[None, :]).reshape(-1))
    return np.concatenate(out)


def _gather_rows(active, pattern, rng) -> np.ndarray:
    n_sel = max(1, round(active * ROWS))
    if pattern == "clustered":                  # runs of 32 consecutive rows at random places
        starts = rng.permutation(ROWS // 32)[:max(n_sel // 32, 1)] * 32
        return np.concatenate([np.arange(s, s + 32) for s in starts])[:n_sel]
    return rng.permutation(ROWS)[:n_sel]


def stream_traces(bursts: int = 40000, seed: int = SEED) -> dict:
    """The named traces of the suite (name -> trace dict of arrays), ``bursts`` NDP requests each
    (``random``: half as many; it is slow)."""
    n_bursts = load_dram_config()[0].capacity_bytes // BURST_BYTES
    rng = np.random.default_rng(seed)
    stream = fetch_order(np.arange(ROWS))[:bursts]
    out = {"stream": _trace(np.zeros(bursts), stream),
           "random": _trace(np.zeros(bursts // 2), rng.integers(0, n_bursts, bursts // 2))}
    # host reads every HOST_EVERY ns for as long as the stream could take at half the peak
    n_host = int(bursts / 0.8 / HOST_EVERY)
    host = rng.integers(0, n_bursts, n_host)
    mix_cycle = np.concatenate([np.zeros(bursts), np.arange(n_host) * HOST_EVERY])
    out["mix"] = _trace(mix_cycle, np.concatenate([stream, host]),
                        host=np.concatenate([np.zeros(bursts), np.ones(n_host)]))
    for active in (0.10, 0.25, 0.50):
        for pattern in ("random", "clustered"):
            rows = _gather_rows(active, pattern, rng)
            order = fetch_order(rows)[:bursts]
            out[f"gather-{int(active * 100)}pct-{pattern}"] = _trace(np.zeros(len(order)), order)
    return out


def load_trace(path) -> dict:
    """A trace file: one request per line ``cycle,address,R|W,host|ndp`` (``#`` starts a comment).

    ``ValueError`` naming the file, the line and the bad field for anything malformed."""
    capacity = load_dram_config()[0].capacity_bytes
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ValueError(f"trace file {path}: {e}") from None
    cyc, addr, wr, host = [], [], [], []
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"trace file {path}, line {n}"
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 4:
            raise ValueError(f"{where}: expected 4 fields cycle,address,R|W,host|ndp, got {line!r}")
        try:
            c, a = int(fields[0], 0), int(fields[1], 0)
        except ValueError:
            raise ValueError(f"{where}: cycle and address must be integers, got {line!r}") from None
        if c < 0:
            raise ValueError(f"{where}: cycle must be >= 0, got {c}")
        if a < 0 or a % BURST_BYTES or a >= capacity:
            raise ValueError(f"{where}: address must be a multiple of 64 below {capacity:#x}, "
                             f"got {fields[1]}")
        if fields[2].upper() not in ("R", "W"):
            raise ValueError(f"{where}: access must be R or W, got {fields[2]!r}")
        if fields[3].lower() not in ("host", "ndp"):
            raise ValueError(f"{where}: source must be host or ndp, got {fields[3]!r}")
        cyc.append(c)
        addr.append(a // BURST_BYTES)
        wr.append(fields[2].upper() == "W")
        host.append(fields[3].lower() == "host")
    if not cyc:
        raise ValueError(f"trace file {path}: no requests")
    return _trace(cyc, addr, wr, host)


def random_read_bound(queue_depth: int, cycles: int = 200_000, seed: int = SEED) -> float:
    """Fraction of peak an ideal scheduler reaches on uniform random reads with ``queue_depth``
    requests queued per rank (a closed loop: a request leaves its queue entry when its RD issues,
    tRCD after its ACT, and a new random one takes the entry at once; no refresh, no door).

    Every random read is a row miss: its bank takes no other ACT for tRC. The scheduler ACTivates,
    one command per cycle within tRRD_S and tFAW, any queued request whose bank is free. Each rank
    has its own bus, so one rank's figure is the DIMM's. The bound is below 8 banks x tBL / tRC
    because the queue does not always hold a request for every free bank."""
    if queue_depth < 1 or cycles < 1:
        raise ValueError(f"queue_depth and cycles must be >= 1 (got {queue_depth}, {cycles})")
    org, t = load_dram_config()
    rng = np.random.default_rng(seed)
    banks = org.bank_groups * org.banks_per_group
    queue = list(rng.integers(0, banks, queue_depth))
    bank_free_at = [0] * banks
    leaves = []                          # RD cycles of the ACTivated requests still holding an entry
    acts = []
    done = 0
    for now in range(cycles):
        while leaves and leaves[0] <= now:
            leaves.pop(0)
            queue.append(int(rng.integers(0, banks)))
        if acts and (now - acts[-1] < t.tRRD_S or (len(acts) >= 4 and now - acts[-4] < t.tFAW)):
            continue
        for i, bank in enumerate(queue):
            if bank_free_at[bank] <= now:
                del queue[i]
                bank_free_at[bank] = now + t.tRC
                leaves.append(now + t.tRCD)
                acts.append(now)
                done += 1
                break
    return done * t.tBL / cycles


def summarise(name: str, trace: dict, res: dict) -> dict:
    """One ``points`` entry from a replay's raw result (see ``cosim/rtl/benches/dram_trace.py``)."""
    org, timing = load_dram_config()
    cycles = res["dram_cycles"]
    ndp = res["ndp_bursts"]
    measured = ndp if ndp else res["host_bursts"]
    bpc = measured * BURST_BYTES / cycles
    peak = BURST_BYTES                  # one burst per DRAM cycle over all ranks
    owed = sum(res["refreshes_owed_per_rank"])
    rank_time = org.ranks * cycles
    lat = sorted(res["host_latency_ns"])
    cols = res["row_hits"] + res["row_misses"]
    return {
        "name": name,
        "ndp_requests": ndp,
        "host_requests": res["host_bursts"],
        "dram_cycles": cycles,
        "bytes_per_dram_cycle": round(bpc, 3),
        "bytes_per_ns": round(bpc / timing.tCK_ns, 2),
        "fraction_of_peak": round(bpc / peak, 4),
        "steady_state_fraction_of_peak": round(steady_state(bpc / peak, cycles, org.ranks, owed,
                                                             timing.tRFC), 4),
        "row_hit_rate": round(res["row_hits"] / cols, 4) if cols else None,
        "refreshes": res["refreshes"],
        "refresh_share": round(res["refreshes"] * timing.tRFC / rank_time, 4),
        "refreshes_owed_at_end": owed,
        "host_mean_latency_ns": round(sum(lat) / len(lat), 1) if lat else None,
        "host_p99_latency_ns": lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
        "commands": res["commands"],
    }


def replay(trace: dict, params: dict | None = None, seed: int = 1, host_with_ndp: bool = False) -> dict:
    """Replay one trace through the memory-system RTL; the raw result of the cocotb bench.
    ``host_with_ndp``: host requests due after the last NDP request was taken are dropped."""
    with tempfile.TemporaryDirectory() as tmp:
        tpath, opath = Path(tmp) / "trace.npz", Path(tmp) / "out.json"
        np.savez(tpath, **trace)
        result = rtl_build.run("memory_system", FACTORY, {**PARAMS, **(params or {})}, BENCH,
                               testcase="trace_replay", seed=seed,
                               extra_env={"DT_TRACE": str(tpath), "DT_OUT": str(opath),
                                          "DT_HOST_WITH_NDP": str(int(host_with_ndp))})
        result.check()
        return json.loads(opath.read_text())


def run_trace_bench(bursts: int = 40000, trace_file=None, policy: str = "fair",
                    out="bench/results/dram_trace.json", log=print) -> dict:
    """Replay every stream of :func:`stream_traces` (plus ``trace_file``), write ``out``."""
    traces = stream_traces(bursts)
    if trace_file:
        traces[f"trace:{Path(trace_file).name}"] = load_trace(trace_file)
    t0 = time.monotonic()
    log(f"[bench] dram_trace: {len(traces)} traces through the memory-system RTL "
        f"({bursts} NDP bursts each, policy {policy})")
    points = []
    for name, trace in traces.items():
        t1 = time.monotonic()
        points.append(summarise(name, trace, replay(trace, {"policy": policy}, host_with_ndp=name == "mix")))
        p = points[-1]
        if name == "random":
            p["ideal_scheduler_bound"] = {str(q): round(random_read_bound(q), 4)
                                          for q in (RANK_QUEUE_DEPTH, 2 * RANK_QUEUE_DEPTH, 3 * RANK_QUEUE_DEPTH)}
        log(f"  {name:26} {100 * p['fraction_of_peak']:6.1f}% of peak "
            f"(steady {100 * p['steady_state_fraction_of_peak']:5.1f}%), hits {p['row_hit_rate']}, "
            f"host {p['host_mean_latency_ns']} ns  [{time.monotonic() - t1:.0f} s]")
    org, timing = load_dram_config()
    doc = {
        **bench_header("dram_trace", f"ndpdimm bench --suite dram_trace --bursts {bursts}"
                       + (f" --trace {trace_file}" if trace_file else "")),
        "design": {"rtl": "MemorySystem (hw/memory/system.py), 1 NDP client x 2 lanes + host port",
                   "rank_queue_depth": RANK_QUEUE_DEPTH, "policy": policy, "refresh": PARAMS["refresh"],
                   "dram_config": "hw/configs/ddr4-3200.toml", "ranks": org.ranks,
                   "tRFC": timing.tRFC, "tREFI": timing.tREFI},
        "figure_of_merit": "bytes of the measured source (NDP, or host if the trace has no NDP "
                           "request) per DRAM cycle from the first request to the last data burst, "
                           "over the peak of 64 B per DRAM cycle (102.4 B/ns); steady state charges "
                           "every refresh still owed at the end tRFC of rank time",
        "source_of_numbers": "Verilator + cocotb replay, every DRAM command checked by the timing "
                             "model (zero violations, refresh on)",
        "seed": SEED,
        "points": points,
        "bench_wall_seconds": round(time.monotonic() - t0, 1),
    }
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps_finite(doc, path) + "\n")
    log(f"wrote {path}")
    return doc
