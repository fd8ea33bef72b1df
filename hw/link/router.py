"""DIMM-Link packet routing: a whole-packet arbiter and the 3-port router of a DIMM in a chain.

Packets are streams of :func:`~.formats.packet_beat_layout` beats: a header
beat (``first``; its ``data`` holds a :data:`~.formats.transaction_header_layout`)
and then payload beats, ``last`` on the final beat. Neither block ever splits
or interleaves packets.

``PacketArbiter(n)``: ``n`` inputs onto one output. While no packet is under
way it grants, combinationally, the first input with ``valid`` high at or after
the one after the last granted input (round robin), and forwards beats of the
granted input (``valid``/``payload`` to the output, ``ready`` back) until the
beat with ``last`` is taken; the next packet can start in the following cycle.
No register on the data path: zero latency, one beat per cycle.

``LinkRouter``: ports ``ins[p]``/``outs[p]`` for ``p`` in ``LEFT`` (the link to
the DIMM with the next lower id), ``RIGHT`` (next higher id) and ``LOCAL`` (this
DIMM's transaction layer). ``my_id`` and ``n_dimms`` are inputs (set by the
host, so one netlist serves every DIMM). A packet's route is decided from the
``dest`` field of its header beat and held until its ``last`` beat:

* ``dest == my_id`` -> ``LOCAL``; ``my_id < dest < n_dimms`` -> ``RIGHT``;
  ``dest < my_id`` -> ``LEFT``;
* ``dest >= n_dimms``, or a route back out of the port the packet came in on
  (only possible with misconfigured ids; it would loop), or ``LEFT`` at DIMM 0:
  the packet is *dropped* (taken at one beat per cycle, delivered nowhere) and
  ``dropped`` counts it.

Each output has a :class:`PacketArbiter` over the three inputs, so packets from
different inputs to different outputs pass in the same cycle. Zero latency
(combinational), one beat per cycle per output.
"""

from amaranth.hdl import Module, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import check_int
from ndpdimm.hw.link.formats import packet_beat_layout, transaction_header_layout

__all__ = ["PacketArbiter", "LinkRouter", "LEFT", "RIGHT", "LOCAL", "ROUTER_PORTS", "DIMM_ID_BITS"]

LEFT, RIGHT, LOCAL = range(3)
ROUTER_PORTS = 3
#: Width of a DIMM id (the ``dest``/``src`` fields of the transaction header).
DIMM_ID_BITS = 4


def packet_signature() -> stream.Signature:
    return stream.Signature(packet_beat_layout())


class PacketArbiter(wiring.Component):
    """Round-robin arbiter of whole packets (see module docstring)."""

    def __init__(self, n_inputs: int):
        self.n_inputs = check_int("n_inputs", n_inputs, 1, 16)
        super().__init__({
            "ins": In(packet_signature()).array(n_inputs),
            "out": Out(packet_signature()),
        })

    def elaborate(self, platform):
        m = Module()
        n = self.n_inputs
        busy = Signal()                     # a packet is under way from `held`
        held = Signal(range(n))
        last_grant = Signal(range(n), init=n - 1)

        # Round robin: the first valid input in the order last_grant+1, ..., last_grant.
        pick = Signal(range(n))
        any_valid = Signal()
        for offset in reversed(range(1, n + 1)):
            for base in range(n):
                idx = (base + offset) % n
                with m.If((last_grant == base) & self.ins[idx].valid):
                    m.d.comb += [pick.eq(idx), any_valid.eq(1)]
        grant = Signal(range(n))
        m.d.comb += grant.eq(held)
        with m.If(~busy):
            m.d.comb += grant.eq(pick)

        for i in range(n):
            with m.If(grant == i):
                m.d.comb += [self.out.valid.eq(self.ins[i].valid & (busy | any_valid)),
                             self.out.payload.eq(self.ins[i].payload),
                             self.ins[i].ready.eq(self.out.ready & (busy | any_valid))]

        with m.If(self.out.valid & self.out.ready):
            m.d.sync += busy.eq(~self.out.payload.last)
            with m.If(~busy):
                m.d.sync += [held.eq(grant), last_grant.eq(grant)]
        return m


class LinkRouter(wiring.Component):
    """The router of one DIMM in a chain (see module docstring)."""

    def __init__(self):
        super().__init__({
            "ins": In(packet_signature()).array(ROUTER_PORTS),
            "outs": Out(packet_signature()).array(ROUTER_PORTS),
            "my_id": In(DIMM_ID_BITS),
            "n_dimms": In(DIMM_ID_BITS + 1),
            "dropped": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        drop = ROUTER_PORTS
        arbiters = [PacketArbiter(ROUTER_PORTS) for _ in range(ROUTER_PORTS)]
        for out, arb in enumerate(arbiters):
            m.submodules[f"arbiter_{('left', 'right', 'local')[out]}"] = arb
            wiring.connect(m, arb.out, wiring.flipped(self.outs[out]))

        drops = []
        for port in range(ROUTER_PORTS):
            src = self.ins[port]
            header = transaction_header_layout(src.payload.data[:transaction_header_layout.size])
            dest = header.dest
            in_packet = Signal(name=f"in_packet_{port}")     # beats after the header of a packet
            held_route = Signal(range(drop + 1), name=f"held_route_{port}")
            route = Signal(range(drop + 1), name=f"route_{port}")

            wanted = Signal(range(drop + 1), name=f"wanted_{port}")
            with m.If(dest >= self.n_dimms):
                m.d.comb += wanted.eq(drop)
            with m.Elif(dest == self.my_id):
                m.d.comb += wanted.eq(LOCAL)
            with m.Elif(dest > self.my_id):
                m.d.comb += wanted.eq(RIGHT)
            with m.Else():
                m.d.comb += wanted.eq(LEFT)
            m.d.comb += route.eq(held_route)
            with m.If(~in_packet):
                # A U-turn (back out of the input port) can only come from misconfigured ids.
                m.d.comb += route.eq(wanted)
                if port != LOCAL:
                    with m.If(wanted == port):
                        m.d.comb += route.eq(drop)

            for out, arb in enumerate(arbiters):
                m.d.comb += [arb.ins[port].valid.eq(src.valid & (route == out)),
                             arb.ins[port].payload.eq(src.payload)]
                with m.If(route == out):
                    m.d.comb += src.ready.eq(arb.ins[port].ready)
            with m.If(route == drop):
                m.d.comb += src.ready.eq(1)

            taken = src.valid & src.ready
            with m.If(taken):
                m.d.sync += [in_packet.eq(~src.payload.last), held_route.eq(route)]
            dropping = Signal(name=f"drop_start_{port}")
            m.d.comb += dropping.eq(taken & ~in_packet & (route == drop))
            drops.append(dropping)

        m.d.sync += self.dropped.eq(self.dropped + sum(drops))
        return m
