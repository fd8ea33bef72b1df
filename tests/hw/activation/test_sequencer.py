# amaranth: UnusedElaboratable=no
"""Activation sequencer (ACT / SOFTMAX / ELTWISE descriptors, SRAM to SRAM) against the golden model.

One harness: a real ``BankedSram`` (16 KiB, 4 banks, 3 ports), the sequencer
(16 lanes) on ports 0 (reads) and 1 (writes), the testbench on port 2. The
whole SRAM is filled with NaN-heavy garbage plus the operands, a list of
descriptors runs back to back (random idle cycles on ``desc``, back-pressure on
``status``, random competing reads on port 2), and at the end every SRAM byte
is compared with a reference image to which ``cosim.act_program.apply`` applied
the same descriptors in order - so results are bit-exact and nothing outside a
destination changed. Invalid descriptors must give the predicted status and
change nothing.
(First line: the parameter tests build components only to check errors.)
"""

import random

import numpy as np
import pytest
import torch
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.amaranth_sim.sram_access import (
    WORD,
    check_image,
    garbage,
    image_words,
    read_words,
    write_words,
)
from ndpdimm.cosim.golden import act_program
from ndpdimm.hw.activation.sequencer import ActivationSequencer
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry

GEOMETRY = SramGeometry(size_bytes=16384, n_banks=4, word_bits=256, n_ports=3)
LANES = 16
RD_PORT, WR_PORT, TB_PORT = 0, 1, 2


class Harness(Elaboratable):
    def __init__(self, lanes=LANES):
        g = GEOMETRY
        self.sram = BankedSram(g.size_bytes, g.n_banks, g.word_bits, g.n_ports, g.resp_depth)
        self.seq = ActivationSequencer(g, lanes=lanes)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = self.sram
        m.submodules.seq = self.seq
        wiring.connect(m, self.seq.rd, self.sram.ports[RD_PORT])
        wiring.connect(m, self.seq.wr, self.sram.ports[WR_PORT])
        return m


def fp16_values(rng, n, scale=3.0):
    """FP16 bit patterns: mostly normal values, some specials."""
    x = torch.tensor([rng.gauss(0, scale) for _ in range(n)], dtype=torch.float16)
    bits = x.view(torch.int16).numpy().astype(np.int64) & 0xFFFF
    for i in range(n):
        if rng.random() < 0.05:
            bits[i] = rng.choice([0x0000, 0x8000, 0x0001, 0x83FF, 0x7BFF, 0xFBFF, 0x7C00, 0xFC00])
    return bits


def bf16_values(rng, n):
    x = torch.tensor([rng.gauss(0, 2.0) for _ in range(n)], dtype=torch.bfloat16)
    return x.view(torch.int16).numpy().astype(np.int64) & 0xFFFF


def f32_values(rng, n):
    x = torch.tensor([rng.gauss(0, 4.0) for _ in range(n)], dtype=torch.float32)
    return x.view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF


def values(rng, n, fmt):
    return {ActFmt.FP16: lambda: fp16_values(rng, n), ActFmt.BF16: lambda: bf16_values(rng, n),
            ActFmt.FP32: lambda: f32_values(rng, n)}[ActFmt(fmt)]()


