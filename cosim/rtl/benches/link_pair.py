"""cocotb bench of one DIMM-Link (Verilator): two ``LinkPort`` ends joined by behavioural channels.

DUT: :class:`ndpdimm.cosim.rtl.link_pair_top.LinkPair` (ports ``a`` and ``b``: link
layer + PHY + lanes each). Every cycle, at the falling clock edge, one
coroutine moves each end's ``serial_tx`` chunks through a
:class:`~ndpdimm.cosim.link.channel.LinkChannel` (latency, per-lane skew,
random bit offset, bit errors at ``LINK_BER``) to the other end's
``serial_rx``, offers packet beats on both ``tx_packet`` ports (random idle
cycles) and sets ``rx_packet.ready`` (random back-pressure); in the ReadOnly
phase that follows it records the handshakes that complete at the next rising
edge. The checker compares, per direction and in order, every packet
delivered with the one sent (header and payload bytes): exactly once, in
order, bit-exact.

Environment (defaults in brackets): ``LINK_LATENCY`` channel cycles [2],
``LINK_SKEW`` comma-separated extra cycles per lane [none], ``LINK_BER`` [0],
``LINK_IDLE`` sender idle probability [0], ``LINK_STALL`` receiver
back-pressure probability [0], ``LINK_PACKETS_AB`` / ``LINK_PACKETS_BA``
packets per direction [20 / 20], ``LINK_WORDS`` payload words per packet
(``r`` = random 0..max) [r], ``LINK_MAX_CYCLES`` [200000], ``LINK_STATS`` a
JSON file the tests add their figures to (``merge_stats``).
"""

import os
import random

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.link.channel import LinkChannel
from ndpdimm.cosim.link.frames import beats_to_packet, packet_beats
from ndpdimm.cosim.rtl.benches.streams import merge_stats, reset
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.link.formats import WORD_BYTES, LinkConfig, packet_beat_layout
from ndpdimm.hw.link.port import LINK_COUNTERS, PHY_COUNTERS

_BEAT = packet_beat_layout()
_LAST_BIT = _BEAT.size - 1
_FIRST_BIT = _BEAT.size - 2


def move_serial(channel: LinkChannel, tx, tx_valid, rx, rx_valid):
    """One cycle of one direction (call at the falling edge): ``tx``'s lane chunks through
    ``channel`` onto ``rx``."""
    bits, lanes = channel.chunk_bits, channel.lanes
    word, mask = int(tx.value), (1 << bits) - 1
    out, out_valid = channel.step([(word >> (bits * i)) & mask for i in range(lanes)],
                                  int(tx_valid.value))
    packed = 0
    for i, chunk in enumerate(out):
        packed |= chunk << (bits * i)
    rx.value = packed
    rx_valid.value = out_valid


def _env(name, default, cast=float):
    value = os.environ.get(name, "")
    return cast(value) if value != "" else default


