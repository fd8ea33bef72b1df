"""The NDP core's port into DRAM: burst request/response layouts, the client signature, status codes.

Every NDP-side block that touches DRAM (the weight streamer, the DMA engine;
later the relayout unit) is a *memory client* with the signature
:func:`memory_client_signature`, in the 1 GHz NDP clock domain:

* ``req[l]`` for ``l`` in ``0..lanes-1`` (default 2 lanes): streams of
  :func:`memory_request_layout` - one 64 B burst each: ``write``, ``burst``
  (DIMM-local byte address / 64, so a misaligned access cannot be expressed),
  ``tag`` (the client's own ``CLIENT_TAG_BITS``, returned with the read data)
  and ``data`` (512 bits of write data, byte ``i`` in bits ``[8i, 8i+8)``; ignored
  by reads). Lanes are independent and unordered with respect to each other:
  two lanes exist because the DRAM side accepts a request every DRAM cycle
  (1.6 per ns), more than one lane at 1 GHz can offer.
* ``resp[r]`` for every rank ``r``: streams of :func:`memory_response_layout`
  (``tag``, ``data``), one beat per request, in no particular order across or
  within ranks (the rank schedulers reorder for row hits). A read returns its
  burst; a write returns an *acknowledgement* (``data`` undefined) once its
  data has gone to the DRAM, so a client that has every ack of its writes
  knows that any read issued afterwards, by anyone, sees them. The rank
  schedulers never let a request pass an older one to the same burst, so
  ordering between requests already in the controller is safe too.

Flow control on ``resp``: a client may hold ``resp[r].ready`` low, but the
DRAM cannot be stalled, so the memory system only issues a read when the
rank's response buffer has room; a stalled client therefore slows every
client sharing that rank. Clients that can always accept (the weight streamer,
which reserves space before it asks) keep ``ready`` high.

``Status`` is the completion code of every descriptor-driven block (shared
with the command processor and the host runtime).
"""

import enum

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["BURST_BYTES", "BURST_BITS", "CLIENT_TAG_BITS", "Status",
           "memory_request_layout", "memory_response_layout", "memory_client_signature",
           "burst_address_bits", "memory_server_signature", "status_layout", "offer_status",
           "STATUS_CYCLES_BITS", "status_state", "take_command_state", "forward_stream",
           "connect_memory_client"]

#: One DRAM burst (BL8 on a x64 rank bus).
BURST_BYTES = 64
BURST_BITS = 8 * BURST_BYTES
#: Tag bits a client may use; the memory system adds its own routing bits above them.
CLIENT_TAG_BITS = 15


class Status(enum.IntEnum):
    """Completion status of a descriptor (OK or the first error found, before any side effect)."""
    OK = 0
    BAD_OPCODE = 1       # unknown or reserved operation
    BAD_FIELD = 2        # a field outside its legal range (dtype, zero length where not allowed...)
    DRAM_RANGE = 3       # a DRAM byte range outside the DIMM (or outside the NDP window)
    MISALIGNED = 4       # a DRAM or SRAM address not aligned as the operation requires
    SRAM_RANGE = 5       # an SRAM byte range (data or index list) runs past the SRAM
    BAD_INDEX = 6        # an index list entry names a row/neuron outside the matrix
    UNSUPPORTED = 7      # a defined operation this build does not implement
    REMOTE_RANGE = 8     # DIMM-Link: the target DIMM rejected the remote address (misaligned or past its SRAM)
    LINK_TIMEOUT = 9     # DIMM-Link: a remote operation's responses did not all come back in time


#: Width of the cycle count in a completion beat.
STATUS_CYCLES_BITS = 32


def status_layout() -> data.StructLayout:
    """The completion beat of a descriptor-driven block (DMA, activation feeder, result writer):
    ``code`` (a ``Status``) and ``cycles`` from taking the command to offering the status."""
    return data.StructLayout({"code": Status, "cycles": STATUS_CYCLES_BITS})


def offer_status(m, status, code, cycles, next_state="STATUS"):
    """In an FSM state: register ``status`` (valid, code, cycles) and go to ``next_state``, where
    the block holds it until ``status.ready`` (the blocks' shared completion sequence)."""
    m.d.sync += [status.valid.eq(1), status.payload.code.eq(code), status.payload.cycles.eq(cycles)]
    m.next = next_state


