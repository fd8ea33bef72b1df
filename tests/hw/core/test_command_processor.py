# amaranth: UnusedElaboratable=no
"""Command processor (Amaranth simulator): registers, checks and protection, dispatch, completions.

The testbench drives the CSR port exactly as the host runtime will and plays
the blocks behind the dispatch ports (it records every command handed to the
streamer, engine, feeder, writer and DMA, and answers with their statuses), so
each test can assert what was - and was not - started. The blocks themselves
are verified in their own tests; the full-chip bench wires the real ones.
"""

import pytest
from amaranth.sim import Simulator

from ndpdimm.hw.core.command_processor import CommandProcessor
from ndpdimm.hw.descriptors import (
    GemvOp,
    Opcode,
    act_descriptor_layout,
    dma_descriptor_layout,
    gemv_descriptor_layout,
    link_descriptor_layout,
    relayout_descriptor_layout,
)
from ndpdimm.hw.formats import Dtype, GemvMode, gemv_command_layout
from ndpdimm.hw.gemv.activation_feeder import ActivationFeeder
from ndpdimm.hw.gemv.result_writer import ResultWriter
from ndpdimm.hw.link.formats import LinkOp
from ndpdimm.hw.link.transaction import link_command_layout
from ndpdimm.hw.memory.dma import DmaEngine
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.memory.sram import SramGeometry
from ndpdimm.hw.memory.weight_streamer import streamer_descriptor_layout, streamer_status_layout
from ndpdimm.hw.registers import ID_VALUE, register

U = 8
SRAM = SramGeometry(16384, 4, 256, 4)
CAP = 1 << 35
WIN = (1 << 20, 1 << 24)


def make_cp(link=False):
    return CommandProcessor(
        link_cmd_layout=link_command_layout(SRAM) if link else None,
        streamer_desc_layout=streamer_descriptor_layout(CAP, SRAM.size_bytes),
        streamer_status_layout=streamer_status_layout(),
        engine_cmd_layout=gemv_command_layout(16, 20, 16),
        feeder_cmd_layout=ActivationFeeder(sram=SRAM).cmd_layout,
        writer_cmd_layout=ResultWriter(sram=SRAM).cmd_layout,
        dma_desc_layout=DmaEngine(capacity_bytes=CAP, ranks=4,
                                  sram_size_bytes=SRAM.size_bytes).desc.payload.shape(),
        act_desc_layout=act_descriptor_layout(14),
        n_units=U, sram_size=SRAM.size_bytes, capacity_bytes=CAP)


GEMV = gemv_descriptor_layout(35, 14)
DMA = dma_descriptor_layout(35, 14)


def gemv(**kw):
    f = {"opcode": Opcode.GEMV, "id": 7, "op": GemvOp.DENSE, "dtype": Dtype.FP16,
         "batch_minus_one": 1, "accumulate": 0, "w_base": WIN[0], "n_rows": 20, "n_cols": 70,
         "idx_addr": 0, "n_idx": 0, "x_addr": 1024, "x_pitch": 160, "y_addr": 4096,
         "y_pitch": 96}
    f.update(kw)
    return GEMV.const(f).as_value().value


def dma(**kw):
    f = {"opcode": Opcode.DMA, "id": 9, "to_dram": 0, "dram": WIN[0], "sram": 0, "n_bytes": 256}
    f.update(kw)
    return DMA.const(f).as_value().value


def raw(opcode, id_=3):
    return opcode | (id_ << 4)


