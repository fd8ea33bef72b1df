"""Amaranth-simulator tests of ``LinkPhy``: two ends joined by ``cosim/link_channel.LinkChannel``.

A ``LinkBench`` owns the two PHYs, the two channel directions (pumped by
background testbench processes), one monitor per receiving side (recording
every ``rx_flit`` beat with its cycle) and the flit drivers. The checks are
against what the drivers actually handed over (handshakes), in order:
bit-exact DATA, RESYNC, and ERROR beats only where the channel damaged a beat.
Small configurations (2 or 4 lanes, short lock and training) keep the run
short; one test runs the default 8-lane configuration.
"""

import gc
import random
import warnings

import pytest
from amaranth.hdl import Module, UnusedElaboratable
from amaranth.sim import Simulator

from ndpdimm.cosim.link.channel import LinkChannel, pump
from ndpdimm.hw.link.formats import FlitKind, LinkConfig
from ndpdimm.hw.link.phy import LinkPhy, train_period

SMALL = LinkConfig(lanes=2, max_payload=256, lock_blocks=16, train_count=4, deskew_blocks=4, align_period=16)
FOUR = LinkConfig(lanes=4, max_payload=256, lock_blocks=16, train_count=4, deskew_blocks=4, align_period=64)


class LinkBench:
    """Two LinkPhy ends ``a`` and ``b``; ``ab`` carries a -> b, ``ba`` carries b -> a."""

    def __init__(self, config, *, seed=0, ab=None, ba=None):
        self.config = config
        self.rng = random.Random(seed)
        self.a, self.b = LinkPhy(config), LinkPhy(config)
        top = Module()
        top.submodules.a, top.submodules.b = self.a, self.b
        self.ab = LinkChannel(config.lanes, config.chunk_bits, rng=random.Random(seed + 1), **(ab or {}))
        self.ba = LinkChannel(config.lanes, config.chunk_bits, rng=random.Random(seed + 2), **(ba or {}))
        self.received = {"a": [], "b": []}          # (cycle, kind, data or None)
        self.sent = {"a": [], "b": []}              # (cycle, kind, data or None) at the handshake
        self.sim = Simulator(top)
        self.sim.add_clock(1e-9)
        self.sim.add_testbench(self._pump(self.ab, self.a, self.b), background=True)
        self.sim.add_testbench(self._pump(self.ba, self.b, self.a), background=True)
        self.sim.add_testbench(self._monitor("a", self.a), background=True)
        self.sim.add_testbench(self._monitor("b", self.b), background=True)

    def _pump(self, channel, tx, rx):
        async def process(ctx):
            await pump(ctx, channel, tx.serial_tx, tx.serial_tx_valid, rx.serial_rx, rx.serial_rx_valid)
        return process

    def _monitor(self, name, phy):
        async def process(ctx):
            cycle = 0
            while True:
                _, _, valid, payload = await ctx.tick().sample(phy.rx_flit.valid, phy.rx_flit.payload)
                cycle += 1
                if valid:
                    kind = FlitKind(payload.kind)
                    self.received[name].append((cycle, kind, payload.data if kind == FlitKind.DATA else None))
        return process

    def random_flit(self, resync_prob=0.15):
        if self.rng.random() < resync_prob:
            return FlitKind.RESYNC, None
        return FlitKind.DATA, self.rng.getrandbits(self.config.flit_bits)

    def run(self, *testbenches):
        for bench in testbenches:
            self.sim.add_testbench(bench)
        self.sim.run()


class Clock:
    """Cycle count of one testbench process (all processes start at 0 and tick once per cycle)."""

    def __init__(self):
        self.cycle = 0

    async def tick(self, ctx, *signals):
        sampled = await ctx.tick().sample(*signals)
        self.cycle += 1
        return sampled[2:]

    async def wait(self, ctx, condition, limit, what):
        for _ in range(limit):
            if condition():
                return
            await self.tick(ctx)
        raise AssertionError(f"{what} not within {limit} cycles")


async def send(ctx, clock, bench, name, flits, idle_prob=0.0):
    """Hand ``flits`` to side ``name``'s tx_flit (random idle cycles), logging each handshake."""
    phy = getattr(bench, name)
    for kind, data in flits:
        while bench.rng.random() < idle_prob:
            await clock.tick(ctx)
        ctx.set(phy.tx_flit.payload, {"kind": kind, "data": data or 0})
        ctx.set(phy.tx_flit.valid, 1)
        while True:
            (ready,) = await clock.tick(ctx, phy.tx_flit.ready)
            if ready:
                break
        bench.sent[name].append((clock.cycle, kind, data))
        ctx.set(phy.tx_flit.valid, 0)