class Plan:
    """Allocates 32 B-aligned SRAM areas and writes operands into the initial image."""

    def __init__(self, rng):
        self.rng = rng
        self.image = bytearray(garbage(rng, GEOMETRY.size_bytes))
        self.next = 0

    def area(self, n_bytes):
        addr = self.next
        self.next += -(-max(n_bytes, 1) // WORD) * WORD + WORD * self.rng.randrange(0, 2)
        assert self.next <= GEOMETRY.size_bytes, "test plan does not fit the SRAM"
        return addr

    def operand(self, n, fmt):
        addr = self.area(n * act_program.elem_bytes(fmt))
        act_program.write_vector(self.image, addr, values(self.rng, n, fmt), fmt)
        return addr


def desc(opcode, op=0, in_fmt=ActFmt.FP16, out_fmt=ActFmt.FP16, n=0, src_a=0, src_b=0, dst=0,
         c=0, k=0x3F800000):
    return {"opcode": int(opcode), "op": int(op), "in_fmt": int(in_fmt), "out_fmt": int(out_fmt),
            "n": n, "src_a": src_a, "src_b": src_b, "dst": dst, "c": c, "k": k}


def valid_descriptors(plan, rng):
    out = []
    F16, B16, F32 = ActFmt.FP16, ActFmt.BF16, ActFmt.FP32
    for op in (ActOp.RELU, ActOp.SILU, ActOp.GELU, ActOp.PASS, ActOp.RECIP):
        fmt = rng.choice([F16, B16])
        n = rng.choice([1, 15, 16, 17, 100, 129])
        a = plan.operand(n, fmt)
        out.append(desc(Opcode.ACT, op, fmt, fmt, n, a, dst=plan.area(2 * n)))
    n = 70
    a = plan.operand(n, F16)
    out.append(desc(Opcode.ACT, ActOp.SCALE, F16, F32, n, a, dst=plan.area(4 * n), k=0x3E000000))
    a = plan.operand(n, F16)
    out.append(desc(Opcode.ACT, ActOp.EXP, F16, F16, n, a, dst=plan.area(2 * n), c=0x40000000))
    a = plan.operand(45, F32)                                        # FP32 -> FP16/BF16 convert
    out.append(desc(Opcode.ACT, ActOp.PASS, F32, F16, 45, a, dst=plan.area(90)))
    out.append(desc(Opcode.ACT, ActOp.PASS, F32, B16, 45, a, dst=plan.area(90)))
    for op, fmt in ((ActOp.MAX, F16), (ActOp.SUMEXP, F16), (ActOp.MAX, F32)):
        n = rng.choice([1, 33, 200])
        a = plan.operand(n, fmt)
        out.append(desc(Opcode.ACT, op, fmt, F32, n, a, dst=plan.area(4), c=0x3F000000))
    for op, fmt in ((ActOp.ADD, F16), (ActOp.MUL, B16), (ActOp.ADD, F32)):   # F32 ADD = merge
        n = rng.choice([7, 16, 90])
        a, b = plan.operand(n, fmt), plan.operand(n, fmt)
        out.append(desc(Opcode.ELTWISE, op, fmt, fmt, n, a, b, dst=plan.area(n * 4)))
    for n, out_fmt in ((1, F16), (16, F16), (37, F32), (300, F16)):
        a = plan.operand(n, F16)
        out.append(desc(Opcode.SOFTMAX, 0, F16, out_fmt, n, a, dst=plan.area(4 * n)))
    a = plan.operand(64, F16)                                        # in place
    out.append(desc(Opcode.ACT, ActOp.RELU, F16, F16, 64, a, dst=a))
    out.append(desc(Opcode.SOFTMAX, 0, F16, F16, 40, a, dst=a))
    out.append(desc(Opcode.ACT, ActOp.GELU, F16, F16, 0, a, dst=a))  # n = 0: nothing
    return out


def invalid_descriptors(plan):
    size = GEOMETRY.size_bytes
    a = plan.operand(32, ActFmt.FP16)
    d = plan.area(64)
    return [
        desc(Opcode.ACT, ActOp.RELU, 3, ActFmt.FP16, 32, a, dst=d),                  # BAD_FIELD fmt
        desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, 3, 32, a, dst=d),
        desc(Opcode.ACT, ActOp.ADD, ActFmt.FP16, ActFmt.FP16, 32, a, dst=d),          # binary in ACT
        desc(Opcode.ACT, 12, ActFmt.FP16, ActFmt.FP16, 32, a, dst=d),                 # reserved op
        desc(Opcode.ELTWISE, ActOp.SILU, ActFmt.FP16, ActFmt.FP16, 32, a, a, dst=d),
        desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, ActFmt.FP16, 32, a + 16, dst=d),    # MISALIGNED
        desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, ActFmt.FP16, 32, a, dst=d + 2),
        desc(Opcode.ELTWISE, ActOp.ADD, ActFmt.FP16, ActFmt.FP16, 32, a, a + 4, dst=d),
        desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, ActFmt.FP16, 32, a, dst=size - 32),  # SRAM_RANGE
        desc(Opcode.SOFTMAX, 0, ActFmt.FP16, ActFmt.FP16, 4000, a, dst=d),
        desc(Opcode.ELTWISE, ActOp.MUL, ActFmt.FP16, ActFmt.FP16, 32, a, size - 32, dst=d),
        desc(Opcode.ACT, ActOp.PASS, ActFmt.FP16, ActFmt.FP32, 32, a, dst=a),          # grows in place
        desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, ActFmt.FP16, 32, a, dst=a + 32),     # overlap
        desc(Opcode.ELTWISE, ActOp.ADD, ActFmt.FP16, ActFmt.FP16, 32, d, a, dst=a + 32),
    ]