def run(descs, *, window=WIN, streamer_code=Status.OK, block_code=Status.OK, extra=None, link=False,
        link_id=0):
    """Push ``descs``, play the blocks, return (completions, dispatched commands, csr reads)."""
    dut = make_cp(link)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    seen = {"streamer": [], "engine": [], "feeder": [], "writer": [], "dma": [], "act": [], "link": [],
            "relayout": []}
    completions, reads = [], {}

    async def csr(ctx, addr, data=None):
        ctx.set(dut.csr.payload, {"addr": addr, "write": data is not None, "data": data or 0})
        ctx.set(dut.csr.valid, 1)
        await ctx.tick().until(dut.csr.ready)
        ctx.set(dut.csr.valid, 0)
        if data is None:
            ctx.set(dut.csr_resp.ready, 1)
            *_, value = await ctx.tick().sample(dut.csr_resp.payload).until(dut.csr_resp.valid)
            ctx.set(dut.csr_resp.ready, 0)
            return value

    async def host(ctx):
        reads["ID"] = await csr(ctx, register("ID").offset)
        await csr(ctx, register("WINDOW_BASE").offset, window[0])
        await csr(ctx, register("WINDOW_LIMIT").offset, window[1])
        if link:
            reads["window"] = (ctx.get(dut.window_base), ctx.get(dut.window_limit))
        if link_id:
            await csr(ctx, register("LINK_ID").offset, link_id)
            reads["LINK_ID"] = await csr(ctx, register("LINK_ID").offset)
        for d in descs:
            for i in range(4):
                await csr(ctx, register(f"DESC{i}").offset, (d >> (64 * i)) & (2 ** 64 - 1))
            await csr(ctx, register("DESC_PUSH").offset, 1)
        await csr(ctx, register("CTRL").offset, 1)
        for _ in range(len(descs)):
            while True:
                head = await csr(ctx, register("CQ_HEAD").offset)
                if head & 1:
                    break
            cyc = await csr(ctx, register("CQ_CYCLES").offset)
            nbytes = await csr(ctx, register("CQ_DRAM_BYTES").offset)
            completions.append({"id": (head >> 4) & 0xFFF, "code": Status((head >> 16) & 0xFF),
                                "opcode": (head >> 24) & 0xF, "cycles": cyc, "bytes": nbytes})
            await csr(ctx, register("CQ_POP").offset, 1)
        if extra:
            await extra(ctx, csr, reads)

    async def blocks(ctx):
        # accept every command; answer statuses a few cycles later
        pending = []
        ports = [("streamer", dut.streamer_desc), ("engine", dut.engine_cmd),
                 ("feeder", dut.feeder_cmd), ("writer", dut.writer_cmd), ("dma", dut.dma_desc),
                 ("act", dut.act_desc)] + \
            ([("link", dut.link_cmd), ("relayout", dut.relayout_desc)] if link else [])
        for _, p in ports:
            ctx.set(p.ready, 1)
        cycle = 0
        while True:
            for name, p in ports:
                if ctx.get(p.valid):
                    seen[name].append(ctx.get(p.payload))
                    if name == "streamer":
                        pending.append(("validate", cycle + 5))
                    elif name in ("feeder", "writer", "dma", "act", "link", "relayout"):
                        pending.append((name, cycle + 20))
            ctx.set(dut.streamer_validated, 0)
            for item in list(pending):
                kind, when = item
                if when > cycle:
                    continue
                if kind == "validate":
                    pending.remove(item)
                    if streamer_code == Status.OK:
                        ctx.set(dut.streamer_validated, 1)
                        pending.append(("streamer", cycle + 30))
                    else:
                        pending.append(("streamer", cycle))
                    continue
                port = {"streamer": dut.streamer_status, "feeder": dut.feeder_status,
                        "writer": dut.writer_status, "dma": dut.dma_status,
                        "act": dut.act_status, "link": getattr(dut, "link_status", None),
                        "relayout": getattr(dut, "relayout_status", None)}[kind]
                code = streamer_code if kind == "streamer" else block_code
                payload = {"code": code, "cycles": 1}
                if kind == "streamer":
                    payload = {"code": code, "bursts": 40, "cycles": 1}
                ctx.set(port.payload, payload)
                ctx.set(port.valid, 1)
                if ctx.get(port.ready):
                    pending.remove(item)
                    await ctx.tick()
                    ctx.set(port.valid, 0)
                    cycle += 1
                    break
            else:
                await ctx.tick()
                cycle += 1

    sim.add_testbench(host)
    sim.add_testbench(blocks, background=True)
    sim.run()
    return completions, seen, reads


