"""Shared formats of DIMM-Link: parameters, 64b/66b blocks, flits and frame headers.

Defined once here and used by the link RTL (``lane``, ``phy``,
``layer``), the reference models and benches in ``ndpdimm.cosim`` and the
host runtime, so a field position is written in exactly one place.
``docs/dimm_link.md`` explains the protocol; this module is its bit-level
contract.

Layers, bottom up:

* **Lane** (64b/66b, IEEE 802.3 clause 49 style): a *block* is a 2-bit sync
  header plus 64 payload bits.  Sync ``0b01`` marks a data block, ``0b10`` a
  control block; ``0b00``/``0b11`` never occur on a healthy lane.  The 64
  payload bits are scrambled with the self-synchronous scrambler
  ``x^58 + x^39 + 1``; the sync header is not.  A block goes on the wire sync
  header first, then payload bit 0 first (LSB first).  In the 1 GHz NDP clock a
  lane carries ``lane_bits_per_cycle`` bits per cycle on average (25 for
  25 Gb/s), as ``chunk_bits``-wide chunks on the cycles its rate pacer allows.
* **PHY** (8 lanes): a *flit* is one block per lane sent in the same beat:
  512 payload bits = 64 bytes, lane ``i`` carrying flit bits ``[64 i, 64 i + 64)``.
  All lanes of a flit are data blocks (a data flit) or all are control blocks
  of the same :class:`ControlType` (a control flit, never seen by the link layer
  except ``RESYNC``).
* **Link layer**: a *frame* is 1..``max_frame_flits`` data flits: a 32-byte
  :func:`frame_header_layout` at the start of flit 0, then the payload in 32-byte
  words, zero padding, and the CRC-32C of the frame in the last 4 bytes of the
  last flit (computed over all the frame's flits in order, with the CRC field
  itself taken as zero).  Bytes are little-endian: byte ``k`` of a flit is bits
  ``[8 k, 8 k + 8)``.
"""

import enum
import math
from dataclasses import dataclass

from amaranth.lib import data

from ndpdimm.hw.formats import NDP_CLOCK_HZ, check_int

__all__ = [
    "LinkConfig", "SyncHeader", "ControlType", "FlitKind", "FrameType", "LinkOp",
    "BLOCK_BITS", "SYNC_BITS", "FLIT_BYTES", "WORD_BYTES", "HEADER_BYTES", "CRC_BYTES",
    "control_block_layout", "phy_flit_layout", "frame_header_layout",
    "transaction_header_layout", "packet_beat_layout", "frame_flits",
]

#: Payload bits of one 64b/66b block.
BLOCK_BITS = 64
#: Sync-header bits of one block.
SYNC_BITS = 2
#: Bytes of one payload word of a frame (one SRAM word).
WORD_BYTES = 32
#: Bytes of the frame header (one word).
HEADER_BYTES = 32
#: Bytes of the frame CRC (CRC-32C, last 4 bytes of a frame's last flit).
CRC_BYTES = 4
#: Bytes of one flit with the default 8 lanes (one 64-bit block per lane).
FLIT_BYTES = 8 * BLOCK_BITS // 8


def frame_flits(payload_bytes: int, flit_bytes: int = FLIT_BYTES) -> int:
    """Flits of a frame carrying ``payload_bytes`` (header + payload + CRC, rounded up)."""
    return math.ceil((HEADER_BYTES + payload_bytes + CRC_BYTES) / flit_bytes)


class SyncHeader(enum.IntEnum):
    """The 2-bit sync header of a 64b/66b block (bit 0 goes on the wire first)."""
    DATA = 0b01
    CONTROL = 0b10


class ControlType(enum.IntEnum):
    """First byte of a control block's (unscrambled) payload."""
    IDLE = 0x1E      #: nothing to send this beat
    ALIGN = 0x4B     #: deskew marker, sent on all lanes in the same beat
    TRAIN = 0x2D     #: training sequence; ``flags`` bit 0 = sender's receiver is aligned
    RESYNC = 0x33    #: link layer: a frame starts in the next data flit (after NAK or timeout)


class FlitKind(enum.IntEnum):
    """What a PHY beat carries between the PHY and the link layer."""
    DATA = 0         #: a data flit (512 bits of frame content)
    RESYNC = 1       #: a RESYNC control flit (no data)
    ERROR = 2        #: RX only: a beat was lost or damaged (bad sync header, lanes disagree, deskew lost)


class FrameType(enum.IntEnum):
    """``frame_type`` of a frame header (0 is invalid so an all-zero flit is not a frame)."""
    DATA = 1         #: sequenced, replayed until acknowledged, consumes receiver credits
    LINK_CTRL = 2    #: one flit carrying only ack_seq / nak / credit_limit; not sequenced


class LinkOp(enum.IntEnum):
    """Transaction-layer operation carried in a data frame."""
    WRITE = 1            #: write the payload at ``address`` in the target DIMM
    READ_REQUEST = 2     #: read ``length_words`` words at ``address``; answered by READ_RESPONSE
    READ_RESPONSE = 3    #: payload answers the READ_REQUEST with the same ``tag``
    ATOMIC_ADD_FP32 = 4  #: add the payload (FP32 lanes) into memory at ``address``
    ATOMIC_ADD_INT32 = 5 #: add the payload (INT32 lanes, wrap-around) into memory at ``address``
    COMPLETION = 6       #: status of a WRITE / ATOMIC_ADD with the same ``tag`` (no payload)