def run_case(descs, plan, seed, idle_prob=0.0, stall_prob=0.0, noise=False, lanes=LANES):
    """Load ``plan.image``, run ``descs``; returns (statuses, final SRAM bytes, expected image)."""
    h = Harness(lanes)
    seq, port = h.seq, h.sram.ports[TB_PORT]
    layout = seq.descriptor_layout
    rng = random.Random(seed)
    expected = bytearray(plan.image)
    result = {}
    state = {"running": False}

    async def main(ctx):
        await write_words(ctx, port, image_words(plan.image, 0, GEOMETRY.size_bytes))
        state["running"] = True
        codes = []
        for f in descs:
            await streams.put(ctx, seq.desc, layout.const(f).as_value().value, rng, idle_prob)
            st = await streams.get(ctx, seq.status, rng, stall_prob)
            codes.append((Status(st.code), int(st.cycles)))
            assert not ctx.get(seq.busy), "busy after the status was taken"
        state["running"] = False
        for _ in range(4):
            await ctx.tick()
        words = await read_words(ctx, port, list(range(GEOMETRY.n_words)))
        result["codes"] = codes
        result["image"] = b"".join(int(w).to_bytes(WORD, "little") for w in words)

    async def traffic(ctx):
        """Random single-word reads on port 2 while descriptors run (bank conflicts)."""
        ctx.set(port.resp.ready, 1)
        while "image" not in result:
            if state["running"] and rng.random() < 0.5:
                ctx.set(port.req.payload.write, 0)
                ctx.set(port.req.payload.addr, rng.randrange(GEOMETRY.n_words))
                ctx.set(port.req.valid, 1)
                await ctx.tick().until(port.req.ready)
                ctx.set(port.req.valid, 0)
            else:
                await ctx.tick()

    sim = Simulator(h)
    sim.add_clock(1e-9)
    sim.add_testbench(main)
    if noise:
        # The reads share port 2 with main's load and dump, which run only while it is idle.
        sim.add_testbench(traffic, background=True)
    sim.run()
    for f in descs:
        act_program.apply(f, expected, lanes)
    return result["codes"], result["image"], bytes(expected)


@pytest.mark.parametrize("idle_prob,stall_prob,noise", [(0.0, 0.0, False), (0.3, 0.4, True)])
def test_descriptors_bit_exact(idle_prob, stall_prob, noise):
    rng = random.Random(11 + int(noise))
    plan = Plan(rng)
    descs = valid_descriptors(plan, rng)
    codes, got, want = run_case(descs, plan, seed=5, idle_prob=idle_prob,
                                stall_prob=stall_prob, noise=noise)
    for f, (code, cycles) in zip(descs, codes):
        assert code == Status.OK, f"{f}: {code.name}"
    check_image(got, want, "after valid descriptors: ")


def test_invalid_descriptors_change_nothing():
    rng = random.Random(3)
    plan = Plan(rng)
    descs = invalid_descriptors(plan)
    codes, got, want = run_case(descs, plan, seed=7)
    for f, (code, cycles) in zip(descs, codes):
        assert code == act_program.expected_status(f, GEOMETRY.size_bytes), f
        assert code != Status.OK, f"{f} was accepted"
        assert cycles <= 3, f"a rejected descriptor took {cycles} cycles"
    assert want == bytes(plan.image)
    check_image(got, want, "after invalid descriptors: ")


def test_throughput_fp16_relu():
    """FP16 -> FP16 at 16 lanes: one 32 B word in and out per cycle once streaming."""
    rng = random.Random(1)
    plan = Plan(rng)
    n = 1024
    a = plan.operand(n, ActFmt.FP16)
    descs = [desc(Opcode.ACT, ActOp.RELU, ActFmt.FP16, ActFmt.FP16, n, a, dst=plan.area(2 * n))]
    codes, got, want = run_case(descs, plan, seed=1)
    check_image(got, want)
    cycles = codes[0][1]
    assert cycles <= n // LANES + 16, f"{n} elements took {cycles} cycles"


def test_corrupted_reference_is_caught():
    rng = random.Random(2)
    plan = Plan(rng)
    a = plan.operand(20, ActFmt.FP16)
    d = plan.area(40)
    descs = [desc(Opcode.ACT, ActOp.SILU, ActFmt.FP16, ActFmt.FP16, 20, a, dst=d)]
    codes, got, want = run_case(descs, plan, seed=2)
    bad = bytearray(want)
    bad[d + 6] ^= 1
    with pytest.raises(AssertionError):
        check_image(got, bytes(bad))


@pytest.mark.parametrize("bad", [{"lanes": 8}, {"lanes": 48}, {"lanes": 512}, {"beat_slots": 1},
                                 {"sram": SramGeometry(word_bits=128)}])
def test_constructor_rejects(bad):
    with pytest.raises(ValueError):
        ActivationSequencer(**bad)
