"""One unit's column of the weight streamer's ring: ``ring_beats`` 128-bit words, written by DRAM
responses, one read out per beat.

The weight streamer (``hw/memory/weight_streamer.py``) buffers each beat of weights
for the ``n_units`` GEMV units in a ring of ``ring_beats`` slots; the words of
one unit across the slots are this column. Splitting the ring into ``n_units``
columns makes it one small module repeated ``n_units`` times, elaborated once
(``WeightStreamer(hierarchical=True)`` instantiates the ``ring_column``
Verilog module), which is what lets Yosys synthesize a 256-unit ring at all.

Ports: ``wen`` (``ring_beats x ranks`` bits, bit ``t * ranks + r``: rank
``r``'s response writes slot ``t`` this cycle) with ``data_<t>_<r>`` (the
word it writes there); ``sel`` (the slot read) and ``word`` (its
content). At most one response writes a slot per cycle (the streamer
reserves each slot for one burst).

Cycle behaviour: a write lands at the clock edge (``word`` shows it from the
next cycle); ``word`` is combinational in ``sel``.

The words have no reset: the streamer offers a word only after a response
wrote it since its valid bit (which does reset) was last cleared, and sends
zero for the words a beat does not expect, so a word's content before its
first write is never seen. Without a reset each slot's 128 flip-flops change
only with their slot's write enable, which lets synthesis gate their clock
(one clock gate per slot instead of 128 enable multiplexers, ``synth/flow.py``).
"""

from amaranth.hdl import Array, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS

__all__ = ["RingColumn", "RING_COLUMN_MODULE", "ring_column_signature"]

#: Verilog module name of the column in hierarchical netlists.
RING_COLUMN_MODULE = "ring_column"


def ring_column_signature(ring_beats: int, ranks: int) -> wiring.Signature:
    """Ports of a RingColumn (also used to instantiate it as a Verilog module)."""
    return wiring.Signature({
        "wen": In(ring_beats * ranks),
        # one port per (slot, rank), not one array: a 16 Kbit signal (32 slots x 4 ranks) is
        # more than Amaranth's Python simulator can turn into a constant
        **{f"data_{t}_{r}": In(WORD_BITS) for t in range(ring_beats) for r in range(ranks)},
        "sel": In(range(ring_beats)),
        "word": Out(WORD_BITS),
    })


class RingColumn(wiring.Component):
    """``ring_beats`` words of one unit (see module docstring)."""

    def __init__(self, ring_beats: int, ranks: int):
        for name, v in (("ring_beats", ring_beats), ("ranks", ranks)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.ring_beats, self.ranks = ring_beats, ranks
        super().__init__(ring_column_signature(ring_beats, ranks))

    def elaborate(self, platform):
        m = Module()
        RB, R = self.ring_beats, self.ranks
        words = [Signal(WORD_BITS, name=f"slot{t}", reset_less=True) for t in range(RB)]
        for t in range(RB):
            # one conditional assignment per rank (at most one fires per slot and cycle): linear
            # Verilog instead of a 128-bit OR tree per slot
            for r in range(R):
                with m.If(self.wen[t * R + r]):
                    m.d.sync += words[t].eq(getattr(self, f"data_{t}_{r}"))
        m.d.comb += self.word.eq(Array(words)[self.sel])
        return m
