"""The descriptor streams of the ``random_descriptor_streams`` bench: ``StreamGen``, one round at a time.

:class:`StreamGen` builds one round's stream on a :class:`~ndpdimm.cosim.rtl.benches.random_tb.RandomCoreTB`,
committing every descriptor to the testbench's reference (``CoreModel``) in stream order, so
each carries its predicted completion code and DRAM bytes before anything runs:

* ``program``: a GEMV program - DMA X / index list / prior Y in (in random order), GEMV dense /
  row gather / column gather in FP16 / BF16 / INT8 with small random shapes, batch
  1..max_batch, random pitches, sometimes ``accumulate = 1`` onto known prior values (FP32
  specials among them), DMA Y out - or one whose index list has a bad entry (``bad_index``:
  the last or any); the expected rows are kept for the check after the round;
* ``random_dma`` (both ways), ``activation`` (ACT / SOFTMAX / ELTWISE on whatever the SRAM
  holds), ``fence`` (other bits random; on completion the testbench reads back over the host
  port what earlier descriptors DMA'd to DRAM);
* ``invalid``: one descriptor of each completion code that rejects (``BAD_OPCODE``,
  ``UNSUPPORTED``: the DIMM-Link opcodes, ``BAD_FIELD``, ``MISALIGNED``, ``DRAM_RANGE``
  - including DMA writes aimed at the host's region -, ``SRAM_RANGE``), from a GEMV, DMA or
  activation base; ``interject`` puts an invalid descriptor or a FENCE between a program's steps.

No simulator time passes here: the bench runs the stream afterwards (``run_batch``,
``run_full_cq``).
"""

import numpy as np
import torch

from ndpdimm.cosim.fuzz.plan import (
    F32_SPECIALS,
    HOST_BURSTS,
    HOST_REGION,
    WIN_HI,
    WIN_LO,
    Desc,
    random_act_fields,
    round_up,
)
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.golden.core import LINK_OPCODES, UNDEFINED_OPCODES
from ndpdimm.cosim.rtl.benches.random_tb import RandomCoreTB
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status

__all__ = ["StreamGen"]


