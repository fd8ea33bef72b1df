"""cocotb bench of the GEMV engine (Verilator), driven by ``tests/hw/gemv/test_engine_cocotb.py``.

Structure: drivers (command, weight beats, activation words; random idle
cycles) -> monitors (record every handshake actually seen on the ports) ->
reference model (``cosim.gemv.engine_model``: golden model applied to the *observed*
traffic) -> in-order checker (every result beat, bit for bit, plus the
assembled output against the golden model of the original operands).
Results are taken with random back-pressure.

All signals are driven at the falling clock edge and sampled in the ReadOnly
phase that follows, so a handshake seen there completes at the next rising
edge, whatever the simulator's event ordering at the rising edge.

Environment (besides the DUT parameters from ``rtl_build.bench_params``):
``GEMV_JOBS`` random jobs per run (default 20), ``GEMV_IDLE`` / ``GEMV_STALL``
idle and back-pressure probabilities (default 0.2 / 0.3), ``GEMV_MAX_IN``
largest K or J of random jobs (default 40), ``GEMV_STATS`` a JSON file to which
per-job cycle counts are written.
"""

import os
import random
import time

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.gemv.cases import corner_jobs, random_job, random_values
from ndpdimm.cosim.gemv.engine_model import compare_beats, expected_beats_from_traffic
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.rtl.benches.streams import StreamSource, merge_stats, reset
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.formats import Dtype, gemv_command_layout, result_beat_layout, slot_cycles


