# amaranth: UnusedElaboratable=no
"""Amaranth-simulator tests of the DIMM-Link link layer (``hw/link/layer.py``).

Two ``LinkLayer`` ends, A and B, are connected through two behavioural
:class:`~ndpdimm.cosim.link.frames.FlitChannel` s (one per direction: a PHY
beat slot at line rate, a flit per 2.64 cycles, a delay line, fault
injection). One testbench process steps the whole bench cycle by cycle
(channels, packet drivers with random idle cycles, consumers with random or
long back-pressure): the channels must act every cycle, so per-beat
``put``/``get`` helpers would not fit. Checks:

* every packet is delivered exactly once, in order, bit-exact (checked as it
  is delivered);
* every frame a transmitter puts on the wire (seen by a monitor before any
  fault) has a good CRC and equals :func:`pack_frame` of the packet with that
  sequence number, with the link fields (ack, NAK, credit) taken from the wire;
  where they are known in advance (one-way traffic) they are checked too;
* the receive buffer never holds more than ``rx_buffer_flits`` and the
  overflow counter stays 0 (credits work);
* the event counters move as the injected faults demand.

(First line: the parameter tests build components only to check errors.)
"""

import random
import zlib

import pytest
from amaranth.hdl import Elaboratable, Module
from amaranth.lib.crc import catalog
from amaranth.sim import Simulator

from ndpdimm.cosim.link.frames import (
    CRC32C_CHECK,
    FlitChannel,
    beats_to_packet,
    crc32c,
    pack_frame,
    packet_beats,
    unpack_fields,
    unpack_frame,
)
from ndpdimm.hw.link.formats import (
    FlitKind,
    FrameType,
    LinkConfig,
    frame_flits,
    frame_header_layout,
    packet_beat_layout,
    phy_flit_layout,
)
from ndpdimm.hw.link.layer import RX_COUNTERS, TX_COUNTERS, LinkLayer, crc32c_matrix

#: Small link for speed: 4-word payloads (3-flit frames), 16-flit replay buffer,
#: 12-flit receive buffer, 4-bit sequence numbers (so they wrap, and at most 8
#: frames are outstanding).
SMALL = LinkConfig(max_payload=128, replay_flits=16, rx_buffer_flits=12, seq_bits=4,
                   replay_timeout=300)
PHY = phy_flit_layout(8)
LAST_BIT = packet_beat_layout()["last"].offset
COUNTERS = TX_COUNTERS + RX_COUNTERS


def random_packets(rng, n, cfg, sizes=None):
    max_words = cfg.max_payload // 32
    return [(rng.getrandbits(128), rng.randbytes(32 * (rng.choice(sizes) if sizes else
                                                        rng.randint(0, max_words))))
            for _ in range(n)]


class Pair(Elaboratable):
    def __init__(self, cfg):
        self.a = LinkLayer(cfg)
        self.b = LinkLayer(cfg)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a = self.a
        m.submodules.b = self.b
        return m


class End:
    """Testbench state of one LinkLayer: packets it sends, packets it delivered, its outgoing channel."""

    def __init__(self, name, dut, packets, channel):
        self.name, self.dut, self.channel = name, dut, channel
        self.packets = list(packets)
        self.beats, self.last_beats = [], set()
        for txn, payload in self.packets:
            self.beats += packet_beats(txn, payload)
            self.last_beats.add(len(self.beats) - 1)
        self.next_beat, self.cur = 0, None
        self.rx_beats, self.delivered = [], []
        self.tx_last_cycles, self.flit_cycles, self.rx_first_cycles = [], [], []
        self.max_level, self.state = 0, {}
        self.tx_pay = dut.tx_packet.payload.as_value()
        self.rx_pay = dut.rx_packet.payload.as_value()
        self.ptx_pay = dut.phy_tx.payload.as_value()
        self.prx_pay = dut.phy_rx.payload.as_value()



