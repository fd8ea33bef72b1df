"""DMA engine: copies between DRAM (through a memory-client port) and the on-chip SRAM (one SRAM port).

Descriptor (``desc``, one stream beat of :func:`dma_descriptor_layout`)
---------------------------------------------------------------------
``to_dram`` (0: DRAM -> SRAM, 1: SRAM -> DRAM), ``dram_addr`` (DIMM-local byte
address), ``sram_addr`` (SRAM byte address), ``n_bytes``. Burst ``k`` of the
transfer is the 64 B at ``dram_addr + 64k`` and the 64 B at ``sram_addr + 64k``
(``64 / word_bytes`` consecutive SRAM words, 2 at the default 256-bit word):
byte ``i`` of the burst is byte ``i`` of those SRAM bytes.

Rules, checked in this order in the cycle after the descriptor is taken and
*before any side effect* (no DRAM request, no SRAM access):

* ``dram_addr`` or ``n_bytes`` not a multiple of 64 (a burst), or ``sram_addr``
  not a multiple of the SRAM word -> ``MISALIGNED`` (also for ``n_bytes == 0``);
* ``dram_addr + n_bytes > capacity`` -> ``DRAM_RANGE``;
* ``sram_addr + n_bytes > SRAM size`` -> ``SRAM_RANGE``;
* ``n_bytes == 0`` -> ``OK`` at once, nothing moved.

An error is reported at once on ``status`` and the descriptor is dropped.

Status (``status``, one beat of :func:`dma_status_layout` per descriptor)
----------------------------------------------------------------------
``code`` (a :class:`~.port.Status`) and ``cycles``: cycles from the
descriptor handshake to the first cycle ``status.valid`` is high (modulo 2**32).
On success it is sent, DRAM -> SRAM, once the last SRAM write was accepted (so
a later SRAM read from any port sees the data), SRAM -> DRAM once every write
acknowledgement came back (so the data is in the DRAM). One descriptor at a
time: ``desc.ready`` is high only while idle, i.e. after the previous status
beat was taken.

Counters (``Out``, since reset, wrapping): ``bytes_moved`` (an SRAM word per
SRAM write, 64 per DRAM write acknowledgement), ``busy_cycles`` (cycles with
``busy`` high: from the descriptor handshake until the status beat is taken).

Datapath and cycle behaviour
----------------------------
Requests go out on memory lane 0 only (one burst per cycle, twice what the
SRAM port can feed; the other lanes stay idle). The lane is a register; the
tag of burst ``k`` is ``k`` (the SRAM is at most 2**15 bursts, so it fits), and
at most ``max_outstanding`` requests are in flight: counted from the cycle a
request is loaded into the lane register to the cycle its response is taken.

* DRAM -> SRAM: read requests for bursts 0, 1, 2 ... one per cycle while
  fewer than ``max_outstanding`` are in flight. Responses (any rank, any
  order) are taken round robin over the ranks into a one-burst buffer, from
  which the burst's words are written to ``sram_addr/word_bytes + W*tag + j``
  in consecutive cycles (``W`` words per burst). A new response is taken in the
  cycle the buffer's last word is accepted, so the SRAM port writes a word
  every cycle while responses are there; ``resp.ready`` is low while the
  buffer is busy (allowed by the memory port, and outstanding is bounded).
* SRAM -> DRAM: SRAM reads of the transfer's words in order, one per cycle
  (the SRAM's response credit stops them when we stop taking words); the
  words are assembled into bursts and each complete burst is loaded into the
  lane as a write request in the cycle its last word arrives, if the lane is
  free and fewer than ``max_outstanding`` are in flight (else the SRAM
  response waits). Acknowledgements are taken from every rank every cycle.

Both directions therefore move one SRAM word per cycle (32 B/cycle at the
default word) once the pipeline is full, when the memory accepts requests
and ``max_outstanding`` covers its latency (about ``latency / W + 4`` bursts).
A transfer of ``N`` bursts then takes ``N * W + latency + 5`` cycles from
descriptor to status (tests/hw/memory/test_dma.py: 16 KiB in 537 cycles, 30.5
B/cycle, each way at latency 20); with a 40-cycle latency and the default 16
outstanding, about 22 B/cycle.

The engine trusts the memory system to return each tag it issued exactly
once; it does not check a response's tag.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import check_int
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import (
    BURST_BITS,
    BURST_BYTES,
    CLIENT_TAG_BITS,
    STATUS_CYCLES_BITS,
    Status,
    burst_address_bits,
    memory_client_signature,
    offer_status,
    status_layout,
    status_state,
    take_command_state,
)
from ndpdimm.hw.memory.sram import sram_port_signature

__all__ = ["DmaEngine", "dma_descriptor_layout", "dma_status_layout", "N_BYTES_BITS",
           "STATUS_CYCLES_BITS", "COUNTER_BITS", "MAX_OUTSTANDING"]

#: Width of a descriptor's byte count (any value is legal; too long is an SRAM_RANGE error).
N_BYTES_BITS = 32
#: Width of the ``bytes_moved`` and ``busy_cycles`` counters.
COUNTER_BITS = 48
#: Memory requests a DMA engine keeps in flight unless told otherwise: the NDP core's and the
#: GEMV datapath's DMA (the performance model's DMA burst rate, ``cosim/model/perf/dma.py``).
MAX_OUTSTANDING = 16

_MAX_SRAM_BYTES = BURST_BYTES << CLIENT_TAG_BITS   # a burst index must fit the tag


def _log2(value: int) -> int:
    return value.bit_length() - 1


def _check_pow2(name, value, low, high):
    if (not isinstance(value, int) or isinstance(value, bool) or value <= 0
            or value & (value - 1) or not low <= value <= high):
        raise ValueError(f"{name} must be a power of two in {low}..{high}, got {value!r}")
    return value


def dma_descriptor_layout(capacity_bytes: int, sram_size_bytes: int) -> data.StructLayout:
    """One DMA descriptor: direction, DRAM byte address, SRAM byte address, byte count."""
    burst_address_bits(capacity_bytes)                  # validates the capacity
    _check_pow2("sram_size_bytes", sram_size_bytes, BURST_BYTES, _MAX_SRAM_BYTES)
    return data.StructLayout({
        "to_dram": 1,
        "dram_addr": _log2(capacity_bytes),
        "sram_addr": _log2(sram_size_bytes),
        "n_bytes": N_BYTES_BITS,
    })


dma_status_layout = status_layout


class DmaEngine(wiring.Component):
    """DRAM <-> SRAM copy engine (see module docstring).

    Parameters
    ----------
    capacity_bytes, ranks : int or None
        DIMM capacity and rank count of the memory port; ``None`` takes them
        from ``load_dram_config()`` (``org.capacity_bytes``, ``org.ranks``).
    sram_size_bytes, sram_word_bits : int
        The SRAM's ``size_bytes`` and ``word_bits`` (as ``BankedSram``); the word
        must divide a 64 B burst (8..512 bits) and the SRAM hold at most
        2**15 bursts (2 MiB), so that a burst index fits the tag.
    max_outstanding : int
        Most memory requests in flight (1..1024, default 16).
    lanes : int
        Request lanes of the memory port (default 2; only lane 0 is used).

    Ports
    -----
    ``desc`` In(stream of :func:`dma_descriptor_layout`), ``status`` Out(stream
    of :func:`dma_status_layout`), ``mem`` Out(memory client port), ``sram``
    Out(SRAM port), ``busy``, ``bytes_moved``, ``busy_cycles`` Out.
    """

    def __init__(self, *, capacity_bytes=None, ranks=None, sram_size_bytes: int = 131072,
                 sram_word_bits: int = 256, max_outstanding: int = MAX_OUTSTANDING, lanes: int = 2):
        if capacity_bytes is None or ranks is None:
            org = load_dram_config()[0]
            capacity_bytes = org.capacity_bytes if capacity_bytes is None else capacity_bytes
            ranks = org.ranks if ranks is None else ranks
        _check_pow2("sram_word_bits", sram_word_bits, 8, BURST_BITS)
        self.capacity_bytes = capacity_bytes
        self.ranks = ranks
        self.sram_size_bytes = sram_size_bytes
        self.sram_word_bits = sram_word_bits
        self.max_outstanding = check_int("max_outstanding", max_outstanding, 1, 1024)
        self.descriptor_layout = dma_descriptor_layout(capacity_bytes, sram_size_bytes)
        self.status_layout = dma_status_layout()
        self.word_bytes = sram_word_bits // 8
        self.words_per_burst = BURST_BITS // sram_word_bits
        self.sram_addr_bits = _log2(sram_size_bytes // self.word_bytes)
        super().__init__({
            "desc": In(stream.Signature(self.descriptor_layout)),
            "status": Out(stream.Signature(self.status_layout)),
            "mem": Out(memory_client_signature(capacity_bytes, ranks, lanes)),
            "sram": Out(sram_port_signature(self.sram_addr_bits, sram_word_bits)),
            "busy": Out(1),
            "bytes_moved": Out(COUNTER_BITS),
            "busy_cycles": Out(COUNTER_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        W = self.words_per_burst
        word_bits = self.sram_word_bits
        max_bursts = self.sram_size_bytes // BURST_BYTES
        max_words = self.sram_size_bytes // self.word_bytes
        req = self.mem.req[0]
        resps = list(self.mem.resp)
        sram = self.sram

        # ---- the descriptor being served -----------------------------------------------
        d = Signal(self.descriptor_layout)
        n_bursts = d.n_bytes[_log2(BURST_BYTES):]
        base_word = d.sram_addr[_log2(self.word_bytes):]
        xfer = Signal()          # in the transfer state
        cyc = Signal(STATUS_CYCLES_BITS)

        # ---- counters of the transfer ----------------------------------------------------
        in_flight = Signal(range(self.max_outstanding + 1))
        issue_left = Signal(range(max_bursts + 1))    # DRAM->SRAM: reads not yet loaded
        next_burst = Signal(len(req.payload.burst))
        next_tag = Signal(CLIENT_TAG_BITS)
        words_left = Signal(range(max_words + 1))     # SRAM writes (from DRAM) / reads (to DRAM) to go
        acks_left = Signal(range(max_bursts + 1))     # SRAM->DRAM: acknowledgements to go

        # ---- memory request lane (a register) ------------------------------------------
        room = in_flight < self.max_outstanding
        lane_free = ~req.valid | req.ready
        load_read = Signal()
        load_write = Signal()
        load = load_read | load_write
        m.d.comb += load_read.eq(xfer & ~d.to_dram & (issue_left != 0) & lane_free & room)

        # ---- SRAM -> DRAM: in-order SRAM reads, words assembled into bursts -------------
        rd_valid = Signal()
        rd_addr = Signal(self.sram_addr_bits)
        asm = Signal(word_bits * (W - 1))             # the burst's words before the last
        asm_idx = Signal(range(W))
        last_word = (asm_idx == W - 1) if W > 1 else Const(1, 1)
        m.d.comb += [
            sram.resp.ready.eq(xfer & d.to_dram & (~last_word | (lane_free & room))),
            load_write.eq(sram.resp.valid & sram.resp.ready & last_word),
        ]
        if W > 1:
            with m.If(sram.resp.valid & sram.resp.ready):
                with m.If(last_word):
                    m.d.sync += asm_idx.eq(0)
                with m.Else():
                    m.d.sync += [asm.word_select(asm_idx, word_bits).eq(sram.resp.payload),
                                 asm_idx.eq(asm_idx + 1)]

        with m.If(load):
            m.d.sync += [
                req.valid.eq(1),
                req.payload.write.eq(d.to_dram),
                req.payload.burst.eq(next_burst),
                req.payload.tag.eq(next_tag),
                req.payload.data.eq(Cat(asm, sram.resp.payload) if W > 1 else sram.resp.payload),
                next_burst.eq(next_burst + 1),
                next_tag.eq(next_tag + 1),
            ]
        with m.Elif(req.ready):
            m.d.sync += req.valid.eq(0)
        with m.If(load_read):
            m.d.sync += issue_left.eq(issue_left - 1)

        # ---- DRAM -> SRAM: one-burst buffer written out a word per cycle ----------------
        wb_valid = Signal()
        wb_data = Signal(BURST_BITS)
        wb_addr = Signal(self.sram_addr_bits)
        wb_idx = Signal(range(W))
        wb_last = (wb_idx == W - 1) if W > 1 else Const(1, 1)
        sram_fire = sram.req.valid & sram.req.ready
        with m.If(d.to_dram):
            m.d.comb += [
                sram.req.valid.eq(rd_valid),
                sram.req.payload.addr.eq(rd_addr),
                sram.req.payload.write.eq(0),
            ]
        with m.Else():
            m.d.comb += [
                sram.req.valid.eq(wb_valid),
                sram.req.payload.addr.eq(wb_addr),
                sram.req.payload.write.eq(1),
                sram.req.payload.data.eq(wb_data.word_select(wb_idx, word_bits)
                                         if W > 1 else wb_data),
                sram.req.payload.mask.eq(-1),
            ]
        take = ~wb_valid | (sram_fire & wb_last)      # the buffer can take a response now
        take_resp = Signal()                          # ... and takes one

        # responses: round robin over the ranks (DRAM->SRAM), every ack at once (SRAM->DRAM)
        R = len(resps)
        resp_valid = Cat(r.valid for r in resps)
        grant = Signal(R)
        if R == 1:
            m.d.comb += grant.eq(resp_valid)
        else:
            prio = Signal(R, init=(1 << R) - 1)        # ranks after the one taken last
            masked = resp_valid & prio
            pick = Mux(masked.any(), masked, resp_valid)
            m.d.comb += grant.eq(Cat(pick[r] & ~pick[:r].any() if r else pick[0]
                                     for r in range(R)))
            with m.If(take_resp):
                m.d.sync += prio.eq(Cat(grant[:r].any() if r else Const(0, 1) for r in range(R)))
        for r, resp in enumerate(resps):
            m.d.comb += resp.ready.eq(xfer & Mux(d.to_dram, 1, take & grant[r]))
        n_taken = Signal(range(R + 1))            # response handshakes this cycle
        m.d.comb += n_taken.eq(sum(resp.valid & resp.ready for resp in resps))
        g_tag = Signal(CLIENT_TAG_BITS)
        g_data = Signal(BURST_BITS)
        m.d.comb += [
            g_tag.eq(_or_select(grant, [resp.payload.tag for resp in resps])),
            g_data.eq(_or_select(grant, [resp.payload.data for resp in resps])),
        ]
        m.d.sync += in_flight.eq(in_flight + load - n_taken)
        with m.If(d.to_dram):
            m.d.sync += acks_left.eq(acks_left - n_taken)

        m.d.comb += take_resp.eq(xfer & ~d.to_dram & take & resp_valid.any())
        with m.If(take_resp):
            m.d.sync += [
                wb_valid.eq(1),
                wb_data.eq(g_data),
                wb_addr.eq(base_word + (g_tag << _log2(W))),
                wb_idx.eq(0),
            ]
        with m.Elif(sram_fire & ~d.to_dram):
            with m.If(wb_last):
                m.d.sync += wb_valid.eq(0)
            with m.Else():
                m.d.sync += [wb_idx.eq(wb_idx + 1), wb_addr.eq(wb_addr + 1)]

        with m.If(sram_fire):
            m.d.sync += words_left.eq(words_left - 1)
            with m.If(d.to_dram):
                m.d.sync += rd_addr.eq(rd_addr + 1)
                with m.If(words_left == 1):
                    m.d.sync += rd_valid.eq(0)

        # ---- counters ----------------------------------------------------------------------
        moved = Mux(d.to_dram, n_taken * BURST_BYTES,
                    Mux(sram_fire, self.word_bytes, 0))
        m.d.sync += [
            self.bytes_moved.eq(self.bytes_moved + Mux(xfer, moved, 0)),
            self.busy_cycles.eq(self.busy_cycles + self.busy),
        ]

        # ---- control -----------------------------------------------------------------------
        def finish(code):
            offer_status(m, self.status, code, cyc + 1)

        end = Cat(d.dram_addr, 0) + d.n_bytes
        with m.FSM():
            take_command_state(m, self.desc, d, cyc)
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += cyc.eq(cyc + 1)
                with m.If(d.dram_addr[:_log2(BURST_BYTES)].any() |
                          d.n_bytes[:_log2(BURST_BYTES)].any() |
                          (d.sram_addr[:_log2(self.word_bytes)].any()
                           if self.word_bytes > 1 else 0)):
                    finish(Status.MISALIGNED)
                with m.Elif(end > self.capacity_bytes):
                    finish(Status.DRAM_RANGE)
                with m.Elif(d.sram_addr + d.n_bytes > self.sram_size_bytes):
                    finish(Status.SRAM_RANGE)
                with m.Elif(d.n_bytes == 0):
                    finish(Status.OK)
                with m.Else():
                    m.d.sync += [
                        issue_left.eq(Mux(d.to_dram, 0, n_bursts)),
                        next_burst.eq(d.dram_addr[_log2(BURST_BYTES):]),
                        next_tag.eq(0),
                        words_left.eq(n_bursts * W),
                        acks_left.eq(n_bursts),
                        rd_valid.eq(d.to_dram),
                        rd_addr.eq(base_word),
                        asm_idx.eq(0),
                    ]
                    m.next = "XFER"
            with m.State("XFER"):
                m.d.comb += [self.busy.eq(1), xfer.eq(1)]
                m.d.sync += cyc.eq(cyc + 1)
                with m.If(Mux(d.to_dram, acks_left == 0, words_left == 0)):
                    finish(Status.OK)
            status_state(m, self.status, self.busy)
        return m


def _or_select(onehot, values):
    """The value whose bit is set in ``onehot`` (0 if none): an AND-OR multiplexer."""
    out = 0
    for i, v in enumerate(values):
        out = out | Mux(onehot[i], v, 0)
    return out
