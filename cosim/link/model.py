"""DIMM-Link on the model backend: N DIMMs whose link descriptors move data between their models.

A :class:`LinkFabric` joins the :class:`~ndpdimm.cosim.model.backend.ModelBackend`
of every DIMM of an ``NdpSystem`` built with ``CoreConfig(link=True)``
(a chain: DIMM ids 0..N-1, ``hops = |dest - src|``, a DIMM addressing itself
goes through its own router: 0 hops). When a DIMM dispatches a LINK_SEND or
ATOMIC_ADD descriptor, the fabric:

* **checks** it exactly as the RTL does (``hw/link/transaction.py``), in the
  initiator's order - ``dest`` past the chain (``LINK_ID``) -> ``BAD_FIELD``;
  a local or remote address or the length not a multiple of 32 ->
  ``MISALIGNED``; the local range past the SRAM -> ``SRAM_RANGE``; zero bytes
  -> ``OK`` - and then packet by packet (``max_payload`` each) as the target
  does: an SRAM range past the target's SRAM, or a DRAM target (address bit
  39) that is not a WRITE, not 64 B aligned, outside the target's window or
  DIMM -> ``REMOTE_RANGE`` for that packet (nothing written by it; the others
  land), the first error being the descriptor's status;
* **applies** it to the models' images: a write copies this SRAM's bytes into
  the target's SRAM or DRAM, a read copies the target's SRAM here, an atomic
  add adds FP32 (round to nearest even, canonical NaN) or INT32 (wrap-around)
  lanes with ``golden.accumulate_bits`` - the same rule as the RTL's result
  writer. The data is in place when the initiator's descriptor completes
  (the RTL's guarantee); the target DIMM's own timeline is not slowed by it
  (its SRAM port is idle in the model);
* **times** it with :meth:`LinkFabric.cycles`: dispatch; the first packet
  store-and-forward through every hop (a receiver checks a frame's CRC before
  it hands the packet on: per hop a fixed part and a part per word) and the
  answer's way back; the target's time for it (SRAM write, FP32/INT32 atomic
  add, DRAM write); every further packet at the pace of the slower of the
  wire (frame flits at the link's framing rate) and the target.

Where the numbers come from (constants below, each with its data): the
framing rate is the RTL link bench's (``bench/results/dimm_link.json``:
goodput within 0.2 % of it); dispatch and the target's per-packet and
per-word costs are fitted to the RTL harness with one DIMM addressing itself;
the per-hop costs and remote atomic adds to three RTL cores joined by two
links (``cosim/rtl/benches/system.py``, which also reports the model's
error for every case it measures: ``ndpdimm bench --suite dimm_link``).

RELAYOUT (``hw/link/relayout.py``) on the model backend, each member's
descriptor on its own, as the host issues them: :meth:`LinkFabric.relayout_status`
makes the unit's checks in its order (``BAD_FIELD``, ``MISALIGNED``,
``DRAM_RANGE``, ``SRAM_RANGE``, nothing to send -> ``OK``) and then the
receivers' window checks block by block (``REMOTE_RANGE``: the unit starts
nothing after the first refused block); :meth:`LinkFabric.relayout_apply`
copies this member's blocks from its DRAM into the receivers' DRAM (and
leaves the last two staged blocks in its SRAM staging buffers, as the RTL
does); :meth:`LinkFabric.relayout_cycles` times the unit's walk - the checks,
the first block's DMA, then per block the larger of the next DMA and this
block's remote DRAM write (the unit keeps one of each outstanding), the last
write - and, for striped -> localized, no less than the time the target
needs to write every member's blocks into its DRAM one packet at a time, or
the busier of the two links into the target needs to carry the blocks from
its side (the senders share both, so they all finish at about that time).

Bit errors (``LinkFabric(..., ber, seed)``, ``NdpSystem(..., link_ber, link_seed)``)
----------------------------------------------------------------------------------------
Every frame a descriptor puts on a link - each packet's DATA frame on every hop out, and the
answer on every hop back (a COMPLETION or READ_REQUEST is a header-only frame of one flit) -
is hit with probability ``1 - (1 - ber) ** bits``, ``bits`` = its flits x lanes x 66
(:func:`frame_bits`: 64b/66b puts the sync headers on the wire too), drawn from a numpy
Generator seeded with ``seed`` (in the order descriptors are timed: a run is reproducible).
As in the RTL link layer (``hw/link/layer.py``, ``docs/dimm_link.md``):

* the receiver finds the damage (CRC-32C on the frame's last flit, or an invalid sync header)
  and never delivers the frame. CRC-32C's generator has an even number of terms (x + 1
  divides it), so it detects any odd number of flipped bits - one line error is 3 flipped
  bits after the descrambler - and x has order > 20 000 modulo it, so it detects any two
  flips inside a frame (8704 bits at most); other patterns pass with probability about
  2**-32, and at 1e-4 a 1 KiB frame carries two or more errors 23 % of the time: about one
  undetected frame in 2 x 10**10. The RTL bench delivered every packet exactly once and
  bit-exact through 1062 injected errors at 1e-4 (``bench/results/dimm_link.json``). So
  the model never corrupts data: :meth:`LinkFabric.apply` is the same at every BER; errors
  cost time;
* it sends a NAK and discards until the RESYNC; the transmitter, at the end of the frame it
  is sending when the NAK arrives, sends RESYNC and every unacknowledged frame again
  (go-back-N). A failed attempt holds the link for the bad frame, the frames started behind
  it before the NAK came back (:data:`NAK_ROUND_TRIP_CYCLES`: one 1 KiB frame of 44.9 cycles,
  three 256 B ones) to the end of the last of them, and the RESYNC flit: 92.4 cycles in a
  stream of 1 KiB frames, resending 2 frames per replay (as the RTL does: the runs below sent
  74 frames for 60 with 7 replays at 1e-5, 86 with 13 at 3e-5);
* if the NAK or the RESYNC is damaged as well (its own 66 bits per lane and the last
  :data:`DESCRAMBLER_REACH_BITS` of the block before it), the transmitter's
  ``replay_timeout`` (1024 cycles) or the receiver's NAK repeated after ``replay_timeout``
  recovers: the wait is ``replay_timeout`` (NAK lost, a ``timeouts``) or ``replay_timeout``
  plus the round trip (RESYNC lost, a second NAK and replay);
* a frame fails a geometric number of times (every replay can be hit again).

A transfer's packets go through its hops, the target and the hops back as a pipeline
(store-and-forward, each receiver holding ``rx_buffer_flits`` of frames): the replays add
the pipeline's finish with them minus without them to the calibrated error-free time above,
so at ``ber = 0`` every figure is what it was, and a stream paced by its target (a 1 KiB SRAM
write takes 47.8 cycles there, its frame 44.9 on the wire) hides part of a replay in the
receiver's buffer. RELAYOUT: each block sent to another DIMM is carried the same way and its
replays delay that block; the link into the target that all senders share (to localized) is
charged with the expected replays of their frames.

Counters (:meth:`LinkFabric.counters`, :data:`LINK_COUNTERS`) count at every BER, per link
direction: ``frames_sent`` (first transmissions and replays, the frames in flight
included), ``crc_errors`` (one per failed attempt), ``naks_sent`` and ``replays`` (one more
each for a lost RESYNC), ``timeouts`` (the RTL's names), ``bytes`` and ``wire_cycles`` (each
frame once) and ``replay_cycles`` (the link time the failed attempts held). Not modelled:
errors on idle flits and acknowledgements, which in the RTL start NAK/RESYNC exchanges of a
flit or two each (and count in its ``naks_sent`` and ``replays``).

Against the RTL (``bench/results/dimm_link.json``: 60 back-to-back 1 KiB packets over one
link pair, bit errors both ways, goodput from the 16th delivery to the last):
:func:`stream_goodput` runs the same stream through a fabric hop and :func:`expected_goodput`
is its long-run value. One run of 60 packets sees few errors, so a run's figure is one draw
from a wide spread: "runs" are the model's over seeds 0..399, like for like with the RTL's
run (``tests/cosim/link/test_model_errors.py`` checks the table).

=====  ==========================  ========  ==========================  ========
BER    RTL goodput (CRC errors /   model     model runs: mean, median    mean vs
       replays / timeouts, both    expected  [5 %, 95 %]                 RTL
       ends)
=====  ==========================  ========  ==========================  ========
0      0.9125 (0 / 0 / 0)          0.9127    0.913, 0.913 [0.913 0.913]  +0.0 %
1e-7   0.9125 (0 / 0 / 0)          0.9110    0.911, 0.913 [0.913 0.913]  -0.2 %
1e-6   0.8719 (2 / 2 / 0)          0.8957    0.898, 0.913 [0.872 0.913]  +2.9 %
1e-5   0.7659 (6 / 7 / 0)          0.7394    0.755, 0.769 [0.530 0.872]  -1.4 %
3e-5   0.5058 (28 / 39 / 0)        0.4491    0.480, 0.472 [0.305 0.668]  -5.1 %
1e-4   0.0958 (124 / 230 / 9)      0.0932    0.099, 0.096 [0.065 0.140]  +3.7 %
=====  ==========================  ========  ==========================  ========

The RTL figure at 1e-6 is exactly one replay in the window: 91.9 cycles lost, the model's
92.4. Margin, where the RTL saw at least 5 CRC errors (1e-5, 3e-5, 1e-4): the model's mean
over runs within 10 % of the RTL's figure, and the RTL's figure inside the model's 5..95 %
band. Six more RTL runs per BER (the same bench, seeds 101..106: ``ndpdimm.bench.link._run(
"stream_test", {"packets_ab": 60, "packets_ba": 0, "words": 32, "ber": ber}, seed)``, not in
the JSON) give 0.52..0.83 at 1e-5, 0.42..0.68 at 3e-5 and 0.064..0.127 at 1e-4; against the
means of all seven (0.725, 0.545, 0.100) the model's mean over runs is +3.7 %, -12.3 % and
-1.0 %, each inside the spread of the model's own means of seven runs. At 1e-4 those RTL
runs lost 66 of 596 NAKs (the model: 9 % of them) and timed out 10.4 times per run (the
model: 8.1). Real 25 Gb/s links run at 1e-12 or better, where a 1 KiB frame is hit once in
10**8 and none of this shows.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ndpdimm.cosim.golden.numerics import accumulate_bits
from ndpdimm.hw.descriptors import RELAYOUT_COUNT_BITS, Opcode
from ndpdimm.hw.link.formats import BLOCK_BITS, SYNC_BITS, WORD_BYTES, LinkConfig, frame_flits
from ndpdimm.hw.link.transaction import DRAM_SPACE
from ndpdimm.hw.memory.port import BURST_BYTES, Status

if TYPE_CHECKING:
    from ndpdimm.cosim.golden.core import CoreModel
    from ndpdimm.hw.memory.dram import DramOrganization

__all__ = ["LinkFabric", "LinkedDimm", "relayout_moves", "RELAYOUT_CHECK_CYCLES", "RELAYOUT_PACKET_CYCLES",
           "HOP_CYCLES", "HOP_WORD_CYCLES",
           "DISPATCH_CYCLES", "TARGET_PACKET_CYCLES", "REMOTE_ATOMIC_PACKET_CYCLES",
           "REMOTE_ATOMIC_WORD_CYCLES", "ATOMIC_PACKET_CYCLES",
           "WRITE_WORD_CYCLES", "ATOMIC_WORD_CYCLES", "DRAM_WORD_CYCLES", "DRAM_PACKET_CYCLES",
           "MAX_BER", "NAK_ROUND_TRIP_CYCLES", "DESCRAMBLER_REACH_BITS", "LINK_COUNTERS",
           "check_ber", "check_seed", "frame_bits", "frame_error_probability",
           "expected_goodput", "stream_goodput"]

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
#: A RELAYOUT's checks (the unit's bit-serial division of n_blocks by the group size, 27, and
#: the command processor's hand-over): 30 cycles on the RTL for a member with nothing to send.
RELAYOUT_CHECK_CYCLES = RELAYOUT_COUNT_BITS + 6
#: Per packet of a relayout block sent to another DIMM, besides the remote DRAM write: fitted to
#: the three-core RTL system (striped -> localized and back, 64 B x 20, 512 B x 10, 2 KiB x 16
#: blocks: 37, 41 and 2 x 39 cycles per block more than the warm-row write). The receiver's
#: rows are not open when a block arrives (the constants above are for warm rows), and the
#: unit hands each block from DMA completion to the link and its completion back.
RELAYOUT_PACKET_CYCLES = 39

# ---- bit errors (see the module docstring, "Bit errors") ----------------------------------
#: Largest bit-error rate the fabric takes. Well past it nothing gets through (a 1 KiB frame is
#: 9 kbit: at 1e-2 it arrives intact with probability e^-90) and the RTL was measured to 1e-4.
MAX_BER = 1e-2
#: From a bad frame's last flit leaving the transmitter to the transmitter acting on the NAK, at
#: the 2-cycle channel of the RTL benches. Built from the link layer's documented cycle
#: behaviour (``hw/link/layer.py``): one way through PHY, lanes and channel is about 12 cycles
#: (the RTL's 25-cycle latency of a 64 B packet, ``bench/results/dimm_link.json``, less the
#: link layer's 3 + 2 cycles, the packet's 4 beats and its two flit slots); the receiver checks
#: the CRC on the last flit and has its NAK on ``phy_tx`` 3 cycles later (as an ack: t + 1,
#: t + 3), half a flit slot for the PHY to take it, 12 cycles back, 2 cycles for the
#: transmitter to raise the replay: about 30, and its issue pipeline (issue, ``s1``, ``out``)
#: decides the next frame about 2 cycles ahead of the wire. Only whole frames count: for 1 KiB
#: frames anything under 40 cycles gives the one frame in flight the RTL resends.
NAK_ROUND_TRIP_CYCLES = 32
#: How far a line error reaches after the lane's self-synchronous descrambler (x^58 + x^39 + 1):
#: a flipped bit flips its copies 39 and 58 bits later too, so the last 58 bits of a lane's
#: previous block can damage a one-flit NAK or a RESYNC as well as its own 66 bits. (The RTL
#: link bench at 1e-4 lost 66 of 596 NAKs, 11 %: a hit on 8 x 66 bits explains 5 %, on
#: 8 x (66 + 58) bits 9 %.) A data frame's first flit is reached the same way, but from the
#: frame before it, which fails too: the frame behind it is replayed anyway.
DESCRAMBLER_REACH_BITS = 58
#: Per link direction ``"i->j"``: the transmitter's ``frames_sent`` (DATA frames, first
#: transmissions and replays), ``replays`` (RESYNCs sent) and ``timeouts`` and the receiver's
#: ``crc_errors`` and ``naks_sent`` (the names of ``TX_COUNTERS`` / ``RX_COUNTERS`` in
#: ``hw/link/layer.py``), plus ``bytes`` (payload delivered, once), ``wire_cycles`` (the
#: frames' own time on the wire, once) and ``replay_cycles`` (link time lost to errors: the bad
#: frame, the frames in flight behind it, the RESYNC and the wait for the NAK or the timeout).
LINK_COUNTERS = ("frames_sent", "bytes", "wire_cycles", "crc_errors", "naks_sent", "replays",
                 "timeouts", "replay_cycles")


def check_ber(ber: float, name: str = "ber") -> float:
    """``ber`` as a float if it is a real number in ``[0, MAX_BER)``; else ``ValueError``."""
    if not isinstance(ber, numbers.Real) or isinstance(ber, bool) or not 0 <= ber < MAX_BER:
        raise ValueError(f"{name} must be a number in [0, {MAX_BER:g}), got {ber!r}")
    return float(ber)


def check_seed(seed: int, name: str = "seed") -> int:
    """``seed`` if it is a non-negative integer (a numpy Generator seed); else ``ValueError``."""
    if not isinstance(seed, numbers.Integral) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"{name} must be a non-negative integer, got {seed!r}")
    return int(seed)


def frame_bits(payload_bytes: int, config: LinkConfig | None = None) -> int:
    """Bits a frame carrying ``payload_bytes`` puts on the wire: its flits, 66 bits per lane each
    (64b/66b: the sync header is on the wire too, and a flipped one is caught as well)."""
    c = LinkConfig() if config is None else config
    return frame_flits(payload_bytes, c.flit_bytes) * c.lanes * (BLOCK_BITS + SYNC_BITS)


def _recovery_bits(c: LinkConfig) -> int:
    """Line bits whose errors damage a NAK (one-flit frame) or a RESYNC flit."""
    return c.lanes * (BLOCK_BITS + SYNC_BITS + DESCRAMBLER_REACH_BITS)


def frame_error_probability(bits: int, ber: float) -> float:
    """``1 - (1 - ber) ** bits``, without the rounding error of the plain form at small ``ber``."""
    return -math.expm1(bits * math.log1p(-ber)) if ber else 0.0


def _expected_frame_cycles(payload_bytes: int, ber: float, config: LinkConfig) -> float:
    """Expected link time of one frame of a back-to-back stream with its replays: its own time
    plus, per failed attempt (``p / (1 - p)`` of them on average), the penalty of
    :meth:`LinkFabric._hop`."""
    c = config
    flit = c.flit_cycles
    frame = frame_flits(payload_bytes, c.flit_bytes) * flit
    p = frame_error_probability(frame_bits(payload_bytes, c), ber)
    if p == 0:
        return frame
    p1 = frame_error_probability(_recovery_bits(c), ber)
    wait = max(NAK_ROUND_TRIP_CYCLES, math.ceil(NAK_ROUND_TRIP_CYCLES / frame) * frame)
    penalty = (frame + flit + (1 - p1) ** 2 * wait + p1 * c.replay_timeout
               + (1 - p1) * p1 * (c.replay_timeout + NAK_ROUND_TRIP_CYCLES))
    return frame + p / (1 - p) * penalty


def expected_goodput(ber: float, payload_bytes: int = 1024, config: LinkConfig | None = None) -> float:
    """Expected goodput (fraction of the raw rate) of a back-to-back stream of frames of
    ``payload_bytes`` over one link at ``ber``, in the fabric's error model."""
    c = LinkConfig() if config is None else config
    return payload_bytes / _expected_frame_cycles(payload_bytes, check_ber(ber), c) \
        / c.raw_bytes_per_cycle


