"""Behavioural model of one direction of a DIMM-Link channel (plain Python, one call per clock cycle).

A ``LinkChannel`` sits between the ``serial_tx``/``serial_tx_valid`` ports of
one ``LinkPhy`` (or lane) and the ``serial_rx``/``serial_rx_valid`` ports of the
partner. :meth:`LinkChannel.step` is called once per NDP clock cycle with the
chunks the transmitter presents *in that cycle* and returns what the receiver
sees *in that same cycle*. Per lane, in this order:

1. **Bit errors** (on the transmitted stream, positions counted from the
   lane's first transmitted bit): random ones at ``ber`` from a seeded
   ``random.Random`` - the gap to the next error is drawn from the geometric
   distribution, so a low BER costs nothing per bit - and ones placed by
   :meth:`flip` (e.g. on a sync header: bit ``66 k`` is sync bit 0 of block
   ``k``). ``injected_errors[lane]`` counts both.
2. **Drops**: :meth:`drop_chunks` discards the lane's next valid chunks
   (``dropped_chunks`` counts them); the receiver sees a bit slip.
3. **Bit offset**: the lane's stream is delayed by ``bit_offset[lane]`` bits
   (filler bits from the rng come first), so the receiver meets block
   boundaries at an arbitrary position inside its chunks. Chunks keep the
   transmitter's valid pattern.
4. **Delay line** of ``latency + skew[lane]`` cycles. A *cycle of latency* is
   one clock cycle: with delay 0 the receiver sees a chunk in the cycle the
   transmitter drives it (a plain wire: the RX registers it at the end of that
   cycle); with delay D, D cycles later. :meth:`set_delay` changes it at run
   time: growing it stalls the lane's output (idle cycles, nothing lost),
   shrinking it drops the chunks that were in flight for the removed cycles.

Lane permutation (``lane_map``: output lane i carries input lane
``lane_map[i]``) models swapped wires. No clock-offset model: both ends run in
one clock, as docs/dimm_link.md says.

:func:`pump` runs a channel inside an Amaranth testbench (``async def`` with
``ctx``; register it with ``sim.add_testbench(..., background=True)``); a
cocotb bench or C++ harness can mirror :meth:`step` directly.
"""

import math
import random
from collections import deque

__all__ = ["LinkChannel", "pump"]