@dataclass(frozen=True)
class LinkConfig:
    """Parameters of one DIMM-Link port (both ends of a link must agree).

    Defaults: 8 lanes x 25 Gb/s at the 1 GHz NDP clock (SPEC section 1).
    """
    lanes: int = 8
    #: average serial bits per lane per NDP clock (25 = 25 Gb/s at 1 GHz)
    lane_bits_per_cycle: int = 25
    #: width of the parallel chunk a lane exchanges with the channel
    chunk_bits: int = 32
    #: largest frame payload in bytes (multiple of WORD_BYTES)
    max_payload: int = 1024
    #: flits the transmitter keeps for replay until acknowledged
    replay_flits: int = 64
    #: flits of receive buffer (the credits a transmitter starts with)
    rx_buffer_flits: int = 64
    #: width of frame sequence numbers
    seq_bits: int = 12
    #: cycles without acknowledgement progress before the transmitter replays
    replay_timeout: int = 1024
    #: consecutive valid sync headers that lock a lane's block boundary
    lock_blocks: int = 64
    #: invalid sync headers within 64 blocks that make a locked lane hunt again
    unlock_errors: int = 16
    #: blocks a lane may lead the slowest lane by (deskew FIFO depth)
    deskew_blocks: int = 8
    #: an ALIGN flit is inserted every this many flits on an active link
    align_period: int = 4096
    #: TRAIN flits with the aligned flag needed (received) to bring a link up
    train_count: int = 8

    def __post_init__(self):
        check_int("lanes", self.lanes, 1, 16)
        check_int("chunk_bits", self.chunk_bits, 8, 128)
        check_int("lane_bits_per_cycle", self.lane_bits_per_cycle, 1, self.chunk_bits)
        check_int("max_payload", self.max_payload, WORD_BYTES, 8160)
        if self.max_payload % WORD_BYTES:
            raise ValueError(f"max_payload must be a multiple of {WORD_BYTES} bytes, got {self.max_payload!r}")
        check_int("seq_bits", self.seq_bits, 4, 12)
        check_int("replay_flits", self.replay_flits, self.max_frame_flits, 1 << 16)
        check_int("rx_buffer_flits", self.rx_buffer_flits, self.max_frame_flits, 1 << 15)
        check_int("replay_timeout", self.replay_timeout, 16, 1 << 20)
        check_int("lock_blocks", self.lock_blocks, 2, 1024)
        check_int("unlock_errors", self.unlock_errors, 1, 64)
        check_int("deskew_blocks", self.deskew_blocks, 2, 64)
        check_int("align_period", self.align_period, 16, 1 << 20)
        check_int("train_count", self.train_count, 1, 255)

    @property
    def flit_bits(self) -> int:
        return self.lanes * BLOCK_BITS

    @property
    def flit_bytes(self) -> int:
        return self.flit_bits // 8

    @property
    def max_frame_flits(self) -> int:
        return frame_flits(self.max_payload, self.flit_bytes)

    @property
    def lane_gbps(self) -> float:
        """Serial rate of one lane in Gb/s."""
        return self.lane_bits_per_cycle * NDP_CLOCK_HZ / 1e9

    @property
    def raw_bytes_per_cycle(self) -> float:
        """Line rate of the link per direction, bytes per NDP cycle (25.0 by default)."""
        return self.lanes * self.lane_bits_per_cycle / 8

    @property
    def flit_cycles(self) -> float:
        """Average NDP cycles one flit takes on the wire (66 bits per lane)."""
        return (BLOCK_BITS + SYNC_BITS) / self.lane_bits_per_cycle


#: Payload of a control block (before scrambling).
control_block_layout = data.StructLayout({
    "type": 8,        # ControlType
    "lane": 8,        # lane number of the sender (checked by the receiver: no lane reordering)
    "flags": 8,       # TRAIN: bit 0 = sender's receiver is aligned
    "reserved": 40,   # zero
})


def phy_flit_layout(lanes: int = 8) -> data.StructLayout:
    """One beat between the PHY and the link layer."""
    return data.StructLayout({
        "kind": 2,                    # FlitKind
        "data": lanes * BLOCK_BITS,   # DATA only
    })


#: Transaction-layer header: the upper 128 bits of a frame header, opaque to the link layer.
transaction_header_layout = data.StructLayout({
    "op": 4,              # LinkOp
    "dest": 4,            # DIMM id the transaction is for (routing)
    "src": 4,             # DIMM id that issued it
    "tag": 8,             # matches responses/completions to requests
    "address": 40,        # byte address in the target DIMM (DRAM or SRAM window)
    "length_words": 8,    # READ_REQUEST: words to read
    "status": 4,          # COMPLETION / READ_RESPONSE: 0 = OK, else an error code
    "reply_address": 40,  # READ_REQUEST: where the initiator wants the data (echoed as the response's address)
    "reserved": 16,
})

#: The 32-byte header at the start of every frame.
frame_header_layout = data.StructLayout({
    "frame_type": 4,      # FrameType
    "seq": 12,            # DATA: sequence number (modulo 2**seq_bits)
    "ack_seq": 12,        # next sequence number the sender's receiver expects (cumulative ack)
    "nak": 1,             # the sender's receiver discarded frames from ack_seq on: replay
    "payload_words": 8,   # DATA: payload length in 32-byte words
    "credit_limit": 16,   # cumulative flit credits the sender's receiver grants (modulo 2**16)
    "reserved": 75,       # zero
    "transaction": transaction_header_layout,
})


def packet_beat_layout() -> data.StructLayout:
    """One beat between the transaction layer and the link layer.

    A packet is a header beat (``first``; ``data`` holds a
    :data:`transaction_header_layout` in bits 0..127 and ``payload_words`` says
    how many payload beats follow) and then that many payload beats of 32 bytes;
    ``last`` marks the final beat (the header itself when there is no payload).
    """
    return data.StructLayout({
        "data": WORD_BYTES * 8,
        "payload_words": 8,
        "first": 1,
        "last": 1,
    })
