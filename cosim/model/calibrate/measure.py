"""Running calibration points on a backend: staging, measuring, sharding, resuming.

* :class:`Runner`: runs points on one backend (the RTL harness, or the model backend when a
  sequence is replayed): the DRAM window opened, the queue enabled, a point's index list
  staged through DRAM and a DMA as the host runtime does, then the measured descriptor alone
  after :data:`~ndpdimm.cosim.model.calibrate.points.IDLE_CYCLES` idle cycles (no refresh an
  earlier point postponed is paid inside it); also the multi-call sequences and the extras
  (dispatch gap, host pass-through latencies).
* :func:`measure_on_rtl`: points in order on one fresh RTL harness, from reset;
  :func:`replay_sequence`: the model backend's answer to a measured sequence.
* :func:`run_points`: the RTL measurement of a whole calibration, in shards of at most
  :data:`SHARD_CYCLES` expected cycles handed to a ``runner(fn, tasks, on_done)``
  (:func:`local_runner`, or the CLI's Dask runner), each finished point kept in a
  :class:`PointStore` so that an interrupted run resumes.

Cycle behaviour: what the backend does; nothing here adds cycles but the idle ones it asks for.
"""

import json
import random
import sys
import time
import zlib
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.cache import build_cache_dir
from ndpdimm.cosim.model.calibrate.points import (
    DMA_BASE,
    IDLE_CYCLES,
    POLICIES,
    STAGE,
    WINDOW,
    bad_index_list,
    expected_status,
    index_list,
    point_fields,
    round_up,
    sequence_points,
)
from ndpdimm.cosim.model.perf import COUNTER_NAMES, PerfModel, config_key
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

__all__ = ["Runner", "measure_on_rtl", "replay_sequence", "SHARD_CYCLES", "local_runner",
           "PointStore", "run_points"]


