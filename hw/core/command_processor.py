"""Command processor: registers, descriptor queue, checks and protection, dispatch, completions.

The host programs the NDP core through the CSR port (``csr`` requests:
``addr`` byte offset, ``write``, ``data``; ``csr_resp``: one beat per read)
using the register map of ``hw/registers.py``: it stages a 256-bit
descriptor (``hw/descriptors.py``) in ``DESC0..3``, pushes it with
``DESC_PUSH``, and reads completions from ``CQ_HEAD``/``CQ_CYCLES``/
``CQ_DRAM_BYTES`` (``CQ_POP`` drops one).

Execution: descriptors run one at a time in queue order while ``CTRL.ENABLE``
is set (so ``FENCE`` completes as soon as it is dispatched: everything before
it has completed). Each descriptor is checked *before anything is started*;
the first failing check gives its ``Status`` and the descriptor completes
with no side effect:

* opcode 0 or > 9: ``BAD_OPCODE``; ``LINK_SEND``/``ATOMIC_ADD``/``RELAYOUT`` in a
  core built without DIMM-Link (``link_cmd_layout=None``): ``UNSUPPORTED``.
* LINK_SEND / ATOMIC_ADD: handed to the link transaction layer
  (``hw/link/transaction.py``), which checks ``dest`` against the chain set in
  ``LINK_ID``, alignment and the local SRAM range before sending anything; the
  target DIMM checks the remote range (``REMOTE_RANGE``).
* RELAYOUT: the whole descriptor goes to the relayout unit
  (``hw/link/relayout.py``), which checks its fields, alignment, the window
  (``window_base``/``window_limit``, the ``WINDOW_BASE``/``WINDOW_LIMIT``
  registers, also given to the link target for remote DRAM writes) and the
  SRAM range before it borrows the DMA engine and the link initiator.
* GEMV: ``op`` > 2, dtype 3, batch above the engine's ``max_batch``,
  ``n_rows``/``n_cols``/``n_idx`` giving more outputs or steps than the engine's
  counters hold: ``BAD_FIELD``; ``w_base`` not 64 B aligned, ``x_addr``/``x_pitch``
  not 16 B, ``y_addr``/``y_pitch`` not 32 B, ``idx_addr`` not 4 B: ``MISALIGNED``;
  the weight bytes outside the window ``[WINDOW_BASE, WINDOW_LIMIT)``:
  ``DRAM_RANGE``; the X rows, the Y rows or the index list past the SRAM:
  ``SRAM_RANGE``. Then the weight streamer is started first and the engine,
  activation feeder and result writer only once the streamer reports its own
  checks passed (``streamer_validated``) - in particular its pre-scan of the
  whole index list (``BAD_INDEX`` for an entry past the matrix, even the last
  one), so a bad index list writes nothing.
* DMA: ``dram``..``dram + n_bytes`` outside the window: ``DRAM_RANGE``; the DMA
  engine checks alignment and the SRAM range itself before any access.
* ACT / SOFTMAX / ELTWISE: handed to the activation sequencer
  (``hw/activation/sequencer.py``), which checks formats, op, alignment, SRAM
  ranges and overlap before any access (they touch no DRAM).

Completion entry: id, opcode, status, cycles from dispatch to completion, DRAM
bytes (the streamer's bursts x 64 for a GEMV, ``n_bytes`` for a DMA, 0 otherwise).

Cycle behaviour: a pushed descriptor is dispatched 3 cycles after it reaches
the head of the queue (pop, decode, check); a rejected one completes in the
next cycle. CSR reads answer in the cycle after the request. The queue holds
``queue_depth`` descriptors, the completion queue ``cq_depth`` entries; a
completion waits (the core stalls) while the completion queue is full.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.descriptors import (
    DESCRIPTOR_BITS,
    GemvOp,
    Opcode,
    dma_descriptor_layout,
    gemv_descriptor_layout,
    link_descriptor_layout,
    relayout_descriptor_layout,
)
from ndpdimm.hw.formats import Dtype, GemvMode, check_int
from ndpdimm.hw.link.formats import LinkOp
from ndpdimm.hw.memory.port import Status, status_layout
from ndpdimm.hw.registers import CSR_DATA_BITS, ID_VALUE, register

__all__ = ["CommandProcessor", "csr_request_layout", "completion_layout"]

CSR_ADDR_BITS = 12


def csr_request_layout() -> data.StructLayout:
    return data.StructLayout({"addr": CSR_ADDR_BITS, "write": 1, "data": CSR_DATA_BITS})


def completion_layout() -> data.StructLayout:
    return data.StructLayout({"id": 12, "opcode": 4, "code": 8, "cycles": 32, "dram_bytes": 40})


class CommandProcessor(wiring.Component):
    """See module docstring. The dispatch ports carry the command layouts of the blocks they
    drive (``streamer_desc``, ``engine_cmd``, ``feeder_cmd``, ``writer_cmd``, ``dma_desc``);
    their status streams come back in; ``act_desc`` carries the whole descriptor
    (``act_desc_layout``) to the activation sequencer."""

    def __init__(self, *, streamer_desc_layout, streamer_status_layout, engine_cmd_layout,
                 feeder_cmd_layout, writer_cmd_layout, dma_desc_layout, act_desc_layout,
                 n_units=256, max_batch=16, index_bits=20, step_bits=16, sram_size=131072,
                 capacity_bytes=1 << 35, queue_depth=8, cq_depth=8, caps=0, link_cmd_layout=None):
        self.n_units = check_int("n_units", n_units, 4, 4096)
        if n_units & (n_units - 1):
            raise ValueError(f"n_units must be a power of two, got {n_units!r}")
        self.max_batch = check_int("max_batch", max_batch, 1, 16)
        self.index_bits, self.step_bits = index_bits, step_bits
        self.sram_size, self.capacity_bytes = sram_size, capacity_bytes
        self.queue_depth = check_int("queue_depth", queue_depth, 2, 64)
        self.cq_depth = check_int("cq_depth", cq_depth, 2, 64)
        self.caps = caps
        self.dram_bits = capacity_bytes.bit_length() - 1
        self.sram_bits = sram_size.bit_length() - 1
        self.gemv_layout = gemv_descriptor_layout(self.dram_bits, self.sram_bits)
        self.dma_layout = dma_descriptor_layout(self.dram_bits, self.sram_bits)
        self.link_layout = link_descriptor_layout(self.sram_bits)
        self.relayout_layout = relayout_descriptor_layout(self.dram_bits, self.sram_bits)
        self.has_link = link_cmd_layout is not None
        link_ports = {}
        if self.has_link:
            link_ports = {
                "link_cmd": Out(stream.Signature(link_cmd_layout)),
                "link_status": In(stream.Signature(status_layout())),
                "link_my_id": Out(4),
                "link_n_dimms": Out(5),
                "relayout_desc": Out(stream.Signature(self.relayout_layout)),
                "relayout_status": In(stream.Signature(status_layout())),
                "window_base": Out(CSR_DATA_BITS),
                "window_limit": Out(CSR_DATA_BITS),
            }
        super().__init__({
            **link_ports,
            "csr": In(stream.Signature(csr_request_layout())),
            "csr_resp": Out(stream.Signature(CSR_DATA_BITS)),
            "streamer_desc": Out(stream.Signature(streamer_desc_layout)),
            "streamer_status": In(stream.Signature(streamer_status_layout)),
            "streamer_validated": In(1),
            "engine_cmd": Out(stream.Signature(engine_cmd_layout)),
            "feeder_cmd": Out(stream.Signature(feeder_cmd_layout)),
            "feeder_status": In(stream.Signature(status_layout())),
            "writer_cmd": Out(stream.Signature(writer_cmd_layout)),
            "writer_status": In(stream.Signature(status_layout())),
            "dma_desc": Out(stream.Signature(dma_desc_layout)),
            "dma_status": In(stream.Signature(status_layout())),
            "act_desc": Out(stream.Signature(act_desc_layout)),
            "act_status": In(stream.Signature(status_layout())),
            "policy": Out(2),
            "busy": Out(1),
            "irq": Out(1),
            # counters from the blocks (1 GHz domain)
            "bursts_read": In(32),
            "row_hits": In(32),
            "row_misses": In(32),
            "refreshes": In(32),
            "gemv_busy": In(1),
            "act_busy": In(1),
            "dma_busy": In(1),
        })

    def elaborate(self, platform):
        m = Module()
        U = self.n_units
        Ub = U.bit_length() - 1

        # ---- queues ---------------------------------------------------------------------
        m.submodules.dq = dq = fifo.SyncFIFOBuffered(width=DESCRIPTOR_BITS, depth=self.queue_depth)
        cl = completion_layout()
        m.submodules.cq = cq = fifo.SyncFIFOBuffered(width=cl.size, depth=self.cq_depth)
        cq_head = cl(cq.r_data)

        # ---- registers ------------------------------------------------------------------
        regs = {name: Signal(CSR_DATA_BITS, name=name.lower(), init=register(name).reset)
                for name in ("CTRL", "WINDOW_BASE", "WINDOW_LIMIT", "POLICY", "LINK_ID")}
        staging = [Signal(64, name=f"desc{i}") for i in range(4)]
        csr_errors = Signal(CSR_DATA_BITS)
        cycles = Signal(CSR_DATA_BITS)
        gemv_busy_cycles = Signal(CSR_DATA_BITS)
        act_busy_cycles = Signal(CSR_DATA_BITS)
        dma_busy_cycles = Signal(CSR_DATA_BITS)
        m.d.sync += [cycles.eq(cycles + 1),
                     gemv_busy_cycles.eq(gemv_busy_cycles + self.gemv_busy),
                     act_busy_cycles.eq(act_busy_cycles + self.act_busy),
                     dma_busy_cycles.eq(dma_busy_cycles + self.dma_busy)]
        running = Signal()
        idle = ~running & (dq.level == 0)
        policy = register("POLICY").field("ARBITRATION")
        m.d.comb += [self.busy.eq(~idle), self.irq.eq(cq.r_rdy),
                     self.policy.eq(regs["POLICY"][policy.bits])]

        # CSR: one request per cycle; a read answers in the next cycle (held until taken)
        resp_valid = Signal()
        resp_data = Signal(CSR_DATA_BITS)
        m.d.comb += [self.csr_resp.valid.eq(resp_valid), self.csr_resp.payload.eq(resp_data),
                     self.csr.ready.eq(~resp_valid | self.csr_resp.ready)]
        with m.If(self.csr_resp.ready):
            m.d.sync += resp_valid.eq(0)
        req = self.csr.payload
        take = self.csr.valid & self.csr.ready
        status_word = Signal(CSR_DATA_BITS)
        cq_word = Signal(CSR_DATA_BITS)
        st, ch = register("STATUS"), register("CQ_HEAD")
        for word, reg, values in (
                (status_word, st, {"BUSY": ~idle, "QUEUED": dq.level, "CQ_WAITING": cq.level,
                                   "QUEUE_FULL": ~dq.w_rdy, "CQ_FULL": ~cq.w_rdy}),
                (cq_word, ch, {"VALID": cq.r_rdy, "ID": cq_head.id, "STATUS": cq_head.code,
                               "OPCODE": cq_head.opcode})):
            m.d.comb += [word[reg.field(name).bits].eq(value) for name, value in values.items()]
        read_values = {
            "ID": Const(ID_VALUE, 64), "CAPS": Const(self.caps, 64),
            "CTRL": regs["CTRL"], "STATUS": status_word,
            "WINDOW_BASE": regs["WINDOW_BASE"], "WINDOW_LIMIT": regs["WINDOW_LIMIT"],
            "POLICY": regs["POLICY"], "LINK_ID": regs["LINK_ID"],
            "CQ_HEAD": cq_word,
            "CQ_CYCLES": cq_head.cycles, "CQ_DRAM_BYTES": cq_head.dram_bytes,
            "CSR_ERRORS": csr_errors, "CYCLES": cycles,
            "GEMV_BUSY_CYCLES": gemv_busy_cycles, "ACT_BUSY_CYCLES": act_busy_cycles,
            "DMA_BUSY_CYCLES": dma_busy_cycles, "DRAM_BURSTS_READ": self.bursts_read,
            "DRAM_ROW_HITS": self.row_hits, "DRAM_ROW_MISSES": self.row_misses,
            "DRAM_REFRESHES": self.refreshes,
        }
        push = Signal()
        pop_cq = Signal()
        with m.If(take):
            with m.If(~req.write):
                m.d.sync += [resp_valid.eq(1), resp_data.eq(0)]
                with m.Switch(req.addr):
                    for name, value in read_values.items():
                        with m.Case(register(name).offset):
                            m.d.sync += resp_data.eq(value)
            with m.Else():
                bad = Signal()
                with m.Switch(req.addr):
                    for name in ("CTRL", "WINDOW_BASE", "WINDOW_LIMIT", "POLICY", "LINK_ID"):
                        with m.Case(register(name).offset):
                            if register(name).privileged:
                                with m.If(idle):
                                    m.d.sync += regs[name].eq(req.data)
                                with m.Else():
                                    m.d.comb += bad.eq(1)
                            else:
                                m.d.sync += regs[name].eq(req.data)
                    for i in range(4):
                        with m.Case(register(f"DESC{i}").offset):
                            m.d.sync += staging[i].eq(req.data)
                    with m.Case(register("DESC_PUSH").offset):
                        with m.If(dq.w_rdy):
                            m.d.comb += push.eq(1)
                        with m.Else():
                            m.d.comb += bad.eq(1)
                    with m.Case(register("CQ_POP").offset):
                        m.d.comb += pop_cq.eq(cq.r_rdy)
                    with m.Default():
                        m.d.comb += bad.eq(1)          # read-only or unmapped
                with m.If(bad):
                    m.d.sync += csr_errors.eq(csr_errors + 1)
        m.d.comb += [dq.w_data.eq(Cat(*staging)), dq.w_en.eq(push), cq.r_en.eq(pop_cq)]

        # ---- decode ---------------------------------------------------------------------
        desc = Signal(DESCRIPTOR_BITS)
        g = self.gemv_layout(desc[:self.gemv_layout.size])
        dm = self.dma_layout(desc[:self.dma_layout.size])
        opcode = desc[:4]
        desc_id = desc[4:16]
        # GEMV derived values
        is_int8 = g.dtype == int(Dtype.INT8)
        lanes_bits = Mux(is_int8, 4, 3)
        is_axpy = g.op == GemvOp.COL_GATHER
        gather = g.op != GemvOp.DENSE
        col_bytes = Mux(is_int8, g.n_cols, g.n_cols << 1)
        bpr = Signal(24)                              # 64 B bursts per stored neuron
        w_bytes = Signal(64)                          # wide enough that nothing wraps
        n_out = Signal(24)
        n_steps = Signal(24)
        n_groups = Signal(24)
        x_len = Signal(24)                            # bytes of one X row the feeder reads
        m.d.comb += [
            bpr.eq((col_bytes + 63) >> 6),
            w_bytes.eq((g.n_rows * bpr) << 6),
            n_out.eq(Mux(is_axpy, g.n_cols, Mux(gather, g.n_idx, g.n_rows))),
            n_steps.eq(Mux(is_axpy, g.n_idx, (g.n_cols + Mux(is_int8, 15, 7)) >> lanes_bits)),
            n_groups.eq(Mux(is_axpy, (n_out + ((U << lanes_bits) - 1)) >> (Ub + lanes_bits),
                            (n_out + (U - 1)) >> Ub)),
            x_len.eq(Mux(is_axpy, Mux(is_int8, g.n_rows, g.n_rows << 1), n_steps << 4)),
        ]
        batch_m1 = g.batch_minus_one
        win_lo, win_hi = regs["WINDOW_BASE"], regs["WINDOW_LIMIT"]
        sram = self.sram_size

        def in_window(lo, n_bytes):
            return (lo >= win_lo) & (lo + n_bytes <= win_hi)

        gemv_code = Signal(Status)
        with m.If((g.op > 2) | (g.dtype == 3) | (batch_m1 >= self.max_batch) |
                  (n_out >= (1 << self.index_bits)) | (n_steps >= (1 << self.step_bits))):
            m.d.comb += gemv_code.eq(Status.BAD_FIELD)
        with m.Elif((g.w_base[:6] != 0) | (g.x_addr[:4] != 0) | (g.x_pitch[:4] != 0) |
                    (g.y_addr[:5] != 0) | (g.y_pitch[:5] != 0) | (gather & (g.idx_addr[:2] != 0))):
            m.d.comb += gemv_code.eq(Status.MISALIGNED)
        with m.Elif(~in_window(g.w_base, w_bytes)):
            m.d.comb += gemv_code.eq(Status.DRAM_RANGE)
        with m.Elif((g.x_addr + batch_m1 * g.x_pitch + x_len > sram) |
                    (g.y_addr + batch_m1 * g.y_pitch + (n_out << 2) > sram) |
                    (gather & (g.idx_addr + (g.n_idx << 2) > sram))):
            m.d.comb += gemv_code.eq(Status.SRAM_RANGE)
        with m.Else():
            m.d.comb += gemv_code.eq(Status.OK)
        dma_ok = in_window(dm.dram, dm.n_bytes)

        # ---- dispatch FSM -----------------------------------------------------------------
        code = Signal(Status)
        t_start = Signal(32)
        dram_bytes = Signal(40)
        sent = Signal(3)           # engine, feeder, writer commands handed over
        got = Signal(3)            # streamer, feeder, writer statuses received
        entry = Signal(cl)
        m.d.comb += [entry.id.eq(desc_id), entry.opcode.eq(opcode), entry.code.eq(code),
                     entry.cycles.eq(cycles - t_start), entry.dram_bytes.eq(dram_bytes),
                     cq.w_data.eq(entry)]

        # command payloads
        sp = self.streamer_desc.payload
        m.d.comb += [
            sp.mode.eq(Mux(is_axpy, GemvMode.AXPY, GemvMode.DOT)), sp.gather.eq(gather),
            sp.dtype.eq(g.dtype), sp.base.eq(g.w_base), sp.n_rows.eq(g.n_rows),
            sp.n_cols.eq(g.n_cols), sp.idx_addr.eq(g.idx_addr), sp.n_idx.eq(Mux(gather, g.n_idx, 0)),
        ]
        ep = self.engine_cmd.payload
        m.d.comb += [ep.mode.eq(Mux(is_axpy, GemvMode.AXPY, GemvMode.DOT)), ep.dtype.eq(g.dtype),
                     ep.batch_minus_one.eq(batch_m1), ep.n_out.eq(n_out), ep.n_steps.eq(n_steps)]
        fp = self.feeder_cmd.payload
        m.d.comb += [fp.mode.eq(Mux(is_axpy, GemvMode.AXPY, GemvMode.DOT)), fp.dtype.eq(g.dtype),
                     fp.batch_minus_one.eq(batch_m1), fp.n_cols.eq(g.n_cols),
                     fp.n_steps.eq(n_steps), fp.n_groups.eq(n_groups), fp.x_addr.eq(g.x_addr),
                     fp.x_pitch.eq(g.x_pitch), fp.idx_addr.eq(g.idx_addr)]
        wp = self.writer_cmd.payload
        m.d.comb += [wp.y_addr.eq(g.y_addr), wp.y_pitch.eq(g.y_pitch),
                     wp.accumulate.eq(g.accumulate), wp.is_int.eq(is_int8),
                     wp.batch_minus_one.eq(batch_m1), wp.n_out.eq(n_out)]
        m.d.comb += self.act_desc.payload.as_value().eq(desc[:len(self.act_desc.payload.as_value())])
        if self.has_link:
            lk = self.link_layout(desc[:self.link_layout.size])
            lp = self.link_cmd.payload
            m.d.comb += [
                lp.op.eq(Mux(opcode == Opcode.ATOMIC_ADD,
                             Mux(lk.int32, LinkOp.ATOMIC_ADD_INT32, LinkOp.ATOMIC_ADD_FP32),
                             Mux(lk.read, LinkOp.READ_REQUEST, LinkOp.WRITE))),
                lp.dest.eq(lk.dest), lp.remote_addr.eq(lk.remote), lp.local_addr.eq(lk.sram),
                lp.n_bytes.eq(lk.n_bytes),
                self.link_my_id.eq(regs["LINK_ID"][register("LINK_ID").field("MY_ID").bits]),
                self.link_n_dimms.eq(regs["LINK_ID"][register("LINK_ID").field("N_DIMMS").bits]),
                self.relayout_desc.payload.as_value().eq(desc[:self.relayout_layout.size]),
                self.window_base.eq(win_lo), self.window_limit.eq(win_hi),
            ]
        dp = self.dma_desc.payload
        m.d.comb += [dp.to_dram.eq(dm.to_dram), dp.dram_addr.eq(dm.dram), dp.sram_addr.eq(dm.sram),
                     dp.n_bytes.eq(dm.n_bytes)]

        with m.FSM():
            with m.State("IDLE"):
                with m.If(regs["CTRL"][register("CTRL").field("ENABLE").bits] & dq.r_rdy):
                    m.d.comb += dq.r_en.eq(1)
                    m.d.sync += [desc.eq(dq.r_data), running.eq(1), t_start.eq(cycles),
                                 dram_bytes.eq(0), sent.eq(0), got.eq(0), code.eq(Status.OK)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                with m.Switch(opcode):
                    with m.Case(Opcode.GEMV):
                        with m.If(gemv_code != Status.OK):
                            m.d.sync += code.eq(gemv_code)
                            m.next = "COMPLETE"
                        with m.Else():
                            m.next = "GEMV_STREAMER"
                    with m.Case(Opcode.DMA):
                        with m.If(~dma_ok):
                            m.d.sync += code.eq(Status.DRAM_RANGE)
                            m.next = "COMPLETE"
                        with m.Else():
                            m.next = "DMA"
                    with m.Case(Opcode.FENCE):
                        m.next = "COMPLETE"
                    with m.Case(Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE):
                        m.next = "ACT"
                    for opcodes, state in (((Opcode.LINK_SEND, Opcode.ATOMIC_ADD), "LINK"),
                                           ((Opcode.RELAYOUT,), "RELAYOUT")):
                        with m.Case(*opcodes):
                            if self.has_link:
                                m.next = state
                            else:
                                m.d.sync += code.eq(Status.UNSUPPORTED)
                                m.next = "COMPLETE"
                    with m.Default():
                        m.d.sync += code.eq(Status.BAD_OPCODE)
                        m.next = "COMPLETE"
            with m.State("GEMV_STREAMER"):
                m.d.comb += self.streamer_desc.valid.eq(1)
                with m.If(self.streamer_desc.ready):
                    m.next = "GEMV_VALIDATE"
            with m.State("GEMV_VALIDATE"):
                # the streamer either passes its checks (and index pre-scan) or reports an error
                m.d.comb += self.streamer_status.ready.eq(1)
                with m.If(self.streamer_status.valid):
                    m.d.sync += [code.eq(self.streamer_status.payload.code),
                                 dram_bytes.eq(self.streamer_status.payload.bursts << 6)]
                    m.next = "COMPLETE"
                with m.Elif(self.streamer_validated):
                    m.next = "GEMV_RUN"
            with m.State("GEMV_RUN"):
                m.d.comb += [self.engine_cmd.valid.eq(~sent[0]), self.feeder_cmd.valid.eq(~sent[1]),
                             self.writer_cmd.valid.eq(~sent[2]),
                             self.streamer_status.ready.eq(~got[0]),
                             self.feeder_status.ready.eq(~got[1]),
                             self.writer_status.ready.eq(~got[2])]
                new_sent = sent | Cat(self.engine_cmd.ready, self.feeder_cmd.ready,
                                      self.writer_cmd.ready)
                new_got = got | Cat(self.streamer_status.valid, self.feeder_status.valid,
                                    self.writer_status.valid)
                m.d.sync += [sent.eq(new_sent), got.eq(new_got)]
                s_new = self.streamer_status.valid & ~got[0]
                f_new = self.feeder_status.valid & ~got[1]
                w_new = self.writer_status.valid & ~got[2]
                c = code
                c = Mux(s_new & (c == Status.OK), self.streamer_status.payload.code, c)
                c = Mux(f_new & (c == Status.OK), self.feeder_status.payload.code, c)
                c = Mux(w_new & (c == Status.OK), self.writer_status.payload.code, c)
                m.d.sync += code.eq(c)
                with m.If(s_new):
                    m.d.sync += dram_bytes.eq(self.streamer_status.payload.bursts << 6)
                with m.If((new_sent == 0b111) & (new_got == 0b111)):
                    m.next = "COMPLETE"
            def hand_over(state, desc, status, on_status=()):
                """States ``state`` (offer ``desc``) and ``state``_WAIT (take its ``status``)."""
                with m.State(state):
                    m.d.comb += desc.valid.eq(1)
                    with m.If(desc.ready):
                        m.next = f"{state}_WAIT"
                with m.State(f"{state}_WAIT"):
                    m.d.comb += status.ready.eq(1)
                    with m.If(status.valid):
                        m.d.sync += [code.eq(status.payload.code), *on_status]
                        m.next = "COMPLETE"

            hand_over("DMA", self.dma_desc, self.dma_status,
                      [dram_bytes.eq(Mux(self.dma_status.payload.code == Status.OK, dm.n_bytes, 0))])
            hand_over("ACT", self.act_desc, self.act_status)
            if self.has_link:
                hand_over("LINK", self.link_cmd, self.link_status)
                hand_over("RELAYOUT", self.relayout_desc, self.relayout_status)
            with m.State("COMPLETE"):
                m.d.comb += cq.w_en.eq(1)
                with m.If(cq.w_rdy):
                    m.d.sync += running.eq(0)
                    m.next = "IDLE"
        return m
