"""Weight streamer: one GEMV weight descriptor -> DRAM burst reads -> the engine's weight beats.

What it does
------------
It takes one descriptor (``desc``, :func:`streamer_descriptor_layout`), checks
it, reads the weights from DRAM through its memory-client port (``mem``,
:func:`~ndpdimm.hw.memory.port.memory_client_signature`, reads only) and
delivers the GEMV engine's weight stream (``beats``, one 128-bit word per
unit) in exactly the engine's order (``cosim.gemv.job.GemvJob.weight_beats``:
groups in order, steps in order), then one ``status`` beat. Gather index
lists are read from the on-chip SRAM through its own SRAM port (``sram``).

DRAM layouts (``cosim.gemv.weight_layout`` builds them on the host)
----------------------------------------------------------------
``e`` = bytes per element (2 FP16/BF16, 1 INT8). ``bpr = ceil(n_cols*e/64)``
bursts per stored neuron; both layouts occupy ``n_rows * bpr * 64`` bytes.

* DOT (dense, row gather), ``W`` [N = n_rows, K = n_cols]: a row is cut into
  ``J = bpr`` chunks of 64 B (chunk j = weight words 4j..4j+3, zero padded
  past K); chunk j of neuron n is at ``base + (j*N + n)*64``
  ("chunk-interleaved, neuron-major"). The engine needs word s of up to
  ``n_units`` different rows at once; here the bursts of one chunk of a
  dense group are consecutive addresses, so the default address map spreads
  them over all ranks and both bank groups with long row hits, and a row
  gather still reads only the selected neurons (one burst per chunk each).
* AXPY (column gather), ``Wt`` [J = n_rows, N = n_cols]: neuron i at
  ``base + i*P``, pitch ``P = bpr*64``, zero padded. Beat (g, s) is words
  ``g*U .. g*U+U-1`` of neuron ``idx[s]``: ``U/4`` consecutive bursts (burst k
  feeds units 4k..4k+3); bursts past the pitch are not read and their units
  get zero words.

Descriptor and checks
---------------------
``mode``, ``gather``, ``dtype``, ``base`` (DRAM byte address), ``n_rows``,
``n_cols``, ``idx_addr`` (SRAM byte address of the index list), ``n_idx``
(entries, uint32 little endian, ``entries_per_word`` per SRAM word).
Widths: ``base`` log2(capacity) (35 bits for 32 GiB), ``n_rows`` and
``n_idx`` 32, ``n_cols`` ``max(index_bits, step_bits + 4)`` (every legal K
and N), ``idx_addr`` log2(SRAM size).
DOT: ``n_out`` = N (dense) or ``n_idx`` (gather), ``n_steps = ceil(K/lanes)``;
AXPY (gather only): ``n_out`` = N, ``n_steps`` = ``n_idx``. The first failing
check, in this order, is reported and nothing else happens (no DRAM request,
no beat): dtype 3, AXPY without gather, ``n_out >= 2**index_bits``,
``n_steps >= 2**step_bits`` (``BAD_FIELD``); ``base % 64`` (``MISALIGNED``);
``base + n_rows*bpr*64 > capacity`` (``DRAM_RANGE``); with gather:
``idx_addr % 4`` (``MISALIGNED``), ``idx_addr + 4*n_idx > SRAM size``
(``SRAM_RANGE``), any entry ``>= n_rows`` (``BAD_INDEX``, from a pre-scan of
the whole list). A job with ``n_out == 0`` or ``n_steps == 0`` then completes
``OK`` with no request and no beat (its index list, if any, was still checked).
``status`` carries the code, the bursts read and the cycles from accepting the
descriptor to the status beat.

Buffering
---------
A ring of ``ring_beats`` beat slots x ``n_units`` 128-bit words with a valid
bit per word. It is flip-flops, not a ``Memory``: every rank's response may
write any slot/unit, up to ``ranks`` responses (4 words each) per cycle, and
the head beat reads a word of every unit at once (256 Kbit at the defaults).
Each unit's ``ring_beats`` words are one ``RingColumn`` (``hw/memory/ring_column.py``),
one small module repeated ``n_units`` times (a shared Verilog module with
``hierarchical=True``), so synthesis maps it once; the valid bits stay here.
Beat ``b`` (counting from 0 over the whole job) lives in slot
``b mod ring_beats``. Space is reserved before a burst is
requested - a DOT chunk's bursts need its (up to) 4 beats' slots free, an
AXPY beat's bursts its one slot - so ``resp[r].ready`` is always 1. A burst's
tag says where its words go: ``slot | unit (DOT) or burst-in-group (AXPY) |
words - 1`` (``log2(ring_beats) + log2(n_units) + 2 <= 15`` bits). DOT: the
burst's words k < ``words`` go to slots ``slot + k`` of one unit (words past
``n_steps`` are never written: those slots belong to the next group); AXPY:
its 4 words go to 4 units of one slot. The head beat is offered when every
*expected* word is valid (DOT: units with an output in the group; AXPY:
units whose burst lies inside the pitch); the other words are sent as zero.
Accepting the beat clears its valid bits and frees its slot.

Early release
-------------
A consumer that reads a beat over several cycles before acknowledging it (the
GEMV engine loads its weight lanes one per cycle and takes the beat 7 cycles
after the slot started, ``hw/gemv/sequencer.py``) raises ``release`` when it
has committed to the head beat. The beat's slot then counts as free from the
next cycle, as if the beat had been accepted, while the beat stays offered,
unchanged, until it is accepted. A burst requested into the freed slot must
not land before that: if the consumer accepts the beat within ``H`` cycles
of the release, the memory's latency (request accepted to response) must be
at least ``H - 2`` cycles; the engine's ``H`` is at most 15, so 13 (a DRAM
read takes tens: CL alone is 22 cycles at the defaults). ``release`` while
the head beat is not offered, or again for a beat already released, does
nothing; a consumer that never raises it frees each slot when it accepts the
beat.

Cycle behaviour
---------------
* Accept a descriptor, derive its fields, check them: an error status is
  offered 3 cycles after the descriptor was accepted.
* Gather pre-scan: one SRAM word (8 entries) per cycle, ``w`` = words the
  list touches (``n_idx/8 + 1`` at most): the first DRAM request (or the
  ``BAD_INDEX`` status) follows about ``w + 6`` cycles after the descriptor
  (411 entries: 57 cycles; 4096 entries: ~520, against >= 2560 cycles to
  stream even one 64 B chunk of 4096 rows at 102.4 B/cycle).
* Issue: up to 2 bursts per cycle (one per request lane; a lane's register
  refills in the cycle it is accepted), in fetch order: DOT for each group g,
  chunk j, unit u (units past ``n_out`` skipped); AXPY for each group g, step
  s, burst k. Both bursts of a cycle come from the same chunk (DOT) or beat
  (AXPY): a chunk with an odd number of bursts loses half a cycle, and at
  ``n_units = 4`` an AXPY beat is one burst, so AXPY issues 1 burst per cycle
  there (2 per cycle from 8 units on).
* Issue stalls on lane back-pressure, when the ring has no room, and
  - row gather: per group, while the group's ``n_units`` indices are loaded
    from SRAM into a word cache (``n_units/8 + 1`` SRAM words: about
    ``n_units/8 + 6`` cycles between the last request of a group and the
    first of the next; 38 cycles at 256 units against ``J * 160`` cycles of
    streaming per group at the DRAM's rate, and requests already in flight
    cover part of it);
  - column gather: the step indices stream from SRAM (1 index per beat, 8 per
    SRAM word; the SRAM port's response FIFO is the prefetch buffer): no stall
    at >= 8 units.
* Ring size for full rate (DOT): a chunk holds its 4 slots from its first
  request until its 4th beat is accepted, i.e. its issue time (``n_units/1.6``
  cycles at the DRAM's rate) + the memory latency ``L`` + the time the engine
  takes for 4 beats. With ``ring_beats/4`` chunks in the ring the DRAM never
  waits if ``(ring_beats/4 - 1) * n_units/1.6 >= L + 4 beat times``. Defaults
  (256 units, 8 beats): ``L + 4 beat times <= 160`` cycles, e.g. FP16 batch 1
  (a beat per 11 cycles): ``L <= 116``. Measured in the unit test (8 units,
  fixed latency 10, engine always ready): 32 beats -> 2.0 requests/cycle,
  16 beats -> 1.6.
* With ``release`` raised in the cycle a consumer takes the beat, a slot is
  free in the cycle after, exactly as with a consumer that accepts the beat
  then: the requests are issued in the same cycles.
* A beat is offered in the cycle after its last word arrived; the status
  (``OK``) in the cycle after the last beat was accepted.

``validated`` is high for the one cycle between the last check (index
pre-scan included) and the first request: a command processor starts the
engine and its other helpers only then, so a rejected descriptor leaves them
untouched.

Counters (``bursts_read``: responses received; ``busy_cycles``: cycles not
idle; ``data_wait_cycles``: cycles streaming with no beat to offer) count from
reset and wrap.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS, Dtype, GemvMode, check_int, weights_beat_layout
from ndpdimm.hw.hierarchy import shared_instance
from ndpdimm.hw.memory.dram import DramOrganization, load_dram_config
from ndpdimm.hw.memory.port import (
    BURST_BITS,
    BURST_BYTES,
    CLIENT_TAG_BITS,
    Status,
    burst_address_bits,
    memory_client_signature,
)
from ndpdimm.hw.memory.ring_column import RING_COLUMN_MODULE, RingColumn, ring_column_signature
from ndpdimm.hw.memory.sram import SramGeometry, sram_port_signature

__all__ = ["connect_consumer", "WeightStreamer", "streamer_descriptor_layout", "streamer_status_layout",
           "INDEX_ENTRY_BYTES", "REQUEST_LANES"]

#: Bytes of one index list entry (uint32, little endian).
INDEX_ENTRY_BYTES = 4
#: Bits of the count fields ``n_rows`` and ``n_idx``.
COUNT_BITS = 32
#: Request lanes of the streamer's memory port: it issues up to this many bursts a cycle (the
#: lane assignment below is written for two; the performance model's issue rate,
#: ``cosim/model/perf/access.py``, and the core's memory system take it from here).
REQUEST_LANES = 2
#: 128-bit words per 64 B burst.
WORDS_PER_BURST = BURST_BITS // WORD_BITS


def _log2(value: int) -> int:
    return value.bit_length() - 1


def _is_pow2(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and \
        value & (value - 1) == 0


def _or_all(values):
    result = values[0]
    for value in values[1:]:
        result = result | value
    return result


def cols_bits(index_bits: int, step_bits: int) -> int:
    """Width of ``n_cols``: holds every legal K (< 16 * 2**step_bits) and N (< 2**index_bits)."""
    return max(index_bits, step_bits + 4)


def streamer_descriptor_layout(capacity_bytes: int, sram_size_bytes: int,
                               index_bits: int = 20, step_bits: int = 16) -> data.StructLayout:
    """One weight descriptor (fields in the module docstring)."""
    return data.StructLayout({
        "mode": GemvMode,
        "gather": 1,
        "dtype": 2,
        "base": _log2(capacity_bytes),
        "n_rows": COUNT_BITS,
        "n_cols": cols_bits(index_bits, step_bits),
        "idx_addr": _log2(sram_size_bytes),
        "n_idx": COUNT_BITS,
    })


def streamer_status_layout() -> data.StructLayout:
    """One completion: ``code`` (``Status``), ``bursts`` read and ``cycles`` from accept to status."""
    return data.StructLayout({"code": Status, "bursts": 32, "cycles": 32})


def connect_consumer(m, streamer, weights, committed):
    """Wire the streamer's beats to a consumer's ``weights`` stream and its ``release`` to the
    consumer's ``committed`` (the GEMV engine's ``weight_committed``)."""
    wiring.connect(m, streamer.beats, weights)
    m.d.comb += streamer.release.eq(committed)


class WeightStreamer(wiring.Component):
    """The weight streamer (see module docstring).

    Parameters
    ----------
    n_units : int
        GEMV engine units (power of two >= 4, default 256).
    ring_beats : int
        Beat slots of the ring buffer (power of two >= 4, default 8).
    org : DramOrganization or None
        DIMM organisation (ranks, capacity); default from ``load_dram_config()``.
    sram : SramGeometry or None
        The SRAM holding index lists (size, word width); default ``SramGeometry()``.
    index_bits, step_bits : int
        The engine's output-index and step-count widths (20 and 16 by default).
    hierarchical : bool
        Instantiate the ring columns as the shared ``ring_column`` Verilog module (emit it once
        beside the streamer, as ``ndp_core_verilog`` does) instead of as submodules.

    Ports: ``desc`` (In stream), ``status`` (Out stream), ``mem`` (memory client),
    ``sram`` (SRAM client port), ``beats`` (Out stream of ``weights_beat_layout``),
    ``release`` (In 1: the consumer frees the head beat's slot early, see "Early release"),
    counters ``bursts_read``, ``busy_cycles``, ``data_wait_cycles`` (Out 32).
    """

    def __init__(self, n_units: int = 256, ring_beats: int = 8, org: DramOrganization = None,
                 sram: SramGeometry = None, index_bits: int = 20, step_bits: int = 16,
                 hierarchical: bool = False):
        if not _is_pow2(n_units) or n_units < 4:
            raise ValueError(f"n_units must be a power of two >= 4, got {n_units!r}")
        if not _is_pow2(ring_beats) or ring_beats < 4:
            raise ValueError(f"ring_beats must be a power of two >= 4, got {ring_beats!r}")
        if _log2(ring_beats) + _log2(n_units) + 2 > CLIENT_TAG_BITS:
            raise ValueError(f"ring_beats * n_units must be at most "
                             f"{2 ** (CLIENT_TAG_BITS - 2)} (tag bits), got "
                             f"{ring_beats} * {n_units}")
        if org is None:
            org = load_dram_config()[0]
        if not isinstance(org, DramOrganization):
            raise ValueError(f"org must be a DramOrganization, got {org!r}")
        if sram is None:
            sram = SramGeometry()
        if not isinstance(sram, SramGeometry):
            raise ValueError(f"sram must be an SramGeometry, got {sram!r}")
        if sram.word_bits < 8 * INDEX_ENTRY_BYTES:
            raise ValueError(f"SRAM word_bits must be >= {8 * INDEX_ENTRY_BYTES} to hold an "
                             f"index entry, got {sram.word_bits!r}")
        check_int("index_bits", index_bits, 1, 31)
        check_int("step_bits", step_bits, 1, 27)
        self.n_units, self.ring_beats = n_units, ring_beats
        self.hierarchical = bool(hierarchical)
        self.org, self.sram_geometry = org, sram
        self.index_bits, self.step_bits = index_bits, step_bits
        self.capacity_bytes = org.capacity_bytes
        self.ranks = org.ranks
        self.entries_per_word = sram.word_bits // (8 * INDEX_ENTRY_BYTES)
        self.descriptor_layout = streamer_descriptor_layout(
            self.capacity_bytes, sram.size_bytes, index_bits, step_bits)
        self.status_layout = streamer_status_layout()
        super().__init__({
            "desc": In(stream.Signature(self.descriptor_layout)),
            "status": Out(stream.Signature(self.status_layout)),
            "mem": Out(memory_client_signature(self.capacity_bytes, self.ranks, lanes=REQUEST_LANES)),
            "sram": Out(sram_port_signature(sram.addr_bits, sram.word_bits)),
            "beats": Out(stream.Signature(weights_beat_layout(n_units))),
            "release": In(1),
            "validated": Out(1),
            "bursts_read": Out(32),
            "busy_cycles": Out(32),
            "data_wait_cycles": Out(32),
        })

    def _column(self, m, u):
        """Unit ``u``'s ring column: a RingColumn submodule, or an instance of the shared
        ``ring_column`` module (``hierarchical``)."""
        if not self.hierarchical:
            m.submodules[f"ring_col{u}"] = col = RingColumn(self.ring_beats, self.ranks)
            return col
        return shared_instance(m, f"ring_col{u}", RING_COLUMN_MODULE,
                               ring_column_signature(self.ring_beats, self.ranks))

    def elaborate(self, platform):
        m = Module()
        U, RB, E = self.n_units, self.ring_beats, self.entries_per_word
        R = self.ranks
        RBb, Ub, Eb = _log2(RB), _log2(U), _log2(E)
        ab = burst_address_bits(self.capacity_bytes)          # burst address bits
        cap_bursts = self.capacity_bytes // BURST_BYTES
        sram_bytes = self.sram_geometry.size_bytes
        entry_bits = _log2(sram_bytes // INDEX_ENTRY_BYTES) + 1  # entry address (+1 headroom)
        waddr_bits = self.sram_geometry.addr_bits
        # DOT gather index cache: SRAM words, enough for one group's U entries at any alignment
        CW = 2
        while CW < U // E + 1:
            CW *= 2
        CWb = _log2(CW)
        beat_bits = 2 + self.index_bits + self.step_bits    # global beat counters
        cnt_bits = COUNT_BITS + 1

        # ---- descriptor latch and derived fields --------------------------------------
        d = Signal(self.descriptor_layout)
        is_axpy = Signal()
        col_bytes = Signal(len(d.n_cols) + 1)
        bpr = Signal(len(col_bytes) - 5)              # bursts per stored neuron
        n_steps = Signal(cnt_bits)
        n_out = Signal(cnt_bits)
        n_items = Signal(cnt_bits)                    # DOT: outputs; AXPY: bursts per neuron
        per = Signal(Ub + 1)                          # items per group: U or U/4
        base_burst = Signal(ab)
        ent_a = Signal(entry_bits)                    # entry address of idx[0]
        ent_end = Signal(entry_bits + 1)              # entry address past the list
        m.d.comb += [
            base_burst.eq(d.base[6:]),
            ent_a.eq(d.idx_addr[2:]),
            ent_end.eq(ent_a + d.n_idx),
            per.eq(Mux(is_axpy, U // 4, U)),
        ]

        # ---- SRAM word reader (scan, DOT gather cache, AXPY index stream) -------------
        rd_next = Signal(waddr_bits)
        rd_first = Signal(waddr_bits)
        rd_left = Signal(cnt_bits)                    # requests left in this pass
        rd_words = Signal(cnt_bits)                   # requests per pass
        rd_repeat = Signal(cnt_bits)                  # further passes (AXPY: one per group)
        m.d.comb += [
            self.sram.req.valid.eq(rd_left != 0),
            self.sram.req.payload.addr.eq(rd_next),
            self.sram.req.payload.write.eq(0),
        ]
        with m.If(self.sram.req.valid & self.sram.req.ready):
            m.d.sync += [rd_next.eq(rd_next + 1), rd_left.eq(rd_left - 1)]
            with m.If((rd_left == 1) & (rd_repeat != 0)):
                m.d.sync += [rd_next.eq(rd_first), rd_left.eq(rd_words),
                             rd_repeat.eq(rd_repeat - 1)]
        sram_word = self.sram.resp.payload

        def entry(word, e):
            return word.word_select(e, 8 * INDEX_ENTRY_BYTES)

        def list_words(first, count):
            """SRAM words holding entries first .. first+count-1 (count >= 1)."""
            return (first + count - 1)[Eb:] - first[Eb:] + 1

        # ---- counters --------------------------------------------------------------------
        job_bursts = Signal(32)
        job_cycles = Signal(32)
        resp_fire = [self.mem.resp[r].valid & self.mem.resp[r].ready for r in range(R)]
        n_resp = sum(resp_fire[1:], resp_fire[0] + Const(0, 32))
        m.d.sync += [self.bursts_read.eq(self.bursts_read + n_resp),
                     job_bursts.eq(job_bursts + n_resp),
                     job_cycles.eq(job_cycles + 1)]

        # ---- status ----------------------------------------------------------------------
        st_code = Signal(3)
        m.d.comb += [
            self.status.payload.code.eq(st_code),
            self.status.payload.bursts.eq(job_bursts),
            self.status.payload.cycles.eq(job_cycles),
        ]

        # ---- issue-side state ------------------------------------------------------------
        is_u = Signal(Ub + 1)               # unit (DOT) / burst (AXPY) inside the block
        is_s_left = Signal(self.step_bits + 1)  # DOT: steps from this chunk on; AXPY: from this beat
        is_b = Signal(beat_bits)            # beat of the chunk's first word (DOT) / of the beat (AXPY)
        is_row_base = Signal(ab)            # DOT: base + j*N
        is_n0 = Signal(cnt_bits)            # DOT dense: g*U
        is_grp_a = Signal(entry_bits + 1)   # DOT gather: entry address of idx[g*U]
        is_col0 = Signal(ab)                # AXPY: g*U/4
        is_left = Signal(cnt_bits)          # items of this group and the following ones
        is_done = Signal()
        cnt_g = Signal(Ub + 1)              # items in this group
        m.d.comb += cnt_g.eq(Mux(is_left < per, is_left, per))

        # ---- output-side state -----------------------------------------------------------
        out_beat = Signal(beat_bits)
        rel_beat = Signal(beat_bits)        # beats whose slots are free: out_beat or out_beat + 1
        out_s_left = Signal(self.step_bits + 1)
        out_left = Signal(cnt_bits)
        running = Signal()

        # ---- DOT gather index cache -----------------------------------------------------
        cache = [Signal(self.sram_geometry.word_bits, name=f"idx_cache_{i}") for i in range(CW)]
        ld_req = Signal()                   # load the current group's indices next
        ld_w = Signal(waddr_bits)
        ld_left = Signal(cnt_bits)
        cache_ok = Signal()
        m.d.comb += cache_ok.eq(~ld_req & (ld_left == 0))

        # ---- AXPY index stream -----------------------------------------------------------
        ax_a = Signal(entry_bits + 1)       # entry address of the next index to take
        ax_valid = Signal()                 # ax_nb holds the current beat's neuron
        ax_nb = Signal(ab)

        # ---- request lanes ---------------------------------------------------------------
        lane_valid = [Signal(name=f"lane_valid_{i}") for i in range(REQUEST_LANES)]
        lane_burst = [Signal(ab, name=f"lane_burst_{i}") for i in range(REQUEST_LANES)]
        lane_tag = [Signal(CLIENT_TAG_BITS, name=f"lane_tag_{i}") for i in range(REQUEST_LANES)]
        for i in range(REQUEST_LANES):
            req = self.mem.req[i]
            m.d.comb += [req.valid.eq(lane_valid[i]), req.payload.write.eq(0),
                         req.payload.burst.eq(lane_burst[i]), req.payload.tag.eq(lane_tag[i]),
                         req.payload.data.eq(0)]
        free = [~lane_valid[i] | self.mem.req[i].ready for i in range(REQUEST_LANES)]

        # candidates: bursts is_u and is_u + 1 of the current block
        nw = Signal(3)                       # DOT: words of this chunk (1..4)
        m.d.comb += nw.eq(Mux(is_s_left < 4, is_s_left, 4))
        room = Signal()
        m.d.comb += room.eq(Mux(is_axpy, is_b < rel_beat + RB, is_b + nw <= rel_beat + RB))
        can = Signal()
        m.d.comb += can.eq(running & ~is_done & room &
                           Mux(is_axpy, ax_valid, ~d.gather | cache_ok))
        avail = Signal(2)
        with m.If(can):
            m.d.comb += avail.eq(Mux(cnt_g - is_u >= 2, 2, 1))
        cand_burst = [Signal(ab, name=f"cand_burst_{k}") for k in range(2)]
        cand_tag = [Signal(CLIENT_TAG_BITS, name=f"cand_tag_{k}") for k in range(2)]
        for k in range(2):
            unit = is_u + k
            a_k = (is_grp_a + unit)[:entry_bits]
            cache_word = Signal(self.sram_geometry.word_bits, name=f"cache_word_{k}")
            m.d.comb += cache_word.eq(Array(cache)[(a_k >> Eb)[:CWb]])
            n_k = Mux(d.gather, entry(cache_word, a_k[:Eb] if Eb else 0), is_n0 + unit)
            m.d.comb += [
                cand_burst[k].eq(Mux(is_axpy, ax_nb + is_col0 + unit, is_row_base + n_k)),
                cand_tag[k].eq(Cat(is_b[:RBb], unit[:Ub], Mux(is_axpy, 0, nw - 1)[:2])),
            ]
        # lane assignment: both lanes free -> up to 2; else the free one takes candidate 0
        emitted = Signal(2)
        both = free[0] & free[1]
        with m.If(avail != 0):
            with m.If(both):
                m.d.comb += emitted.eq(avail)
                m.d.sync += [lane_burst[0].eq(cand_burst[0]), lane_tag[0].eq(cand_tag[0]),
                             lane_burst[1].eq(cand_burst[1]), lane_tag[1].eq(cand_tag[1])]
            with m.Elif(free[0]):
                m.d.comb += emitted.eq(1)
                m.d.sync += [lane_burst[0].eq(cand_burst[0]), lane_tag[0].eq(cand_tag[0])]
            with m.Elif(free[1]):
                m.d.comb += emitted.eq(1)
                m.d.sync += [lane_burst[1].eq(cand_burst[0]), lane_tag[1].eq(cand_tag[0])]
        with m.If(free[0]):
            m.d.sync += lane_valid[0].eq(avail != 0)
        with m.If(free[1]):
            m.d.sync += lane_valid[1].eq(Mux(free[0], avail == 2, avail != 0))

        # advance the fetch order
        block_end = Signal()
        m.d.comb += block_end.eq((emitted != 0) & (is_u + emitted == cnt_g))
        group_end = Signal()
        m.d.comb += group_end.eq(block_end & Mux(is_axpy, is_s_left == 1, is_s_left <= 4))
        with m.If(emitted != 0):
            m.d.sync += is_u.eq(is_u + emitted)
        with m.If(block_end):
            m.d.sync += [is_u.eq(0), is_b.eq(is_b + Mux(is_axpy, 1, nw))]
            with m.If(group_end):
                m.d.sync += [
                    is_s_left.eq(n_steps), is_row_base.eq(base_burst),
                    is_n0.eq(is_n0 + U), is_grp_a.eq(is_grp_a + U), is_col0.eq(is_col0 + U // 4),
                    is_left.eq(is_left - per),
                ]
                with m.If(is_left <= per):
                    m.d.sync += is_done.eq(1)
                with m.Elif(~is_axpy & d.gather):
                    m.d.sync += ld_req.eq(1)
            with m.Else():
                m.d.sync += [is_s_left.eq(is_s_left - Mux(is_axpy, 1, 4)),
                             is_row_base.eq(is_row_base + d.n_rows)]

        # AXPY: take the next index when the current beat's bursts are all issued
        take = Signal()
        ax_last = Signal()
        m.d.comb += [
            ax_last.eq(ax_a == ent_end - 1),
            take.eq(running & is_axpy & (~ax_valid | block_end) & self.sram.resp.valid),
        ]
        ax_entry = entry(sram_word, ax_a[:Eb] if Eb else 0)
        with m.If(block_end & is_axpy):
            m.d.sync += ax_valid.eq(0)
        with m.If(take):
            m.d.sync += [ax_valid.eq(1),
                         ax_nb.eq(base_burst + ax_entry[:ab] * bpr),
                         ax_a.eq(Mux(ax_last, ent_a, ax_a + 1))]

        # DOT gather: (re)load the index cache for the current group
        with m.If(ld_req & (rd_left == 0) & (ld_left == 0)):
            first = is_grp_a[:entry_bits]
            words = list_words(first, cnt_g)
            m.d.sync += [ld_req.eq(0), rd_next.eq(first[Eb:]), rd_left.eq(words),
                         rd_repeat.eq(0), ld_w.eq(first[Eb:]), ld_left.eq(words)]
        load = Signal()
        m.d.comb += load.eq(running & (ld_left != 0) & self.sram.resp.valid)
        with m.If(load):
            m.d.sync += [Array(cache)[ld_w[:CWb]].eq(sram_word), ld_w.eq(ld_w + 1),
                         ld_left.eq(ld_left - 1)]

        # ---- ring: response writes -------------------------------------------------------
        # Per rank r: which units its burst feeds (unit_match[r][u]), which slots (slot_hit),
        # and the burst word each slot/unit position takes (cand[r][t][u % 4]). Every ring
        # word is written by at most one response per cycle, so the rank terms are OR-ed.
        # The unit decode is one small compare per unit (not a one-hot shift of a U-bit
        # constant), and each column's write enables come from its own R match bits: the
        # same logic, in word-sized pieces, which is what keeps a 256-unit ring cheap to
        # simulate (Verilator evaluates a wide shift word by word at each use).
        vbits = [Signal(U, name=f"ring_valid_{t}") for t in range(RB)]
        unit_match, slot_hit, cand = [], [], []
        for r in range(R):
            resp = self.mem.resp[r]
            m.d.comb += resp.ready.eq(1)
            t_r = resp.payload.tag[:RBb]
            x_r = resp.payload.tag[RBb:RBb + Ub]
            nw_r = resp.payload.tag[RBb + Ub:RBb + Ub + 2] + 1
            rdata = resp.payload.data
            words = [rdata.word_select(q, WORD_BITS) for q in range(WORDS_PER_BURST)]
            match = [Signal(name=f"resp{r}_unit{u}") for u in range(U)]
            for u in range(U):
                # DOT: the burst's unit; AXPY: its 4 units 4x .. 4x+3
                m.d.comb += match[u].eq(Mux(is_axpy, x_r == u // 4, x_r == u))
            unit_match.append(match)
            sh, cd = [], []
            for t in range(RB):
                delta = Signal(RBb, name=f"resp{r}_delta_{t}")
                hit = Signal(name=f"resp{r}_slot_hit_{t}")
                m.d.comb += [delta.eq(t - t_r),
                             hit.eq(resp.valid & Mux(is_axpy, t_r == t, delta < nw_r))]
                sh.append(hit)
                dot_word = Signal(WORD_BITS, name=f"resp{r}_dot_word_{t}")
                m.d.comb += dot_word.eq(Array(words)[delta[:2]])
                cd.append([Mux(is_axpy, words[q], dot_word) for q in range(WORDS_PER_BURST)])
            slot_hit.append(sh)
            cand.append(cd)
        # the ring's words live in one RingColumn per unit (hw/memory/ring_column.py)
        slot_hits = Signal(RB * R)                    # bit t * R + r, as the columns' wen
        m.d.comb += slot_hits.eq(Cat(slot_hit[r][t] for t in range(RB) for r in range(R)))
        columns = [self._column(m, u) for u in range(U)]
        for u in range(U):
            ranks_here = Cat(unit_match[r][u] for r in range(R))
            m.d.comb += columns[u].wen.eq(slot_hits & Cat(*([ranks_here] * RB)))
            for t in range(RB):
                for r in range(R):
                    m.d.comb += getattr(columns[u], f"data_{t}_{r}").eq(cand[r][t][u % 4])
        unit_hit = [Cat(unit_match[r]) for r in range(R)]
        out_t = out_beat[:RBb]
        beat_fire = Signal()
        for t in range(RB):
            wen = Signal(U, name=f"ring_wen_{t}")
            m.d.comb += wen.eq(_or_all([Mux(slot_hit[r][t], unit_hit[r], 0) for r in range(R)]))
            # accepting the head beat clears its valid bits; a burst requested after an early
            # release may already land in the same cycle, and keeps its bits
            m.d.sync += vbits[t].eq(Mux(beat_fire & (out_t == t), 0, vbits[t]) | wen)

        # ---- ring: head beat ---------------------------------------------------------------
        expected = Signal(U)
        m.d.comb += expected.eq(Cat(out_left > Mux(is_axpy, u // 4, u) for u in range(U)))
        head_valid = Signal(U)
        m.d.comb += head_valid.eq(Array(vbits)[out_t])
        m.d.comb += self.beats.valid.eq(running & ((head_valid | ~expected).all()))
        for u in range(U):
            m.d.comb += [columns[u].sel.eq(out_t),
                         self.beats.payload[u].eq(Mux(expected[u], columns[u].word, 0))]
        m.d.comb += beat_fire.eq(self.beats.valid & self.beats.ready)
        # a slot is free once its beat is released (early, ``release``) or accepted
        with m.If((rel_beat == out_beat) & ((self.release & self.beats.valid) | beat_fire)):
            m.d.sync += rel_beat.eq(rel_beat + 1)
        last_beat = Signal()
        m.d.comb += last_beat.eq((out_s_left == 1) & (out_left <= per))
        with m.If(beat_fire):
            m.d.sync += out_beat.eq(out_beat + 1)
            with m.If(out_s_left == 1):
                m.d.sync += [out_s_left.eq(n_steps), out_left.eq(out_left - per)]
            with m.Else():
                m.d.sync += out_s_left.eq(out_s_left - 1)

        with m.If(~self.desc.ready):
            m.d.sync += self.busy_cycles.eq(self.busy_cycles + 1)
        with m.If(running & ~self.beats.valid):
            m.d.sync += self.data_wait_cycles.eq(self.data_wait_cycles + 1)

        # ---- control -----------------------------------------------------------------------
        dtype_int8 = d.dtype == int(Dtype.INT8)
        scan_w = Signal(waddr_bits)
        scan_left = Signal(cnt_bits)
        scan_bad = Signal()
        word_bad = Signal()
        m.d.comb += word_bad.eq(Cat(
            (((scan_w << Eb) + e) >= ent_a) & (((scan_w << Eb) + e) < ent_end) &
            (entry(sram_word, e) >= d.n_rows) for e in range(E)).any())

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.desc.ready.eq(1)
                with m.If(self.desc.valid):
                    m.d.sync += [d.eq(self.desc.payload), job_bursts.eq(0), job_cycles.eq(1)]
                    m.next = "DERIVE"
            with m.State("DERIVE"):
                cb = Mux(dtype_int8, d.n_cols, d.n_cols << 1)
                words_per_row = (cb + 15) >> 4
                m.d.sync += [
                    is_axpy.eq(d.mode == GemvMode.AXPY),
                    col_bytes.eq(cb),
                    bpr.eq((cb + 63) >> 6),
                    n_steps.eq(Mux(d.mode == GemvMode.AXPY, d.n_idx, words_per_row)),
                    n_out.eq(Mux(d.mode == GemvMode.AXPY, d.n_cols,
                                 Mux(d.gather, d.n_idx, d.n_rows))),
                    n_items.eq(Mux(d.mode == GemvMode.AXPY, (cb + 63) >> 6,
                                   Mux(d.gather, d.n_idx, d.n_rows))),
                ]
                m.next = "CHECK"
            with m.State("CHECK"):
                dram_end = base_burst + d.n_rows * bpr
                sram_end = d.idx_addr + d.n_idx * INDEX_ENTRY_BYTES
                first_word = ent_a[Eb:]
                with m.If(d.dtype == 3):
                    m.d.sync += st_code.eq(Status.BAD_FIELD)
                    m.next = "STATUS"
                with m.Elif(is_axpy & ~d.gather):
                    m.d.sync += st_code.eq(Status.BAD_FIELD)
                    m.next = "STATUS"
                with m.Elif((n_out >= 2 ** self.index_bits) | (n_steps >= 2 ** self.step_bits)):
                    m.d.sync += st_code.eq(Status.BAD_FIELD)
                    m.next = "STATUS"
                with m.Elif(d.base[:6] != 0):
                    m.d.sync += st_code.eq(Status.MISALIGNED)
                    m.next = "STATUS"
                with m.Elif(dram_end > cap_bursts):
                    m.d.sync += st_code.eq(Status.DRAM_RANGE)
                    m.next = "STATUS"
                with m.Elif(d.gather & (d.idx_addr[:2] != 0)):
                    m.d.sync += st_code.eq(Status.MISALIGNED)
                    m.next = "STATUS"
                with m.Elif(d.gather & (sram_end > sram_bytes)):
                    m.d.sync += st_code.eq(Status.SRAM_RANGE)
                    m.next = "STATUS"
                with m.Elif(d.gather & (d.n_idx != 0)):
                    words = list_words(ent_a, d.n_idx)
                    m.d.sync += [rd_next.eq(first_word), rd_left.eq(words), rd_repeat.eq(0),
                                 scan_w.eq(first_word), scan_left.eq(words), scan_bad.eq(0)]
                    m.next = "SCAN"
                with m.Else():
                    m.next = "START"
            with m.State("SCAN"):
                m.d.comb += self.sram.resp.ready.eq(1)
                with m.If(self.sram.resp.valid):
                    m.d.sync += [scan_w.eq(scan_w + 1), scan_left.eq(scan_left - 1),
                                 scan_bad.eq(scan_bad | word_bad)]
                    with m.If(scan_left == 1):
                        with m.If(scan_bad | word_bad):
                            m.d.sync += st_code.eq(Status.BAD_INDEX)
                            m.next = "STATUS"
                        with m.Else():
                            m.next = "START"
            with m.State("START"):
                m.d.comb += self.validated.eq(1)         # every check passed, nothing issued yet
                m.d.sync += [
                    is_u.eq(0), is_s_left.eq(n_steps), is_b.eq(0), is_row_base.eq(base_burst),
                    is_n0.eq(0), is_grp_a.eq(ent_a), is_col0.eq(0), is_left.eq(n_items),
                    is_done.eq(0),
                    out_beat.eq(0), rel_beat.eq(0), out_s_left.eq(n_steps), out_left.eq(n_items),
                    ax_valid.eq(0), ax_a.eq(ent_a), ld_req.eq(0), ld_left.eq(0),
                ]
                with m.If((n_out == 0) | (n_steps == 0)):
                    m.d.sync += st_code.eq(Status.OK)
                    m.next = "STATUS"
                with m.Else():
                    with m.If(is_axpy):
                        words = list_words(ent_a, d.n_idx)
                        groups = (n_items + (U // 4 - 1)) >> (Ub - 2)
                        m.d.sync += [rd_next.eq(ent_a[Eb:]), rd_first.eq(ent_a[Eb:]),
                                     rd_left.eq(words), rd_words.eq(words),
                                     rd_repeat.eq(groups - 1)]
                    with m.Elif(d.gather):
                        m.d.sync += ld_req.eq(1)
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [
                    running.eq(1),
                    self.sram.resp.ready.eq(Mux(is_axpy, take & (ax_last | (ax_a[:Eb] == E - 1)),
                                                load)),
                ]
                with m.If(beat_fire & last_beat):
                    m.d.sync += st_code.eq(Status.OK)
                    m.next = "STATUS"
            with m.State("STATUS"):
                m.d.comb += self.status.valid.eq(1)
                with m.If(self.status.ready):
                    m.next = "IDLE"
        return m
