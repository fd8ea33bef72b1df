"""On-chip SRAM of the NDP core: word-interleaved banks behind round-robin-arbitrated stream ports.

Organisation
------------
``size_bytes`` (default 128 KiB) of storage in ``n_banks`` (default 16) banks
of ``word_bits`` (default 256 bit = 32 B) words, so ``size_bytes / (n_banks *
word_bits / 8)`` rows per bank (256 by default). A 256-bit GEMV result beat
is one word; a 64 B DRAM burst is two consecutive words, which sit in two
different banks.

Each bank is one ``amaranth.lib.memory.Memory`` (submodule ``bank<b>``) with
one synchronous read port and one byte-granular write port, and the arbiter
never enables both in the same cycle: the bank behaves as a single-port (1RW)
macro with byte write enables and maps onto one in synthesis. Because a bank
never reads and writes in one cycle, the read port's transparency never
matters; it is declared non-transparent (``transparent_for=()``), which is
what a 1RW macro gives. Nothing else in the block is a ``Memory``: the
response FIFOs are a few flip-flop words per port, so that a synthesis flow
that turns every ``Memory`` into a macro gets exactly the banks.

Addresses
---------
Clients think in byte addresses; a request carries the *word* address
(``byte address / word_bytes``), so an unaligned access cannot be expressed:
every access is one whole, aligned word, with byte enables (``mask``) for
partial writes. :meth:`BankedSram.word_address` converts and rejects an
unaligned or out-of-range byte address on the host side.
Interleaving is low-order: ``bank = word address mod n_banks``, ``row = word
address // n_banks``, so a sequential stream from one port visits every bank
in turn.

Ports
-----
``n_ports`` (default 4) identical ports, ``ports[i]``, each a
``port_signature`` (initiator view: ``req`` out, ``resp`` in; a client
declares ``Out(sram.port_signature)`` and is ``wiring.connect``-ed to
``sram.ports[i]``). Suggested roles: 0 GEMV activation reads, 1 GEMV result
writes, 2 DMA, 3 host / command processor; the SRAM treats all ports alike.

* ``req``: stream of ``request_layout`` = ``addr`` (word address), ``write``,
  ``data`` (``word_bits``), ``mask`` (``word_bits / 8`` byte enables, bit i
  enables bits ``[8i, 8i+8)`` of ``data``; ignored by reads).
* ``resp``: stream of ``word_bits`` read data, one beat per read, in request
  order. Writes produce no response.

Cycle behaviour
---------------
Cycle ``k`` (stage ``s0``): every port presents at most one request. For
each bank, the ports whose *eligible* request addresses it form the
request vector; a round-robin arbiter grants one of them (priority starts
just after the port the bank granted last). The granted port sees
``req.ready`` in the same cycle - ``ready`` is combinational from all
ports' ``valid``/``addr`` and registered state, never from any ``resp.ready``.
A granted write is performed at the end of cycle ``k``; a granted read
addresses the bank. Address decode, arbitration and the bank-input mux all
sit between ``req`` and the macro pins in this one cycle, so clients should
drive ``req`` from registers.

Cycle ``k+1`` (stage ``s1``): the bank's read data is selected for the port
and pushed into the port's response FIFO.

Cycle ``k+2``: the word is at the head of the FIFO; if the FIFO was empty,
``resp.valid`` rises in cycle ``k+2``. **Read latency is 2 cycles** (request
handshake to the earliest response handshake), more only while the client
back-pressures ``resp``.

Eligibility (credit): a write is always eligible; a read is eligible only
if the port's response FIFO has room for it counting the read in ``s1``
(``level + in_flight < resp_depth``). A port whose client stops taking
``resp`` therefore stops issuing reads after ``resp_depth`` words and loses
nothing. A write is never held for credit, but a port's requests stay in
order: a write behind a read that waits for credit waits with it. The
check does not count a response taken
in the same cycle (that would put ``resp.ready`` on the ``req.ready`` path),
so one port sustains one read per cycle for ``resp_depth >= 3`` (the
default) and ``resp_depth / 3`` reads per cycle below that.

Bank-conflict and ordering rules
--------------------------------
* A bank performs at most one access (read or write) per cycle; a port at
  most one request per cycle. Peak: ``min(n_ports, n_banks)`` accesses per
  cycle in total (4 at the defaults).
* A port whose request waits for its bank waits as a whole: there is no
  reordering within a port (head-of-line), other ports go on.
* Sequential streams (``n_ports <= n_banks``, one per port, no idle, no
  back-pressure) of N words each finish within N + n_ports - 1 cycles: once
  conflicts have separated them the ports walk the banks in lockstep, one
  bank apart, and never meet again. All ports starting in the same bank is
  the worst case: 259 cycles for 256 words per port at the defaults, 3.95
  accesses per cycle of the peak 4 (``tests/hw/memory/test_sram.py`` checks the bound
  exhaustively over start banks with a model of the arbiter, and on the RTL).
* Fairness: an eligible request waits at most ``n_ports - 1`` cycles for its
  bank, whatever the other ports do (round robin: every other port is
  granted at most once before it). Clients that need a rate should still
  spread their words over banks: a bank hammered by all ports serves each
  of them once every ``n_ports`` cycles.
* Requests of one port complete in order (one request per cycle, fixed read
  latency); a read sees every write granted in an earlier cycle, from any
  port, including the same port's write in the cycle just before.
  Accesses granted in the same cycle are to different banks, hence different
  words, so their relative order does not matter. Between ports there is no
  other ordering: the order of grants is the order of effect.

Contents are not reset (a macro has no reset); in simulation they start at
zero. Arbiter state and the response FIFOs are reset.
"""

