"""cocotb bench: GEMV fed from DRAM end to end (memory system + SRAM + streamer + DMA + GEMV engine).

What runs is the real RTL of ``hw/gemv/datapath.py`` against ``DramDevice``
(the DRAM model: every command timing-checked, data from the sparse store).
For each job the bench

1. writes the weights into the DRAM model in the streamer's layout
   (``cosim/gemv/weight_layout.py``) and, for a gather, the index list into DRAM;
2. copies the index list into the SRAM with the DMA engine (a real DMA
   descriptor, status checked);
3. sends the weight-streamer descriptor and the GEMV engine command, feeds the
   activation words (optionally with idle cycles) and takes the results
   (optionally with back-pressure);
4. checks the streamer's status, that the engine finished without error, and
   the assembled output bit for bit against the golden model.

It reports per job: NDP cycles from descriptor to streamer status, DRAM bursts
read, weight bytes per NDP cycle and its share of the peak (DRAM bytes per NDP
cycle from the DRAM config, 102.4 B for DDR4-3200 x 4 ranks at 1 GHz), row
hits/misses, refreshes, and - with competing host traffic - host read latency.

Environment: ``DG_JOBS`` JSON list of job specs for the ``jobs_from_env``
test (see :func:`job_from_spec`); ``DG_STATS`` JSON file the per-job figures
are merged into; ``DG_IDLE`` / ``DG_STALL`` activation idle and result
back-pressure probabilities (default 0 / 0).
"""

import json
import os
import random
import time

import cocotb
import torch
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.rtl.benches.dram_device import DramDevice, start_clocks, steady_state
from ndpdimm.cosim.rtl.benches.streams import merge_stats
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.formats import NDP_CLOCK_HZ, Dtype
from ndpdimm.hw.gemv.datapath import gemv_datapath_from_config
from ndpdimm.hw.memory.controller import POLICIES
from ndpdimm.hw.memory.dram import peak_bandwidth_bytes_per_s
from ndpdimm.hw.memory.port import BURST_BYTES, Status, memory_request_layout

__all__ = ["GemvDatapathTB", "job_from_spec"]

WEIGHT_BASE = 1 << 20          # weights start at 1 MiB
INDEX_DRAM = 1 << 16           # index lists staged in DRAM at 64 KiB
HOST_REGION = 1 << 33          # host traffic touches [8 GiB, 8 GiB + 64 MiB)