def test_valid_gemv_dispatches_everything_with_derived_fields():
    comps, seen, reads = run([gemv()])
    assert reads["ID"] == ID_VALUE
    assert [c["code"] for c in comps] == [Status.OK] and comps[0]["id"] == 7
    assert comps[0]["bytes"] == 40 * 64 and comps[0]["cycles"] > 30
    s, = seen["streamer"]
    assert (s.mode, s.gather, s.base, s.n_rows, s.n_cols) == (GemvMode.DOT, 0, WIN[0], 20, 70)
    e, = seen["engine"]
    assert (e.n_out, e.n_steps, e.batch_minus_one) == (20, 9, 1)     # ceil(70 / 8) = 9
    f, = seen["feeder"]
    assert (f.n_steps, f.n_groups, f.x_addr, f.x_pitch) == (9, 3, 1024, 160)   # ceil(20 / 8)
    w, = seen["writer"]
    assert (w.y_addr, w.y_pitch, w.n_out, w.accumulate) == (4096, 96, 20, 0)


def test_column_gather_fields():
    comps, seen, _ = run([gemv(op=GemvOp.COL_GATHER, dtype=Dtype.INT8, n_rows=30, n_cols=200,
                               n_idx=12, idx_addr=512, y_pitch=800, x_pitch=32, x_addr=2048)])
    assert comps[0]["code"] == Status.OK
    e, = seen["engine"]
    assert (e.mode, e.n_out, e.n_steps) == (GemvMode.AXPY, 200, 12)
    f, = seen["feeder"]
    assert f.n_groups == 2                   # 200 outputs / (8 units x 16 INT8 lanes) -> 2


@pytest.mark.parametrize("fields,code", [
    ({"dtype": 3}, Status.BAD_FIELD),
    ({"op": 3}, Status.BAD_FIELD),
    ({"w_base": WIN[0] + 32}, Status.MISALIGNED),
    ({"x_addr": 1032}, Status.MISALIGNED),
    ({"y_pitch": 100}, Status.MISALIGNED),
    ({"w_base": WIN[0] - 64}, Status.DRAM_RANGE),                       # starts below the window
    ({"w_base": WIN[1] - 64 * 20}, Status.DRAM_RANGE),                  # ends past the window
    ({"y_addr": 16384 - 64}, Status.SRAM_RANGE),
    ({"x_pitch": 16000}, Status.SRAM_RANGE),
    ({"op": GemvOp.ROW_GATHER, "n_idx": 8, "idx_addr": 16384 - 16}, Status.SRAM_RANGE),
    ({"op": GemvOp.ROW_GATHER, "n_idx": 8, "idx_addr": 2}, Status.MISALIGNED),
])
def test_bad_gemv_is_rejected_without_side_effect(fields, code):
    comps, seen, _ = run([gemv(**fields)])
    assert [c["code"] for c in comps] == [code]
    assert all(not v for v in seen.values()), seen


def test_streamer_rejection_starts_nothing_else():
    """E.g. the streamer's index pre-scan found a bad last entry: nothing else is started."""
    comps, seen, _ = run([gemv(op=GemvOp.ROW_GATHER, n_idx=8, idx_addr=64)],
                         streamer_code=Status.BAD_INDEX)
    assert [c["code"] for c in comps] == [Status.BAD_INDEX]
    assert len(seen["streamer"]) == 1
    assert not seen["engine"] and not seen["feeder"] and not seen["writer"]


def test_block_error_is_reported():
    comps, _, _ = run([gemv()], block_code=Status.MISALIGNED)
    assert comps[0]["code"] == Status.MISALIGNED


