"""Reference 64b/66b line code of a DIMM-Link lane, in plain Python (bit-exact with ``hw/link/lane.py``).

Everything works bit-serially on Python integers used as bit strings (bit 0
of an integer = the first bit on the wire), so it states the protocol as
directly as possible; the RTL computes the same 64 bits per block at once.

* :class:`Scrambler` / :class:`Descrambler`: x^58 + x^39 + 1, self-synchronous.
* :func:`encode_blocks`: ``(sync, payload)`` blocks -> scrambled bit stream.
* :func:`to_chunks` / :func:`from_chunks`: the gearbox (bit 0 of a chunk first).
* :func:`pacer_ticks`: the cycles on which a lane's rate pacer emits a chunk.
* :class:`BlockDecoder`: the receiver (block lock with one-bit slip, windowed
  unlock, descrambling) with exactly the RTL's rules, fed bit by bit or by
  chunks; :func:`decode_stream` runs it over a whole stream.

``assert rtl(x) == ref(x)``: tests feed the same stimulus to ``LinkLaneTx`` /
``LinkLaneRx`` and to these functions and compare chunks and delivered blocks.
"""

from dataclasses import dataclass

from ndpdimm.hw.link.formats import BLOCK_BITS, SYNC_BITS
from ndpdimm.hw.link.lane import (
    BLOCK_WIRE_BITS,
    LOCK_WINDOW_BLOCKS,
    SCRAMBLER_BITS,
    SCRAMBLER_SEED,
    SCRAMBLER_TAP,
)

__all__ = ["Scrambler", "Descrambler", "encode_blocks", "to_chunks", "from_chunks",
           "pacer_ticks", "RxBlock", "BlockDecoder", "decode_stream", "header_valid"]

_TAP_AGE = SCRAMBLER_BITS - SCRAMBLER_TAP      # state bit holding s[n - 39]
_TOP = SCRAMBLER_BITS - 1


def header_valid(sync: int) -> bool:
    """A sync header is valid if it is 01 or 10."""
    return sync in (1, 2)


class Scrambler:
    """Self-synchronous scrambler; ``state`` bit k = scrambled bit sent 58 - k bits ago."""

    def __init__(self, state: int = SCRAMBLER_SEED):
        self.state = state

    def __call__(self, payload: int, bits: int = BLOCK_BITS) -> int:
        out = 0
        for i in range(bits):
            s = (payload >> i & 1) ^ (self.state >> _TAP_AGE & 1) ^ (self.state & 1)
            self.state = (self.state >> 1) | (s << _TOP)
            out |= s << i
        return out


class Descrambler:
    """Inverse of :class:`Scrambler`; synchronises itself after 58 received bits."""

    def __init__(self, state: int = 0):
        self.state = state

    def __call__(self, payload: int, bits: int = BLOCK_BITS) -> int:
        out = 0
        for i in range(bits):
            s = payload >> i & 1
            out |= (s ^ (self.state >> _TAP_AGE & 1) ^ (self.state & 1)) << i
            self.state = (self.state >> 1) | (s << _TOP)
        return out


def encode_blocks(blocks, scrambler: Scrambler | None = None) -> tuple[int, int]:
    """``[(sync, payload), ...]`` -> ``(bits, nbits)``: the lane's wire stream, block 0 first."""
    scrambler = Scrambler() if scrambler is None else scrambler
    bits = 0
    for k, (sync, payload) in enumerate(blocks):
        word = (sync & 3) | scrambler(payload) << SYNC_BITS
        bits |= word << (BLOCK_WIRE_BITS * k)
    return bits, BLOCK_WIRE_BITS * len(blocks)


def to_chunks(bits: int, nbits: int, chunk_bits: int) -> list[int]:
    """Cut a bit stream into whole chunks (a trailing partial chunk is left out)."""
    mask = (1 << chunk_bits) - 1
    return [bits >> (chunk_bits * j) & mask for j in range(nbits // chunk_bits)]


def from_chunks(chunks, chunk_bits: int) -> tuple[int, int]:
    """Join chunks back into ``(bits, nbits)``."""
    bits = 0
    for j, chunk in enumerate(chunks):
        bits |= chunk << (chunk_bits * j)
    return bits, chunk_bits * len(chunks)


def pacer_ticks(lane_bits_per_cycle: int, chunk_bits: int, cycles: int) -> list[bool]:
    """Cycles (from reset) on which the rate pacer allows a chunk."""
    acc, ticks = 0, []
    for _ in range(cycles):
        tick = acc + lane_bits_per_cycle >= chunk_bits
        acc += lane_bits_per_cycle - (chunk_bits if tick else 0)
        ticks.append(tick)
    return ticks


@dataclass(frozen=True)
class RxBlock:
    """A block delivered by a locked receiver (payload descrambled)."""
    sync: int
    payload: int
    invalid: bool


class BlockDecoder:
    """Lane receiver with the RTL's rules (see ``hw/link/lane.py``).

    A candidate is evaluated when at least 67 bits are pending (one spare for a
    slip); :meth:`push_chunk` evaluates at most one candidate per call before
    appending the chunk, like one RTL cycle, so the order of events matches
    cycle by cycle when fed the same ``(chunk, valid)`` sequence.
    """

    def __init__(self, lock_blocks: int, unlock_errors: int):
        self.lock_blocks = lock_blocks
        self.unlock_errors = unlock_errors
        self.bits = 0
        self.nbits = 0
        self.locked = False
        self.good = 0
        self.window = 0
        self.errors = 0
        self.sync_errors = 0
        self.lock_losses = 0
        self.descrambler = Descrambler()
        self.delivered: list[RxBlock] = []

    def _evaluate(self):
        word = self.bits & ((1 << BLOCK_WIRE_BITS) - 1)
        sync, scrambled = word & 3, word >> SYNC_BITS
        ok = header_valid(sync)
        plain = self.descrambler(scrambled)
        slip = False
        if not self.locked:
            if ok:
                self.good += 1
                if self.good == self.lock_blocks:
                    self.locked, self.window, self.errors = True, 0, 0
            else:
                self.good, slip = 0, True
        else:
            self.delivered.append(RxBlock(sync, plain, not ok))
            if not ok:
                self.sync_errors += 1
            if not ok and self.errors + 1 >= self.unlock_errors:
                self.locked, self.good, slip = False, 0, True
                self.lock_losses += 1
            elif self.window == LOCK_WINDOW_BLOCKS - 1:
                self.window, self.errors = 0, 0
            else:
                self.window += 1
                self.errors += not ok
        used = BLOCK_WIRE_BITS + slip
        self.bits >>= used
        self.nbits -= used

    def push_chunk(self, chunk: int | None, chunk_bits: int):
        """One cycle: evaluate a candidate if 67 bits are pending, then append ``chunk`` (None = no chunk)."""
        if self.nbits >= BLOCK_WIRE_BITS + 1:
            self._evaluate()
        if chunk is not None:
            self.bits |= chunk << self.nbits
            self.nbits += chunk_bits

    def push_bits(self, bits: int, nbits: int):
        """Append a whole stream and evaluate every candidate it completes."""
        self.bits |= bits << self.nbits
        self.nbits += nbits
        while self.nbits >= BLOCK_WIRE_BITS + 1:
            self._evaluate()


def decode_stream(bits: int, nbits: int, lock_blocks: int, unlock_errors: int) -> list[RxBlock]:
    """Blocks a receiver delivers from a whole bit stream."""
    decoder = BlockDecoder(lock_blocks, unlock_errors)
    decoder.push_bits(bits, nbits)
    return decoder.delivered
