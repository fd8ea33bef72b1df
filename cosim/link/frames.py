"""Reference model of DIMM-Link frames, and a behavioural flit channel for link-layer tests.

Pure Python, independent of the RTL: frames are built byte by byte from the
field positions of :mod:`ndpdimm.hw.link.formats` and protected by a plain
table-driven (bytewise) CRC-32C, so a mistake shared between the RTL's XOR
matrix and ``amaranth.lib.crc`` cannot hide (check value of ``b"123456789"``
is ``0xE3069283``).

* :func:`pack_frame` / :func:`unpack_frame` / :func:`check_frame`: a frame as
  a list of flit integers (flit bit ``8k`` = byte ``k``, little-endian).
* :func:`packet_beats` / :func:`beats_to_packet`: a packet as
  :func:`packet_beat_layout` beats (header beat, 32-byte payload beats).
* :class:`WireMonitor`: splits a flit stream (DATA / RESYNC / ERROR beats)
  into frames the way a receiver does.
* :class:`FlitChannel`: one direction of the wire for tests: PHY beat slots
  at line rate (a flit per 66/25 = 2.64 cycles by default) with optional
  random stalls, a delay line in cycles, and faults: random bit flips
  (delivered as DATA with wrong bits or, with ``error_beat_prob``, as an
  ERROR beat), dropped flits, and rule-based faults on chosen flits.
"""

import collections
import random
from dataclasses import dataclass

from ndpdimm.hw.link.formats import (
    CRC_BYTES,
    FLIT_BYTES,
    HEADER_BYTES,
    WORD_BYTES,
    FlitKind,
    FrameType,
    frame_flits,
    frame_header_layout,
    packet_beat_layout,
    transaction_header_layout,
)

__all__ = ["crc32c", "pack_fields", "unpack_fields", "pack_frame", "unpack_frame", "check_frame",
           "Frame", "packet_beats", "beats_to_packet", "WireMonitor", "FlitChannel",
           "CRC32C_CHECK"]

#: CRC-32C of b"123456789" (the catalogue check value).
CRC32C_CHECK = 0xE3069283
_POLY = 0x82F63B78   # Castagnoli, reflected


def _make_table():
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ (_POLY if crc & 1 else 0)
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (init and final XOR 0xFFFFFFFF, reflected), one table look-up per byte."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def pack_fields(layout, **fields) -> int:
    """Integer of a ``StructLayout`` from field values (positions taken from the layout)."""
    value = 0
    for name, v in fields.items():
        f = layout[name]
        width = f.width if hasattr(f, "width") else f.shape.size
        if not 0 <= v < 1 << width:
            raise ValueError(f"{name}={v!r} does not fit {width} bits")
        value |= v << f.offset
    return value


def unpack_fields(layout, value: int) -> dict:
    """Field values of a ``StructLayout`` integer."""
    out = {}
    for name, f in layout:
        width = f.width if hasattr(f, "width") else f.shape.size
        out[name] = (value >> f.offset) & ((1 << width) - 1)
    return out


def _flit_bytes_of(flits, flit_bytes):
    return b"".join(f.to_bytes(flit_bytes, "little") for f in flits)


@dataclass(frozen=True)
class Frame:
    """A frame's header fields, transaction header (int) and payload bytes."""
    frame_type: int
    seq: int
    ack_seq: int
    nak: int
    credit_limit: int
    transaction: int = 0
    payload: bytes = b""
    payload_words: int = 0
    reserved: int = 0


def pack_frame(frame_type, seq=0, ack_seq=0, nak=0, credit_limit=0, transaction=0, payload=b"",
               flit_bytes=FLIT_BYTES, crc=crc32c, payload_words=None) -> list:
    """Flits (ints) of one frame; ``crc`` may be swapped to show that a checker can fail.

    ``payload_words`` defaults to ``len(payload) / 32``; pass another value to
    build a malformed frame (the flit count still follows ``payload``).
    """
    if len(payload) % WORD_BYTES:
        raise ValueError(f"payload must be whole {WORD_BYTES}-byte words, got {len(payload)} bytes")
    words = len(payload) // WORD_BYTES if payload_words is None else payload_words
    header = pack_fields(frame_header_layout, frame_type=int(frame_type), seq=seq,
                         ack_seq=ack_seq, nak=nak, payload_words=words,
                         credit_limit=credit_limit) | transaction << frame_header_layout["transaction"].offset
    raw = bytearray(header.to_bytes(HEADER_BYTES, "little") + bytes(payload))
    n_flits = frame_flits(len(payload), flit_bytes)
    raw += bytes(n_flits * flit_bytes - len(raw))          # padding, CRC field zero
    raw[-CRC_BYTES:] = crc(bytes(raw)).to_bytes(CRC_BYTES, "little")
    return [int.from_bytes(raw[i:i + flit_bytes], "little") for i in range(0, len(raw), flit_bytes)]