def test_other_opcodes_and_dma_window():
    descs = [dma(), dma(dram=WIN[1] - 128, n_bytes=256), raw(Opcode.FENCE, 5),
             raw(Opcode.LINK_SEND), raw(Opcode.RELAYOUT), raw(Opcode.ATOMIC_ADD), raw(0), raw(12)]
    comps, seen, _ = run(descs)
    assert [c["code"] for c in comps] == [Status.OK, Status.DRAM_RANGE, Status.OK,
                                          Status.UNSUPPORTED, Status.UNSUPPORTED,
                                          Status.UNSUPPORTED, Status.BAD_OPCODE, Status.BAD_OPCODE]
    assert len(seen["dma"]) == 1 and comps[0]["bytes"] == 256
    assert not seen["streamer"] and not seen["engine"] and not seen["act"]


def test_link_descriptors_go_to_the_transaction_layer():
    """With DIMM-Link built, LINK_SEND / ATOMIC_ADD reach the transaction layer with the fields
    translated; its status is the completion's; LINK_ID reaches its id / chain-length outputs."""
    lk = link_descriptor_layout(14)

    def link(opcode, **kw):
        f = {"opcode": opcode, "id": 11, "read": 0, "int32": 0, "dest": 2, "remote": 1 << 36,
             "sram": 512, "n_bytes": 1024}
        f.update(kw)
        return lk.const(f).as_value().value

    descs = [link(Opcode.LINK_SEND), link(Opcode.LINK_SEND, read=1), link(Opcode.ATOMIC_ADD),
             link(Opcode.ATOMIC_ADD, int32=1)]
    comps, seen, reads = run(descs, link=True, link_id=1 | 3 << 4)
    assert [c["code"] for c in comps] == [Status.OK] * 4 and not seen["relayout"]
    assert [LinkOp(int(c.op)) for c in seen["link"]] == [
        LinkOp.WRITE, LinkOp.READ_REQUEST, LinkOp.ATOMIC_ADD_FP32, LinkOp.ATOMIC_ADD_INT32]
    first = seen["link"][0]
    assert (int(first.dest), int(first.remote_addr), int(first.local_addr), int(first.n_bytes)) == \
        (2, 1 << 36, 512, 1024)
    assert reads["LINK_ID"] == 0x31 and all(c["bytes"] == 0 for c in comps)
    comps, _, _ = run([link(Opcode.ATOMIC_ADD)], link=True, block_code=Status.REMOTE_RANGE)
    assert comps[0]["code"] == Status.REMOTE_RANGE


def test_relayout_descriptors_go_to_the_relayout_unit():
    """With DIMM-Link built, RELAYOUT reaches the relayout unit whole and its status is the
    completion's; the unit (and the link target) see the window registers."""
    rl = relayout_descriptor_layout(35, 14)
    fields = {"opcode": Opcode.RELAYOUT, "id": 5, "to_localized": 1, "group_base": 1,
              "group_dimms": 3, "target": 2, "block_bytes": 4096, "n_blocks": 777,
              "src": WIN[0], "dst": 1 << 30, "staging": 8192}
    descs = [rl.const(fields).as_value().value, raw(Opcode.LINK_SEND)]
    comps, seen, reads = run(descs, link=True)
    assert [(c["code"], c["opcode"], c["bytes"]) for c in comps] == [
        (Status.OK, Opcode.RELAYOUT, 0), (Status.OK, Opcode.LINK_SEND, 0)]
    assert len(seen["relayout"]) == 1 and len(seen["link"]) == 1 and not seen["dma"]
    got = seen["relayout"][0]
    assert {name: int(getattr(got, name)) for name in fields} == {k: int(v) for k, v in fields.items()}
    assert reads["window"] == WIN
    comps, _, _ = run([rl.const(fields).as_value().value], link=True, block_code=Status.REMOTE_RANGE)
    assert comps[0]["code"] == Status.REMOTE_RANGE


