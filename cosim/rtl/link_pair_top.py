"""Two DIMM-Link ports as one simulation top: the DUT of ``cosim/rtl/benches/link_pair.py``.

``LinkPair(**fields)`` takes :class:`~ndpdimm.hw.link.formats.LinkConfig`
fields (JSON-able: an ``rtl_build`` factory, ``ndpdimm.cosim.rtl.link_pair_top:LinkPair``)
and has two members, ``a`` and ``b``, each with every port of a
:class:`~ndpdimm.hw.link.port.LinkPort` (``a__tx_packet__valid``,
``a__serial_tx``, ... in Verilog). The two ends are not connected inside: the
bench joins ``a.serial_tx`` to ``b.serial_rx`` (and back) through behavioural
channels (``cosim/link/channel.py``), so latency, skew and bit errors are the
bench's to choose.

Why Verilator and not the Amaranth simulator for this: both ends together
(two link layers with 544-input CRC XOR matrices, 16 lanes) simulate at about
40 cycles/s in the Amaranth simulator, so link-pair tests and the link
benchmark run on the Verilated top; the layers have their own Amaranth tests.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import Out

from ndpdimm.hw.link.formats import LinkConfig
from ndpdimm.hw.link.port import LinkPort

__all__ = ["LinkPair", "LINK_PAIR_TOP", "LINK_PAIR_FACTORY"]

#: Top module name and ``rtl_build`` factory of the link pair.
LINK_PAIR_TOP = "link_pair"
LINK_PAIR_FACTORY = "ndpdimm.cosim.rtl.link_pair_top:LinkPair"


class LinkPair(wiring.Component):
    """Ends ``a`` and ``b`` of one link (see module docstring)."""

    def __init__(self, **config_fields):
        self.config = LinkConfig(**config_fields)
        self.port_a = LinkPort(self.config)
        self.port_b = LinkPort(self.config)
        super().__init__({"a": Out(self.port_a.signature), "b": Out(self.port_b.signature)})

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = self.port_a
        m.submodules.b = self.port_b
        wiring.connect(m, wiring.flipped(self.a), self.port_a)
        wiring.connect(m, wiring.flipped(self.b), self.port_b)
        return m
