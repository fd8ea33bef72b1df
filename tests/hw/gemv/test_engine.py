"""Amaranth-simulator tests of the whole GEMV engine on tiny configurations.

Fast, bit-exact checks of every dtype x operation at 2-3 units; the cocotb
benches (Verilator) cover larger configurations and constrained-random traffic.
"""

import random

import pytest
import torch
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.gemv.engine import GemvEngine


def run_on_engine(job: GemvJob, seed=0, idle_prob=0.0, stall_prob=0.0, trace=None):
    """Run ``job``; (result beats, finished). ``trace``: a list that gets, per cycle,
    ``(weight_committed, weights.valid, weights.ready)``."""
    s = job.shape
    dut = GemvEngine(n_units=s.n_units, max_batch=s.max_batch, radix_bits=s.radix_bits,
                     index_bits=s.index_bits, step_bits=s.step_bits)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    rng = random.Random(seed)
    beats, state = [], {"done": False}
    expected_beats = len(job.expected_beats())

    async def command(ctx):
        await streams.put(ctx, dut.cmd, job.command())

    async def weights(ctx):
        for beat in job.weight_beats():
            await streams.put(ctx, dut.weights, beat, rng, idle_prob)

    async def acts(ctx):
        for word in job.act_words():
            await streams.put(ctx, dut.acts, word, rng, idle_prob)

    async def results(ctx):
        for _ in range(expected_beats):
            p = await streams.get(ctx, dut.results, rng, stall_prob)
            beats.append({"index": p.index, "batch": p.batch, "count": p.count,
                          "data": [int(v) for v in p.data], "last": bool(p.last)})
        # nothing more may come out, and the engine must finish
        for _ in range(40):
            assert not ctx.get(dut.results.valid), "extra result beat"
            if not ctx.get(dut.busy):
                state["done"] = True
                return
            await ctx.tick()

    async def monitor(ctx):
        async for _, _, committed, valid, ready in ctx.tick().sample(
                dut.weight_committed, dut.weights.valid, dut.weights.ready):
            trace.append((committed, valid, ready))

    for tb in (command, weights, acts, results):
        sim.add_testbench(tb)
    if trace is not None:
        sim.add_testbench(monitor, background=True)
    sim.run()
    return beats, state["done"]


def make_job(op, dtype, n_out, n_in, batch, n_idx=None, units=3, seed=0, max_batch=4):
    gen = torch.Generator().manual_seed(seed)
    tdt = {Dtype.FP16: torch.float16, Dtype.BF16: torch.bfloat16, Dtype.INT8: torch.int8}[dtype]
    if dtype == Dtype.INT8:
        W = torch.randint(-128, 128, (n_out if op != "col_gather" else n_in, n_in if op != "col_gather" else n_out), generator=gen).to(tdt)
        X = torch.randint(-128, 128, (batch, n_in), generator=gen).to(tdt)
    else:
        shape_w = (n_out, n_in) if op != "col_gather" else (n_in, n_out)
        W = torch.randn(shape_w, generator=gen).to(tdt)
        X = torch.randn(batch, n_in, generator=gen).to(tdt)
    idx = None
    if op != "dense":
        limit = W.shape[0]
        idx = torch.randperm(limit, generator=gen)[:n_idx] if n_idx is not None else None
    return GemvJob(op, dtype, W, X, idx, EngineShape(n_units=units, max_batch=max_batch))


@pytest.mark.parametrize("dtype", list(Dtype))
@pytest.mark.parametrize("op", ["dense", "row_gather", "col_gather"])
def test_engine_bit_exact(op, dtype):
    job = make_job(op, dtype, n_out=7 if op != "col_gather" else 19, n_in=21, batch=2,
                   n_idx=5, seed=int(dtype) * 7 + len(op))
    beats, done = run_on_engine(job, seed=1, idle_prob=0.2, stall_prob=0.3)
    assert done
    assert beats == job.expected_beats()


@pytest.mark.parametrize("dtype", list(Dtype))
@pytest.mark.parametrize("batch", [1, 2])
def test_weight_committed_precedes_each_beat(dtype, batch):
    """``weight_committed`` comes only while a beat is offered, once per beat at least, 7 cycles
    before the engine takes the beat (FP16, BF16) or 7 to 15 (INT8: up to 8 cycles of start
    spacing first): the weight streamer frees the beat's ring slot then (``release``)."""
    seed = int(dtype) * 10 + batch
    job = make_job("dense", dtype, n_out=7, n_in=53, batch=batch, seed=seed)
    trace = []
    beats, done = run_on_engine(job, seed=seed, idle_prob=0.3, stall_prob=0.2, trace=trace)
    assert done and beats == job.expected_beats(), f"seed {seed}"
    first = None
    gaps = []
    for cycle, (committed, valid, ready) in enumerate(trace):
        assert not committed or valid, f"seed {seed}: committed without a beat, cycle {cycle}"
        if committed and first is None:
            first = cycle
        if valid and ready:
            assert first is not None, f"seed {seed}: beat taken uncommitted, cycle {cycle}"
            gaps.append(cycle - first)
            first = None
    assert len(gaps) == len(job.weight_beats())
    if dtype == Dtype.INT8:
        assert all(7 <= g <= 15 for g in gaps), f"seed {seed}: {gaps}"
    else:
        assert set(gaps) == {7}, f"seed {seed}: {gaps}"
