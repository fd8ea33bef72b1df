# amaranth: UnusedElaboratable=no
"""Amaranth-simulator tests of the weight streamer (``hw/memory/weight_streamer.py``).

Bench: the streamer's SRAM port is connected to a real ``BankedSram`` (the
testbench writes index lists through a second SRAM port), its memory port is
served by ``MemoryPortModel`` (random accept back-pressure, random latency,
random response order), the DRAM images and descriptors come from
``cosim.weight_layout``, a consumer takes beats with random back-pressure.
Every job's beats must equal ``GemvJob.weight_beats()`` bit for bit.

(First line: the parameter tests build components only to check errors.)
"""

import random

import pytest
import torch
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.dram.port_model import MemoryPortModel
from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_job, random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.hw.formats import Dtype, GemvMode
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry
from ndpdimm.hw.memory.weight_streamer import WeightStreamer

SRAM = SramGeometry(size_bytes=4096, n_banks=4, word_bits=256, n_ports=2)
REGION = 1 << 20          # DRAM bytes per job image


class Bench(Elaboratable):
    """The streamer wired to a real SRAM (port 0); port 1 is the testbench's."""

    def __init__(self, **params):
        self.sram = BankedSram(SRAM.size_bytes, SRAM.n_banks, SRAM.word_bits, SRAM.n_ports)
        self.dut = WeightStreamer(sram=SRAM, **params)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = self.sram
        m.submodules.dut = self.dut
        wiring.connect(m, self.dut.sram, self.sram.ports[0])
        return m


