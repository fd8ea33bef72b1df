"""Amaranth-simulator tests of the DMA engine against a real BankedSram and the behavioural memory.

Each test runs a list of descriptors through ``DmaEngine`` (SRAM port 0 of a
two-port ``BankedSram``; port 1 belongs to the testbench, which preloads the
whole SRAM with random bytes and reads it all back at the end) and
``MemoryPortModel`` (random back-pressure, latency and response order), then
checks what it observed - status beats, the final SRAM, the DRAM regions and
the memory model's request log - against ``dma_reference``, a byte-level
model of the descriptor rules. A monitor counts requests in flight.
"""

import gc
import random
import warnings

import pytest
from amaranth.back import rtlil
from amaranth.hdl import Elaboratable, Module, UnusedElaboratable
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.dram.model import SparseStore
from ndpdimm.cosim.dram.port_model import MemoryPortModel
from ndpdimm.hw.memory.dma import DmaEngine, dma_descriptor_layout
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import BURST_BYTES, Status
from ndpdimm.hw.memory.sram import BankedSram

ORG = load_dram_config()[0]
CAP = ORG.capacity_bytes
SRAM = 4096                  # small SRAM: the testbench preloads and reads it all every test


# ---- reference --------------------------------------------------------------------------

def dma_reference(desc, sram: bytearray, dram: SparseStore, sram_size: int, word_bytes: int):
    """Apply one descriptor ``(to_dram, dram_addr, sram_addr, n_bytes)`` to ``sram``/``dram``."""
    to_dram, da, sa, n = desc
    if da % BURST_BYTES or n % BURST_BYTES or sa % word_bytes:
        return Status.MISALIGNED
    if da + n > CAP:
        return Status.DRAM_RANGE
    if sa + n > sram_size:
        return Status.SRAM_RANGE
    if to_dram:
        dram.write(da, bytes(sram[sa:sa + n]))
    else:
        sram[sa:sa + n] = dram.read(da, n)
    return Status.OK


# ---- bench ----------------------------------------------------------------------------------

class Harness(Elaboratable):
    def __init__(self, sram_size, word_bits, max_outstanding):
        self.sram = BankedSram(size_bytes=sram_size, word_bits=word_bits, n_ports=2)
        self.dma = DmaEngine(sram_size_bytes=sram_size, sram_word_bits=word_bits,
                             max_outstanding=max_outstanding)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = self.sram
        m.submodules.dma = self.dma
        wiring.connect(m, self.dma.sram, self.sram.ports[0])
        return m


