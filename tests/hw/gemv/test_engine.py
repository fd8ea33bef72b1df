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


def run_on_engine(job: GemvJob, seed=0, idle_prob=0.0, stall_prob=0.0):
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

    for tb in (command, weights, acts, results):
        sim.add_testbench(tb)
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
