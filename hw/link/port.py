"""DIMM-Link port: the link layer on top of the PHY, one end of a link as a DIMM has it.

``LinkPort(config)`` = :class:`~.layer.LinkLayer` (frames, CRC-32C,
ACK/NAK replay, credits) + :class:`~.phy.LinkPhy` (8 64b/66b lanes,
deskew, training). Packets (``packet_beat_layout`` beats) go in at
``tx_packet`` and come out of the partner's ``rx_packet``; the serial side is
``serial_tx``/``serial_tx_valid`` toward the partner and
``serial_rx``/``serial_rx_valid`` from it (one ``chunk_bits`` chunk per lane
on the cycles the lane's pacer allows; the channel between two ports is a
behavioural model, ``cosim/link/channel.py``).

``link_reset`` resets both layers at once (sequence numbers, buffers, credits,
training): both ends of a link must be reset together, or the surviving end
keeps frames the other no longer expects. ``link_up`` is the PHY's.

Counters (``Out``, 32 bits, wrapping): the link layer's under their own names
(``frames_sent``, ``replays``, ``crc_errors``, ... see ``hw/link/layer.py``)
and the PHY's with a ``phy_`` prefix (``phy_sync_errors``,
``phy_link_down_events``, ``phy_align_losses``, ``phy_error_beats``,
``phy_lane_mismatches``): what an operator reads to tell a bad link (CRC
errors, retries, sync errors) from a slow one (credits, back-pressure).

Cycle behaviour: the sum of the parts. Measured with a zero-latency channel
(tests/hw/link/test_port.py): a 1-word packet's last beat into ``tx_packet`` to
its header beat out of the partner's ``rx_packet`` in about 20 cycles
(link layer store-and-forward 3-4, PHY 7-9, receiver CRC check 2, plus the
flits' time on the wire at 2.64 cycles per flit).
"""

from amaranth.hdl import Module
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.link.formats import LinkConfig, packet_beat_layout
from ndpdimm.hw.link.layer import COUNTER_BITS, RX_COUNTERS, TX_COUNTERS, LinkLayer
from ndpdimm.hw.link.phy import PHY_COUNTER_BITS, LinkPhy

__all__ = ["LinkPort", "LINK_COUNTERS", "PHY_COUNTERS"]

#: Counters of the link layer, exposed under their own names.
LINK_COUNTERS = TX_COUNTERS + RX_COUNTERS
#: Counters of the PHY, exposed as ``phy_<name>``.
PHY_COUNTERS = ("sync_errors", "link_down_events", "align_losses", "error_beats",
                "lane_mismatches")


class LinkPort(wiring.Component):
    """One end of a DIMM-Link (see module docstring)."""

    def __init__(self, config: LinkConfig = None):
        if config is None:
            config = LinkConfig()
        if not isinstance(config, LinkConfig):
            raise ValueError(f"config must be a LinkConfig, got {config!r}")
        self.config = c = config
        self.layer = LinkLayer(c)
        self.phy = LinkPhy(c)
        members = {
            "tx_packet": In(stream.Signature(packet_beat_layout())),
            "rx_packet": Out(stream.Signature(packet_beat_layout())),
            "serial_tx": Out(data.ArrayLayout(c.chunk_bits, c.lanes)),
            "serial_tx_valid": Out(c.lanes),
            "serial_rx": In(data.ArrayLayout(c.chunk_bits, c.lanes)),
            "serial_rx_valid": In(c.lanes),
            "link_reset": In(1),
            "link_up": Out(1),
        }
        members.update({name: Out(COUNTER_BITS) for name in LINK_COUNTERS})
        members.update({f"phy_{name}": Out(PHY_COUNTER_BITS) for name in PHY_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        layer, phy = self.layer, self.phy
        m.submodules.layer = layer
        m.submodules.phy = phy
        wiring.connect(m, wiring.flipped(self.tx_packet), layer.tx_packet)
        wiring.connect(m, layer.rx_packet, wiring.flipped(self.rx_packet))
        wiring.connect(m, layer.phy_tx, phy.tx_flit)
        wiring.connect(m, phy.rx_flit, layer.phy_rx)
        m.d.comb += [
            layer.link_up.eq(phy.link_up),
            layer.reset.eq(self.link_reset),
            phy.link_reset.eq(self.link_reset),
            self.link_up.eq(phy.link_up),
            self.serial_tx.eq(phy.serial_tx),
            self.serial_tx_valid.eq(phy.serial_tx_valid),
            phy.serial_rx.eq(self.serial_rx),
            phy.serial_rx_valid.eq(self.serial_rx_valid),
        ]
        m.d.comb += [getattr(self, n).eq(getattr(layer, n)) for n in LINK_COUNTERS]
        m.d.comb += [getattr(self, f"phy_{n}").eq(getattr(phy, n)) for n in PHY_COUNTERS]
        return m