class GemvEngineTB:
    def __init__(self, dut):
        self.dut = dut
        params = bench_params()
        self.shape = EngineShape(**{k: params[k] for k in params if k in EngineShape.__dataclass_fields__})
        self.cmd_layout = gemv_command_layout(self.shape.max_batch, self.shape.index_bits,
                                              self.shape.step_bits)
        self.result_layout = result_beat_layout(self.shape.max_batch, self.shape.index_bits)
        self.idle = float(os.environ.get("GEMV_IDLE", "0.2"))
        self.stall = float(os.environ.get("GEMV_STALL", "0.3"))
        self.stats = []
        cocotb.start_soon(Clock(dut.clk, 1, unit="ns").start())

    async def reset(self):
        d = self.dut
        await reset(d, (d.cmd__valid, d.weights__valid, d.acts__valid, d.results__ready))

    def _decode_result(self, bits):
        v = self.result_layout.from_bits(bits)
        return {"index": int(v.index), "batch": int(v.batch), "count": int(v.count),
                "data": [int(x) for x in v.data], "last": bool(v.last)}

    def _decode_command(self, bits):
        v = self.cmd_layout.from_bits(bits)
        return {k: int(getattr(v, k)) for k in ("mode", "dtype", "batch_minus_one", "n_out", "n_steps")}

    async def run_command(self, command_bits, weights, acts, rng, *, max_cycles,
                          idle=None, stall=None):
        """Drive one command and its traffic; return what the monitors observed."""
        d = self.dut
        idle = self.idle if idle is None else idle
        stall = self.stall if stall is None else stall
        sources = [StreamSource(d.cmd__valid, d.cmd__payload, [command_bits], rng, idle),
                   StreamSource(d.weights__valid, d.weights__payload, weights, rng, idle),
                   StreamSource(d.acts__valid, d.acts__payload, acts, rng, idle)]
        readies = [d.cmd__ready, d.weights__ready, d.acts__ready]
        seen = {"cmd": [], "weights": [], "acts": [], "results": [], "done": 0, "error": 0}
        names = ["cmd", "weights", "acts"]
        cycles, first_cycle, done_cycle, after_done = 0, None, None, 0
        while True:
            await FallingEdge(d.clk)
            for src in sources:
                src.drive()
            d.results__ready.value = int(rng.random() >= stall)
            await ReadOnly()
            for name, src, ready in zip(names, sources, readies):
                if src.valid.value == 1 and ready.value == 1:
                    seen[name].append(src.payload.value.to_unsigned())
                    src.accepted()
                    if name == "cmd":
                        first_cycle = cycles
            if d.results__valid.value == 1 and d.results__ready.value == 1:
                seen["results"].append(self._decode_result(d.results__payload.value.to_unsigned()))
            if d.done.value == 1:
                seen["done"] += 1
                done_cycle = cycles
            if d.error.value == 1:
                seen["error"] += 1
            cycles += 1
            if done_cycle is not None:
                after_done += 1
                if after_done > 4:           # watch a few cycles for anything extra
                    break
            if cycles > max_cycles:
                raise AssertionError(f"engine did not finish within {max_cycles} cycles: "
                                     f"consumed {[s.next for s in sources]} of "
                                     f"{[len(s.items) for s in sources]} items, "
                                     f"{len(seen['results'])} result beats out")
        assert d.busy.value == 0, "engine still busy after done"
        seen["cycles"] = done_cycle - first_cycle + 1
        seen["all_sent"] = all(s.exhausted for s in sources)
        return seen

    async def run_job(self, name, job, rng, corrupt_model=False, **kw):
        """Run one GemvJob end to end and check it; return its cycle count."""
        P = slot_cycles(job.dtype, self.shape.radix_bits)
        budget = (job.n_groups * (max(job.n_steps, 1) * job.batch * P + 2 * job.shape.n_units
                                  * job.batch + 10) + 100) * 8
        seen = await self.run_command(job.command_bits(self.cmd_layout), job.weight_beats(),
                                      job.act_words(), rng, max_cycles=budget, **kw)
        assert seen["done"] == 1, f"{name}: done pulsed {seen['done']} times"
        assert seen["error"] == 0, f"{name}: engine flagged an error"
        assert seen["all_sent"], f"{name}: engine did not consume all traffic"
        command = self._decode_command(seen["cmd"][0])
        model = expected_beats_from_traffic(command, seen["weights"], seen["acts"],
                                            self.shape.n_units)
        if corrupt_model and model:
            model[len(model) // 2]["data"][0] ^= 1 << 7
        compare_beats(seen["results"], model, f"{name}: ")
        # end to end: the assembled output is the golden model of the original operands
        got = job.assemble(seen["results"])
        if job.n_out and not (got == job.result_bits()).all():
            raise AssertionError(f"{name}: output differs from golden model of the operands")
        self.stats.append({"name": name, "op": job.op, "dtype": job.dtype.name, "batch": job.batch,
                           "n_out": job.n_out, "n_steps": job.n_steps, "macs": job.macs,
                           "weight_bytes": job.weight_bytes, "cycles": seen["cycles"]})
        self.last_output = got
        return seen["cycles"]

    def write_stats(self, test_name, seconds, cycles_simulated):
        merge_stats(os.environ.get("GEMV_STATS"), test_name,
                    {"params": bench_params(), "wall_seconds": seconds,
                     "cycles_simulated": cycles_simulated, "jobs": self.stats})


def _rng():
    return random.Random(cocotb.RANDOM_SEED)


@cocotb.test()
async def corner_cases(dut):
    """Directed corner cases for every dtype: specials, tiny/odd sizes, empty index lists."""
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    for dtype in Dtype:
        for name, job in corner_jobs(tb.shape, dtype, seed=rng.getrandbits(16)):
            await tb.run_job(f"{dtype.name} {name}", job, rng)


@cocotb.test()
async def random_traffic(dut):
    """Constrained-random jobs back to back (every dtype x op x batch), idle cycles and stalls."""
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    n_jobs = int(os.environ.get("GEMV_JOBS", "20"))
    max_in = int(os.environ.get("GEMV_MAX_IN", "40"))
    start, total = time.monotonic(), 0
    for n in range(n_jobs):
        # cycle through every dtype x op so even short runs cover them all
        dtype = list(Dtype)[n % 3]
        op = ("dense", "row_gather", "col_gather")[(n // 3) % 3]
        job = random_job(tb.shape, rng, dtype=dtype, op=op, max_in=max_in)
        total += await tb.run_job(f"random {n} ({op} {dtype.name} B={job.batch} "
                                  f"n_out={job.n_out} steps={job.n_steps})", job, rng)
    tb.write_stats("random_traffic", time.monotonic() - start, total)


@cocotb.test()
async def streaming_throughput(dut):
    """No idle cycles, no back-pressure: one large job per dtype at full rate; cycle counts recorded."""
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    start, total = time.monotonic(), 0
    n_in = int(os.environ.get("GEMV_THROUGHPUT_K", "256"))
    for dtype in Dtype:
        for batch in sorted({1, tb.shape.max_batch}):
            job = GemvJob("dense", dtype, random_values((2 * tb.shape.n_units, n_in), dtype, rng),
                          random_values((batch, n_in), dtype, rng), None, tb.shape)
            total += await tb.run_job(f"throughput {dtype.name} B={batch}", job, rng,
                                      idle=0.0, stall=0.0)
    tb.write_stats("streaming_throughput", time.monotonic() - start, total)


@cocotb.test()
async def run_job_file(dut):
    """Run the jobs saved in ``$GEMV_JOB_FILE`` (``cosim.rtl.gemv.run_jobs``); save outputs and cycles.

    Every job is checked exactly like the other tests (model from observed
    traffic, golden model of the operands) before its output is saved.
    """
    job_file = os.environ.get("GEMV_JOB_FILE")
    if not job_file:
        raise RuntimeError("run_job_file needs GEMV_JOB_FILE")
    import torch
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    spec = torch.load(job_file, weights_only=False)
    outputs = []
    start, total = time.monotonic(), 0
    for n, item in enumerate(spec["jobs"]):
        job = GemvJob(item["op"], item["dtype"], item["W"], item["X"], item["idx"], tb.shape)
        label = item.get("label") or f"job {n}"
        t0 = time.monotonic()
        cycles = await tb.run_job(label, job, rng, idle=spec["idle"], stall=spec["stall"])
        total += cycles
        outputs.append({"label": label, "bits": torch.from_numpy(tb.last_output.astype("int64")),
                        "cycles": cycles, "wall_seconds": time.monotonic() - t0})
        dut._log.info("%s: %d cycles (%.1f s wall)", label, cycles, time.monotonic() - t0)
    torch.save({"outputs": outputs, "wall_seconds": time.monotonic() - start,
                "cycles_simulated": total}, spec["result_file"])


@cocotb.test()
async def reserved_dtype_rejected(dut):
    """A command with the reserved dtype code 3 completes with ``error`` and consumes nothing."""
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    bits = tb.cmd_layout.const({"mode": 0, "dtype": 3, "batch_minus_one": 0, "n_out": 5,
                                "n_steps": 2}).as_bits()
    seen = await tb.run_command(bits, [1, 2], [3, 4], rng, max_cycles=200)
    assert seen["done"] == 1 and seen["error"] == 1
    assert seen["weights"] == [] and seen["acts"] == [] and seen["results"] == []
    # and the engine still works afterwards
    job = random_job(tb.shape, rng, dtype=Dtype.FP16, op="dense", max_in=9)
    await tb.run_job("after reserved dtype", job, rng)


@cocotb.test()
async def checker_catches_corrupted_model(dut):
    """The checker is not vacuous: a single flipped bit in the model's expectation fails the run."""
    tb = GemvEngineTB(dut)
    await tb.reset()
    rng = _rng()
    job = random_job(tb.shape, rng, dtype=Dtype.BF16, op="dense", max_in=12)
    try:
        await tb.run_job("corrupted model", job, rng, corrupt_model=True)
    except AssertionError as e:
        assert "differs" in str(e), f"failed for another reason: {e}"
        dut._log.info("checker reported the corrupted model as expected: %s", str(e).splitlines()[0])
    else:
        raise AssertionError("a corrupted model was not detected by the checker")
