"""DDR4 command scheduler for one rank: FR-FCFS over a small request queue, with refresh.

Runs in the DRAM command clock (one command slot per cycle, tCK = 0.625 ns for
DDR4-3200), so every timing parameter of ``DramTiming`` is exact in cycles; the
buffer chip has one scheduler per rank because every rank has its own bus.

Requests (``req``: read or write of one 64 B burst at bank group / bank / row /
column, with a tag) enter a collapsing queue of ``queue_depth`` entries kept in
age order. Each cycle the scheduler issues at most one command (``cmd``):

1. **Refresh** when a refresh is owed and either the queue has been empty
   for ``REFRESH_IDLE`` cycles or ``max_postponed_refs`` refreshes are owed
   (postponing while traffic is waiting, never past the JEDEC limit; a queue
   that empties only for a moment does not start a tRFC that would stall a
   stream): precharge the open banks, then REF.
   ``refresh_phase`` offsets the first refresh so that ranks refresh at
   different times.
2. **Column command (first-ready)**: the oldest queued request whose row is
   open in its bank and whose RD/WR is legal this cycle.
3. **Row command (bank-level parallelism)**: every bank has a *leader*, the
   oldest queued request to it (the oldest urgent one if any is urgent). If
   a bank's leader is not a row hit, its row command - ACT if the bank is
   closed, PRE if it holds another row - is a candidate; the oldest
   candidate legal this cycle issues. So any number of banks can be between
   PRE and ACT at once, and on a stream the next rows of both bank groups
   open as soon as their first requests are queued.
   **Precharge rule**: a bank's open row is closed only for its leader, and
   only if no queued request hits it - unless the leader is urgent (then no
   queued *urgent* request may hit it: the leader is the oldest urgent one)
   or starving (below). Closing a row that younger requests still want for
   an older normal request (tried: the issue's first proposal) costs a
   stream 8 % of peak when host reads are mixed in (one re-opened stream row
   per conflicting host read); the age bound gives the older request its
   turn instead.

**Age bound**: a request that has been the oldest in the queue for
``age_limit`` cycles is *starving*: it counts as urgent and the oldest (so it
leads its bank and its row command goes first), and no other request may
issue a column command to its bank until it is served, so the precharge it
needs becomes legal. Each request ahead of it is served within the same
bound once it is the oldest, so no request waits more than about
``queue_depth * (age_limit + tRC)`` cycles plus refreshes, whatever the
traffic and the priorities.

A request never passes an older queued request to the same burst (same bank
group, bank, row and column), so a read after a write returns the written
data whatever the priorities. A column command also needs ``resp_space``:
every RD/WR produces one response (data or write acknowledgement) that the
controller must be able to buffer, because the DRAM cannot be stalled.

Requests marked ``urgent`` go first in both choices (the oldest urgent one
wins over any older normal one), and an urgent request leads its bank over
older normal ones, so it may precharge a row that only normal requests still
want: this is how the controller's host or NDP priority acts inside the
queue, not only at its door.

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

__all__ = ["DramCommand", "RankScheduler", "request_layout", "command_layout", "AGE_LIMIT"]

#: Cycles the oldest queued request may wait before it is served ahead of everything (starving).
#: Far above what it waits on a stream or under random traffic (a few tRC), so the bound only
#: acts against adversarial traffic (e.g. an endless run of urgent hits to the open row).
AGE_LIMIT = 512
#: Cycles the queue must have been empty before an owed (postponable) refresh is issued early.
REFRESH_IDLE = 64


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
                 tag_bits: int = 8, refresh_phase: int = 0, age_limit: int = AGE_LIMIT):
        if not isinstance(queue_depth, int) or not 1 <= queue_depth <= 64:
            raise ValueError(f"queue_depth must be an integer in 1..64, got {queue_depth!r}")
        if not isinstance(age_limit, int) or isinstance(age_limit, bool) or not 1 <= age_limit <= 65535:
            raise ValueError(f"age_limit must be an integer in 1..65535, got {age_limit!r}")
        self.age_limit = age_limit
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
        # an owed refresh goes early only once the queue has been empty REFRESH_IDLE cycles: a
        # queue that empties for a moment under a stream would otherwise stall it for tRFC
        idle = Signal(range(REFRESH_IDLE + 1))
        with m.If(q_count != 0):
            m.d.sync += idle.eq(0)
        with m.Elif(idle != REFRESH_IDLE):
            m.d.sync += idle.eq(idle + 1)
        refresh_mode = (owed != 0) & ((idle == REFRESH_IDLE) | (owed >= t.max_postponed_refs))

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

        # ---- age bound: cycles entry 0 (the oldest) has been the oldest --------------------
        head_age = Signal(range(self.age_limit + 1))
        starving = Signal()
        m.d.comb += starving.eq(q_valid[0] & (head_age == self.age_limit))
        urg = Signal(Q)                   # effective urgency: a starving entry 0 is urgent too
        for i in range(Q):
            m.d.comb += urg[i].eq(q[i].urgent | starving if i == 0 else q[i].urgent)
        bank_of = [bank_index(q[i].bank_group, q[i].bank) for i in range(Q)]
        same_bank = {}
        for i in range(Q):
            for j in range(i):
                same_bank[i, j] = same_bank[j, i] = Signal(name=f"same_bank_{j}_{i}")
                m.d.comb += same_bank[i, j].eq(q_valid[i] & q_valid[j] & (bank_of[i] == bank_of[j]))

        for i in range(Q):
            e = q[i]
            b = bank_of[i]
            older_same = Cat(q_valid[j] & same_burst(q[j], e) for j in range(i)) if i else Const(0)
            # a starving entry 0 that needs a row command holds the other requests off its bank
            held = starving & ~hit[0] & same_bank[i, 0] if i else Const(0)
            m.d.comb += [
                hit[i].eq(q_valid[i] & open_.bit_select(b, 1) & (open_row[b] == e.row)),
                col_ready[i].eq(hit[i] & col_ok[b] & ccd_ok[e.bank_group] & self.resp_space &
                                Mux(e.write, c_rtw.ready, wtr_ok[e.bank_group]) &
                                (older_same == 0) & ~held),
            ]
        wanted = Signal(n_banks)          # some queued request hits bank b's open row
        for b in range(n_banks):
            m.d.comb += wanted[b].eq(Cat(hit[i] & (bank_of[i] == b) for i in range(Q)).any())
        # leader[i]: the bank's oldest request (oldest urgent one if any): no older same-bank
        # request at least as urgent, no younger urgent one if i is not urgent
        leader = Signal(Q)
        row_ready = Signal(Q)
        for i in range(Q):
            e = q[i]
            b = bank_of[i]
            blockers = [same_bank[i, j] & (urg[j] | ~urg[i]) for j in range(i)]
            blockers += [same_bank[i, j] & urg[j] & ~urg[i] for j in range(i + 1, Q)]
            m.d.comb += [
                leader[i].eq(q_valid[i] & ~Cat(blockers).any() if blockers else q_valid[i]),
                # PRE if the bank holds another row, ACT if it is closed; legal this cycle
                row_ready[i].eq(leader[i] & ~hit[i] &
                                Mux(open_.bit_select(b, 1), pre_ok[b] & (urg[i] | ~wanted.bit_select(b, 1)),
                                    act_ok[b] & rrd_ok[e.bank_group] & faw_ok)),
            ]

        # oldest column-ready entry, oldest entry with a legal row command; urgent entries first
        col_sel = Signal(range(Q))
        col_any = Signal()
        row_sel = Signal(range(Q))
        row_any = Signal()
        urgent_col = Signal(Q)
        urgent_row = Signal(Q)
        m.d.comb += [urgent_col.eq(col_ready & urg), urgent_row.eq(row_ready & urg)]
        for i in reversed(range(Q)):
            with m.If(Mux(urgent_col != 0, urgent_col[i], col_ready[i])):
                m.d.comb += [col_sel.eq(i), col_any.eq(1)]
            with m.If(Mux(urgent_row != 0, urgent_row[i], row_ready[i])):
                m.d.comb += [row_sel.eq(i), row_any.eq(1)]

        # ---- command choice ---------------------------------------------------------------
        kind = Signal(DramCommand)
        cbg = Signal.like(self.cmd.bank_group)
        cbank = Signal.like(self.cmd.bank)
        crow = Signal.like(self.cmd.row)
        ccol = Signal.like(self.cmd.column)
        ctag = Signal.like(self.cmd.tag)
        dequeue = Signal()
        row_e = q[row_sel]
        row_b = bank_index(row_e.bank_group, row_e.bank)
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
        with m.Elif(row_any):
            m.d.comb += [kind.eq(Mux(open_.bit_select(row_b, 1), DramCommand.PRE, DramCommand.ACT)),
                         cbg.eq(row_e.bank_group), cbank.eq(row_e.bank), crow.eq(row_e.row)]

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
        with m.If(~q_valid[0] | (dequeue & (col_sel == 0))):
            m.d.sync += head_age.eq(0)
        with m.Elif(head_age != self.age_limit):
            m.d.sync += head_age.eq(head_age + 1)
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
