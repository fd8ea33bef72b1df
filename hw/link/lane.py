"""One DIMM-Link lane: 64b/66b scrambler, gearbox, rate pacer (TX); gearbox, block lock, descrambler (RX).

Formats are those of ``formats`` (a block = 2-bit sync header + 64 payload
bits, ``SyncHeader``); ``docs/dimm_link.md`` section "Lane" is the protocol.
The pure-Python reference is ``ndpdimm.cosim.link.line_code`` (bit-exact).

Wire bit stream
---------------
Block ``k`` occupies stream bits ``[66 k, 66 k + 66)``: sync bit 0, sync bit 1,
then scrambled payload bits 0..63.  Chunk ``j`` (``chunk_bits`` wide) carries
stream bits ``[C j, C j + C)``, bit 0 of the chunk first.  The scrambler is the
self-synchronous x^58 + x^39 + 1 of IEEE 802.3 clause 49, applied bit-serially
in wire order (``s[n] = d[n] ^ s[n-39] ^ s[n-58]``) to the payload bits only;
the TX scrambler starts from :data:`SCRAMBLER_SEED`, the RX descrambler from 0
(it is synchronised after 58 bits, long before a lane can lock).

``LinkLaneTx(config, lane)`` - cycle behaviour
----------------------------------------------
* Rate pacer: an accumulator adds ``lane_bits_per_cycle`` (L) every cycle; in
  a cycle where it reaches ``chunk_bits`` (C) the pacer *ticks* and subtracts
  C. Over N cycles from reset it ticks ``floor(N L / C)`` times, so the lane
  carries exactly L bits per cycle on average (25 of every 32 cycles at the
  default 25/32).
* Gearbox: a bit buffer of ``C + 65`` bits. On a tick with at least C bits
  buffered, ``serial`` = the oldest C bits and ``serial_valid`` = 1 (both are
  combinational from registers only, so a channel can be a plain wire).
  ``blocks.ready`` is high in a cycle where, after that cycle's chunk, fewer
  than C bits would remain: the block taken then is appended behind them, so
  the wire never starves while the producer keeps ``valid`` high. If the
  producer has nothing, the next tick finds fewer than C bits and emits
  nothing (the stream of valid chunks stays gap-free bit-wise).
* Latency: a block taken in cycle t is in the buffer in t + 1 behind fewer
  than C older bits; its first bit leaves in the first or second tick after
  t, its last bit about ``66 / L`` cycles later (2.64 at 25 b/cycle).
* ``lane`` is the lane number this instance serves (checked against
  ``config.lanes``); the PHY puts it in the control blocks it sends.

``LinkLaneRx(config)`` - cycle behaviour
----------------------------------------
* Gearbox: ``serial`` is appended to a ``C + 66``-bit buffer in each cycle
  ``serial_valid`` is high. In a cycle where at least 67 bits are buffered
  (one spare bit, so a slip can always be made) the oldest 66 form a
  candidate block; it is consumed (66 bits, or 67 on a slip). At most one
  block per cycle, so ``chunk_bits`` is limited to 64.
* Lock (IEEE 802.3 clause 49 style): while hunting, an invalid sync header
  (``00``/``11``) resets the good count and slips one bit; ``lock_blocks``
  valid headers in a row lock. A locked lane counts invalid headers in fixed
  windows of 64 blocks; the ``unlock_errors``-th invalid header of a window
  unlocks the lane (and slips one bit, as the standard does).
* Output: every candidate evaluated while locked (the state before it) is
  delivered on ``blocks`` one cycle later (registered; ``valid`` only, a wire
  cannot be stalled), descrambled, with ``invalid`` set for a bad sync header.
  The block that completes lock is not delivered; the one that drops it is
  (invalid). Latency: the cycle after the chunk that completes a block (plus
  one more bit) arrives, the block is evaluated; it is on ``blocks`` the cycle
  after that: 2 cycles from ``serial_valid`` of its last chunk.
* ``locked`` is the lock state; ``sync_errors`` counts invalid headers seen
  while locked, ``lock_losses`` the times the lock dropped (both wrap).
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import check_int
from ndpdimm.hw.link.formats import BLOCK_BITS, SYNC_BITS, LinkConfig

__all__ = ["LinkLaneTx", "LinkLaneRx", "lane_block_layout", "lane_rx_block_layout",
           "BLOCK_WIRE_BITS", "SCRAMBLER_BITS", "SCRAMBLER_TAP", "SCRAMBLER_SEED",
           "LOCK_WINDOW_BLOCKS", "LANE_COUNTER_BITS", "MAX_LANE_CHUNK_BITS", "check_lane_config"]

#: Bits of one block on the wire.
BLOCK_WIRE_BITS = SYNC_BITS + BLOCK_BITS
#: Length of the scrambler's memory (x^58) and its inner tap (x^39).
SCRAMBLER_BITS = 58
SCRAMBLER_TAP = 39
#: Reset state of the TX scrambler (bit k = the scrambled bit sent 58 - k bits ago).
SCRAMBLER_SEED = (1 << SCRAMBLER_BITS) - 1
#: Blocks of one error-counting window of a locked receiver.
LOCK_WINDOW_BLOCKS = 64
#: Width of the lane counters.
LANE_COUNTER_BITS = 32
#: Widest chunk a receiver can take (it evaluates at most one 66-bit block per cycle).
MAX_LANE_CHUNK_BITS = 64

# Not in formats.py (which has no per-lane block type): a block as the PHY hands it to a lane.
#: TX input: one block, payload not yet scrambled.
lane_block_layout = data.StructLayout({
    "sync": SYNC_BITS,          # SyncHeader
    "payload": BLOCK_BITS,
})

#: RX output: one block, payload descrambled, ``invalid`` = sync header was 00 or 11.
lane_rx_block_layout = data.StructLayout({
    "sync": SYNC_BITS,
    "payload": BLOCK_BITS,
    "invalid": 1,
})


def check_lane_config(config) -> LinkConfig:
    """Return ``config`` if a lane can be built for it; else ``ValueError`` quoting the bad value."""
    if not isinstance(config, LinkConfig):
        raise ValueError(f"config must be a LinkConfig, got {config!r}")
    if config.chunk_bits > MAX_LANE_CHUNK_BITS:
        raise ValueError(f"chunk_bits must be at most {MAX_LANE_CHUNK_BITS} (the receiver takes one "
                         f"block per cycle), got {config.chunk_bits!r}")
    return config


class LinkLaneTx(wiring.Component):
    """Lane transmitter: scrambler, gearbox, rate pacer (see module docstring).

    Ports: ``blocks`` In(stream of :data:`lane_block_layout`), ``serial``
    Out(chunk_bits), ``serial_valid`` Out(1).
    """

    def __init__(self, config: LinkConfig, lane: int = 0):
        self.config = check_lane_config(config)
        self.lane = check_int("lane", lane, 0, config.lanes - 1)
        super().__init__({
            "blocks": In(stream.Signature(lane_block_layout)),
            "serial": Out(config.chunk_bits),
            "serial_valid": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        c = self.config.chunk_bits
        rate = self.config.lane_bits_per_cycle
        width = c + BLOCK_WIRE_BITS - 1

        # pacer
        acc = Signal(range(c))
        tick = Signal()
        m.d.comb += tick.eq(acc + rate >= c)
        m.d.sync += acc.eq(acc + rate - Mux(tick, c, 0))

        # gearbox
        buf = Signal(width)
        fill = Signal(range(width + 1))
        emit = Signal()
        fill_after = Signal(range(width + 1))
        m.d.comb += [
            emit.eq(tick & (fill >= c)),
            fill_after.eq(fill - Mux(emit, c, 0)),
            self.serial.eq(buf[:c]),
            self.serial_valid.eq(emit),
            self.blocks.ready.eq(fill_after < c),
        ]
        take = self.blocks.valid & self.blocks.ready

        # scrambler, 64 bits at once: e = Cat(state, s), s[i] = d[i] ^ e[i + 19] ^ e[i]
        state = Signal(SCRAMBLER_BITS, init=SCRAMBLER_SEED)
        d = self.blocks.payload.payload
        t = SCRAMBLER_BITS - SCRAMBLER_TAP                                  # 19
        s_lo = d[:SCRAMBLER_TAP] ^ state[t:] ^ state[:SCRAMBLER_TAP]        # bits 0..38
        s_mid = d[SCRAMBLER_TAP:SCRAMBLER_BITS] ^ s_lo[:t] ^ state[SCRAMBLER_TAP:]   # 39..57
        s_hi = d[SCRAMBLER_BITS:] ^ s_lo[t:t + BLOCK_BITS - SCRAMBLER_BITS] \
            ^ s_lo[:BLOCK_BITS - SCRAMBLER_BITS]                            # 58..63
        scrambled = Cat(s_lo, s_mid, s_hi)
        word = Cat(self.blocks.payload.sync, scrambled)

        m.d.sync += [
            buf.eq(Mux(emit, buf >> c, buf) | Mux(take, word << fill_after, 0)),
            fill.eq(fill_after + Mux(take, BLOCK_WIRE_BITS, 0)),
        ]
        with m.If(take):
            m.d.sync += state.eq(scrambled[BLOCK_BITS - SCRAMBLER_BITS:])
        return m


class LinkLaneRx(wiring.Component):
    """Lane receiver: gearbox, block lock, descrambler (see module docstring).

    Ports: ``serial`` In(chunk_bits), ``serial_valid`` In(1), ``blocks``
    Out(stream of :data:`lane_rx_block_layout`, always ready), ``locked``,
    ``sync_errors``, ``lock_losses`` Out.
    """

    def __init__(self, config: LinkConfig):
        self.config = check_lane_config(config)
        super().__init__({
            "serial": In(config.chunk_bits),
            "serial_valid": In(1),
            "blocks": Out(stream.Signature(lane_rx_block_layout, always_ready=True)),
            "locked": Out(1),
            "sync_errors": Out(LANE_COUNTER_BITS),
            "lock_losses": Out(LANE_COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.config
        c = cfg.chunk_bits
        width = c + BLOCK_WIRE_BITS

        buf = Signal(width)
        fill = Signal(range(width + 1))
        have = Signal()
        m.d.comb += have.eq(fill >= BLOCK_WIRE_BITS + 1)
        sync = buf[:SYNC_BITS]
        scrambled = buf[SYNC_BITS:BLOCK_WIRE_BITS]
        header_ok = sync[0] ^ sync[1]

        # lock state machine
        good = Signal(range(cfg.lock_blocks + 1))
        window = Signal(range(LOCK_WINDOW_BLOCKS))
        errors = Signal(range(cfg.unlock_errors + 1))
        unlock = Signal()
        slip = Signal()
        m.d.comb += [
            unlock.eq(self.locked & ~header_ok & (errors + 1 >= cfg.unlock_errors)),
            slip.eq(have & ~header_ok & (~self.locked | unlock)),
        ]
        with m.If(have):
            with m.If(~self.locked):
                with m.If(header_ok):
                    m.d.sync += good.eq(good + 1)
                    with m.If(good + 1 == cfg.lock_blocks):
                        m.d.sync += [self.locked.eq(1), window.eq(0), errors.eq(0)]
                with m.Else():
                    m.d.sync += good.eq(0)
            with m.Elif(unlock):
                m.d.sync += [self.locked.eq(0), good.eq(0),
                             self.lock_losses.eq(self.lock_losses + 1)]
            with m.Elif(window == LOCK_WINDOW_BLOCKS - 1):
                m.d.sync += [window.eq(0), errors.eq(0)]
            with m.Else():
                m.d.sync += [window.eq(window + 1), errors.eq(errors + ~header_ok)]
            with m.If(self.locked & ~header_ok):
                m.d.sync += self.sync_errors.eq(self.sync_errors + 1)

        # gearbox: consume the candidate (66 bits, 67 on a slip), then append the chunk
        fill_after = Signal(range(width + 1))
        m.d.comb += fill_after.eq(fill - Mux(have, BLOCK_WIRE_BITS + slip, 0))
        rest = Mux(have, Mux(slip, buf >> (BLOCK_WIRE_BITS + 1), buf >> BLOCK_WIRE_BITS), buf)
        m.d.sync += [
            buf.eq(rest | Mux(self.serial_valid, self.serial << fill_after, 0)),
            fill.eq(fill_after + Mux(self.serial_valid, c, 0)),
        ]

        # descrambler: d[i] = s[i] ^ e[i + 19] ^ e[i], e = Cat(state, s); feed-forward
        state = Signal(SCRAMBLER_BITS)
        e = Cat(state, scrambled)
        t = SCRAMBLER_BITS - SCRAMBLER_TAP
        plain = scrambled ^ e[t:t + BLOCK_BITS] ^ e[:BLOCK_BITS]
        m.d.sync += self.blocks.valid.eq(have & self.locked)
        with m.If(have):
            m.d.sync += [
                state.eq(scrambled[BLOCK_BITS - SCRAMBLER_BITS:]),
                self.blocks.payload.sync.eq(sync),
                self.blocks.payload.payload.eq(plain),
                self.blocks.payload.invalid.eq(~header_ok),
            ]
        return m

