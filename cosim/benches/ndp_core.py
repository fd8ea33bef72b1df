"""Full-chip cocotb bench of the NDP core (``hw/ndp_core.py``): a host driver, the DRAM model, golden checks.

The host side does exactly what the runtime will: it opens the protection
window and programs descriptors through the CSR registers
(``hw/ndp_registers.py``, ``hw/descriptors.py``), reads completions, and uses
DMA descriptors to move operands between DRAM and SRAM. Test data is placed in
DRAM through the DRAM model's backing store (the bytes a host would have
written over the memory channel). For each GEMV the bench:

1. lays the weights out in DRAM (streamer layout) and X / the index list in
   a staging area of DRAM;
2. DMA X and the index list into the SRAM, GEMV, DMA the results back;
3. checks every completion's status and the results in DRAM bit for bit
   against the golden model.

Invalid descriptors (bad fields, outside the window, a bad *last* index-list
entry) must complete with their error and leave the result area untouched.
Every DRAM command is timing-checked by ``DramDevice``.
"""

import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim import weight_layout
from ndpdimm.cosim.benches.cocotb_streams import LayoutCodec
from ndpdimm.cosim.benches.dram_device import DramDevice, start_clocks
from ndpdimm.cosim.benches.gemv_datapath import job_from_spec
from ndpdimm.cosim.dram_model import DramModel
from ndpdimm.cosim.gemv_job import EngineShape
from ndpdimm.cosim.golden import elem_bits
from ndpdimm.cosim.rtl_build import bench_params
from ndpdimm.hw.descriptors import GemvOp, Opcode, dma_descriptor_layout, gemv_descriptor_layout
from ndpdimm.hw.memory_port import Status
from ndpdimm.hw.ndp_core import ndp_core_from_config
from ndpdimm.hw.ndp_registers import register

__all__ = ["NdpCoreTB"]

WINDOW = (1 << 20, 1 << 26)
W_BASE = 1 << 21
STAGE_X, STAGE_IDX, STAGE_Y = 1 << 23, (1 << 23) + (1 << 20), (1 << 23) + (2 << 20)
SRAM_IDX, SRAM_X, SRAM_Y = 0, 4096, 8192


