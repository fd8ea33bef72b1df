"""Full-chip cocotb bench of the NDP core (``hw/core/ndp_core.py``): a host driver, the DRAM model, golden checks.

The host side does exactly what the runtime will: it opens the protection
window and programs descriptors through the CSR registers
(``hw/registers.py``, ``hw/descriptors.py``), reads completions, and uses
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

Whole sequences, each step a descriptor, the operands never leaving the chip
between steps, checked at the end against a Python mirror of the SRAM to which
the golden model applied the same steps (``GemvJob`` for GEMVs,
``cosim.golden.act_program.apply`` for activation descriptors), bit for bit:

* ``mlp_block``: a gated (SwiGLU) MLP - up and gate GEMVs, SiLU, FP32 -> FP16,
  multiply, down GEMV, convert - and a ReLU MLP (up, ReLU, down);
* ``attention_step``: one decode step of one head over a KV cache - scores
  ``K q`` (GEMV), scale by 1/sqrt(d), softmax per query, ``V^T p`` (GEMV),
  convert - for two queries; also compared with float64 attention.
"""

import math
import random

import cocotb
import numpy as np
import torch
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.fuzz.plan import WINDOW
from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden import act_program
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.golden.numerics import elem_bits
from ndpdimm.cosim.rtl.benches.datapath import job_from_spec
from ndpdimm.cosim.rtl.benches.dram_device import DramDevice, start_clocks
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.core.ndp_core import ndp_core_from_config
from ndpdimm.hw.descriptors import (
    GemvOp,
    Opcode,
    act_descriptor_layout,
    dma_descriptor_layout,
    gemv_descriptor_layout,
)
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import register

__all__ = ["NdpCoreTB", "stage_gemv"]

W_BASE = 1 << 21
STAGE_X, STAGE_IDX, STAGE_Y = 1 << 23, (1 << 23) + (1 << 20), (1 << 23) + (2 << 20)
SRAM_IDX, SRAM_X, SRAM_Y = 0, 4096, 8192