class Bench:
    """One simulation: DUT, memory model, SRAM preload/readback, in-flight monitor, results."""

    def __init__(self, *, sram_size=SRAM, word_bits=256, max_outstanding=16, seed=0,
                 dram_init=(), **model_kw):
        self.h = Harness(sram_size, word_bits, max_outstanding)
        self.sram_size, self.word_bytes = sram_size, word_bits // 8
        self.max_outstanding = max_outstanding
        self.model = MemoryPortModel(seed=seed, **model_kw)
        rng = random.Random(seed)
        self.sram_init = rng.randbytes(sram_size)
        self.dram_init = [(addr, rng.randbytes(n)) for addr, n in dram_init]
        for addr, data in self.dram_init:
            self.model.load(addr, data)
        self.statuses, self.max_in_flight, self.sram_final = [], 0, None
        self.layout = dma_descriptor_layout(CAP, sram_size)

    # testbench-side SRAM access on port 1, one word per cycle
    async def _sram_write_all(self, ctx, port, data):
        wb = self.word_bytes
        words = [int.from_bytes(data[i:i + wb], "little") for i in range(0, len(data), wb)]
        i = 0
        ctx.set(port.req.valid, 1)
        while i < len(words):
            ctx.set(port.req.payload, {"addr": i, "write": 1, "data": words[i], "mask": -1})
            _, _, ready = await ctx.tick().sample(port.req.ready)
            i += bool(ready)
        ctx.set(port.req.valid, 0)

    async def _sram_read_all(self, ctx, port):
        n = self.sram_size // self.word_bytes
        out, i = [], 0
        ctx.set(port.resp.ready, 1)
        while len(out) < n:
            ctx.set(port.req.valid, i < n)
            ctx.set(port.req.payload, {"addr": min(i, n - 1), "write": 0, "data": 0, "mask": 0})
            _, _, ready, rvalid, rdata = await ctx.tick().sample(
                port.req.ready, port.resp.valid, port.resp.payload)
            i += bool(ready and i < n)
            if rvalid:
                out.append(int(rdata))
        ctx.set(port.req.valid, 0)
        ctx.set(port.resp.ready, 0)
        return b"".join(w.to_bytes(self.word_bytes, "little") for w in out)

    async def _monitor(self, ctx):
        mem = self.h.dma.mem
        sigs = [s for r in mem.req for s in (r.valid, r.ready)] + \
               [s for r in mem.resp for s in (r.valid, r.ready)]
        in_flight = 0
        async for _, _, *v in ctx.tick().sample(*sigs):
            n_req = 2 * len(mem.req)
            in_flight += sum(v[i] and v[i + 1] for i in range(0, n_req, 2))
            in_flight -= sum(v[i] and v[i + 1] for i in range(n_req, len(v), 2))
            assert in_flight >= 0, "a response without a request"
            self.max_in_flight = max(self.max_in_flight, in_flight)

    def run(self, descriptors, timeout=20000):
        dma, port = self.h.dma, self.h.sram.ports[1]
        sim = Simulator(self.h)
        sim.add_clock(1e-9)

        async def memory(ctx):
            await self.model.serve(ctx, dma.mem)

        async def tb(ctx):
            await self._sram_write_all(ctx, port, self.sram_init)
            for to_dram, da, sa, n in descriptors:
                await streams.put(ctx, dma.desc, self.layout.const(
                    {"to_dram": to_dram, "dram_addr": da, "sram_addr": sa, "n_bytes": n}).as_bits())
                ctx.set(dma.status.ready, 1)
                for _ in range(timeout):
                    _, _, valid, payload = await ctx.tick().sample(dma.status.valid,
                                                                   dma.status.payload)
                    if valid:
                        break
                else:
                    raise AssertionError(f"no status within {timeout} cycles for "
                                         f"{(to_dram, da, sa, n)}")
                ctx.set(dma.status.ready, 0)
                self.statuses.append((Status(payload.code), int(payload.cycles)))
            self.bytes_moved = ctx.get(dma.bytes_moved)
            self.busy_cycles = ctx.get(dma.busy_cycles)
            assert not ctx.get(dma.busy)
            self.sram_final = await self._sram_read_all(ctx, port)

        sim.add_process(memory)
        sim.add_process(self._monitor)
        sim.add_testbench(tb)
        sim.run()
        return self


