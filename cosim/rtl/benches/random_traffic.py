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
from dataclasses import dataclass

import cocotb
import numpy as np
import torch
from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly, gather, with_timeout

from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import OPS, GemvJob
from ndpdimm.cosim.golden import act_program
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.golden.core import ACT_OPCODES, LINK_OPCODES, UNDEFINED_OPCODES, CoreModel
from ndpdimm.cosim.rtl.benches.core import WINDOW, NdpCoreTB
from ndpdimm.cosim.rtl.benches.streams import LayoutCodec
from ndpdimm.hw.activation.sequencer import ACT_UNARY_OPS
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import BURST_BYTES, Status, memory_request_layout
from ndpdimm.hw.memory.rank_scheduler import DramCommand
from ndpdimm.hw.registers import register

__all__ = ["CoreModel", "RandomCoreTB", "ACT_OPCODES", "expected_status"]

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

ROUNDS_ENV = "NDP_RANDOM_ROUNDS"
FUZZ_ENV = "NDP_FUZZ_COUNT"

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


def _round(n, k):
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
        n = _round(max(n, 1), align)
        a = _round(self.next, align)
        if a + n > self.hi:
            a = self.lo
        self.next = a + n
        return a


class RandomCoreTB(NdpCoreTB):
    """``NdpCoreTB`` plus the reference model, a host-port driver, batches and checks."""

    def __init__(self, dut, seed):
        super().__init__(dut, seed)
        sh = self.shape
        self.ref = CoreModel(n_units=sh.n_units, max_batch=sh.max_batch, radix_bits=sh.radix_bits,
                             index_bits=sh.index_bits, step_bits=sh.step_bits,
                             sram_size=self.core.sram_geometry.size_bytes,
                             capacity=self.org.capacity_bytes, act_lanes=self.core.act.lanes,
                             window=WINDOW)
        self.S = self.ref.S
        self.host_codec = LayoutCodec(memory_request_layout(self.org.capacity_bytes))
        self.host_queue, self.host_wait, self.host_tag = deque(), {}, 0
        self.host_wake = Event()
        self.host_rng = random.Random(seed * 7919 + 13)
        self.host_shadow = bytearray()
        self.host_errors, self.host_counts = [], Counter()
        self.traffic_on, self.host_inflight = False, set()
        self.w_area, self.stage_area, self.out_area = Bump(*W_AREA), Bump(*STAGE_AREA), Bump(*OUT_AREA)
        self.staged = [None] * 4
        self.codes, self.batches = Counter(), Counter()

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
        got = self.model.dump(DUMP_ADDR, self.S)
        if got != bytes(self.ref.sram):
            off = next(i for i in range(self.S) if got[i] != self.ref.sram[i])
            raise AssertionError(f"SRAM at {off:#x}: {got[off:off + 16].hex()} expected "
                                 f"{bytes(self.ref.sram[off:off + 16]).hex()}")

    async def init_memories(self):
        """Marker patterns: the whole SRAM (by DMA) and the DRAM areas the benches use."""
        self.load(MARKER_ADDR, self.rng.randbytes(self.S))
        for a in (WIN_LO - 8192, WIN_HI - 8192, OUT_AREA[0], STAGE_AREA[0]):
            self.load(a, self.rng.randbytes(16384))
        await self.run_now(Opcode.DMA, self.dma_fields(0, MARKER_ADDR, 0, self.S), "SRAM marker")

    # ---- GEMV jobs -----------------------------------------------------------------------------
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
        x_pitch = _round(x_row, 16) + 16 * rng.choice([0, 0, 1, 2])
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
        y_pitch = _round(job.n_out * 4, 32) + 32 * rng.choice([0, 0, 1])
        xr, ir, yr = _round(B * x_pitch, 64), _round(len(idx_img), 64), _round(B * y_pitch, 64)
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
                f["y_addr"] = _round(tb.S - bm1 * f["y_pitch"] - 4 * g.n_out + 1, 32)
            elif choice == 1:
                f["x_addr"] = _round(tb.S - bm1 * f["x_pitch"] - g.x_len + 1, 16)
            else:
                f["op"] = f["op"] if g.gather else GemvOp.ROW_GATHER
                f["n_idx"] = max(f["n_idx"], 1)
                f["idx_addr"] = _round(tb.S - 4 * f["n_idx"] + 1, 4)
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
            sram = _round(tb.S - n + 1, 32)
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