class StreamGen:
    """Builds one round's descriptor stream (committed to the model in stream order)."""

    def __init__(self, tb: RandomCoreTB):
        self.tb, self.rng = tb, tb.rng
        self.stream, self.programs, self.produced = [], [], []
        self.base_gemv = None

    def emit(self, d: Desc, want=None):
        if want is not None:
            assert d.want == want, f"generator: {d.note} predicted {d.want.name}, meant {want.name}"
        self.stream.append(self.tb.commit(d))
        return d

    def interject(self, p=0.15):
        """Maybe an invalid descriptor or a FENCE between two steps."""
        if self.rng.random() < p:
            if self.rng.random() < 0.25:
                self.fence()
            else:
                self.invalid()

    # ---- items ---------------------------------------------------------------------------
    def program(self, bad_index=None):
        tb, rng = self.tb, self.rng
        job = tb.random_job(op=rng.choice(["row_gather", "col_gather"]) if bad_index else None)
        f, dmas, yr = tb.stage_job(job, bad_index)
        B, n_out = job.batch, job.n_out
        accumulate = bad_index is None and rng.random() < 0.35
        if accumulate:
            if job.dtype == Dtype.INT8:
                prior = np.array([rng.getrandbits(32) for _ in range(B * n_out)], np.uint32)
            else:
                prior = golden.result_bits(torch.randn(B * n_out, generator=torch.Generator()
                                                       .manual_seed(rng.getrandbits(31))) *
                                           2.0 ** rng.randint(-3, 6))
                prior = np.array([rng.choice(F32_SPECIALS) if rng.random() < 0.1 else int(v)
                                  for v in prior], np.uint32)
            prior = prior.reshape(B, n_out)
            img = bytearray(rng.randbytes(B * f["y_pitch"]))
            for b in range(B):
                img[b * f["y_pitch"]:b * f["y_pitch"] + 4 * n_out] = prior[b].astype("<u4").tobytes()
            stage = tb.stage_area.take(yr)
            tb.load(stage, bytes(img))
            dmas.append(tb.dma_fields(0, stage, f["y_addr"], yr))
            f["accumulate"] = 1
        rng.shuffle(dmas)
        for dm in dmas:
            self.emit(tb.evaluate(tb.word(Opcode.DMA, dm), "program DMA in"), Status.OK)
            self.interject()
        read_y = lambda a, n: bytes(tb.ref.sram[a:a + n])
        before = tb.y_rows(read_y, f["y_addr"], f["y_pitch"], B, n_out)
        note = f"GEMV {job.op} {job.dtype.name} {job.W.shape[0]}x{job.W.shape[1]} batch {B}" + \
            (" accumulate" if accumulate else "") + (f" bad index ({bad_index})" if bad_index else "")
        g = self.emit(tb.evaluate(tb.word(Opcode.GEMV, f), note),
                      Status.BAD_INDEX if bad_index else Status.OK)
        if bad_index:
            want = before
        else:
            self.base_gemv = f
            golden_bits = job.result_bits()
            # the model (operands read back from its memory images) agrees with the job's golden
            tb.compare_rows(g.y, golden_bits, f"model vs GemvJob golden for {note}")
            want = golden.accumulate_bits(before, golden_bits, job.dtype == Dtype.INT8) if accumulate else golden_bits
            tb.compare_rows(tb.y_rows(read_y, f["y_addr"], f["y_pitch"], B, n_out), want,
                            f"model SRAM image for {note}")
        self.interject()
        out = tb.out_area.take(yr)
        self.emit(tb.evaluate(tb.word(Opcode.DMA, tb.dma_fields(1, out, f["y_addr"], yr)),
                              "program DMA out"), Status.OK)
        self.programs.append((note, out, f["y_pitch"], B, n_out, want))
        self.produced.append((out, yr))

    def random_dma(self):
        tb, rng = self.tb, self.rng
        n = 64 * rng.choice([0, 1, 2, rng.randint(1, 64)])
        sram = 32 * rng.randrange((tb.S - n) // 32 + 1)
        if rng.random() < 0.5:
            src = tb.stage_area.take(n)
            tb.load(src, rng.randbytes(n))
            self.emit(tb.evaluate(tb.word(Opcode.DMA, tb.dma_fields(0, src, sram, n)), "DMA in"),
                      Status.OK)
        else:
            dst = tb.out_area.take(n)
            self.emit(tb.evaluate(tb.word(Opcode.DMA, tb.dma_fields(1, dst, sram, n)), "DMA out"),
                      Status.OK)
            if n:
                self.produced.append((dst, n))

    def activation(self):
        f = random_act_fields(self.tb, self.rng)
        note = f"{Opcode(f['opcode']).name} op {f['op']} {f['in_fmt']}->{f['out_fmt']} n {f['n']}"
        self.emit(self.tb.evaluate(self.tb.word(f["opcode"], f), note), Status.OK)

    def invalid_act(self, kind):
        tb, rng = self.tb, self.rng
        f = random_act_fields(tb, rng)
        if kind == Status.BAD_FIELD:
            choice = rng.randrange(3)
            if choice == 0:
                f[rng.choice(["in_fmt", "out_fmt"])] = 3
            elif choice == 1:
                f.update(opcode=Opcode.ACT, op=rng.choice([ActOp.ADD, ActOp.MUL, 11, 15]))
            else:
                f.update(src_a=f["dst"] + 32 if f["dst"] + 32 < tb.S else f["dst"] - 32)  # overlap
        elif kind == Status.MISALIGNED:
            f[rng.choice(["src_a", "dst"])] += rng.choice([2, 4, 16])
        else:
            f.update(dst=tb.S - 32, n=max(f["n"], 40))
        return f

    def fence(self):
        regions, self.produced = self.produced, []
        d = self.emit(self.tb.evaluate(self.tb.random_word(Opcode.FENCE), "FENCE"), Status.OK)
        d.on_complete = lambda: self.tb.host_read_back(regions)

    def invalid(self, kind=None):
        tb, rng = self.tb, self.rng
        kind = kind or rng.choice([Status.BAD_OPCODE, Status.UNSUPPORTED, Status.BAD_FIELD,
                                   Status.MISALIGNED, Status.DRAM_RANGE, Status.SRAM_RANGE])
        if kind == Status.BAD_OPCODE:
            d = tb.evaluate(tb.random_word(rng.choice(UNDEFINED_OPCODES)), "undefined opcode")
        elif kind == Status.UNSUPPORTED:
            d = tb.evaluate(tb.random_word(rng.choice(LINK_OPCODES)), "DIMM-Link opcode")
        else:
            for _ in range(50):
                if kind in (Status.BAD_FIELD, Status.MISALIGNED, Status.SRAM_RANGE) and \
                        rng.random() < 0.3:
                    fields = self.invalid_act(kind)
                    layout, note = Opcode(fields["opcode"]), f"{Opcode(fields['opcode']).name} {kind.name}"
                elif rng.random() < 0.6 or kind == Status.BAD_FIELD:
                    fields, layout, note = self.invalid_gemv(kind), Opcode.GEMV, f"GEMV {kind.name}"
                else:
                    fields, layout, note = self.invalid_dma(kind), Opcode.DMA, f"DMA {kind.name}"
                d = tb.evaluate(tb.word(layout, fields), note)
                if d.want == kind:
                    break
            else:
                raise AssertionError(f"generator could not make a {kind.name} descriptor")
        self.emit(d, kind)

    def invalid_gemv(self, kind):
        rng, tb = self.rng, self.tb
        if self.base_gemv is None:
            self.base_gemv = tb.stage_job(tb.random_job(op="dense", small=True))[0]
        f = dict(self.base_gemv)
        g = tb.ref.geometry(f)
        if kind == Status.BAD_FIELD:
            choice = rng.randrange(5)
            if choice == 0:
                f["dtype"] = 3
            elif choice == 1:
                f["op"] = 3
            elif choice == 2:
                f["batch_minus_one"] = rng.randint(tb.shape.max_batch, 15)
            elif choice == 3:
                f.update(op=GemvOp.COL_GATHER, n_idx=(1 << tb.shape.step_bits) + rng.randrange(1000))
            else:
                f.update(op=GemvOp.DENSE, n_cols=(65535 * g.lanes + 1 + rng.randrange(g.lanes)))
        elif kind == Status.MISALIGNED:
            name, delta = rng.choice([("w_base", 16), ("w_base", 32), ("w_base", 1), ("x_addr", 8),
                                      ("x_pitch", 4), ("y_addr", 16), ("y_pitch", 8),
                                      ("idx_addr", 2)])
            if name == "idx_addr":
                f["op"] = rng.choice([GemvOp.ROW_GATHER, GemvOp.COL_GATHER]) if not g.gather else f["op"]
            f[name] += delta
        elif kind == Status.DRAM_RANGE:
            choice = rng.randrange(4)
            if choice == 0:
                f["w_base"] = WIN_LO - 64 * rng.randint(1, 64)
            elif choice == 1:
                f["w_base"] = WIN_HI - g.w_bytes + 64
            elif choice == 2:
                f["w_base"] = HOST_REGION
            else:
                f["n_rows"] = (WIN_HI - f["w_base"]) // max(g.bpr * 64, 64) + 1 + rng.randrange(8)
        else:                                           # SRAM_RANGE
            choice = rng.randrange(3)
            bm1 = g.B - 1
            if choice == 0:
                f["y_addr"] = round_up(tb.S - bm1 * f["y_pitch"] - 4 * g.n_out + 1, 32)
            elif choice == 1:
                f["x_addr"] = round_up(tb.S - bm1 * f["x_pitch"] - g.x_len + 1, 16)
            else:
                f["op"] = f["op"] if g.gather else GemvOp.ROW_GATHER
                f["n_idx"] = max(f["n_idx"], 1)
                f["idx_addr"] = round_up(tb.S - 4 * f["n_idx"] + 1, 4)
        mask = {n: (1 << tb.ref.width(Opcode.GEMV, n)) - 1 for n in f if n not in ("opcode",)}
        return {n: (v & mask[n] if n in mask else v) for n, v in f.items()}

    def invalid_dma(self, kind):
        rng, tb = self.rng, self.tb
        n = 64 * rng.randint(1, 16)
        dram, sram, to_dram = tb.stage_area.take(n), 32 * rng.randrange((tb.S - n) // 32), rng.randint(0, 1)
        if kind == Status.MISALIGNED:
            what = rng.randrange(3)
            if what == 0:
                dram += rng.choice([1, 16, 32])
            elif what == 1:
                sram += rng.choice([1, 4, 16])
            else:
                n += rng.choice([1, 16, 32])
        elif kind == Status.DRAM_RANGE:
            what = rng.randrange(4)
            if what == 0:
                dram = WIN_LO - 64 * rng.randint(1, 8)
            elif what == 1:
                dram = WIN_HI - n + 64
            elif what == 2:                              # aimed at the host's region
                dram, to_dram = HOST_REGION + 64 * rng.randrange(HOST_BURSTS - 16), 1
            else:
                dram = tb.org.capacity_bytes - 64
        elif kind == Status.SRAM_RANGE:
            sram = round_up(tb.S - n + 1, 32)
        return tb.dma_fields(to_dram, dram, sram, n)
