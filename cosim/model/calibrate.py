"""``ndpdimm calibrate``: fit the performance model (``cosim/model/perf/``) to RTL cycle counts.

The procedure (``docs/perf_model.md`` has the rationale and the measured figures):

1. Two fixed, disjoint sets of single-descriptor *points* (:func:`point_sets`):
   the **calibration** set and the **held-out** set. Held-out points use other
   shapes (non-power-of-two sizes, other batches, other index densities) and
   whole families the fit never sees: column gather in INT8, GEMVs with
   ``accumulate``, GELU / SCALE / RECIP activations, FP32 ELTWISE MUL, SRAM ->
   DRAM DMAs of other sizes. Points that do not fit a configuration (SRAM size,
   batch limit) are dropped for it.
2. Every point runs on the RTL backend (``cosim/rtl/harness.py``, the
   Verilated ``NdpCore`` with the timing-checked DRAM model): its operands are
   staged first (index lists DMA'd into the SRAM, as the host runtime does;
   weight and activation *values* are left as they are because no cycle count
   depends on them - the bit-serial multipliers walk every digit, the
   activation pipeline has a fixed latency), then the measured descriptor runs
   alone, after 4000 idle cycles (so that no refresh an earlier point
   postponed is paid inside it). Recorded: its ``CQ_CYCLES``, status, dispatch
   cycle, the counter increments, and the wall time of the RTL run. Also measured directly: the
   dispatch gap between back-to-back descriptors, the host pass-through
   latencies, and the busy-counter offsets.
3. The parameters in ``cosim.model.perf.FITTED`` are fitted to the calibration
   points only, by least squares on the relative error (``scipy``'s bounded
   trust-region solver from several starts). The DRAM-bound path's two
   parameters (``stream_efficiency``, ``open_penalty``) are not reachable with
   16 units (the engine consumes at most 23 B/cycle of the 102.4 the DRAM
   gives); they are fitted to the 256-unit bandwidth bench
   (``bench/results/dram_gemv.json``) when it exists.
4. The model is evaluated on the held-out points: mean and max absolute
   percentage error of ``CQ_CYCLES`` (the goal: at most 3 % mean), with the
   dispatch cycle given (as the model backend knows its own time) and without.
   Speed: simulated cycles per wall-second of the RTL runs, predictions per
   second of the model, and their ratio on the same descriptors.
5. Everything goes into ``cosim/model/calibration/<config key>.json``: the
   configuration, git commit, date, command, parameters, every point with its
   RTL and model cycles and counters, the error summary and the speeds.

``--refit FILE`` redoes steps 3-5 from the points stored in a file (no RTL): the RTL runs
of step 2 are kept in ``<cache>/calibration/<config key>.rtl.json`` under the shared cache
root (``cosim/cache.py``) before the fit.
Entry points for the CLI: :func:`add_arguments` and :func:`run`; :func:`main`
is the stand-alone equivalent.
"""

import argparse
import datetime
import functools
import json
import math
import os
import random
import sys
import time
import zlib
from pathlib import Path

from ndpdimm.cosim.arguments import positive_int
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.cache import build_cache_dir
from ndpdimm.cosim.model.perf import (
    COUNTER_NAMES,
    DRAM_FITTED,
    FITTED,
    PerfModel,
    PerfParams,
    calibration_path,
    config_key,
)
from ndpdimm.cosim.provenance import git_commit, git_dirty
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.controller import POLICIES as DRAM_POLICIES
from ndpdimm.hw.memory.port import Status

__all__ = ["point_sets", "point_fields", "expected_status", "run_points", "fit", "evaluate",
           "calibrate", "report", "held_out_table", "add_arguments", "run", "main", "BENCH_256",
           "error_summary", "measure_on_rtl"]

REPO = Path(__file__).resolve().parents[2]
#: The 256-unit GEMV bandwidth bench that pins the DRAM-bound path.
BENCH_256 = REPO / "bench" / "results" / "dram_gemv.json"

WINDOW = (1 << 20, 1 << 34)          # the NDP's DRAM window during calibration
W_BASE = 1 << 26                      # weights (never written: values do not change timing)
STAGE = 1 << 22                       # staging area for index lists
DMA_BASE = 1 << 24                    # DMA points
#: Idle cycles before each measured descriptor: 8 postponed refreshes (8 x tRFC = 2.8 us) and
#: their precharges fit.
IDLE_CYCLES = 4000

FP16, BF16, INT8 = "fp16", "bf16", "int8"
_ACT = {o.name.lower(): int(o) for o in ActOp}
_FMT = {f.name.lower(): int(f) for f in ActFmt}