def both_up(ctx, bench):
    return lambda: ctx.get(bench.a.link_up) and ctx.get(bench.b.link_up)


def beats(log):
    return [(kind, data) for _, kind, data in log]


def check_in_order(sent, received):
    """Received beats are the sent ones in order, except that each ERROR beat may stand for one lost beat."""
    expected = beats(sent)
    position = skipped = errors = 0
    for kind, data in beats(received):
        if kind == FlitKind.ERROR:
            errors += 1
            continue
        while expected[position] != (kind, data):     # a wrong DATA flit would run off the end
            position += 1
            skipped += 1
        position += 1
    assert skipped <= errors
    return position, errors


def bring_up_limit(config):
    """Generous cycles for hunting, lock, alignment and training from reset."""
    flit = 66 / config.lane_bits_per_cycle
    return int(flit * (3 * 66 + config.lock_blocks + 2 * train_period(config) + 4 * config.train_count) + 400)


# ---- tests ------------------------------------------------------------------------------------

def test_default_8_lanes_skew_traffic_and_latency():
    config = LinkConfig()
    rng = random.Random(5)
    # a -> b: per-lane skew up to 12 cycles (< deskew_blocks = 8 blocks = 21 cycles) and bit offsets;
    # b -> a: a plain zero-latency wire, used to measure the flit latency
    bench = LinkBench(config, seed=5, ab={"skew": [0, 3, 7, 1, 12, 5, 9, 2],
                                          "bit_offset": [rng.randrange(66) for _ in range(8)]})
    flits_ab = [bench.random_flit() for _ in range(24)]
    flits_ba = [(FlitKind.DATA, bench.rng.getrandbits(512)) for _ in range(24)]

    async def side(ctx, name, flits, idle_prob):
        clock = Clock()
        await clock.wait(ctx, both_up(ctx, bench), bring_up_limit(config), "link up")
        await send(ctx, clock, bench, name, flits, idle_prob)
        for _ in range(40):
            await clock.tick(ctx)

    async def side_a(ctx):
        await side(ctx, "a", flits_ab, 0.3)

    async def side_b(ctx):
        await side(ctx, "b", flits_ba, 0.5)            # spaced, so every flit sees an idle pipeline

    bench.run(side_a, side_b)
    assert beats(bench.received["b"]) == beats(bench.sent["a"]) == flits_ab
    assert beats(bench.received["a"]) == beats(bench.sent["b"]) == flits_ba
    latency = [r[0] - s[0] for s, r in zip(bench.sent["b"], bench.received["a"])]
    print(f"8-lane flit latency at zero channel latency: min {min(latency)} max {max(latency)} cycles")
    assert 5 <= min(latency) and max(latency) <= 10


def test_traffic_both_ways_with_align_insertion():
    bench = LinkBench(SMALL, seed=11, ab={"skew": [0, 10], "bit_offset": [17, 50], "latency": 3},
                      ba={"skew": [6, 0], "bit_offset": [65, 1]})
    flits = {"a": [bench.random_flit() for _ in range(120)], "b": [bench.random_flit() for _ in range(120)]}
    counters = {}

    def side(name, idle_prob):
        async def process(ctx):
            clock = Clock()
            await clock.wait(ctx, both_up(ctx, bench), bring_up_limit(SMALL), "link up")
            await send(ctx, clock, bench, name, flits[name], idle_prob)
            for _ in range(40):
                await clock.tick(ctx)
            phy = getattr(bench, name)
            counters[name] = {c: ctx.get(getattr(phy, c)) for c in
                              ("sync_errors", "link_down_events", "error_beats", "align_losses", "link_up")}
        return process

    bench.run(side("a", 0.0), side("b", 0.4))
    assert beats(bench.received["b"]) == flits["a"]
    assert beats(bench.received["a"]) == flits["b"]
    # back-to-back sending still leaves every align_period-th slot to an ALIGN flit
    cycles = [c for c, _, _ in bench.sent["a"]]
    assert cycles[-1] - cycles[0] > len(cycles) * 66 / 25 * (1 + 1 / SMALL.align_period) - 3
    for name in "ab":
        assert counters[name] == {"sync_errors": 0, "link_down_events": 0, "error_beats": 0,
                                  "align_losses": 0, "link_up": 1}


