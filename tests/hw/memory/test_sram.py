# amaranth: UnusedElaboratable=no
"""Amaranth-simulator tests of the banked SRAM (``hw/memory/sram.py``).

Drivers (``amaranth_streams.put`` per port, random idle) and consumers
(``amaranth_streams.get``, random back-pressure) run the traffic; a monitor
samples every port each cycle and feeds the bench's scoreboard
(``cosim.benches.sram.SramScoreboard``): a byte-array image of the SRAM
updated in grant order, an in-order checker of every response, and a cycle
model of the round-robin arbiters and response credits that predicts every
``req.ready`` and ``resp.valid``.

(First line: the parameter tests build components only to check attributes and
errors, so Amaranth's unused-elaboratable warning is off for this file.)
"""

import gc
import itertools
import random

import pytest
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.rtl.benches.sram import (
    RequestCodec,
    SramScoreboard,
    one_bank_traffic,
    random_traffic,
    sequential_traffic,
)
from ndpdimm.hw.memory.sram import READ_LATENCY, BankedSram, SramGeometry

SMALL = {"size_bytes": 4096, "n_banks": 4, "word_bits": 64, "n_ports": 3}
DEFAULT = {}


def simulate(params, traffic, *, seed=0, idle=0.0, stall=0.0, resp_hold=None, exact=True):
    """Run per-port request lists through a fresh SRAM; return the scoreboard.

    ``resp_hold=(port, cycles)`` keeps that port's ``resp.ready`` low for the
    first ``cycles`` cycles.
    """
    dut = BankedSram(**params)
    codec = RequestCodec(dut.geometry)
    sb = SramScoreboard(dut.geometry, exact=exact)
    P = dut.n_ports
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    n_reads = [sum(1 for r in t if not r["write"]) for t in traffic]
    state = {"busy": 2 * P}
    total = sum(len(t) for t in traffic)
    max_cycles = 100 + 4 * total / (1 - idle) / (1 - stall) + (resp_hold[1] if resp_hold else 0)

    def driver(p):
        rng = random.Random(seed * 1000 + p)

        async def tb(ctx):
            for req in traffic[p]:
                await streams.put(ctx, dut.ports[p].req, codec.encode(req), rng, idle)
            state["busy"] -= 1
        return tb

    def consumer(p):
        rng = random.Random(seed * 1000 + 100 + p)

        async def tb(ctx):
            if resp_hold and resp_hold[0] == p:
                await ctx.tick().repeat(resp_hold[1])
            for _ in range(n_reads[p]):
                await streams.get(ctx, dut.ports[p].resp, rng, stall)
            state["busy"] -= 1
        return tb

    async def monitor(ctx):
        signals = []
        for p in range(P):
            port = dut.ports[p]
            signals += [port.req.valid, port.req.ready, port.req.payload.as_value(),
                        port.resp.valid, port.resp.ready, port.resp.payload]
        quiet = 0
        while quiet < 4:      # a few cycles after the end: nothing stray may come out
            _, _, *values = await ctx.tick().sample(*signals)
            sb.observe([tuple(values[6 * p:6 * p + 6]) for p in range(P)])
            if state["busy"] == 0:
                quiet += 1
            assert sb.cycle < max_cycles, f"no progress: {sb.outstanding()} reads outstanding"

    for p in range(P):
        sim.add_testbench(driver(p))
        sim.add_testbench(consumer(p))
    sim.add_testbench(monitor)
    error = None
    try:
        sim.run()
    except AssertionError as e:
        error = str(e)
    if error is not None:
        # Finalise the abandoned testbench coroutines now: if the garbage collector does it
        # while pytest parses sources for the report, CPython 3.11 aborts the whole session
        # ("AST constructor recursion depth mismatch").
        del sim
        gc.collect()
        raise AssertionError(error)
    assert sb.outstanding() == 0
    return sb


# ---- data correctness -------------------------------------------------------------------

@pytest.mark.parametrize("params,n,seed", [(SMALL, 300, 1), (SMALL, 300, 2), (DEFAULT, 80, 3)],
                         ids=["small-1", "small-2", "default"])
def test_random_traffic(params, n, seed):
    """All ports at once, random idle and back-pressure: every read returns the last write."""
    geo = SramGeometry(**params)
    traffic = random_traffic(geo, random.Random(seed), n)
    sb = simulate(params, traffic, seed=seed, idle=0.3, stall=0.3)
    assert sb.reads > n // 2 and sb.writes > n // 2
    sb.check_fairness()