def run(descs, *, n_units, ring_beats=8, dram=(), sram_bytes=b"", seed=0, stall=0.3,
        mem=None, max_cycles=20000, hold=None):
    """Run descriptors back to back; return (per-descriptor (status, beats), model, bench).

    ``hold=None``: the consumer takes a beat whenever one is offered and it is not stalling
    (probability ``stall``). ``hold=(H, release)``: it starts a beat at most every ``H + 1``
    cycles, as the GEMV engine does, pulsing ``release`` then if ``release``, and accepts it
    ``H`` cycles later (``H = 0``: at once); the payload must not change while it is held
    (``bench.held_changes`` counts the cycles it did)."""
    bench = Bench(n_units=n_units, ring_beats=ring_beats)
    dut = bench.dut
    model = MemoryPortModel(seed=seed, **(mem or {}))
    for addr, image in dram:
        model.load(addr, image)
    sram_bytes = sram_bytes + bytes(-len(sram_bytes) % SRAM.word_bytes)
    rng = random.Random(seed + 1)
    beats, out = [], []
    state = {"done": False}

    async def memory(ctx):
        await model.serve(ctx, dut.mem, stop=lambda: state["done"])

    async def holding_consumer(ctx):
        H, release = hold
        bench.held_changes = 0
        while True:
            if rng.random() < stall:
                await ctx.tick()
                continue
            if not ctx.get(dut.beats.valid):
                await ctx.tick()
                continue
            word = ctx.get(dut.beats.payload.as_value())
            ctx.set(dut.release, release)
            ctx.set(dut.beats.ready, H == 0)
            await ctx.tick()
            ctx.set(dut.release, 0)
            for k in range(H):
                ctx.set(dut.beats.ready, k == H - 1)
                bench.held_changes += ctx.get(dut.beats.payload.as_value()) != word
                await ctx.tick()
            ctx.set(dut.beats.ready, 0)
            beats.append(word)
            for _ in range(7 - H):
                await ctx.tick()

    async def consumer(ctx):
        while True:
            ready = rng.random() >= stall
            ctx.set(dut.beats.ready, ready)
            _, _, valid, payload = await ctx.tick().sample(dut.beats.valid,
                                                          dut.beats.payload.as_value())
            if ready and valid:
                beats.append(payload)

    async def main(ctx):
        port = bench.sram.ports[1]
        for w in range(len(sram_bytes) // SRAM.word_bytes):
            word = int.from_bytes(sram_bytes[w * SRAM.word_bytes:(w + 1) * SRAM.word_bytes], "little")
            if word:
                await streams.put(ctx, port.req, SRAM.request_bits(w, write=True, data=word))
        for desc in descs:
            first = len(beats)
            await streams.put(ctx, dut.desc, dut.descriptor_layout.const(desc).as_bits())
            status = await streams.get(ctx, dut.status)
            out.append((dict(code=int(status.code), bursts=int(status.bursts),
                             cycles=int(status.cycles)), beats[first:]))
        state["counters"] = {name: ctx.get(getattr(dut, name))
                             for name in ("bursts_read", "busy_cycles", "data_wait_cycles")}
        state["done"] = True
        await ctx.tick().repeat(2)

    async def watchdog(ctx):
        for _ in range(max_cycles):
            await ctx.tick()
        raise AssertionError(f"streamer did not finish {len(descs)} descriptors in "
                             f"{max_cycles} cycles ({len(out)} done)")

    sim = Simulator(bench)
    sim.add_clock(1e-9)
    sim.add_testbench(memory, background=True)
    sim.add_testbench(consumer if hold is None else holding_consumer, background=True)
    sim.add_testbench(watchdog, background=True)
    sim.add_testbench(main)
    sim.run()
    bench.counters = state["counters"]
    return out, model, bench


def job_set(U, gen):
    """Dense (odd K, N not a multiple of U), row gather, column gather, empty jobs."""
    shape = EngineShape(n_units=U)
    t = random_values
    jobs = [
        GemvJob("dense", Dtype.FP16, t((2 * U + 3, 77), Dtype.FP16, gen), t((1, 77), Dtype.FP16, gen),
                shape=shape),
        GemvJob("dense", Dtype.BF16, t((5, 41), Dtype.BF16, gen), t((1, 41), Dtype.BF16, gen),
                shape=shape),
        GemvJob("dense", Dtype.INT8, t((U + 1, 99), Dtype.INT8, gen), t((1, 99), Dtype.INT8, gen),
                shape=shape),
        GemvJob("row_gather", Dtype.FP16, t((20, 45), Dtype.FP16, gen), t((1, 45), Dtype.FP16, gen),
                [gen.randrange(20) for _ in range(2 * U + 3)], shape=shape),
        GemvJob("row_gather", Dtype.INT8, t((7, 200), Dtype.INT8, gen), t((1, 200), Dtype.INT8, gen),
                [6, 0, 6, 3], shape=shape),
        GemvJob("col_gather", Dtype.FP16, t((9, 16 * U - 5), Dtype.FP16, gen),
                t((1, 9), Dtype.FP16, gen), [3, 0, 8, 3, 5, 5, 1], shape=shape),
        GemvJob("col_gather", Dtype.BF16, t((4, 3), Dtype.BF16, gen), t((1, 4), Dtype.BF16, gen),
                [2, 1], shape=shape),
        GemvJob("col_gather", Dtype.INT8, t((11, 16 * U + 3), Dtype.INT8, gen),
                t((1, 11), Dtype.INT8, gen), [gen.randrange(11) for _ in range(13)], shape=shape),
        GemvJob("row_gather", Dtype.FP16, t((6, 5), Dtype.FP16, gen), t((1, 5), Dtype.FP16, gen),
                [], shape=shape),
        GemvJob("col_gather", Dtype.INT8, t((6, 35), Dtype.INT8, gen), t((1, 6), Dtype.INT8, gen),
                [], shape=shape),
    ]
    return jobs


def place(jobs):
    """DRAM images, SRAM index bytes and descriptors; index lists start at odd entry offsets."""
    dram, sram, descs = [], bytearray(), []
    for i, job in enumerate(jobs):
        base = (i + 1) * REGION
        dram.append((base, weight_layout.dram_image(job)))
        sram += bytes(4 * (i % 7 + 1))                     # misalign the list inside its word
        idx_addr = len(sram)
        sram += weight_layout.index_bytes(job.idx)
        descs.append(weight_layout.descriptor(job, base, idx_addr))
    assert len(sram) <= SRAM.size_bytes
    return dram, bytes(sram), descs


@pytest.mark.parametrize("n_units", [4, 8])
def test_jobs_match_golden_beats(n_units):
    jobs = job_set(n_units, random.Random(n_units))
    dram, sram, descs = place(jobs)
    out, model, bench = run(descs, n_units=n_units, dram=dram, sram_bytes=sram, seed=n_units)
    check_jobs(jobs, out, model)
    assert bench.counters["bursts_read"] == model.reads
    assert 0 < bench.counters["data_wait_cycles"] < bench.counters["busy_cycles"]


@pytest.mark.parametrize("n_units,seed", [(4, 11), (8, 12)])
def test_random_jobs(n_units, seed):
    gen = random.Random(seed)
    shape = EngineShape(n_units=n_units, max_batch=1)
    jobs = [random_job(shape, gen, max_in=70) for _ in range(12)]
    dram, sram, descs = place(jobs)
    out, model, _ = run(descs, n_units=n_units, dram=dram, sram_bytes=sram, seed=seed,
                        stall=gen.choice([0.0, 0.5]))
    check_jobs(jobs, out, model)


def check_jobs(jobs, out, model):
    assert len(out) == len(jobs)
    for job, (status, beats) in zip(jobs, out):
        assert status["code"] == Status.OK, (job.op, status)
        expected = job.weight_beats()
        assert len(beats) == len(expected), (job.op, job.dtype, len(beats), len(expected))
        assert beats == expected, (job.op, job.dtype)
        # DOT reads every (chunk, selected neuron) once; AXPY every in-pitch burst per step
        bpr = weight_layout.bursts_per_row(job.W.shape[1], job.dtype)
        if job.mode == GemvMode.DOT:
            want = bpr * job.n_out if job.n_steps else 0
        else:
            want = bpr * job.n_steps if job.n_out else 0
        assert status["bursts"] == want, (job.op, status, want)
    assert model.reads == sum(s["bursts"] for s, _ in out)


def test_small_ring_and_empty_dense():
    """The least ring (4 beats) with hard back-pressure; a dense job with K = 0."""
    gen = random.Random(5)
    U = 4
    shape = EngineShape(n_units=U)
    jobs = [GemvJob("dense", Dtype.FP16, random_values((9, 70), Dtype.FP16, gen),
                    random_values((1, 70), Dtype.FP16, gen), shape=shape),
            GemvJob("col_gather", Dtype.FP16, random_values((5, 40), Dtype.FP16, gen),
                    random_values((1, 5), Dtype.FP16, gen), [4, 4, 0], shape=shape)]
    dram, sram, descs = place(jobs)
    empty = dict(descs[0], n_cols=0)
    out, model, _ = run(descs + [empty], n_units=U, ring_beats=4, dram=dram, sram_bytes=sram,
                        seed=3, stall=0.6, mem={"accept_prob": 0.5})
    for job, (status, beats) in zip(jobs, out):
        assert status["code"] == Status.OK
        assert beats == job.weight_beats()
    assert out[2][0]["code"] == Status.OK and out[2][1] == [] and out[2][0]["bursts"] == 0


def test_checker_can_fail():
    """One corrupted DRAM byte must show up as a beat mismatch."""
    gen = random.Random(9)
    job = GemvJob("dense", Dtype.BF16, random_values((6, 30), Dtype.BF16, gen),
                  random_values((1, 30), Dtype.BF16, gen), shape=EngineShape(n_units=4))
    dram, sram, descs = place([job])
    base, image = dram[0]
    image = bytearray(image)
    image[64 * 3 + 5] ^= 0x10
    out, _, _ = run(descs, n_units=4, dram=[(base, bytes(image))], sram_bytes=sram)
    assert out[0][0]["code"] == Status.OK
    assert out[0][1] != job.weight_beats()


def _desc(**fields):
    d = {"mode": GemvMode.DOT, "gather": 0, "dtype": int(Dtype.FP16), "base": REGION,
         "n_rows": 8, "n_cols": 16, "idx_addr": 64, "n_idx": 4}
    d.update(fields)
    return d


CAPACITY = MemoryPortModel().org.capacity_bytes
ERRORS = [
    ("dtype 3", _desc(dtype=3), Status.BAD_FIELD),
    ("axpy without gather", _desc(mode=GemvMode.AXPY), Status.BAD_FIELD),
    ("n_out too large", _desc(n_rows=1 << 20), Status.BAD_FIELD),
    ("n_steps too large", _desc(n_cols=(1 << 20) - 1), Status.BAD_FIELD),
    ("gather n_steps too large", _desc(mode=GemvMode.AXPY, gather=1, n_idx=1 << 16),
     Status.BAD_FIELD),
    ("base misaligned", _desc(base=REGION + 32), Status.MISALIGNED),
    ("dram range", _desc(base=CAPACITY - 64 * 7), Status.DRAM_RANGE),
    ("dram range axpy", _desc(mode=GemvMode.AXPY, gather=1, base=CAPACITY - 64 * 8 * 15,
                              n_rows=8, n_cols=500), Status.DRAM_RANGE),
    ("idx misaligned", _desc(gather=1, idx_addr=66), Status.MISALIGNED),
    ("sram range", _desc(gather=1, idx_addr=SRAM.size_bytes - 12), Status.SRAM_RANGE),
    ("bad index", _desc(gather=1, n_idx=11), Status.BAD_INDEX),
    ("bad index axpy", _desc(mode=GemvMode.AXPY, gather=1, n_idx=11, n_rows=10),
     Status.BAD_INDEX),
]


def test_errors_have_no_side_effect():
    # index list at byte 64: entries 0..9 in range of n_rows 10, entry 10 = 10 (bad for 8 and 10)
    sram = bytes(64) + weight_layout.index_bytes(list(range(10)) + [10])
    descs = [d for _, d, _ in ERRORS]
    # a good descriptor at the end proves the streamer still works after every error
    good = _desc(gather=1, n_idx=10, n_rows=10)
    out, model, _ = run(descs + [good], n_units=4, sram_bytes=sram)
    for (name, _, code), (status, beats) in zip(ERRORS, out):
        assert status["code"] == code, (name, status)
        assert beats == [] and status["bursts"] == 0, name
    assert out[-1][0]["code"] == Status.OK and len(out[-1][1]) == 3 * 2
    assert len(model.log) == out[-1][0]["bursts"] == 10


def test_errors_before_any_request():
    """Each error alone: the memory sees no request at all."""
    sram = bytes(64) + weight_layout.index_bytes(list(range(10)) + [10])
    out, model, _ = run([d for _, d, _ in ERRORS], n_units=4, sram_bytes=sram)
    assert [s["code"] for s, _ in out] == [c for _, _, c in ERRORS]
    assert model.log == [] and all(beats == [] for _, beats in out)
    # an error status comes a few cycles after the descriptor (the pre-scan adds its words)
    assert all(s["cycles"] <= 8 for (name, _, c), (s, _) in zip(ERRORS, out) if c != Status.BAD_INDEX)


@pytest.mark.parametrize("seed", [0, 1])
def test_early_release_keeps_request_timing(seed):
    """A consumer holding each beat 7 cycles and pulsing ``release`` when it starts it gets the
    requests in the same cycles as one that accepts the beat at once (same start cycles), the
    same beats, and a payload that does not change while held. At the shortest memory latency
    the streamer allows (5), with random latency, back-pressure and stalls; a 4-beat ring so
    that slots are reused as soon as they are released. One job per run: the status (and so the
    next descriptor) comes when the last beat is accepted, 7 cycles later with the hold."""
    U = 4
    gen = random.Random(seed)
    jobs = [job for job in job_set(U, gen) if job.idx != []]
    mem = {"min_latency": 5, "max_latency": 30, "accept_prob": 0.7}
    for i, job in enumerate(jobs):
        dram, sram, descs = place([job])
        runs = {}
        for name, hold in (("held", (7, True)), ("at_once", (0, False)), ("held_late", (7, False))):
            print(f"seed={seed} job={i} consumer={name}")
            out, model, bench = run(descs, n_units=U, ring_beats=4, dram=dram, sram_bytes=sram,
                                    seed=seed, stall=0.2, mem=mem, hold=hold)
            assert out[0][0]["code"] == Status.OK
            assert out[0][1] == job.weight_beats()
            assert bench.held_changes == 0
            runs[name] = [c for c, *_ in model.log]
        assert runs["held"] == runs["at_once"]
        # without the release the held slots are freed 7 cycles later: later requests
        if len(runs["held"]) > 4:
            assert runs["held_late"] != runs["at_once"]


def test_throughput_dense():
    """Fixed latency, no back-pressure anywhere: the streamer keeps both lanes busy."""
    U = 8
    gen = random.Random(2)
    job = GemvJob("dense", Dtype.FP16, random_values((64, 256), Dtype.FP16, gen),
                  random_values((1, 256), Dtype.FP16, gen), shape=EngineShape(n_units=U))
    dram, sram, descs = place([job])
    out, model, bench = run(descs, n_units=U, ring_beats=32, dram=dram, sram_bytes=sram,
                            stall=0.0, mem={"accept_prob": 1.0, "min_latency": 10,
                                            "max_latency": 10})
    assert out[0][1] == job.weight_beats()
    cycles = [c for c, *_ in model.log]
    span = cycles[-1] - cycles[0] + 1
    rate = len(cycles) / span
    assert len(cycles) == 64 * 8
    assert rate >= 1.8, f"{len(cycles)} requests in {span} cycles = {rate:.2f}/cycle"


@pytest.mark.parametrize("params", [
    {"n_units": 6}, {"n_units": 2}, {"ring_beats": 2}, {"ring_beats": 12},
    {"n_units": 1024, "ring_beats": 16}, {"index_bits": 0}, {"org": "ddr4"},
])
def test_bad_parameters(params):
    with pytest.raises(ValueError, match=repr(next(iter(params.values())))[:4]):
        WeightStreamer(**params)


def test_weight_layout_roundtrip():
    """The DOT image puts chunk j of neuron n at (j*N + n)*64; AXPY neuron i at i*P."""
    W = torch.arange(3 * 40, dtype=torch.int64).reshape(3, 40).to(torch.int8)
    img = weight_layout.dot_image(W, Dtype.INT8)
    assert len(img) == weight_layout.image_bytes(3, 40, Dtype.INT8) == 3 * 1 * 64
    assert img[64:64 + 40] == bytes(range(40, 80)) and img[64 + 40:128] == bytes(24)
    W = torch.arange(2 * 70, dtype=torch.int64).reshape(2, 70).to(torch.int8)
    img = weight_layout.dot_image(W, Dtype.INT8)
    # chunk 1 of neuron 0 (bytes 64..69 of row 0) is the third burst
    assert img[128:134] == bytes(range(64, 70))
    img = weight_layout.axpy_image(W, Dtype.INT8)
    assert img[128:128 + 70] == bytes(range(70, 140)) and len(img) == 2 * 128
    assert weight_layout.index_bytes([1, 258]) == bytes([1, 0, 0, 0, 2, 1, 0, 0])


def test_index_prescan_cost():
    """The pre-scan reads one SRAM word per cycle: ~n_idx/8 + 6 cycles, bad entry last."""
    n_idx = 411
    sram = bytes(64) + weight_layout.index_bytes([0] * (n_idx - 1) + [10])
    out, model, _ = run([_desc(gather=1, n_idx=n_idx, n_rows=10)], n_units=4, sram_bytes=sram)
    words = (16 + n_idx - 1) // 8 - 16 // 8 + 1
    assert out[0][0]["code"] == Status.BAD_INDEX and model.log == []
    assert out[0][0]["cycles"] <= words + 6, (out[0][0], words)
