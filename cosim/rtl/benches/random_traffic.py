"""Constrained-random full-chip benches of the NDP core (``hw/core/ndp_core.py``): descriptor streams and fuzzing.

Both benches drive the real core through its CSR port exactly as the host
runtime does (``NdpCoreTB`` of ``cosim/rtl/benches/core.py``) against the
timing-checked DRAM model (``DramDevice``), and check everything against the
Python reference model of the core, :class:`CoreModel` (``cosim/golden/core.py``,
also the model backend's functional half):

* ``CoreModel.expected_status(fields)`` predicts each descriptor's completion
  code from the documented check order (``hw/core/command_processor.py``: opcode,
  GEMV ``BAD_FIELD`` / ``MISALIGNED`` / window ``DRAM_RANGE`` / ``SRAM_RANGE``,
  then the weight streamer's index pre-scan ``BAD_INDEX`` on the index-list
  *contents*; DMA: window ``DRAM_RANGE``, then the DMA engine's ``MISALIGNED``,
  ``DRAM_RANGE``, ``SRAM_RANGE``), and the completion's DRAM bytes (the
  streamer's bursts x 64 for a GEMV, ``n_bytes`` for a DMA, 0 for a rejected
  descriptor);
* it holds the expected contents of the whole SRAM and of the DRAM (a
  ``SparseStore`` mirror of every byte the host loaded and every valid DMA
  wrote), and applies each valid descriptor in queue order: DMA copies, and
  GEMV results computed *from the memory images* (weights read back from DRAM
  in the streamer layout, X and the index list from the SRAM, padding lanes
  included) with the golden model (``cosim/golden/numerics.py``), written in the engine's
  beat order (group, batch element, ascending output) with the result
  writer's accumulate rule (``old + new`` in float32 with the canonical NaN,
  or INT32 wrap-around, ``hw/gemv/result_writer.py``).

``random_descriptor_streams``: rounds of constrained-random descriptor streams:
GEMV programs (DMA X / index list / prior Y in, GEMV dense / row gather /
column gather in FP16 / BF16 / INT8 with small random shapes, batch
1..max_batch, random pitches, sometimes ``accumulate = 1`` onto known prior
values, DMA Y out), random DMAs both ways, FENCEs (other bits random),
invalid descriptors of every kind (opcode 0 and 10..15, the DIMM-Link opcodes,
``BAD_FIELD``, ``MISALIGNED``, ``DRAM_RANGE`` - including DMA writes aimed at the
host's region -, ``SRAM_RANGE``, and GEMV programs whose index list has a bad
entry, often only the last one), some of them between the steps of a
program. Descriptors are pushed back to back in batches of up to the queue
depth, sometimes with the queue held (``CTRL.ENABLE`` = 0) to check ``STATUS``,
a refused ninth push (counted in ``CSR_ERRORS``, never executed: it would
wipe the SRAM) and a refused privileged ``WINDOW_BASE`` write; then every
completion is checked in order (id, opcode, code, DRAM bytes). Every GEMV's
results (DMA'd to DRAM) are checked bit for bit against
``GemvJob.result_bits()`` (plus the prior values for ``accumulate``); after
each round the whole DRAM equals the mirror. Concurrently, random 64 B host
pass-through reads and writes run on the ``host`` port in a region outside
the NDP window; every read is checked against a shadow copy. When a FENCE
completes, results that earlier descriptors DMA'd to DRAM are read back over
the host port and must be the bytes the DMA wrote. Some batches overfill the
completion queue instead (``STATUS[33]``; the core must stall, then drain in
order), and each round runs under a random arbitration ``POLICY``.

``fuzz_descriptors``: valid GEMV (one staged job per op and a row gather
whose last index entry is bad, all re-drawn every 30 descriptors) and DMA
descriptors get 1-3 random fields mutated to edge values (0, 1, field
maximum, window edges, just inside / exactly at / just past the SRAM end,
+-1/4/16/32/64 bytes, random; sometimes the opcode; sometimes an operand moved
to end exactly at the SRAM end or the weights at ``WINDOW_LIMIT``). Every
code must match ``expected_status``. Rejected descriptors (and header-only
ones: FENCE, undefined and DIMM-Link opcodes) run back to back in batches of
up to the queue depth; each batch must leave the DRAM without a new RD/WR
command, ``DRAM_BURSTS_READ`` unmoved, and every completion with 0 DRAM
bytes; mutated
descriptors that are still valid run one at a time and update the model
(constraints: bounded run time, results not overlapping their own operands,
whose outcome would depend on timing). The SRAM (DMA'd out) and the whole
DRAM must equal the model's images, which only valid descriptors changed
(SRAM and DRAM start with marker patterns). ACT / SOFTMAX / ELTWISE bases
(random valid fields over whatever the SRAM holds) are mutated the same way;
valid ones run in the batches (they touch no DRAM) and the model applies them
with ``cosim/golden/act_program.py``.

``checkers_catch_wrong_expectations``: the checks can fail - a wrong code
prediction, one flipped result bit and one flipped DRAM byte are detected.

Environment: ``NDP_RANDOM_ROUNDS`` (rounds of the stream test, default 3),
``NDP_FUZZ_COUNT`` (fuzzed descriptors, default 120).
"""