def test_random_full_rate_latency():
    """No idle, no back-pressure: each read's response handshake is exactly READ_LATENCY later."""
    geo = SramGeometry(**SMALL)
    sb = simulate(SMALL, random_traffic(geo, random.Random(5), 200), seed=5)
    assert set(sb.latencies) == {READ_LATENCY} and READ_LATENCY == 2
    sb.check_fairness()


def test_masks_and_read_after_write():
    """Directed: byte masks merge, a port reads its own write of the cycle before, another port
    sees it too, a zero mask writes nothing, and reads ignore their data/mask fields."""
    geo = SramGeometry(**SMALL)
    full = (1 << geo.word_bytes) - 1
    a = geo.word_address(0x128)
    w = lambda data, mask: {"addr": a, "write": 1, "data": data, "mask": mask}
    r = {"addr": a, "write": 0, "data": 0xDEAD, "mask": 0x5}
    traffic = [
        [w(0x1111111111111111, full), w(0x22222222_22222222, 0x0F), r, w(0x3333, 0), r],
        [], [],
    ]
    sb = simulate(SMALL, traffic)
    assert sb.response_log[0] == [0x11111111_22222222] * 2          # written out by hand
    assert sb.grant_cycles[0] == [0, 1, 2, 3, 4]
    # a second port reads while the first rewrites: order decided by grants, checked by the model
    traffic = [[w(i * 0x0101010101010101, 1 << (i % 8)) for i in range(20)],
               [r] * 20, [dict(r, addr=a + geo.n_banks)] * 20]
    simulate(SMALL, traffic, seed=4, idle=0.2)


def test_back_pressure_stops_reads_not_writes():
    """A port whose client does not take responses is granted resp_depth reads, then its next
    read waits for credit; writes need no credit and pass while responses are held. Nothing
    is lost when the client resumes."""
    for depth in (1, 2, 3, 5):
        params = dict(SMALL, resp_depth=depth)
        rng = random.Random(depth)
        read = lambda rng=rng: {"addr": rng.randrange(512), "write": 0, "data": 0, "mask": 0}
        writes = [{"addr": i, "write": 1, "data": i, "mask": 0xFF} for i in range(8)]
        hold = 30
        port0 = [read() for _ in range(depth)] + writes + [read() for _ in range(4)]
        sb = simulate(params, [port0, [], []], resp_hold=(0, hold))
        grants = sb.grant_cycles[0]
        assert grants[:depth + 8] == list(range(depth + 8)), (depth, grants)
        # the next read waits until the first response is taken (cycle hold), then its
        # credit frees one cycle later
        assert grants[depth + 8] == hold + 1, (depth, grants)
        assert sb.reads == depth + 4


# ---- arbitration ------------------------------------------------------------------------

@pytest.mark.parametrize("params", [SMALL, DEFAULT], ids=["small", "default"])
def test_one_bank_round_robin(params):
    """All ports hammer one bank: the bank never idles, grants rotate strictly, and a request
    waits at most n_ports - 1 cycles (the bound is reached)."""
    geo = SramGeometry(**params)
    P, n = geo.n_ports, 40
    bank = geo.n_banks - 1
    sb = simulate(params, one_bank_traffic(geo, random.Random(11), bank, n), seed=11)
    assert sb.stats()["grant_span"] == P * n
    sb.check_round_robin(bank, list(range(P)))
    assert max(sb.max_eligible_wait) == P - 1
    assert sb.grant_log[bank][:P] == list(range(P))       # reset priority: port 0 first


def test_one_bank_fairness_under_idle_and_back_pressure():
    geo = SramGeometry(**SMALL)
    sb = simulate(SMALL, one_bank_traffic(geo, random.Random(12), 2, 150), seed=12,
                  idle=0.3, stall=0.4)
    sb.check_fairness()


# ---- throughput ---------------------------------------------------------------------------

def _lost_cycles(n_ports, n_banks, starts, prio):
    """Python model of the per-bank round-robin arbiters for sequential streams: the cycles
    beyond n that n_ports endless streams of n words take. Once every port is granted in one
    cycle the ports sit in distinct banks and advance together, so no conflict can follow and
    the loss is final."""
    pos, done, prio, cycle = list(starts), [0] * n_ports, list(prio), 0
    while True:
        by_bank = {}
        for p in range(n_ports):
            by_bank.setdefault(pos[p] % n_banks, []).append(p)
        for b, want in by_bank.items():
            g = ([p for p in want if prio[b] >> p & 1] or want)[0]
            prio[b] = ((1 << n_ports) - 1) & ~((2 << g) - 1)
            pos[g] += 1
            done[g] += 1
        cycle += 1
        if len(by_bank) == n_ports:
            return cycle - min(done)