def test_activation_descriptors_go_to_the_sequencer():
    """ACT / SOFTMAX / ELTWISE reach the sequencer whole; its status is the completion's."""
    act = act_descriptor_layout(14)
    fields = {"opcode": Opcode.SOFTMAX, "id": 9, "op": 0, "in_fmt": 0, "out_fmt": 2, "n": 300,
              "src_a": 1024, "src_b": 0, "dst": 4096, "c": 0, "k": 0x3F800000}
    descs = [raw(Opcode.ACT, 4), act.const(fields).as_value().value, raw(Opcode.ELTWISE, 5)]
    comps, seen, _ = run(descs)
    assert [(c["code"], c["opcode"], c["bytes"]) for c in comps] == [
        (Status.OK, Opcode.ACT, 0), (Status.OK, Opcode.SOFTMAX, 0), (Status.OK, Opcode.ELTWISE, 0)]
    got = seen["act"][1]
    assert (int(got.opcode), int(got.n), int(got.src_a), int(got.dst), int(got.out_fmt)) == \
        (Opcode.SOFTMAX, 300, 1024, 4096, 2)
    assert len(seen["act"]) == 3 and not seen["dma"] and not seen["streamer"]
    comps, _, _ = run([raw(Opcode.ACT)], block_code=Status.SRAM_RANGE)
    assert comps[0]["code"] == Status.SRAM_RANGE


@pytest.mark.parametrize("to_dram", [0, 1])
def test_dma_window_edges(to_dram):
    """The protection window at its edges, both directions: a transfer whose first byte is the
    base, or whose last byte is just below the limit, runs; one burst below the base, one burst
    past the limit, starting at the limit, or wrapping around the address space is rejected
    with nothing started. (The SRAM side of a DMA is the DMA engine's check: its own tests.)"""
    cases = [
        (dma(to_dram=to_dram, dram=WIN[0], n_bytes=256), Status.OK),                 # at the base
        (dma(to_dram=to_dram, dram=WIN[1] - 256, n_bytes=256), Status.OK),           # to the limit
        (dma(to_dram=to_dram, dram=WIN[0] - 64, n_bytes=256), Status.DRAM_RANGE),    # a burst below
        (dma(to_dram=to_dram, dram=WIN[1] - 192, n_bytes=256), Status.DRAM_RANGE),   # a burst past
        (dma(to_dram=to_dram, dram=WIN[1], n_bytes=64), Status.DRAM_RANGE),          # at the limit
        (dma(to_dram=to_dram, dram=CAP - 64, n_bytes=256), Status.DRAM_RANGE),       # wraps around
    ]
    comps, seen, _ = run([d for d, _ in cases])
    assert [c["code"] for c in comps] == [code for _, code in cases]
    assert [(int(d.to_dram), int(d.dram_addr), int(d.n_bytes)) for d in seen["dma"]] == \
        [(to_dram, WIN[0], 256), (to_dram, WIN[1] - 256, 256)]


def test_gemv_weights_fit_the_window_exactly_or_not_at_all():
    """A GEMV whose weights end exactly at the window's limit runs; one burst further is refused."""
    bursts = 20 * 3                   # 20 stored rows of 70 FP16 (140 B), each padded to 3 bursts
    comps, seen, _ = run([gemv(w_base=WIN[1] - 64 * bursts), gemv(w_base=WIN[1] - 64 * (bursts - 1))])
    assert [c["code"] for c in comps] == [Status.OK, Status.DRAM_RANGE]
    assert len(seen["streamer"]) == 1 and int(seen["streamer"][0].base) == WIN[1] - 64 * bursts


def test_empty_window_rejects_every_dram_access():
    comps, seen, _ = run([gemv(), dma()], window=(0, 0))
    assert [c["code"] for c in comps] == [Status.DRAM_RANGE, Status.DRAM_RANGE]
    assert all(not v for v in seen.values())


def test_read_only_and_privileged_writes_are_counted():
    async def extra(ctx, csr, reads):
        await csr(ctx, register("ID").offset, 123)                       # read only
        await csr(ctx, 0x7F8, 1)                                         # unmapped
        reads["errors"] = await csr(ctx, register("CSR_ERRORS").offset)
        reads["id"] = await csr(ctx, register("ID").offset)
    _, _, reads = run([], extra=extra)
    assert reads["errors"] == 2 and reads["id"] == ID_VALUE