def expected_outcome(bench, descriptors):
    """Reference statuses, final SRAM, DRAM store and the log expected for each descriptor."""
    sram = bytearray(bench.sram_init)
    dram = SparseStore(CAP)
    for addr, data in bench.dram_init:
        dram.write(addr, data)
    codes, logs = [], []
    for desc in descriptors:
        code = dma_reference(desc, sram, dram, bench.sram_size, bench.word_bytes)
        codes.append(code)
        to_dram, da, _, n = desc
        n_bursts = n // BURST_BYTES if code == Status.OK else 0
        logs.append(sorted((bool(to_dram), da // BURST_BYTES + k, k) for k in range(n_bursts)))
    return {"codes": codes, "sram": bytes(sram), "dram": dram, "logs": logs}


def check(bench, descriptors, expected):
    """Everything observed agrees with the expectation."""
    assert [c for c, _ in bench.statuses] == expected["codes"]
    assert bench.sram_final == expected["sram"], "SRAM contents differ"
    regions = [(a, len(d)) for a, d in bench.dram_init] + \
              [(da, n) for (_, da, _, n), c in zip(descriptors, expected["codes"]) if c == Status.OK]
    for addr, n in regions:
        assert bench.model.dump(addr, n) == expected["dram"].read(addr, n), \
            f"DRAM [{addr:#x}, +{n}) differs"
    # the log, split per descriptor (one at a time, so contiguous in acceptance order)
    log, pos = bench.model.log, 0
    for want in expected["logs"]:
        got = sorted((w, burst, tag) for _, _, w, burst, tag in log[pos:pos + len(want)])
        assert got == want, "memory requests differ"
        pos += len(want)
    assert pos == len(log), f"{len(log) - pos} unexpected memory requests"
    assert bench.max_in_flight <= bench.max_outstanding
    moved = sum(n for (_, _, _, n), c in zip(descriptors, expected["codes"]) if c == Status.OK)
    assert bench.bytes_moved == moved


def run_and_check(descriptors, **bench_kw):
    bench = Bench(**bench_kw).run(descriptors)
    check(bench, descriptors, expected_outcome(bench, descriptors))
    return bench


# ---- transfers ------------------------------------------------------------------------------

TRANSFERS = {
    # name: (dram regions to preload, descriptors)
    "from_dram_1_burst": ([(0x1000, 64)], [(0, 0x1000, 0, 64)]),
    "from_dram_7_bursts_word_aligned": ([(0x12340, 448)], [(0, 0x12340, 32, 448)]),
    "from_dram_60_bursts": ([(0x40000, 3840)], [(0, 0x40000, 0x40, 3840)]),
    "to_dram_1_burst": ([], [(1, 0x2000, 0, 64)]),
    "to_dram_7_bursts_word_aligned": ([], [(1, 0x2040, 96, 448)]),
    "to_dram_60_bursts": ([], [(1, 0x7_0000_0000, 0x100, 3840)]),
    "top_of_dimm": ([(CAP - 320, 320)], [(0, CAP - 320, 0, 320), (1, CAP - 64, SRAM - 64, 64),
                                         (1, CAP - 192, 0x200, 192)]),
    "top_of_sram": ([(0x8000, 256)], [(0, 0x8000, SRAM - 192, 192), (0, 0x8000, SRAM - 160, 128),
                                      (1, 0x9000, SRAM - 96, 64), (1, 0xA000, SRAM - 224, 192)]),
    "whole_sram": ([(0x100000, SRAM)], [(0, 0x100000, 0, SRAM), (1, 0x200000, 0, SRAM)]),
}


@pytest.mark.parametrize("name", sorted(TRANSFERS))
def test_transfer(name):
    dram_init, descriptors = TRANSFERS[name]
    run_and_check(descriptors, dram_init=dram_init)


@pytest.mark.parametrize("accept_prob,max_outstanding,seed", [
    (1.0, 16, 1), (0.5, 16, 2), (0.3, 4, 3), (0.8, 1, 4), (0.9, 2, 5),
])
def test_round_trip_with_back_pressure(accept_prob, max_outstanding, seed):
    """DRAM -> SRAM -> DRAM elsewhere returns the same bytes, whatever the memory does."""
    src, dst, n, sa = 0x3_0000_1000, 0x5_0000_0040, 1024 + 192, 0x320
    bench = run_and_check([(0, src, sa, n), (1, dst, sa, n)], dram_init=[(src, n)],
                          seed=seed, accept_prob=accept_prob, max_outstanding=max_outstanding,
                          min_latency=1, max_latency=60)
    assert bench.model.dump(dst, n) == bench.model.dump(src, n) == bench.dram_init[0][1]
    if max_outstanding <= 4:                         # a small bound is reached (never passed: check)
        assert bench.max_in_flight == max_outstanding


@pytest.mark.parametrize("word_bits", [128, 512])
def test_other_word_widths(word_bits):
    src, dst = 0x4000, 0x8000
    run_and_check([(0, src, 0x400 + word_bits // 8, 640), (1, dst, word_bits // 8, 640)],
                  sram_size=4096, word_bits=word_bits, dram_init=[(src, 640)])


def test_default_configuration():
    """The default build (32 GiB DIMM, 4 ranks, 128 KiB SRAM) has the documented widths and elaborates."""
    dma = DmaEngine()
    layout = dma.descriptor_layout
    assert [(name, field.width) for name, field in layout] == \
        [("to_dram", 1), ("dram_addr", 35), ("sram_addr", 17), ("n_bytes", 32)]
    assert (len(dma.mem.req), len(dma.mem.resp), dma.sram_addr_bits) == (2, ORG.ranks, 12)
    rtlil.convert(dma)


# ---- errors: reported at once, nothing touched ------------------------------------------

ERRORS = {
    "misaligned_dram": ((0, 0x1008, 0, 64), Status.MISALIGNED),
    "misaligned_n_bytes": ((1, 0x1000, 0, 100), Status.MISALIGNED),
    "misaligned_sram": ((0, 0x1000, 16, 64), Status.MISALIGNED),
    "misaligned_before_range": ((1, CAP - 8, 0, 64), Status.MISALIGNED),
    "dram_range_from_dram": ((0, CAP - 64, 0, 128), Status.DRAM_RANGE),
    "dram_range_to_dram": ((1, CAP - 64, 0, 128), Status.DRAM_RANGE),
    "dram_range_huge": ((1, CAP - (1 << 31), 0, (1 << 32) - 64), Status.DRAM_RANGE),
    "sram_range_from_dram": ((0, 0x1000, SRAM - 64, 128), Status.SRAM_RANGE),
    "sram_range_to_dram": ((1, 0x1000, SRAM - 32, 64), Status.SRAM_RANGE),
    "sram_range_long": ((1, 0x1000, 0, SRAM + 64), Status.SRAM_RANGE),
    "zero_length": ((0, 0x1000, 0x40, 0), Status.OK),
    "zero_length_at_top": ((1, CAP - 64, SRAM - 32, 0), Status.OK),
}


def test_errors_change_nothing():
    """Every error (and a zero length) is reported at once and touches neither DRAM nor SRAM."""
    names = sorted(ERRORS)
    bench = Bench(dram_init=[(0x1000, 256), (CAP - 256, 256)]).run([ERRORS[n][0] for n in names])
    for name, (code, cycles) in zip(names, bench.statuses):
        assert code == ERRORS[name][1], name
        assert cycles <= 3, f"{name}: an error is reported at once, not after {cycles} cycles"
    assert bench.model.log == [], "a memory request was issued"
    assert bench.sram_final == bench.sram_init, "the SRAM changed"
    assert bench.model.dump(0x1000, 256) == bench.dram_init[0][1]
    assert bench.model.dump(CAP - 256, 256) == bench.dram_init[1][1]
    assert bench.bytes_moved == 0


def test_errors_then_transfer():
    """Errors leave the engine ready for the next descriptor."""
    descs = [ERRORS[name][0] for name in sorted(ERRORS)] + [(0, 0x1000, 0x100, 256),
                                                           (1, 0x2000, 0x100, 256)]
    run_and_check(descs, dram_init=[(0x1000, 256)])


def test_checker_can_fail():
    """A deliberately wrong expectation (one SRAM byte, one DRAM byte, one code) is caught."""
    descs = [(0, 0x1000, 0x40, 128), (1, 0x3000, 0x40, 128)]
    bench = Bench(dram_init=[(0x1000, 128)]).run(descs)
    good = expected_outcome(bench, descs)
    check(bench, descs, good)

    bad = expected_outcome(bench, descs)
    bad["sram"] = bad["sram"][:0x50] + bytes([bad["sram"][0x50] ^ 1]) + bad["sram"][0x51:]
    with pytest.raises(AssertionError, match="SRAM"):
        check(bench, descs, bad)
    bad = expected_outcome(bench, descs)
    bad["dram"].write(0x3010, bytes([bad["dram"].read(0x3010, 1)[0] ^ 0x80]))
    with pytest.raises(AssertionError, match="DRAM"):
        check(bench, descs, bad)
    bad = expected_outcome(bench, descs)
    bad["codes"][1] = Status.SRAM_RANGE
    with pytest.raises(AssertionError):
        check(bench, descs, bad)


# ---- bandwidth ------------------------------------------------------------------------------

@pytest.mark.parametrize("to_dram", [0, 1])
def test_bandwidth(to_dram):
    """Memory always ready, fixed latency 20: both directions near the SRAM port's 32 B/cycle."""
    n = 16384
    bench = run_and_check([(to_dram, 0x100000, 0, n)], dram_init=[(0x100000, n)], sram_size=n,
                          accept_prob=1.0, min_latency=20, max_latency=20)
    cycles = bench.statuses[0][1]
    print(f"{'SRAM->DRAM' if to_dram else 'DRAM->SRAM'}: {n} B in {cycles} cycles = "
          f"{n / cycles:.2f} B/cycle")
    assert n / cycles >= 30, f"{n / cycles:.2f} B/cycle"
    assert cycles <= n // 32 + 20 + 10      # one word per cycle plus latency and a few


# ---- parameters -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs,quoted", [
    ({"max_outstanding": 0}, "0"),
    ({"max_outstanding": 2000}, "2000"),
    ({"sram_word_bits": 1024}, "1024"),
    ({"sram_word_bits": 96}, "96"),
    ({"sram_size_bytes": 3 << 20}, str(3 << 20)),
    ({"sram_size_bytes": 4 << 20}, str(4 << 20)),
    ({"capacity_bytes": 1000}, "1000"),
    ({"ranks": 0}, "0"),
])
def test_bad_parameters(kwargs, quoted):
    with warnings.catch_warnings():
        # the half-built component is garbage: no "created but never used" warning for it
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=quoted):
            DmaEngine(**kwargs)
        gc.collect()