@pytest.mark.parametrize("n_ports,n_banks", [(3, 4), (4, 4), (4, 8), (4, 16)])
def test_streaming_loss_bound_exhaustive(n_ports, n_banks):
    """Justifies the streaming bound: over every combination of start banks (from the reset
    arbiter state and from random ones), P sequential streams lose at most P - 1 cycles."""
    rng = random.Random(1)
    full = (1 << n_ports) - 1
    worst = 0
    for starts in itertools.product(range(n_banks), repeat=n_ports):
        prio = [full] * n_banks if rng.random() < 0.5 else \
            [full & ~((1 << rng.randrange(n_ports + 1)) - 1) for _ in range(n_banks)]
        worst = max(worst, _lost_cycles(n_ports, n_banks, starts, prio))
    assert worst == n_ports - 1


@pytest.mark.parametrize("params,n,random_starts", [(SMALL, 160, 4), (DEFAULT, 256, 1)],
                         ids=["small", "default"])
def test_streaming_throughput(params, n, random_starts):
    """Each port streams n sequential words (even ports read, odd ports write), no idle, no
    back-pressure. Same start bank (the worst start): port p waits p cycles once, then the
    ports walk the banks one apart, so exactly n + P - 1 cycles: at the defaults
    4 * 256 / 259 = 3.954 accesses/cycle of a peak of 4. Random start banks: at most that
    many cycles (bound from test_streaming_loss_bound_exhaustive)."""
    geo = SramGeometry(**params)
    P, B = geo.n_ports, geo.n_banks
    assert P <= B
    rng = random.Random(21)
    writes = [p % 2 == 1 for p in range(P)]
    starts = [p * (geo.n_words // P) // B * B for p in range(P)]
    sb = simulate(params, sequential_traffic(geo, rng, starts, n, writes))
    stats = sb.stats()
    assert stats["grant_span"] == n + P - 1, stats
    assert stats["accesses_per_cycle"] == pytest.approx(P * n / (n + P - 1))
    assert stats["accesses_per_cycle"] > 0.98 * P
    for seed in range(random_starts):
        rng = random.Random(100 + seed)
        starts = [rng.randrange(geo.n_words) for _ in range(P)]
        sb = simulate(params, sequential_traffic(geo, rng, starts, n, writes))
        assert sb.stats()["grant_span"] <= n + P - 1, (starts, sb.stats())


def test_low_resp_depth_read_rate():
    """A port sustains resp_depth / 3 reads per cycle below resp_depth 3 (credit round trip)."""
    for depth, rate in ((1, 1 / 3), (2, 2 / 3), (3, 1.0)):
        params = dict(SMALL, resp_depth=depth)
        geo = SramGeometry(**params)
        n = 60
        traffic = sequential_traffic(geo, random.Random(1), [0, 0, 0], n, [False] * 3)
        sb = simulate(params, [traffic[0], [], []])
        assert sb.stats()["grant_span"] == pytest.approx(n / rate, abs=2), (depth, sb.stats())


# ---- parameters ----------------------------------------------------------------------------

def test_derived_parameters_and_helpers():
    s = BankedSram()
    assert (s.word_bytes, s.n_words, s.bank_depth, s.addr_bits) == (32, 4096, 256, 12)
    assert s.word_address(64) == 2 and s.bank_of(17) == 1 and s.row_of(17) == 1
    # a 64 B burst is two words in two banks
    assert s.bank_of(s.word_address(0x1040)) != s.bank_of(s.word_address(0x1060))
    with pytest.raises(ValueError, match="0x21"):
        s.word_address(0x21)
    with pytest.raises(ValueError, match="131072"):
        s.word_address(131072)
    bits = s.request_bits(5, write=True, data=0xAB, mask=0x3)
    assert RequestCodec(s).decode(bits) == {"addr": 5, "write": 1, "data": 0xAB, "mask": 3}
    assert len(s.ports) == 4


@pytest.mark.parametrize("kwargs,quoted", [
    ({"size_bytes": 100000}, "100000"),
    ({"size_bytes": 0}, "size_bytes"),
    ({"size_bytes": 512}, "512"),                  # less than two rows of 16 x 32 B
    ({"n_banks": 12}, "12"),
    ({"n_banks": 0}, "n_banks"),
    ({"word_bits": 100}, "100"),
    ({"word_bits": 4}, "word_bits"),
    ({"n_ports": 0}, "n_ports"),
    ({"n_ports": 33}, "33"),
    ({"n_ports": 2.0}, "2.0"),
    ({"resp_depth": 0}, "resp_depth"),
    ({"n_banks": True}, "True"),
])
def test_constructor_validation(kwargs, quoted):
    with pytest.raises(ValueError, match=quoted):
        BankedSram(**kwargs)
