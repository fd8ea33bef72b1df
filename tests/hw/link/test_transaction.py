"""DIMM-Link transaction layer and router: remote writes, reads and atomic adds across a chain.

A chain of DIMMs (``cosim/link/chain.py``: each ``BankedSram`` +
``LinkTransaction`` + ``LinkRouter``, DRAM behind a ``MemoryPortModel``) with
the links between routers modelled as packet FIFOs whose ends stall at
random; the link layer and PHY below are tested in their own files. Every
SRAM is checked byte for byte against a Python image updated by the golden
rules (``accumulate_bits`` for atomic adds), including the regions no
operation should touch.
"""

import random

import numpy as np
import pytest
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim.sram_access import (
    WORD,
    check_image,
    image_words,
    read_words,
    write_words,
)
from ndpdimm.cosim.amaranth_sim.streams import get, put
from ndpdimm.cosim.dram.model import SparseStore
from ndpdimm.cosim.golden.numerics import accumulate_bits
from ndpdimm.cosim.link.chain import BEAT, CAPACITY, SRAM_SIZE, Chain
from ndpdimm.hw.link.formats import LinkOp, transaction_header_layout
from ndpdimm.hw.link.router import LEFT, LOCAL, RIGHT, LinkRouter, PacketArbiter
from ndpdimm.hw.link.transaction import DRAM_SPACE, LinkTransaction
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.memory.sram import SramGeometry


def _f32_words(rng, n_words, special=False):
    """Random FP32 bit patterns; with ``special``, many zeros/subnormals/Inf/NaN/max values."""
    pool = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F7FFFFF, 0xFF7FFFFF,
            0x7F800000, 0xFF800000, 0x7FC00001, 0x3F800000, 0x33800000]
    vals = [rng.choice(pool) if special and rng.random() < 0.5 else
            int(np.float32(rng.uniform(-1e3, 1e3)).view(np.uint32)) for _ in range(8 * n_words)]
    return np.array(vals, dtype=np.uint32).tobytes()


class Golden:
    """SRAM images and DRAM contents of every DIMM and the rules of each operation."""

    def __init__(self, rng, n):
        self.images = [bytearray(rng.randbytes(SRAM_SIZE)) for _ in range(n)]
        self.drams = [SparseStore(CAPACITY) for _ in range(n)]
        self.dram_regions = [[] for _ in range(n)]      # (address, bytes) written, to compare

    def apply(self, src, cmd):
        op, dest = cmd["op"], cmd["dest"]
        remote, local, n = cmd["remote_addr"], cmd["local_addr"], cmd["n_bytes"]
        here, there = self.images[src], self.images[dest]
        if op == LinkOp.WRITE and remote & DRAM_SPACE:
            self.drams[dest].write(remote - DRAM_SPACE, bytes(here[local:local + n]))
            self.dram_regions[dest].append((remote - DRAM_SPACE, n))
        elif op == LinkOp.WRITE:
            there[remote:remote + n] = here[local:local + n]
        elif op == LinkOp.READ_REQUEST:
            here[local:local + n] = there[remote:remote + n]
        else:
            old = np.frombuffer(bytes(there[remote:remote + n]), dtype=np.uint32)
            new = np.frombuffer(bytes(here[local:local + n]), dtype=np.uint32)
            summed = accumulate_bits(old, new, is_int=op == LinkOp.ATOMIC_ADD_INT32)
            there[remote:remote + n] = np.asarray(summed, dtype=np.uint32).tobytes()


def _random_stalls(prob):
    def stall(ctx, rng):
        return sum(1 << k for k in range(16) if rng.random() < prob)
    return stall