class LinkBench:
    """Both ends, both channels and the per-cycle traffic loop."""

    def __init__(self, dut, *, seed=None, keep_mismatches=False):
        self.dut = dut
        # the checker's messages, kept instead of raised (the corrupted-model test reads them)
        self.mismatches = [] if keep_mismatches else None
        self.config = c = LinkConfig(**bench_params())
        self.rng = random.Random(cocotb.RANDOM_SEED if seed is None else seed)
        skew = os.environ.get("LINK_SKEW", "")
        skew = [int(x) for x in skew.split(",")] if skew else None
        latency = _env("LINK_LATENCY", 2, int)
        ber = _env("LINK_BER", 0.0)
        self.idle = _env("LINK_IDLE", 0.0)
        self.stall = _env("LINK_STALL", 0.0)
        self.channels = {
            d: LinkChannel(c.lanes, c.chunk_bits, latency=latency, skew=skew, ber=ber,
                           bit_offset=[self.rng.randrange(66) for _ in range(c.lanes)],
                           rng=random.Random(self.rng.random()))
            for d in ("ab", "ba")}
        self.ends = {"ab": (dut.a__tx_packet__valid, dut.a__tx_packet__payload, dut.a__tx_packet__ready,
                            dut.b__rx_packet__valid, dut.b__rx_packet__payload, dut.b__rx_packet__ready),
                     "ba": (dut.b__tx_packet__valid, dut.b__tx_packet__payload, dut.b__tx_packet__ready,
                            dut.a__rx_packet__valid, dut.a__rx_packet__payload, dut.a__rx_packet__ready)}
        self.serial = {"ab": (dut.a__serial_tx, dut.a__serial_tx_valid, dut.b__serial_rx,
                              dut.b__serial_rx_valid),
                       "ba": (dut.b__serial_tx, dut.b__serial_tx_valid, dut.a__serial_rx,
                              dut.a__serial_rx_valid)}
        self.queue = {"ab": [], "ba": []}          # beats lists of packets still to send
        self.sent = {"ab": [], "ba": []}           # (transaction, payload) in send order
        self.sent_cycle = {"ab": [], "ba": []}     # cycle each header beat was taken
        self.delivered = {"ab": [], "ba": []}      # (first cycle, last cycle, transaction, payload)
        self._pos = {"ab": 0, "ba": 0}
        self._partial = {"ab": [], "ba": []}
        self._partial_t0 = {"ab": 0, "ba": 0}
        self.cycle = 0
        self.up_cycle = None
        self.reset_request = False

    async def start(self):
        cocotb.start_soon(Clock(self.dut.clk, 1, unit="ns").start())
        idle = [self.dut.a__tx_packet__valid, self.dut.b__tx_packet__valid,
                self.dut.a__rx_packet__ready, self.dut.b__rx_packet__ready,
                self.dut.a__link_reset, self.dut.b__link_reset,
                self.dut.a__serial_rx_valid, self.dut.b__serial_rx_valid]
        await reset(self.dut, idle)
        cocotb.start_soon(self._loop())

    def random_packet(self, words=None):
        max_words = self.config.max_payload // WORD_BYTES
        n = self.rng.randint(0, max_words) if words is None else words
        return self.rng.getrandbits(128), self.rng.randbytes(n * WORD_BYTES)

    def send(self, direction, transaction, payload):
        self.sent[direction].append((transaction, payload))
        self.queue[direction].append(packet_beats(transaction, payload))

    def link_up(self) -> bool:
        return bool(int(self.dut.a__link_up.value) and int(self.dut.b__link_up.value))

    async def _loop(self):
        dut = self.dut
        while True:
            await FallingEdge(dut.clk)
            for d, ends in self.serial.items():
                move_serial(self.channels[d], *ends)
            offering = {}
            for d, (v, p, _, _, _, r_ready) in self.ends.items():
                q = self.queue[d]
                offer = bool(q) and self.rng.random() >= self.idle
                if offer:
                    p.value = q[0][self._pos[d]]
                v.value = int(offer)
                offering[d] = offer
                r_ready.value = int(self.rng.random() >= self.stall)
            dut.a__link_reset.value = int(self.reset_request)
            dut.b__link_reset.value = int(self.reset_request)
            await ReadOnly()
            if self.up_cycle is None and self.link_up():
                self.up_cycle = self.cycle
            for d, (_, _, t_ready, r_valid, r_payload, r_ready) in self.ends.items():
                if offering[d] and int(t_ready.value):
                    if self._pos[d] == 0:
                        self.sent_cycle[d].append(self.cycle)
                    self._pos[d] += 1
                    if self._pos[d] == len(self.queue[d][0]):
                        self.queue[d].pop(0)
                        self._pos[d] = 0
                if int(r_valid.value) and int(r_ready.value):
                    beat = int(r_payload.value)
                    if beat >> _FIRST_BIT & 1:
                        self._partial[d] = []
                        self._partial_t0[d] = self.cycle
                    self._partial[d].append(beat)
                    if beat >> _LAST_BIT & 1:
                        transaction, payload = beats_to_packet(self._partial[d])
                        self.delivered[d].append((self._partial_t0[d], self.cycle, transaction, payload))
                        mismatch = self._mismatch(d)
                        if mismatch and self.mismatches is None:
                            raise AssertionError(mismatch)
                        if mismatch:
                            self.mismatches.append(mismatch)
            self.cycle += 1

    def _mismatch(self, d) -> str | None:
        """The checker: how the packet just delivered in direction ``d`` differs from the one
        sent in its place (None: it is that packet)."""
        k = len(self.delivered[d]) - 1
        got = self.delivered[d][k][2:]
        if k >= len(self.sent[d]):
            return f"{d}: packet {k} delivered but only {len(self.sent[d])} sent"
        if got != self.sent[d][k]:
            return (f"{d}: packet {k} differs from the one sent "
                    f"({len(got[1])} vs {len(self.sent[d][k][1])} payload bytes)")
        return None

    async def wait_up(self, limit=20_000):
        for _ in range(limit):
            if self.up_cycle is not None:
                return
            await FallingEdge(self.dut.clk)
        raise AssertionError(f"link not up after {limit} cycles")

    async def wait_delivered(self, limit):
        want = {d: len(self.sent[d]) for d in self.sent}
        start = self.cycle
        while any(len(self.delivered[d]) < want[d] for d in want):
            if self.cycle - start > limit:
                raise AssertionError(f"not delivered after {limit} cycles: "
                                     f"{ {d: (len(self.delivered[d]), want[d]) for d in want} }; "
                                     f"counters {self.counters()}")
            await FallingEdge(self.dut.clk)

    def counters(self) -> dict:
        out = {}
        for end in ("a", "b"):
            for n in LINK_COUNTERS + tuple(f"phy_{p}" for p in PHY_COUNTERS):
                out[f"{end}.{n}"] = int(getattr(self.dut, f"{end}__{n}").value)
        return out

    def stats(self) -> dict:
        return {"cycles": self.cycle, "up_cycle": self.up_cycle,
                "packets": {d: len(self.delivered[d]) for d in self.delivered},
                "payload_bytes": {d: sum(len(p[3]) for p in self.delivered[d]) for d in self.delivered},
                "injected_bit_errors": {d: sum(ch.injected_errors) for d, ch in self.channels.items()},
                "bits_sent": {d: sum(ch.bits_sent(i) for i in range(self.config.lanes))
                              for d, ch in self.channels.items()},
                "counters": self.counters()}