def job_from_spec(spec: dict, shape: EngineShape, seed: int) -> GemvJob:
    """A GemvJob from a JSON spec: op, dtype, rows, cols, batch, and for gathers
    ``active`` (share of rows/neurons selected) and ``pattern`` (random | clustered)."""
    seed %= 2 ** 31
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    op, dtype = spec["op"], Dtype.parse(spec["dtype"])
    rows, cols, batch = spec["rows"], spec["cols"], spec.get("batch", 1)
    W = random_values((rows, cols), dtype, rng)
    idx = None
    if op != "dense":
        n_sel = max(1, round(spec.get("active", 0.25) * rows))
        if spec.get("pattern", "random") == "clustered":
            # runs of 32 consecutive neurons starting at random places
            starts = torch.randperm(max(rows // 32, 1), generator=gen)[:max(n_sel // 32, 1)] * 32
            idx = torch.cat([torch.arange(s, min(s + 32, rows)) for s in starts.tolist()])[:n_sel]
        else:
            idx = torch.randperm(rows, generator=gen)[:n_sel]
        idx = idx.to(torch.int64)
    x_len = cols if op != "col_gather" else rows
    X = random_values((batch, x_len), dtype, rng)
    return GemvJob(op, dtype, W, X, idx, shape)


class GemvDatapathTB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.params = bench_params()
        self.dp = gemv_datapath_from_config(**self.params)
        e = self.dp.engine
        self.shape = EngineShape(n_units=e.n_units, max_batch=e.max_batch, radix_bits=e.radix_bits,
                                 index_bits=e.index_bits, step_bits=e.step_bits)
        self.org, self.timing = self.dp.org, self.dp.timing
        self.model = DramModel(self.org, self.timing)
        self.device = DramDevice(dut, self.model, self.dp.memory.controller.cmd_layout)
        self.rng = random.Random(seed)
        self.streamer_desc = LayoutCodec(self.dp.streamer.descriptor_layout)
        self.streamer_status = LayoutCodec(self.dp.streamer.status_layout)
        self.dma_desc = LayoutCodec(self.dp.dma.desc.payload.shape())
        self.dma_status = LayoutCodec(self.dp.dma.status.payload.shape())
        self.cmd_layout = e.cmd_layout
        self.result = LayoutCodec(e.result_layout)
        self.host_req = LayoutCodec(memory_request_layout(self.org.capacity_bytes))
        self.peak = peak_bandwidth_bytes_per_s(self.org, self.timing) / NDP_CLOCK_HZ
        self.host_pending = {}
        self.cycle = 0
        self.stats = []

    async def start(self):
        await start_clocks(self.dut, timing=self.timing)
        d = self.dut
        self.set_policy(self.params.get("policy", "fair"))
        for sig in (d.streamer_desc__valid, d.dma_desc__valid, d.gemv_cmd__valid, d.gemv_acts__valid,
                    d.host__req__0__valid, d.sram__req__valid):
            sig.value = 0
        for sig in (d.streamer_status__ready, d.dma_status__ready, d.gemv_results__ready,
                    d.sram__resp__ready):
            sig.value = 1
        for r in range(self.org.ranks):
            getattr(d, f"host__resp__{r}__ready").value = 1
        cocotb.start_soon(self.device.run())

    def set_policy(self, policy):
        """Host/NDP arbitration policy of the DRAM controller (a run-time input)."""
        self.dut.policy.value = POLICIES.index(policy)
        self.policy = policy

    async def tick(self):
        await FallingEdge(self.dut.clk)
        self.cycle += 1

    async def _descriptor(self, port, status_port, bits, status_codec, timeout):
        """Send one descriptor beat on ``port``; wait for its status beat; return the fields."""
        d = self.dut
        valid, ready, payload = (getattr(d, f"{port}__{x}") for x in ("valid", "ready", "payload"))
        s_valid, s_payload = getattr(d, f"{status_port}__valid"), getattr(d, f"{status_port}__payload")
        await self.tick()
        payload.value = bits
        valid.value = 1
        sent = False
        for _ in range(timeout):
            await ReadOnly()
            sent = sent or ready.value == 1
            status = s_payload.value.to_unsigned() if s_valid.value == 1 else None
            await self.tick()
            if sent:
                valid.value = 0
            if status is not None:
                return status_codec.decode(status)
        raise AssertionError(f"{port}: no status within {timeout} cycles")

    async def dma(self, to_dram, dram_addr, sram_addr, n_bytes, timeout=200000):
        """Run one DMA descriptor; return its status code."""
        bits = self.dma_desc.encode({"to_dram": to_dram, "dram_addr": dram_addr,
                                     "sram_addr": sram_addr, "n_bytes": n_bytes})
        status = await self._descriptor("dma_desc", "dma_status", bits, self.dma_status, timeout)
        return Status(status["code"])

    def load_job(self, job: GemvJob, idx_sram=0):
        self.model.load(WEIGHT_BASE, weight_layout.dram_image(job))
        if job.idx is not None and len(job.idx):
            self.model.load(INDEX_DRAM, weight_layout.index_bytes(job.idx))

    async def stage_index_list(self, job, idx_sram=0):
        if job.idx is None or not len(job.idx):
            return
        n = len(weight_layout.index_bytes(job.idx))
        n = -(-n // BURST_BYTES) * BURST_BYTES
        code = await self.dma(0, INDEX_DRAM, idx_sram, n)
        if code != Status.OK:
            raise AssertionError(f"index-list DMA failed: {code.name}")

    async def run_job(self, name, job: GemvJob, *, idle=0.0, stall=0.0, host_every=0,
                      timeout=None, corrupt=False):
        """One GEMV from DRAM, checked bit-exactly; returns the stats dict."""
        d, rng = self.dut, self.rng
        self.load_job(job)
        await self.stage_index_list(job)
        desc = weight_layout.descriptor(job, WEIGHT_BASE, 0)
        acts = job.act_words()
        P = max(job.n_steps, 1) * job.batch
        timeout = timeout or 200000 + 40 * job.n_groups * P * 16 + 3 * job.weight_bytes // 16
        results, status, status_cycle, done, done_cycle = [], None, None, 0, None
        host_lat, host_pending = [], self.host_pending
        host_tag = max(host_pending, default=-1) + 1 & 0x7FFF
        bursts0 = int(d.bursts_read.value)
        hits0, misses0 = int(d.row_hits.value), int(d.row_misses.value)
        refs0 = int(d.refreshes.value)
        refresh = self.dp.memory.controller.refresh
        owed0 = sum(self.device.refreshes_owed(refresh))
        await self.tick()
        d.streamer_desc__payload.value = self.streamer_desc.encode(desc)
        d.streamer_desc__valid.value = 1
        d.gemv_cmd__payload.value = job.command_bits(self.cmd_layout)
        d.gemv_cmd__valid.value = 1
        t0 = self.cycle
        desc_sent = cmd_sent = False
        next_act, act_holding = 0, False
        host_holding = None
        n_ranks = self.org.ranks
        host_valid = [getattr(d, f"host__resp__{r}__valid") for r in range(n_ranks)]
        host_payload = [getattr(d, f"host__resp__{r}__payload") for r in range(n_ranks)]
        for _ in range(timeout):
            # ---- drive (falling edge) ----
            if not act_holding and next_act < len(acts) and rng.random() >= idle:
                d.gemv_acts__payload.value = acts[next_act]
                act_holding = True
            d.gemv_acts__valid.value = int(act_holding)
            if stall:
                d.gemv_results__ready.value = int(rng.random() >= stall)
            if host_every and host_holding is None and self.cycle % host_every == 0 \
                    and len(host_pending) < 8:
                burst = (HOST_REGION + rng.randrange(1 << 26)) // BURST_BYTES
                write = rng.random() < 0.5
                host_holding = (host_tag, write)
                d.host__req__0__payload.value = self.host_req.encode(
                    {"write": int(write), "burst": burst, "tag": host_tag,
                     "data": rng.getrandbits(512)})
                host_pending[host_tag] = self.cycle
                host_tag = (host_tag + 1) & 0x7FFF
            d.host__req__0__valid.value = int(host_holding is not None)
            # ---- sample (ReadOnly): handshakes that complete at the next rising edge ----
            await ReadOnly()
            if not desc_sent and d.streamer_desc__ready.value == 1:
                desc_sent = True
            if not cmd_sent and d.gemv_cmd__ready.value == 1:
                cmd_sent = True
            if act_holding and d.gemv_acts__ready.value == 1:
                act_holding = False
                next_act += 1
            if d.gemv_results__valid.value == 1 and d.gemv_results__ready.value == 1:
                results.append(self._decode_result(int(d.gemv_results__payload.value)))
            if status is None and d.streamer_status__valid.value == 1:
                status = self.streamer_status.decode(int(d.streamer_status__payload.value))
                status_cycle = self.cycle
            if d.gemv_done.value == 1:
                done += 1
                done_cycle = self.cycle
            if d.gemv_error.value == 1:
                raise AssertionError(f"{name}: GEMV engine flagged an error")
            if d.resp_overflow.value == 1:
                raise AssertionError(f"{name}: response FIFO overflow")
            if host_holding is not None and d.host__req__0__ready.value == 1:
                host_holding = None
            for r in range(n_ranks):
                if host_valid[r].value == 1:
                    tag = int(host_payload[r].value) & 0x7FFF
                    host_lat.append(self.cycle - host_pending.pop(tag))
            await self.tick()
            if desc_sent:
                d.streamer_desc__valid.value = 0
            if cmd_sent:
                d.gemv_cmd__valid.value = 0
            if status is not None and (done or job.n_out == 0 or job.n_steps == 0):
                break
        else:
            raise AssertionError(f"{name}: not finished in {timeout} cycles: status {status}, "
                                 f"{next_act}/{len(acts)} activations, {len(results)} result beats")
        d.host__req__0__valid.value = 0
        if status["code"] != Status.OK:
            raise AssertionError(f"{name}: streamer status {Status(status['code']).name}")
        if job.n_out and job.n_steps:
            got = job.assemble(results)
            want = job.result_bits()
            if corrupt:
                want = want.copy()
                want.flat[0] ^= 1
            if not (got == want).all():
                bad = (got != want).nonzero()
                raise AssertionError(f"{name}: {len(bad[0])} outputs differ from the golden model, "
                                     f"first at batch {bad[0][0]} output {bad[1][0]}: "
                                     f"{got[bad[0][0], bad[1][0]]:#010x} vs {want[bad[0][0], bad[1][0]]:#010x}")
        cycles = status_cycle - t0 + 1
        bursts = int(d.bursts_read.value) - bursts0
        owed_change = sum(self.device.refreshes_owed(refresh)) - owed0     # postponed refreshes
        self.last_output = got if job.n_out and job.n_steps else None
        stat = {
            "name": name, "op": job.op, "dtype": job.dtype.name, "batch": job.batch,
            "rows": job.W.shape[0], "cols": job.W.shape[1],
            "selected": None if job.idx is None else len(job.idx),
            "stream_cycles": cycles,
            "cycles": (done_cycle if done_cycle is not None else status_cycle) - t0 + 1,
            "bursts": bursts, "dram_bytes": bursts * BURST_BYTES,
            "bytes_per_cycle": bursts * BURST_BYTES / cycles,
            "peak_bytes_per_cycle": self.peak,
            "utilisation": bursts * BURST_BYTES / cycles / self.peak,
            "row_hits": int(d.row_hits.value) - hits0, "row_misses": int(d.row_misses.value) - misses0,
            "refreshes": int(d.refreshes.value) - refs0,
            "refreshes_owed_at_start": owed0,
            "refreshes_owed_at_end": owed0 + owed_change,
            "steady_state_utilisation": steady_state(
                bursts * BURST_BYTES / cycles / self.peak, cycles, self.org.ranks, owed_change,
                self.timing.tRFC * self.timing.tCK_ns * NDP_CLOCK_HZ / 1e9),
            "policy": self.policy,
            "host_requests": len(host_lat),
            "host_mean_latency_cycles_reads_and_writes": sum(host_lat) / len(host_lat) if host_lat else None,
            "timing_violations": 0,           # any violation raises in DramDevice
        }
        self.stats.append(stat)
        dut_log = self.dut._log
        dut_log.info(f"{name}: {stat['cycles']} cycles, streamed in {cycles}, {stat['bytes_per_cycle']:.1f} B/cycle "
                     f"({100 * stat['utilisation']:.1f} % of {self.peak:.1f}), "
                     f"hits {stat['row_hits']} misses {stat['row_misses']} refs {stat['refreshes']}")
        return stat

    def _decode_result(self, bits):
        v = self.result.decode(bits)
        data_bits = v["data"]
        return {"index": v["index"], "batch": v["batch"], "count": v["count"],
                "data": [(data_bits >> (32 * i)) & 0xFFFFFFFF for i in range(8)], "last": v["last"]}

    async def streamer_error(self, desc_fields):
        """Send a streamer descriptor that must be rejected; return (code, bursts read meanwhile)."""
        bursts0 = int(self.dut.bursts_read.value)
        status = await self._descriptor("streamer_desc", "streamer_status",
                                        self.streamer_desc.encode(desc_fields), self.streamer_status,
                                        20000)
        return Status(status["code"]), int(self.dut.bursts_read.value) - bursts0

    def write_stats(self, test_name, seconds):
        merge_stats(os.environ.get("DG_STATS"), test_name,
                    {"params": self.params, "wall_seconds": seconds,
                     "ndp_cycles_simulated": self.cycle, "dram_cycles_simulated": self.device.cycle,
                     "jobs": self.stats})


SMALL_JOBS = [
    {"op": "dense", "dtype": "fp16", "rows": 21, "cols": 70},
    {"op": "dense", "dtype": "int8", "rows": 9, "cols": 130, "batch": 3},
    {"op": "row_gather", "dtype": "bf16", "rows": 40, "cols": 33, "active": 0.4},
    {"op": "row_gather", "dtype": "int8", "rows": 64, "cols": 64, "active": 0.5,
     "pattern": "clustered"},
    {"op": "col_gather", "dtype": "fp16", "rows": 30, "cols": 50, "active": 0.5, "batch": 2},
    {"op": "col_gather", "dtype": "int8", "rows": 12, "cols": 200, "active": 0.75},
]


@cocotb.test()
async def end_to_end_jobs(dut):
    """Dense, row gather and column gather in every dtype, with idle cycles, back-pressure and
    competing host traffic: bit-exact against the golden model, zero timing violations."""
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    for i, spec in enumerate(SMALL_JOBS):
        job = job_from_spec(spec, tb.shape, cocotb.RANDOM_SEED * 100 + i)
        await tb.run_job(f"job{i}-{spec['op']}-{spec['dtype']}", job, idle=0.2, stall=0.3,
                         host_every=7 if i % 2 else 0)


@cocotb.test()
async def checker_catches_wrong_result(dut):
    """A deliberately corrupted expectation must fail the comparison."""
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    job = job_from_spec(SMALL_JOBS[0], tb.shape, 7)
    try:
        await tb.run_job("corrupt", job, corrupt=True)
    except AssertionError as e:
        assert "differ from the golden model" in str(e), e
        return
    raise AssertionError("corrupted expectation was not detected")


@cocotb.test()
async def bad_descriptors_change_nothing(dut):
    """Streamer and DMA descriptors with bad fields: the right error, no DRAM traffic, no SRAM write."""
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    cap = tb.org.capacity_bytes
    sram = tb.dp.sram_geometry.size_bytes
    base = {"mode": 0, "gather": 0, "dtype": 0, "base": WEIGHT_BASE, "n_rows": 16, "n_cols": 64,
            "idx_addr": 0, "n_idx": 0}
    cases = [
        ({**base, "base": WEIGHT_BASE + 32}, Status.MISALIGNED),
        ({**base, "base": cap - 64, "n_rows": 64}, Status.DRAM_RANGE),
        ({**base, "gather": 1, "idx_addr": sram - 8, "n_idx": 4}, Status.SRAM_RANGE),
        ({**base, "dtype": 3}, Status.BAD_FIELD),
    ]
    commands0 = dict(tb.device.counts)
    for desc, want in cases:
        code, bursts = await tb.streamer_error(desc)
        assert code == want, f"{desc}: {code.name}, expected {want.name}"
        assert bursts == 0, f"{desc}: {bursts} bursts read"
    for args, want in [((0, 32, 0, 64), Status.MISALIGNED), ((0, cap - 64, 0, 128), Status.DRAM_RANGE),
                       ((1, 0, sram - 64, 128), Status.SRAM_RANGE)]:
        code = await tb.dma(*args)
        assert code == want, f"DMA {args}: {code.name}, expected {want.name}"
    for _ in range(200):
        await tb.tick()
    for kind in commands0:
        if kind.name in ("RD", "WR"):
            assert tb.device.counts[kind] == commands0[kind], f"a rejected descriptor issued {kind.name}"


@cocotb.test()
async def dma_round_trip_and_host_reads(dut):
    """DRAM -> SRAM -> DRAM elsewhere by DMA (random sizes), then host pass-through reads of the
    copy: every byte equal, through the real controller and timing-checked DRAM."""
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    rng, d = tb.rng, tb.dut
    sram = tb.dp.sram_geometry.size_bytes
    for trial in range(3):
        n = 64 * rng.randint(1, min(64, sram // 64))
        src, dst = (1 << 24) + trial * (1 << 20), (1 << 25) + trial * (1 << 20) + 64 * rng.randrange(64)
        sram_addr = 32 * rng.randrange((sram - n) // 32 + 1)
        data = rng.randbytes(n)
        tb.model.load(src, data)
        assert await tb.dma(0, src, sram_addr, n) == Status.OK
        assert await tb.dma(1, dst, sram_addr, n) == Status.OK
        assert tb.model.dump(dst, n) == data, f"trial {trial}: DMA copy differs"
        # host reads of the copy, one burst at a time, through the host port
        for k in range(0, n, BURST_BYTES):
            await tb.tick()
            d.host__req__0__payload.value = tb.host_req.encode(
                {"write": 0, "burst": (dst + k) // BURST_BYTES, "tag": 0x4000 + k // 64, "data": 0})
            d.host__req__0__valid.value = 1
            got = None
            for _ in range(5000):
                await ReadOnly()
                accepted = d.host__req__0__ready.value == 1
                for r in range(tb.org.ranks):
                    if getattr(d, f"host__resp__{r}__valid").value == 1:
                        bits = int(getattr(d, f"host__resp__{r}__payload").value)
                        got = (bits >> 15).to_bytes(BURST_BYTES, "little")
                await tb.tick()
                if accepted:
                    d.host__req__0__valid.value = 0
                if got is not None:
                    break
            assert got == data[k:k + BURST_BYTES], f"trial {trial}: host read at +{k} differs"


@cocotb.test()
async def jobs_from_env(dut):
    """Benchmark jobs from ``DG_JOBS`` (JSON list of specs, each with an optional ``host_every``)."""
    specs = json.loads(os.environ.get("DG_JOBS", "[]"))
    if not specs:
        return
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    t0 = time.time()
    for i, spec in enumerate(specs):
        job = job_from_spec(spec, tb.shape, 1000 + i)
        tb.set_policy(spec.get("policy", "fair"))
        await tb.run_job(spec.get("name", f"job{i}"), job, host_every=spec.get("host_every", 0),
                         idle=float(os.environ.get("DG_IDLE", "0")),
                         stall=float(os.environ.get("DG_STALL", "0")))
    tb.write_stats("jobs_from_env", time.time() - t0)


@cocotb.test()
async def run_job_file(dut):
    """Run the jobs saved in ``$GEMV_JOB_FILE`` (``cosim.rtl.gemv.run_jobs(..., from_dram=True)``):
    weights from DRAM, each checked bit-exactly; save outputs, cycles and DRAM figures."""
    job_file = os.environ.get("GEMV_JOB_FILE")
    if not job_file:
        raise RuntimeError("run_job_file needs GEMV_JOB_FILE")
    tb = GemvDatapathTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    spec = torch.load(job_file, weights_only=False)
    outputs = []
    start = time.monotonic()
    for n, item in enumerate(spec["jobs"]):
        job = GemvJob(item["op"], item["dtype"], item["W"], item["X"], item["idx"], tb.shape)
        label = item.get("label") or f"job {n}"
        t0 = time.monotonic()
        stat = await tb.run_job(label, job, idle=spec["idle"], stall=spec["stall"])
        outputs.append({"label": label, "bits": torch.from_numpy(tb.last_output.astype("int64")),
                        "cycles": stat["cycles"], "wall_seconds": time.monotonic() - t0,
                        "dram": stat})
    torch.save({"outputs": outputs, "wall_seconds": time.monotonic() - start,
                "cycles_simulated": tb.cycle}, spec["result_file"])