import functools
import operator
from dataclasses import dataclass

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

__all__ = ["BankedSram", "SramGeometry", "sram_request_layout", "sram_port_signature",
           "READ_LATENCY"]

#: Cycles from a read's request handshake to its earliest response handshake.
READ_LATENCY = 2


def sram_request_layout(addr_bits: int, word_bits: int) -> data.StructLayout:
    """One SRAM request: word address, read/write, write data and byte enables."""
    return data.StructLayout({
        "addr": addr_bits,
        "write": 1,
        "data": word_bits,
        "mask": word_bits // 8,
    })


def sram_port_signature(addr_bits: int, word_bits: int) -> wiring.Signature:
    """One SRAM port from the client's side: requests out, read data in."""
    return wiring.Signature({
        "req": Out(stream.Signature(sram_request_layout(addr_bits, word_bits))),
        "resp": In(stream.Signature(word_bits)),
    })


def _is_pow2(value) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and value > 0
            and value & (value - 1) == 0)


def _check_pow2(name, value, low, high):
    if not _is_pow2(value) or not low <= value <= high:
        raise ValueError(f"{name} must be a power of two in {low}..{high}, got {value!r}")
    return value


def _check_int(name, value, low, high):
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


@dataclass(frozen=True)
class SramGeometry:
    """Validated SRAM parameters, derived sizes and host-side address helpers.

    What a driver, bench or model needs to know about the SRAM without building
    the RTL (``BankedSram`` has one as ``.geometry`` and mirrors its attributes).

    size_bytes : capacity, a power of two (default 131072 = 128 KiB), at least
        two rows of all banks.
    n_banks : banks, a power of two (default 16).
    word_bits : bank word width, a power of two of at least 8 (default 256).
    n_ports : client ports, 1..32 (default 4).
    resp_depth : words of each port's response FIFO, 1..64 (default 3, the
        least that sustains one read per cycle per port; see "Eligibility").
    """
    size_bytes: int = 131072
    n_banks: int = 16
    word_bits: int = 256
    n_ports: int = 4
    resp_depth: int = 3

    def __post_init__(self):
        _check_pow2("word_bits", self.word_bits, 8, 4096)
        _check_pow2("n_banks", self.n_banks, 1, 1024)
        _check_pow2("size_bytes", self.size_bytes, 1, 1 << 30)
        _check_int("n_ports", self.n_ports, 1, 32)
        _check_int("resp_depth", self.resp_depth, 1, 64)
        row_bytes = self.word_bytes * self.n_banks
        if self.size_bytes < 2 * row_bytes:
            raise ValueError(f"size_bytes={self.size_bytes} is less than two rows of "
                             f"{self.n_banks} banks x {self.word_bytes} B words "
                             f"({2 * row_bytes} B)")

    @property
    def word_bytes(self) -> int:
        return self.word_bits // 8

    @property
    def n_words(self) -> int:
        return self.size_bytes // self.word_bytes

    @property
    def bank_depth(self) -> int:
        """Rows (words) per bank."""
        return self.n_words // self.n_banks

    @property
    def addr_bits(self) -> int:
        """Width of a word address."""
        return self.n_words.bit_length() - 1

    @property
    def bank_bits(self) -> int:
        return self.n_banks.bit_length() - 1

    @property
    def request_layout(self) -> data.StructLayout:
        return sram_request_layout(self.addr_bits, self.word_bits)

    @property
    def port_signature(self) -> wiring.Signature:
        return sram_port_signature(self.addr_bits, self.word_bits)

    def word_address(self, byte_address: int) -> int:
        """Word address of an aligned, in-range byte address; ``ValueError`` otherwise."""
        if (not isinstance(byte_address, int) or isinstance(byte_address, bool)
                or not 0 <= byte_address < self.size_bytes):
            raise ValueError(f"byte address {byte_address!r} is outside the "
                             f"{self.size_bytes} B SRAM")
        if byte_address % self.word_bytes:
            raise ValueError(f"byte address {byte_address:#x} is not aligned to the "
                             f"{self.word_bytes} B SRAM word")
        return byte_address // self.word_bytes

    def bank_of(self, word_address: int) -> int:
        return word_address % self.n_banks

    def row_of(self, word_address: int) -> int:
        return word_address // self.n_banks

    def request_bits(self, addr: int, *, write: bool = False, data: int = 0,
                     mask: int | None = None) -> int:
        """Raw bits of one request (``mask`` defaults to all bytes)."""
        if mask is None:
            mask = (1 << self.word_bytes) - 1
        return self.request_layout.const({"addr": addr, "write": int(write), "data": data,
                                          "mask": mask}).as_bits()