def stream_goodput(ber: float, payload_bytes: int = 1024, packets: int = 60, seed: int = 0,
                   config: LinkConfig | None = None) -> tuple[float, dict[str, int | float]]:
    """The RTL link bench's BER stream (``bench/link.py``: ``packets`` back-to-back frames
    of ``payload_bytes`` over one link, drained at once; goodput between the delivery of packet
    ``packets // 4`` and the last) through a :class:`LinkFabric` hop at ``ber``, ``seed``.
    Returns ``(goodput fraction of the raw rate, the link's counters)``."""
    c = LinkConfig() if config is None else config
    fabric = LinkFabric(2, c, ber=ber, seed=seed)
    held = fabric._hop(0, 1, [payload_bytes] * packets)
    k0 = packets // 4
    steady = payload_bytes * (packets - k0 - 1) / sum(held[k0 + 1:])
    return steady / c.raw_bytes_per_cycle, fabric.counters()["0->1"]


def relayout_moves(fields: Mapping[str, int]) -> list[tuple[int, int, int, int]]:
    """The blocks one RELAYOUT moves when every member of its group runs ``fields``
    (``hw/link/relayout.py``): ``(from DIMM, from address, to DIMM, to address)`` per block, in
    block order (block ``k`` of ``n_blocks``; member ``j`` is DIMM ``group_base + j``)."""
    D, base, t, B = fields["group_dimms"], fields["group_base"], fields["target"], fields["block_bytes"]
    src, dst = fields["src"], fields["dst"]
    moves = []
    for k in range(fields["n_blocks"]):
        if fields["to_localized"]:
            moves.append((base + k % D, src + (k // D) * B, base + t, dst + k * B))
        else:
            moves.append((base + t, src + k * B, base + k % D, dst + (k // D) * B))
    return moves


def _striped_blocks(fields, member: int) -> int:
    """Blocks member ``member`` holds of a tensor striped over the RELAYOUT's group."""
    quo, rem = divmod(fields["n_blocks"], fields["group_dimms"])
    return quo + (member < rem)


class LinkedDimm(Protocol):
    """What the fabric uses of a DIMM's model (``cosim.model.backend.ModelBackend`` is one; the
    link sits below the model backend, so it names the shape, not the class): the functional
    core (SRAM, DRAM, window), the DRAM organisation, ``load`` into the DRAM, and the byte
    ranges of SRAM and DRAM whose contents are unknown (``remove``, ``add``, ``overlap``)."""

    core: CoreModel
    org: DramOrganization
    unknown_sram: Any
    unknown_dram: Any

    def load(self, addr: int, data: bytes) -> None: ...


class LinkFabric:
    """The DIMM-Link chain of a model-backend system (see the module docstring)."""

    def __init__(self, n_dimms: int, config: LinkConfig | None = None, ber: float = 0.0,
                 seed: int = 0) -> None:
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or not 1 <= n_dimms <= 16:
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        if config is not None and not isinstance(config, LinkConfig):
            raise ValueError(f"config must be a LinkConfig, got {config!r}")
        self.ber = check_ber(ber)
        self.seed = check_seed(seed)
        self.n_dimms = n_dimms
        self.config = LinkConfig() if config is None else config
        self.backends = [None] * n_dimms
        self._rng = np.random.default_rng(self.seed)
        #: a NAK (one-flit frame) or a RESYNC (control flit) damaged on its way
        self._p_recovery = frame_error_probability(_recovery_bits(self.config), self.ber)
        self.reset_counters()

    # ---- error counters ---------------------------------------------------------------------
    def reset_counters(self) -> None:
        """Every link direction's counters back to zero (the error process goes on where it was)."""
        self._counters = {f"{a}->{b}": dict.fromkeys(LINK_COUNTERS, 0)
                          for i in range(self.n_dimms - 1) for a, b in ((i, i + 1), (i + 1, i))}

    def counters(self) -> dict[str, dict[str, int | float]]:
        """Per link direction (``"0->1"``, ``"1->0"``, ...): :data:`LINK_COUNTERS` (a JSON-able
        copy; cycles rounded to 0.01). The transmitter of ``"i->j"`` is DIMM i's port towards j,
        its receiver DIMM j's; the NAKs of ``naks_sent`` travel on ``"j->i"``."""
        return {k: {n: (round(float(v), 2) if n.endswith("cycles") else int(v))
                    for n, v in cnt.items()} for k, cnt in self._counters.items()}

    def _hop(self, a: int, b: int, payloads, pacing=None) -> list:
        """Carry one frame per payload (bytes) over link ``a -> b``, frame ``i + 1`` starting
        ``pacing[i + 1]`` cycles after frame ``i`` (default: back to back): count them, draw their
        bit errors, and return the link time each frame holds - its own flits plus, per failed
        attempt, the go-back-N penalty (module docstring, "Bit errors")."""
        c, cnt = self.config, self._counters[f"{a}->{b}"]
        flit = c.flit_cycles
        held = [frame_flits(n, c.flit_bytes) * flit for n in payloads]
        pacing = held if pacing is None else pacing
        cnt["frames_sent"] += len(held)
        cnt["bytes"] += sum(payloads)
        cnt["wire_cycles"] += sum(held)
        if not self.ber:
            return held
        rtt, timeout, p1 = NAK_ROUND_TRIP_CYCLES, c.replay_timeout, self._p_recovery
        frame = list(held)
        bits = [frame_bits(n, c) for n in payloads]
        # failed attempts before the good one: geometric, drawn by inversion (no overflow)
        log_p = np.array([math.log1p(-math.exp(n * math.log1p(-self.ber))) for n in bits])
        fails = np.floor(np.log1p(-self._rng.random(len(held))) / log_p)
        for i in np.flatnonzero(fails):
            k = fails[i]
            # the frames the transmitter started behind the bad one before the NAK came back
            # (it acts at the end of the frame it is sending), and when that one ends
            remaining = len(held) - 1 - i
            nxt = pacing[i + 1] if remaining else 0.0
            in_flight = min(math.ceil((rtt + frame[i]) / nxt) - 1, remaining) if remaining else 0
            wait = max(rtt, in_flight * nxt - frame[i] + frame[i + in_flight]) if in_flight else rtt
            # recovery fails when the NAK (back) or the RESYNC (out) is hit: the transmitter's
            # timeout, or the receiver's NAK again replay_timeout after the first
            nak_lost = self._binomial(k, p1)
            resync_lost = self._binomial(k - nak_lost, p1)
            normal = k - nak_lost - resync_lost
            penalty = (k * (frame[i] + flit) + normal * wait + nak_lost * timeout
                       + resync_lost * (timeout + rtt))
            held[i] += penalty
            cnt["frames_sent"] += k * (1 + in_flight)
            cnt["crc_errors"] += k
            cnt["naks_sent"] += k + resync_lost
            cnt["replays"] += k + resync_lost
            cnt["timeouts"] += nak_lost
            cnt["replay_cycles"] += penalty
        return held

    def _binomial(self, n: float, p: float) -> float:
        if n <= 0 or p == 0:
            return 0.0
        if n < 1 << 62:
            return float(self._rng.binomial(int(n), p))
        return math.floor(n * p)    # beyond any real run: the mean

    @staticmethod
    def _finish(stages, buffers) -> float:
        """When the last packet leaves the last stage. ``stages[s][i]``: packet i's time in stage s
        (in order: each stage one packet at a time, store-and-forward); stage s may start packet
        i only when stage s + 1 has taken packet ``i - buffers[s]`` (its receive buffer; None:
        unbounded)."""
        n = len(stages[0])
        start = [[0.0] * n for _ in stages]
        done = [0.0] * len(stages)
        for i in range(n):
            t = 0.0
            for s, times in enumerate(stages):
                t = max(t, done[s])
                room = buffers[s]
                if room is not None and i >= room:
                    t = max(t, start[s + 1][i - room])
                start[s][i] = t
                t = done[s] = t + times[i]
        return done[-1]

    def _carry(self, src: int, dest: int, out, back, target) -> float:
        """Carry a transfer's packets from ``src`` to ``dest`` hop by hop (frames of ``out[i]``
        payload bytes), through the target (``target[i]`` cycles) and their answers back
        (``back[i]``): count them on every link crossed and return the time the replays add to
        the transfer."""
        if src == dest:                 # its own router: no link crossed
            return 0.0
        c = self.config
        step = 1 if dest > src else -1
        path = list(range(src, dest, step))
        # the packets follow each other at the pace of the slowest stage (as in _link_cycles)
        pacing = [max(frame_flits(o, c.flit_bytes) * c.flit_cycles, t,
                      frame_flits(r, c.flit_bytes) * c.flit_cycles)
                  for o, t, r in zip(out, target, back)]
        stages = [self._hop(a, a + step, out, pacing) for a in path]
        n_out = len(stages)
        stages.append(list(target))
        stages += [self._hop(a + step, a, back, pacing) for a in reversed(path)]
        if not self.ber:
            return 0.0

        def room(payloads):
            return max(1, c.rx_buffer_flits // max(frame_flits(n, c.flit_bytes) for n in payloads))

        # each hop's receiver holds rx_buffer_flits; the target's answers queue without limit
        buffers = [room(out)] * n_out + [None] + [room(back)] * (len(path) - 1) + [None]
        flit = c.flit_cycles
        clean = ([[frame_flits(n, c.flit_bytes) * flit for n in out]] * n_out + [list(target)]
                 + [[frame_flits(n, c.flit_bytes) * flit for n in back]] * len(path))
        return self._finish(stages, buffers) - self._finish(clean, buffers)

    def attach(self, dimm_id: int, backend: LinkedDimm) -> None:
        if not 0 <= dimm_id < self.n_dimms:
            raise ValueError(f"dimm_id must be 0..{self.n_dimms - 1}, got {dimm_id!r}")
        self.backends[dimm_id] = backend

    # ---- descriptor semantics -----------------------------------------------------------
    @staticmethod
    def _kind(f) -> str:
        if f["opcode"] == Opcode.ATOMIC_ADD:
            return "atomic_int32" if f["int32"] else "atomic_fp32"
        return "read" if f["read"] else "write"

    def _split(self, n_bytes: int) -> list:
        """(offset, bytes) of each packet a transfer of ``n_bytes`` is cut into."""
        step = self.config.max_payload
        return [(off, min(step, n_bytes - off)) for off in range(0, n_bytes, step)]

    def _packets(self, f):
        """(remote address, local address, bytes) of each packet."""
        return [(f["remote"] + off, f["sram"] + off, n) for off, n in self._split(f["n_bytes"])]

    def _packet_status(self, target, kind, remote, n) -> Status:
        if remote & DRAM_SPACE:
            addr = remote - DRAM_SPACE
            lo, hi = target.core.window
            ok = (kind == "write" and addr % BURST_BYTES == 0 and n % BURST_BYTES == 0 and
                  addr >= lo and addr + n <= hi and addr + n <= target.org.capacity_bytes)
        else:
            ok = remote % WORD_BYTES == 0 and remote + n <= target.core.S
        return Status.OK if ok else Status.REMOTE_RANGE

    def status(self, src: int, link_id: int, f: Mapping[str, int]) -> Status:
        """The completion code of link descriptor ``f`` (decoded fields) issued by DIMM ``src``
        whose ``LINK_ID`` register holds ``link_id``."""
        n_dimms = link_id >> 4 & 0x1F
        here = self.backends[src]
        if f["dest"] >= n_dimms or f["dest"] >= self.n_dimms:
            return Status.BAD_FIELD
        if (f["sram"] | f["remote"] | f["n_bytes"]) % WORD_BYTES:
            return Status.MISALIGNED
        if f["sram"] + f["n_bytes"] > here.core.S:
            return Status.SRAM_RANGE
        target, kind = self.backends[f["dest"]], self._kind(f)
        for remote, _, n in self._packets(f):
            code = self._packet_status(target, kind, remote, n)
            if code != Status.OK:
                return code
        return Status.OK

    def apply(self, src: int, f: Mapping[str, int]) -> None:
        """The effect of ``f`` (whose status may be ``REMOTE_RANGE``: refused packets do nothing).
        Bytes a timing-only model (``functional=False``) does not know stay unknown where they
        are copied to."""
        here, target, kind = self.backends[src], self.backends[f["dest"]], self._kind(f)
        for remote, local, n in self._packets(f):
            if self._packet_status(target, kind, remote, n) != Status.OK:
                continue
            if kind == "read":
                src_unknown, dst_unknown, lo, delta = (target.unknown_sram, here.unknown_sram,
                                                       remote, local - remote)
            elif remote & DRAM_SPACE:
                src_unknown, dst_unknown, lo, delta = (here.unknown_sram, target.unknown_dram,
                                                       local, remote - DRAM_SPACE - local)
            else:
                src_unknown, dst_unknown, lo, delta = (here.unknown_sram, target.unknown_sram,
                                                       local, remote - local)
            carried = src_unknown.overlap(lo, lo + n)
            if not kind.startswith("atomic"):   # a sum stays unknown where either operand was
                dst_unknown.remove(lo + delta, lo + delta + n)
            for a, b in carried:
                dst_unknown.add(a + delta, b + delta)
            if kind == "read":
                here.core.sram[local:local + n] = target.core.sram[remote:remote + n]
            elif remote & DRAM_SPACE:
                target.load(remote - DRAM_SPACE, bytes(here.core.sram[local:local + n]))
            elif kind == "write":
                target.core.sram[remote:remote + n] = here.core.sram[local:local + n]
            else:
                old = np.frombuffer(bytes(target.core.sram[remote:remote + n]), dtype="<u4")
                new = np.frombuffer(bytes(here.core.sram[local:local + n]), dtype="<u4")
                summed = accumulate_bits(old, new, is_int=kind == "atomic_int32")
                target.core.sram[remote:remote + n] = np.asarray(summed, dtype="<u4").tobytes()

    def _target_cycles(self, kind: str, remote: int, n_bytes: int, hops: int) -> float:
        """The target's time for one packet of ``n_bytes``."""
        words = n_bytes // WORD_BYTES
        if remote & DRAM_SPACE:
            return DRAM_PACKET_CYCLES + DRAM_WORD_CYCLES * words
        if kind.startswith("atomic"):
            if hops:
                return REMOTE_ATOMIC_PACKET_CYCLES + REMOTE_ATOMIC_WORD_CYCLES * words
            return ATOMIC_PACKET_CYCLES + ATOMIC_WORD_CYCLES * words
        return TARGET_PACKET_CYCLES + WRITE_WORD_CYCLES * words

    def cycles(self, src: int, f: Mapping[str, int], status: Status) -> int:
        """Predicted ``CQ_CYCLES`` of ``f`` (see the module docstring). Each call carries ``f``'s
        frames over the links it crosses: they are counted, and at ``ber > 0`` their bit errors
        are drawn and the replays' time added (:meth:`_carry`)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED, Status.SRAM_RANGE) or f["n_bytes"] == 0:
            return 1
        return max(1, round(self._link_cycles(src, f) + self._carry_descriptor(src, f, status)))

    def _carry_descriptor(self, src: int, f, status: Status = Status.OK) -> float:
        """:meth:`_carry` of link descriptor ``f``'s packets: a write or atomic add sends its
        payload and gets a COMPLETION (header only) back; a read sends a READ_REQUEST (header
        only) and gets the data back (none for a packet the target refuses)."""
        dest, kind = f["dest"], self._kind(f)
        if dest == src:
            return 0.0
        hops = abs(dest - src)
        packets = self._packets(f)
        target = [self._target_cycles(kind, remote, n, hops) for remote, _, n in packets]
        if kind == "read":
            answered = [n if status == Status.OK or self._packet_status(
                self.backends[dest], kind, remote, n) == Status.OK else 0
                for remote, _, n in packets]
            return self._carry(src, dest, [0] * len(packets), answered, target)
        return self._carry(src, dest, [n for _, _, n in packets], [0] * len(packets), target)

    def _link_cycles(self, src: int, f) -> float:
        """The error-free time of a link descriptor that sends something (module docstring)."""
        c, kind = self.config, self._kind(f)
        hops = abs(f["dest"] - src)
        packets = self._packets(f)
        first = packets[0][2]
        # the first packet, store-and-forward through every hop, and the answer's way back
        total = (DISPATCH_CYCLES + hops * (HOP_CYCLES + HOP_WORD_CYCLES * first // WORD_BYTES)
                 + self._target_cycles(kind, packets[0][0], first, hops))
        # the others follow at the pace of the slower of the wire and the target
        for remote, _, n in packets[1:]:
            frame = frame_flits(n, c.flit_bytes) * c.flit_cycles if hops else 0
            total += max(frame, self._target_cycles(kind, remote, n, hops))
        return total

    # ---- RELAYOUT -------------------------------------------------------------------------
    @staticmethod
    def _member(src: int, f) -> int:
        return src - f["group_base"]

    def _relayout_blocks(self, src: int, f):
        """This member's moves ``(k, from address, to DIMM, to address)``."""
        return [(k, at, to, to_at) for k, (frm, at, to, to_at) in enumerate(relayout_moves(f))
                if frm == src]

    def relayout_status(self, src: int, link_id: int, f: Mapping[str, int]) -> Status:
        """The completion code of RELAYOUT ``f`` issued on member DIMM ``src``."""
        here = self.backends[src]
        n_dimms = min(link_id >> 4 & 0x1F, self.n_dimms)
        D, t, B, n = f["group_dimms"], f["target"], f["block_bytes"], f["n_blocks"]
        me = self._member(src, f)
        if not 1 <= D <= 16 or t >= D or not 0 <= me < D or f["group_base"] + D > n_dimms or B == 0:
            return Status.BAD_FIELD
        if B % BURST_BYTES or f["src"] % BURST_BYTES or f["dst"] % BURST_BYTES or \
                f["staging"] % WORD_BYTES:
            return Status.MISALIGNED
        count = _striped_blocks(f, me) if f["to_localized"] else (n if me == t else 0)
        extent = n if f["to_localized"] else _striped_blocks(f, 0)
        lo, hi = here.core.window
        if f["src"] < lo or f["src"] + count * B > hi or f["dst"] + extent * B > here.org.capacity_bytes:
            return Status.DRAM_RANGE
        if f["staging"] + 2 * B > here.core.S:
            return Status.SRAM_RANGE
        for _, _, to, to_at in self._relayout_blocks(src, f):
            for off, n_packet in self._split(B):
                if self._packet_status(self.backends[to], "write", DRAM_SPACE | (to_at + off),
                                       n_packet) != Status.OK:
                    return Status.REMOTE_RANGE
        return Status.OK

    def relayout_apply(self, src: int, f: Mapping[str, int], status: Status) -> None:
        """This member's blocks into the receivers' DRAM (up to the first refused block)."""
        here, B, staging = self.backends[src], f["block_bytes"], f["staging"]
        if status not in (Status.OK, Status.REMOTE_RANGE):
            return
        for j, (_, at, to, to_at) in enumerate(self._relayout_blocks(src, f)):
            receiver = self.backends[to]
            data = here.core.dram.read(at, B)
            buf = staging + (j % 2) * B
            here.core.sram[buf:buf + B] = data
            here.unknown_sram.remove(buf, buf + B)
            for a, b in here.unknown_dram.overlap(at, at + B):
                here.unknown_sram.add(a - at + buf, b - at + buf)
            refused = False
            for off, n_packet in self._split(B):
                if self._packet_status(receiver, "write", DRAM_SPACE | (to_at + off),
                                       n_packet) != Status.OK:
                    refused = True
                    continue
                receiver.core.dram.write(to_at + off, data[off:off + n_packet])
                receiver.unknown_dram.remove(to_at + off, to_at + off + n_packet)
                for a, b in here.unknown_dram.overlap(at + off, at + off + n_packet):
                    receiver.unknown_dram.add(a - at + to_at, b - at + to_at)
            if refused:
                # the DMA of the next block may have been under way: staging is undefined
                here.unknown_sram.add(staging, staging + 2 * B)
                return

    def _dram_write_cycles(self, n_bytes: int) -> float:
        """A receiver writing one block into its DRAM, one packet at a time."""
        return sum(self._target_cycles("write", DRAM_SPACE, n, 0) for _, n in self._split(n_bytes))

    def relayout_cycles(self, src: int, f: Mapping[str, int], status: Status,
                        dma_cycles: Callable[[int, int], float]) -> int:
        """Predicted ``CQ_CYCLES`` of RELAYOUT ``f`` on member ``src``; ``dma_cycles(address,
        n_bytes)`` is this DIMM's DRAM -> SRAM DMA time (its performance model)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED):
            return 1
        blocks = self._relayout_blocks(src, f)
        if status != Status.OK or not blocks:
            return RELAYOUT_CHECK_CYCLES
        B = f["block_bytes"]
        packets = len(self._split(B))
        link = []
        for _, _, to, to_at in blocks:
            # each block is one remote DRAM write: its frames are carried (counted, their errors
            # drawn) and its replays delay it like a LINK_SEND's
            write = {"opcode": Opcode.LINK_SEND, "read": 0, "int32": 0, "dest": to,
                     "remote": DRAM_SPACE | to_at, "sram": f["staging"], "n_bytes": B}
            link.append(max(1, round(self._link_cycles(src, write))) - DISPATCH_CYCLES
                        + (RELAYOUT_PACKET_CYCLES * packets if to != src else 0)
                        + self._carry_descriptor(src, write))
        dma = [dma_cycles(at, B) - DISPATCH_CYCLES for _, at, _, _ in blocks]
        walk = RELAYOUT_CHECK_CYCLES + dma[0]
        for j in range(len(blocks) - 1):
            walk += max(dma[j + 1], link[j])
        walk += link[-1]
        if f["to_localized"]:
            # every member's blocks land in the target's DRAM one packet at a time, and those
            # from either side share the link into the target
            c, D, t = self.config, f["group_dimms"], f["target"]
            left = sum(_striped_blocks(f, j) for j in range(t))
            right = sum(_striped_blocks(f, j) for j in range(t + 1, D))
            if self.ber:    # the other senders' replays on the shared link: their expectation
                wire = sum(_expected_frame_cycles(n, self.ber, c) for _, n in self._split(B))
            else:
                wire = sum(frame_flits(n, c.flit_bytes) * c.flit_cycles for _, n in self._split(B))
            write = self._dram_write_cycles(B) + RELAYOUT_PACKET_CYCLES * packets
            busy = max(f["n_blocks"] * write, max(left, right) * wire)
            back = abs(f["group_base"] + t - src) * HOP_CYCLES / 2
            walk = max(walk, RELAYOUT_CHECK_CYCLES + dma[0] + busy + back)
        return max(1, round(walk))