def take_command_state(m, cmd, register, cycles, next_state="CHECK"):
    """The ``IDLE`` FSM state of those blocks: ``cmd.ready`` high, a command is registered in
    ``register`` and ``cycles`` starts at 1 in the cycle it is taken."""
    with m.State("IDLE"):
        m.d.comb += cmd.ready.eq(1)
        with m.If(cmd.valid):
            m.d.sync += [register.eq(cmd.payload), cycles.eq(1)]
            m.next = next_state


def status_state(m, status, busy, next_state="IDLE"):
    """The ``STATUS`` FSM state of those blocks: busy, holding the status until it is taken."""
    with m.State("STATUS"):
        m.d.comb += busy.eq(1)
        with m.If(status.ready):
            m.d.sync += status.valid.eq(0)
            m.next = next_state


def forward_stream(m, source, sink):
    """Connect a stream produced by ``source`` to the consumer ``sink`` (combinational)."""
    m.d.comb += [sink.valid.eq(source.valid), sink.payload.eq(source.payload),
                 source.ready.eq(sink.ready)]


def connect_memory_client(m, client, server):
    """A client port to a server port (``wiring.connect`` cannot walk their array members in
    Amaranth 0.5)."""
    for lane in range(len(server.req)):
        forward_stream(m, client.req[lane], server.req[lane])
    for r in range(len(server.resp)):
        forward_stream(m, server.resp[r], client.resp[r])


def burst_address_bits(capacity_bytes: int) -> int:
    """Bits of a burst address for a DIMM of ``capacity_bytes`` (a power of two)."""
    if not isinstance(capacity_bytes, int) or capacity_bytes < BURST_BYTES or \
            capacity_bytes & (capacity_bytes - 1):
        raise ValueError(f"capacity_bytes must be a power of two >= {BURST_BYTES}, "
                         f"got {capacity_bytes!r}")
    return max((capacity_bytes // BURST_BYTES - 1).bit_length(), 1)


def memory_request_layout(capacity_bytes: int, tag_bits: int = CLIENT_TAG_BITS) -> data.StructLayout:
    """One burst request: ``write``, ``burst`` address, ``tag``, 512-bit write ``data``."""
    return data.StructLayout({
        "write": 1,
        "burst": burst_address_bits(capacity_bytes),
        "tag": tag_bits,
        "data": BURST_BITS,
    })


def memory_response_layout(tag_bits: int = CLIENT_TAG_BITS) -> data.StructLayout:
    """One read response: the request's ``tag`` and the burst's 512 bits."""
    return data.StructLayout({"tag": tag_bits, "data": BURST_BITS})


def memory_client_signature(capacity_bytes: int, ranks: int, lanes: int = 2,
                            tag_bits: int = CLIENT_TAG_BITS) -> wiring.Signature:
    """A memory client's port, initiator view: ``req`` lanes out, one ``resp`` per rank in."""
    for name, value, high in (("ranks", ranks, 64), ("lanes", lanes, 8)):
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise ValueError(f"{name} must be an integer in 1..{high}, got {value!r}")
    return wiring.Signature({
        "req": Out(stream.Signature(memory_request_layout(capacity_bytes, tag_bits))).array(lanes),
        "resp": In(stream.Signature(memory_response_layout(tag_bits))).array(ranks),
    })


def memory_server_signature(capacity_bytes: int, ranks: int, lanes: int = 2,
                            tag_bits: int = CLIENT_TAG_BITS) -> wiring.Signature:
    """The same port seen from the memory side (``req`` lanes in, ``resp`` out).

    Written out rather than as ``In(memory_client_signature(...))``: Amaranth
    0.5's ``FlippedInterface`` cannot hand out array members (``flipped()`` of a
    list raises), so a component that serves clients declares this with ``Out``.
    ``wiring.connect`` accepts a client port and a server port as a pair.
    """
    memory_client_signature(capacity_bytes, ranks, lanes, tag_bits)      # same argument checks
    return wiring.Signature({
        "req": In(stream.Signature(memory_request_layout(capacity_bytes, tag_bits))).array(lanes),
        "resp": Out(stream.Signature(memory_response_layout(tag_bits))).array(ranks),
    })
