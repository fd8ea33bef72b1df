"""DDR4 command scheduler for one rank: FR-FCFS over a small request queue, with refresh.

Runs in the DRAM command clock (one command slot per cycle, tCK = 0.625 ns for
DDR4-3200), so every timing parameter of ``DramTiming`` is exact in cycles; the
buffer chip has one scheduler per rank because every rank has its own bus.

Requests (``req``: read or write of one 64 B burst at bank group / bank / row /
column, with a tag) enter a collapsing queue of ``queue_depth`` entries kept in
age order. Each cycle the scheduler issues at most one command (``cmd``):

1. **Refresh** when a refresh is owed and either the queue is empty or
   ``max_postponed_refs`` refreshes are owed (postponing while traffic is
   waiting, never past the JEDEC limit): precharge the open banks, then REF.
   ``refresh_phase`` offsets the first refresh so that ranks refresh at
   different times.
2. **Column command (first-ready)**: the oldest queued request whose row is
   open in its bank and whose RD/WR is legal this cycle.
3. **Row command (first-come)**: for the oldest request that is not a row hit,
   ACT if its bank is closed, or PRE if its bank holds another row that no
   queued request wants, when legal this cycle.

A request never passes an older queued request to the same burst (same bank
group, bank, row and column), so a read after a write returns the written
data whatever the priorities. A column command also needs ``resp_space``:
every RD/WR produces one response (data or write acknowledgement) that the
controller must be able to buffer, because the DRAM cannot be stalled.

Requests marked ``urgent`` go first in both choices (the oldest urgent one
wins over any older normal one), and an urgent request may precharge a row
that only normal requests still want: this is how the controller's host or
NDP priority acts inside the queue, not only at its door.

Legality comes from down-counters: per bank (ACT after tRC/tRP, RD/WR after
tRCD, PRE after tRAS/tRTP/write recovery), per bank group (tCCD_S/L,
tRRD_S/L, tWTR_S/L), per rank (tFAW window of four ACTs, read-to-write
turnaround tCL + tBL + 2 - CWL, tRFC). A command issued in cycle t with a
minimum spacing T makes the counter read T-1 in cycle t+1, so the next
command may issue in cycle t+T.

``data_valid`` / ``data_tag`` / ``data_write`` mark the cycle a burst's data
starts on the rank's bus (tCL after RD, CWL after WR): the read data path
captures there. Counters ``row_hits``, ``row_misses`` (a column command right
after its ACT) and ``refreshes`` are kept for performance reports.
"""

import enum

from amaranth.hdl import Array, Cat, Const, Module, Mux, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.memory.dram import DramOrganization, DramTiming

__all__ = ["DramCommand", "RankScheduler", "request_layout", "command_layout"]


class DramCommand(enum.IntEnum):
    NOP = 0
    ACT = 1
    RD = 2
    WR = 3
    PRE = 4
    REF = 5


def _bits(n):
    return max((n - 1).bit_length(), 1)


def _coordinate_fields(org: DramOrganization) -> dict:
    return {
        "bank_group": _bits(org.bank_groups),
        "bank": _bits(org.banks_per_group),
        "row": _bits(org.rows_per_bank),
        "column": _bits(org.bursts_per_row),
    }


def request_layout(org: DramOrganization, tag_bits: int) -> data.StructLayout:
    return data.StructLayout({"write": 1, **_coordinate_fields(org), "tag": tag_bits, "urgent": 1})


def command_layout(org: DramOrganization, tag_bits: int) -> data.StructLayout:
    return data.StructLayout({"kind": DramCommand, **_coordinate_fields(org), "tag": tag_bits})