def _round(n, k):
    return -(-n // k) * k


class NdpCoreTB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.params = bench_params()
        self.core = ndp_core_from_config(**self.params)
        e = self.core.engine
        self.shape = EngineShape(n_units=e.n_units, max_batch=e.max_batch, radix_bits=e.radix_bits,
                                 index_bits=e.index_bits, step_bits=e.step_bits)
        self.org, self.timing = self.core.org, self.core.timing
        self.model = DramModel(self.org, self.timing)
        self.device = DramDevice(dut, self.model, self.core.memory.controller.cmd_layout)
        self.rng = random.Random(seed)
        self.csr_req = LayoutCodec(self.core.cp.csr.payload.shape())
        dram_bits = self.org.capacity_bytes.bit_length() - 1
        sram_bits = self.core.sram_geometry.size_bytes.bit_length() - 1
        self.gemv_layout = gemv_descriptor_layout(dram_bits, sram_bits)
        self.dma_layout = dma_descriptor_layout(dram_bits, sram_bits)
        self.next_id = 1

    async def start(self):
        d = self.dut
        for sig in (d.csr__valid, d.host__req__0__valid):
            sig.value = 0
        d.csr_resp__ready.value = 1
        await start_clocks(d, timing=self.timing)
        cocotb.start_soon(self.device.run())
        await self.write("WINDOW_BASE", WINDOW[0])
        await self.write("WINDOW_LIMIT", WINDOW[1])
        await self.write("CTRL", 1)

    # ---- CSR access, as the host runtime does it ---------------------------------------
    async def _csr(self, addr, write, data=0):
        d = self.dut
        await FallingEdge(d.clk)
        d.csr__payload.value = self.csr_req.encode({"addr": addr, "write": write, "data": data})
        d.csr__valid.value = 1
        while True:
            await ReadOnly()
            accepted = d.csr__ready.value == 1
            await FallingEdge(d.clk)
            if accepted:
                d.csr__valid.value = 0
                break
        if write:
            return None
        while True:
            await ReadOnly()
            if d.csr_resp__valid.value == 1:
                value = int(d.csr_resp__payload.value)
                await FallingEdge(d.clk)
                return value
            await FallingEdge(d.clk)

    async def write(self, name, value):
        await self._csr(register(name).offset, 1, value)

    async def read(self, name):
        return await self._csr(register(name).offset, 0)

    async def submit(self, layout, fields):
        fields = {"id": self.next_id & 0xFFF, **fields}
        self.next_id += 1
        bits = layout.const(fields).as_value().value
        for i in range(4):
            await self.write(f"DESC{i}", (bits >> (64 * i)) & (2 ** 64 - 1))
        await self.write("DESC_PUSH", 1)
        return fields["id"]

    async def completion(self, timeout=400000):
        for _ in range(timeout // 8):
            head = await self.read("CQ_HEAD")
            if head & 1:
                cycles = await self.read("CQ_CYCLES")
                await self.write("CQ_POP", 1)
                return {"id": (head >> 4) & 0xFFF, "code": Status((head >> 16) & 0xFF),
                        "opcode": (head >> 24) & 0xF, "cycles": cycles}
        raise AssertionError("no completion")

    async def run(self, layout, fields, want=Status.OK):
        id_ = await self.submit(layout, fields)
        c = await self.completion()
        assert c["id"] == id_, f"completion for id {c['id']}, expected {id_}"
        assert c["code"] == want, f"{fields}: {c['code'].name}, expected {want.name}"
        return c

    async def dma(self, to_dram, dram, sram, n_bytes, want=Status.OK):
        return await self.run(self.dma_layout, {"opcode": Opcode.DMA, "to_dram": to_dram, "dram": dram,
                                         "sram": sram, "n_bytes": n_bytes}, want)

    # ---- a GEMV program ---------------------------------------------------------------
    def stage(self, job):
        """Weights, X and the index list into DRAM; returns the GEMV descriptor fields."""
        e = job.dtype.info.elem_bits // 8
        self.model.load(W_BASE, weight_layout.dram_image(job))
        xb = elem_bits(job.X, job.dtype).numpy().astype(np.uint16 if e == 2 else np.uint8)
        x_pitch = _round(job.X.shape[1] * e, 32)
        img = bytearray(job.batch * x_pitch)
        for b in range(job.batch):
            row = xb[b].tobytes()
            img[b * x_pitch:b * x_pitch + len(row)] = row
        self.model.load(STAGE_X, bytes(img))
        n_idx = 0 if job.idx is None else len(job.idx)
        if n_idx:
            self.model.load(STAGE_IDX, weight_layout.index_bytes(job.idx))
        y_pitch = _round(job.n_out * 4, 32)
        op = {"dense": GemvOp.DENSE, "row_gather": GemvOp.ROW_GATHER,
              "col_gather": GemvOp.COL_GATHER}[job.op]
        return {"opcode": Opcode.GEMV, "op": op, "dtype": int(job.dtype),
                "batch_minus_one": job.batch - 1, "accumulate": 0, "w_base": W_BASE,
                "n_rows": job.W.shape[0], "n_cols": job.W.shape[1], "idx_addr": SRAM_IDX,
                "n_idx": n_idx, "x_addr": SRAM_X, "x_pitch": x_pitch, "y_addr": SRAM_Y,
                "y_pitch": y_pitch}, len(img), n_idx * 4, job.batch * y_pitch

    async def gemv_program(self, job, fields=None, want=Status.OK):
        f, x_bytes, idx_bytes, y_bytes = self.stage(job)
        f.update(fields or {})
        await self.dma(0, STAGE_X, SRAM_X, _round(x_bytes, 64))
        if idx_bytes:
            await self.dma(0, STAGE_IDX, SRAM_IDX, _round(idx_bytes, 64))
        c = await self.run(self.gemv_layout, f, want)
        await self.dma(1, STAGE_Y, SRAM_Y, _round(y_bytes, 64))
        return c, f

    def results_in_dram(self, job, y_pitch):
        out = np.zeros((job.batch, job.n_out), dtype=np.uint32)
        for b in range(job.batch):
            raw = self.model.dump(STAGE_Y + b * y_pitch, 4 * job.n_out)
            out[b] = np.frombuffer(raw, dtype="<u4")
        return out


JOBS = [
    {"op": "dense", "dtype": "fp16", "rows": 21, "cols": 70, "batch": 2},
    {"op": "row_gather", "dtype": "int8", "rows": 40, "cols": 130, "active": 0.4},
    {"op": "col_gather", "dtype": "bf16", "rows": 24, "cols": 100, "active": 0.5, "batch": 3},
]


@cocotb.test()
async def gemv_programs(dut):
    """DMA in, GEMV, DMA out through the registers; results in DRAM bit-exact vs golden."""
    tb = NdpCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    assert await tb.read("ID") == register("ID").reset
    for i, spec in enumerate(JOBS):
        job = job_from_spec(spec, tb.shape, 500 + i)
        c, f = await tb.gemv_program(job)
        got = tb.results_in_dram(job, f["y_pitch"])
        want = job.result_bits()
        assert (got == want).all(), f"job {i} ({spec['op']}): results differ from the golden model"
        dut._log.info(f"{spec['op']} {spec['dtype']}: GEMV completed OK in {c['cycles']} cycles")


@cocotb.test()
async def invalid_descriptors_change_nothing(dut):
    """Rejected descriptors - including a GEMV whose only fault is its last index-list entry -
    complete with their error and leave the SRAM result area untouched."""
    tb = NdpCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    job = job_from_spec({"op": "row_gather", "dtype": "fp16", "rows": 32, "cols": 40,
                         "active": 0.5}, tb.shape, 77)
    f, x_bytes, idx_bytes, y_bytes = tb.stage(job)
    y_len = _round(y_bytes, 64)
    marker = tb.rng.randbytes(y_len)
    tb.model.load(STAGE_Y + (1 << 16), marker)            # a known pattern into the result area
    await tb.dma(0, STAGE_Y + (1 << 16), SRAM_Y, y_len)
    await tb.dma(0, STAGE_X, SRAM_X, _round(x_bytes, 64))
    bad_idx = bytearray(weight_layout.index_bytes(job.idx))
    bad_idx[-4:] = (job.W.shape[0]).to_bytes(4, "little")  # last entry one past the matrix
    tb.model.load(STAGE_IDX, bytes(bad_idx))
    await tb.dma(0, STAGE_IDX, SRAM_IDX, _round(idx_bytes, 64))
    bursts0 = await tb.read("DRAM_BURSTS_READ")
    await tb.run(tb.gemv_layout, f, Status.BAD_INDEX)
    cases = [({"dtype": 3}, Status.BAD_FIELD), ({"w_base": WINDOW[1]}, Status.DRAM_RANGE),
             ({"w_base": W_BASE + 16}, Status.MISALIGNED),
             ({"y_addr": tb.core.sram_geometry.size_bytes - 32}, Status.SRAM_RANGE)]
    for fields, want in cases:
        await tb.run(tb.gemv_layout, {**f, **fields}, want)
    await tb.run(tb.dma_layout, {"opcode": Opcode.DMA, "to_dram": 1, "dram": WINDOW[0] - 64, "sram": 0,
                          "n_bytes": 128}, Status.DRAM_RANGE)
    await tb.run(tb.dma_layout, {"opcode": 11}, Status.BAD_OPCODE)
    await tb.run(tb.dma_layout, {"opcode": Opcode.LINK_SEND}, Status.UNSUPPORTED)
    assert await tb.read("DRAM_BURSTS_READ") == bursts0, "a rejected GEMV read weights"
    await tb.dma(1, STAGE_Y, SRAM_Y, y_len)
    assert tb.model.dump(STAGE_Y, y_len) == marker, "a rejected descriptor wrote the result area"
    # a write to a read-only register is refused and counted
    errors0 = await tb.read("CSR_ERRORS")
    await tb.write("ID", 5)
    assert await tb.read("CSR_ERRORS") == errors0 + 1