class Runner:
    """Runs points on one backend: window open, queue enabled, operands staged per point."""

    def __init__(self, backend, config: CoreConfig):
        from ndpdimm.cosim.golden.codec import LayoutCodec
        from ndpdimm.cosim.golden.core import descriptor_layouts
        self.b, self.config = backend, config
        org, _ = config.dram()
        layouts = descriptor_layouts(org.capacity_bytes, config.sram_size)
        self.codec = {op: LayoutCodec(lay) for op, lay in layouts.items()}
        self.next_id = 1
        backend.csr_write("WINDOW_BASE", WINDOW[0])
        backend.csr_write("WINDOW_LIMIT", WINDOW[1])
        backend.csr_write("CTRL", 1)

    def word(self, fields):
        fields = {"id": self.next_id & 0xFFF, **fields}
        self.next_id += 1
        op = fields["opcode"]
        if op in self.codec:
            return self.codec[op].encode(fields), fields
        return (op & 0xF) | (fields["id"] << 4), fields

    def run_one(self, fields):
        """Run one descriptor alone; (completion, its fields with id, counter increments, wall s,
        simulated cycles)."""
        b = self.b
        before = {n: b.csr_read(n) for n in COUNTER_NAMES}
        word, fields = self.word(fields)
        c0 = b.cycle
        t0 = time.perf_counter()
        b.submit([word])
        comps = b.run()
        wall = time.perf_counter() - t0
        sim = b.cycle - c0
        if len(comps) != 1:
            raise RuntimeError(f"expected one completion, got {comps}")
        after = {n: b.csr_read(n) for n in COUNTER_NAMES}
        return comps[0], fields, {n: after[n] - before[n] for n in COUNTER_NAMES}, wall, sim

    def dma_in(self, dram, sram, n_bytes):
        c, *_ = self.run_one({"opcode": Opcode.DMA, "to_dram": 0, "dram": dram, "sram": sram,
                              "n_bytes": n_bytes})
        if c.status != Status.OK:
            raise RuntimeError(f"staging DMA failed: {c.describe()}")

    def stage(self, pt):
        """Put a point's index list into the SRAM (through DRAM and a DMA, as a host would)."""
        if pt["kind"] == "gemv" and pt["n_idx"]:
            idx = index_list(pt)
        elif pt["kind"] == "reject" and pt["what"] == "gemv_bad_index":
            idx = bad_index_list(pt["n_idx"])
        else:
            return
        raw = b"".join(i.to_bytes(4, "little") for i in idx)
        self.b.load(STAGE, raw)
        self.dma_in(STAGE, 0, round_up(len(raw), 64))

    def measure(self, pt):
        self.stage(pt)
        fields = point_fields(pt, self.config)
        # start from an idle DRAM: refreshes a previous point postponed are paid now, not
        # inside this point (a rank may owe up to max_postponed_refs of them)
        self.b.run_cycles(IDLE_CYCLES)
        c, fields, counters, wall, sim = self.run_one(fields)
        return {"name": pt["name"], "spec": pt, "fields": {k: int(v) for k, v in fields.items()},
                "status": c.status.name, "rtl_cycles": c.cycles,
                "start_cycle": c.done_cycle - c.cycles, "rtl_counters": counters,
                "rtl_wall_s": wall, "rtl_sim_cycles": sim}

    def idle(self, n):
        """Let the core idle ``n`` cycles (both backends)."""
        if n > 0:
            if hasattr(self.b, "run_cycles"):
                self.b.run_cycles(n)
            else:
                self.b.run(max_cycles=n)

    def sequence(self, run, submit_at=None):
        """Run one :func:`sequence_runs` entry. ``submit_at``: the cycle at which to submit its
        first measured descriptor (the model replays the RTL's timing with it); by default
        after ``IDLE_CYCLES``, for a debt run at 300 cycles before a refresh boundary."""
        b, cfg = self.b, self.config
        for pt in sequence_points(run):
            self.stage(pt)
        self.idle(IDLE_CYCLES)
        trefi = round(cfg.dram()[1].tREFI * cfg.dram()[1].tCK_ns)
        if submit_at is None and run["kind"] == "debt":
            submit_at = b.cycle + (trefi - 300 - b.cycle) % trefi
        if submit_at is not None:
            if submit_at < b.cycle:
                raise RuntimeError(f"{run['name']}: cannot submit at {submit_at}, already at {b.cycle}")
            self.idle(submit_at - b.cycle)
        out = {"name": run["name"], "set": run["set"], "spec": run, "submit_cycle": b.cycle}
        if run["kind"] == "host":
            # ``repeat`` copies of the descriptor back to back, alone and then with host traffic
            n = run.get("repeat", 1)
            fields = point_fields(run["point"], cfg)
            b.submit([self.word(fields)[0] for _ in range(n)])
            alone = b.run()
            self.idle(IDLE_CYCLES)
            out["alone_cycles"] = sum(c.cycles for c in alone)
            b.csr_write("POLICY", POLICIES[run["policy"]])
            b.submit([self.word(fields)[0] for _ in range(n)])
            rng = random.Random(zlib.crc32(run["name"].encode()))
            lat, comps, k = [], [], 0
            while len(comps) < n:
                addr = DMA_BASE + (rng.randrange(1 << 20) << 6)
                c0 = b.cycle
                b.host_access(addr, bool(k % 2), bytes(64) if k % 2 else b"")
                lat.append((c0, b.cycle - c0))
                k += 1
                comps += b.run(max_cycles=run["interval"])
            start = comps[0].done_cycle - comps[0].cycles
            during = [t for c0, t in lat if start <= c0 < comps[-1].done_cycle]
            b.csr_write("POLICY", POLICIES["fair"])
            bad = [c for c in comps + alone if c.status != Status.OK]
            out.update(status=(bad[0] if bad else comps[0]).status.name,
                       cycles=sum(c.cycles for c in comps), start_cycle=start,
                       host_latencies=during, host_accesses=len(during),
                       mean_host_latency=sum(during) / len(during) if during else None)
        else:
            c1, *_ = self.run_one(point_fields(run["first"], cfg))
            self.idle(run["gap"])
            c2, *_ = self.run_one(point_fields(run["probe"], cfg))
            out.update(status=c2.status.name, first_cycles=c1.cycles, cycles=c2.cycles,
                       start_cycle=c2.done_cycle - c2.cycles)
        return out

    def extras(self):
        """Dispatch gap (back-to-back ACT descriptors) and host pass-through latencies."""
        b = self.b
        words = [self.word({"opcode": Opcode.ACT, "op": 1, "in_fmt": 0, "out_fmt": 0, "n": 512,
                            "src_a": 0, "src_b": 0, "dst": 0, "c": 0, "k": 0})[0] for _ in range(6)]
        b.submit(words)
        comps = b.run()
        gaps = sorted(comps[i + 1].done_cycle - comps[i].done_cycle - comps[i + 1].cycles
                      for i in range(len(comps) - 1))
        lat = {}
        for write in (0, 1):
            vals = []
            for k in range(8):
                addr = DMA_BASE + (1 << 20) + k * 4096 * 17
                c0 = b.cycle
                b.host_access(addr, bool(write), bytes(64) if write else b"")
                vals.append(b.cycle - c0)
                b.run_cycles(500)                     # let the core idle (rows close, no overlap)
            lat["host_write" if write else "host_read"] = sorted(vals)
        return {"gap_samples": gaps, **lat}