class LinkBench:
    """Two ends and two channels; ``run`` steps until every packet is delivered and acknowledged."""

    def __init__(self, cfg=SMALL, *, seed=0, packets_a=(), packets_b=(), idle_prob=0.0,
                 stall_prob=0.0, ready_fn=None, link_down=None, latency=12,
                 channel_ab=None, channel_ba=None, hook=None):
        self.cfg = cfg
        self.pair = Pair(cfg)
        self.rng = random.Random(seed)
        mk = lambda s, kw: FlitChannel(max_payload=cfg.max_payload, latency=latency, seed=s, **(kw or {}))
        self.a = End("a", self.pair.a, packets_a, mk(seed * 2 + 1, channel_ab))
        self.b = End("b", self.pair.b, packets_b, mk(seed * 2 + 2, channel_ba))
        self.a.peer, self.b.peer = self.b, self.a
        self.idle_prob, self.stall_prob, self.ready_fn = idle_prob, stall_prob, ready_fn
        self.link_down, self.hook = link_down, hook
        self.cycles, self.final = 0, {}
        # sampling costs ~25 us per signal per cycle: counters only when asked for
        fast = [[e.dut.tx_packet.ready, e.dut.phy_tx.valid, e.ptx_pay, e.dut.rx_packet.valid,
                 e.rx_pay, e.dut.rx_buffer_level, e.dut.replay_level, e.dut.rx_discarding]
                for e in (self.a, self.b)]
        self.sigs_fast = fast[0] + fast[1]
        self.sigs_full = [s for e, f in zip((self.a, self.b), fast)
                          for s in f + [getattr(e.dut, n) for n in COUNTERS]]
        self.full_sample = False
        self._driven = {}

    def done(self):
        return all(len(e.delivered) == len(e.peer.packets) for e in (self.a, self.b))

    async def step(self, ctx, cycle):
        """One cycle of both ends: drive inputs, tick, observe the handshakes of that cycle.

        A simulator *process* (not a testbench): ``ctx.set`` does not settle the
        design each time, and ``tick().sample`` returns every output as it was
        in this cycle, just before the edge (one settle per cycle: 4x faster).
        """
        ends = (self.a, self.b)
        driven = self._driven

        def drive(sig, value):               # ctx.set only on change: each call costs
            if driven.get(id(sig)) != value:
                driven[id(sig)] = value
                ctx.set(sig, value)
        if self.hook:
            self.hook(self, ctx, cycle)
        up = not (self.link_down and self.link_down[0] <= cycle < self.link_down[1])
        if self.link_down and cycle == self.link_down[0]:
            for e in ends:                       # retrain: what was on the wire is lost
                e.channel.queue.clear()
                e.channel._deliver(cycle - e.channel.latency, FlitKind.ERROR, 0)
        slots, readies = [], []
        for e in ends:
            d = e.dut
            drive(d.link_up, up)
            if e.cur is None and e.next_beat < len(e.beats) and self.rng.random() >= self.idle_prob:
                e.cur = e.beats[e.next_beat]
                drive(e.tx_pay, e.cur)
            drive(d.tx_packet.valid, e.cur is not None)
            ready = (self.ready_fn(e.name, cycle) if self.ready_fn else
                     self.rng.random() >= self.stall_prob)
            drive(d.rx_packet.ready, ready)
            readies.append(ready)
            slot = up and e.channel.slot(cycle)
            drive(d.phy_tx.ready, slot)
            slots.append(slot)
            beat = e.peer.channel.receive(cycle)
            drive(d.phy_rx.valid, beat is not None)
            if beat is not None:
                drive(e.prx_pay, int(beat[0]) << PHY["kind"].offset | beat[1] << PHY["data"].offset)
        _, _, *values = await ctx.tick().sample(*(self.sigs_full if self.full_sample
                                                  else self.sigs_fast))
        n = len(values) // 2
        for e, slot, ready, v in zip(ends, slots, readies, (values[:n], values[n:])):
            tx_ready, ptx_valid, ptx, rx_valid, rx, level, replay_level, discarding, *counters = v
            e.state.update(zip(COUNTERS, counters), rx_buffer_level=level,
                           replay_level=replay_level, rx_discarding=discarding)
            if e.cur is not None and tx_ready:
                if e.next_beat in e.last_beats:
                    e.tx_last_cycles.append(cycle)
                e.cur, e.next_beat = None, e.next_beat + 1
            if slot and ptx_valid:
                e.channel.send(cycle, ptx & 3, ptx >> PHY["data"].offset)
                e.flit_cycles.append(cycle)
            if ready and rx_valid:
                if not e.rx_beats:
                    e.rx_first_cycles.append(cycle)
                e.rx_beats.append(rx)
                if rx >> LAST_BIT & 1:
                    self._delivered(e)
            assert level <= self.cfg.rx_buffer_flits, f"{e.name}: receive buffer holds {level} flits"
            e.max_level = max(e.max_level, level)

    def _delivered(self, e):
        got = beats_to_packet(e.rx_beats)
        e.rx_beats = []
        k = len(e.delivered)
        assert k < len(e.peer.packets), f"{e.name}: extra packet delivered: {got}"
        want = e.peer.packets[k]
        assert got == want, f"{e.name}: packet {k} differs: got {got}, want {want}"
        e.delivered.append(got)

    def run(self, max_cycles=20000, drain=True, faults_in_drain=False):
        async def tb(ctx):
            with ctx.critical():
                await self._main(ctx, max_cycles, drain, faults_in_drain)

        sim = Simulator(self.pair)
        sim.add_clock(1e-9)
        sim.add_process(tb)
        sim.run()
        for e in (self.a, self.b):
            assert self.final[e.name]["overflows"] == 0
            check_wire(e, self.cfg)
        return self

    async def _main(self, ctx, max_cycles, drain, faults_in_drain):
        cycle = 0
        while cycle < max_cycles and not self.done():
            await self.step(ctx, cycle)
            cycle += 1
        assert self.done(), (f"not everything delivered in {max_cycles} cycles: "
                             f"a {len(self.a.delivered)}/{len(self.b.packets)}, "
                             f"b {len(self.b.delivered)}/{len(self.a.packets)}")
        if drain:                            # every frame acknowledged, nothing left anywhere
            for e in (self.a, self.b):
                e.channel.faults_enabled = faults_in_drain
            limit = cycle + 20 * self.cfg.replay_timeout
            quiet = 0
            while cycle < limit and quiet < 8:
                await self.step(ctx, cycle)
                cycle += 1
                settled = (self.a.state["replay_level"] == self.b.state["replay_level"] == 0
                           and not self.a.state["rx_discarding"] and not self.b.state["rx_discarding"]
                           and self.a.channel.idle() and self.b.channel.idle())
                quiet = quiet + 1 if settled else 0
            for e in (self.a, self.b):
                assert e.state["replay_level"] == 0, f"{e.name}: frames never acknowledged"
                assert e.state["rx_buffer_level"] == 0
                assert not e.state["rx_discarding"], f"{e.name}: an error episode never ended"
        self.full_sample = True               # one more cycle to read the counters
        await self.step(ctx, cycle)
        self.cycles = cycle + 1
        self.final = {e.name: {n: e.state[n] for n in COUNTERS} for e in (self.a, self.b)}