def test_sync_header_errors_give_error_beats_never_bad_data():
    bench = LinkBench(FOUR, seed=21, ab={"skew": [2, 0, 5, 1], "bit_offset": [3, 30, 64, 0]})
    flits = [bench.random_flit(0.1) for _ in range(150)]
    flips = []

    async def process(ctx):
        clock = Clock()
        await clock.wait(ctx, both_up(ctx, bench), bring_up_limit(FOUR), "link up")
        # damage the sync header of blocks that will carry the coming flits (different lanes and blocks)
        first = max(bench.ab.bits_sent(lane) for lane in range(4)) // 66 + 4
        for j in range(10):
            lane, block = j % 4, first + 11 * j + bench.rng.randrange(5)
            bench.ab.flip(lane, 66 * block + bench.rng.randrange(2))
            flips.append((lane, block))
        await send(ctx, clock, bench, "a", flits)
        for _ in range(40):
            await clock.tick(ctx)
        assert ctx.get(bench.b.link_up) and ctx.get(bench.b.link_down_events) == 0
        assert ctx.get(bench.b.sync_errors) == len(flips)
        assert ctx.get(bench.b.error_beats) == len(flips)

    bench.run(process)
    assert sum(bench.ab.injected_errors) == len(flips)
    position, errors = check_in_order(bench.sent["a"], bench.received["b"])
    assert errors == len(flips) and position == len(flits)


def test_retrain_after_link_reset_of_one_side():
    bench = LinkBench(SMALL, seed=31, ab={"skew": [4, 0], "bit_offset": [9, 40]},
                      ba={"bit_offset": [33, 2]})
    first, second = [bench.random_flit() for _ in range(20)], [bench.random_flit() for _ in range(20)]

    async def process(ctx):
        clock = Clock()
        limit = bring_up_limit(SMALL)
        await clock.wait(ctx, both_up(ctx, bench), limit, "link up")
        await send(ctx, clock, bench, "a", first)
        for _ in range(30):
            await clock.tick(ctx)
        ctx.set(bench.a.link_reset, 1)
        await clock.tick(ctx)
        ctx.set(bench.a.link_reset, 0)
        assert not ctx.get(bench.a.link_up)
        await clock.wait(ctx, lambda: not ctx.get(bench.b.link_up), limit, "b down")
        await clock.wait(ctx, both_up(ctx, bench), 2 * limit, "link up again")
        await send(ctx, clock, bench, "a", second)
        for _ in range(40):
            await clock.tick(ctx)
        for phy in (bench.a, bench.b):
            assert ctx.get(phy.link_down_events) == 1
        assert ctx.get(bench.b.error_beats) >= 1       # b's link layer learns the loss

    bench.run(process)
    received = beats(bench.received["b"])
    assert received[:len(first)] == first and received[-len(second):] == second
    assert all(kind == FlitKind.ERROR for kind, _ in received[len(first):-len(second)])
    assert len(received) > len(first) + len(second)


def test_skew_beyond_deskew_never_aligns_then_retrains_when_removed():
    config = SMALL
    lead = config.deskew_blocks + 8                   # blocks lane 0 leads lane 1 by
    delay = round(lead * 66 / config.lane_bits_per_cycle)
    bench = LinkBench(config, seed=41, ab={"skew": [0, delay]})
    flits = [bench.random_flit() for _ in range(30)]

    async def process(ctx):
        clock = Clock()
        limit = bring_up_limit(config)
        for _ in range(limit):
            await clock.tick(ctx)
            assert not ctx.get(bench.b.rx_aligned) and not ctx.get(bench.b.link_up)
        assert ctx.get(bench.b.lanes_locked) == 0b11 and ctx.get(bench.a.rx_aligned)
        bench.ab.set_delay(1, 0)
        await clock.wait(ctx, both_up(ctx, bench), 2 * limit, "link up after the skew was removed")
        await send(ctx, clock, bench, "a", flits, 0.2)
        for _ in range(40):
            await clock.tick(ctx)

    bench.run(process)
    assert beats(bench.received["b"]) == flits


def test_swapped_lanes_are_detected():
    bench = LinkBench(FOUR, seed=51, ab={"lane_map": [0, 2, 1, 3]})

    async def process(ctx):
        clock = Clock()
        for _ in range(bring_up_limit(FOUR)):
            await clock.tick(ctx)
            assert not ctx.get(bench.b.rx_aligned) and not ctx.get(bench.a.link_up)
        assert ctx.get(bench.b.lanes_locked) == 0b1111
        assert ctx.get(bench.b.lane_mismatches) > 0 and ctx.get(bench.a.lane_mismatches) == 0
        assert ctx.get(bench.a.rx_aligned)          # the other direction is fine

    bench.run(process)
    assert bench.received == {"a": [], "b": []}


