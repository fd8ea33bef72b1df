"""The calibration's point catalogue: what runs, and the descriptor each point is.

* the two fixed, disjoint sets of single-descriptor points (:func:`point_sets`): the
  calibration set and the held-out set (other shapes, and whole families the fit never sees);
  a point that does not fit a configuration (:func:`fits`: SRAM size, batch limit) is dropped
  for it;
* the multi-call runs single points cannot show (:func:`sequence_runs`: host traffic under
  each ``POLICY``, refresh debt), and the points each one runs (:func:`sequence_points`);
* where a point's operands lie (the DRAM window, weights, staging area, DMA slots; the SRAM
  plan of a GEMV), its index list (:func:`index_list`, seeded by its name), the completion
  code it is built to get (:func:`expected_status`) and its descriptor's fields
  (:func:`point_fields`; :func:`model_fields` as the model backend hands them to the model).

Pure data: nothing here runs a backend (``measure.py`` does). Cycle behaviour: none.
"""

import functools
import random
import zlib

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.controller import POLICIES as DRAM_POLICIES
from ndpdimm.hw.memory.port import Status

__all__ = ["WINDOW", "W_BASE", "STAGE", "DMA_BASE", "IDLE_CYCLES", "POLICIES", "REJECT_STATUS",
           "round_up", "point_sets", "sequence_runs", "sequence_points", "fits", "index_list",
           "bad_index_list", "expected_status", "point_fields", "model_fields"]

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


def round_up(n, k):
    """``n`` rounded up to a multiple of ``k``."""
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
    return [r for r in runs if all(fits(p, config) for p in sequence_points(r))]


def sequence_points(run) -> list:
    """The single points a :func:`sequence_runs` entry runs: a host run's descriptor, a debt
    run's first DMA and its probe."""
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
    x_addr = round_up(idx_bytes, 64)
    x_pitch = round_up(x_len, 32)
    y_addr = round_up(x_addr + B * x_pitch, 64)
    y_pitch = round_up(4 * n_out, 32)
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
        return round_up(pt["n"] * e_in, 32) * 2 + round_up(pt["n"] * e_out, 32) <= S
    if pt["kind"] == "reject" and pt["what"] == "gemv_bad_index":
        return round_up(4 * pt["n_idx"], 64) + 64 <= S
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


# --- operands and descriptor fields ---------------------------------------------------------

def index_list(pt) -> list:
    """The sorted row indices of a gather point (``n_idx`` of ``rows``, random or in runs of
    32), seeded by the point's name: the RTL run loads them and the model reads them."""
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


def bad_index_list(n) -> list:
    """The index list of a ``gemv_bad_index`` point: ``n`` entries, the last one past the matrix."""
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
        src_b = round_up(n * e_in, 32)
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
        x = round_up(4 * n, 64)
        return {"opcode": Opcode.GEMV, "op": GemvOp.ROW_GATHER, "dtype": 0, "batch_minus_one": 0,
                "accumulate": 0, "w_base": W_BASE, "n_rows": n, "n_cols": 64, "idx_addr": 0,
                "n_idx": n, "x_addr": x, "x_pitch": 128, "y_addr": x + 128,
                "y_pitch": round_up(4 * n, 32)}
    if what == "dma_misaligned":
        return {"opcode": Opcode.DMA, "to_dram": 0, "dram": DMA_BASE + 32, "sram": 0, "n_bytes": 64}
    if what == "dma_sram_range":
        return {"opcode": Opcode.DMA, "to_dram": 0, "dram": DMA_BASE,
                "sram": config.sram_size - 64, "n_bytes": 128}
    if what == "act_bad_format":
        return {"opcode": Opcode.ACT, "op": 1, "in_fmt": 3, "out_fmt": 0, "n": 64, "src_a": 0,
                "src_b": 0, "dst": 4096, "c": 0, "k": 0}
    raise ValueError(f"unknown point {pt!r}")


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
    return tuple(index_list({"name": name, "rows": rows, "n_idx": n_idx, "pattern": pattern}))