def check_wire(e, cfg, crc=crc32c, fixed_fields=None):
    """Every frame ``e`` sent (before faults) equals pack_frame of the packet with its seq."""
    S = 1 << cfg.seq_bits
    new = 0
    for flits, frame, ok in e.channel.sent_monitor.frames:
        assert ok, f"{e.name}: frame with a bad CRC on the wire: {frame}"
        if frame.frame_type == FrameType.LINK_CTRL:
            assert len(flits) == 1 and frame.seq == 0 and frame.payload_words == 0
            continue
        assert frame.frame_type == FrameType.DATA
        if frame.seq == new % S:
            index, new = new, new + 1
        else:
            index = new - ((new - frame.seq) % S)
            assert new - index <= S // 2, f"{e.name}: replay of seq {frame.seq} out of window"
        txn, payload = e.packets[index]
        if fixed_fields is not None:
            assert (frame.ack_seq, frame.nak, frame.credit_limit) == fixed_fields
        want = pack_frame(FrameType.DATA, frame.seq, frame.ack_seq, frame.nak, frame.credit_limit,
                          txn, payload, crc=crc)
        assert flits == want, f"{e.name}: frame {index} (seq {frame.seq}) differs from pack_frame"
    return new


# ---- reference model -------------------------------------------------------------------------