@pytest.mark.parametrize("make, quoted", [
    (lambda: LinkPhy("eight lanes"), "config must be a LinkConfig, got 'eight lanes'"),
    (lambda: LinkPhy(LinkConfig(chunk_bits=96, lane_bits_per_cycle=25)), "chunk_bits must be at most 64.*got 96"),
])
def test_bad_arguments(make, quoted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=quoted):
            make()
        gc.collect()


@pytest.mark.parametrize("kwargs, quoted", [
    ({"skew": [0, 1]}, r"skew must have 4 entries, got \[0, 1\]"),
    ({"skew": [0, -1, 0, 0]}, r"skew\[1\] must be an integer in 0..1048576, got -1"),
    ({"ber": 1.5}, "ber must be a number in \\[0, 1\\), got 1.5"),
    ({"lane_map": [0, 0, 1, 2]}, r"lane_map must be a permutation of 0..3, got \[0, 0, 1, 2\]"),
    ({"latency": "3"}, "latency must be an integer in 0..1048576, got '3'"),
])
def test_channel_bad_arguments(kwargs, quoted):
    with pytest.raises(ValueError, match=quoted):
        LinkChannel(4, 32, **kwargs)


def test_channel_model_delay_offset_and_errors():
    ch = LinkChannel(2, 8, latency=2, skew=[0, 1], bit_offset=[0, 4], ber=0.01, rng=3)
    sent = {0: 0, 1: 0}
    got = {0: [], 1: []}
    for t in range(4000):
        chunks = [t & 0xFF, (t * 7) & 0xFF]
        out, valid = ch.step(chunks, 0b11)
        for lane in range(2):
            if valid >> lane & 1:
                got[lane].append((t, out[lane]))
            sent[lane] |= chunks[lane] << (8 * t)
    assert got[0][0][0] == 2 and got[1][0][0] == 3          # latency, plus skew
    # errors: the XOR of what arrived with what was sent (shifted by the offset) has one bit per error
    for lane, offset in ((0, 0), (1, 4)):
        arrived = sum(chunk << (8 * k) for k, (_, chunk) in enumerate(got[lane])) >> offset
        nbits = 8 * len(got[lane]) - offset
        diff = (arrived ^ sent[lane]) & ((1 << nbits) - 1)
        assert bin(diff).count("1") <= ch.injected_errors[lane]
    assert 520 < sum(ch.injected_errors) < 760                 # ~0.01 * 64000 bits
    ch.set_delay(0, 0)
    assert ch.dropped_chunks[0] == 2 and ch.delay(0) == 0


@pytest.mark.sim
def test_default_8_lanes_long_run_across_align_period_with_header_errors():
    """4200 back-to-back flits (one periodic ALIGN at 4096) with a damaged sync header every ~400 blocks."""
    config = LinkConfig()
    bench = LinkBench(config, seed=61, ab={"skew": [3, 0, 11, 6, 1, 9, 4, 2], "latency": 5,
                                           "bit_offset": [0, 1, 33, 65, 12, 40, 64, 2]})
    flits = [bench.random_flit(0.05) for _ in range(4200)]
    flips = []

    async def process(ctx):
        clock = Clock()
        await clock.wait(ctx, both_up(ctx, bench), bring_up_limit(config), "link up")
        block = max(bench.ab.bits_sent(lane) for lane in range(8)) // 66 + 10
        while block < len(flits) - 20:
            lane = bench.rng.randrange(8)
            bench.ab.flip(lane, 66 * (block + lane % 2) + bench.rng.randrange(2))
            flips.append(block)
            block += 300 + bench.rng.randrange(200)
        await send(ctx, clock, bench, "a", flits)
        for _ in range(60):
            await clock.tick(ctx)
        assert ctx.get(bench.b.link_down_events) == 0 and ctx.get(bench.b.align_losses) == 0
        assert ctx.get(bench.b.error_beats) == len(flips) == ctx.get(bench.b.sync_errors)

    bench.run(process)
    position, errors = check_in_order(bench.sent["a"], bench.received["b"])
    assert errors == len(flips) and position == len(flits)