GEMV_MUTABLE = ("op", "dtype", "batch_minus_one", "accumulate", "w_base", "n_rows", "n_cols",
                "idx_addr", "n_idx", "x_addr", "x_pitch", "y_addr", "y_pitch")
DMA_MUTABLE = ("to_dram", "dram", "sram", "n_bytes")
#: Protection windows the fuzzer switches between (all hold the benches' DRAM areas). One ends
#: past the DIMM: then the weight streamer's and the DMA engine's own capacity checks (after
#: their alignment checks) decide, not the command processor's window check.
FUZZ_WINDOWS = (WINDOW, WINDOW, (0, "capacity"), (WIN_LO, 1 << 40), (64 << 10, (1 << 64) - 64))
#: Most cycles a still-valid fuzzed GEMV may take (estimate): keeps the bench short.
FUZZ_GEMV_CYCLES = 6000


class Fuzzer:
    def __init__(self, tb: RandomCoreTB):
        self.tb, self.rng = tb, tb.rng
        self.bases = []
        self.stats, self.coverage = Counter(), Counter()

    async def restage(self):
        """New base jobs (one per op and a row gather whose last index is bad): weights, X and
        index lists staged by host loads and valid DMAs."""
        tb = self.tb
        window = self.rng.choice(FUZZ_WINDOWS)
        if window[1] == "capacity":
            window = (window[0], tb.org.capacity_bytes)
        await tb.set_window(*window)
        self.stats[f"window {window[0]:#x}..{window[1]:#x}"] += 1
        self.jobs = [tb.random_job(op, small=True) for op in OPS]
        self.jobs.append(tb.random_job("row_gather", small=True))    # the bad-index variant
        self.bases = []
        for n, job in enumerate(self.jobs):
            f, dmas, _ = tb.stage_job(job, bad_index="last" if n == len(self.jobs) - 1 else None)
            for dm in dmas:
                await tb.run_now(Opcode.DMA, dm, "fuzz base DMA in")
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
    await fz.restage()
    count = int(os.environ.get(FUZZ_ENV, "120"))
    tb.codes.clear()
    pending = []
    for n in range(count):
        if n and n % 30 == 0:
            await fz.flush(pending)
            await tb.check_sram()
            tb.compare_dram()
            await fz.restage()
        d = fz.candidate()
        fz.stats[d.want.name] += 1
        if d.want == Status.DRAM_RANGE and tb.ref.window_passed(d.fields):
            fz.stats["DRAM_RANGE from a block's capacity check"] += 1
        if d.want == Status.OK and d.opcode in (Opcode.GEMV, Opcode.DMA):
            await fz.flush(pending)
            tb.commit(d)
            await tb.run_one(d)
            if d.opcode == Opcode.DMA and d.fields["to_dram"] and d.fields["n_bytes"]:
                a, k = d.fields["dram"], d.fields["n_bytes"]
                assert tb.model.dump(a, k) == tb.ref.dram.read(a, k), f"{d.note}: DRAM differs"
            fz.stats[f"ran {Opcode(d.opcode).name}"] += 1
            if d.opcode == Opcode.GEMV:
                fz.coverage.update(tb.ref.gemv_features(d.fields))
                fz.coverage.update(f"mutated {n}" for n in d.note.split("mutated ")[1].split(", "))
        else:
            pending.append(tb.commit(d))
            if len(pending) == QUEUE_DEPTH:
                await fz.flush(pending)
    await fz.flush(pending)
    await tb.check_sram()
    tb.compare_dram()
    dut._log.info(f"{count} fuzzed descriptors: {dict(fz.stats)}")
    dut._log.info(f"valid fuzzed GEMVs: {dict(sorted(fz.coverage.items()))}")
    assert fz.stats["OK"] > 0 and sum(v for k, v in fz.stats.items() if k in Status.__members__
                                      and k != "OK") > 0, dict(fz.stats)


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
