"""The error-free timing of a link descriptor on the model backend: costs fitted to the RTL, and the formula.

:func:`link_cycles` is the time of a LINK_SEND or ATOMIC_ADD that sends something, from
dispatch to its completion, with no bit errors (:class:`~ndpdimm.cosim.link.model.LinkFabric`
adds the replays' time from ``cosim/link/bit_errors.py`` on top): dispatch; the first packet
store-and-forward through every hop (a receiver checks a frame's CRC before it hands the
packet on: per hop a fixed part and a part per word) and the answer's way back; the target's
time for it (:func:`target_cycles`: SRAM write, FP32/INT32 atomic add, DRAM write); every
further packet at the pace of the slower of the wire (frame flits at the link's framing rate)
and the target. A DIMM addressing itself (0 hops) crosses no wire: its packets follow each
other at the target's pace.

Where the numbers come from (constants below, each with its data): the framing rate is the RTL
link bench's (``bench/results/dimm_link.json``: goodput within 0.2 % of it); dispatch and the
target's per-packet and per-word costs are fitted to the RTL harness with one DIMM addressing
itself; the per-hop costs and remote atomic adds to three RTL cores joined by two links
(``cosim/rtl/benches/system.py``, which also reports the model's error for every case it
measures: ``ndpdimm bench --suite dimm_link``).

A transfer's ``kind`` is ``"write"``, ``"read"``, ``"atomic_fp32"`` or ``"atomic_int32"``; a
remote address with bit 39 set (``DRAM_SPACE``) is the target's DRAM.
"""

from __future__ import annotations

from collections.abc import Sequence

from ndpdimm.hw.link.formats import WORD_BYTES, LinkConfig, frame_flits
from ndpdimm.hw.link.transaction import DRAM_SPACE

__all__ = ["DISPATCH_CYCLES", "TARGET_PACKET_CYCLES", "WRITE_WORD_CYCLES", "ATOMIC_PACKET_CYCLES",
           "ATOMIC_WORD_CYCLES", "REMOTE_ATOMIC_PACKET_CYCLES", "REMOTE_ATOMIC_WORD_CYCLES",
           "HOP_CYCLES", "HOP_WORD_CYCLES", "DRAM_WORD_CYCLES", "DRAM_PACKET_CYCLES",
           "target_cycles", "link_cycles"]

#: Fitted to the RTL harness, one DIMM addressing itself (NdpCore(link=True), 16 KiB SRAM):
#: remote SRAM writes of 1, 32 and 80 words took 18, 56 and 132 cycles (1, 1 and 3 packets),
#: i.e. 8.2 + 8.57 per packet + 1.226 per word, exactly.
DISPATCH_CYCLES = 8.2
TARGET_PACKET_CYCLES = 8.57
WRITE_WORD_CYCLES = 1.226
#: Atomic adds at the same DIMM (its SRAM serves the initiator's reads too): 32 B, 1 and 2 KiB
#: took 21, 104, 199 cycles in the three-core RTL system (cosim/rtl/benches/system.py).
ATOMIC_PACKET_CYCLES = 10.1
ATOMIC_WORD_CYCLES = 2.68
#: Atomic adds at another DIMM, fitted to the same system over 1 and 2 hops (32 B, 1 KiB).
REMOTE_ATOMIC_PACKET_CYCLES = 9.7
REMOTE_ATOMIC_WORD_CYCLES = 2.26
#: Each hop of the first packet, fitted to the three-core system (writes of 32 B and 1 KiB over
#: 1 and 2 hops: 59/101 and 160/266 cycles): a fixed part for the data (or request) out and
#: the completion (or data) back, and a part per word - a receiver checks a frame's CRC before
#: it hands the packet on (store-and-forward: the frame's time on the wire, then its beats).
HOP_CYCLES = 39.5
HOP_WORD_CYCLES = 2.05
#: A DRAM-target packet, fitted to the same harness: remote DRAM writes of 64, 128, 512, 1024,
#: 2048 and 4096 B (1, 1, 1, 1, 2, 4 packets) took 32, 34, 46, 62, 116, 226 cycles, i.e.
#: 8.2 + 22 per packet + 1.0 per word (within 2 cycles).
DRAM_WORD_CYCLES = 1.0
DRAM_PACKET_CYCLES = 22


def target_cycles(kind: str, remote: int, n_bytes: int, hops: int) -> float:
    """The target's time for one packet of ``n_bytes`` of a ``kind`` transfer to address
    ``remote`` that crossed ``hops`` links (an atomic add at another DIMM costs less than one at
    the initiator's own, whose SRAM serves the initiator's reads too)."""
    words = n_bytes // WORD_BYTES
    if remote & DRAM_SPACE:
        return DRAM_PACKET_CYCLES + DRAM_WORD_CYCLES * words
    if kind.startswith("atomic"):
        if hops:
            return REMOTE_ATOMIC_PACKET_CYCLES + REMOTE_ATOMIC_WORD_CYCLES * words
        return ATOMIC_PACKET_CYCLES + ATOMIC_WORD_CYCLES * words
    return TARGET_PACKET_CYCLES + WRITE_WORD_CYCLES * words


def link_cycles(config: LinkConfig, kind: str, hops: int,
                packets: Sequence[tuple[int, int, int]]) -> float:
    """The error-free time of a ``kind`` transfer over ``hops`` links whose ``packets`` are
    ``(remote address, local address, bytes)`` in order, at least one (module docstring)."""
    c = config
    first = packets[0][2]
    # the first packet, store-and-forward through every hop, and the answer's way back
    total = (DISPATCH_CYCLES + hops * (HOP_CYCLES + HOP_WORD_CYCLES * first // WORD_BYTES)
             + target_cycles(kind, packets[0][0], first, hops))
    # the others follow at the pace of the slower of the wire and the target
    for remote, _, n in packets[1:]:
        frame = frame_flits(n, c.flit_bytes) * c.flit_cycles if hops else 0
        total += max(frame, target_cycles(kind, remote, n, hops))
    return total
