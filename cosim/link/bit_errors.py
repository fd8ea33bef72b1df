"""Bit errors on the model backend's DIMM-Link: the error model, the links' counters, goodput against the RTL.

:class:`LinkErrors` is the chain of links a :class:`~ndpdimm.cosim.link.model.LinkFabric`
carries its frames over: it counts them per link direction and, at ``ber > 0``, draws their bit
errors and returns the link time each frame holds with its replays (:meth:`LinkErrors.hop`),
and what the replays add to a transfer's pipeline of hops and target (:meth:`LinkErrors.carry`).
At ``ber = 0`` it only counts: every time is the error-free one of ``cosim/link/timing.py``.
Its functions: the argument checks (:func:`check_ber`, :func:`check_seed`), a frame's bits on
the wire and its error probability, and the goodput of a back-to-back stream
(:func:`expected_goodput`, :func:`stream_goodput`).

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
  the model never corrupts data: :meth:`~ndpdimm.cosim.link.model.LinkFabric.apply` is the same at every BER; errors
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
the pipeline's finish with them minus without them to the calibrated error-free time
(``cosim/link/timing.py``), so at ``ber = 0`` every figure is what it was, and a stream paced
by its target (a 1 KiB SRAM write takes 47.8 cycles there, its frame 44.9 on the wire) hides
part of a replay in the receiver's buffer. RELAYOUT (``cosim/link/relayout.py``): each block
sent to another DIMM is carried the same way and its replays delay that block; the link into
the target that all senders share (to localized) is charged with the expected replays of
their frames.

Counters (:meth:`LinkErrors.counters`, :data:`LINK_COUNTERS`) count at every BER, per link
direction: ``frames_sent`` (first transmissions and replays, the frames in flight
included), ``crc_errors`` (one per failed attempt), ``naks_sent`` and ``replays`` (one more
each for a lost RESYNC), ``timeouts`` (the RTL's names), ``bytes`` and ``wire_cycles`` (each
frame once) and ``replay_cycles`` (the link time the failed attempts held). Not modelled:
errors on idle flits and acknowledgements, which in the RTL start NAK/RESYNC exchanges of a
flit or two each (and count in its ``naks_sent`` and ``replays``).

Against the RTL (``bench/results/dimm_link.json``: 60 back-to-back 1 KiB packets over one
link pair, bit errors both ways, goodput from the 16th delivery to the last):
:func:`stream_goodput` runs the same stream through one hop of the fabric's links and :func:`expected_goodput`
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
1e-6   0.9125 (0 / 0 / 0)          0.8957    0.898, 0.913 [0.872 0.913]  -1.6 %
1e-5   0.6824 (14 / 16 / 0)        0.7394    0.755, 0.769 [0.530 0.872]  +10.7 %
3e-5   0.5343 (37 / 43 / 0)        0.4491    0.480, 0.472 [0.305 0.668]  -10.2 %
1e-4   0.1074 (105 / 191 / 9)      0.0932    0.099, 0.096 [0.065 0.140]  -7.5 %
=====  ==========================  ========  ==========================  ========

(The RTL column is the bench's run at a1404b9. Its run at 454bb02, with the same link RTL
but other random draws in the bench, gave at 1e-6 one replay in the window, 0.8719 (91.9
cycles lost, the model's 92.4), 0.7659 at 1e-5 (model mean -1.4 %), 0.5058 at 3e-5 (-5.1 %)
and 0.0958 at 1e-4 (+3.7 %): one run's figure moves by 10 % and more between draws.)
The test holds what one draw supports: at 1e-7 and below the model's expectation is the
error-free figure; a run without a replay is the error-free figure, as the median of the
model's runs is; and every RTL figure lies inside the model's 5..95 % band of runs. Six more RTL runs per BER (the same bench, seeds 101..106: ``ndpdimm.bench.link._run(
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

import numpy as np

from ndpdimm.hw.link.formats import BLOCK_BITS, SYNC_BITS, LinkConfig, frame_flits

__all__ = ["MAX_BER", "NAK_ROUND_TRIP_CYCLES", "DESCRAMBLER_REACH_BITS", "LINK_COUNTERS",
           "check_ber", "check_seed", "frame_bits", "frame_error_probability",
           "expected_frame_cycles", "expected_goodput", "stream_goodput", "LinkErrors"]

# ---- bit errors (see the module docstring, "Bit errors") ----------------------------------
#: Largest bit-error rate the fabric takes. Well past it nothing gets through (a 1 KiB frame is
#: 9 kbit: at 1e-2 it arrives intact with probability e^-90) and the RTL was measured to 1e-4.
MAX_BER = 1e-2
#: From a bad frame's last flit leaving the transmitter to the transmitter acting on the NAK, at
#: the 2-cycle channel of the RTL benches. Built from the link layer's documented cycle
#: behaviour (``hw/link/layer.py``): one way through PHY, lanes and channel is about 12 cycles
#: (the RTL's 24-25-cycle latency of a 64 B packet, ``bench/results/dimm_link.json``, as the
#: lanes' random bit offsets fall, less the
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


def expected_frame_cycles(payload_bytes: int, ber: float, config: LinkConfig) -> float:
    """Expected link time of one frame of a back-to-back stream with its replays: its own time
    plus, per failed attempt (``p / (1 - p)`` of them on average), the penalty of
    :meth:`LinkErrors.hop`."""
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
    return payload_bytes / expected_frame_cycles(payload_bytes, check_ber(ber), c) \
        / c.raw_bytes_per_cycle


def stream_goodput(ber: float, payload_bytes: int = 1024, packets: int = 60, seed: int = 0,
                   config: LinkConfig | None = None) -> tuple[float, dict[str, int | float]]:
    """The RTL link bench's BER stream (``bench/link.py``: ``packets`` back-to-back frames
    of ``payload_bytes`` over one link, drained at once; goodput between the delivery of packet
    ``packets // 4`` and the last) through one hop of a fabric's links (:meth:`LinkErrors.hop`)
    at ``ber``, ``seed``. Returns ``(goodput fraction of the raw rate, the link's counters)``."""
    c = LinkConfig() if config is None else config
    links = LinkErrors(2, c, ber=ber, seed=seed)
    held = links.hop(0, 1, [payload_bytes] * packets)
    k0 = packets // 4
    steady = payload_bytes * (packets - k0 - 1) / sum(held[k0 + 1:])
    return steady / c.raw_bytes_per_cycle, links.counters()["0->1"]


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


class LinkErrors:
    """The links of a chain of ``n_dimms`` DIMMs as a fabric's frames see them: their counters
    per link direction and, at ``ber > 0``, their bit errors, drawn from a numpy Generator seeded
    with ``seed`` in the order frames are carried (module docstring). ``config`` (default
    ``LinkConfig()``) is the links' configuration."""

    def __init__(self, n_dimms: int, config: LinkConfig | None = None, ber: float = 0.0,
                 seed: int = 0) -> None:
        if config is not None and not isinstance(config, LinkConfig):
            raise ValueError(f"config must be a LinkConfig, got {config!r}")
        self.ber = check_ber(ber)
        self.seed = check_seed(seed)
        self.n_dimms = n_dimms
        self.config = LinkConfig() if config is None else config
        self._rng = np.random.default_rng(self.seed)
        #: a NAK (one-flit frame) or a RESYNC (control flit) damaged on its way
        self._p_recovery = frame_error_probability(_recovery_bits(self.config), self.ber)
        self.reset_counters()

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

    def hop(self, a: int, b: int, payloads, pacing=None) -> list:
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

    def carry(self, src: int, dest: int, out, back, target) -> float:
        """Carry a transfer's packets from ``src`` to ``dest`` hop by hop (frames of ``out[i]``
        payload bytes), through the target (``target[i]`` cycles) and their answers back
        (``back[i]``): count them on every link crossed and return the time the replays add to
        the transfer."""
        if src == dest:                 # its own router: no link crossed
            return 0.0
        c = self.config
        step = 1 if dest > src else -1
        path = list(range(src, dest, step))
        # the packets follow each other at the pace of the slowest stage (as in timing.link_cycles)
        pacing = [max(frame_flits(o, c.flit_bytes) * c.flit_cycles, t,
                      frame_flits(r, c.flit_bytes) * c.flit_cycles)
                  for o, t, r in zip(out, target, back)]
        stages = [self.hop(a, a + step, out, pacing) for a in path]
        n_out = len(stages)
        stages.append(list(target))
        stages += [self.hop(a + step, a, back, pacing) for a in reversed(path)]
        if not self.ber:
            return 0.0

        def room(payloads):
            return max(1, c.rx_buffer_flits // max(frame_flits(n, c.flit_bytes) for n in payloads))

        # each hop's receiver holds rx_buffer_flits; the target's answers queue without limit
        buffers = [room(out)] * n_out + [None] + [room(back)] * (len(path) - 1) + [None]
        flit = c.flit_cycles
        clean = ([[frame_flits(n, c.flit_bytes) * flit for n in out]] * n_out + [list(target)]
                 + [[frame_flits(n, c.flit_bytes) * flit for n in back]] * len(path))
        return _finish(stages, buffers) - _finish(clean, buffers)