def test_crc32c_reference_and_rtl_matrix():
    assert crc32c(b"123456789") == CRC32C_CHECK
    sw = catalog.CRC32_ISCSI(8)
    rng = random.Random(1)
    for n in (0, 1, 7, 64, 129):
        msg = rng.randbytes(n)
        assert crc32c(msg) == sw.compute(msg)
    # the RTL's XOR matrix on two flits == the bytewise reference over their 128 bytes
    masks = crc32c_matrix(512)
    flits = [rng.getrandbits(512) for _ in range(2)]
    state = 0xFFFFFFFF
    for f in flits:
        vec = state | f << 32
        state = sum((bin(mk & vec).count("1") & 1) << i for i, mk in enumerate(masks))
    assert state ^ 0xFFFFFFFF == crc32c(b"".join(f.to_bytes(64, "little") for f in flits))
    assert crc32c(b"123456789") != zlib.crc32(b"123456789")   # not the Ethernet CRC


def test_pack_unpack_frame():
    rng = random.Random(2)
    assert [frame_flits(32 * n) for n in (0, 1, 2, 3, 32)] == [1, 2, 2, 3, 17]
    for n in (0, 1, 2, 3, 32):
        payload = rng.randbytes(32 * n)
        flits = pack_frame(FrameType.DATA, 5, 7, 1, 300, 0xABC, payload)
        assert len(flits) == frame_flits(32 * n)
        frame, ok = unpack_frame(flits)
        assert ok and frame.payload == payload and frame.transaction == 0xABC
        assert (frame.seq, frame.ack_seq, frame.nak, frame.credit_limit) == (5, 7, 1, 300)
        bad = list(flits)
        bad[-1] ^= 1 << 100
        assert not unpack_frame(bad)[1]
    assert beats_to_packet(packet_beats(0x55, b"\1" * 64)) == (0x55, b"\1" * 64)


# ---- RTL -------------------------------------------------------------------------------------

def test_tx_flits_bit_exact():
    """One-way traffic: A's frames are exactly pack_frame(seq k, ack 0, nak 0, credit = buffer)."""
    rng = random.Random(3)
    cfg = LinkConfig(max_payload=224, replay_flits=40, rx_buffer_flits=40, seq_bits=6,
                     replay_timeout=400)
    packets = random_packets(rng, 24, cfg, sizes=[0, 1, 2, 3, 5, 7, 4, 6])
    bench = LinkBench(cfg, seed=3, packets_a=packets, idle_prob=0.3, stall_prob=0.3).run()
    assert check_wire(bench.a, cfg, fixed_fields=(0, 0, cfg.rx_buffer_flits)) == len(packets)
    fa = bench.final["a"]
    assert fa["frames_sent"] == len(packets) and fa["replays"] == 0
    assert bench.final["b"]["frames_received"] == len(packets)


def test_wrong_reference_fails():
    """The checker is not vacuous: a wrong CRC in the reference makes the wire check fail."""
    rng = random.Random(4)
    bench = LinkBench(SMALL, seed=4, packets_a=random_packets(rng, 3, SMALL)).run()
    with pytest.raises(AssertionError, match="differs from pack_frame"):
        check_wire(bench.a, SMALL, crc=lambda b: crc32c(b) ^ 1)
    with pytest.raises(AssertionError, match="differs from pack_frame"):
        check_wire(bench.a, SMALL, crc=zlib.crc32)


@pytest.mark.parametrize("idle,stall", [(0.0, 0.0), (0.4, 0.5)])
def test_random_both_directions(idle, stall):
    rng = random.Random(5)
    pa, pb = random_packets(rng, 40, SMALL), random_packets(rng, 40, SMALL)
    bench = LinkBench(SMALL, seed=5, packets_a=pa, packets_b=pb, idle_prob=idle,
                      stall_prob=stall).run()
    for name in "ab":
        f = bench.final[name]
        assert f["frames_received"] == 40 and f["crc_errors"] == f["replays"] == 0
        assert f["duplicates"] == f["seq_errors"] == f["malformed_frames"] == 0