def _round(n, k):
    return -(-n // k) * k


def stage_gemv(load, job):
    """Load (``load(addr, bytes)``) a ``GemvJob``'s weights, X and index list into DRAM at the
    bench's staging addresses; returns the GEMV descriptor fields (SRAM operands at ``SRAM_*``)
    and the bytes of X, the index list and Y."""
    e = job.dtype.info.elem_bits // 8
    load(W_BASE, weight_layout.dram_image(job))
    xb = elem_bits(job.X, job.dtype).numpy().astype(np.uint16 if e == 2 else np.uint8)
    x_pitch = _round(job.X.shape[1] * e, 32)
    img = bytearray(job.batch * x_pitch)
    for b in range(job.batch):
        row = xb[b].tobytes()
        img[b * x_pitch:b * x_pitch + len(row)] = row
    load(STAGE_X, bytes(img))
    n_idx = 0 if job.idx is None else len(job.idx)
    if n_idx:
        load(STAGE_IDX, weight_layout.index_bytes(job.idx))
    y_pitch = _round(job.n_out * 4, 32)
    op = {"dense": GemvOp.DENSE, "row_gather": GemvOp.ROW_GATHER,
          "col_gather": GemvOp.COL_GATHER}[job.op]
    return {"opcode": Opcode.GEMV, "op": op, "dtype": int(job.dtype),
            "batch_minus_one": job.batch - 1, "accumulate": 0, "w_base": W_BASE,
            "n_rows": job.W.shape[0], "n_cols": job.W.shape[1], "idx_addr": SRAM_IDX,
            "n_idx": n_idx, "x_addr": SRAM_X, "x_pitch": x_pitch, "y_addr": SRAM_Y,
            "y_pitch": y_pitch}, len(img), n_idx * 4, job.batch * y_pitch


class NdpCoreTB:
    def __init__(self, dut, seed, params=None):
        self.dut = dut
        self.params = bench_params() if params is None else params
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
        self.act_layout = act_descriptor_layout(sram_bits)
        self.next_id = 1

    async def start(self):
        self.idle_inputs()
        await start_clocks(self.dut, timing=self.timing)
        await self.open()

    def idle_inputs(self):
        """Host inputs idle (before the reset)."""
        d = self.dut
        for sig in (d.csr__valid, d.host__req__0__valid):
            sig.value = 0
        d.csr_resp__ready.value = 1

    async def open(self):
        """After the reset: the DRAM device runs, the window is open, the core enabled."""
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
            f = register("CQ_HEAD").unpack(head)
            if f["VALID"]:
                cycles = await self.read("CQ_CYCLES")
                await self.write("CQ_POP", 1)
                return {"id": f["ID"], "code": Status(f["STATUS"]), "opcode": f["OPCODE"],
                        "cycles": cycles}
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
        return stage_gemv(self.model.load, job)

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


# ---- whole sequences on chip: an SRAM mirror the golden model follows step by step -----------

class OnChipProgram:
    """Runs descriptors on the core and the same steps on ``mirror`` (a bytearray of the SRAM)."""

    def __init__(self, tb):
        self.tb = tb
        self.mirror = bytearray(tb.core.sram_geometry.size_bytes)
        self.lanes = tb.core.act.lanes
        self.w_next = W_BASE

    async def load(self, sram_addr, data: bytes):
        """Host data into the SRAM: through a DRAM staging area and a DMA descriptor."""
        n = _round(len(data), 64)
        padded = data + bytes(n - len(data))
        self.tb.model.load(STAGE_X, padded)
        await self.tb.dma(0, STAGE_X, sram_addr, n)
        self.mirror[sram_addr:sram_addr + n] = padded

    async def gemv(self, W, x_addr, x_rows, x_pitch, y_addr, y_pitch):
        """Dense FP16 GEMV ``Y = W x`` for the ``x_rows`` FP16 rows at ``x_addr`` (mirror values)."""
        k = W.shape[1]
        X = torch.stack([torch.from_numpy(np.frombuffer(
            bytes(self.mirror[x_addr + b * x_pitch:x_addr + b * x_pitch + 2 * k]), dtype="<i2").copy())
            .view(torch.float16) for b in range(x_rows)])
        job = GemvJob("dense", Dtype.FP16, W, X, None, self.tb.shape)
        base = self.w_next
        self.tb.model.load(base, weight_layout.dram_image(job))
        self.w_next += _round(weight_layout.image_bytes(W.shape[0], k, Dtype.FP16), 4096)
        await self.tb.run(self.tb.gemv_layout, {
            "opcode": Opcode.GEMV, "op": GemvOp.DENSE, "dtype": int(Dtype.FP16),
            "batch_minus_one": x_rows - 1, "accumulate": 0, "w_base": base,
            "n_rows": W.shape[0], "n_cols": k, "idx_addr": 0, "n_idx": 0, "x_addr": x_addr,
            "x_pitch": x_pitch, "y_addr": y_addr, "y_pitch": y_pitch})
        bits = job.result_bits()
        for b in range(x_rows):
            row = bits[b].astype("<u4").tobytes()
            self.mirror[y_addr + b * y_pitch:y_addr + b * y_pitch + len(row)] = row

    async def act(self, opcode, op, in_fmt, out_fmt, n, src_a, dst, src_b=0, c=0, k=0x3F800000):
        f = {"opcode": int(opcode), "op": int(op), "in_fmt": int(in_fmt), "out_fmt": int(out_fmt),
             "n": n, "src_a": src_a, "src_b": src_b, "dst": dst, "c": c, "k": k}
        want = act_program.apply(f, self.mirror, self.lanes)
        c = await self.tb.run(self.tb.act_layout, f, want)
        return c

    async def check(self, lo, hi, what):
        """DMA SRAM bytes [lo, hi) out to DRAM and compare them with the mirror."""
        n = _round(hi - lo, 64)
        await self.tb.dma(1, STAGE_Y, lo, n)
        got = self.tb.model.dump(STAGE_Y, n)
        want = bytes(self.mirror[lo:lo + n])
        if got != want:
            k = next(i for i in range(n) if got[i] != want[i])
            raise AssertionError(f"{what}: SRAM byte {lo + k:#x} is {got[k]:#04x}, "
                                 f"expected {want[k]:#04x}")
        return got


def _fp16_bytes(t: torch.Tensor) -> bytes:
    return t.to(torch.float16).contiguous().view(torch.int16).numpy().astype("<i2").tobytes()


def _fp16_from(raw: bytes, shape) -> torch.Tensor:
    return torch.from_numpy(np.frombuffer(raw, dtype="<i2").copy()).view(torch.float16).reshape(shape)


@cocotb.test()
async def mlp_block(dut):
    """SwiGLU MLP (up, gate, SiLU, convert, multiply, down, convert) and ReLU MLP, all on chip."""
    tb = NdpCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    rng = random.Random(cocotb.RANDOM_SEED)
    p = OnChipProgram(tb)
    B, K, N = 2, 64, 128
    X_A, UP, GATE, G16, U16, H, DOWN, OUT = 0x0, 0x400, 0x800, 0xC00, 0xE00, 0x1000, 0x1200, 0x1400
    f16, f32 = ActFmt.FP16, ActFmt.FP32
    w_up, w_gate, w_down = (random_values(s, Dtype.FP16, rng) for s in ((N, K), (N, K), (K, N)))
    X = random_values((B, K), Dtype.FP16, rng)
    await p.load(X_A, _fp16_bytes(X))
    await p.gemv(w_up, X_A, B, 2 * K, UP, 4 * N)
    await p.gemv(w_gate, X_A, B, 2 * K, GATE, 4 * N)
    c_silu = await p.act(Opcode.ACT, ActOp.SILU, f32, f16, B * N, GATE, G16)
    await p.act(Opcode.ACT, ActOp.PASS, f32, f16, B * N, UP, U16)
    await p.act(Opcode.ELTWISE, ActOp.MUL, f16, f16, B * N, G16, H, src_b=U16)
    await p.gemv(w_down, H, B, 2 * N, DOWN, 4 * K)
    await p.act(Opcode.ACT, ActOp.PASS, f32, f16, B * K, DOWN, OUT)
    await p.check(UP, OUT + 2 * B * K, "SwiGLU MLP")
    dut._log.info(f"SwiGLU MLP B={B} K={K} N={N}: bit-exact; SiLU over {B * N} elements "
                  f"took {c_silu['cycles']} cycles")
    # ReLU MLP reusing the areas: up, ReLU (FP32 -> FP16), down
    await p.gemv(w_up, X_A, B, 2 * K, UP, 4 * N)
    await p.act(Opcode.ACT, ActOp.RELU, f32, f16, B * N, UP, H)
    await p.gemv(w_down, H, B, 2 * N, DOWN, 4 * K)
    await p.check(UP, DOWN + 4 * B * K, "ReLU MLP")


@cocotb.test()
async def attention_step(dut):
    """scores = K q, scale, softmax, out = V^T p for two queries over a KV cache, on chip."""
    tb = NdpCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    rng = random.Random(cocotb.RANDOM_SEED + 1)
    p = OnChipProgram(tb)
    B, D, T = 2, 64, 48
    Q, S, P, O, OUT = 0x0, 0x400, 0x580, 0x640, 0x840
    f16, f32 = ActFmt.FP16, ActFmt.FP32
    Kc = random_values((T, D), Dtype.FP16, rng)
    V = random_values((T, D), Dtype.FP16, rng)
    q = random_values((B, D), Dtype.FP16, rng)
    await p.load(Q, _fp16_bytes(q))
    await p.gemv(Kc, Q, B, 2 * D, S, 4 * T)
    scale = int(np.array([1 / math.sqrt(D)], dtype="<f4").view("<u4")[0])
    await p.act(Opcode.ACT, ActOp.SCALE, f32, f32, B * T, S, S, k=scale)
    for b in range(B):
        c = await p.act(Opcode.SOFTMAX, 0, f32, f16, T, S + 4 * T * b, P + 2 * T * b)
    await p.gemv(V.T.contiguous(), P, B, 2 * T, O, 4 * D)
    await p.act(Opcode.ACT, ActOp.PASS, f32, f16, B * D, O, OUT)
    got = await p.check(S, OUT + 2 * B * D, "attention step")
    out = _fp16_from(got[OUT - S:OUT - S + 2 * B * D], (B, D)).double()
    ref = torch.softmax((q.double() @ Kc.double().T) / math.sqrt(D), dim=-1) @ V.double()
    err = (out - ref).abs().max().item()
    bound = 1e-2 * (ref.abs().max().item() + 1)
    assert err <= bound, f"attention output differs from float64 by {err} (> {bound})"
    dut._log.info(f"attention step B={B} d={D} T={T}: bit-exact, max |err| vs float64 {err:.2e}; "
                  f"softmax over {T} took {c['cycles']} cycles")