def measure_on_rtl(config: CoreConfig, points, with_extras: bool = False, library=None) -> tuple:
    """``points`` (of :func:`point_sets`; sequences too) run in this order on one fresh harness
    of ``config``, from reset: (their records, the extras measurement or None). ``library``: a
    harness library built for ``config`` (default: the default build)."""
    from ndpdimm.cosim.rtl.harness import RtlBackend
    out, extras = [], None
    with RtlBackend(config, progress=False, library=library) as b:
        r = Runner(b, config)
        if with_extras:
            extras = r.extras()
        for pt in points:
            out.append(r.sequence(pt) if "set" in pt else r.measure(pt))
    return out, extras


def _shard_worker(args):
    config_dict, pts, with_extras = args
    return measure_on_rtl(CoreConfig(**config_dict), pts, with_extras)


def replay_sequence(model: PerfModel, config: CoreConfig, rec: dict) -> dict:
    """The model backend's answer to one measured sequence, submitted at the RTL's cycle."""
    from ndpdimm.cosim.model.backend import ModelBackend
    b = ModelBackend(config, functional=False, perf=model)
    return Runner(b, config).sequence(rec["spec"], submit_at=rec["submit_cycle"])


#: Largest expected cost of one shard in RTL cycles: a finished shard's points are saved at
#: once, so a killed run loses at most this much (about 30 s at 256 units).
SHARD_CYCLES = 200_000


def local_runner(jobs: int):
    """A :func:`run_points` runner of ``jobs`` local processes (``jobs`` = 1: this process):
    ``runner(fn, tasks, on_done)`` calls ``on_done(i, result, error)`` per task as it finishes."""
    def run(fn, tasks, on_done):
        if jobs == 1:
            for i, t in enumerate(tasks):
                try:
                    res, err = fn(t), None
                except Exception as e:                     # reported, the others go on
                    res, err = None, e
                on_done(i, res, err)
            return
        from concurrent.futures import ProcessPoolExecutor, as_completed
        with ProcessPoolExecutor(jobs) as pool:
            futs = {pool.submit(fn, t): i for i, t in enumerate(tasks)}
            for f in as_completed(futs):
                err = f.exception()
                on_done(futs[f], None if err else f.result(), err)
    run.description = f"{jobs} local process(es)"
    return run


