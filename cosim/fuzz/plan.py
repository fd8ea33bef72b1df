"""The backend-independent half of the descriptor fuzzer and of the constrained-random core benches.

What a descriptor-stream bench decides without touching a simulator lives here, so that the
cocotb benches (``cosim/rtl/benches/random_traffic.py``) and the fuzzer on the C++ harness
(``cosim/fuzz/harness.py``) draw, predict and check the same way:

* :class:`DescriptorPlanner` - the bench's Python reference of the core (``CoreModel``,
  ``cosim/golden/core.py``) plus DRAM area allocation, random GEMV jobs staged in DRAM (weights
  in the streamer layout, X with random pitch padding, index lists, optionally a bad entry),
  disjoint SRAM placement, descriptor words with fresh ids, each descriptor's predicted
  completion (:class:`Desc`: code and DRAM bytes) and the in-order completion check;
* :class:`DescriptorMutator` - valid GEMV / DMA / activation descriptors with 1-3 fields
  mutated to edge values (0, 1, field maximum, window edges, exactly at / one byte / one burst
  past each end of the window and of the SRAM, zero length, wrap-around of the 64-bit address
  space), header-only ones (FENCE, undefined and DIMM-Link opcodes), and the schedule of a fuzz
  run (:meth:`DescriptorMutator.schedule`): which descriptors run alone, which in batches of
  rejected ones, when the bases are re-staged and when the memories are compared.

A host class mixes :class:`DescriptorPlanner` in and provides ``rng`` (a seeded
``random.Random``), ``shape`` (``EngineShape``), ``next_id`` and ``load(addr, data)`` (a host
write into DRAM that also updates the reference's mirror); it calls :meth:`init_planner` once.
No simulator, no cycles: everything here is plain Python and runs in any process.
"""

from collections import Counter
from dataclasses import dataclass

import numpy as np
import torch

from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import OPS, GemvJob
from ndpdimm.cosim.golden import act_program
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.golden.core import ACT_OPCODES, LINK_OPCODES, UNDEFINED_OPCODES, CoreModel
from ndpdimm.hw.activation.sequencer import ACT_UNARY_OPS
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status

__all__ = ["WINDOW", "WIN_LO", "WIN_HI", "W_AREA", "STAGE_AREA", "OUT_AREA", "DUMP_ADDR", "MARKER_ADDR",
           "HOST_REGION", "HOST_BURSTS", "MASK64", "QUEUE_DEPTH", "F32_SPECIALS", "Desc", "Bump",
           "DescriptorPlanner", "DescriptorMutator", "expected_status", "random_act_fields", "round_up"]

#: The benches' protection window: every DRAM area below lies inside it.
WINDOW = (1 << 20, 1 << 26)

QUEUE_DEPTH = 8                          # NdpCore's default desc_queue (and cq_depth)

WIN_LO, WIN_HI = WINDOW
W_AREA = (2 << 20, 14 << 20)             # weights (bump allocated)
STAGE_AREA = (16 << 20, 28 << 20)        # X, index lists, prior Y, random DMA sources
OUT_AREA = (32 << 20, 44 << 20)          # DMA'd results and random DMA targets
DUMP_ADDR = 48 << 20                     # whole-SRAM dumps
MARKER_ADDR = 52 << 20                   # SRAM marker pattern source
HOST_REGION = 1 << 28                    # host pass-through traffic: outside the NDP window
HOST_BURSTS = 256
MASK64 = (1 << 64) - 1


#: binary32 constants (c, k) of activation descriptors: 0, 1, 2, -0.5, 0.125, 3
ACT_CONSTANTS = (0x00000000, 0x3F800000, 0x40000000, 0xBF000000, 0x3E000000, 0x40400000)
ACT_MUTABLE = ("op", "in_fmt", "out_fmt", "n", "src_a", "src_b", "dst", "c", "k")