def unpack_frame(flits, flit_bytes=FLIT_BYTES):
    """``(Frame, crc_ok)`` of a frame's flits (payload length from the header)."""
    raw = bytearray(_flit_bytes_of(flits, flit_bytes))
    header = int.from_bytes(raw[:HEADER_BYTES], "little")
    f = unpack_fields(frame_header_layout, header)
    n = f["payload_words"] if f["frame_type"] == FrameType.DATA else 0
    payload = bytes(raw[HEADER_BYTES:HEADER_BYTES + n * WORD_BYTES])
    got = int.from_bytes(raw[-CRC_BYTES:], "little")
    raw[-CRC_BYTES:] = bytes(CRC_BYTES)
    frame = Frame(f["frame_type"], f["seq"], f["ack_seq"], f["nak"], f["credit_limit"],
                  f["transaction"], payload, f["payload_words"], f["reserved"])
    return frame, got == crc32c(bytes(raw))


def check_frame(flits, flit_bytes=FLIT_BYTES) -> bool:
    """True if the frame's CRC is right."""
    return unpack_frame(flits, flit_bytes)[1]


def packet_beats(transaction: int, payload: bytes) -> list:
    """Beats (ints of :func:`packet_beat_layout`) of one packet."""
    L = packet_beat_layout()
    n = len(payload) // WORD_BYTES
    beats = [pack_fields(L, data=transaction, payload_words=n, first=1, last=int(n == 0))]
    for i in range(n):
        word = int.from_bytes(payload[i * WORD_BYTES:(i + 1) * WORD_BYTES], "little")
        beats.append(pack_fields(L, data=word, first=0, last=int(i == n - 1)))
    return beats


def beats_to_packet(beats):
    """``(transaction, payload)`` from beats; checks first/last/payload_words framing."""
    L = packet_beat_layout()
    fields = [unpack_fields(L, b) for b in beats]
    head = fields[0]
    n = head["payload_words"]
    assert head["first"] == 1 and len(fields) == n + 1, f"bad packet framing: {fields[:1]} x{len(fields)}"
    assert [f["last"] for f in fields] == [0] * n + [1], "last must mark exactly the final beat"
    assert all(f["first"] == 0 and f["payload_words"] == 0 for f in fields[1:])
    assert head["data"] >> transaction_header_layout.size == 0
    payload = b"".join(f["data"].to_bytes(WORD_BYTES, "little") for f in fields[1:])
    return head["data"], payload


class WireMonitor:
    """Splits a beat stream into frames as a receiver would (no error recovery beyond RESYNC).

    ``push(kind, data)`` returns ``(position, frame_flits)`` of a DATA flit
    within its frame (``position`` 0 = header flit) and, when that flit
    completes a frame, appends ``(flits, Frame, crc_ok)`` to ``frames``.
    After an ERROR beat the monitor waits for RESYNC, like the receiver.
    """

    def __init__(self, max_payload: int, flit_bytes: int = FLIT_BYTES):
        self.max_payload, self.flit_bytes = max_payload, flit_bytes
        self.frames, self.partial, self.length, self.lost = [], [], 0, False
        self.resyncs = 0

    def header_flits(self, data: int) -> int:
        f = unpack_fields(frame_header_layout, data & ((1 << 8 * HEADER_BYTES) - 1))
        if f["frame_type"] == FrameType.DATA and f["payload_words"] * WORD_BYTES <= self.max_payload:
            return frame_flits(f["payload_words"] * WORD_BYTES, self.flit_bytes)
        if f["frame_type"] == FrameType.LINK_CTRL:
            return 1
        return 0                                       # malformed

    def push(self, kind: int, data: int):
        if kind == FlitKind.RESYNC:
            self.partial, self.lost = [], False
            self.resyncs += 1
            return None
        if kind == FlitKind.ERROR or self.lost:
            self.partial, self.lost = [], True
            return None
        if not self.partial:
            self.length = self.header_flits(data)
            if self.length == 0:
                self.lost = True
                return (0, 0)
        self.partial.append(data)
        pos = len(self.partial) - 1
        if len(self.partial) == self.length:
            frame, ok = unpack_frame(self.partial, self.flit_bytes)
            self.frames.append((self.partial, frame, ok))
            self.partial = []
        return (pos, self.length)