def _run(chain, golden, programs, rng=None, stall=None, cycles_limit=200_000, monitor=None):
    """Load every SRAM with ``golden``'s images, run ``programs[i]`` (list of (cmd, expected
    status)) on DIMM i, apply the programs to ``golden`` (in DIMM order: tests keep them
    commuting) and compare every SRAM and the DRAM regions written with it.

    ``stall(ctx, rng)`` gives the link-stall mask of each cycle (none by default);
    ``monitor`` is an extra simulator process."""
    results = {}
    initial = [bytes(image) for image in golden.images]
    for i, program in programs.items():
        for cmd, want in program:
            if want in (Status.OK, Status.LINK_TIMEOUT):     # a timed-out write still lands
                golden.apply(i, cmd)
    sim = Simulator(chain)
    sim.add_clock(1e-9)
    loaded = [False] * chain.n

    async def loader(ctx):
        for i in range(chain.n):
            await write_words(ctx, chain.tb_port(i), image_words(initial[i], 0, SRAM_SIZE))
            loaded[i] = True

    def driver(i):
        async def tb(ctx):
            while not all(loaded):
                await ctx.tick()
            statuses = []
            for cmd, _ in programs[i]:
                await put(ctx, chain.units[i].cmd, chain.units[i].cmd_layout.const(cmd).as_value().value)
                beat = await get(ctx, chain.units[i].status)
                statuses.append(Status(beat.code))
            results[i] = statuses
        return tb

    async def staller(ctx):
        r = rng or random.Random(0)
        while True:
            ctx.set(chain.stall, stall(ctx, r) & ((1 << len(chain.links)) - 1))
            await ctx.tick()

    sim.add_testbench(loader)
    if any(golden.dram_regions):            # the memory models cost simulation time: only if used
        chain.serve_drams(sim)
    if monitor is not None:
        sim.add_process(monitor)
    for i in programs:
        sim.add_testbench(driver(i))
    if chain.links and stall:
        sim.add_testbench(staller, background=True)

    dumps = {}

    async def checker(ctx):
        for _ in range(cycles_limit):
            if len(results) == len(programs):
                break
            await ctx.tick()
        else:
            raise AssertionError(f"commands did not finish in {cycles_limit} cycles")
        for _ in range(20):                 # responses already counted; let queues settle
            await ctx.tick()
        for i in range(chain.n):
            words = await read_words(ctx, chain.tb_port(i), list(range(SRAM_SIZE // WORD)))
            dumps[i] = b"".join(w.to_bytes(WORD, "little") for w in words)
        dumps["counters"] = [(ctx.get(u.packets_sent), ctx.get(u.packets_received), ctx.get(u.bad_packets),
                              ctx.get(u.stale_responses)) for u in chain.units]
        dumps["dropped"] = [ctx.get(r.dropped) for r in chain.routers]

    sim.add_testbench(checker)
    sim.run()
    for i, program in programs.items():
        assert results[i] == [want for _, want in program], f"DIMM {i} statuses"
    for i in range(chain.n):
        check_image(dumps[i], bytes(golden.images[i]), f"DIMM {i}: ")
        for addr, n in golden.dram_regions[i]:
            assert chain.drams[i].dump(addr, n) == golden.drams[i].read(addr, n), \
                f"DIMM {i}: DRAM [{addr:#x}, +{n}) differs"
    return dumps


def _cmd(op, dest, remote, local, n):
    return {"op": op, "dest": dest, "remote_addr": remote, "local_addr": local, "n_bytes": n}


def test_write_read_and_atomics_between_neighbours():
    rng = random.Random(1)
    chain = Chain(2)
    golden = Golden(rng, 2)
    # FP32 operands with corner values at both ends of an atomic add.
    golden.images[0][1024:1024 + 256] = _f32_words(rng, 8, special=True)
    golden.images[1][2048:2048 + 256] = _f32_words(rng, 8, special=True)
    program = [
        (_cmd(LinkOp.WRITE, 1, 0, 512, 416), Status.OK),              # 4 packets (128 B each, last 32 B)
        (_cmd(LinkOp.READ_REQUEST, 1, 3072, 0, 160), Status.OK),
        (_cmd(LinkOp.ATOMIC_ADD_FP32, 1, 2048, 1024, 256), Status.OK),
        (_cmd(LinkOp.ATOMIC_ADD_INT32, 1, 3584, 3584, 96), Status.OK),
        (_cmd(LinkOp.WRITE, 1, 4064, 0, 32), Status.OK),              # the last word of the SRAM
    ]
    dumps = _run(chain, golden, {0: program})
    sent, received, bad, stale = dumps["counters"][0]
    assert (bad, stale) == (0, 0)
    # 4 + 2 + 2 + 1 + 1 request packets, each answered once.
    assert sent == 10 and received == 10
    assert dumps["counters"][1][:2] == (10, 10)


def test_bad_commands_have_no_side_effect():
    rng = random.Random(2)
    chain = Chain(2)
    golden = Golden(rng, 2)
    program = [
        (_cmd(LinkOp.WRITE, 2, 0, 0, 64), Status.BAD_FIELD),          # no DIMM 2 in a 2-DIMM chain
        (_cmd(LinkOp.COMPLETION, 1, 0, 0, 64), Status.BAD_FIELD),     # not an initiator operation
        (_cmd(LinkOp.WRITE, 1, 16, 0, 64), Status.MISALIGNED),
        (_cmd(LinkOp.WRITE, 1, 0, 32, 48), Status.MISALIGNED),
        (_cmd(LinkOp.READ_REQUEST, 1, 0, 4064, 64), Status.SRAM_RANGE),
        (_cmd(LinkOp.WRITE, 1, 0, 0, 0), Status.OK),
        # The target refuses: past its SRAM (also far past: 40-bit address), nothing written.
        (_cmd(LinkOp.WRITE, 1, 4064, 0, 64), Status.REMOTE_RANGE),
        (_cmd(LinkOp.ATOMIC_ADD_FP32, 1, 1 << 38, 0, 32), Status.REMOTE_RANGE),
        (_cmd(LinkOp.READ_REQUEST, 1, 4000 & ~31, 0, 256), Status.REMOTE_RANGE),
        (_cmd(LinkOp.WRITE, 1, 64, 0, 32), Status.OK),                # and the link still works
    ]
    dumps = _run(chain, golden, {0: program})
    sent = dumps["counters"][0][0]
    # Only the commands that passed the local checks sent packets: 1 + 1 + 2 (256 B read) + 1.
    assert sent == 5


def test_routing_through_a_middle_dimm_with_stalls():
    rng = random.Random(3)
    chain = Chain(3)
    golden = Golden(rng, 3)
    program0 = [(_cmd(LinkOp.WRITE, 2, 256, 0, 320), Status.OK),
                (_cmd(LinkOp.READ_REQUEST, 2, 1024, 2048, 256), Status.OK)]
    program2 = [(_cmd(LinkOp.WRITE, 0, 3072, 1536, 256), Status.OK),   # source untouched by DIMM 0
                (_cmd(LinkOp.ATOMIC_ADD_INT32, 1, 0, 0, 128), Status.OK)]
    dumps = _run(chain, golden, {0: program0, 2: program2}, rng=rng, stall=_random_stalls(0.4))
    assert dumps["dropped"] == [0, 0, 0]
    assert dumps["counters"][1][:2] == (1, 1)      # DIMM 1 only served the atomic add (1 packet)


def test_constrained_random_traffic_every_dimm_busy():
    """Every DIMM issues random operations to random others at the same time, links stalling.

    Regions are disjoint per (initiator, kind), so the final images do not depend on the
    interleaving; atomic adds of different initiators into one shared INT32 region commute.
    """
    rng = random.Random(4)
    n = 3
    chain = Chain(n)
    golden = Golden(rng, n)
    shared_int = 3584                       # 512 B INT32 accumulation region on every DIMM
    programs = {}
    for i in range(n):
        program = []
        for _ in range(4):
            dest = rng.choice([d for d in range(n) if d != i])
            words = rng.randint(1, 9)
            op = rng.choice([LinkOp.WRITE, LinkOp.READ_REQUEST, LinkOp.ATOMIC_ADD_INT32])
            if op == LinkOp.ATOMIC_ADD_INT32:
                remote = shared_int + 32 * rng.randrange(16 - words + 1)
                local = 32 * rng.randrange(8)          # read-only source region 0..511
            else:
                # Writes land in the initiator's own 1 KiB strip of the target; reads come
                # from the read-only region 0..511 of the target into the initiator's own strip.
                strip = 512 + 1024 * i
                remote = strip + 32 * rng.randrange(32 - words) if op == LinkOp.WRITE else \
                    32 * rng.randrange(16 - words + 1)
                local = 32 * rng.randrange(16 - words + 1) if op == LinkOp.WRITE else \
                    strip + 32 * rng.randrange(32 - words)
            program.append((_cmd(op, dest, remote, local, 32 * words), Status.OK))
        programs[i] = program
    # The read-only regions (0..511) are never written; each strip has one writer, and
    # reads of a strip only happen on the strip's owner, so programs commute across DIMMs.
    _run(chain, golden, programs, rng=rng, stall=_random_stalls(0.3))


def test_fp32_merge_order_follows_command_order():
    """Two partial FP32 vectors merged into a third DIMM one after the other (the documented way
    to merge a split GEMV): the result is the golden ``(y + p0) + p1``, bit for bit."""
    rng = random.Random(5)
    chain = Chain(3)
    golden = Golden(rng, 3)
    for i in range(3):
        golden.images[i][0:512] = _f32_words(rng, 16, special=i == 0)
    first = [(_cmd(LinkOp.ATOMIC_ADD_FP32, 1, 0, 0, 512), Status.OK)]
    _run(chain, golden, {0: first})
    # Continue from the state reached: DIMM 2 adds its part second.
    second = [(_cmd(LinkOp.ATOMIC_ADD_FP32, 1, 0, 0, 512), Status.OK)]
    _run(Chain(3), golden, {2: second})


def test_a_lost_response_times_out_and_late_answers_are_ignored():
    """A completion held back past the timeout: LINK_TIMEOUT, and when it finally arrives it is
    ignored as stale (it does not complete the next command); the link stays usable."""
    rng = random.Random(6)
    chain = Chain(2, response_timeout=300)
    golden = Golden(rng, 2)
    program = [(_cmd(LinkOp.WRITE, 1, 0, 0, 64), Status.LINK_TIMEOUT),
               (_cmd(LinkOp.WRITE, 1, 128, 0, 64), Status.OK)]
    seen = {"status": 0, "held": 0}

    def hold_until_timeout(ctx, rng):
        # Link 1 carries DIMM 1 -> DIMM 0: hold it until DIMM 0 reported the timeout, and
        # 50 cycles longer, so the second write is under way when the stale completion lands.
        if ctx.get(chain.units[0].status.valid):
            seen["status"] = 1
        if seen["status"]:
            seen["held"] += 1
        return 0b10 if seen["held"] < 50 else 0

    dumps = _run(chain, golden, {0: program}, stall=hold_until_timeout)
    assert dumps["counters"][0][3] == 1            # one stale completion


# ---- remote DRAM targets --------------------------------------------------------------------

def _completions_after_acks(chain, checked):
    """A monitor process: every COMPLETION a target sends must find acknowledged every DRAM burst
    of the DRAM WRITE packets that target took before it (all of a test's DRAM writes are
    accepted ones). ``checked[i]`` counts the completions checked on DIMM ``i``."""
    header_mask = (1 << transaction_header_layout.size) - 1
    units = chain.units
    ranks = len(units[0].mem.resp)
    per = 6 + 2 * ranks

    def header(beat):
        return transaction_header_layout.from_bits(beat.data & header_mask)

    async def monitor(ctx):
        need = [[] for _ in units]          # acks each queued completion needs, in order
        taken = [0] * len(units)
        acked = [0] * len(units)
        sigs = []
        for u in units:
            sigs += [u.rx.valid, u.rx.ready, u.rx.payload, u.tx.valid, u.tx.ready, u.tx.payload]
            sigs += [x for r in u.mem.resp for x in (r.valid, r.ready)]
        async for _, _, *v in ctx.tick().sample(*sigs):
            for i in range(len(units)):
                rx_v, rx_r, rx_p, tx_v, tx_r, tx_p, *resp = v[i * per:(i + 1) * per]
                if tx_v and tx_r and tx_p.first and header(tx_p).op == LinkOp.COMPLETION:
                    want = need[i].pop(0)
                    assert acked[i] >= want, \
                        f"DIMM {i}: completion after {acked[i]} of {want} DRAM acknowledgements"
                    checked[i] += 1
                acked[i] += sum(bool(resp[k] and resp[k + 1]) for k in range(0, 2 * ranks, 2))
                if rx_v and rx_r and rx_p.first:
                    h = header(rx_p)
                    if h.op == LinkOp.WRITE and h.address & DRAM_SPACE:
                        taken[i] += rx_p.payload_words // 2
                    if h.op in (LinkOp.WRITE, LinkOp.ATOMIC_ADD_FP32, LinkOp.ATOMIC_ADD_INT32):
                        need[i].append(taken[i])
    return monitor


def test_remote_dram_writes_complete_after_the_memory_acknowledged_them():
    """DRAM writes between three DIMMs (through the middle one, to itself, mixed with SRAM
    writes), a slow memory with random back-pressure and order, stalling links: the bytes land,
    nothing else is written, and every completion leaves after its bursts' acknowledgements."""
    rng = random.Random(11)
    chain = Chain(3, seed=11, min_latency=1, max_latency=60, accept_prob=0.5)
    golden = Golden(rng, 3)
    D = DRAM_SPACE
    programs = {
        0: [(_cmd(LinkOp.WRITE, 1, D | 0x4_0000, 0, 448), Status.OK),        # 4 packets, last 64 B
            (_cmd(LinkOp.WRITE, 2, D | 0x8_0000, 512, 256), Status.OK),      # through DIMM 1
            (_cmd(LinkOp.WRITE, 1, 1024, 1024, 128), Status.OK)],            # SRAM, between
        1: [(_cmd(LinkOp.WRITE, 0, D | 0x1_0000_0040, 2048, 128), Status.OK)],
        2: [(_cmd(LinkOp.WRITE, 1, D | 0x5_0000, 1536, 640), Status.OK),
            (_cmd(LinkOp.WRITE, 2, D | 0x6_0000, 3072, 192), Status.OK)],    # to itself
    }
    checked = [0, 0, 0]
    _run(chain, golden, programs, rng=rng, stall=_random_stalls(0.3),
         monitor=_completions_after_acks(chain, checked))
    assert checked == [1, 4 + 1 + 5, 2 + 2]     # packets of 128 B received by each DIMM
    assert [d.writes for d in chain.drams] == [2, 7 + 10, 4 + 3]      # bursts, none more
    assert all(d.reads == 0 for d in chain.drams)


def test_remote_dram_writes_outside_the_window_or_misaligned_are_refused():
    """The target writes nothing and answers REMOTE_RANGE for a DRAM range outside its window or
    its DRAM, misaligned to a burst, of an odd number of words, and for atomics and reads of
    DRAM; the link keeps working."""
    rng = random.Random(12)
    lo, hi = 0x10000, 0x20000
    chain = Chain(2, windows=[(0, CAPACITY), (lo, hi)])
    golden = Golden(rng, 2)
    D = DRAM_SPACE
    program = [
        (_cmd(LinkOp.WRITE, 1, D | lo, 0, 256), Status.OK),
        (_cmd(LinkOp.WRITE, 1, D | (lo - 64), 0, 64), Status.REMOTE_RANGE),      # below the window
        (_cmd(LinkOp.WRITE, 1, D | (hi - 64), 0, 128), Status.REMOTE_RANGE),     # across its limit
        (_cmd(LinkOp.WRITE, 1, D | (hi - 64), 0, 64), Status.OK),                # its last burst
        (_cmd(LinkOp.WRITE, 1, D | (lo + 32), 0, 64), Status.REMOTE_RANGE),      # 32 B aligned only
        (_cmd(LinkOp.WRITE, 1, D | lo, 0, 96), Status.REMOTE_RANGE),             # 3 words
        (_cmd(LinkOp.ATOMIC_ADD_FP32, 1, D | lo, 0, 64), Status.REMOTE_RANGE),
        (_cmd(LinkOp.ATOMIC_ADD_INT32, 1, D | lo, 0, 64), Status.REMOTE_RANGE),
        (_cmd(LinkOp.READ_REQUEST, 1, D | lo, 0, 64), Status.REMOTE_RANGE),
        (_cmd(LinkOp.WRITE, 0, D | (CAPACITY - 64), 64, 128), Status.REMOTE_RANGE),  # past the DIMM
        (_cmd(LinkOp.WRITE, 0, D | (CAPACITY - 64), 64, 64), Status.OK),            # its last burst
        (_cmd(LinkOp.WRITE, 1, D | (lo + 0x1000), 0, 384), Status.OK),
    ]
    _run(chain, golden, {0: program})
    assert chain.drams[1].writes == (256 + 64 + 384) // 64 and chain.drams[0].writes == 1


def test_router_drops_packets_for_missing_dimms_and_u_turns():
    router = LinkRouter()
    sim = Simulator(router)
    sim.add_clock(1e-9)
    hdr = transaction_header_layout
    got = {p: [] for p in range(3)}

    def packet(dest, words):
        head = hdr.const({"op": LinkOp.WRITE, "dest": dest, "src": 1}).as_value().value
        beats = [BEAT.const({"data": head, "payload_words": words, "first": 1, "last": words == 0})]
        beats += [BEAT.const({"data": 0xABC0 + k, "last": k == words - 1}) for k in range(words)]
        return [b.as_value().value for b in beats]

    async def tb(ctx):
        ctx.set(router.my_id, 1)
        ctx.set(router.n_dimms, 3)
        for p in range(3):
            ctx.set(router.outs[p].ready, 1)
        cases = [(LOCAL, 5, 2), (LOCAL, 2, 1), (LOCAL, 0, 0), (LOCAL, 1, 3),
                 (LEFT, 2, 1),      # from the left, going right: through
                 (LEFT, 0, 2),      # from the left, going back left: a U-turn, dropped
                 (RIGHT, 2, 0)]     # U-turn on the right, dropped
        for port, dest, words in cases:
            for beat in packet(dest, words):
                await put(ctx, router.ins[port], beat)
        for _ in range(4):
            await ctx.tick()
        assert ctx.get(router.dropped) == 3

    async def monitor(ctx):
        while True:
            signals = [s for o in router.outs for s in (o.valid, o.payload)]
            _, _, *rest = await ctx.tick().sample(*signals)
            for p in range(3):
                if rest[2 * p]:
                    got[p].append(rest[2 * p + 1])

    sim.add_testbench(tb)
    sim.add_process(monitor)
    sim.run()
    heads = {p: [hdr.from_bits(b.data & ((1 << 128) - 1)).dest for b in got[p] if b.first] for p in got}
    assert heads == {LEFT: [0], RIGHT: [2, 2], LOCAL: [1]}
    assert [b.data for b in got[LOCAL] if not b.first] == [0xABC0, 0xABC1, 0xABC2]


def test_arbiter_never_interleaves_packets():
    arb = PacketArbiter(3)
    sim = Simulator(arb)
    sim.add_clock(1e-9)
    rng = random.Random(7)
    packets = {i: [[(i << 16) | (p << 8) | k for k in range(rng.randint(1, 4))] for p in range(6)]
               for i in range(3)}
    total = sum(len(pk) for ps in packets.values() for pk in ps)
    out = []

    def sender(i):
        async def tb(ctx):
            for packet in packets[i]:
                for k, data in enumerate(packet):
                    beat = BEAT.const({"data": data, "first": k == 0,
                                       "last": k == len(packet) - 1}).as_value().value
                    await put(ctx, arb.ins[i], beat, rng, 0.3)
        return tb

    async def sink(ctx):
        while len(out) < total:
            out.append(await get(ctx, arb.out, rng, 0.3))

    for i in range(3):
        sim.add_testbench(sender(i))
    sim.add_testbench(sink)
    sim.run()
    # Packets arrive whole: between a first and its last beat, every beat is from one sender.
    owner = None
    for beat in out:
        src = beat.data >> 16
        if beat.first:
            assert owner is None
            owner = src
        assert src == owner
        if beat.last:
            owner = None
    for i in range(3):
        assert [b.data for b in out if b.data >> 16 == i] == [d for pk in packets[i] for d in pk]


@pytest.mark.parametrize("kwargs, match", [
    ({"outstanding": 0}, "outstanding"),
    ({"max_dimms": 1}, "max_dimms"),
    ({"response_timeout": 2}, "response_timeout"),
    ({"config": "fast"}, "config"),
    ({"sram": SramGeometry(4096, 4, 128, 3)}, "256-bit"),
])
def test_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LinkTransaction(**kwargs)


def test_checker_catches_a_wrong_model():
    """The comparison is not vacuous: a golden model that adds as FP32 what the RTL adds as
    INT32 is caught."""
    rng = random.Random(8)
    golden = Golden(rng, 2)
    wrong = Golden.apply

    def fp32_instead(self, src, cmd):
        wrong(self, src, dict(cmd, op=LinkOp.ATOMIC_ADD_FP32))

    golden.apply = fp32_instead.__get__(golden)
    with pytest.raises(AssertionError, match="DIMM 1: SRAM byte"):
        _run(Chain(2), golden, {0: [(_cmd(LinkOp.ATOMIC_ADD_INT32, 1, 0, 0, 64), Status.OK)]})
