"""Result writer: takes the GEMV engine's result beats and writes (or adds) them into the on-chip SRAM.

What it does
------------
It takes one command (``cmd``, :func:`writer_command_layout`), then consumes
the engine's ``results`` stream (:func:`~ndpdimm.hw.formats.result_beat_layout`)
up to and including the beat with ``last``, writes every result through its
SRAM port (``sram``, :func:`~ndpdimm.hw.memory.sram.sram_port_signature`) and sends
one ``status`` beat when every write has been accepted by the SRAM (so any
later read, from any port, sees the results). Beats are never dropped (except
as stated under "Checks") nor reordered: the port's requests go out in beat
order.

SRAM data layout
----------------
``Y`` [B, n_out], FP32 (FP16/BF16 jobs) or INT32 (INT8 jobs), little endian:
element (b, i) at byte ``y_addr + b*y_pitch + 4*i``. ``y_addr`` and
``y_pitch`` are multiples of 32 (one SRAM word); the pitch may exceed a row.
Result ``data[j]`` of a beat (``index``, ``batch``, ``count``) is element
(``batch``, ``index + j``) for ``j < count``; nothing else is written: bytes
past ``count``, past ``n_out`` in a row's last word and in the pitch padding
keep their contents (byte-masked writes).

Is a beat one SRAM word? Yes whenever ``index % 8 == 0``, which holds for
AXPY always (an output group is ``n_units * lanes`` outputs, a multiple of 8,
and a group's beats step by 8) and for DOT when ``n_units`` is a multiple of 8
or divides 8 (a group's beats start at ``g * n_units`` and step by 8, and with
``n_units`` in 1, 2, 4 a beat holds at most ``n_units`` results that never
cross a word). The weight streamer requires ``n_units`` to be a power of two
>= 4, so in the NDP core a beat is always one word. The engine allows any
``n_units`` though (``n_units = 12``: a group's beats start at 12, 20, ...), so
a beat that crosses a word boundary is handled too: it becomes two word
accesses, word ``w = (y_addr + batch*y_pitch)/32 + index // 8`` with lanes
``index % 8 ..`` and word ``w + 1`` with the rest.

Accumulate
----------
``accumulate = 0``: results are written. ``accumulate = 1``: ``Y += results``:
each touched word is read, ``old + new`` is computed per lane (``old`` = the
SRAM value, ``new`` = the result) and written back. FP (``is_int = 0``): IEEE
binary32 addition with round to nearest even, subnormals honoured, every NaN
result the canonical ``0x7FC00000`` (``Fp32Adder``, docs/numerics.md); INT
(``is_int = 1``, INT8 jobs): INT32 two's-complement wrap-around. A golden
model reproduces it with one float32 (int32) addition ``old + new`` per
element, in beat order. Two beats that touch the same word (a crossing beat
and its successor, or rows that overlap because ``y_pitch`` is smaller than a
row, even 0) are applied in beat order: the second read is not issued before
the first beat's write is in the request register, and the SRAM serves one
port's requests in order (a read sees a write granted in any earlier cycle),
so it returns the updated word.

Command and checks
------------------
``y_addr``, ``y_pitch`` (SRAM byte addresses), ``accumulate``, ``is_int``,
``batch_minus_one``, ``n_out``. ``n_out == 0`` (checked first): status ``OK``
at once, no beat taken (the engine emits none). ``y_addr`` or ``y_pitch`` not a multiple of 32:
``MISALIGNED``; the command's beats are still consumed up to ``last`` (the
engine must be able to finish), nothing is written. A beat outside the
command (``batch > batch_minus_one``, ``count == 0``, ``index + count >
n_out``) or a ``last`` flag on any beat but the final one (``batch ==
batch_minus_one`` and ``index + count == n_out``) is dropped unwritten and the
status is ``BAD_FIELD``. The command processor checks ranges (the rows inside
the SRAM) before issuing a command; this block does not: an address past the
SRAM wraps modulo its size. The command ends with the beat carrying
``last``; an engine that never sends it leaves the writer waiting.

``status`` (:func:`writer_status_layout`): ``code`` (``Status``) and
``cycles`` from the command handshake to the first cycle ``status.valid`` is
high. ``cmd.ready`` is high only while idle (after the previous status beat
was taken); ``results.ready`` is low outside a command and after ``last``.

Cycle behaviour
---------------
* A beat is taken into a one-beat register (address ``w``, lane rotation and
  lane mask computed on the way in) while the register is empty or in the
  cycle its last word access is loaded into the request register, so
  back-to-back beats flow at the port's rate.
* The SRAM request is a register (one request per cycle, refilled in the
  cycle it is accepted).
* ``accumulate = 0``: one write per word access; a beat per cycle when the
  SRAM grants at once (tests/hw/gemv/test_sram_io.py: 24 beats in 28 cycles from
  command to status).
* ``accumulate = 1``: each word access loads a read and records (address,
  lane mask, new data) in a queue of ``min(sram.resp_depth, 4)`` entries; the
  response (``READ_LATENCY`` = 2 cycles after the grant) is added to the
  queue head in the same cycle (8 ``Fp32Adder`` lanes and 8 32-bit adders, all
  combinational) and loaded as the write. Writes take precedence over new
  reads. The request port carries a read and a write per beat: 2 cycles per
  beat in steady state at the default ``resp_depth = 3`` (24 beats in 52
  cycles from command to status). A read whose word is still in the queue
  (read issued, write not yet loaded) waits until that write is loaded: a
  word-crossing beat and its successor, or aliased rows, cost a read round
  trip (about 4 cycles) each time.
* The queue never holds more reads than the SRAM port's response FIFO has
  room for, so the SRAM's read credit can never block a read that sits in
  the request register while the write it waits for needs that register
  (no deadlock); ``sram.resp.ready`` is low only while the request register
  is busy.
* The status is offered 2 cycles after the last write was accepted.

The engine drains a group at up to one beat per cycle; with ``accumulate =
1`` the writer halves that, which slows only the engine's drain phases.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import ACC_BITS, RESULT_LANES, check_int, result_beat_layout
from ndpdimm.hw.gemv.activation_feeder import check_sram_geometry
from ndpdimm.hw.gemv.fp32_arith import Fp32Adder
from ndpdimm.hw.memory.port import (
    STATUS_CYCLES_BITS,
    Status,
    offer_status,
    status_layout,
    status_state,
)
from ndpdimm.hw.memory.sram import SramGeometry

__all__ = ["ResultWriter", "writer_command_layout", "writer_status_layout"]

#: Most reads the accumulate queue holds (hazard comparators grow with it).
MAX_QUEUE = 4


def writer_command_layout(sram: SramGeometry, max_batch: int, index_bits: int) -> data.StructLayout:
    """One writer command (fields in the module docstring); addresses are SRAM byte addresses."""
    a = sram.size_bytes.bit_length() - 1
    return data.StructLayout({
        "y_addr": a,
        "y_pitch": a,
        "accumulate": 1,
        "is_int": 1,
        "batch_minus_one": range(max(max_batch, 2)),
        "n_out": index_bits,
    })


writer_status_layout = status_layout


class ResultWriter(wiring.Component):
    """The result writer (see module docstring).

    Parameters
    ----------
    sram : SramGeometry or None
        The SRAM behind the port (``None``: ``SramGeometry()``); 256-bit words.
    max_batch, index_bits : int
        The engine's ``max_batch`` (1..64) and ``index_bits`` (4..30): they fix
        the result beat layout.

    Ports
    -----
    ``cmd`` In(stream of :func:`writer_command_layout`), ``results`` In(stream
    of ``result_beat_layout(max_batch, index_bits)``), ``status`` Out(stream of
    :func:`writer_status_layout`), ``sram`` Out(SRAM port), ``busy`` Out(1).
    """

    def __init__(self, sram: SramGeometry = None, max_batch: int = 16, index_bits: int = 20):
        self.geometry = check_sram_geometry(sram)
        self.max_batch = check_int("max_batch", max_batch, 1, 64)
        self.index_bits = check_int("index_bits", index_bits, 4, 30)
        self.queue_depth = min(self.geometry.resp_depth, MAX_QUEUE)
        self.cmd_layout = writer_command_layout(self.geometry, max_batch, index_bits)
        self.result_layout = result_beat_layout(max_batch, index_bits)
        self.status_layout = writer_status_layout()
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "results": In(stream.Signature(self.result_layout)),
            "status": Out(stream.Signature(self.status_layout)),
            "sram": Out(self.geometry.port_signature),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        L = RESULT_LANES
        word_bits = self.geometry.word_bits
        addr_bits = self.geometry.addr_bits
        word_shift = self.geometry.word_bytes.bit_length() - 1        # 5
        Q = self.queue_depth
        req, resp = self.sram.req, self.sram.resp

        cfg = Signal(self.cmd_layout)
        discard = Signal()           # misaligned command: consume beats, write nothing
        bad = Signal()               # a beat was dropped
        running = Signal()           # between command and the last beat's handshake
        cyc = Signal(STATUS_CYCLES_BITS)

        # ---- stage A: the beat being written (one or two word accesses) -----------------
        a_valid = Signal()
        a_addr = Signal(addr_bits)
        a_lanes = Signal(2 * L)      # lane mask over the two words the beat may touch
        a_data = Signal(word_bits)   # results rotated to their lanes in the word
        a_part = Signal()            # 1: doing the second word
        op_addr = Signal(addr_bits)
        op_lanes = Signal(L)
        m.d.comb += [
            op_addr.eq(a_addr + a_part),
            op_lanes.eq(Mux(a_part, a_lanes[L:], a_lanes[:L])),
        ]

        # ---- the request register --------------------------------------------------------
        r_valid = Signal()
        r_write = Signal()
        r_addr = Signal(addr_bits)
        r_data = Signal(word_bits)
        r_mask = Signal(word_bits // 8)
        r_free = ~r_valid | req.ready
        m.d.comb += [
            req.valid.eq(r_valid),
            req.payload.write.eq(r_write),
            req.payload.addr.eq(r_addr),
            req.payload.data.eq(r_data),
            req.payload.mask.eq(r_mask),
        ]

        # ---- accumulate queue: reads issued whose write is not loaded yet ---------------
        q_v = [Signal(name=f"q_v_{i}") for i in range(Q)]
        q_addr = [Signal(addr_bits, name=f"q_addr_{i}") for i in range(Q)]
        q_lanes = [Signal(L, name=f"q_lanes_{i}") for i in range(Q)]
        q_data = [Signal(word_bits, name=f"q_data_{i}") for i in range(Q)]
        q_head = Signal(range(Q))
        q_tail = Signal(range(Q))
        q_full = Array(q_v)[q_tail]
        q_empty = ~Array(q_v)[q_head]
        hazard = Signal()
        m.d.comb += hazard.eq(Cat(q_v[i] & (q_addr[i] == op_addr) for i in range(Q)).any())

        # ---- old + new, per lane ----------------------------------------------------------
        old = resp.payload
        new = Array(q_data)[q_head]
        total = []
        for lane in range(L):
            m.submodules[f"fp_add{lane}"] = adder = Fp32Adder()
            o, n = old.word_select(lane, ACC_BITS), new.word_select(lane, ACC_BITS)
            m.d.comb += [adder.a.eq(o), adder.b.eq(n)]
            total.append(Mux(cfg.is_int, (o + n)[:ACC_BITS], adder.sum))

        def byte_mask(lanes):
            return Cat(lanes[i].replicate(ACC_BITS // 8) for i in range(L))

        # ---- who loads the request register ----------------------------------------------
        wr_load = Signal()           # the queue head's sum
        op_fire = Signal()           # stage A's current word access
        m.d.comb += [
            resp.ready.eq(r_free),
            wr_load.eq(resp.valid & r_free),     # a response always belongs to the queue head
            op_fire.eq(a_valid & r_free & ~wr_load &
                       Mux(cfg.accumulate, ~q_full & ~hazard, 1)),
        ]
        with m.If(wr_load):
            m.d.sync += [
                r_valid.eq(1), r_write.eq(1),
                r_addr.eq(Array(q_addr)[q_head]),
                r_data.eq(Cat(*total)),
                r_mask.eq(byte_mask(Array(q_lanes)[q_head])),
                Array(q_v)[q_head].eq(0),
                q_head.eq(Mux(q_head == Q - 1, 0, q_head + 1)),
            ]
        with m.Elif(op_fire):
            m.d.sync += [
                r_valid.eq(1), r_write.eq(~cfg.accumulate),
                r_addr.eq(op_addr),
                r_data.eq(a_data),
                r_mask.eq(byte_mask(op_lanes)),
            ]
            with m.If(cfg.accumulate):
                m.d.sync += [
                    Array(q_v)[q_tail].eq(1),
                    Array(q_addr)[q_tail].eq(op_addr),
                    Array(q_lanes)[q_tail].eq(op_lanes),
                    Array(q_data)[q_tail].eq(a_data),
                    q_tail.eq(Mux(q_tail == Q - 1, 0, q_tail + 1)),
                ]
        with m.Elif(req.ready):
            m.d.sync += r_valid.eq(0)

        # ---- taking beats ---------------------------------------------------------------
        beat = self.results.payload
        a_finish = op_fire & (a_part | ~a_lanes[L:].any())
        take = Signal()
        m.d.comb += [
            take.eq(running & (~a_valid | a_finish)),
            self.results.ready.eq(take),
        ]
        end = beat.index + beat.count
        final = (beat.batch == cfg.batch_minus_one) & (end == cfg.n_out)
        beat_bad = ((beat.batch > cfg.batch_minus_one) | (beat.count == 0) |
                    (end > cfg.n_out) | (beat.last != final))
        off = beat.index[:3]
        row_word = (cfg.y_addr >> word_shift) + beat.batch * (cfg.y_pitch >> word_shift)
        rotations = Array(Cat(beat.data[(j - o) % L] for j in range(L)) for o in range(L))

        with m.If(a_finish):
            m.d.sync += a_valid.eq(0)
        with m.Elif(op_fire):
            m.d.sync += a_part.eq(1)
        with m.If(take & self.results.valid):
            with m.If(beat.last):
                m.d.sync += running.eq(0)
            with m.If(beat_bad & ~discard):
                m.d.sync += bad.eq(1)
            with m.If(~beat_bad & ~discard):
                m.d.sync += [
                    a_valid.eq(1),
                    a_part.eq(0),
                    a_addr.eq(row_word + (beat.index >> 3)),
                    a_lanes.eq(Cat(((i >= off) & (i < off + beat.count)) for i in range(2 * L))),
                    a_data.eq(rotations[off]),
                ]

        # ---- control -----------------------------------------------------------------------
        def finish(code, cycles=cyc + 1):
            offer_status(m, self.status, code, cycles)

        p = self.cmd.payload
        quiet = ~running & ~a_valid & ~r_valid & q_empty
        with m.If(self.busy):
            m.d.sync += cyc.eq(cyc + 1)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        cfg.eq(p), cyc.eq(1), bad.eq(0),
                        discard.eq(p.y_addr[:word_shift].any() | p.y_pitch[:word_shift].any()),
                    ]
                    with m.If(p.n_out == 0):
                        finish(Status.OK, 1)
                    with m.Else():
                        m.d.sync += running.eq(1)
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += self.busy.eq(1)
                with m.If(quiet):
                    finish(Mux(discard, Status.MISALIGNED, Mux(bad, Status.BAD_FIELD, Status.OK)))
            status_state(m, self.status, self.busy)
        return m