def random_act_fields(tb, rng) -> dict:
    """A valid ACT / ELTWISE / SOFTMAX on random SRAM areas: the operands are whatever the SRAM
    holds (marker patterns, NaNs, earlier results), which the golden model takes bit for bit."""
    opcode = rng.choice([Opcode.ACT, Opcode.ACT, Opcode.ACT, Opcode.ELTWISE, Opcode.SOFTMAX])
    op = {Opcode.ACT: lambda: rng.choice(ACT_UNARY_OPS),
          Opcode.ELTWISE: lambda: rng.choice([ActOp.ADD, ActOp.MUL]),
          Opcode.SOFTMAX: lambda: 0}[opcode]()
    in_fmt, out_fmt = rng.randrange(3), rng.randrange(3)
    n = rng.choice([1, 15, 16, 17, rng.randint(1, 400)])
    ei, eo = act_program.elem_bytes(in_fmt), act_program.elem_bytes(out_fmt)
    red = opcode == Opcode.ACT and op in (ActOp.MAX, ActOp.SUMEXP)
    in_b, out_b = n * ei, eo if red else n * eo
    elt = opcode == Opcode.ELTWISE
    if rng.random() < 0.25 and eo <= ei:
        a, b = tb.place([in_b, in_b if elt else 0])
        dst = a                                        # in place
    else:
        a, b, dst = tb.place([in_b, in_b if elt else 0, out_b])
    return {"opcode": int(opcode), "op": int(op), "in_fmt": in_fmt, "out_fmt": out_fmt, "n": n,
            "src_a": a, "src_b": b, "dst": dst, "c": rng.choice(ACT_CONSTANTS),
            "k": rng.choice(ACT_CONSTANTS)}


#: float32 patterns mixed into prior Y values for accumulate (+-0, subnormals, Inf, q/sNaN)
F32_SPECIALS = [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x7F800000, 0xFF800000,
                0x7FC00000, 0x7FA00000, 0xFFC00001, 0x3F800000, 0xBF800000]


