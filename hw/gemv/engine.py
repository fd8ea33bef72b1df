"""GEMV engine: ``n_units`` bit-serial multiplier units, lane reducers and the control that feeds them.

Operations (one command each, see ``formats.gemv_command_layout``)
-------------------------------------------------------------------
* **DOT** - dense GEMV ``Y[b, n] = sum_k W[n, k] X[b, k]`` and *row gather*
  (the same over only the rows named in an index list; the weight streamer
  fetches just those rows, so skipped neurons cost no DRAM traffic). Unit ``u``
  of output group ``g`` computes output row ``g*n_units + u``; its weight words
  are that row's consecutive 128-bit words; every unit gets the same
  activation word ``X[b, word s]`` (broadcast).
* **AXPY** - *column gather* ``Y[b, :] = sum_{j in idx} H[b, j] Wt[j, :]`` (a
  weighted sum of selected neuron vectors). Unit ``u`` of group ``g`` owns
  output word ``g*n_units + u`` (8 FP or 16 INT8 output elements); step ``s``
  gives it word ``g*n_units + u`` of neuron ``idx[s]`` and the scalar
  ``H[b, idx[s]]``, sent as element 0 of the activation word and broadcast to
  every lane.

Streams
-------
``cmd`` (one command at a time; the next is taken when ``busy`` falls),
``weights`` (one beat = one word per unit, ``n_groups * n_steps`` beats per
command, groups in order, steps in order), ``acts`` (one 128-bit word per
(group, step, batch element) in that order), ``results`` (beats of up to 8
32-bit results, per group: batch element by batch element, ascending output
index; ``last`` on the final beat). Idle units in a partial last group get
whatever the weight beat holds; their results are never emitted.

Cycle behaviour
---------------
A *slot* is one (weight word, batch element) pair. The multiply stage needs
``D = serial_digits(dtype, radix_bits)`` cycles per slot (11/8/8 for
FP16/BF16/INT8 at radix 1), the reduce stage L cycles (8 FP lanes, 16 INT8
lanes); they overlap, so in steady state a slot takes
``P = max(D, L)`` cycles: FP16 11, BF16 8, INT8 16. A weight beat is taken
once per ``batch`` slots, i.e. every ``batch * P`` cycles when the streams keep
up; with ``batch`` activations sharing one weight stream the weights are read
once per batch.

Peak MACs/cycle (all units busy) = ``n_units * lanes / P``, independent of the
batch size: at 256 units FP16 186.2, BF16 256, INT8 256. Weight bytes the
engine can consume per cycle = ``n_units * 16 / (batch * P)``: at 256 units
and batch 1 that is 372 (FP16) / 512 (BF16) / 256 (INT8) B/cycle, above the
102.4 B/cycle a DIMM's four ranks deliver at 1 GHz. So a GEMV is DRAM-bound
below batch 4 (FP16), 5 (BF16) or 3 (INT8) and compute-bound from there on.

The units keep only their weight word and datapath registers; the shared part
of the multiply (activation words, operand decode, step counting) is one
``LaneSequencer`` (``hw/gemv/sequencer.py``) whose control is broadcast. It
skews the units' eight datapaths by one cycle each so that the reducer reads
every product straight from its datapath; for that a new weight beat is
loaded lane by lane and acknowledged (``weights.ready``) 7 cycles after its
slot started (the stream holds it until then), slots start at least 8 cycles
apart, and an INT8 slot starts no earlier than 8 cycles after the previous
slot's products moved to the reducer (its second pass, lanes ``2j+1``, runs
then). The reduce stage needs ``L >= 8`` cycles per slot, so none of this
delays a transfer: results and completion come in the same cycles as with
units that start every slot at once. The weight stream's producer holds each
beat longer, though. ``weight_committed`` is high while the slot on the head
beat could start but for the skew's start spacing: its first cycle is the one
in which an engine whose units start every slot at once would have taken the
beat. The beat is then taken at most 15 cycles later (up to 8 of INT8 start
spacing, then 7 of lane loads), so a producer can reuse the beat's buffer for
data that cannot arrive within that time (the weight streamer's ``release``).
With it a DRAM-fed engine requests its weights in the same cycles as before
the skew.

Per output group, after its last slot, the accumulators are drained: one
cycle to address the RAMs, then one result beat per cycle (DOT: 8 rows of one
batch element; AXPY: one unit's 8 elements, INT8 two beats per unit), with
back-pressure from ``results``. The multiply stage may run ahead into the
next group during the drain; the reduce stage waits for it.
Latency of a command: about ``D + L + 2`` cycles of pipeline fill, plus
``groups * (steps * batch * P + drain)``.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import (
    ACC_BITS,
    RESULT_LANES,
    WORD_BITS,
    Dtype,
    GemvMode,
    check_int,
    gemv_command_layout,
    result_beat_layout,
    serial_digits,
    weights_beat_layout,
)
from ndpdimm.hw.gemv.lane_reducer import check_max_batch
from ndpdimm.hw.gemv.multiplier import check_radix_bits, max_serial_digits
from ndpdimm.hw.gemv.sequencer import LaneSequencer
from ndpdimm.hw.gemv.unit import GEMV_UNIT_MODULE, GemvUnit, gemv_unit_signature
from ndpdimm.hw.hierarchy import shared_instance

__all__ = ["GemvEngine", "engine_verilog"]


class GemvEngine(wiring.Component):
    """The GEMV engine (see module docstring).

    Parameters
    ----------
    n_units : int
        Bit-serial multiplier units (default 256).
    max_batch : int
        Largest batch (activation vectors sharing one weight stream), default 16.
    radix_bits : int
        Weight bits per cycle in the multipliers (1 = bit-serial).
    index_bits, step_bits : int
        Widths of the command's output count and step count.
    hierarchical : bool
        Instantiate the units as Verilog instances of one ``gemv_unit`` module
        (``engine_verilog`` emits that module once) instead of elaborating
        ``n_units`` copies inline. Same logic; builds and synthesis of large
        engines need it. The Amaranth simulator needs ``False``.
    """

    def __init__(self, n_units: int = 256, max_batch: int = 16, radix_bits: int = 1,
                 index_bits: int = 20, step_bits: int = 16, hierarchical: bool = False):
        self.hierarchical = bool(hierarchical)
        self.n_units = check_int("n_units", n_units, 1, 4096)
        self.max_batch = check_max_batch(max_batch)
        self.radix_bits = check_radix_bits(radix_bits)
        self.index_bits = check_int("index_bits", index_bits, 4, 30)
        self.step_bits = check_int("step_bits", step_bits, 1, 30)
        if n_units * Dtype.INT8.info.lanes >= 2 ** index_bits:
            raise ValueError(f"index_bits={index_bits} cannot count one output group of "
                             f"{n_units} units")
        self.cmd_layout = gemv_command_layout(max_batch, index_bits, step_bits)
        self.result_layout = result_beat_layout(max_batch, index_bits)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "weights": In(stream.Signature(weights_beat_layout(n_units))),
            "acts": In(stream.Signature(WORD_BITS)),
            "results": Out(stream.Signature(self.result_layout)),
            "weight_committed": Out(1),
            "busy": Out(1),
            "done": Out(1),
            "error": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        U = self.n_units
        units = [self._unit(m, u) for u in range(U)]

        # ---- command registers ------------------------------------------------------
        cfg = Signal(self.cmd_layout)
        active = Signal()
        is_int8 = cfg.dtype == Dtype.INT8
        is_axpy = cfg.mode == GemvMode.AXPY
        digits_m1 = Signal(range(max_serial_digits(self.radix_bits)))
        m.d.comb += digits_m1.eq(Mux(cfg.dtype == Dtype.FP16,
                                     serial_digits(Dtype.FP16, self.radix_bits) - 1,
                                     Mux(cfg.dtype == Dtype.BF16,
                                         serial_digits(Dtype.BF16, self.radix_bits) - 1,
                                         serial_digits(Dtype.INT8, self.radix_bits) - 1)))
        lanes_m1 = Mux(is_int8, Dtype.INT8.info.lanes - 1, Dtype.FP16.info.lanes - 1)
        outs_per_group = Signal(self.index_bits)
        m.d.comb += outs_per_group.eq(Mux(is_axpy, Mux(is_int8, U * 16, U * 8), U))
        last_step = cfg.n_steps - 1
        empty = cfg.n_steps == 0

        m.d.comb += self.busy.eq(active)
        m.d.comb += self.cmd.ready.eq(~active)

        # ---- multiply stage: slot bookkeeping ---------------------------------------
        M_IDLE, M_RUN, M_DONE = 0, 1, 2
        m_state = Signal(2)
        m_digit = Signal.like(digits_m1)
        nx_b = Signal.like(cfg.batch_minus_one)       # next slot to start
        nx_step = Signal(self.step_bits)
        nx_out_left = Signal(self.index_bits)
        nx_has = Signal()
        sl_b = Signal.like(nx_b)                      # slot in the multipliers
        sl_first = Signal()
        sl_last = Signal()

        # ---- reduce stage and drain state -------------------------------------------
        a_busy = Signal()
        a_lane = Signal(range(16))
        a_b = Signal.like(nx_b)
        a_clear = Signal()
        a_slot_last = Signal()
        a_at_last = a_busy & (a_lane == lanes_m1)
        drain_pending = Signal()
        draining = Signal()
        d_primed = Signal()
        d_b = Signal.like(nx_b)
        d_pos = Signal(range(max(U * 2, 2)))
        d_base = Signal(self.index_bits)
        d_out_left = Signal(self.index_bits)

        transfer = Signal()
        a_accept = ~draining & ~drain_pending & (~a_busy | (a_at_last & ~a_slot_last))
        m.d.comb += transfer.eq((m_state == M_DONE) & a_accept)
        m_free = (m_state == M_IDLE) | transfer
        m.submodules.sequencer = seq = LaneSequencer(self.radix_bits)
        # everything a slot start needs but the sequencer's lane skew and the weight beat
        could_start = Signal()
        start_slot = Signal()
        m.d.comb += [
            could_start.eq(active & nx_has & m_free & self.acts.valid),
            start_slot.eq(could_start & seq.start_ok & ((nx_b != 0) | self.weights.valid)),
            self.acts.ready.eq(start_slot),
            self.weights.ready.eq(seq.weights_ready),
            # the cycle an engine without the lane skew (and its INT8 start spacing) would
            # have started the slot: weight_committed may come up to 8 cycles before the start
            self.weight_committed.eq(could_start & self.weights.valid & (nx_b == 0)),
        ]

        # AXPY broadcasts activation element 0 to every lane
        a_in = self.acts.payload
        act_in = Mux(is_axpy, Mux(is_int8, Cat(*([a_in[:8]] * 16)), Cat(*([a_in[:16]] * 8))), a_in)
        m.d.comb += [
            seq.dtype.eq(cfg.dtype),
            seq.start.eq(start_slot),
            seq.load_weight.eq(nx_b == 0),
            seq.act.eq(act_in),
            seq.transfer.eq(transfer),
            seq.lane.eq(a_lane),
        ]
        shared = ["wload", "first", "run", "hi_byte", "a_top"] + (["a_rest"] if self.radix_bits > 1 else [])
        for u in range(U):
            m.d.comb += [
                units[u].dtype.eq(cfg.dtype),
                units[u].axpy.eq(is_axpy),
                units[u].weight_in.eq(self.weights.payload[u]),
                units[u].pre_lane.eq(seq.pre_lane),
                units[u].act_lane.eq(seq.red_a),
            ]
            m.d.comb += [getattr(units[u], name).eq(getattr(seq, name)) for name in shared]

        with m.If(start_slot):
            m.d.sync += [
                sl_b.eq(nx_b),
                sl_first.eq(nx_step == 0),
                sl_last.eq((nx_step == last_step) & (nx_b == cfg.batch_minus_one)),
                m_digit.eq(1),
                m_state.eq(Mux(digits_m1 == 0, M_DONE, M_RUN)),
            ]
            with m.If(nx_b == cfg.batch_minus_one):
                m.d.sync += nx_b.eq(0)
                with m.If(nx_step == last_step):
                    m.d.sync += nx_step.eq(0)
                    with m.If(nx_out_left <= outs_per_group):
                        m.d.sync += nx_has.eq(0)
                    with m.Else():
                        m.d.sync += nx_out_left.eq(nx_out_left - outs_per_group)
                with m.Else():
                    m.d.sync += nx_step.eq(nx_step + 1)
            with m.Else():
                m.d.sync += nx_b.eq(nx_b + 1)
        with m.Elif(m_state == M_RUN):
            m.d.sync += m_digit.eq(m_digit + 1)
            with m.If(m_digit == digits_m1):
                m.d.sync += m_state.eq(M_DONE)
        with m.Elif(transfer):
            m.d.sync += m_state.eq(M_IDLE)

        # ---- reduce stage -----------------------------------------------------------
        with m.If(transfer):
            m.d.sync += [
                a_busy.eq(1), a_lane.eq(0), a_b.eq(sl_b),
                a_clear.eq(sl_first), a_slot_last.eq(sl_last),
            ]
        with m.Elif(a_busy):
            m.d.sync += a_lane.eq(a_lane + 1)
            with m.If(a_at_last):
                m.d.sync += a_busy.eq(0)
                with m.If(a_slot_last):
                    m.d.sync += drain_pending.eq(1)

        # ---- drain ------------------------------------------------------------------
        group_outs = Mux(d_out_left < outs_per_group, d_out_left, outs_per_group)
        n_pos_m1 = ((group_outs + RESULT_LANES - 1) >> 3) - 1
        pos_last = d_pos == n_pos_m1
        last_group = d_out_left <= outs_per_group
        beat_taken = self.results.valid & self.results.ready
        next_row = beat_taken & pos_last
        d_read_row = Mux(next_row, d_b + 1, d_b)

        for u in range(U):
            m.d.comb += [
                units[u].add.eq(a_busy),
                units[u].lane.eq(a_lane),
                units[u].clear.eq(a_clear),
                units[u].row.eq(a_b),
                units[u].read_row.eq(Mux(transfer, sl_b, Mux(draining, d_read_row, a_b))),
            ]

        # result data: DOT takes lane 0 of 8 consecutive units, AXPY 8 lanes of one unit
        zero = Const(0, ACC_BITS)
        dot_chunks = Array(
            Cat(*[units[c * 8 + i].acc_row[0] if c * 8 + i < U else zero
                  for i in range(RESULT_LANES)])
            for c in range((U + RESULT_LANES - 1) // RESULT_LANES))
        axpy_rows = Array(units[u].acc_row.as_value() for u in range(U))
        axpy_unit = Mux(is_int8, d_pos >> 1, d_pos)
        axpy_half = is_int8 & d_pos[0]
        axpy_row = axpy_rows[axpy_unit]
        axpy_data = Mux(axpy_half, axpy_row[8 * ACC_BITS:], axpy_row[:8 * ACC_BITS])
        dot_data = dot_chunks[d_pos]
        raw_data = Mux(is_axpy, axpy_data, dot_data)
        beat_index = d_base + (d_pos << 3)
        remaining = group_outs - (d_pos << 3)
        count = Mux(remaining < RESULT_LANES, remaining, RESULT_LANES)
        payload = self.results.payload
        for i in range(RESULT_LANES):
            lane_value = raw_data.word_select(i, ACC_BITS)
            m.d.comb += payload.data[i].eq(Mux(empty | (i >= count), 0, lane_value))
        m.d.comb += [
            self.results.valid.eq(draining & d_primed),
            payload.count.eq(count),
            payload.batch.eq(d_b),
            payload.index.eq(beat_index),
            payload.last.eq(last_group & (d_b == cfg.batch_minus_one) & pos_last),
        ]

        op_done = Signal()
        with m.If(drain_pending & ~draining):
            m.d.sync += [draining.eq(1), drain_pending.eq(0), d_primed.eq(0),
                         d_b.eq(0), d_pos.eq(0)]
        with m.Elif(draining):
            m.d.sync += d_primed.eq(1)
            with m.If(beat_taken):
                with m.If(pos_last):
                    m.d.sync += d_pos.eq(0)
                    with m.If(d_b == cfg.batch_minus_one):
                        m.d.sync += draining.eq(0)
                        with m.If(last_group):
                            m.d.comb += op_done.eq(1)
                        with m.Else():
                            m.d.sync += [d_base.eq(d_base + outs_per_group),
                                         d_out_left.eq(d_out_left - outs_per_group)]
                            with m.If(empty):
                                m.d.sync += drain_pending.eq(1)
                    with m.Else():
                        m.d.sync += d_b.eq(d_b + 1)
                with m.Else():
                    m.d.sync += d_pos.eq(d_pos + 1)

        # ---- command accept / completion ----------------------------------------------
        bad_dtype = self.cmd.payload.dtype == 3
        no_outputs = self.cmd.payload.n_out == 0
        accept = self.cmd.valid & self.cmd.ready
        m.d.comb += [
            self.done.eq(op_done | (accept & (bad_dtype | no_outputs))),
            self.error.eq(accept & bad_dtype),
        ]
        with m.If(op_done):
            m.d.sync += active.eq(0)
        with m.If(accept & ~bad_dtype & ~no_outputs):
            p = self.cmd.payload
            m.d.sync += [
                cfg.eq(p),
                active.eq(1),
                nx_b.eq(0), nx_step.eq(0), nx_out_left.eq(p.n_out),
                nx_has.eq(p.n_steps != 0),
                d_base.eq(0), d_out_left.eq(p.n_out),
                drain_pending.eq(p.n_steps == 0),
            ]
        return m

    def _unit(self, m, u):
        """Unit ``u``: a GemvUnit submodule, or a Verilog instance of the shared module."""
        if not self.hierarchical:
            m.submodules[f"unit{u}"] = unit = GemvUnit(self.radix_bits, self.max_batch)
            return unit
        return shared_instance(m, f"unit{u}", GEMV_UNIT_MODULE,
                               gemv_unit_signature(self.max_batch, self.radix_bits))


def engine_verilog(name="gemv_engine", **params) -> str:
    """Verilog of a hierarchical engine: the ``gemv_unit`` module once, then the engine."""
    from amaranth.back import verilog
    engine = GemvEngine(**params, hierarchical=True)
    unit = GemvUnit(engine.radix_bits, engine.max_batch)
    return (verilog.convert(unit, name=GEMV_UNIT_MODULE) + "\n" +
            verilog.convert(engine, name=name))