def _assert_recovered(bench, *names):
    for name in names:
        f = bench.final[name]
        assert f["replays"] >= 1, f


def test_bit_errors_and_error_beats():
    rng = random.Random(6)
    pa, pb = random_packets(rng, 40, SMALL), random_packets(rng, 40, SMALL)
    ch = {"flip_prob": 0.06, "error_beat_prob": 0.4}
    bench = LinkBench(SMALL, seed=6, packets_a=pa, packets_b=pb, idle_prob=0.2, stall_prob=0.2,
                      channel_ab=ch, channel_ba=ch).run()
    fa, fb = bench.final["a"], bench.final["b"]
    inj_ab = bench.a.channel.injected
    assert inj_ab["flip"] and inj_ab["error"]
    assert fb["crc_errors"] + fb["malformed_frames"] >= 1 and fb["error_beats"] >= 1
    assert fb["naks_sent"] >= 1 and fa["naks_received"] >= 1 and fa["replays"] >= 1
    assert fb["frames_received"] == fa["frames_sent"] - fb["duplicates"] - _lost(bench.a, fb)


def _lost(e, peer_counters):
    """Frames sent by e that the peer neither accepted nor counted as duplicates (lost or damaged)."""
    return sum(1 for _, fr, _ in e.channel.sent_monitor.frames
               if fr.frame_type == FrameType.DATA) - peer_counters["frames_received"] \
        - peer_counters["duplicates"]


def test_dropped_flits():
    rng = random.Random(7)
    pa, pb = random_packets(rng, 30, SMALL), random_packets(rng, 30, SMALL)
    ch = {"drop_prob": 0.05}
    bench = LinkBench(SMALL, seed=7, packets_a=pa, packets_b=pb, channel_ab=ch, channel_ba=ch,
                      idle_prob=0.2).run()
    assert bench.a.channel.injected["drop"] and bench.b.channel.injected["drop"]
    _assert_recovered(bench, "a", "b")


def _nth_matching(pred, n=0):
    """A fault rule acting on the n-th flit for which pred(kind, data, position) holds."""
    state = {"seen": 0, "armed": True}

    def rule(index, kind, data, position):
        if state["armed"] and pred(kind, data, position):
            if state["seen"] == n:
                state["armed"] = False
                return ("drop",)
            state["seen"] += 1
        return None
    return rule


def _is_header(kind, data, position):
    return kind == FlitKind.DATA and position is not None and position[0] == 0


def _header(data):
    return unpack_fields(frame_header_layout, data & ((1 << 256) - 1))


def test_dropped_nak():
    """A->B: one flit damaged (B NAKs); B->A: that NAK frame dropped -> recovered by timeout / NAK retry."""
    rng = random.Random(8)
    pa = random_packets(rng, 12, SMALL)
    damage = lambda i, k, d, p: ("flip", 300) if i == 6 else None
    drop_nak = _nth_matching(lambda k, d, p: _is_header(k, d, p) and _header(d)["nak"])
    bench = LinkBench(SMALL, seed=8, packets_a=pa, channel_ab={"fault": damage},
                      channel_ba={"fault": drop_nak}).run()
    assert bench.b.channel.injected["drop"] == 1
    fa, fb = bench.final["a"], bench.final["b"]
    assert fb["naks_sent"] >= 1 and fa["timeouts"] + fa["naks_received"] >= 1
    assert fa["replays"] >= 1


def test_nak_retry_when_partner_has_nothing_outstanding():
    """B->A data only. A's first LINK_CTRL (its ack) is damaged, B's NAK for it is dropped: A has
    nothing outstanding to time out on, so only B sending the NAK again ends B's discarding."""
    rng = random.Random(20)
    pb = random_packets(rng, 6, SMALL)
    state = {"hit": False}

    def damage_ctrl(index, kind, data, position):
        if not state["hit"] and _is_header(kind, data, position):
            state["hit"] = True
            return ("flip", 1000 % 512)
        return None
    drop_nak = _nth_matching(lambda k, d, p: _is_header(k, d, p) and _header(d)["nak"])
    bench = LinkBench(SMALL, seed=20, packets_b=pb, channel_ab={"fault": damage_ctrl},
                      channel_ba={"fault": drop_nak}).run()
    fa, fb = bench.final["a"], bench.final["b"]
    assert bench.b.channel.injected["drop"] == 1 and fb["crc_errors"] == 1
    assert fb["naks_sent"] == 2 and fa["naks_received"] == 1 and fa["replays"] == 1


