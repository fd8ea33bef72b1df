"""DIMM-Link PHY: one end of a link, ``config.lanes`` 64b/66b lanes in lockstep, deskew, training, ALIGN.

Protocol: ``docs/dimm_link.md`` section "PHY"; formats: ``formats``
(:func:`phy_flit_layout`, :data:`control_block_layout`, :class:`ControlType`);
lanes: ``lane``. A *flit* is one block per lane in the same beat, lane
``i`` carrying flit bits ``[64 i, 64 i + 64)``; a control flit has the same
control type on every lane and lane ``i``'s ``lane`` field is ``i``.

TX (cycle behaviour)
--------------------
All TX lanes are fed the same way and therefore take a block in the same
cycles (a *slot*: ``blocks.ready`` of the lanes, every ``66 / L`` cycles on
average, e.g. 2.64 at 25 b/cycle). In each slot the PHY sends, by priority:

* while not up: the training pattern, an ALIGN flit followed by
  ``train_period - 1`` TRAIN flits (flags bit 0 = this side's receiver is
  aligned), repeated. ``train_period = 4 * deskew_blocks + 8``: ALIGN
  markers must be further apart than the skew the receiver can absorb, or a
  lane leading by a whole marker period would be "aligned" to the wrong
  marker (docs: "alternates TRAIN flits with ALIGN flits"; strict
  alternation would alias at a skew of 2 blocks);
* while up: an ALIGN flit as every ``align_period``-th flit;
* the link layer's ``tx_flit`` (``kind`` DATA or RESYNC; another kind is
  taken and sent as IDLE). ``tx_flit.ready`` is high exactly in the slots of
  an up link that are not taken by ALIGN (combinational from registers,
  never from ``valid``);
* else IDLE.

RX (cycle behaviour)
--------------------
Each lane's delivered blocks enter a FIFO of ``deskew_blocks + 2`` blocks
(two blocks of margin for the cycle jitter between lanes whose block
boundaries fall at different bits of their chunks).

* Not aligned: every lane whose FIFO head is not an ALIGN block with the
  right ``lane`` field is popped (a wrong ``lane`` field counts in
  ``lane_mismatches``); a lane whose head is an ALIGN waits for the others
  unless its FIFO is full (then the ALIGN is dropped: that lane leads by
  more than the FIFO holds). When all lanes are locked and all heads are
  good ALIGNs, the ALIGN flit is popped and the receiver is aligned.
  So a lane may lead the slowest by up to ``deskew_blocks`` blocks (about
  one more is absorbed in practice); a lead from ``deskew_blocks + 2`` to
  ``train_period - deskew_blocks - 3`` blocks never aligns; a larger one can
  align to the *next* ALIGN of the training pattern, which no flit content
  can reveal: channel skew must stay below that (as in IEEE 802.3, where the
  skew limit is far below the alignment-marker period).
* Aligned: in each cycle all FIFOs have a block, one flit is popped and
  classified: any lane with an invalid sync header -> ERROR; all data ->
  DATA; some but not all lanes a (valid) ALIGN, or an ALIGN flit with a
  wrong ``lane`` field -> alignment dropped (also: a lane losing lock, or a
  FIFO overflow); otherwise control types and ``lane`` fields must agree
  (else ERROR): IDLE and ALIGN are consumed, TRAIN goes to training,
  RESYNC -> RESYNC, another type -> ERROR. A TRAIN whose lanes disagree on
  the aligned flag is an ERROR.
* ``rx_flit`` (registered, always ready) carries DATA, RESYNC and ERROR beats
  only while the link is up; when an up link goes down (alignment dropped
  or an unaligned TRAIN received) one ERROR beat marks the loss, so the link
  layer drops a partial frame. Flits received while not up are dropped.

Training (docs "PHY"): a side goes up when its receiver is aligned, it has
received ``train_count`` TRAIN flits with the aligned flag, and it has sent
``2 * train_count`` TRAIN flits with the aligned flag since the first one it
received. An unaligned TRAIN while training restarts both counts; alignment
loss too. While up, an unaligned TRAIN takes the link down, aligned TRAINs
are ignored. Going down restarts the training pattern with an ALIGN flit.

``link_reset`` (held for at least one cycle) puts lanes, FIFOs and all
state back to their reset values (the partner sees the broken lanes or the
unaligned TRAINs and retrains too); the counters are not reset by it.

Latency
-------
With a zero-latency, zero-skew channel at the default 25/32 pacing, a
``tx_flit`` handshake in cycle t gives ``rx_flit.valid`` at the partner in
t + 7 .. t + 10 (measured by tests/hw/link/test_phy.py; it depends on the pacer
phase and the receiving lanes' bit offsets): the block enters the gearbox
(t + 1) behind fewer than 32 older bits, its 66 bits leave in the next 3-4
pacer ticks, the receiving lane evaluates it the cycle after its last chunk
(plus a spare bit) has arrived and registers it, the deskew FIFO shows it
one cycle later and ``rx_flit`` is registered once more. Channel latency and
the skew of the slowest lane add one to one.

Counters (``Out``, 32 bits, wrapping, not cleared by ``link_reset``):
``sync_errors`` (invalid sync headers on locked lanes, all lanes),
``link_down_events`` (times ``link_up`` fell, ``link_reset`` included),
``align_losses`` (times ``rx_aligned`` fell), ``error_beats`` (ERROR beats
sent on ``rx_flit``), ``lane_mismatches`` (ALIGN blocks with a wrong ``lane``
field).
"""