class PointStore:
    """Finished RTL points of one calibration, one JSON file per point, so an interrupted run
    resumes where it stopped. The folder is named after the configuration and the harness
    build (its digest covers the Verilog and the build options), so a changed RTL never
    reuses old points: ``<cache>/calibration/<config key>/<harness build>/``."""

    EXTRAS = "_extras"

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)

    def _path(self, name: str) -> Path:
        return self.folder / f"{zlib.crc32(name.encode()):08x}-{name[:80]}.json"

    def get(self, name: str):
        path = self._path(name)
        try:
            rec = json.loads(path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None                                   # a half-written file is rerun
        return rec["record"] if rec.get("name") == name else None

    def put(self, name: str, record) -> None:
        tmp = self._path(name).with_suffix(".tmp")
        tmp.write_text(json.dumps({"name": name, "record": record}) + "\n")
        tmp.replace(self._path(name))


def run_points(config: CoreConfig, points: list, *, jobs: int = 1, progress: bool = True,
               runner=None, store: PointStore | None | bool = True, log=print):
    """Measure ``points`` on the RTL backend; (records in the order given, extras).

    Points go out in shards of at most :data:`SHARD_CYCLES` expected cycles, balanced by cost,
    to ``runner`` (``runner(fn, tasks, on_done)``; default :func:`local_runner` of ``jobs``;
    the CLI passes the Dask runner). ``store``: a :class:`PointStore`, ``True`` for the one of
    this configuration's harness build, ``False``/``None`` for none; points already in it are
    not run again and each shard's points are saved as the shard finishes. A failed shard is
    reported after the others have finished (their points saved) as ``RuntimeError``."""
    from ndpdimm.cosim.rtl.harness_build import build_harness
    lib = build_harness(config, progress=progress)            # once, before any worker
    if store is True:
        store = PointStore(build_cache_dir("calibration") / config_key(config) / lib.parent.parent.name)
    results = [store.get(p["name"]) if store else None for p in points]
    extras = store.get(PointStore.EXTRAS) if store else None
    todo = [i for i, r in enumerate(results) if r is None]
    if store and len(todo) < len(points):
        log(f"resuming from {store.folder}: {len(points) - len(todo)} of {len(points)} points "
            f"already measured{'' if extras is None else ', extras too'}")
    if not todo and extras is not None:
        return results, extras
    costs = {i: _cost(points[i], config) + 2e4 for i in todo}
    n_shards = max(min(jobs, len(todo)), round(sum(costs.values()) / SHARD_CYCLES), 1)
    n_shards = min(n_shards, max(len(todo), 1))
    shards = [[] for _ in range(n_shards)]
    load = [0.0] * n_shards
    for i in sorted(todo, key=lambda i: -costs[i]):
        k = min(range(n_shards), key=load.__getitem__)
        shards[k].append(i)
        load[k] += costs[i]
    order = sorted(range(n_shards), key=lambda k: -load[k])        # longest first
    shards = [shards[k] for k in order]
    tasks = [(config.as_dict(), [points[i] for i in s], k == 0 and extras is None)
             for k, s in enumerate(shards)]
    runner = runner or local_runner(max(1, min(jobs, len(tasks))))
    bar = _progress(len(points), progress, "RTL points")
    bar.update(len(points) - len(todo))
    failed = []

    def done(k, res, err):
        nonlocal extras
        if err is not None:
            failed.append(f"shard {k} ({', '.join(points[i]['name'] for i in shards[k][:3])}...): "
                          f"{type(err).__name__}: {err}")
            return
        recs, ex = res
        if ex is not None:
            extras = ex
            if store:
                store.put(PointStore.EXTRAS, ex)
        for i, rec in zip(shards[k], recs):
            results[i] = rec
            if store:
                store.put(points[i]["name"], rec)
        bar.update(len(shards[k]))

    try:
        runner(_shard_worker, tasks, done)
    finally:
        bar.close()
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(tasks)} shards failed (the others are saved"
                           f"{' in ' + str(store.folder) if store else ''}; rerun to resume): "
                           + "; ".join(failed))
    return results, extras


def _cost(pt, config):
    """Rough RTL cycles of a point or sequence (for load balancing only)."""
    if "set" in pt:
        return sum(_cost(p, config) for p in sequence_points(pt)) + IDLE_CYCLES + 8000
    return PerfModel(config).descriptor_cycles(point_fields(pt, config), expected_status(pt))


class _NoBar:
    def update(self, n=1):
        pass

    def close(self):
        pass


def _progress(total, enabled, desc):
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, unit="pt", file=sys.stderr)