def _round(n, k):
    return -(-n // k) * k


# --- the point sets --------------------------------------------------------------------------

def _gemv(name, op, dtype, rows, cols, batch=1, n_idx=0, pattern="random", accumulate=0, base=0):
    return {"name": name, "kind": "gemv", "op": op, "dtype": dtype, "rows": rows, "cols": cols,
            "batch": batch, "n_idx": n_idx, "pattern": pattern, "accumulate": accumulate,
            "base": base}


def _dma(name, n_bytes, to_dram=0, offset=0):
    return {"name": name, "kind": "dma", "n_bytes": n_bytes, "to_dram": to_dram, "offset": offset}


def _act(name, opcode, op, n, in_fmt="fp16", out_fmt="fp16"):
    return {"name": name, "kind": "act", "opcode": opcode, "op": op, "n": n, "in_fmt": in_fmt,
            "out_fmt": out_fmt}


def _reject(name, what, n_idx=0):
    return {"name": name, "kind": "reject", "what": what, "n_idx": n_idx}


def _calibration_set():
    d, rg, cg = "dense", "row_gather", "col_gather"
    pts = []
    # dense GEMV: dtypes x shapes x batches (row strides below, at and above one 64 KiB span)
    for dt in (FP16, BF16, INT8):
        for rows, cols in ((64, 256), (256, 512), (512, 1024), (1024, 512), (2048, 256)):
            for b in (1, 4):
                pts.append(_gemv(f"dense-{dt}-{rows}x{cols}-b{b}", d, dt, rows, cols, b))
    for dt, rows, cols, b in ((FP16, 256, 256, 16), (BF16, 512, 512, 2), (INT8, 256, 1024, 8),
                              (BF16, 4096, 128, 1), (FP16, 128, 4096, 1), (BF16, 16, 2048, 1),
                              (FP16, 8, 64, 1), (INT8, 32, 32, 3)):
        pts.append(_gemv(f"dense-{dt}-{rows}x{cols}-b{b}", d, dt, rows, cols, b))
    # batch 1 (where the weight stream's latency shows): row strides around one 64 KiB span
    for dt in (FP16, BF16, INT8):
        for rows, cols in ((512, 256), (768, 512), (1024, 256), (1536, 256),
                           (2048, 128), (384, 1024), (640, 512)):
            pts.append(_gemv(f"dense-{dt}-{rows}x{cols}-b1", d, dt, rows, cols, 1))
    for b in (2, 3):
        pts.append(_gemv(f"dense-bf16-1024x256-b{b}", d, BF16, 1024, 256, b))
    # bank conflicts: a row stride at or near a multiple of the 64 KiB span puts consecutive
    # accesses in one bank (DRAM-bound at batch 1 on 256 units, partly hidden at batch 2-4)
    for dt, rows, cols, b in ((FP16, 3072, 256, 1), (BF16, 3072, 128, 1), (INT8, 3072, 512, 1),
                              (FP16, 3072, 256, 4), (BF16, 7168, 64, 1), (INT8, 3072, 256, 2),
                              (FP16, 2500, 256, 1), (FP16, 2800, 256, 1)):
        pts.append(_gemv(f"dense-{dt}-{rows}x{cols}-b{b}", d, dt, rows, cols, b))
    # row gather: densities, clustering
    for dt, rows, cols, n, pat, b in ((FP16, 1024, 512, 256, "random", 1),
                                      (BF16, 2048, 256, 512, "random", 1),
                                      (INT8, 1024, 1024, 128, "clustered", 2),
                                      (FP16, 512, 1024, 64, "random", 4),
                                      (BF16, 1024, 1024, 512, "clustered", 1)):
        pts.append(_gemv(f"rowg-{dt}-{rows}x{cols}-{n}{pat[0]}-b{b}", rg, dt, rows, cols, b, n, pat))
    # column gather (FP16 / BF16 only: INT8 is held out)
    for dt, rows, cols, n, b in ((FP16, 1024, 256, 128, 1), (BF16, 512, 512, 256, 2),
                                 (FP16, 2048, 1024, 64, 4), (BF16, 256, 2048, 32, 1)):
        pts.append(_gemv(f"colg-{dt}-{rows}x{cols}-{n}-b{b}", cg, dt, rows, cols, b, n))
    # DMA both ways, sizes across the 64 KiB span
    for n in (64, 512, 4096, 16384, 65536):
        pts.append(_dma(f"dma-in-{n}", n))
    for n in (256, 8192, 32768):
        pts.append(_dma(f"dma-out-{n}", n, to_dram=1))
    pts.append(_dma("dma-in-24576-off", 24576, offset=61440))
    # activation unit
    for n in (16, 256, 1024, 4096):
        pts.append(_act(f"relu-fp16-{n}", "ACT", "relu", n))
    pts += [_act("silu-fp32-fp16-2048", "ACT", "silu", 2048, "fp32", "fp16"),
            _act("exp-bf16-512", "ACT", "exp", 512, "bf16", "bf16"),
            _act("pass-fp32-bf16-4096", "ACT", "pass", 4096, "fp32", "bf16"),
            _act("max-fp16-1024", "ACT", "max", 1024),
            _act("sumexp-fp32-2048", "ACT", "sumexp", 2048, "fp32", "fp32"),
            _act("softmax-fp16-64", "SOFTMAX", "pass", 64),
            _act("softmax-fp32-fp16-1024", "SOFTMAX", "pass", 1024, "fp32", "fp16"),
            _act("softmax-fp16-4096", "SOFTMAX", "pass", 4096),
            _act("add-fp32-2048", "ELTWISE", "add", 2048, "fp32", "fp32"),
            _act("mul-fp16-1024", "ELTWISE", "mul", 1024),
            _act("add-fp16-8192", "ELTWISE", "add", 8192)]
    # rejected / trivial descriptors
    pts += [_reject("fence", "fence"), _reject("bad-opcode", "bad_opcode"),
            _reject("gemv-bad-dtype", "gemv_bad_dtype"), _reject("dma-misaligned", "dma_misaligned"),
            _reject("act-bad-format", "act_bad_format"),
            _reject("gemv-bad-index-256", "gemv_bad_index", 256)]
    return pts


def _held_out_set():
    d, rg, cg = "dense", "row_gather", "col_gather"
    pts = []
    for dt, rows, cols, b in ((FP16, 384, 768, 1), (BF16, 768, 384, 1), (INT8, 1536, 640, 1),
                              (FP16, 1000, 1000, 2), (BF16, 300, 1200, 3), (INT8, 640, 1536, 5),
                              (FP16, 3072, 320, 1), (BF16, 96, 2560, 1), (FP16, 200, 700, 12),
                              (INT8, 2500, 200, 1), (BF16, 1536, 768, 6), (FP16, 40, 100, 2)):
        pts.append(_gemv(f"dense-{dt}-{rows}x{cols}-b{b}", d, dt, rows, cols, b))
    for dt, rows, cols, n, pat, b in ((FP16, 1536, 768, 400, "random", 1),
                                      (BF16, 3000, 384, 700, "clustered", 2),
                                      (INT8, 2048, 512, 300, "random", 1),
                                      (FP16, 768, 1536, 96, "clustered", 3)):
        pts.append(_gemv(f"rowg-{dt}-{rows}x{cols}-{n}{pat[0]}-b{b}", rg, dt, rows, cols, b, n, pat))
    # column gather: FP16 / BF16 at new shapes, and INT8 (a family the fit never saw)
    for dt, rows, cols, n, b in ((FP16, 1500, 640, 200, 2), (BF16, 700, 1536, 90, 1),
                                 (INT8, 1024, 1024, 150, 1), (INT8, 600, 2048, 64, 3)):
        pts.append(_gemv(f"colg-{dt}-{rows}x{cols}-{n}-b{b}", cg, dt, rows, cols, b, n))
    # accumulate (never in the calibration set)
    for dt, rows, cols, b in ((FP16, 512, 768, 1), (INT8, 1200, 300, 4), (BF16, 256, 256, 8)):
        pts.append(_gemv(f"dense-acc-{dt}-{rows}x{cols}-b{b}", d, dt, rows, cols, b, accumulate=1))
    pts.append(_gemv("rowg-acc-bf16-1024x512-300r-b1", rg, BF16, 1024, 512, 1, 300, accumulate=1))
    for n in (192, 2880, 40960):
        pts.append(_dma(f"dma-in-{n}", n))
    for n in (1280, 12288, 49152):
        pts.append(_dma(f"dma-out-{n}", n, to_dram=1))
    pts += [_act("gelu-fp32-fp16-3000", "ACT", "gelu", 3000, "fp32", "fp16"),
            _act("scale-fp16-777", "ACT", "scale", 777),
            _act("recip-fp32-fp32-1500", "ACT", "recip", 1500, "fp32", "fp32"),
            _act("relu-bf16-6000", "ACT", "relu", 6000, "bf16", "bf16"),
            _act("max-fp32-3333", "ACT", "max", 3333, "fp32", "fp32"),
            _act("softmax-bf16-200", "SOFTMAX", "pass", 200, "bf16", "bf16"),
            _act("softmax-fp32-fp32-2500", "SOFTMAX", "pass", 2500, "fp32", "fp32"),
            _act("mul-fp32-1800", "ELTWISE", "mul", 1800, "fp32", "fp32"),
            _act("add-bf16-5000", "ELTWISE", "add", 5000, "bf16", "bf16")]
    pts += [_reject("gemv-bad-index-1000", "gemv_bad_index", 1000),
            _reject("dma-sram-range", "dma_sram_range"), _reject("unsupported", "unsupported")]
    return pts


# --- sequences: host traffic and refresh debt (several driver calls each) -----------------------

#: ``POLICY`` register values by name (``hw/memory/controller.POLICIES`` gives the codes).
POLICIES = {name: code for code, name in enumerate(DRAM_POLICIES)}


def _host_run(name, set_, pt, policy, interval, repeat=1):
    return {"name": name, "set": set_, "kind": "host", "point": pt, "policy": policy,
            "interval": interval, "repeat": repeat}


def _debt_run(name, set_, first, gap, probe):
    return {"name": name, "set": set_, "kind": "debt", "first": first, "gap": gap,
            "probe": probe}


def sequence_runs(config: CoreConfig = CoreConfig()) -> list:
    """Multi-call runs that single points cannot show, each in the calibration or held-out set:

    * ``host``: one descriptor alone, then again while the host reads and writes 64 B bursts
      with ``interval`` idle cycles between them, under each ``POLICY``; measured: the
      descriptor's cycles and the host latencies (calibration: a dense FP16 GEMV at intervals
      50 and 400, six 16 KiB DMAs back to back at 30 and 150; held out: an INT8 row gather at
      150 and six 12 KiB DMAs at 80);
    * ``debt``: a 16 KiB DMA placed so that a refresh falls due inside it (the DMA keeps the
      rank queues busy, so the ranks owe it), then ``gap`` idle cycles, then a 4 KiB DMA probe
      whose cycles show the refresh it waits for.

    Sized to fit the 16 KiB SRAM of the small configuration too.
    """
    dense = _gemv("host-dense-fp16-512x1024-b1", "dense", FP16, 512, 1024, 1)
    gather = _gemv("host-rowg-int8-2048x512-400r-b1", "row_gather", INT8, 2048, 512, 1, 400)
    dma = _dma("host-dma-in-12288", 12288)
    dma_cal = _dma("host-dma-in-16384", 16384)
    runs = []
    for pol in POLICIES:
        for interval in (50, 400):
            runs.append(_host_run(f"host-{pol}-dense-every{interval}", "calibration", dense, pol,
                                  interval))
        for interval in (30, 150):
            runs.append(_host_run(f"host-{pol}-dma16k-every{interval}", "calibration", dma_cal,
                                  pol, interval, repeat=6))
        runs.append(_host_run(f"host-{pol}-rowg-every150", "held_out", gather, pol, 150))
        runs.append(_host_run(f"host-{pol}-dma-every80", "held_out", dma, pol, 80, repeat=6))
    big = _dma("debt-dma-in-16384", 16384)
    probe = _dma("debt-probe-4096", 4096)
    for gap in (0, 150, 500):
        runs.append(_debt_run(f"debt-gap{gap}", "calibration", big, gap, probe))
    for gap in (60, 300):
        runs.append(_debt_run(f"debt-gap{gap}", "held_out", big, gap, probe))
    return [r for r in runs if all(fits(p, config) for p in _run_points(r))]


def _run_points(run):
    return [run["point"]] if run["kind"] == "host" else [run["first"], run["probe"]]


def _sram_plan(pt, config):
    """SRAM addresses of a GEMV point: (idx_addr, x_addr, x_pitch, y_addr, y_pitch, end)."""
    dtype = Dtype.parse(pt["dtype"])
    e, lanes = dtype.info.elem_bits // 8, dtype.info.lanes
    B = pt["batch"]
    if pt["op"] == "col_gather":
        x_len, n_out = pt["rows"] * e, pt["cols"]
    else:
        x_len = 16 * -(-pt["cols"] // lanes)
        n_out = pt["n_idx"] if pt["op"] == "row_gather" else pt["rows"]
    idx_bytes = 4 * pt["n_idx"]
    x_addr = _round(idx_bytes, 64)
    x_pitch = _round(x_len, 32)
    y_addr = _round(x_addr + B * x_pitch, 64)
    y_pitch = _round(4 * n_out, 32)
    return 0, x_addr, x_pitch, y_addr, y_pitch, y_addr + B * y_pitch


def fits(pt, config: CoreConfig) -> bool:
    """Whether a point can run on ``config`` (SRAM size, batch limit)."""
    S = config.sram_size
    if pt["kind"] == "gemv":
        if pt["batch"] > config.max_batch:
            return False
        return _sram_plan(pt, config)[-1] <= S
    if pt["kind"] == "dma":
        return pt["n_bytes"] <= S
    if pt["kind"] == "act":
        e_in = 4 if pt["in_fmt"] == "fp32" else 2
        e_out = 4 if pt["out_fmt"] == "fp32" else 2
        return _round(pt["n"] * e_in, 32) * 2 + _round(pt["n"] * e_out, 32) <= S
    if pt["kind"] == "reject" and pt["what"] == "gemv_bad_index":
        return _round(4 * pt["n_idx"], 64) + 64 <= S
    return True


def point_sets(config: CoreConfig = CoreConfig()) -> dict:
    """``{"calibration": [...], "held_out": [...]}``: the points that fit ``config``."""
    cal = [p for p in _calibration_set() if fits(p, config)]
    held = [p for p in _held_out_set() if fits(p, config)]
    names = {p["name"] for p in cal}
    clash = [p["name"] for p in held if p["name"] in names]
    if clash:
        raise AssertionError(f"held-out points also in the calibration set: {clash}")
    return {"calibration": cal, "held_out": held}


# --- running points on the RTL backend -------------------------------------------------------

def _index_list(pt):
    rng = random.Random(zlib.crc32(pt["name"].encode()))
    n, rows = pt["n_idx"], pt["rows"]
    if pt["pattern"] == "clustered":
        runs, out = -(-n // 32), set()
        starts = sorted(rng.sample(range(0, max(rows - 32, 1), 32), min(runs, max(rows // 32, 1))))
        for s in starts:
            out.update(range(s, min(s + 32, rows)))
        out = sorted(out)[:n]
        extra = [i for i in range(rows) if i not in set(out)]
        out = sorted(out + rng.sample(extra, n - len(out)))
    else:
        out = sorted(rng.sample(range(rows), n))
    return out


def _dma_address(pt):
    """A DMA point's DRAM address: its own 1 MiB slot (rows not left open by another point, as
    for a DMA of fresh operands), plus the point's offset."""
    return DMA_BASE + (zlib.crc32(pt["name"].encode()) % 4096 << 20) + pt["offset"]


def _bad_index_list(n):
    return list(range(n - 1)) + [n]                   # the last entry one past the matrix


#: Completion code each rejected point is built to get.
REJECT_STATUS = {"fence": Status.OK, "bad_opcode": Status.BAD_OPCODE,
                 "unsupported": Status.UNSUPPORTED, "gemv_bad_dtype": Status.BAD_FIELD,
                 "gemv_bad_index": Status.BAD_INDEX, "dma_misaligned": Status.MISALIGNED,
                 "dma_sram_range": Status.SRAM_RANGE, "act_bad_format": Status.BAD_FIELD}


def expected_status(pt) -> Status:
    """The completion code a point is built to get."""
    return REJECT_STATUS[pt["what"]] if pt["kind"] == "reject" else Status.OK


def point_fields(pt, config: CoreConfig) -> dict:
    """The measured descriptor's fields (without ``id``) of a point; no side effect."""
    kind = pt["kind"]
    if kind == "gemv":
        op = {"dense": GemvOp.DENSE, "row_gather": GemvOp.ROW_GATHER,
              "col_gather": GemvOp.COL_GATHER}[pt["op"]]
        idx_addr, x_addr, x_pitch, y_addr, y_pitch, _ = _sram_plan(pt, config)
        return {"opcode": Opcode.GEMV, "op": op, "dtype": int(Dtype.parse(pt["dtype"])),
                "batch_minus_one": pt["batch"] - 1, "accumulate": pt["accumulate"],
                "w_base": W_BASE + pt["base"], "n_rows": pt["rows"], "n_cols": pt["cols"],
                "idx_addr": idx_addr, "n_idx": pt["n_idx"], "x_addr": x_addr,
                "x_pitch": x_pitch, "y_addr": y_addr, "y_pitch": y_pitch}
    if kind == "dma":
        return {"opcode": Opcode.DMA, "to_dram": pt["to_dram"], "dram": _dma_address(pt),
                "sram": 0, "n_bytes": pt["n_bytes"]}
    if kind == "act":
        e_in = 4 if pt["in_fmt"] == "fp32" else 2
        n = pt["n"]
        src_b = _round(n * e_in, 32)
        return {"opcode": Opcode[pt["opcode"]], "op": _ACT[pt["op"]], "in_fmt": _FMT[pt["in_fmt"]],
                "out_fmt": _FMT[pt["out_fmt"]], "n": n, "src_a": 0, "src_b": src_b,
                "dst": 2 * src_b, "c": 0, "k": 0x3F800000}
    what = pt["what"]
    if what == "fence":
        return {"opcode": Opcode.FENCE}
    if what == "bad_opcode":
        return {"opcode": 12}
    if what == "unsupported":
        return {"opcode": Opcode.LINK_SEND}
    if what == "gemv_bad_dtype":
        return {"opcode": Opcode.GEMV, "op": 0, "dtype": 3, "batch_minus_one": 0,
                "accumulate": 0, "w_base": W_BASE, "n_rows": 64, "n_cols": 64, "idx_addr": 0,
                "n_idx": 0, "x_addr": 0, "x_pitch": 128, "y_addr": 4096, "y_pitch": 256}
    if what == "gemv_bad_index":
        n = pt["n_idx"]
        x = _round(4 * n, 64)
        return {"opcode": Opcode.GEMV, "op": GemvOp.ROW_GATHER, "dtype": 0, "batch_minus_one": 0,
                "accumulate": 0, "w_base": W_BASE, "n_rows": n, "n_cols": 64, "idx_addr": 0,
                "n_idx": n, "x_addr": x, "x_pitch": 128, "y_addr": x + 128,
                "y_pitch": _round(4 * n, 32)}
    if what == "dma_misaligned":
        return {"opcode": Opcode.DMA, "to_dram": 0, "dram": DMA_BASE + 32, "sram": 0, "n_bytes": 64}
    if what == "dma_sram_range":
        return {"opcode": Opcode.DMA, "to_dram": 0, "dram": DMA_BASE,
                "sram": config.sram_size - 64, "n_bytes": 128}
    if what == "act_bad_format":
        return {"opcode": Opcode.ACT, "op": 1, "in_fmt": 3, "out_fmt": 0, "n": 64, "src_a": 0,
                "src_b": 0, "dst": 4096, "c": 0, "k": 0}
    raise ValueError(f"unknown point {pt!r}")


class _Runner:
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
            idx = _index_list(pt)
        elif pt["kind"] == "reject" and pt["what"] == "gemv_bad_index":
            idx = _bad_index_list(pt["n_idx"])
        else:
            return
        raw = b"".join(i.to_bytes(4, "little") for i in idx)
        self.b.load(STAGE, raw)
        self.dma_in(STAGE, 0, _round(len(raw), 64))

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
        for pt in _run_points(run):
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


def measure_on_rtl(config: CoreConfig, points, with_extras: bool = False) -> tuple:
    """``points`` (of :func:`point_sets`; sequences too) run in this order on one fresh harness
    of ``config``, from reset: (their records, the extras measurement or None)."""
    from ndpdimm.cosim.rtl.harness import RtlBackend
    out, extras = [], None
    with RtlBackend(config, progress=False) as b:
        r = _Runner(b, config)
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
    return _Runner(b, config).sequence(rec["spec"], submit_at=rec["submit_cycle"])


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
        return sum(_cost(p, config) for p in _run_points(pt)) + IDLE_CYCLES + 8000
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


# --- fitting ------------------------------------------------------------------------------

#: Bounds of the fitted parameters (physical ranges, in NDP cycles unless a fraction).
BOUNDS = {"complete": (0, 10), "block_reject": (0, 20), "gemv_fixed": (0, 200),
          "mem_latency": (5, 150), "open_latency": (0, 200), "open_latency_aligned": (0, 200), "gather_latency": (0, 100), "conflict_latency": (0, 300), "group_fixed": (-5, 50),
          "refresh_extra": (-100, 400), "dma_fixed": (0, 300), "dma_write_fixed": (0, 300),
          "dma_round_trip": (0, 200), "dma_open_penalty": (0, 200), "act_fixed": (0, 50),
          "act_pass": (0, 50), "act_reduce": (-10, 30), "act_mixed": (0, 3),
          "stream_efficiency": (0.8, 1.0), "open_penalty": (0.0, 60.0),
          "conflict_penalty": (0.0, 200.0)}


def model_fields(rec) -> dict:
    """A point's descriptor fields as the model backend hands them to the model: a row
    gather's with its index list (``indices``, the list the RTL run loaded; see
    ``PerfModel.gather_spread``)."""
    spec = rec.get("spec", {})
    if spec.get("kind") != "gemv" or spec.get("op") != "row_gather" or not spec.get("n_idx"):
        return rec["fields"]
    return {**rec["fields"], "indices": _point_indices(spec["name"], spec["rows"], spec["n_idx"],
                                                        spec["pattern"])}


@functools.cache
def _point_indices(name, rows, n_idx, pattern) -> tuple:
    return tuple(_index_list({"name": name, "rows": rows, "n_idx": n_idx, "pattern": pattern}))


def _predict(model, rec, use_start=True):
    return model.dispatched(model_fields(rec), Status[rec["status"]],
                            rec["start_cycle"] if use_start else None).cycles


def fit(config: CoreConfig, records: list, *, start: PerfParams = PerfParams(),
        names=FITTED, starts: int = 4, seed: int = 1) -> PerfParams:
    """Least-squares fit of ``names`` to the records' RTL cycles (relative residuals)."""
    import numpy as np
    from scipy.optimize import least_squares
    names = [n for n in names if n in BOUNDS]
    lo = np.array([BOUNDS[n][0] for n in names], float)
    hi = np.array([BOUNDS[n][1] for n in names], float)
    base = start.as_dict()
    targets = np.array([float(r["rtl_cycles"]) for r in records])
    model = PerfModel(config, start)

    def residuals(x):
        model.params = PerfParams(**{**base, **dict(zip(names, x))})
        pred = np.array([_predict(model, r) for r in records])
        return (pred - targets) / np.maximum(targets, 1.0)

    rng = random.Random(seed)
    x0 = np.clip(np.array([base[n] for n in names], float), lo, hi)
    best = None
    for k in range(starts):
        x = x0 if k == 0 else lo + np.array([rng.random() for _ in names]) * (hi - lo)
        r = least_squares(residuals, x, bounds=(lo, hi), method="trf", x_scale="jac",
                          diff_step=1e-3, max_nfev=400 * len(names))
        if best is None or r.cost < best.cost:
            best = r
    return PerfParams(**{**base, **dict(zip(names, (float(v) for v in best.x)))})


def _bench_points(bench_path):
    """(config, points without host traffic) of the 256-unit bandwidth bench, or None."""
    bench_path = Path(bench_path)
    if not bench_path.exists():
        return None
    bench = json.loads(bench_path.read_text())
    design = bench["design"]
    config = CoreConfig(n_units=design["n_units"], ring_beats=design["ring_beats"])
    return config, [p for p in bench["points"] if not p.get("host_requests")]


def _bench_fields(p):
    op = ("dense", "row_gather", "col_gather").index(p["op"])
    return {"opcode": Opcode.GEMV, "op": op, "dtype": int(Dtype.parse(p["dtype"])),
            "batch_minus_one": p["batch"] - 1, "accumulate": 0, "w_base": 0,
            "n_rows": p["rows"], "n_cols": p["cols"], "idx_addr": 0, "n_idx": p["selected"] or 0,
            "x_addr": 0, "x_pitch": 0, "y_addr": 0, "y_pitch": 0}


def _bench_rows(model, pts):
    rows = []
    for p in pts:
        m = model.descriptor_cycles(_bench_fields(p), Status.OK)
        rows.append({"name": p["name"], "rtl_cycles": p["cycles"], "model_cycles": m,
                     "error_pct": 100 * (m / p["cycles"] - 1)})
    return rows


def bench_comparison(params: PerfParams, bench_path=BENCH_256) -> list:
    """The model with ``params`` against the 256-unit bandwidth bench's points (``[]`` without
    the file). The bench's index lists are not in its file: a gather is modelled from its
    count alone, as the random and clustered points of one count are the same descriptor."""
    bench = _bench_points(bench_path)
    return _bench_rows(PerfModel(bench[0], params), bench[1]) if bench else []


#: The DRAM-bound parameters the bandwidth bench fixes for a core that never reaches that path
#: (the bench's shapes have no bank conflicts, so ``conflict_penalty`` keeps its value).
BENCH_FITTED = ("stream_efficiency", "open_penalty")


def fit_dram_bound(params: PerfParams, bench_path=BENCH_256):
    """Fit :data:`BENCH_FITTED` to the 256-unit bandwidth bench; (params, per-point comparison)
    - unchanged params and ``[]`` if the bench file is missing."""
    bench = _bench_points(bench_path)
    if bench is None:
        return params, []
    import numpy as np
    from scipy.optimize import least_squares
    config, pts = bench

    model = PerfModel(config, params)
    target = np.array([float(p["cycles"]) for p in pts])

    def res(x):
        model.params = params.replace(**dict(zip(BENCH_FITTED, map(float, x))))
        return np.array([model.cost(_bench_fields(p), Status.OK, None).cycles for p in pts]) / target - 1

    if not pts:
        return params, []
    lo, hi = zip(*(BOUNDS[n] for n in BENCH_FITTED))
    r = least_squares(res, [getattr(params, n) for n in BENCH_FITTED], bounds=(lo, hi))
    params = params.replace(**dict(zip(BENCH_FITTED, map(float, r.x))))
    model.params = params
    return params, _bench_rows(model, pts)


def measured_params(params: PerfParams, records: list, extras: dict | None) -> PerfParams:
    """Parameters measured directly: dispatch gap, host latencies, busy-counter offsets."""
    import statistics
    upd = {}
    if extras:
        if extras.get("gap_samples"):
            upd["gap"] = float(statistics.median(extras["gap_samples"]))
        for k in ("host_read", "host_write"):
            if extras.get(k):
                upd[k] = float(statistics.median(extras[k]))
    for key, opcodes, counter in (("gemv_busy_offset", (Opcode.GEMV,), "GEMV_BUSY_CYCLES"),
                                  ("act_busy_offset", (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE),
                                   "ACT_BUSY_CYCLES"),
                                  ("dma_busy_offset", (Opcode.DMA,), "DMA_BUSY_CYCLES")):
        vals = [r["rtl_cycles"] - r["rtl_counters"][counter] for r in records
                if r["status"] == "OK" and r["fields"]["opcode"] in opcodes
                and r["rtl_counters"][counter] > 0]
        if vals:
            upd[key] = float(statistics.median(vals))
    return params.replace(**upd)


def sequence_params(params: PerfParams, recs: list) -> PerfParams:
    """Host latencies measured directly from the calibration ``host`` runs, per policy: the
    mean latency of the accesses made while a GEMV ran (``host_busy_<policy>``, hundreds of
    accesses), the median of those made while a DMA ran (``host_busy_dma_<policy>``: a few
    accesses per run, and under ndp_first one can wait for the rest of the transfer, an
    outlier a mean of so few would follow)."""
    import statistics
    upd = {}
    for pol in POLICIES:
        for prefix, kind, stat in (("host_busy", "gemv", statistics.fmean),
                                   ("host_busy_dma", "dma", statistics.median)):
            lat = [t for r in recs if r["spec"]["kind"] == "host" and r["spec"]["policy"] == pol
                   and r["spec"]["point"]["kind"] == kind for t in r["host_latencies"]]
            if lat:
                upd[f"{prefix}_{pol}"] = float(stat(lat))
    return params.replace(**upd)


def _fit_replayed(config: CoreConfig, params: PerfParams, bounds: dict, runs: list,
                  residuals, points: tuple = ()) -> PerfParams:
    """Least squares of the parameters in ``bounds`` (name -> (lo, hi)), each evaluation
    replaying ``runs`` on the model backend; ``residuals(rtl_record, model_record)`` gives
    each run's relative residuals. ``points``: single-descriptor records whose relative
    residuals join them (records the same parameters also time)."""
    if not runs:
        return params
    import numpy as np
    from scipy.optimize import least_squares
    names = list(bounds)

    def res(x):
        model = PerfModel(config, params.replace(**dict(zip(names, map(float, x)))))
        return np.array([e for r in runs
                         for e in residuals(r, replay_sequence(model, config, r))] +
                        [_predict(model, p) / p["rtl_cycles"] - 1 for p in points])

    lo = [bounds[n][0] for n in names]
    hi = [bounds[n][1] for n in names]
    x0 = np.clip([getattr(params, n) for n in names], lo, hi)
    r = least_squares(res, x0, bounds=(lo, hi), diff_step=1e-2)
    return params.replace(**dict(zip(names, map(float, r.x))))


#: Host slowdown parameters fitted to the calibration GEMV host runs (replayed).
HOST_FITTED = {**{f"host_slow_{p}": (0, 2000) for p in POLICIES}, "host_slow_span": (50, 2000)}


def fit_host(config: CoreConfig, params: PerfParams, recs: list) -> PerfParams:
    """Least squares of :data:`HOST_FITTED` to the descriptor cycles of the calibration host
    runs over GEMVs, replayed on the model backend at the RTL's cycles; the residual is the
    cycles the traffic added (model vs RTL, each against its own run of the descriptor alone)
    over the RTL's cycles alone."""
    runs = [r for r in recs if r["spec"]["kind"] == "host" and r["spec"]["point"]["kind"] == "gemv"]
    return _fit_replayed(config, params, HOST_FITTED, runs, lambda r, m: [
        ((m["cycles"] - m["alone_cycles"]) - (r["cycles"] - r["alone_cycles"])) / r["alone_cycles"]])


#: Parameters fitted to the calibration ``debt`` runs (replayed on the model backend).
#: ``refresh_lead`` is measured (``PerfParams``): the debt runs' probes fix only
#: ``refresh_idle - refresh_lead``.
DEBT_FITTED = {"refresh_idle": (300, 600)}


def fit_debt(config: CoreConfig, params: PerfParams, recs: list, points: list = ()) -> PerfParams:
    """Least squares of :data:`DEBT_FITTED` to the calibration debt runs (the cycles of the
    DMA a refresh falls due in, and of the probe after it) and the calibration DMA ``points``
    (a DMA dispatched just after a refresh fell due waits for it)."""
    runs = [r for r in recs if r["spec"]["kind"] == "debt"]
    dmas = tuple(p for p in points if p["spec"]["kind"] == "dma" and p["status"] == "OK")
    return _fit_replayed(config, params, DEBT_FITTED, runs, lambda r, m: [
        m["cycles"] / r["cycles"] - 1, m["first_cycles"] / r["first_cycles"] - 1], dmas)


def evaluate_sequences(model: PerfModel, config: CoreConfig, recs: list) -> list:
    """Per sequence: RTL vs model (replayed at the RTL's cycles) for the measured descriptor
    (host runs; the probe of debt runs) and, for host runs, the mean host latency."""
    out = []
    for r in recs:
        m = replay_sequence(model, config, r)
        row = {**r, "model_cycles": m["cycles"],
               "error_pct": 100.0 * (m["cycles"] - r["cycles"]) / r["cycles"]}
        if r["spec"]["kind"] == "host":
            row["model_mean_host_latency"] = m["mean_host_latency"]
            row["model_host_accesses"] = m["host_accesses"]
            if r["mean_host_latency"] and m["mean_host_latency"]:
                row["host_latency_error_pct"] = 100.0 * (m["mean_host_latency"] /
                                                         r["mean_host_latency"] - 1)
        else:
            row["model_first_cycles"] = m["first_cycles"]
            row["first_error_pct"] = 100.0 * (m["first_cycles"] / r["first_cycles"] - 1)
        out.append(row)
    return out


# --- evaluation ---------------------------------------------------------------------------

def error_summary(rows: list, key="error_pct") -> dict:
    errs = [abs(r[key]) for r in rows]
    if not errs:
        return {"n": 0}
    worst = max(rows, key=lambda r: abs(r[key]))
    return {"n": len(errs), "mean_abs_pct": sum(errs) / len(errs), "max_abs_pct": max(errs),
            "max_point": worst["name"]}


def evaluate(model: PerfModel, records: list) -> list:
    """Per point: RTL vs model cycles (with and without the dispatch cycle) and counters."""
    out = []
    for r in records:
        status = Status[r["status"]]
        fields = model_fields(r)
        pred = model.descriptor_cycles(fields, status, r["start_cycle"])
        pred_nostart = model.descriptor_cycles(fields, status)
        rtl = r["rtl_cycles"]
        out.append({**r, "model_cycles": pred, "model_cycles_no_start": pred_nostart,
                    "error_pct": 100.0 * (pred - rtl) / rtl,
                    "error_pct_no_start": 100.0 * (pred_nostart - rtl) / rtl,
                    "model_counters": model.counters(fields, status, r["start_cycle"])})
    return out


def _speed(model: PerfModel, rows: list) -> dict:
    """RTL cycles/s and model predictions/s on the same descriptors, and their ratio."""
    reps = 200
    per_point = []
    t_model_total = 0.0
    for r in rows:
        status = Status[r["status"]]
        t0 = time.perf_counter()
        for _ in range(reps):
            model.descriptor_cycles(model_fields(r), status, r["start_cycle"])
        t = (time.perf_counter() - t0) / reps
        t_model_total += t
        per_point.append((r["rtl_wall_s"] / t if t else math.inf, r["name"], r["rtl_cycles"]))
    big = [p for p in per_point if p[2] >= 1000]
    rtl_wall = sum(r["rtl_wall_s"] for r in rows)
    rtl_cycles = sum(r["rtl_sim_cycles"] for r in rows)
    worst = min(big) if big else min(per_point)
    return {"rtl_wall_s": rtl_wall, "rtl_sim_cycles": rtl_cycles,
            "rtl_cycles_per_s": rtl_cycles / rtl_wall if rtl_wall else None,
            "model_wall_s": t_model_total,
            "model_predictions_per_s": len(rows) / t_model_total if t_model_total else None,
            "model_cycles_per_s": sum(r["rtl_cycles"] for r in rows) / t_model_total,
            "speed_ratio_total": rtl_wall / t_model_total if t_model_total else None,
            "speed_ratio_min_point": worst[0], "speed_ratio_min_point_name": worst[1],
            "note": "per point: RTL wall time of submit+run of the one descriptor over the "
                    "model's time for one descriptor_cycles call; min over points of >= 1000 cycles"}


def calibrate(config: CoreConfig, *, jobs: int = 1, out=None, refit=None, progress=True,
              command=None, runner=None, resume: bool = True, log=print) -> dict:
    """The whole procedure (module docstring); returns the record written to ``out``."""
    sets = point_sets(config)
    t_start = time.perf_counter()
    if refit is not None:
        old = json.loads(Path(refit).read_text())
        if old.get("config") != config.as_dict():
            raise ValueError(f"{refit} holds RTL runs of {old.get('config_key', old.get('config'))}, "
                             f"not of {config_key(config)}: give the same configuration options "
                             "(--units, --max-batch, --sram-size, ...) as the run that made it")
        cal = [r for r in old["points"] if r["set"] == "calibration"]
        held = [r for r in old["points"] if r["set"] == "held_out"]
        extras = old.get("extras")
        seq_recs = [{k: v for k, v in r.items() if not k.startswith("model_") and "error" not in k}
                    for r in old.get("sequences", [])]
        measured = old.get("rtl_measured")
        if not isinstance(measured, dict):      # the file's RTL runs were made by its command
            measured = {k: old.get(k) for k in ("date", "command", "git_commit", "git_dirty")}
        log(f"refitting from {refit}: {len(cal)} calibration, {len(held)} held-out points")
    else:
        pts = sets["calibration"] + sets["held_out"]
        seqs = sequence_runs(config)
        log(f"calibrating {config_key(config)}: {len(sets['calibration'])} calibration + "
            f"{len(sets['held_out'])} held-out points and {len(seqs)} sequences (host traffic, "
            f"refresh debt) on the RTL backend, "
            f"{getattr(runner, 'description', None) or f'{jobs} process(es)'}")
        recs, extras = run_points(config, pts + seqs, jobs=jobs, progress=progress,
                                  runner=runner, store=resume, log=log)
        measured = None
        n_cal = len(sets["calibration"])
        cal, held, seq_recs = recs[:n_cal], recs[n_cal:len(pts)], recs[len(pts):]
        # the RTL runs are the expensive part: keep them before fitting (``--refit`` reads this)
        raw = build_cache_dir("calibration") / f"{config_key(config)}.rtl.json"
        raw.write_text(json.dumps({
            "config": config.as_dict(), "config_key": config_key(config), "extras": extras,
            "points": [{**r, "set": s} for s, rs in (("calibration", cal), ("held_out", held))
                       for r in rs],
            "sequences": seq_recs,
            "rtl_measured": {"date": datetime.datetime.now(datetime.UTC).isoformat(
                timespec="seconds"), "command": command or "ndpdimm calibrate",
                "git_commit": git_commit(), "git_dirty": git_dirty()}}) + "\n")
        log(f"RTL runs saved to {raw} (`--refit` it if the fit fails)")
    params = measured_params(PerfParams(), cal, extras)
    joint = PerfModel(config, params).reaches_dram_bound
    if joint:
        # the calibration points themselves run on the DRAM-bound path: fit its parameters
        # with the rest; the bandwidth bench (another harness, other shapes) is a check only
        params = fit(config, cal, start=params, names=FITTED + DRAM_FITTED)
        bench_rows = bench_comparison(params)
    else:
        params, bench_rows = fit_dram_bound(params)
        params = fit(config, cal, start=params)
    seq_cal = [r for r in seq_recs if r["set"] == "calibration"]
    params = fit_debt(config, sequence_params(params, seq_cal), seq_cal, cal)
    params = fit_host(config, params, seq_cal)
    model = PerfModel(config, params, source="calibration", calibrated=True)
    seq_rows = evaluate_sequences(model, config, seq_recs)
    cal_rows = evaluate(model, cal)
    held_rows = evaluate(model, held)
    for r in cal_rows:
        r["set"] = "calibration"
    for r in held_rows:
        r["set"] = "held_out"
    summary = {
        "calibration": error_summary(cal_rows),
        "held_out": error_summary(held_rows),
        "held_out_without_start_cycle": error_summary(held_rows, "error_pct_no_start"),
        "held_out_gemv": error_summary([r for r in held_rows if r["spec"]["kind"] == "gemv"]),
        "held_out_gemv_and_act": error_summary([r for r in held_rows
                                                if r["spec"]["kind"] in ("gemv", "act")]),
        "held_out_act": error_summary([r for r in held_rows if r["spec"]["kind"] == "act"]),
        "held_out_dma": error_summary([r for r in held_rows if r["spec"]["kind"] == "dma"]),
        "held_out_ok_ops": error_summary([r for r in held_rows if r["status"] == "OK"]),
        "bench_256_units": error_summary(bench_rows) if bench_rows else None,
    }
    for set_ in ("calibration", "held_out"):
        rows = [r for r in seq_rows if r["set"] == set_]
        summary[f"sequences_{set_}_host_cycles"] = error_summary(
            [r for r in rows if r["spec"]["kind"] == "host"])
        summary[f"sequences_{set_}_host_latency"] = error_summary(
            [r for r in rows if "host_latency_error_pct" in r], "host_latency_error_pct")
        summary[f"sequences_{set_}_debt_probe"] = error_summary(
            [r for r in rows if r["spec"]["kind"] == "debt"])
    record = {
        "what": "performance-model calibration against the RTL backend (cosim/model/calibrate.py)",
        "config": config.as_dict(), "config_key": config_key(config),
        "git_commit": git_commit(), "git_dirty": git_dirty(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": command or "ndpdimm calibrate",
        "rtl_measured": measured or "by this command",
        "params": params.as_dict(), "fitted": list(FITTED + (DRAM_FITTED if joint else ())),
        "dram_bound_source": ("calibration points (fitted with the rest)" if joint else
                              str(BENCH_256.relative_to(REPO)) if bench_rows else None),
        "summary": summary, "speed": _speed(model, held_rows + cal_rows),
        "extras": extras, "bench_256_units": bench_rows,
        "points": cal_rows + held_rows, "sequences": seq_rows,
        "wall_s": time.perf_counter() - t_start,
    }
    out = Path(out) if out is not None else calibration_path(config)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=1) + "\n")
    log(report(record))
    log(f"wrote {out}")
    return record


def add_held_out_streams(record: dict, block: dict, path) -> None:
    """Store a ``held_out_streams`` block (``sw/sampling/streams.py``) in ``record`` and its
    file ``path``; its summary also under ``summary.held_out_streams``."""
    record["held_out_streams"] = block
    record["summary"]["held_out_streams"] = block["summary"]
    Path(path).write_text(json.dumps(record, indent=1) + "\n")


def load_record(config: CoreConfig, path=None) -> tuple[dict, Path]:
    """The calibration record of ``config`` (``path`` or the configuration's file) and its path;
    ``ValueError`` naming the file if it is missing or of another configuration."""
    path = Path(path) if path is not None else calibration_path(config)
    if not path.exists():
        raise ValueError(f"{path}: no calibration of {config_key(config)} to add streams "
                                "to (run `ndpdimm calibrate` with the same options first)")
    record = json.loads(path.read_text())
    if record.get("config") != config.as_dict():
        raise ValueError(f"{path} calibrates {record.get('config_key')}, not {config_key(config)}")
    return record, path


def report(record: dict) -> str:
    s, sp = record["summary"], record["speed"]
    lines = [f"performance model {record['config_key']}:"]
    for key, label in (("calibration", "calibration"), ("held_out", "held-out"),
                       ("held_out_without_start_cycle", "held-out, no start cycle"),
                       ("held_out_gemv", "held-out GEMV"),
                       ("held_out_gemv_and_act", "held-out GEMV + activation"),
                       ("held_out_act", "held-out activation"),
                       ("held_out_dma", "held-out DMA"), ("bench_256_units", "256-unit bench"),
                       ("sequences_calibration_host_cycles", "host traffic: cycles (cal)"),
                       ("sequences_held_out_host_cycles", "host traffic: cycles"),
                       ("sequences_held_out_host_latency", "host traffic: host latency"),
                       ("sequences_calibration_debt_probe", "refresh debt: probe (cal)"),
                       ("sequences_held_out_debt_probe", "refresh debt: probe")):
        v = s.get(key)
        if v and v.get("n"):
            lines.append(f"  {label:26s} {v['n']:3d} points: mean |error| {v['mean_abs_pct']:.2f} %, "
                         f"max {v['max_abs_pct']:.2f} % ({v['max_point']})")
    st = s.get("held_out_streams")
    if st and st.get("streams"):
        lines.append(f"  held-out scenario streams  {st['streams']:3d} streams, "
                     f"{st['descriptors']} descriptors: total {st['total_error_pct']:+.2f} %, "
                     f"per stream mean |error| {st['stream_mean_abs_total_error_pct']:.2f} % "
                     f"(max {st['stream_max_abs_total_error_pct']:.2f} %, {st['stream_max_point']}), "
                     f"per descriptor mean |error| {st['descriptor_mean_abs_error_pct']:.2f} %"
                     f"{'' if st['all_bit_exact'] else ', RESULTS DIFFER FROM THE GOLDEN MODEL'}")
    lines.append(f"  RTL {sp['rtl_cycles_per_s']:.0f} cycles/s; model "
                 f"{sp['model_predictions_per_s']:.0f} descriptors/s; speed ratio "
                 f"{sp['speed_ratio_total']:.0f}x overall, min {sp['speed_ratio_min_point']:.0f}x "
                 f"({sp['speed_ratio_min_point_name']})")
    return "\n".join(lines)


def held_out_table(record: dict) -> str:
    """The held-out points of a calibration record as a Markdown table (docs/perf_model.md)."""
    lines = ["| held-out point | status | RTL cycles | model cycles | error |", "|---|---|---|---|---|"]
    for p in record["points"]:
        if p["set"] == "held_out":
            lines.append(f"| `{p['name']}` | {p['status']} | {p['rtl_cycles']:,} | "
                         f"{p['model_cycles']:,} | {p['error_pct']:+.2f} % |")
    return "\n".join(lines)


# --- command line -------------------------------------------------------------------------

_positive = positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ndpdimm calibrate`` (the core's build parameters, jobs, output)."""
    d = CoreConfig()
    parser.add_argument("--units", type=_positive, default=d.n_units,
                        help=f"GEMV units (default {d.n_units})")
    parser.add_argument("--max-batch", type=_positive, default=d.max_batch)
    parser.add_argument("--radix-bits", type=_positive, default=d.radix_bits)
    parser.add_argument("--ring-beats", type=_positive, default=d.ring_beats)
    parser.add_argument("--sram-size", type=_positive, default=d.sram_size, help="SRAM bytes")
    parser.add_argument("--sram-banks", type=_positive, default=d.sram_banks)
    parser.add_argument("--act-lanes", type=_positive, default=d.act_lanes)
    parser.add_argument("--dram-config", default=None, help="DRAM TOML (default DDR4-3200)")
    parser.add_argument("--jobs", type=_positive, default=min(2, os.cpu_count() or 1),
                        help="RTL simulator processes in parallel, as a Dask LocalCluster of that "
                             "many workers when more than 1 (default: min(2, CPUs))")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="shard the RTL points over this Dask scheduler's workers instead")
    parser.add_argument("--streams", type=int, default=0, metavar="PER_KIND",
                        help="after the fit, check the model on held-out back-to-back descriptor "
                             "streams drawn from a Hermes and a TriMoE run's own kernels, this "
                             "many per kernel kind (sw/sampling/streams.py; default 0: none)")
    parser.add_argument("--stream-seed", type=int, default=0,
                        help="seed of the streams' draw and data (default 0)")
    parser.add_argument("--streams-only", action="store_true",
                        help="no RTL points, no fit: run --streams against the existing "
                             "calibration file (--out or the configuration's) and add them to it")
    parser.add_argument("--fresh", action="store_true",
                        help="measure every point again instead of resuming from the points an "
                             "earlier run of the same configuration and RTL build saved")
    parser.add_argument("--out", default=None,
                        help="parameter file (default cosim/model/calibration/<config key>.json)")
    parser.add_argument("--refit", default=None, metavar="FILE",
                        help="refit from the RTL points stored in FILE instead of running the RTL")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def config_from_args(args) -> CoreConfig:
    return CoreConfig(n_units=args.units, max_batch=args.max_batch, radix_bits=args.radix_bits,
                      ring_beats=args.ring_beats, sram_size=args.sram_size,
                      sram_banks=args.sram_banks, act_lanes=args.act_lanes,
                      dram_config=args.dram_config)


def run(args, runner=None) -> dict:
    """Run ``ndpdimm calibrate`` with parsed ``args`` (from :func:`add_arguments`); ``runner``
    (see :func:`run_points`) shards the RTL points, the CLI's runs on Dask."""
    config = config_from_args(args)
    d = CoreConfig()
    opts = [f"--{flag} {getattr(config, name)}" for flag, name in (
        ("units", "n_units"), ("max-batch", "max_batch"), ("radix-bits", "radix_bits"),
        ("ring-beats", "ring_beats"), ("sram-size", "sram_size"), ("sram-banks", "sram_banks"),
        ("act-lanes", "act_lanes")) if getattr(config, name) != getattr(d, name)]
    if config.dram_config:
        opts.append(f"--dram-config {config.dram_config}")
    opts.append(f"--refit {args.refit}" if args.refit else f"--jobs {args.jobs}")
    if args.scheduler and not args.refit:
        opts.append(f"--scheduler {args.scheduler}")
    return calibrate(config, jobs=args.jobs, out=args.out, refit=args.refit,
                     progress=not args.quiet, command=" ".join(["ndpdimm calibrate", *opts]),
                     runner=runner, resume=not args.fresh)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m ndpdimm.cosim.model.calibrate",
                                description="calibrate the performance model against the RTL")
    add_arguments(p)
    args = p.parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