def test_dropped_resync():
    """A->B: one flit damaged, then the RESYNC of the replay dropped -> timeout, replay again."""
    rng = random.Random(9)
    pa, pb = random_packets(rng, 12, SMALL), random_packets(rng, 4, SMALL)
    state = {"damaged": False, "dropped": False}

    def fault(index, kind, data, position):
        if index == 5:
            state["damaged"] = True
            return ("error",)
        if state["damaged"] and not state["dropped"] and kind == FlitKind.RESYNC:
            state["dropped"] = True
            return ("drop",)
        return None
    bench = LinkBench(SMALL, seed=9, packets_a=pa, packets_b=pb, channel_ab={"fault": fault}).run()
    assert state["dropped"]
    fa = bench.final["a"]
    assert fa["replays"] >= 2 and fa["timeouts"] + fa["naks_received"] >= 2


def test_dropped_last_frame():
    """The last frame's first transmission vanishes -> only the timeout can recover it."""
    rng = random.Random(10)
    pa = random_packets(rng, 6, SMALL, sizes=[2])
    last_seq = (len(pa) - 1) % (1 << SMALL.seq_bits)
    state = {"frame": False, "done": False}

    def fault(index, kind, data, position):
        if state["done"] or kind != FlitKind.DATA:
            return None
        if position[0] == 0:
            state["frame"] = _header(data)["seq"] == last_seq and _header(data)["frame_type"] == 1
        if state["frame"]:
            state["done"] = position[0] == position[1] - 1
            return ("drop",)
        return None
    bench = LinkBench(SMALL, seed=10, packets_a=pa, channel_ab={"fault": fault}).run()
    fa = bench.final["a"]
    assert bench.a.channel.injected["drop"] == frame_flits(64)
    assert fa["timeouts"] == 1 and fa["replays"] == 1 and fa["naks_received"] == 0


def test_lost_acks_duplicates_reacked():
    """Every B->A flit before cycle 150 is lost (all acks): A times out and replays, B drops the
    duplicates and must acknowledge them again, or A would replay forever."""
    rng = random.Random(19)
    pa = random_packets(rng, 4, SMALL)
    box = {}
    lose = lambda index, kind, data, position: ("drop",) if box["ch"].now < 150 else None
    bench = LinkBench(SMALL, seed=19, packets_a=pa, channel_ba={"fault": lose})
    box["ch"] = bench.b.channel
    bench.run(faults_in_drain=True)
    fa, fb = bench.final["a"], bench.final["b"]
    assert bench.b.channel.injected["drop"] >= 2
    assert fa["timeouts"] == 1 and fa["replays"] == 1 and fb["duplicates"] == len(pa)


def test_slow_receiver_stalls_sender():
    """B does not drain for 1500 cycles: A stops on credits, nothing lost, buffer never overflows."""
    rng = random.Random(11)
    pa = random_packets(rng, 40, SMALL)
    window = (50, 1550)
    ready = lambda name, cycle: name == "a" or not window[0] <= cycle < window[1]
    bench = LinkBench(SMALL, seed=11, packets_a=pa, ready_fn=ready, idle_prob=0.1).run()
    late = [c for c in bench.a.flit_cycles if window[0] + 300 <= c < window[1]]
    assert not late, f"sender kept sending without credits: flits in cycles {late[:5]}"
    assert bench.b.max_level >= SMALL.rx_buffer_flits - 2        # it did fill up
    fa = bench.final["a"]
    assert fa["replays"] == 0 and fa["timeouts"] == 0