class _Countdown:
    """A saturating down-counter: ``ready`` when zero; ``load(T)`` enforces a spacing of T cycles."""

    def __init__(self, m, limit, name):
        self.value = Signal(range(max(limit, 1) + 1), name=name)
        self.m = m
        self.loads = []
        self.ready = self.value == 0

    def load(self, cond, spacing):
        if spacing > 1:                    # a spacing of 1 cycle is no constraint
            self.loads.append((cond, spacing - 1))

    def elaborate(self):
        nxt = Mux(self.value == 0, 0, self.value - 1)
        for cond, value in self.loads:
            nxt = Mux(cond & (value > nxt), value, nxt)
        self.m.d.sync += self.value.eq(nxt)


class _ReadyBits:
    """The ``ready`` bits of some countdowns packed into one signal, indexed like an Array."""

    def __init__(self, m, countdowns, name):
        self.bits = Signal(len(countdowns), name=name)
        m.d.comb += self.bits.eq(Cat(c.ready for c in countdowns))

    def __getitem__(self, index):
        return self.bits.bit_select(index, 1)


class RankScheduler(wiring.Component):
    """Command scheduler of one rank (see module docstring)."""

    def __init__(self, org: DramOrganization, timing: DramTiming, queue_depth: int = 8,
                 tag_bits: int = 8, refresh_phase: int = 0):
        if not isinstance(queue_depth, int) or not 1 <= queue_depth <= 64:
            raise ValueError(f"queue_depth must be an integer in 1..64, got {queue_depth!r}")
        if not isinstance(refresh_phase, int) or not 0 <= refresh_phase < timing.tREFI:
            raise ValueError(f"refresh_phase must be in 0..tREFI-1, got {refresh_phase!r}")
        self.org, self.timing = org, timing
        self.queue_depth, self.tag_bits, self.refresh_phase = queue_depth, tag_bits, refresh_phase
        self.req_layout = request_layout(org, tag_bits)
        self.cmd_layout = command_layout(org, tag_bits)
        super().__init__({
            "req": In(stream.Signature(self.req_layout)),
            "cmd": Out(self.cmd_layout),
            "resp_space": In(1, init=1),
            "data_valid": Out(1),
            "data_write": Out(1),
            "data_tag": Out(tag_bits),
            "row_hits": Out(32),
            "row_misses": Out(32),
            "refreshes": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        org, t = self.org, self.timing
        Q = self.queue_depth
        n_banks = org.bank_groups * org.banks_per_group
        bank_bits = _bits(org.banks_per_group)

        def bank_index(bg, bank):
            return Cat(bank, bg) if n_banks > 1 else 0

        # ---- request queue, entry 0 oldest ------------------------------------------------
        q_valid = Signal(Q)
        q = Array(Signal(self.req_layout, name=f"q{i}") for i in range(Q))
        q_count = Signal(range(Q + 1))

        # ---- bank state -------------------------------------------------------------------
        open_ = Signal(n_banks)
        open_row = Array(Signal(self.req_layout.members["row"], name=f"open_row{b}")
                         for b in range(n_banks))
        fresh = Signal(n_banks)          # ACT done, no column command yet (row miss accounting)
        c_act = [_Countdown(m, t.tRC, f"act_ok{b}") for b in range(n_banks)]
        c_col = [_Countdown(m, t.tRCD, f"col_ok{b}") for b in range(n_banks)]
        c_pre = [_Countdown(m, max(t.tRAS, t.tRTP, t.CWL + t.tBL + t.tWR), f"pre_ok{b}")
                 for b in range(n_banks)]
        c_ccd = [_Countdown(m, t.tCCD_L, f"ccd_ok{g}") for g in range(org.bank_groups)]
        c_rrd = [_Countdown(m, t.tRRD_L, f"rrd_ok{g}") for g in range(org.bank_groups)]
        c_wtr = [_Countdown(m, t.CWL + t.tBL + t.tWTR_L, f"wtr_ok{g}") for g in range(org.bank_groups)]
        c_rtw = _Countdown(m, t.tCL + t.tBL + 2, "rtw_ok")
        c_rfc = _Countdown(m, t.tRFC, "rfc_ok")
        c_faw = [_Countdown(m, t.tFAW, f"faw{i}") for i in range(4)]

        # readiness per bank / bank group as packed bits, selected with bit_select (a narrow
        # shift, cheaper to simulate than a case mux per lookup)
        act_ok = _ReadyBits(m, c_act, "act_ok")
        col_ok = _ReadyBits(m, c_col, "col_ok")
        pre_ok = _ReadyBits(m, c_pre, "pre_ok")
        ccd_ok = _ReadyBits(m, c_ccd, "ccd_ok")
        rrd_ok = _ReadyBits(m, c_rrd, "rrd_ok")
        wtr_ok = _ReadyBits(m, c_wtr, "wtr_ok")
        faw_ok = Signal()
        m.d.comb += faw_ok.eq(sum(~c.ready for c in c_faw) < 4)
        rank_ok = c_rfc.ready

        # ---- refresh bookkeeping ------------------------------------------------------------
        refi = Signal(range(t.tREFI), init=t.tREFI - 1 - self.refresh_phase)
        owed = Signal(range(t.max_postponed_refs + 2))
        with m.If(refi == 0):
            m.d.sync += refi.eq(t.tREFI - 1)
        with m.Else():
            m.d.sync += refi.eq(refi - 1)
        refresh_mode = (owed != 0) & ((q_count == 0) | (owed >= t.max_postponed_refs))

        # ---- per-entry readiness ------------------------------------------------------------
        hit = Signal(Q)
        col_ready = Signal(Q)
        # bank group, bank, row and column are adjacent fields: one compare of that slice
        lay = self.req_layout
        assert list(lay.members)[1:5] == ["bank_group", "bank", "row", "column"]
        coord_lo = lay["bank_group"].offset
        coord_hi = lay["column"].offset + Shape.cast(lay["column"].shape).width

        def same_burst(a, b):
            return a.as_value()[coord_lo:coord_hi] == b.as_value()[coord_lo:coord_hi]

        for i in range(Q):
            e = q[i]
            b = bank_index(e.bank_group, e.bank)
            older_same = Cat(q_valid[j] & same_burst(q[j], e) for j in range(i)) if i else Const(0)
            m.d.comb += [
                hit[i].eq(q_valid[i] & open_.bit_select(b, 1) & (open_row[b] == e.row)),
                col_ready[i].eq(hit[i] & col_ok[b] & ccd_ok[e.bank_group] & self.resp_space &
                                Mux(e.write, c_rtw.ready, wtr_ok[e.bank_group]) &
                                (older_same == 0)),
            ]
        # wanted[b]: some queued request (wanted_urgent: some urgent one) hits bank b's open row
        wanted = Signal(n_banks)
        wanted_urgent = Signal(n_banks)
        for b in range(n_banks):
            in_b = [hit[i] & (bank_index(q[i].bank_group, q[i].bank) == b) for i in range(Q)]
            m.d.comb += [wanted[b].eq(Cat(in_b).any()),
                         wanted_urgent[b].eq(Cat(x & q[i].urgent for i, x in enumerate(in_b)).any())]

        # oldest column-ready entry, oldest non-hit entry; urgent entries first
        col_sel = Signal(range(Q))
        col_any = Signal()
        miss_sel = Signal(range(Q))
        miss_any = Signal()
        urgent_col = Signal(Q)
        urgent_miss = Signal(Q)
        for i in range(Q):
            m.d.comb += [urgent_col[i].eq(col_ready[i] & q[i].urgent),
                         urgent_miss[i].eq(q_valid[i] & ~hit[i] & q[i].urgent)]
        for i in reversed(range(Q)):
            with m.If(Mux(urgent_col != 0, urgent_col[i], col_ready[i])):
                m.d.comb += [col_sel.eq(i), col_any.eq(1)]
            with m.If(Mux(urgent_miss != 0, urgent_miss[i], q_valid[i] & ~hit[i])):
                m.d.comb += [miss_sel.eq(i), miss_any.eq(1)]

        # ---- command choice ---------------------------------------------------------------
        kind = Signal(DramCommand)
        cbg = Signal.like(self.cmd.bank_group)
        cbank = Signal.like(self.cmd.bank)
        crow = Signal.like(self.cmd.row)
        ccol = Signal.like(self.cmd.column)
        ctag = Signal.like(self.cmd.tag)
        dequeue = Signal()
        miss_e = q[miss_sel]
        miss_b = bank_index(miss_e.bank_group, miss_e.bank)
        col_e = q[col_sel]

        # refresh: close the lowest open bank when legal, then REF once all are closed
        pre_target = Signal(range(n_banks))
        pre_target_ok = Signal()
        for b in reversed(range(n_banks)):
            with m.If(open_[b]):
                m.d.comb += [pre_target.eq(b), pre_target_ok.eq(pre_ok[b])]
        all_closed = open_ == 0
        all_act_ok = Signal()
        m.d.comb += all_act_ok.eq(Cat(c.ready for c in c_act).all())

        with m.If(~rank_ok):
            pass
        with m.Elif(refresh_mode):
            with m.If(all_closed):
                with m.If(all_act_ok):
                    m.d.comb += kind.eq(DramCommand.REF)
            with m.Elif(pre_target_ok):
                m.d.comb += [kind.eq(DramCommand.PRE), cbg.eq(pre_target >> bank_bits),
                             cbank.eq(pre_target[:bank_bits] if n_banks > 1 else 0)]
        with m.Elif(col_any):
            m.d.comb += [kind.eq(Mux(col_e.write, DramCommand.WR, DramCommand.RD)),
                         cbg.eq(col_e.bank_group), cbank.eq(col_e.bank), crow.eq(col_e.row),
                         ccol.eq(col_e.column), ctag.eq(col_e.tag), dequeue.eq(1)]
        with m.Elif(miss_any):
            with m.If(~open_.bit_select(miss_b, 1)):
                with m.If(act_ok[miss_b] & rrd_ok[miss_e.bank_group] & faw_ok):
                    m.d.comb += [kind.eq(DramCommand.ACT), cbg.eq(miss_e.bank_group),
                                 cbank.eq(miss_e.bank), crow.eq(miss_e.row)]
            # an urgent request may close a row that only non-urgent requests still want
            with m.Elif(pre_ok[miss_b] & ~Mux(miss_e.urgent, wanted_urgent, wanted).bit_select(miss_b, 1)):
                m.d.comb += [kind.eq(DramCommand.PRE), cbg.eq(miss_e.bank_group),
                             cbank.eq(miss_e.bank)]

        m.d.comb += [
            self.cmd.kind.eq(kind), self.cmd.bank_group.eq(cbg), self.cmd.bank.eq(cbank),
            self.cmd.row.eq(crow), self.cmd.column.eq(ccol), self.cmd.tag.eq(ctag),
        ]

        # ---- state and timing updates ---------------------------------------------------
        cb = bank_index(cbg, cbank)
        is_act, is_pre = kind == DramCommand.ACT, kind == DramCommand.PRE
        is_rd, is_wr = kind == DramCommand.RD, kind == DramCommand.WR
        is_ref = kind == DramCommand.REF
        is_col = is_rd | is_wr
        for b in range(n_banks):
            here = cb == b
            c_act[b].load(here & is_act, t.tRC)
            c_act[b].load(here & is_pre, t.tRP)
            c_col[b].load(here & is_act, t.tRCD)
            c_pre[b].load(here & is_act, t.tRAS)
            c_pre[b].load(here & is_rd, t.tRTP)
            c_pre[b].load(here & is_wr, t.CWL + t.tBL + t.tWR)
        for g in range(org.bank_groups):
            same = cbg == g
            c_ccd[g].load(is_col & same, t.tCCD_L)
            c_ccd[g].load(is_col & ~same, t.tCCD_S)
            c_rrd[g].load(is_act & same, t.tRRD_L)
            c_rrd[g].load(is_act & ~same, t.tRRD_S)
            c_wtr[g].load(is_wr & same, t.CWL + t.tBL + t.tWTR_L)
            c_wtr[g].load(is_wr & ~same, t.CWL + t.tBL + t.tWTR_S)
        c_rtw.load(is_rd, t.tCL + t.tBL + 2 - t.CWL)
        c_rfc.load(is_ref, t.tRFC)
        # tFAW: the ACT takes the first free window slot
        free_found = Signal(5)
        for i, c in enumerate(c_faw):
            first_free = c.ready & (free_found[:i] == 0) if i else c.ready
            m.d.comb += free_found[i].eq(c.ready)
            c.load(is_act & first_free, t.tFAW)
        for c in c_act + c_col + c_pre + c_ccd + c_rrd + c_wtr + [c_rtw, c_rfc] + c_faw:
            c.elaborate()

        with m.If(is_act):
            m.d.sync += [open_.bit_select(cb, 1).eq(1), open_row[cb].eq(crow),
                         fresh.bit_select(cb, 1).eq(1)]
        with m.If(is_pre):
            m.d.sync += open_.bit_select(cb, 1).eq(0)
        with m.If(is_col):
            m.d.sync += fresh.bit_select(cb, 1).eq(0)
            with m.If(fresh.bit_select(cb, 1)):
                m.d.sync += self.row_misses.eq(self.row_misses + 1)
            with m.Else():
                m.d.sync += self.row_hits.eq(self.row_hits + 1)
        with m.If(is_ref):
            m.d.sync += self.refreshes.eq(self.refreshes + 1)
        owed_next = owed + (refi == 0) - is_ref
        m.d.sync += owed.eq(owed_next)

        # ---- queue: dequeue (collapse) and enqueue -----------------------------------------
        enq = self.req.valid & self.req.ready
        m.d.comb += self.req.ready.eq((q_count < Q) | dequeue)
        count_after = Mux(dequeue, q_count - 1, q_count)
        for i in range(Q):
            move = dequeue & (i >= col_sel)           # shift entries above the removed one
            shifted_valid = Signal(name=f"sv{i}")
            shifted = Signal(self.req_layout, name=f"sh{i}")
            m.d.comb += [
                shifted_valid.eq(Mux(move, q_valid[i + 1] if i + 1 < Q else 0, q_valid[i])),
                shifted.eq(Mux(move, q[i + 1], q[i]) if i + 1 < Q else q[i]),
            ]
            with m.If(enq & (count_after == i)):
                m.d.sync += [q[i].eq(self.req.payload), q_valid[i].eq(1)]
            with m.Else():
                m.d.sync += [q[i].eq(shifted), q_valid[i].eq(shifted_valid)]
        m.d.sync += q_count.eq(count_after + enq)

        # ---- data-bus timing marks --------------------------------------------------------
        depth = max(t.tCL, t.CWL)
        line_valid = Signal(depth + 1)
        line_write = Signal(depth + 1)
        line_tag = Array(Signal(self.tag_bits, name=f"tag_line{i}") for i in range(depth + 1))
        m.d.sync += [line_valid.eq(line_valid << 1), line_write.eq(line_write << 1)]
        for i in range(1, depth + 1):
            m.d.sync += line_tag[i].eq(line_tag[i - 1])
        # RD enters so that it leaves after tCL cycles, WR after CWL: insert at different depths
        rd_pos, wr_pos = depth - t.tCL, depth - t.CWL
        m.d.comb += [self.data_valid.eq(line_valid[depth]), self.data_write.eq(line_write[depth]),
                     self.data_tag.eq(line_tag[depth])]
        for pos, cond, write in ((rd_pos, is_rd, 0), (wr_pos, is_wr, 1)):
            with m.If(cond):
                m.d.sync += [line_valid[pos + 1].eq(1), line_write[pos + 1].eq(write),
                             line_tag[pos + 1].eq(ctag)]
        return m