class FlitChannel:
    """One direction of a link between two link layers, in flits.

    Per cycle: :meth:`slot` says whether the PHY takes a flit (``phy_tx.ready``);
    :meth:`send` hands it a flit taken in that cycle; :meth:`receive` returns
    the beat (``(kind, data)``) for ``phy_rx`` this cycle, or ``None``.

    Parameters: ``latency`` cycles on the wire; slots at ``bits_per_cycle /
    66`` flits per cycle (25 -> a flit per 2.64 cycles); ``stall_prob`` of
    losing a slot (the PHY busy with ALIGN flits etc.); ``flip_prob`` per flit
    of one random bit flip, of which ``error_beat_prob`` arrive as an ERROR
    beat instead; ``drop_prob`` per flit of vanishing; ``fault(index, kind,
    data, position)`` returns ``None`` or one of ``("drop",)``, ``("error",)``,
    ``("flip", bit)``, ``("insert", [(kind, data), ...])`` (beats sent before
    this flit) for the ``index``-th flit sent (``position`` from a
    :class:`WireMonitor` of the sent stream; ``now`` is the cycle). ``faults_enabled`` switches all
    faults off (to let a test drain). ``injected`` counts what happened.
    """

    def __init__(self, *, max_payload, latency=12, bits_per_cycle=25, stall_prob=0.0,
                 flip_prob=0.0, error_beat_prob=0.0, drop_prob=0.0, fault=None, seed=0,
                 flit_bits=FLIT_BYTES * 8):
        self.latency, self.bits_per_cycle = latency, bits_per_cycle
        self.stall_prob, self.flip_prob = stall_prob, flip_prob
        self.error_beat_prob, self.drop_prob = error_beat_prob, drop_prob
        self.fault, self.flit_bits = fault, flit_bits
        self.rng = random.Random(seed)
        self.sent_monitor = WireMonitor(max_payload, flit_bits // 8)
        self.queue = collections.deque()      # (due cycle, kind, data)
        self.acc, self.index, self.faults_enabled, self.now = 0, 0, True, 0
        self.injected = collections.Counter()
        self.sent = []                          # (cycle, kind, data) as handed over

    def slot(self, cycle: int) -> bool:
        self.acc += self.bits_per_cycle
        if self.acc < 66:
            return False
        if self.rng.random() < self.stall_prob:
            self.acc = 66                       # slot lost, retried next cycle
            return False
        self.acc -= 66
        return True

    def _deliver(self, cycle, kind, data):
        due = cycle + self.latency
        if self.queue and self.queue[-1][0] >= due:
            due = self.queue[-1][0] + 1         # one beat per cycle at the receiver
        self.queue.append((due, kind, data))

    def send(self, cycle: int, kind: int, data: int):
        self.now = cycle                        # for fault rules that act on a time window
        self.sent.append((cycle, kind, data))
        position = self.sent_monitor.push(kind, data)
        index, self.index = self.index, self.index + 1
        action = None
        if self.faults_enabled:
            if self.fault is not None:
                action = self.fault(index, kind, data, position)
            if action is None and self.rng.random() < self.drop_prob:
                action = ("drop",)
            if action is None and self.rng.random() < self.flip_prob:
                if self.rng.random() < self.error_beat_prob:
                    action = ("error",)
                else:
                    action = ("flip", self.rng.randrange(self.flit_bits))
        if action is None:
            self._deliver(cycle, kind, data)
            return
        self.injected[action[0]] += 1
        if action[0] == "drop":
            return
        if action[0] == "error":
            self._deliver(cycle, FlitKind.ERROR, 0)
        elif action[0] == "flip":
            # a flipped bit of a control flit makes the PHY see a bad block: ERROR
            if kind == FlitKind.DATA:
                self._deliver(cycle, kind, data ^ (1 << action[1]))
            else:
                self._deliver(cycle, FlitKind.ERROR, 0)
        elif action[0] == "insert":
            for k, d in action[1]:
                self._deliver(cycle, k, d)
            self._deliver(cycle, kind, data)
        else:
            raise ValueError(f"unknown fault action {action!r}")

    def receive(self, cycle: int):
        if self.queue and self.queue[0][0] <= cycle:
            _, kind, data = self.queue.popleft()
            return kind, data
        return None

    def idle(self) -> bool:
        return not self.queue