def test_malformed_header_on_wire():
    """Frames with a bad frame_type / oversize length (good CRC) injected A->B: dropped, counted."""
    rng = random.Random(12)
    pa = random_packets(rng, 10, SMALL)
    bad_type = pack_frame(3, 0, 0, 0, 0, 0x77, b"\x55" * 64)
    too_long = pack_frame(FrameType.DATA, 2, 0, 0, 0, 0x66, b"\x44" * 64, payload_words=9)
    inserts = {3: bad_type, 12: too_long}

    def fault(index, kind, data, position):
        if index in inserts and _is_header(kind, data, position):
            return ("insert", [(FlitKind.DATA, f) for f in inserts.pop(index)])
        if index in inserts:           # not at a frame boundary: try the next flit
            inserts[index + 1] = inserts.pop(index)
        return None
    bench = LinkBench(SMALL, seed=12, packets_a=pa, channel_ab={"fault": fault}).run()
    assert not inserts
    fb = bench.final["b"]
    assert fb["malformed_frames"] == 2 and fb["naks_sent"] >= 2
    assert fb["frames_received"] == len(pa)


def test_link_drop_and_retrain():
    rng = random.Random(13)
    pa, pb = random_packets(rng, 30, SMALL), random_packets(rng, 30, SMALL)
    bench = LinkBench(SMALL, seed=13, packets_a=pa, packets_b=pb, link_down=(150, 400)).run()
    for name in "ab":
        f = bench.final[name]
        assert f["error_beats"] >= 1 and f["replays"] >= 1


def test_reset_returns_to_power_up():
    rng = random.Random(14)
    pa, pb = random_packets(rng, 30, SMALL), random_packets(rng, 30, SMALL)
    snapshot, before = {}, {}

    def hook(bench, ctx, cycle):
        # mid-traffic, both ends (and the wire) reset at once; during the reset cycle
        # no stream handshakes may happen, so the transaction-layer models restart too
        if 119 <= cycle <= 123:
            bench.full_sample = cycle != 123
        for e in (bench.a, bench.b):
            ctx.set(e.dut.reset, cycle == 120)
            if cycle == 120:
                before[e.name] = dict(e.state)
            if cycle == 121:
                e.channel.queue.clear()
                e.channel.sent_monitor.__init__(SMALL.max_payload)
                e.next_beat, e.cur, e.rx_beats, e.delivered = 0, None, [], []
            if cycle == 122:        # e.state = what the design showed in cycle 121, after the reset
                snapshot[e.name] = dict(e.state)
    bench = LinkBench(SMALL, seed=14, packets_a=pa, packets_b=pb, hook=hook).run()
    for name in "ab":
        assert before[name]["frames_received"] > 0           # there was traffic to forget
        assert all(v == 0 for v in snapshot[name].values()), snapshot[name]
        assert 0 < before[name]["frames_received"] < 30
        assert bench.final[name]["frames_received"] == 30     # counted from the reset on


def test_oversize_packet_dropped():
    rng = random.Random(15)
    good = random_packets(rng, 3, SMALL)
    oversize = (0x99, rng.randbytes(32 * 5))               # 5 words > max_payload 128 B
    bench = LinkBench(SMALL, seed=15, packets_a=good[:1] + [oversize] + good[1:])
    bench.a.packets = good                                  # what B must deliver
    bench.run()
    assert bench.final["a"]["oversize_packets"] == 1


def test_constructor_arguments():
    with pytest.raises(ValueError, match=r"got 'x'"):
        LinkLayer("x")
    with pytest.raises(ValueError, match=r"got lanes=4"):
        LinkLayer(LinkConfig(lanes=4))
    with pytest.raises(ValueError, match=r"max_payload.*got 100"):
        LinkConfig(max_payload=100)
    with pytest.raises(ValueError, match=r"replay_flits.*got 2"):
        LinkConfig(replay_flits=2)
    with pytest.raises(ValueError, match=r"replay_timeout.*got 3"):
        LinkConfig(replay_timeout=3)


