"""Lane sequencer: the part of the bit-serial multiply that all GEMV units share, built once per engine.

Every unit walks the same digits of the same activation word in the same
cycles, so the step counting, the activation words and their decode into
datapath operands live here and are broadcast; a unit keeps only its weight
word and its eight datapath registers (``hw/gemv/multiplier.py``).

Timing (cycle ``t``: a slot starts, ``start``; cycle ``T >= t + D``: its
products move to the reduce stage, ``transfer``; the reducer takes lane ``l``
in cycle ``T + 1 + l``; ``k = frac_steps(dtype, radix)``):

* weight lane ``j`` of a new weight beat is loaded in cycle ``t + j``
  (``wload``); the beat is acknowledged in cycle ``t + 7`` (``weights_ready``),
  the stream holding it until then;
* datapath ``j`` runs its ``k`` steps in cycles ``t+1+j .. t+j+k`` (``first``,
  ``run``); its product is ready by ``T + 1 + j``, the cycle the reducer reads
  it and the next slot's datapath ``j`` may start;
* INT8: the second pass (lanes ``2j+1``) runs in ``T+1+j .. T+j+k``, read by
  the reducer as its lane ``8 + j`` in ``T + 9 + j``;
* the next slot may start from ``t + 8`` (``start_ok``), and for INT8 from
  ``T + 8``. The reduce stage needs ``L >= 8`` cycles per slot, so this never
  delays a transfer, and the engine's result timing is that of a design
  whose units start every slot at once.

Two activation words are held (``act_buf``): a slot's operands are needed
until its last datapath or reduce lane is done, by which time at most one
newer slot has started. The reduce stage gets the activation lane of the lane
it reduces (``red_a``, 16 bits) and, one cycle ahead, which weight lane to
prefetch (``pre_lane``).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS, Dtype
from ndpdimm.hw.gemv.multiplier import FP_LANES, OPERAND_BITS, check_radix_bits, frac_steps

__all__ = ["LaneSequencer", "START_SPACING"]

#: Smallest number of cycles between two slot starts (the weight lanes' load skew + 1).
START_SPACING = FP_LANES


class LaneSequencer(wiring.Component):
    """Shared control and operand broadcast of the bit-serial units (see module docstring)."""

    def __init__(self, radix_bits: int = 1):
        self.radix_bits = check_radix_bits(radix_bits)
        operands = data.ArrayLayout(signed(OPERAND_BITS), FP_LANES)
        super().__init__({
            "dtype": In(2),
            "start": In(1),
            "load_weight": In(1),
            "act": In(WORD_BITS),
            "transfer": In(1),
            "lane": In(range(16)),
            "start_ok": Out(1),
            "weights_ready": Out(1),
            "wload": Out(FP_LANES),
            "first": Out(FP_LANES),
            "run": Out(FP_LANES),
            "hi_byte": Out(FP_LANES),
            "a_top": Out(operands),
            **({"a_rest": Out(operands)} if self.radix_bits > 1 else {}),
            "pre_lane": Out(range(FP_LANES)),
            "red_a": Out(16),
        })

    def elaborate(self, platform):
        m = Module()
        r = self.radix_bits
        is_int8 = self.dtype == Dtype.INT8
        is_bf16 = self.dtype == Dtype.BF16
        int_pass = Signal()
        m.d.comb += int_pass.eq(self.transfer & is_int8)

        # ---- slot spacing -------------------------------------------------------------
        holdoff = Signal(range(START_SPACING))
        m.d.comb += self.start_ok.eq((holdoff == 0) & ~int_pass)
        with m.If(self.start | int_pass):
            m.d.sync += holdoff.eq(START_SPACING - 1)
        with m.Elif(holdoff != 0):
            m.d.sync += holdoff.eq(holdoff - 1)

        # ---- weight lanes: lane j loads j cycles after the start, then the beat is taken
        wl = Signal(FP_LANES)
        m.d.sync += wl[1:].eq(Cat(self.load_weight & self.start, wl[1:-1]))
        m.d.comb += [wl[0].eq(self.load_weight & self.start),
                     self.wload.eq(wl),
                     self.weights_ready.eq(wl[-1])]

        # ---- activation words: two held, the newest started slot's tag is `tag` ----------
        act_buf = Array(Signal(WORD_BITS, name=f"act_buf{i}") for i in range(2))
        tag = Signal()
        red_tag = Signal()
        with m.If(self.start):
            m.d.sync += [tag.eq(~tag), act_buf[~tag].eq(self.act)]
        with m.If(self.transfer):
            m.d.sync += red_tag.eq(tag)

        # ---- datapath 0's walk; datapath j sees it j cycles later -------------------------
        steps = Signal(range(16))
        m.d.comb += steps.eq(Mux(self.dtype == Dtype.FP16, frac_steps(Dtype.FP16, r),
                                 Mux(is_bf16, frac_steps(Dtype.BF16, r),
                                     frac_steps(Dtype.INT8, r))))
        ctrl = data.StructLayout({"first": 1, "run": 1, "neg": 1, "hi_byte": 1, "tag": 1})
        c_run = Signal()
        c_step = Signal(range(16))
        c_hi = Signal()
        c_tag = Signal()
        with m.If(self.start | int_pass):
            m.d.sync += [c_run.eq(1), c_step.eq(0), c_hi.eq(int_pass),
                         c_tag.eq(Mux(self.start, ~tag, tag))]
        with m.Elif(c_run):
            m.d.sync += c_step.eq(c_step + 1)
            with m.If(c_step == steps - 1):
                m.d.sync += c_run.eq(0)
        chain = [Signal(ctrl, name=f"dp{j}_ctrl") for j in range(FP_LANES)]
        m.d.comb += [
            chain[0].first.eq(c_run & (c_step == 0)),
            chain[0].run.eq(c_run),
            chain[0].neg.eq(c_run & is_int8 & (c_step == steps - 1)),
            chain[0].hi_byte.eq(c_hi),
            chain[0].tag.eq(c_tag),
        ]
        for j in range(1, FP_LANES):
            m.d.sync += chain[j].eq(chain[j - 1])

        fp16_bits, bf16_bits = Dtype.FP16.info.frac_bits, Dtype.BF16.info.frac_bits
        for j, c in enumerate(chain):
            lane = act_buf[c.tag].word_select(j, 16)
            byte = Mux(c.hi_byte, lane[8:], lane[:8]).as_signed()
            frac = Mux(is_bf16, lane[:bf16_bits], lane[:fp16_bits])
            a = Signal(signed(OPERAND_BITS), name=f"dp{j}_a")
            m.d.comb += [
                a.eq(Mux(is_int8, byte, frac)),
                self.first[j].eq(c.first),
                self.run[j].eq(c.run),
                self.hi_byte[j].eq(c.hi_byte),
                self.a_top[j].eq(Mux(c.neg, -a, a)),
            ]
            if r > 1:
                m.d.comb += self.a_rest[j].eq(a)

        # ---- reduce stage: the activation lane being reduced, the weight lane to prefetch
        m.d.comb += [
            self.red_a.eq(act_buf[red_tag].word_select(self.lane[:3], 16)),
            self.pre_lane.eq(Mux(self.transfer, 0, self.lane + 1)),
        ]
        return m