def _words():
    w = os.environ.get("LINK_WORDS", "r")
    return None if w == "r" else int(w)


@cocotb.test()
async def traffic_test(dut):
    """Random packets both ways (sizes, idle, back-pressure, bit errors from the environment):
    every packet delivered exactly once, in order, bit-exact."""
    tb = LinkBench(dut)
    await tb.start()
    await tb.wait_up()
    for d, n in (("ab", _env("LINK_PACKETS_AB", 20, int)), ("ba", _env("LINK_PACKETS_BA", 20, int))):
        for _ in range(n):
            tb.send(d, *tb.random_packet(_words()))
    await tb.wait_delivered(_env("LINK_MAX_CYCLES", 200_000, int))
    for _ in range(50):                      # nothing more may arrive
        await FallingEdge(dut.clk)
    for d in tb.sent:
        assert len(tb.delivered[d]) == len(tb.sent[d]), f"{d}: extra packets delivered"
    merge_stats(os.environ.get("LINK_STATS"), "traffic", tb.stats())


@cocotb.test()
async def stream_test(dut):
    """``LINK_PACKETS_AB`` packets of ``LINK_WORDS`` words a -> b back to back: goodput in the
    steady state (payload bytes between the first quarter's last delivery and the last one)."""
    tb = LinkBench(dut)
    await tb.start()
    await tb.wait_up()
    n = _env("LINK_PACKETS_AB", 40, int)
    words = _words() or 2
    for _ in range(n):
        tb.send("ab", *tb.random_packet(words))
    await tb.wait_delivered(_env("LINK_MAX_CYCLES", 200_000, int))
    k0 = n // 4
    t0, t1 = tb.delivered["ab"][k0][1], tb.delivered["ab"][-1][1]
    payload = sum(len(p[3]) for p in tb.delivered["ab"][k0 + 1:])
    per_cycle = payload / (t1 - t0)
    s = tb.stats()
    s.update({"payload_bytes_per_packet": words * WORD_BYTES, "steady_bytes_per_cycle": per_cycle,
              "goodput_fraction_of_raw": per_cycle / tb.config.raw_bytes_per_cycle})
    merge_stats(os.environ.get("LINK_STATS"), f"stream_{words * WORD_BYTES}", s)


@cocotb.test()
async def latency_test(dut):
    """One packet of ``LINK_WORDS`` words (2 = 64 B) on an idle, up link: cycles from its header
    beat being taken at a to its last beat leaving b's ``rx_packet``."""
    tb = LinkBench(dut)
    await tb.start()
    await tb.wait_up()
    for _ in range(300):                     # let training traffic and acks settle
        await FallingEdge(dut.clk)
    words = _words() or 2
    tb.send("ab", *tb.random_packet(words))
    await tb.wait_delivered(5_000)
    cycles = tb.delivered["ab"][0][1] - tb.sent_cycle["ab"][0]
    s = tb.stats()
    s.update({"payload_bytes": words * WORD_BYTES, "latency_cycles": cycles,
              "channel_latency_cycles": _env("LINK_LATENCY", 2, int)})
    merge_stats(os.environ.get("LINK_STATS"), f"latency_{words * WORD_BYTES}", s)


@cocotb.test()
async def reset_test(dut):
    """Traffic, a link reset of both ends, training again, more traffic: all delivered."""
    tb = LinkBench(dut)
    await tb.start()
    await tb.wait_up()
    for _ in range(10):
        tb.send("ab", *tb.random_packet())
        tb.send("ba", *tb.random_packet())
    await tb.wait_delivered(50_000)
    tb.reset_request = True
    for _ in range(3):
        await FallingEdge(dut.clk)
    tb.reset_request = False
    tb.up_cycle = None
    await FallingEdge(dut.clk)
    await tb.wait_up()
    for _ in range(10):
        tb.send("ab", *tb.random_packet())
        tb.send("ba", *tb.random_packet())
    await tb.wait_delivered(50_000)
    assert tb.counters()["a.phy_link_down_events"] >= 1


@cocotb.test()
async def checker_catches_corrupted_model(dut):
    """The checker is not vacuous: an expectation with one payload bit flipped fails it, for
    that reason (the packet is delivered; a timeout or any other failure fails this test)."""
    tb = LinkBench(dut, keep_mismatches=True)
    await tb.start()
    await tb.wait_up()
    transaction, payload = tb.random_packet(3)
    tb.send("ab", transaction, payload)
    tb.sent["ab"][0] = (transaction, bytes([payload[0] ^ 1]) + payload[1:])
    await tb.wait_delivered(5_000)
    assert tb.mismatches == ["ab: packet 0 differs from the one sent (96 vs 96 payload bytes)"], (
        f"the checker did not report the corrupted packet: {tb.mismatches}")
    dut._log.info("checker reported the corrupted model as expected: %s", tb.mismatches[0])