def test_latency_and_goodput_small():
    """Cycle behaviour promised in the module docstring (first flit, delivery, ack, a flit per slot)."""
    for words, extra in ((2, 0), (1, 1)):
        replay_level = []
        hook = lambda bench, ctx, cycle, level=replay_level: level.append(bench.a.state.get("replay_level"))
        bench = LinkBench(SMALL, seed=16, packets_a=[(1, bytes(32 * words))], hook=hook).run()
        # tx_packet last beat -> first flit (this seed has a PHY slot free at once)
        assert bench.a.flit_cycles[0] - bench.a.tx_last_cycles[0] == 3 + extra
        # last flit on phy_rx -> header beat on rx_packet
        arrive = bench.a.flit_cycles[frame_flits(32 * words) - 1] + 12
        assert bench.b.rx_first_cycles[0] - arrive == 2
        # accepted -> B's LINK_CTRL flit (valid in arrive + 3, taken at the next slot) ->
        # A frees the flits 2 cycles after it arrived (replay_level[c] = value in cycle c - 1)
        ctrl = bench.b.flit_cycles[0]
        assert arrive + 3 <= ctrl <= arrive + 5
        freed = next(c for c in range(ctrl, len(replay_level)) if replay_level[c] == 0) - 1
        assert freed == ctrl + 12 + 2
    # goodput: back to back 64-byte packets, plenty of credit: a flit in every slot
    cfg = LinkConfig(max_payload=128, replay_flits=64, rx_buffer_flits=64, replay_timeout=1000)
    bench = LinkBench(cfg, seed=17, packets_a=[(i, bytes(64)) for i in range(40)]).run()
    flits = bench.a.flit_cycles
    assert len(flits) == 80 and abs((flits[-1] - flits[0]) - 79 * 66 / 25) <= 2


def test_goodput_max_payload_default_config():
    """Default config, 1 KiB packets back to back: 17 flits each, one in every PHY slot."""
    cfg = LinkConfig()
    rng = random.Random(18)
    pa = [(i, rng.randbytes(1024)) for i in range(10)]
    bench = LinkBench(cfg, seed=18, packets_a=pa).run()
    flits = bench.a.channel.sent
    data = [c for c, k, d in flits if k == FlitKind.DATA]
    assert len(data) == 170
    slots = (data[-1] - data[0]) * 25 / 66 + 1
    goodput = 10 * 1024 / slots                           # payload bytes per flit slot
    assert goodput >= 1024 / 17 - 0.5, goodput
    assert bench.final["a"]["replays"] == 0 and bench.final["b"]["frames_received"] == 10


@pytest.mark.parametrize("seed", [20])
def test_default_config(seed):
    """Default LinkConfig (1 KiB payloads, 64-flit buffers): mixed sizes both ways, max-payload goodput."""
    cfg = LinkConfig()
    rng = random.Random(seed)
    pa = random_packets(rng, 6, cfg, sizes=[0, 1, 2, 31, 32]) + [(7, rng.randbytes(1024))] * 4
    pb = random_packets(rng, 6, cfg, sizes=[0, 3, 32])
    bench = LinkBench(cfg, seed=seed, packets_a=pa, packets_b=pb,
                      channel_ab={"fault": lambda i, k, d, p: ("flip", 77) if i == 20 else None}).run()
    assert bench.final["b"]["crc_errors"] == 1 and bench.final["a"]["replays"] == 1



@pytest.mark.sim
@pytest.mark.parametrize("seed", range(100, 108))
def test_stress_faults(seed):
    """Long random runs: flips, ERROR beats, drops, stalls, back-pressure, both ways (make sim)."""
    rng = random.Random(seed)
    cfg = LinkConfig(max_payload=rng.choice([64, 128, 256]), replay_flits=rng.choice([9, 16, 24]),
                     rx_buffer_flits=rng.choice([9, 12, 20]), seq_bits=rng.choice([4, 5, 12]),
                     replay_timeout=400)
    pa, pb = random_packets(rng, 150, cfg), random_packets(rng, 150, cfg)
    ch = lambda: {"flip_prob": rng.choice([0.0, 0.01, 0.03]), "error_beat_prob": 0.3,
                  "drop_prob": rng.choice([0.0, 0.01]), "stall_prob": 0.1}
    bench = LinkBench(cfg, seed=seed, packets_a=pa, packets_b=pb, idle_prob=rng.random() * 0.5,
                      stall_prob=rng.random() * 0.5, channel_ab=ch(), channel_ba=ch(),
                      latency=rng.choice([3, 12, 40])).run(max_cycles=60000)
    for name in "ab":
        assert bench.final[name]["frames_received"] == 150