from amaranth.hdl import Cat, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.link.formats import (
    BLOCK_BITS,
    ControlType,
    FlitKind,
    LinkConfig,
    SyncHeader,
    control_block_layout,
    phy_flit_layout,
)
from ndpdimm.hw.link.lane import LinkLaneRx, LinkLaneTx, check_lane_config, lane_rx_block_layout

__all__ = ["LinkPhy", "PHY_COUNTER_BITS", "train_period", "deskew_fifo_depth"]

#: Width of the PHY's counters.
PHY_COUNTER_BITS = 32


def train_period(config: LinkConfig) -> int:
    """Flits from one ALIGN to the next in the training pattern."""
    return 4 * config.deskew_blocks + 8


def deskew_fifo_depth(config: LinkConfig) -> int:
    """Blocks of each lane's deskew FIFO."""
    return config.deskew_blocks + 2


class LinkPhy(wiring.Component):
    """One end of a DIMM-Link (see module docstring).

    Ports
    -----
    ``tx_flit`` In(stream of :func:`phy_flit_layout`), ``rx_flit`` Out(stream,
    always ready), ``serial_tx`` Out(ArrayLayout(chunk_bits, lanes)),
    ``serial_tx_valid`` Out(lanes), ``serial_rx`` In(ArrayLayout(chunk_bits,
    lanes)), ``serial_rx_valid`` In(lanes), ``link_reset`` In(1), ``link_up``,
    ``rx_aligned``, ``lanes_locked`` (one bit per lane) Out, counters
    ``sync_errors``, ``link_down_events``, ``align_losses``, ``error_beats``,
    ``lane_mismatches`` Out.
    """

    def __init__(self, config: LinkConfig = LinkConfig()):
        self.config = check_lane_config(config)
        lanes, c = config.lanes, config.chunk_bits
        flit = phy_flit_layout(lanes)
        super().__init__({
            "tx_flit": In(stream.Signature(flit)),
            "rx_flit": Out(stream.Signature(flit, always_ready=True)),
            "serial_tx": Out(data.ArrayLayout(c, lanes)),
            "serial_tx_valid": Out(lanes),
            "serial_rx": In(data.ArrayLayout(c, lanes)),
            "serial_rx_valid": In(lanes),
            "link_reset": In(1),
            "link_up": Out(1),
            "rx_aligned": Out(1),
            "lanes_locked": Out(lanes),
            "sync_errors": Out(PHY_COUNTER_BITS),
            "link_down_events": Out(PHY_COUNTER_BITS),
            "align_losses": Out(PHY_COUNTER_BITS),
            "error_beats": Out(PHY_COUNTER_BITS),
            "lane_mismatches": Out(PHY_COUNTER_BITS),
        })

    def elaborate(self, platform):
        cfg = self.config
        lanes = cfg.lanes
        period = train_period(cfg)
        depth = deskew_fifo_depth(cfg)
        m = Module()
        core = Module()                      # everything link_reset clears; counters stay in m
        m.submodules.core = ResetInserter(self.link_reset)(core)

        txs = [LinkLaneTx(cfg, i) for i in range(lanes)]
        rxs = [LinkLaneRx(cfg) for _ in range(lanes)]
        fifos = [fifo.SyncFIFO(width=lane_rx_block_layout.size, depth=depth) for _ in range(lanes)]
        for i in range(lanes):
            core.submodules[f"tx{i}"] = txs[i]
            core.submodules[f"rx{i}"] = rxs[i]
            core.submodules[f"deskew{i}"] = fifos[i]
            core.d.comb += [
                self.serial_tx[i].eq(txs[i].serial),
                self.serial_tx_valid[i].eq(txs[i].serial_valid),
                rxs[i].serial.eq(self.serial_rx[i]),
                rxs[i].serial_valid.eq(self.serial_rx_valid[i]),
                fifos[i].w_en.eq(rxs[i].blocks.valid),
                fifos[i].w_data.eq(rxs[i].blocks.payload),
                self.lanes_locked[i].eq(rxs[i].locked),
            ]

        up = Signal()
        aligned = Signal()
        rx_trains = Signal(range(cfg.train_count + 1))        # aligned TRAINs received (saturating)
        tx_trains = Signal(range(2 * cfg.train_count + 1))    # aligned TRAINs sent since the first received
        core.d.comb += [self.link_up.eq(up), self.rx_aligned.eq(aligned)]

        # ---- TX --------------------------------------------------------------------------
        slot = txs[0].blocks.ready                 # all lanes are in lockstep
        train_pos = Signal(range(period))
        since_align = Signal(range(cfg.align_period))
        align_due = since_align == cfg.align_period - 1
        tx_data = Signal()
        tx_type = Signal(8)
        tx_flag = Signal()
        with core.If(~up):
            core.d.comb += [tx_type.eq(Mux(train_pos == 0, ControlType.ALIGN, ControlType.TRAIN)),
                            tx_flag.eq(aligned)]
        with core.Elif(align_due):
            core.d.comb += tx_type.eq(ControlType.ALIGN)
        with core.Elif(self.tx_flit.valid & (self.tx_flit.payload.kind == FlitKind.DATA)):
            core.d.comb += tx_data.eq(1)
        with core.Elif(self.tx_flit.valid & (self.tx_flit.payload.kind == FlitKind.RESYNC)):
            core.d.comb += tx_type.eq(ControlType.RESYNC)
        with core.Else():
            core.d.comb += tx_type.eq(ControlType.IDLE)
        core.d.comb += self.tx_flit.ready.eq(slot & up & ~align_due)
        for i in range(lanes):
            ctl = Signal(control_block_layout, name=f"tx_ctl{i}")
            core.d.comb += [
                ctl.type.eq(tx_type), ctl.lane.eq(i), ctl.flags.eq(tx_flag),
                txs[i].blocks.valid.eq(1),
                txs[i].blocks.payload.sync.eq(Mux(tx_data, SyncHeader.DATA, SyncHeader.CONTROL)),
                txs[i].blocks.payload.payload.eq(
                    Mux(tx_data, self.tx_flit.payload.data[BLOCK_BITS * i:BLOCK_BITS * (i + 1)], ctl)),
            ]
        with core.If(slot):
            with core.If(~up):
                core.d.sync += train_pos.eq(Mux(train_pos == period - 1, 0, train_pos + 1))
                with core.If((train_pos != 0) & aligned & (rx_trains != 0)
                             & (tx_trains != 2 * cfg.train_count)):
                    core.d.sync += tx_trains.eq(tx_trains + 1)
            with core.Else():
                core.d.sync += since_align.eq(Mux(align_due, 0, since_align + 1))

        # ---- RX: deskew ----------------------------------------------------------------------
        heads = [data.View(lane_rx_block_layout, f.r_data) for f in fifos]
        ctls = [data.View(control_block_layout, h.payload) for h in heads]
        is_ctl = [h.sync == SyncHeader.CONTROL for h in heads]
        align_any = Signal(lanes)          # head is a valid ALIGN block (any lane field)
        align_ok = Signal(lanes)           # ... with this lane's number
        ready = Signal(lanes)
        for i in range(lanes):
            core.d.comb += [
                ready[i].eq(fifos[i].r_rdy),
                align_any[i].eq(fifos[i].r_rdy & ~heads[i].invalid & is_ctl[i]
                                & (ctls[i].type == ControlType.ALIGN)),
                align_ok[i].eq(align_any[i] & (ctls[i].lane == i)),
            ]
        all_locked = Cat(rx.locked for rx in rxs).all()
        overflow = Cat(rx.blocks.valid & ~f.w_rdy for rx, f in zip(rxs, fifos)).any()
        pop = Signal(lanes)
        mismatch = Signal(lanes)           # ALIGN with a wrong lane field popped (counter)
        core.d.comb += [f.r_en.eq(pop[i]) for i, f in enumerate(fifos)]
        core.d.comb += mismatch.eq(pop & align_any & ~align_ok)

        # classification of the flit at the heads (meaningful when all lanes are ready)
        any_invalid = Cat(h.invalid for h in heads).any()
        all_data = Cat(h.sync == SyncHeader.DATA for h in heads).all()
        all_ctl = Cat(is_ctl).all()
        type0 = ctls[0].type
        same_type = Cat(c.type == type0 for c in ctls).all()
        lanes_ok = Cat(c.lane == i for i, c in enumerate(ctls)).all()
        flags = Cat(c.flags[0] for c in ctls)
        ctl_ok = all_ctl & same_type & lanes_ok
        full_align = all_ctl & same_type & (type0 == ControlType.ALIGN)

        drop = Signal()                    # alignment lost this cycle
        deliver = Signal()                 # an rx_flit beat this cycle (if up)
        kind = Signal(2)
        train_aligned = Signal()
        train_unaligned = Signal()
        with core.If(~aligned):
            with core.If(align_ok.all() & all_locked):
                core.d.comb += pop.eq(ready)
                core.d.sync += aligned.eq(1)
            with core.Else():
                for i in range(lanes):
                    core.d.comb += pop[i].eq(ready[i] & (~align_ok[i] | (fifos[i].level == depth)))
        with core.Elif(~all_locked | overflow):
            core.d.comb += drop.eq(1)
        with core.Elif(ready.all()):
            core.d.comb += pop.eq(ready)
            with core.If(any_invalid):
                core.d.comb += [deliver.eq(1), kind.eq(FlitKind.ERROR)]
            with core.Elif(all_data):
                core.d.comb += [deliver.eq(1), kind.eq(FlitKind.DATA)]
            with core.Elif(align_any.any() & ~full_align):
                core.d.comb += drop.eq(1)                    # ALIGN on some lanes only: deskew lost
            with core.Elif(full_align & ~lanes_ok):
                core.d.comb += drop.eq(1)                    # lanes swapped
            with core.Elif(~ctl_ok):
                core.d.comb += [deliver.eq(1), kind.eq(FlitKind.ERROR)]
            with core.Elif((type0 == ControlType.ALIGN) | (type0 == ControlType.IDLE)):
                pass
            with core.Elif(type0 == ControlType.TRAIN):
                with core.If(flags.all()):
                    core.d.comb += train_aligned.eq(1)
                with core.Elif(~flags.any()):
                    core.d.comb += train_unaligned.eq(1)
                with core.Else():
                    core.d.comb += [deliver.eq(1), kind.eq(FlitKind.ERROR)]
            with core.Elif(type0 == ControlType.RESYNC):
                core.d.comb += [deliver.eq(1), kind.eq(FlitKind.RESYNC)]
            with core.Else():
                core.d.comb += [deliver.eq(1), kind.eq(FlitKind.ERROR)]

        # ---- training state --------------------------------------------------------------------
        go_down = up & (drop | train_unaligned)
        core.d.sync += self.rx_flit.valid.eq(up & (deliver | go_down))
        core.d.sync += self.rx_flit.payload.kind.eq(Mux(go_down, FlitKind.ERROR, kind))
        with core.If(deliver & (kind == FlitKind.DATA)):
            all_data_bits = Cat(h.payload for h in heads)
            core.d.sync += self.rx_flit.payload.data.eq(all_data_bits)
        with core.If(drop):
            core.d.sync += aligned.eq(0)
        with core.If(~up & train_aligned & (rx_trains != cfg.train_count)):
            core.d.sync += rx_trains.eq(rx_trains + 1)
        with core.If(go_down):
            core.d.sync += [up.eq(0), train_pos.eq(0)]
        with core.If(drop | train_unaligned | go_down):
            core.d.sync += [rx_trains.eq(0), tx_trains.eq(0)]
        with core.Elif(~up & aligned & (rx_trains == cfg.train_count)
                       & (tx_trains == 2 * cfg.train_count)):
            core.d.sync += [up.eq(1), since_align.eq(0), rx_trains.eq(0), tx_trains.eq(0)]

        # ---- counters (outside the reset domain of link_reset) ----------------------------------
        up_prev = Signal()
        aligned_prev = Signal()
        m.d.sync += [
            up_prev.eq(up),
            aligned_prev.eq(aligned),
            self.link_down_events.eq(self.link_down_events + (up_prev & ~up)),
            self.align_losses.eq(self.align_losses + (aligned_prev & ~aligned)),
            self.error_beats.eq(self.error_beats
                                + (self.rx_flit.valid & (self.rx_flit.payload.kind == FlitKind.ERROR))),
            self.sync_errors.eq(self.sync_errors
                                + sum(rx.blocks.valid & rx.blocks.payload.invalid for rx in rxs)),
            self.lane_mismatches.eq(self.lane_mismatches + sum(mismatch[i] for i in range(lanes))),
        ]
        return m