import os
import random
from collections import Counter, deque

import cocotb
import numpy as np
import torch
from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly, gather, with_timeout

from ndpdimm.cosim.fuzz.plan import (
    DUMP_ADDR,
    F32_SPECIALS,
    HOST_BURSTS,
    HOST_REGION,
    MASK64,
    QUEUE_DEPTH,
    WIN_HI,
    WIN_LO,
    WINDOW,
    Desc,
    DescriptorMutator,
    DescriptorPlanner,
    expected_status,
    random_act_fields,
    round_up,
)
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.golden.core import ACT_OPCODES, LINK_OPCODES, UNDEFINED_OPCODES, CoreModel
from ndpdimm.cosim.rtl.benches.core import NdpCoreTB
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import BURST_BYTES, Status, memory_request_layout
from ndpdimm.hw.memory.rank_scheduler import DramCommand
from ndpdimm.hw.registers import register

__all__ = ["CoreModel", "RandomCoreTB", "ACT_OPCODES", "expected_status"]

ROUNDS_ENV = "NDP_RANDOM_ROUNDS"
FUZZ_ENV = "NDP_FUZZ_COUNT"


class RandomCoreTB(NdpCoreTB, DescriptorPlanner):
    """``NdpCoreTB`` plus the reference model, a host-port driver, batches and checks."""

    def __init__(self, dut, seed):
        super().__init__(dut, seed)
        sh = self.shape
        self.init_planner(CoreModel(n_units=sh.n_units, max_batch=sh.max_batch, radix_bits=sh.radix_bits,
                                    index_bits=sh.index_bits, step_bits=sh.step_bits,
                                    sram_size=self.core.sram_geometry.size_bytes,
                                    capacity=self.org.capacity_bytes, act_lanes=self.core.act.lanes,
                                    window=WINDOW))
        self.host_codec = LayoutCodec(memory_request_layout(self.org.capacity_bytes))
        self.host_queue, self.host_wait, self.host_tag = deque(), {}, 0
        self.host_wake = Event()
        self.host_rng = random.Random(seed * 7919 + 13)
        self.host_shadow = bytearray()
        self.host_errors, self.host_counts = [], Counter()
        self.traffic_on, self.host_inflight = False, set()
        self.staged = [None] * 4
        self.batches = Counter()

    async def start(self):
        for r in range(self.org.ranks):
            getattr(self.dut, f"host__resp__{r}__ready").value = 1
        await super().start()
        cocotb.start_soon(self._host_port())

    def load(self, addr, data):
        """Host set-up write into DRAM (the model's backing store and the mirror)."""
        self.model.load(addr, data)
        self.ref.dram.write(addr, data)

    # ---- host pass-through port --------------------------------------------------------------
    async def _host_port(self):
        d = self.dut
        ranks = self.org.ranks
        valid = [getattr(d, f"host__resp__{r}__valid") for r in range(ranks)]
        payload = [getattr(d, f"host__resp__{r}__payload") for r in range(ranks)]
        holding = None
        while True:
            if holding is None and not self.host_queue and not self.host_wait:
                self.host_wake.clear()
                await self.host_wake.wait()
            await FallingEdge(d.clk)
            if holding is None and self.host_queue:
                holding = self.host_queue.popleft()
                d.host__req__0__payload.value = holding
            d.host__req__0__valid.value = int(holding is not None)
            await ReadOnly()
            if holding is not None and d.host__req__0__ready.value == 1:
                holding = None
            for r in range(ranks):
                if valid[r].value == 1:
                    bits = int(payload[r].value)
                    slot = self.host_wait.pop(bits & 0x7FFF, None)
                    if slot is None:
                        self.host_errors.append(f"host response with unknown tag {bits & 0x7FFF:#x}")
                        continue
                    slot[1] = (bits >> 15).to_bytes(BURST_BYTES, "little")
                    slot[0].set()

    async def host_access(self, addr, write=False, data=b""):
        """One 64 B pass-through access on the ``host`` port; returns the read data."""
        while self.host_tag in self.host_wait:
            self.host_tag = (self.host_tag + 1) & 0x7FFF
        tag, self.host_tag = self.host_tag, (self.host_tag + 1) & 0x7FFF
        slot = [Event(), None]
        self.host_wait[tag] = slot
        self.host_queue.append(self.host_codec.encode(
            {"write": int(write), "burst": addr // BURST_BYTES, "tag": tag,
             "data": int.from_bytes(data, "little") if write else 0}))
        self.host_wake.set()
        await with_timeout(slot[0].wait(), 200, "us")
        return slot[1]

    async def host_read_back(self, regions, max_bursts=12):
        """After a FENCE: bursts that earlier descriptors DMA'd to DRAM, read over the host port,
        must be the bytes the DMA wrote."""
        bursts = [a + 64 * k for a, n in regions for k in range(n // 64)]
        bursts = self.rng.sample(bursts, min(max_bursts, len(bursts)))
        got = await gather(*(self.host_access(a) for a in bursts))
        for a, data in zip(bursts, got):
            want = self.ref.dram.read(a, 64)
            assert data == want, f"host read after FENCE at {a:#x}: {data.hex()} expected {want.hex()}"
        self.host_counts["fence_reads"] += len(bursts)

    async def _host_one(self, k, write, data):
        addr = HOST_REGION + BURST_BYTES * k
        try:
            got = await self.host_access(addr, write, data)
            if write:
                self.host_counts["writes"] += 1
            else:
                self.host_counts["reads"] += 1
                if got != data:
                    self.host_errors.append(f"host read at {addr:#x}: {got.hex()} expected {data.hex()}")
        finally:
            self.host_inflight.discard(k)

    async def _host_traffic(self):
        rng = self.host_rng
        while self.traffic_on:
            await ClockCycles(self.dut.clk, rng.randint(1, 16))
            if len(self.host_inflight) >= 4:
                continue
            k = rng.randrange(HOST_BURSTS)
            if k in self.host_inflight:
                continue
            self.host_inflight.add(k)
            if rng.random() < 0.5:
                data = rng.randbytes(BURST_BYTES)
                self.host_shadow[64 * k:64 * k + 64] = data
                cocotb.start_soon(self._host_one(k, True, data))
            else:
                cocotb.start_soon(self._host_one(k, False, bytes(self.host_shadow[64 * k:64 * k + 64])))

    def start_host_traffic(self):
        self.host_shadow = bytearray(self.host_rng.randbytes(HOST_BURSTS * BURST_BYTES))
        self.model.load(HOST_REGION, bytes(self.host_shadow))
        self.traffic_on = True
        cocotb.start_soon(self._host_traffic())

    async def stop_host_traffic(self):
        self.traffic_on = False
        for _ in range(100000):
            if not self.host_inflight:
                break
            await ClockCycles(self.dut.clk, 16)
        assert not self.host_inflight, "host accesses never completed"
        self.check_host_errors()
        got = self.model.dump(HOST_REGION, HOST_BURSTS * BURST_BYTES)
        assert got == bytes(self.host_shadow), "host region differs from the host's shadow copy"

    def check_host_errors(self):
        assert not self.host_errors, "; ".join(self.host_errors[:5])

    # ---- descriptors -----------------------------------------------------------------------
    async def push(self, word):
        for i in range(4):
            w = (word >> (64 * i)) & MASK64
            if self.staged[i] != w:
                await self.write(f"DESC{i}", w)
                self.staged[i] = w
        await self.write("DESC_PUSH", 1)

    async def collect(self, polls=200000):
        for _ in range(polls):
            head = await self.read("CQ_HEAD")
            f = register("CQ_HEAD").unpack(head)
            if f["VALID"]:
                dram_bytes = await self.read("CQ_DRAM_BYTES")
                await self.write("CQ_POP", 1)
                return {"id": f["ID"], "code": f["STATUS"], "opcode": f["OPCODE"],
                        "dram_bytes": dram_bytes}
        raise AssertionError("no completion")


    async def run_batch(self, batch, hold=False, overflow=False):
        """Push ``batch`` back to back (optionally with the queue held, checking STATUS, a refused
        extra push and a refused privileged write), then check every completion in order."""
        if hold:
            await self.write("CTRL", 0)
        for d in batch:
            await self.push(d.word)
        if hold:
            st = await self.read("STATUS")
            k = len(batch)
            assert (st >> 8) & 0xFF == k and st & 1 == 1 and (st >> 32) & 1 == int(k == QUEUE_DEPTH), \
                f"STATUS {st:#x} with {k} descriptors held"
            errors0 = await self.read("CSR_ERRORS")
            await self.write("WINDOW_BASE", 0)           # privileged: refused while busy
            assert await self.read("WINDOW_BASE") == self.ref.window[0], "WINDOW_BASE changed while busy"
            expect_errors = errors0 + 1
            if overflow:
                assert k == QUEUE_DEPTH
                # would wipe the SRAM with zeros (untouched DRAM) if it were ever executed
                await self.push(self.word(Opcode.DMA, self.dma_fields(0, DUMP_ADDR + (1 << 20), 0,
                                                                      self.S)))
                expect_errors += 1
                st = await self.read("STATUS")
                assert (st >> 8) & 0xFF == QUEUE_DEPTH, f"STATUS {st:#x} after a refused push"
            assert await self.read("CSR_ERRORS") == expect_errors, "refused CSR writes not counted"
            await self.write("CTRL", 1)
        await self.collect_all(batch)

    async def collect_all(self, batch):
        """Take and check the completions of ``batch`` in order; then the core must be idle."""
        for d in batch:
            self.check(await self.collect(), d)
            if d.on_complete is not None:
                await d.on_complete()
        st = await self.read("STATUS")
        assert st == 0, f"STATUS {st:#x} after every completion was taken"

    async def run_full_cq(self, batch):
        """More descriptors than the completion queue holds: push ``QUEUE_DEPTH``, wait until
        their completions fill the CQ (``STATUS[33]``), push the rest (the core must stall with
        the next completion), then take every completion in order."""
        first, rest = batch[:QUEUE_DEPTH], batch[QUEUE_DEPTH:]
        for d in first:
            await self.push(d.word)
        for _ in range(100000):
            st = await self.read("STATUS")
            status = register("STATUS").unpack(st)
            if status["CQ_FULL"]:
                break
        else:
            raise AssertionError(f"completion queue never filled: STATUS {st:#x}")
        assert status["CQ_WAITING"] == QUEUE_DEPTH and status["QUEUED"] == 0, f"STATUS {st:#x}"
        for d in rest:
            await self.push(d.word)
        await ClockCycles(self.dut.clk, 200)
        st = await self.read("STATUS")
        # one descriptor dispatched (and stalled at completion or still running), the rest queued
        assert st & 1 and (st >> 33) & 1 and (st >> 8) & 0xFF == len(rest) - 1, \
            f"STATUS {st:#x} with a full completion queue and {len(rest)} more pushed"
        await self.collect_all(batch)

    async def set_window(self, lo, hi):
        """Move the protection window (privileged: the core must be idle)."""
        await self.write("WINDOW_BASE", lo)
        await self.write("WINDOW_LIMIT", hi)
        assert (await self.read("WINDOW_BASE"), await self.read("WINDOW_LIMIT")) == (lo, hi)
        self.ref.window = (lo, hi)

    async def run_one(self, d: Desc):
        await self.run_batch([d])

    async def run_now(self, layout_op, fields, note=""):
        """Build, commit and run one descriptor (it must be predicted OK)."""
        d = self.commit(self.evaluate(self.word(layout_op, fields), note))
        assert d.want == Status.OK, f"{note}: predicted {d.want.name}"
        await self.run_one(d)
        return d

    # ---- memory checks -----------------------------------------------------------------------
    def compare_dram(self):
        """Every DRAM page the model or the mirror holds is equal (the host region is left out
        once host traffic has used it: ``stop_host_traffic`` checks it against its shadow)."""
        store, mirror = self.model.store, self.ref.dram
        pb = store.page_bytes
        host_pages = range(HOST_REGION // pb, (HOST_REGION + HOST_BURSTS * BURST_BYTES) // pb + 1) \
            if self.host_shadow else ()
        for p in sorted(set(store._pages) | set(mirror._pages)):   # the bench reads the stores' pages
            if p in host_pages:
                continue
            got, want = store.read(p * pb, pb), mirror.read(p * pb, pb)
            if got != want:
                off = next(i for i in range(pb) if got[i] != want[i])
                raise AssertionError(f"DRAM at {p * pb + off:#x}: {got[off:off + 16].hex()} expected "
                                     f"{want[off:off + 16].hex()}")

    async def check_sram(self):
        """DMA the whole SRAM out and compare it with the model's image."""
        await self.run_now(Opcode.DMA, self.dma_fields(1, DUMP_ADDR, 0, self.S), "SRAM dump")
        diff = self.sram_difference(self.model.dump(DUMP_ADDR, self.S))
        assert not diff, diff

    async def init_memories(self):
        """Marker patterns: the whole SRAM (by DMA) and the DRAM areas the benches use."""
        await self.run_now(Opcode.DMA, self.load_markers(), "SRAM marker")

    # ---- GEMV jobs -----------------------------------------------------------------------------
# =========================================================================================

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


@cocotb.test()
async def random_descriptor_streams(dut):
    """Constrained-random descriptor streams (GEMV programs, DMAs, FENCEs, invalid descriptors of
    every kind) in back-to-back batches with concurrent host traffic: every completion, every
    result bit, the DRAM and the SRAM as predicted."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    rng = tb.rng
    await tb.init_memories()
    tb.start_host_traffic()
    rounds = int(os.environ.get(ROUNDS_ENV, "3"))
    n_desc = n_programs = 0
    for rnd in range(rounds):
        gen = StreamGen(tb)
        target = rng.randint(12, 28)
        gen.program(bad_index="last")                # every round: a bad last index entry
        while len(gen.stream) < target:
            r = rng.random()
            if r < 0.45:
                gen.program()
            elif r < 0.52:
                gen.program(bad_index=rng.choice(["last", "any"]))
            elif r < 0.60:
                gen.random_dma()
            elif r < 0.67:
                gen.activation()
            elif r < 0.75:
                gen.fence()
            else:
                gen.invalid()
        for kind in (Status.BAD_OPCODE, Status.UNSUPPORTED, Status.BAD_FIELD, Status.MISALIGNED,
                     Status.DRAM_RANGE, Status.SRAM_RANGE):
            if rnd == 0 or rng.random() < 0.3:
                gen.invalid(kind)                    # every kind, at least in the first round
        gen.fence()
        stream = gen.stream
        policy = rng.randrange(3)                    # host/NDP arbitration (privileged, idle)
        await tb.write("POLICY", policy)
        assert await tb.read("POLICY") == policy
        i = 0
        while i < len(stream):
            left = len(stream) - i
            r = rng.random()
            if r < 0.12 and left > QUEUE_DEPTH:
                k = rng.randint(QUEUE_DEPTH + 1, min(2 * QUEUE_DEPTH, left))
                await tb.run_full_cq(stream[i:i + k])
                tb.batches["completion queue full"] += 1
            else:
                hold = r < 0.45
                overflow = hold and rng.random() < 0.5 and left >= QUEUE_DEPTH
                k = QUEUE_DEPTH if overflow else rng.randint(1, min(QUEUE_DEPTH, left))
                await tb.run_batch(stream[i:i + k], hold=hold, overflow=overflow)
                tb.batches["held, refused push" if overflow else "held" if hold else "running"] += 1
            i += k
        for note, out, pitch, B, n_out, want in gen.programs:
            tb.compare_rows(tb.y_rows(tb.model.dump, out, pitch, B, n_out), want, f"round {rnd}: {note}")
        tb.compare_dram()
        tb.check_host_errors()
        n_desc += len(stream)
        n_programs += len(gen.programs)
        dut._log.info(f"round {rnd} (policy {policy}): {len(stream)} descriptors, {len(gen.programs)} "
                      f"GEMV programs OK; host {dict(tb.host_counts)}")
    await tb.stop_host_traffic()
    await tb.check_sram()
    tb.compare_dram()
    assert tb.host_counts["reads"] > 0 and tb.host_counts["writes"] > 0 and \
        tb.host_counts["fence_reads"] > 0, f"host traffic did not run: {dict(tb.host_counts)}"
    cycles = await tb.read("CYCLES")
    gemv_busy = await tb.read("GEMV_BUSY_CYCLES")
    dut._log.info(f"{cycles} NDP cycles ({gemv_busy} GEMV engine busy)")
    dut._log.info(f"{rounds} rounds, {n_desc} descriptors, {n_programs} GEMV programs; predicted codes "
                  f"{dict(tb.codes)}; batches {dict(tb.batches)}; host {dict(tb.host_counts)}")


# =========================================================================================
# fuzz_descriptors
# =========================================================================================

class Fuzzer(DescriptorMutator):
    """:class:`DescriptorMutator` on the cocotb bench: restaging and batches through the CSR port."""

    async def restage(self):
        for step, arg in self.restage_steps():
            if step == "window":
                await self.tb.set_window(*arg)
            else:
                await self.tb.run_now(Opcode.DMA, arg, "fuzz base DMA in")

    async def flush(self, pending):
        """Run rejected (and FENCE / no-op) descriptors back to back: no DRAM RD/WR, no weight
        burst may appear."""
        if not pending:
            return
        tb = self.tb
        counts0 = (tb.device.counts[DramCommand.RD], tb.device.counts[DramCommand.WR])
        bursts0 = await tb.read("DRAM_BURSTS_READ")
        await tb.run_batch(pending)
        await ClockCycles(tb.dut.clk, 64)
        counts1 = (tb.device.counts[DramCommand.RD], tb.device.counts[DramCommand.WR])
        bursts1 = await tb.read("DRAM_BURSTS_READ")
        notes = "; ".join(f"{d.want.name} {d.note} {d.fields}" for d in pending)
        assert counts1 == counts0, f"rejected descriptors issued DRAM RD/WR {counts0} -> {counts1}: {notes}"
        assert bursts1 == bursts0, f"rejected descriptors read weights ({bursts1 - bursts0} bursts): {notes}"
        pending.clear()


@cocotb.test()
async def fuzz_descriptors(dut):
    """Fuzzed GEMV / DMA descriptor fields: every completion code as ``expected_status`` predicts,
    rejected ones without DRAM access, SRAM and DRAM images changed only by valid ones."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED + 1000)
    await tb.start()
    await tb.init_memories()
    fz = Fuzzer(tb)
    count = int(os.environ.get(FUZZ_ENV, "120"))
    for step, arg in fz.schedule(count):
        if step == "restage":
            await fz.restage()
        elif step == "batch":
            await fz.flush(arg)
        elif step == "check":
            await tb.check_sram()
            tb.compare_dram()
        else:
            d = arg
            await tb.run_one(d)
            if d.opcode == Opcode.DMA and d.fields["to_dram"] and d.fields["n_bytes"]:
                a, k = d.fields["dram"], d.fields["n_bytes"]
                assert tb.model.dump(a, k) == tb.ref.dram.read(a, k), f"{d.note}: DRAM differs"
    dut._log.info(f"{count} fuzzed descriptors: {dict(fz.stats)}")
    dut._log.info(f"valid fuzzed GEMVs: {dict(sorted(fz.coverage.items()))}")
    assert fz.summary_ok(), dict(fz.stats)


# =========================================================================================
# the checks can fail
# =========================================================================================

@cocotb.test()
async def checkers_catch_wrong_expectations(dut):
    """A wrong completion prediction, a flipped result bit and a flipped DRAM byte are detected."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED + 2000)
    await tb.start()
    await tb.init_memories()
    job = tb.random_job("dense", small=True)
    f, dmas, yr = tb.stage_job(job)
    for dm in dmas:
        await tb.run_now(Opcode.DMA, dm, "DMA in")
    # the checker predicts the documented code, not OK, for a misaligned weight base
    bad = {**f, "w_base": f["w_base"] + 16}
    assert tb.ref.expected_status(f) == Status.OK
    assert expected_status(bad, tb.ref) == Status.MISALIGNED
    # a wrong prediction (OK for that descriptor) fails the completion check
    d = tb.evaluate(tb.word(Opcode.GEMV, bad), "misaligned GEMV, wrongly expected OK")
    d.want = Status.OK
    try:
        await tb.run_one(d)
    except AssertionError as e:
        assert "MISALIGNED" in str(e), e
    else:
        raise AssertionError("a wrong code prediction was not detected")
    # a flipped golden bit fails the result check
    g = await tb.run_now(Opcode.GEMV, f, "GEMV")
    out = tb.out_area.take(yr)
    await tb.run_now(Opcode.DMA, tb.dma_fields(1, out, f["y_addr"], yr), "DMA out")
    got = tb.y_rows(tb.model.dump, out, f["y_pitch"], job.batch, job.n_out)
    want = job.result_bits()
    tb.compare_rows(got, want, "dense GEMV")
    assert (g.y == want).all()
    wrong = want.copy()
    wrong.flat[tb.rng.randrange(wrong.size)] ^= 1 << tb.rng.randrange(32)
    try:
        tb.compare_rows(got, wrong, "corrupted golden")
    except AssertionError as e:
        assert "differ from the golden model" in str(e), e
    else:
        raise AssertionError("a corrupted golden result was not detected")
    # a flipped mirror byte fails the DRAM comparison
    tb.compare_dram()
    a = out + tb.rng.randrange(yr)
    tb.ref.dram.write(a, bytes([tb.ref.dram.read(a, 1)[0] ^ 0x40]))
    try:
        tb.compare_dram()
    except AssertionError as e:
        assert f"{a:#x}" in str(e), e
    else:
        raise AssertionError("a DRAM difference was not detected")