def round_up(n, k):
    """``n`` rounded up to a multiple of ``k``."""
    return -(-n // k) * k


def _rows_overlap(a, b):
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


@dataclass
class Desc:
    word: int                      # the 256-bit descriptor
    fields: dict                   # decoded with the layout of its opcode
    want: Status                   # predicted completion code
    want_bytes: int                # predicted CQ_DRAM_BYTES
    note: str = ""
    on_complete: object = None     # async callable, run when its completion has been checked
    y: object = None               # GEMV: results the model computed (uint32 [B, n_out])

    @property
    def id(self):
        return self.fields["id"]

    @property
    def opcode(self):
        return self.fields["opcode"]


def expected_status(fields, model: CoreModel) -> Status:
    """Predicted completion code of a descriptor (decoded ``fields``): see ``CoreModel``."""
    return model.expected_status(fields)


class Bump:
    """Bump allocator over a DRAM area (wraps around)."""

    def __init__(self, lo, hi):
        self.lo, self.hi, self.next = lo, hi, lo

    def take(self, n, align=64):
        n = round_up(max(n, 1), align)
        a = round_up(self.next, align)
        if a + n > self.hi:
            a = self.lo
        self.next = a + n
        return a



class DescriptorPlanner:
    """Reference model, DRAM areas, GEMV job staging and descriptor predictions (a mixin: see
    the module docstring for what the host class provides)."""

    def init_planner(self, ref: CoreModel):
        self.ref = ref
        self.S = ref.S
        self.w_area, self.stage_area, self.out_area = Bump(*W_AREA), Bump(*STAGE_AREA), Bump(*OUT_AREA)
        self.codes = Counter()

    def evaluate(self, word, note="") -> Desc:
        """A descriptor with its predicted completion (the model is not changed)."""
        f = self.ref.decode(word)
        want = self.ref.expected_status(f)
        return Desc(word, f, want, self.ref.completion_bytes(f, want), note)

    def commit(self, d: Desc) -> Desc:
        """Apply a descriptor to the model (in queue order); nothing happens for a rejected one."""
        if d.want == Status.OK:
            d.y = self.ref.apply(d.fields)
        self.codes[d.want.name] += 1
        return d

    def new_id(self):
        i = self.next_id & 0xFFF
        self.next_id += 1
        return i

    def word(self, layout_op, fields) -> int:
        return self.ref.encode(layout_op, {**fields, "id": self.new_id()})

    def random_word(self, opcode) -> int:
        """Random 256 bits with ``opcode`` and a fresh id (a header-only descriptor)."""
        return (self.rng.getrandbits(256) & ~0xFFFF) | (self.new_id() << 4) | opcode

    def dma_fields(self, to_dram, dram, sram, n):
        return {"opcode": Opcode.DMA, "to_dram": to_dram, "dram": dram, "sram": sram, "n_bytes": n}

    @staticmethod
    def check(c, d: Desc):
        """A completion against its descriptor's prediction (in queue order)."""
        got = (c["id"], c["opcode"], c["code"], c["dram_bytes"])
        want = (d.id, d.opcode, int(d.want), d.want_bytes)
        if got != want:
            try:
                code = Status(c["code"]).name
            except ValueError:
                code = str(c["code"])
            raise AssertionError(
                f"completion (id {c['id']}, opcode {c['opcode']}, {code}, {c['dram_bytes']} DRAM bytes) "
                f"!= expected (id {d.id}, opcode {d.opcode}, {d.want.name}, {d.want_bytes} bytes) "
                f"for {d.note or 'descriptor'} {d.fields}")


    def load_markers(self) -> dict:
        """Marker patterns into the DRAM areas the benches use and a random SRAM image at
        ``MARKER_ADDR``; returns the fields of the DMA that copies it into the whole SRAM."""
        self.load(MARKER_ADDR, self.rng.randbytes(self.S))
        for a in (WIN_LO - 8192, WIN_HI - 8192, OUT_AREA[0], STAGE_AREA[0]):
            self.load(a, self.rng.randbytes(16384))
        return self.dma_fields(0, MARKER_ADDR, 0, self.S)

    def sram_difference(self, got: bytes) -> str:
        """'' if ``got`` (the whole SRAM, read out) equals the model's image, else where it differs."""
        if got == bytes(self.ref.sram):
            return ""
        off = next(i for i in range(self.S) if got[i] != self.ref.sram[i])
        return (f"SRAM at {off:#x}: {got[off:off + 16].hex()} expected "
                f"{bytes(self.ref.sram[off:off + 16]).hex()}")

    def random_job(self, op=None, small=False):
        rng = self.rng
        op = op or rng.choice(OPS)
        dtype = rng.choice(list(Dtype))
        B = rng.randint(1, self.shape.max_batch)
        share = rng.choice([0.0, 0.0, 0.05])
        idx = None
        if op == "col_gather":
            J, N = rng.randint(1, 24 if small else 32), rng.randint(1, 70 if small else 140)
            W = random_values((J, N), dtype, rng, share)
            X = random_values((B, J), dtype, rng, share)
            n = rng.randint(1, 12 if small else 24)
            idx = [rng.randrange(J) for _ in range(n)] if rng.random() < 0.5 else \
                rng.sample(range(J), min(n, J))
        else:
            N, K = rng.randint(1, 16 if small else 24), rng.randint(1, 48 if small else 90)
            W = random_values((N, K), dtype, rng, share)
            X = random_values((B, K), dtype, rng, share)
            if op == "row_gather":
                n = rng.randint(1, 20)
                idx = [rng.randrange(N) for _ in range(n)] if rng.random() < 0.5 else \
                    rng.sample(range(N), min(n, N))
        return GemvJob(op, dtype, W, X, None if idx is None else torch.tensor(idx, dtype=torch.int64),
                       self.shape)

    def place(self, sizes, align=32):
        """Disjoint random SRAM regions of the given sizes."""
        for _ in range(1000):
            addrs = [align * self.rng.randrange((self.S - n) // align + 1) for n in sizes]
            spans = [(a, a + n) for a, n in zip(addrs, sizes) if n]
            if all(not (x0 < y1 and y0 < x1) for i, (x0, x1) in enumerate(spans)
                   for (y0, y1) in spans[i + 1:]):
                return addrs
        raise AssertionError(f"cannot place regions {sizes} in the SRAM")

    def stage_job(self, job, bad_index=None):
        """Weights, X (random pitch padding) and the index list into DRAM; SRAM placement.
        Returns the GEMV fields and the DMA-in fields (X, index list)."""
        rng = self.rng
        e = job.dtype.info.elem_bits // 8
        B = job.batch
        w_img = weight_layout.dram_image(job)
        w_base = self.w_area.take(len(w_img))
        self.load(w_base, w_img)
        xb = golden.elem_bits(job.X, job.dtype).numpy().astype(np.uint16 if e == 2 else np.uint8)
        x_row = job.X.shape[1] * e
        x_pitch = round_up(x_row, 16) + 16 * rng.choice([0, 0, 1, 2])
        x_img = bytearray(rng.randbytes(B * x_pitch))          # padding: random (NaN patterns too)
        for b in range(B):
            x_img[b * x_pitch:b * x_pitch + x_row] = xb[b].tobytes()
        n_idx = 0 if job.idx is None else len(job.idx)
        idx_img = weight_layout.index_bytes(job.idx)
        if bad_index is not None:
            pos = n_idx - 1 if bad_index == "last" else rng.randrange(n_idx)
            limit = job.W.shape[0]
            bad = rng.choice([limit, limit + 1, limit + rng.randrange(1 << 20), 0xFFFFFFFF])
            idx_img = bytearray(idx_img)
            idx_img[4 * pos:4 * pos + 4] = bad.to_bytes(4, "little")
            idx_img = bytes(idx_img)
        y_pitch = round_up(job.n_out * 4, 32) + 32 * rng.choice([0, 0, 1])
        xr, ir, yr = round_up(B * x_pitch, 64), round_up(len(idx_img), 64), round_up(B * y_pitch, 64)
        x_sram, idx_sram, y_sram = self.place([xr, ir, yr])
        x_stage = self.stage_area.take(xr)
        self.load(x_stage, bytes(x_img))
        dmas = [self.dma_fields(0, x_stage, x_sram, xr)]
        if n_idx:
            idx_stage = self.stage_area.take(ir)
            self.load(idx_stage, idx_img)
            dmas.append(self.dma_fields(0, idx_stage, idx_sram, ir))
        op = {"dense": GemvOp.DENSE, "row_gather": GemvOp.ROW_GATHER,
              "col_gather": GemvOp.COL_GATHER}[job.op]
        f = {"opcode": Opcode.GEMV, "op": op, "dtype": int(job.dtype), "batch_minus_one": B - 1,
             "accumulate": 0, "w_base": w_base, "n_rows": job.W.shape[0], "n_cols": job.W.shape[1],
             "idx_addr": idx_sram if n_idx else 0, "n_idx": n_idx, "x_addr": x_sram,
             "x_pitch": x_pitch, "y_addr": y_sram, "y_pitch": y_pitch}
        return f, dmas, yr

    def y_rows(self, image_read, addr, pitch, B, n_out) -> np.ndarray:
        return np.stack([np.frombuffer(image_read(addr + b * pitch, 4 * n_out), dtype="<u4")
                         for b in range(B)]) if n_out else np.zeros((B, 0), np.uint32)

    @staticmethod
    def compare_rows(got, want, what):
        if not (got == want).all():
            bad = np.argwhere(got != want)
            b, i = bad[0]
            raise AssertionError(f"{what}: {len(bad)} results differ from the golden model, first at "
                                 f"batch {b} output {i}: {int(got[b, i]):#010x} vs {int(want[b, i]):#010x}")


# =========================================================================================
# random_descriptor_streams

GEMV_MUTABLE = ("op", "dtype", "batch_minus_one", "accumulate", "w_base", "n_rows", "n_cols",
                "idx_addr", "n_idx", "x_addr", "x_pitch", "y_addr", "y_pitch")
DMA_MUTABLE = ("to_dram", "dram", "sram", "n_bytes")
#: Protection windows the fuzzer switches between (all hold the benches' DRAM areas). One ends
#: past the DIMM: then the weight streamer's and the DMA engine's own capacity checks (after
#: their alignment checks) decide, not the command processor's window check.
FUZZ_WINDOWS = (WINDOW, WINDOW, (0, "capacity"), (WIN_LO, 1 << 40), (64 << 10, (1 << 64) - 64))
#: Most cycles a still-valid fuzzed GEMV may take (estimate): keeps the bench short.
FUZZ_GEMV_CYCLES = 6000




class DescriptorMutator:
    """Fuzzed descriptors drawn against a :class:`DescriptorPlanner` (``tb``)."""

    def __init__(self, tb: DescriptorPlanner):
        self.tb, self.rng = tb, tb.rng
        self.bases = []
        self.stats, self.coverage = Counter(), Counter()

    def restage_steps(self):
        """New base jobs (one per op and a row gather whose last index is bad): yields the
        steps the bench performs in order, ``("window", (lo, hi))`` (move the protection
        window) and ``("dma", fields)`` (run a valid DMA that stages an operand in the SRAM);
        weights, X and index lists are loaded into DRAM as the steps are drawn."""
        tb = self.tb
        window = self.rng.choice(FUZZ_WINDOWS)
        if window[1] == "capacity":
            window = (window[0], tb.ref.capacity)
        yield "window", window
        self.stats[f"window {window[0]:#x}..{window[1]:#x}"] += 1
        self.jobs = [tb.random_job(op, small=True) for op in OPS]
        self.jobs.append(tb.random_job("row_gather", small=True))    # the bad-index variant
        self.bases = []
        for n, job in enumerate(self.jobs):
            f, dmas, _ = tb.stage_job(job, bad_index="last" if n == len(self.jobs) - 1 else None)
            for dm in dmas:
                yield "dma", dm
            self.bases.append(f)
        self.dma_src = tb.stage_area.take(16384)
        tb.load(self.dma_src, self.rng.randbytes(16384))
        self.dma_dst = tb.out_area.take(16384)


    def base_dma(self):
        rng, tb = self.rng, self.tb
        n = 64 * rng.randint(1, 64)
        sram = 32 * rng.randrange((tb.S - n) // 32 + 1)
        to_dram = rng.randint(0, 1)
        dram = (self.dma_dst if to_dram else self.dma_src) + 64 * rng.randrange((16384 - n) // 64 + 1)
        return tb.dma_fields(to_dram, dram, sram, n)

    def edge_value(self, layout, name, f):
        rng, ref, S = self.rng, self.tb.ref, self.tb.S
        lo, hi = ref.window
        width = ref.width(layout, name)
        m = (1 << width) - 1
        v = f[name]
        if name in ("op", "dtype"):
            return rng.randrange(4)
        if name in ("accumulate", "to_dram"):
            return 1 - v
        if name == "batch_minus_one":
            return rng.randrange(16)
        cands = [0, 1, m, rng.getrandbits(width)] + [v + d for d in (1, -1, 4, -4, 16, -16, 32, -32, 64, -64)]
        if layout in ACT_OPCODES:
            in_b = f["n"] * act_program.elem_bytes(f["in_fmt"] if f["in_fmt"] != 3 else 0)
            if name in ("op", "in_fmt", "out_fmt"):
                return rng.randrange(16 if name == "op" else 4)
            if name in ("src_a", "src_b", "dst"):
                cands += [S - in_b, S - 2 * in_b, S - 32, f["src_a"], f["dst"], f["src_a"] + 32,
                          f["dst"] - 32]
            if name == "n":
                cands += [0, 16, 17, S // 4, S // 2, (S - max(f["src_a"], f["dst"])) // 2,
                          (1 << width) - 1]
            if name in ("c", "k"):
                cands += list(ACT_CONSTANTS) + [0x7F800000, 0x7FC00000, 0xFF800000]
        elif layout == Opcode.GEMV:
            g = ref.geometry(f)
            bm1 = g.B - 1
            if name == "w_base":
                cands += [lo, lo - 64, hi, hi - 64, hi - g.w_bytes, hi - g.w_bytes + 64,
                          ref.capacity - 64, ref.capacity - g.w_bytes, ref.capacity - g.w_bytes + 64,
                          HOST_REGION]
            span = {"x_addr": (bm1 * f["x_pitch"] + g.x_len, 16),
                    "y_addr": (bm1 * f["y_pitch"] + 4 * g.n_out, 32),
                    "idx_addr": (4 * g.n_idx, 4)}.get(name)
            if span:
                need, align = span
                fit = (S - need) // align * align          # the last aligned address that fits
                cands += [S - need, fit, fit + align, S - need - align, S - align, S - 1]
            if name in ("x_pitch", "y_pitch"):
                cands += [0, 16, 32, 2 * v, (S - f[name.replace("pitch", "addr")]) // max(bm1, 1)]
            if name in ("n_rows", "n_cols", "n_idx"):
                cands += [2 * v, v // 2, S // 4, S // 2, S, 2 ** 16 - 1, 2 ** 16, 65535 * 8 + 1,
                          65535 * 16 + 1, (hi - f["w_base"]) // max(g.bpr * 64, 64),
                          (ref.capacity - f["w_base"]) // max(g.bpr * 64, 64) + 1]
        else:
            n = f["n_bytes"]
            if name == "dram":
                cands += [lo, lo - 64, hi - n, hi - n + 64, hi, ref.capacity - 64, ref.capacity - n,
                          ref.capacity - n + 64, HOST_REGION, DUMP_ADDR]
            if name == "sram":
                cands += [S - n, S - n + 32, S - n - 32, S - 32]
            if name == "n_bytes":
                cands += [S, S + 64, S - f["sram"], S - f["sram"] + 64, 2 * n]
        return rng.choice(cands) & m

    def exact_fit(self, f):
        """Move one operand so that it ends exactly at the SRAM end (weights: at WINDOW_LIMIT);
        returns the field's name. The result may still be invalid (alignment, other fields)."""
        ref, S = self.tb.ref, self.tb.S
        g = ref.geometry(f)
        bm1 = g.B - 1
        name = self.rng.choice(["y_addr", "x_addr", "idx_addr", "w_base"])
        f[name] = {"y_addr": S - bm1 * f["y_pitch"] - 4 * g.n_out,
                   "x_addr": S - bm1 * f["x_pitch"] - g.x_len,
                   "idx_addr": S - 4 * g.n_idx,
                   "w_base": min(ref.window[1], ref.capacity) - g.w_bytes}[name] \
            & ((1 << ref.width(Opcode.GEMV, name)) - 1)
        return name

    def candidate(self):
        rng, tb = self.rng, self.tb
        for _ in range(200):
            r = rng.random()
            if r < 0.5:
                layout, base = Opcode.GEMV, dict(rng.choice(self.bases))
                base["accumulate"] = rng.randint(0, 1)
                names = GEMV_MUTABLE
            elif r < 0.72:
                base = random_act_fields(tb, rng)
                layout, names = Opcode(base["opcode"]), ACT_MUTABLE
            elif r < 0.97:
                layout, base, names = Opcode.DMA, self.base_dma(), DMA_MUTABLE
            else:
                return tb.evaluate(tb.random_word(rng.choice([Opcode.FENCE, *LINK_OPCODES,
                                                              *UNDEFINED_OPCODES])), "header only")
            f = dict(base)
            mutated = rng.sample(names, rng.randint(1, 3))
            for name in mutated:
                f[name] = self.edge_value(layout, name, f)
            if layout == Opcode.GEMV and rng.random() < 0.12:
                mutated.append(self.exact_fit(f))
            if rng.random() < 0.06:
                f["opcode"] = rng.choice([*UNDEFINED_OPCODES, *LINK_OPCODES, *ACT_OPCODES,
                                          Opcode.FENCE, Opcode.GEMV, Opcode.DMA])
                mutated.append("opcode")
            d = tb.evaluate(tb.word(layout, f), f"{layout.name} base, mutated {', '.join(mutated)}")
            if d.want == Status.OK and d.opcode == Opcode.GEMV:
                reads, writes = tb.ref.gemv_spans(d.fields)
                if tb.ref.gemv_cycles(d.fields) > FUZZ_GEMV_CYCLES or _rows_overlap(reads, writes):
                    self.stats["discarded"] += 1
                    continue
            return d
        raise AssertionError("fuzzer found no admissible descriptor")


    def schedule(self, count: int, restage_every: int = 30):
        """The order of a fuzz run of ``count`` descriptors, as steps for the bench to perform:
        ``("restage", None)`` (run :meth:`restage_steps`; done first), ``("batch", list)``
        (rejected and header-only descriptors to run back to back: no DRAM access may follow),
        ``("run", desc)`` (a still-valid GEMV or DMA, committed to the model, to run alone),
        ``("check", None)`` (compare the whole SRAM and DRAM with the model). Every
        ``restage_every`` descriptors: the pending batch, a check and a restage; at the end the
        last batch and a check."""
        tb = self.tb
        yield "restage", None
        tb.codes.clear()
        pending = []
        for n in range(count):
            if n and n % restage_every == 0:
                if pending:
                    yield "batch", pending
                    pending = []
                yield "check", None
                yield "restage", None
            d = self.candidate()
            self.stats[d.want.name] += 1
            if d.want == Status.DRAM_RANGE and tb.ref.window_passed(d.fields):
                self.stats["DRAM_RANGE from a block's capacity check"] += 1
            if d.want == Status.OK and d.opcode in (Opcode.GEMV, Opcode.DMA):
                if pending:
                    yield "batch", pending
                    pending = []
                tb.commit(d)
                yield "run", d
                self.stats[f"ran {Opcode(d.opcode).name}"] += 1
                if d.opcode == Opcode.GEMV:
                    self.coverage.update(tb.ref.gemv_features(d.fields))
                    self.coverage.update(f"mutated {n}" for n in d.note.split("mutated ")[1].split(", "))
            else:
                pending.append(tb.commit(d))
                if len(pending) == QUEUE_DEPTH:
                    yield "batch", pending
                    pending = []
        if pending:
            yield "batch", pending
        yield "check", None

    def summary_ok(self) -> bool:
        """The run drew both outcomes: some valid descriptors ran and some were rejected."""
        return self.stats["OK"] > 0 and sum(v for k, v in self.stats.items()
                                            if k in Status.__members__ and k != "OK") > 0
