"""Activation sequencer: runs ACT / SOFTMAX / ELTWISE descriptors SRAM to SRAM on the activation unit.

What it does
------------
It takes one descriptor (``desc``, ``hw/descriptors.py``: ``act_descriptor_layout``), checks it,
then runs one or more *passes* of the activation unit (``hw/activation/unit.py``,
a submodule with ``lanes`` lanes): each pass streams a vector out of the SRAM
through its read port (``rd``), through the unit, and (element ops) back into
the SRAM through its write port (``wr``). Then one ``status`` beat.

=========  ================================================================================
opcode     passes
=========  ================================================================================
ACT        one pass of ``op``: PASS (with ``in_fmt`` FP32 and ``out_fmt`` FP16/BF16: the
           FP32 -> FP16/BF16 conversion with RNE), RELU, SILU, GELU, SCALE (``k``), EXP
           (``c``, ``k``), RECIP: ``n`` elements from ``src_a`` to ``dst``. MAX and SUMEXP
           (``c``) are reductions: one scalar in ``out_fmt`` at ``dst``.
ELTWISE    one pass of ADD or MUL over ``src_a`` and ``src_b`` to ``dst`` (ADD with FP32
           in and out is the MERGE of partial sums).
SOFTMAX    four passes: ``m`` = MAX(x), ``s`` = SUMEXP(x, c = m), ``r`` = RECIP(s) (a
           one-lane beat from a register, no SRAM access), ``y`` = EXP(x, c = m, k = r)
           to ``dst`` in ``out_fmt``. ``m``, ``s``, ``r`` are binary32 and stay inside.
           ``op``, ``c``, ``k`` and ``src_b`` are ignored.
=========  ================================================================================

``cosim/golden/activation.py`` (``elementwise``, ``reduce_beats``, ``softmax``)
is the bit-exact reference; ``cosim/golden/act_program.py`` applies a whole descriptor
to an SRAM image.

SRAM layouts
------------
A vector of ``n`` elements is contiguous: element ``i`` at ``addr + i*e``,
``e`` = 2 bytes (FP16, BF16) or 4 (FP32) for its format (``in_fmt`` for
sources, ``out_fmt`` for ``dst``). Addresses are multiples of the 32 B SRAM
word. The last output word is written with byte enables, so no byte past
``dst + n_out*e`` changes (``n_out`` = ``n``, or 1 for a reduction).

A *beat* is ``lanes`` consecutive elements (the last one partial): beat ``b``
holds elements ``b*lanes ..``. Reductions combine lanes in a tree per beat and
then beats in order, so results depend on ``lanes`` (the golden model takes it
as a parameter). ``lanes`` is a multiple of 16, so a beat is a whole number of
SRAM words in every format.

Checks (first failure reported, nothing read or written)
--------------------------------------------------------
1. ``BAD_FIELD``: ``in_fmt`` or ``out_fmt`` 3; ACT with ``op`` ADD, MUL or a
   reserved code (11..15); ELTWISE with ``op`` other than ADD/MUL.
2. ``MISALIGNED``: ``src_a``, ``dst`` (and ``src_b`` for ELTWISE) not multiples of 32.
3. ``SRAM_RANGE``: a source or the destination runs past the SRAM.
4. ``BAD_FIELD``: the destination overlaps a source other than exactly in place
   (same start address and ``out`` element no larger than the ``in`` element):
   an overlapping write could then land on words not yet read.
``n == 0`` then completes ``OK`` with no access.

Cycle behaviour
---------------
* Descriptor taken in cycle 0, checks in cycle 1, an error status offered in
  cycle 2; a pass's unit command in the cycle after the checks.
* Reads: one SRAM word per cycle on ``rd`` (ELTWISE: ``a`` and ``b`` words
  alternate), ``beat_slots`` beats in flight (a slot is reserved by a beat's
  first read and freed when the unit takes the beat), so ``rd.resp.ready`` is
  always 1. With the SRAM granting at once a beat of ``w`` words is ready
  ``w + 2`` cycles after its first read.
* The unit: one beat per cycle, ``LATENCY`` = 7 cycles (reductions add the
  tree depth, see the unit).
* Writes: one word per cycle on ``wr``; an output beat of ``w`` words takes ``w``
  cycles. FP16 -> FP16 at 16 lanes streams one beat (32 B in, 32 B out) per
  cycle: ``n/16 + 15`` cycles per pass (measured: 79 for n = 1024), about
  ``3n/16 + 50`` for a softmax.
* A pass ends when its last output word was written (or its scalar taken);
  the status is offered in the cycle after the last pass ended.

``busy`` is high from the descriptor handshake until the status is taken.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.activation.unit import ONE_F32, ActFmt, ActivationUnit, ActOp
from ndpdimm.hw.descriptors import Opcode, act_descriptor_layout
from ndpdimm.hw.formats import check_int
from ndpdimm.hw.memory.port import (
    STATUS_CYCLES_BITS,
    Status,
    offer_status,
    status_layout,
    status_state,
)
from ndpdimm.hw.memory.sram import SramGeometry

__all__ = ["ActivationSequencer", "act_descriptor_layout", "ACT_UNARY_OPS", "SRAM_WORD_BYTES"]

SRAM_WORD_BYTES = 32
#: ``op`` values an ACT descriptor accepts (element ops and the two reductions).
ACT_UNARY_OPS = (ActOp.PASS, ActOp.RELU, ActOp.SILU, ActOp.GELU, ActOp.SCALE, ActOp.EXP,
                 ActOp.RECIP, ActOp.MAX, ActOp.SUMEXP)


def _in(value, *codes):
    return Cat(*(value == int(c) for c in codes)).any()


class ActivationSequencer(wiring.Component):
    """The activation sequencer with its activation unit (see module docstring).

    Parameters
    ----------
    sram : SramGeometry
        The SRAM behind both ports (256-bit words).
    lanes : int
        Activation-unit lanes: a multiple of 16 and a power of two, 16..256 (default 16,
        one 32 B SRAM word of FP16 per beat: the rate of one SRAM port).
    beat_slots : int
        Input beats in flight (2..8, default 6: a slot is held from its first read request
        to the unit taking the beat, about 5 cycles, so 4 slots measured 0.64 beats per
        cycle on a 1024-element FP16 pass and 6 slots the full rate).
    count_bits : int
        Width of ``n`` (default 20).
    """

    def __init__(self, sram: SramGeometry = None, lanes: int = 16, beat_slots: int = 6,
                 count_bits: int = 20):
        self.geometry = sram if sram is not None else SramGeometry()
        if not isinstance(self.geometry, SramGeometry) or self.geometry.word_bits != 256:
            raise ValueError(f"sram must be a SramGeometry with 256-bit words, got {sram!r}")
        check_int("lanes", lanes, 16, 256)
        if lanes & (lanes - 1):
            raise ValueError(f"lanes must be a power of two (16..256), got {lanes!r}")
        self.lanes = lanes
        self.beat_slots = check_int("beat_slots", beat_slots, 2, 8)
        self.count_bits = check_int("count_bits", count_bits, 1, 30)
        self.sram_bits = self.geometry.size_bytes.bit_length() - 1
        self.descriptor_layout = act_descriptor_layout(self.sram_bits, count_bits)
        self.unit = ActivationUnit(lanes)
        port = self.geometry.port_signature
        super().__init__({
            "desc": In(stream.Signature(self.descriptor_layout)),
            "status": Out(stream.Signature(status_layout())),
            "rd": Out(port),
            "wr": Out(port),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.unit = unit = self.unit
        L = self.lanes
        D = self.beat_slots
        size = self.geometry.size_bytes
        wide = self.sram_bits + self.count_bits + 3          # byte arithmetic that never wraps

        d = Signal(self.descriptor_layout)
        job_cycles = Signal(STATUS_CYCLES_BITS)
        m.d.sync += job_cycles.eq(job_cycles + 1)

        # ---- checks (combinational on the registered descriptor) -----------------------
        is_act = d.opcode == Opcode.ACT
        is_elt = d.opcode == Opcode.ELTWISE
        is_smx = d.opcode == Opcode.SOFTMAX
        in32 = d.in_fmt == ActFmt.FP32
        out32 = d.out_fmt == ActFmt.FP32
        is_red = is_act & _in(d.op, ActOp.MAX, ActOp.SUMEXP)
        in_bytes = Signal(wide)
        out_bytes = Signal(wide)
        m.d.comb += [in_bytes.eq(Mux(in32, d.n << 2, d.n << 1)),
                     out_bytes.eq(Mux(is_red, Mux(out32, 4, 2), Mux(out32, d.n << 2, d.n << 1)))]

        def overlaps(src):
            """dst range meets [src, src + in_bytes) other than exactly in place."""
            meet = (d.dst < src + in_bytes) & (src < d.dst + out_bytes)
            in_place = (d.dst == src) & (in32 | ~out32)
            return meet & ~in_place

        check_code = Signal(Status)
        with m.If((d.in_fmt == 3) | (d.out_fmt == 3) |
                  (is_act & ~_in(d.op, *ACT_UNARY_OPS)) |
                  (is_elt & ~_in(d.op, ActOp.ADD, ActOp.MUL))):
            m.d.comb += check_code.eq(Status.BAD_FIELD)
        with m.Elif((d.src_a[:5] != 0) | (d.dst[:5] != 0) | (is_elt & (d.src_b[:5] != 0))):
            m.d.comb += check_code.eq(Status.MISALIGNED)
        with m.Elif((d.src_a + in_bytes > size) | (d.dst + out_bytes > size) |
                    (is_elt & (d.src_b + in_bytes > size))):
            m.d.comb += check_code.eq(Status.SRAM_RANGE)
        with m.Elif((d.n != 0) & (overlaps(d.src_a) | (is_elt & overlaps(d.src_b)))):
            m.d.comb += check_code.eq(Status.BAD_FIELD)
        with m.Else():
            m.d.comb += check_code.eq(Status.OK)

        # ---- the current pass -----------------------------------------------------------
        p_op = Signal(4)
        p_in_fmt = Signal(2)
        p_out_fmt = Signal(2)
        p_c = Signal(32)
        p_k = Signal(32)
        p_binary = Signal()
        p_reduce = Signal()
        p_from_reg = Signal()           # the RECIP pass of a softmax: its one beat is a register
        p_keep = Signal()               # the scalar stays inside (softmax), nothing is written
        smx_step = Signal(2)            # softmax: 0 MAX, 1 SUMEXP, 2 RECIP, 3 EXP
        smx_max = Signal(32)
        smx_sum = Signal(32)
        smx_recip = Signal(32)
        p_in32 = p_in_fmt == ActFmt.FP32
        p_out32 = p_out_fmt == ActFmt.FP32

        n_beats = Signal(self.count_bits)
        m.d.comb += n_beats.eq((d.n + (L - 1)) >> (L.bit_length() - 1))

        def beat_words(count, e32):
            """SRAM words holding ``count`` elements of 2 (or 4, ``e32``) bytes."""
            return Mux(e32, (count + 7) >> 3, (count + 15) >> 4)

        # ---- reader: words of a (and b) into beat slots -----------------------------------
        slot_a = [Signal(32 * L, name=f"slot{i}_a") for i in range(D)]
        slot_b = [Signal(32 * L, name=f"slot{i}_b") for i in range(D)]
        slot_count = [Signal(range(L + 1), name=f"slot{i}_count") for i in range(D)]
        slot_last = Signal(D)
        slot_full = Signal(D)
        slots_used = Signal(range(D + 1))
        rd_beat = Signal(self.count_bits)        # next beat to start reading
        rd_slot = Signal(range(D))
        rd_word = Signal(range(L // 8 + 1))      # word of the beat being read
        rd_words = Signal(range(L // 8 + 1))     # its words (0: no beat being read)
        rd_b_next = Signal()                     # ELTWISE: the next request is the b word
        rd_addr_a = Signal(self.sram_bits)       # byte addresses of the next words
        rd_addr_b = Signal(self.sram_bits)
        head = Signal(range(D))
        resp_slot = Signal(range(D))
        resp_word = Signal(range(L // 8 + 1))
        resp_b = Signal()
        reading = Signal()

        req = self.rd.req
        word_index_bits = self.sram_bits - 5
        remaining = Signal(self.count_bits + 1)
        m.d.comb += remaining.eq(d.n - (rd_beat << (L.bit_length() - 1)))
        count_now = Mux(remaining >= L, L, remaining)
        active = rd_words != 0                   # a beat is being read
        issue = Signal()
        start_beat = Signal()
        m.d.comb += [
            issue.eq((~req.valid | req.ready) &
                     (active | (reading & ~p_from_reg & (rd_beat != n_beats) & (slots_used != D)))),
            start_beat.eq(issue & ~active),
        ]
        words_cur = Mux(active, rd_words, beat_words(count_now, p_in32))
        word_cur = Mux(active, rd_word, 0)
        with m.If(req.valid & req.ready):
            m.d.sync += req.valid.eq(0)
        with m.If(start_beat):
            m.d.sync += [Array(slot_count)[rd_slot].eq(count_now),
                         slot_last.bit_select(rd_slot, 1).eq(rd_beat == n_beats - 1),
                         rd_beat.eq(rd_beat + 1)]
        with m.If(issue):
            use_b = p_binary & rd_b_next
            m.d.sync += [req.valid.eq(1), req.payload.write.eq(0),
                         req.payload.addr.eq(Mux(use_b, rd_addr_b, rd_addr_a)[5:5 + word_index_bits]),
                         rd_words.eq(words_cur), rd_word.eq(word_cur)]
            with m.If(use_b):
                m.d.sync += [rd_addr_b.eq(rd_addr_b + 32), rd_b_next.eq(0)]
            with m.Else():
                m.d.sync += [rd_addr_a.eq(rd_addr_a + 32), rd_b_next.eq(p_binary)]
            with m.If(~p_binary | use_b):
                with m.If(word_cur + 1 == words_cur):
                    m.d.sync += [rd_words.eq(0), rd_slot.eq(Mux(rd_slot == D - 1, 0, rd_slot + 1))]
                with m.Else():
                    m.d.sync += rd_word.eq(word_cur + 1)

        # responses: in request order, always taken (the slot was reserved)
        resp = self.rd.resp
        m.d.comb += resp.ready.eq(1)
        resp_words = beat_words(Array(slot_count)[resp_slot], p_in32)
        with m.If(resp.valid):
            for i in range(D):
                with m.If(resp_slot == i):
                    for w in range(L // 8):
                        with m.If(resp_word == w):
                            with m.If(resp_b):
                                m.d.sync += slot_b[i].word_select(w, 256).eq(resp.payload)
                            with m.Else():
                                m.d.sync += slot_a[i].word_select(w, 256).eq(resp.payload)
            with m.If(p_binary & ~resp_b):
                m.d.sync += resp_b.eq(1)
            with m.Else():
                m.d.sync += resp_b.eq(0)
                with m.If(resp_word + 1 == resp_words):
                    m.d.sync += [resp_word.eq(0), slot_full.bit_select(resp_slot, 1).eq(1),
                                 resp_slot.eq(Mux(resp_slot == D - 1, 0, resp_slot + 1))]
                with m.Else():
                    m.d.sync += resp_word.eq(resp_word + 1)

        # ---- into the unit ---------------------------------------------------------------
        def lanes_of(raw, e32):
            return [Mux(e32, raw.word_select(ln, 32), raw.word_select(ln, 16)) for ln in range(L)]

        head_a = Array(slot_a)[head]
        head_b = Array(slot_b)[head]
        a_lanes = lanes_of(head_a, p_in32)
        b_lanes = lanes_of(head_b, p_in32)
        reg_sent = Signal()
        ua, ub = unit.a, unit.b
        with m.If(p_from_reg):
            m.d.comb += [ua.valid.eq(reading & ~reg_sent), ua.payload.data[0].eq(smx_sum),
                         ua.payload.count.eq(1), ua.payload.last.eq(1)]
        with m.Else():
            m.d.comb += [ua.valid.eq(reading & slot_full.bit_select(head, 1)),
                         ua.payload.count.eq(Array(slot_count)[head]),
                         ua.payload.last.eq(slot_last.bit_select(head, 1))]
            for ln in range(L):
                m.d.comb += [ua.payload.data[ln].eq(a_lanes[ln]), ub.payload.data[ln].eq(b_lanes[ln])]
        m.d.comb += ub.valid.eq(ua.valid & p_binary)
        take = ua.valid & ua.ready
        with m.If(take & p_from_reg):
            m.d.sync += reg_sent.eq(1)
        with m.If(take & ~p_from_reg):
            m.d.sync += [slot_full.bit_select(head, 1).eq(0),
                         head.eq(Mux(head == D - 1, 0, head + 1))]
        with m.If(start_beat & ~(take & ~p_from_reg)):
            m.d.sync += slots_used.eq(slots_used + 1)
        with m.Elif(~start_beat & take & ~p_from_reg):
            m.d.sync += slots_used.eq(slots_used - 1)

        # ---- out of the unit: words to the SRAM (or the softmax's registers) --------------
        out = unit.out
        w_valid = Signal()
        w_data = Signal(32 * L)
        w_count = Signal(range(L + 1))
        w_word = Signal(range(L // 8 + 1))
        w_addr = Signal(self.sram_bits)
        out_left = Signal(self.count_bits + 1)   # output beats still expected in this pass
        wreq = self.wr.req
        m.d.comb += self.wr.resp.ready.eq(1)
        w_bytes = Mux(p_out32, w_count << 2, w_count << 1)
        w_words = (w_bytes + 31) >> 5
        packed = Signal(32 * L)
        with m.If(p_out32):
            m.d.comb += packed.eq(w_data)
        with m.Else():
            m.d.comb += packed.eq(Cat(*(w_data.word_select(ln, 32)[:16] for ln in range(L))))
        w_last_word = w_word + 1 == w_words
        tail_bytes = Signal(range(4 * L + 1))
        m.d.comb += tail_bytes.eq(w_bytes - (w_word << 5))
        mask = Mux(tail_bytes >= 32, Const((1 << 32) - 1, 32),
                   (Const(1, 33) << tail_bytes[:5]) - 1)
        m.d.comb += [wreq.valid.eq(w_valid), wreq.payload.write.eq(1),
                     wreq.payload.addr.eq(w_addr[5:]),
                     wreq.payload.data.eq(packed.word_select(w_word, 256)),
                     wreq.payload.mask.eq(mask[:32])]
        w_done = w_valid & wreq.ready & w_last_word
        with m.If(wreq.valid & wreq.ready):
            m.d.sync += [w_addr.eq(w_addr + 32), w_word.eq(w_word + 1)]
        with m.If(w_done):
            m.d.sync += w_valid.eq(0)
        m.d.comb += out.ready.eq(p_keep | ~w_valid | w_done)
        with m.If(out.valid & out.ready):
            m.d.sync += out_left.eq(out_left - 1)
            with m.If(p_keep):
                with m.Switch(smx_step):
                    with m.Case(0):
                        m.d.sync += smx_max.eq(out.payload.data[0])
                    with m.Case(1):
                        m.d.sync += smx_sum.eq(out.payload.data[0])
                    with m.Case(2):
                        m.d.sync += smx_recip.eq(out.payload.data[0])
            with m.Else():
                m.d.sync += [w_valid.eq(1), w_data.eq(out.payload.data.as_value()),
                             w_count.eq(out.payload.count), w_word.eq(0)]

        # ---- control ---------------------------------------------------------------------
        cmd = unit.cmd

        def setup_pass(op, in_fmt, out_fmt, c, k, binary, reduce, from_reg, keep, beats_out):
            m.d.sync += [p_op.eq(op), p_in_fmt.eq(in_fmt), p_out_fmt.eq(out_fmt), p_c.eq(c),
                         p_k.eq(k), p_binary.eq(binary), p_reduce.eq(reduce),
                         p_from_reg.eq(from_reg), p_keep.eq(keep), out_left.eq(beats_out),
                         rd_beat.eq(0), rd_slot.eq(0), rd_words.eq(0), head.eq(0),
                         resp_slot.eq(0), resp_word.eq(0), resp_b.eq(0), reg_sent.eq(0),
                         rd_b_next.eq(0), slots_used.eq(0), slot_full.eq(0),
                         rd_addr_a.eq(d.src_a), rd_addr_b.eq(d.src_b), w_addr.eq(d.dst)]

        m.d.comb += [cmd.payload.op.eq(p_op), cmd.payload.in_fmt.eq(p_in_fmt),
                     cmd.payload.out_fmt.eq(p_out_fmt), cmd.payload.c.eq(p_c),
                     cmd.payload.k.eq(p_k)]
        f32 = int(ActFmt.FP32)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.desc.ready.eq(1)
                with m.If(self.desc.valid):
                    m.d.sync += [d.eq(self.desc.payload), job_cycles.eq(1)]
                    m.next = "CHECK"
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                with m.If(check_code != Status.OK):
                    offer_status(m, self.status, check_code, job_cycles)
                with m.Elif(d.n == 0):
                    offer_status(m, self.status, Status.OK, job_cycles)
                with m.Elif(is_smx):
                    setup_pass(ActOp.MAX, d.in_fmt, f32, 0, ONE_F32, 0, 1, 0, 1, 1)
                    m.d.sync += smx_step.eq(0)
                    m.next = "CMD"
                with m.Else():
                    setup_pass(d.op, d.in_fmt, d.out_fmt, d.c, d.k, is_elt, is_red, 0, 0,
                               Mux(is_red, 1, n_beats))
                    m.next = "CMD"
            with m.State("CMD"):
                m.d.comb += [self.busy.eq(1), cmd.valid.eq(1)]
                with m.If(cmd.ready):
                    m.d.sync += reading.eq(1)
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If((out_left == 0) & ~w_valid):
                    m.d.sync += reading.eq(0)
                    with m.If(is_smx & (smx_step != 3)):
                        m.d.sync += smx_step.eq(smx_step + 1)
                        with m.Switch(smx_step):
                            with m.Case(0):
                                setup_pass(ActOp.SUMEXP, d.in_fmt, f32, smx_max, ONE_F32,
                                           0, 1, 0, 1, 1)
                            with m.Case(1):
                                setup_pass(ActOp.RECIP, f32, f32, 0, ONE_F32, 0, 0, 1, 1, 1)
                            with m.Case(2):
                                setup_pass(ActOp.EXP, d.in_fmt, d.out_fmt, smx_max, smx_recip,
                                           0, 0, 0, 0, n_beats)
                        m.next = "CMD"
                    with m.Else():
                        offer_status(m, self.status, Status.OK, job_cycles)
            status_state(m, self.status, self.busy)
        return m