class BankedSram(wiring.Component):
    """Banked on-chip SRAM with ``n_ports`` stream ports (see module docstring).

    Parameters are those of :class:`SramGeometry` (validated there, ``ValueError``
    quoting the bad value). The geometry's attributes and helpers (``word_bytes``,
    ``n_words``, ``bank_depth``, ``addr_bits``, ``request_layout``,
    ``port_signature``, ``word_address`` ...) are available on the component too.
    Ports: ``ports[i]``, ``In(port_signature)``.
    """

    _MIRRORED = ("size_bytes", "n_banks", "word_bits", "n_ports", "resp_depth", "word_bytes",
                 "n_words", "bank_depth", "addr_bits", "bank_bits", "request_layout",
                 "port_signature", "word_address", "bank_of", "row_of", "request_bits")

    def __init__(self, size_bytes: int = 131072, n_banks: int = 16, word_bits: int = 256,
                 n_ports: int = 4, resp_depth: int = 3):
        self.geometry = g = SramGeometry(size_bytes, n_banks, word_bits, n_ports, resp_depth)
        for name in self._MIRRORED:
            setattr(self, name, getattr(g, name))
        super().__init__({"ports": In(self.port_signature).array(n_ports)})

    # ---- RTL -----------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        P, B, D = self.n_ports, self.n_banks, self.resp_depth
        ports = [self.ports[p] for p in range(P)]

        # ---- s0: decode, eligibility ---------------------------------------------------
        s0_bank = [Signal(range(B), name=f"s0_bank_{p}") for p in range(P)]
        s0_row = [Signal(range(self.bank_depth), name=f"s0_row_{p}") for p in range(P)]
        s0_eligible = [Signal(name=f"s0_eligible_{p}") for p in range(P)]
        # s1: a read granted in the previous cycle, and its bank
        s1_read = [Signal(name=f"s1_read_{p}") for p in range(P)]
        s1_bank = [Signal(range(B), name=f"s1_bank_{p}") for p in range(P)]
        fifo_level = [Signal(range(D + 1), name=f"resp_level_{p}") for p in range(P)]

        for p, port in enumerate(ports):
            addr = port.req.payload.addr
            m.d.comb += [
                s0_bank[p].eq(addr[:self.bank_bits] if self.bank_bits else 0),
                s0_row[p].eq(addr[self.bank_bits:]),
                # credit: room for this read once the read in s1 has landed
                s0_eligible[p].eq(port.req.valid &
                                  (port.req.payload.write | (fifo_level[p] + s1_read[p] < D))),
            ]

        # ---- s0: per-bank round-robin arbiter and the bank itself ----------------------
        s0_grant = []  # s0_grant[b][p]
        bank_rdata = []
        for b in range(B):
            want = Signal(P, name=f"s0_want_{b}")
            m.d.comb += want.eq(Cat(s0_eligible[p] & (s0_bank[p] == b) for p in range(P)))
            # ports after the one granted last: reset lets port 0 go first
            prio = Signal(P, name=f"s0_prio_{b}", init=(1 << P) - 1)
            masked = want & prio
            pick = Mux(masked.any(), masked, want)
            grant = Signal(P, name=f"s0_grant_{b}")
            m.d.comb += grant.eq(Cat(pick[p] & ~pick[:p].any() if p else pick[0]
                                     for p in range(P)))
            with m.If(want.any()):
                m.d.sync += prio.eq(Cat(grant[:p].any() if p else Const(0, 1) for p in range(P)))
            s0_grant.append(grant)

            def granted(values, grant=grant):
                return functools.reduce(operator.or_,
                                        [Mux(grant[p], v, 0) for p, v in enumerate(values)])
            g_any = grant.any()
            g_write = granted([port.req.payload.write for port in ports])
            g_row = Signal(range(self.bank_depth), name=f"s0_row_b{b}")
            m.d.comb += g_row.eq(granted(s0_row))

            m.submodules[f"bank{b}"] = mem = Memory(shape=self.word_bits, depth=self.bank_depth,
                                                    init=[])
            wr = mem.write_port(granularity=8)
            rd = mem.read_port(transparent_for=())   # never read and written in one cycle
            m.d.comb += [
                wr.addr.eq(g_row),
                wr.data.eq(granted([port.req.payload.data for port in ports])),
                wr.en.eq(Mux(g_any & g_write, granted([port.req.payload.mask for port in ports]),
                             0)),
                rd.addr.eq(g_row),
                rd.en.eq(g_any & ~g_write),
            ]
            bank_rdata.append(rd.data)
        bank_rdata = Array(bank_rdata)

        # ---- handshake, s1 and the response FIFOs -------------------------------------
        for p, port in enumerate(ports):
            m.d.comb += port.req.ready.eq(Cat(s0_grant[b][p] for b in range(B)).any())
            m.d.sync += [
                s1_read[p].eq(port.req.valid & port.req.ready & ~port.req.payload.write),
                s1_bank[p].eq(s0_bank[p]),
            ]
            entries = Array(Signal(self.word_bits, name=f"resp_{p}_{i}") for i in range(D))
            head = Signal(range(D), name=f"resp_head_{p}")
            tail = Signal(range(D), name=f"resp_tail_{p}")
            level = fifo_level[p]
            push = s1_read[p]           # the credit check guarantees room
            pop = port.resp.valid & port.resp.ready
            m.d.comb += [
                port.resp.valid.eq(level != 0),
                port.resp.payload.eq(entries[head]),
            ]
            with m.If(push):
                m.d.sync += [
                    entries[tail].eq(bank_rdata[s1_bank[p]]),
                    tail.eq(Mux(tail == D - 1, 0, tail + 1)),
                ]
            with m.If(pop):
                m.d.sync += head.eq(Mux(head == D - 1, 0, head + 1))
            with m.If(push & ~pop):
                m.d.sync += level.eq(level + 1)
            with m.Elif(pop & ~push):
                m.d.sync += level.eq(level - 1)
        return m