def _check(name, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


class LinkChannel:
    """One direction of a link: ``lanes`` wires carrying ``chunk_bits``-wide chunks.

    Parameters
    ----------
    lanes, chunk_bits : int
        As the ``LinkConfig`` of the two ends.
    latency : int
        Cycles of delay common to all lanes (>= 0).
    skew : list of int or None
        Extra cycles per lane (>= 0), default all 0.
    bit_offset : list of int or None
        Bits each lane's stream is delayed by (>= 0), default all 0.
    ber : float
        Random bit-error rate per transmitted bit, 0 <= ber < 1.
    rng : random.Random or int or None
        Source of errors and filler bits (an int seeds a new one).
    lane_map : list of int or None
        Output lane i carries input lane ``lane_map[i]`` (a permutation).
    """

    def __init__(self, lanes: int, chunk_bits: int, *, latency: int = 0, skew=None, bit_offset=None,
                 ber: float = 0.0, rng=None, lane_map=None):
        self.lanes = _check("lanes", lanes, 1, 64)
        self.chunk_bits = _check("chunk_bits", chunk_bits, 1, 1024)
        _check("latency", latency, 0, 1 << 20)
        skew = [0] * lanes if skew is None else list(skew)
        bit_offset = [0] * lanes if bit_offset is None else list(bit_offset)
        lane_map = list(range(lanes)) if lane_map is None else list(lane_map)
        for name, values in (("skew", skew), ("bit_offset", bit_offset), ("lane_map", lane_map)):
            if len(values) != lanes:
                raise ValueError(f"{name} must have {lanes} entries, got {values!r}")
        for i in range(lanes):
            _check(f"skew[{i}]", skew[i], 0, 1 << 20)
            _check(f"bit_offset[{i}]", bit_offset[i], 0, 1 << 16)
        if sorted(lane_map) != list(range(lanes)):
            raise ValueError(f"lane_map must be a permutation of 0..{lanes - 1}, got {lane_map!r}")
        if not isinstance(ber, (int, float)) or isinstance(ber, bool) or not 0 <= ber < 1:
            raise ValueError(f"ber must be a number in [0, 1), got {ber!r}")
        if rng is None or isinstance(rng, int):
            rng = random.Random(rng)
        if not isinstance(rng, random.Random):
            raise ValueError(f"rng must be a random.Random, an int seed or None, got {rng!r}")
        self.rng = rng
        self.ber = float(ber)
        self.lane_map = lane_map
        self._mask = (1 << chunk_bits) - 1
        self._line = [deque([None] * (latency + skew[i])) for i in range(lanes)]
        self._carry = [rng.getrandbits(n) if n else 0 for n in bit_offset]
        self._offset = bit_offset
        self._bits_in = [0] * lanes
        self._next_error = [self._gap() for _ in range(lanes)]
        self._flips = [[] for _ in range(lanes)]
        self._drop = [0] * lanes
        self.injected_errors = [0] * lanes
        self.dropped_chunks = [0] * lanes
        self.cycles = 0

    def _gap(self) -> int | None:
        """Position (relative) of the next random error: geometric number of good bits."""
        if self.ber == 0:
            return None
        return int(math.log(1.0 - self.rng.random()) / math.log(1.0 - self.ber))

    def delay(self, lane: int) -> int:
        """Current delay of ``lane`` in cycles."""
        return len(self._line[lane])

    def bits_sent(self, lane: int) -> int:
        """Bits the transmitter has put on ``lane`` so far (the next bit's position)."""
        return self._bits_in[lane]

    def set_delay(self, lane: int, cycles: int):
        """Change the delay of ``lane``: longer stalls it, shorter drops what was in flight."""
        _check("cycles", cycles, 0, 1 << 20)
        line = self._line[lane]
        while len(line) < cycles:
            line.appendleft(None)
        while len(line) > cycles:
            if line.popleft() is not None:
                self.dropped_chunks[lane] += 1

    def flip(self, lane: int, position: int):
        """Invert transmitted bit ``position`` (counted from 0 on ``lane``) when it passes."""
        if position < self._bits_in[lane]:
            raise ValueError(f"bit {position!r} of lane {lane} has already been sent")
        self._flips[lane].append(position)

    def drop_chunks(self, lane: int, count: int):
        """Discard the next ``count`` valid chunks of ``lane``."""
        self._drop[lane] += _check("count", count, 0, 1 << 20)

    def _errors(self, lane: int, chunk: int) -> int:
        start = self._bits_in[lane]
        end = start + self.chunk_bits
        gap = self._next_error[lane]
        while gap is not None and gap < end:
            if gap >= start:
                chunk ^= 1 << (gap - start)
                self.injected_errors[lane] += 1
            gap += 1 + self._gap()
        self._next_error[lane] = gap
        flips = self._flips[lane]
        if flips:
            keep = []
            for position in flips:
                if start <= position < end:
                    chunk ^= 1 << (position - start)
                    self.injected_errors[lane] += 1
                else:
                    keep.append(position)
            self._flips[lane] = keep
        self._bits_in[lane] = end
        return chunk

    def step(self, chunks, valid: int):
        """One cycle: ``chunks[i]`` / bit i of ``valid`` from the TX -> ``(chunks, valid)`` for the RX."""
        c = self.chunk_bits
        moved = [None] * self.lanes
        for i in range(self.lanes):
            if valid >> i & 1:
                chunk = self._errors(i, chunks[i] & self._mask)
                if self._drop[i]:
                    self._drop[i] -= 1
                    self.dropped_chunks[i] += 1
                    chunk = None
                elif self._offset[i]:
                    pending = self._carry[i] | chunk << self._offset[i]
                    chunk, self._carry[i] = pending & self._mask, pending >> c
                moved[i] = chunk
            line = self._line[i]
            if line:
                line.append(moved[i])
                moved[i] = line.popleft()
        out, out_valid = [0] * self.lanes, 0
        for i, src in enumerate(self.lane_map):
            if moved[src] is not None:
                out[i] = moved[src]
                out_valid |= 1 << i
        self.cycles += 1
        return out, out_valid


def _raw(port):
    """The plain value behind a port (a layout View's bits), so ``ctx.get`` returns an int."""
    return port.as_value() if hasattr(port, "as_value") else port


async def pump(ctx, channel: LinkChannel, serial_tx, serial_tx_valid, serial_rx, serial_rx_valid):
    """Amaranth testbench body: every cycle move ``serial_tx`` -> channel -> ``serial_rx`` (never returns).

    ``serial_tx``/``serial_rx`` are the ``ArrayLayout(chunk_bits, lanes)`` ports
    (or any value whose bits are the lanes' chunks side by side), the valids
    are ``lanes``-bit ports. Values are read after each clock edge, so what the
    channel returns reaches the receiver in the same cycle.
    """
    c, mask = channel.chunk_bits, (1 << channel.chunk_bits) - 1
    tx, tx_valid, rx, rx_valid = (_raw(x) for x in (serial_tx, serial_tx_valid, serial_rx, serial_rx_valid))
    lanes = range(channel.lanes)
    while True:
        word = ctx.get(tx)
        out, out_valid = channel.step([word >> (c * i) & mask for i in lanes], ctx.get(tx_valid))
        packed = 0
        for i in lanes:
            packed |= out[i] << (c * i)
        ctx.set(rx, packed)
        ctx.set(rx_valid, out_valid)
        await ctx.tick()
