"""The testbench of the constrained-random core benches: ``RandomCoreTB`` (drivers and checkers) and ``Fuzzer``.

:class:`RandomCoreTB` is ``NdpCoreTB`` (``cosim/rtl/benches/core.py``: clocks, reset, CSR port,
the timing-checked ``DramDevice``) plus the reference of the core
(:class:`~ndpdimm.cosim.fuzz.plan.DescriptorPlanner` over ``CoreModel``) and what the benches
of ``cosim/rtl/benches/random_traffic.py`` drive and check with it:

* a **host pass-through driver** on the ``host`` port: 64 B reads and writes (``host_access``,
  tagged; each waits at most 200 us for its response) pushed from a queue, one request
  presented per cycle at the falling clock edge and taken when ``ready`` is seen in the
  ReadOnly phase after it; every rank's response port is always ready, and each response is
  matched to its request by tag (an unknown tag is an error). Random background traffic
  (``start_host_traffic``: every 1-16 cycles, at most 4 accesses in flight, a region outside
  the NDP window) is checked against a shadow copy; ``host_read_back`` reads, after a FENCE,
  bursts that earlier descriptors DMA'd to DRAM;
* the **descriptor driver**: ``push`` writes only the ``DESC0..3`` words that changed, then
  ``DESC_PUSH``; ``run_batch`` pushes a batch back to back, optionally with the queue held
  (``CTRL.ENABLE`` = 0) to check ``STATUS``, a refused privileged ``WINDOW_BASE`` write and a
  refused ninth push (counted in ``CSR_ERRORS``); ``run_full_cq`` overfills the completion
  queue (``STATUS[33]``: the core must stall, then drain in order);
* the **checkers**: every completion in order (id, opcode, code, DRAM bytes) against the
  prediction (``collect_all``; the core idle afterwards), the whole DRAM against the mirror
  (``compare_dram``), the SRAM DMA'd out against the model's image (``check_sram``).

:class:`Fuzzer` is the :class:`~ndpdimm.cosim.fuzz.plan.DescriptorMutator` of the
``fuzz_descriptors`` bench on this testbench: re-staging through the CSR port, and rejected
descriptors run back to back in batches that must leave the DRAM without a new RD/WR command
and ``DRAM_BURSTS_READ`` unmoved (checked 64 cycles after the batch).
"""

import random
from collections import Counter, deque

import cocotb
from cocotb.triggers import ClockCycles, Event, FallingEdge, ReadOnly, gather, with_timeout

from ndpdimm.cosim.fuzz.plan import (
    DUMP_ADDR,
    HOST_BURSTS,
    HOST_REGION,
    MASK64,
    QUEUE_DEPTH,
    WINDOW,
    Desc,
    DescriptorMutator,
    DescriptorPlanner,
)
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.golden.core import CoreModel
from ndpdimm.cosim.rtl.benches.core import NdpCoreTB
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import BURST_BYTES, Status, memory_request_layout
from ndpdimm.hw.memory.rank_scheduler import DramCommand
from ndpdimm.hw.registers import register

__all__ = ["RandomCoreTB", "Fuzzer"]


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
