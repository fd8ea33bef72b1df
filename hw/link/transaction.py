"""DIMM-Link transaction layer: remote SRAM/DRAM writes, SRAM reads and atomic adds between DIMMs.

One instance per DIMM sits between the command processor (and the relayout
unit), the SRAM, the memory system and the router (``hw/link/router.py``). It
has three parts that work at the same time:

Address spaces
--------------
A transaction ``address`` (40 bits) with bit 39 (:data:`DRAM_SPACE`) clear is
a byte address in the target's SRAM; with bit 39 set, bits 0..38 are a
DIMM-local byte address in the target's DRAM. DRAM targets take WRITEs only
(the relayout unit's data path): they need 64 B alignment of address and
length and must lie inside the target's protection window
``[window_base, window_limit)`` (its command processor's ``WINDOW_BASE`` /
``WINDOW_LIMIT``) and its DRAM; otherwise nothing is written and the
COMPLETION says ``REMOTE_RANGE``. ATOMIC_ADD and READ_REQUEST on DRAM are
answered with ``REMOTE_RANGE`` too: atomics need a read-modify-write the
result writer only has for the SRAM, and a DRAM read response would need the
sender to collect unordered read bursts (host or relayout code reads DRAM by
local DMA first). A DRAM write needs ``config.max_payload`` to be a multiple
of 64 B when a transfer spans several packets (the default 1 KiB is).

Initiator (``cmd`` -> ``status``)
---------------------------------
A command (:func:`link_command_layout`): ``op`` (``LinkOp.WRITE``,
``READ_REQUEST`` = remote read, ``ATOMIC_ADD_FP32``, ``ATOMIC_ADD_INT32``),
``dest`` (DIMM id), ``remote_addr`` (transaction address: the target's SRAM, or
its DRAM with :data:`DRAM_SPACE` set; WRITE only),
``local_addr`` (byte address in this SRAM), ``n_bytes``. Checks, in this order,
in the cycle the command is taken and before anything is sent:

* ``op`` not one of those four, or ``dest >= n_dimms`` -> ``BAD_FIELD``;
* ``local_addr``, ``remote_addr`` or ``n_bytes`` not a multiple of 32 (a word)
  -> ``MISALIGNED``;
* ``local_addr + n_bytes`` past the SRAM -> ``SRAM_RANGE``;
* ``n_bytes == 0`` -> ``OK`` at once.

Then the transfer is cut into packets of at most ``config.max_payload`` bytes
(chunk ``i`` covers bytes ``[i*max_payload, ...)`` of both ranges). At most
``outstanding`` packets are in flight: a WRITE/ATOMIC packet carries its
payload and is answered by a COMPLETION once the target has written it; a
READ_REQUEST carries ``length_words`` and ``reply_address`` and is answered by
a READ_RESPONSE whose payload this DIMM's target side writes to
``reply_address``. The ``status`` beat (``code``, ``cycles`` from taking the
command) comes when every packet is answered: ``OK``, or the first error a
target reported (``REMOTE_RANGE``: remote address misaligned or past the
target's SRAM, or a DRAM range the target refuses). A response whose ``tag`` is not the current command's (a late
answer to a timed-out command) is ignored and counted in ``stale_responses``.
If ``response_timeout`` cycles pass with packets in flight and nothing sent
or answered, the command ends with ``LINK_TIMEOUT``. ``cmd.ready`` is high only
while idle.

Target (``rx``)
---------------
Incoming packets are handled in arrival order, one at a time:

* WRITE to DRAM: checked as above; the payload words are paired into 64 B
  bursts and written through the memory-client port ``mem`` (request lane 0,
  a register, a burst per two payload beats); the COMPLETION is queued only
  when the memory has acknowledged every burst of the packet, so a reader
  that sees the completion (or the initiator's status) reads the new data.
  The target takes the next packet only after that (one packet at a time:
  about ``2 x words + memory latency`` cycles per packet).
* WRITE / ATOMIC_ADD_FP32 / ATOMIC_ADD_INT32 to SRAM: the payload goes through a
  :class:`~.result_writer.ResultWriter` (8 lanes of 32 bits per word; ATOMIC
  adds lane by lane: IEEE binary32 with round to nearest even, or INT32
  wrap-around, exactly the result writer's accumulate path), then a COMPLETION
  with the writer's status goes back to ``src``. A misaligned address or one
  whose words run past the SRAM: nothing is written, the payload is
  discarded, and the COMPLETION says ``REMOTE_RANGE``.
* READ_REQUEST: range checked the same way; a READ_RESPONSE (payload read
  from the SRAM when it is sent, or no payload and ``REMOTE_RANGE``) is queued.
* READ_RESPONSE: written like a WRITE to its ``address`` (the initiator's
  ``reply_address``), then the initiator is told.
* COMPLETION: handed to the initiator.
* Anything else (unknown ``op``, a beat without ``first`` where a packet
  should start): discarded up to ``last``, counted in ``bad_packets``.

Responses wait in a queue of ``outstanding * max_dimms`` entries (a few
fields each, no data), which no legal traffic can fill, so the target never
stops taking packets because a response cannot leave (no protocol deadlock
in a chain; docs/dimm_link.md). Should it be full anyway, ``rx`` waits.

Sender (``tx``)
---------------
Builds one packet at a time from a job: a queued response or the
initiator's next request, alternating when both wait. The header beat goes
out in the cycle after the job is chosen; payload words are read from the
SRAM (``sram_read``, read latency 2) and sent as they arrive, one per cycle
when the SRAM and ``tx`` allow.

Cycle behaviour: a 1-word remote write leaves ``tx`` 2 cycles after its
command (header) plus the SRAM read latency (payload); the target needs the
result writer's time (about 1 cycle per word, 2 for an atomic add) and
queues the COMPLETION 2 cycles after the writer's status.
"""

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import ACC_BITS, RESULT_LANES, check_int
from ndpdimm.hw.gemv.activation_feeder import check_sram_geometry
from ndpdimm.hw.gemv.result_writer import ResultWriter
from ndpdimm.hw.link.formats import WORD_BYTES, LinkConfig, LinkOp, transaction_header_layout
from ndpdimm.hw.link.router import DIMM_ID_BITS, packet_signature
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import (
    BURST_BYTES,
    STATUS_CYCLES_BITS,
    Status,
    memory_client_signature,
    offer_status,
    status_layout,
    status_state,
)

__all__ = ["LinkTransaction", "link_command_layout", "REMOTE_ADDR_BITS", "TAG_BITS", "DRAM_SPACE",
           "WINDOW_BITS"]

#: Width of a remote byte address (``transaction_header_layout.address``).
REMOTE_ADDR_BITS = 40
#: Address bit that selects the target's DRAM (set) or SRAM (clear).
DRAM_SPACE = 1 << (REMOTE_ADDR_BITS - 1)
#: Width of the ``window_base`` / ``window_limit`` inputs (the command processor's registers).
WINDOW_BITS = 64
TAG_BITS = 8
#: log2 of a DRAM burst: DRAM targets are aligned to it.
_BURST_SHIFT = (BURST_BYTES - 1).bit_length()
#: Index width of the result writer (n_out = 8 lanes x up to 255 words).
_WRITER_INDEX_BITS = 12


def link_command_layout(sram) -> data.StructLayout:
    """One initiator command (fields in the module docstring)."""
    a = sram.size_bytes.bit_length() - 1
    return data.StructLayout({
        "op": 4, "dest": DIMM_ID_BITS, "remote_addr": REMOTE_ADDR_BITS,
        "local_addr": a, "n_bytes": a + 1,
    })


def _job_layout(sram) -> data.StructLayout:
    """One packet for the sender: its header and the SRAM words of its payload."""
    return data.StructLayout({
        "header": transaction_header_layout,
        "src_word": sram.addr_bits,
        "n_words": 8,
    })


class LinkTransaction(wiring.Component):
    """The transaction layer of one DIMM (see module docstring).

    Parameters
    ----------
    sram : SramGeometry or None
        The SRAM (256-bit words).
    config : LinkConfig or None
        Link parameters (``max_payload`` sets the packet size).
    outstanding : int
        Request packets in flight per command (1..16).
    max_dimms : int
        Most DIMMs in a chain (sizes the response queue), 2..16.
    response_timeout : int
        Cycles without progress before a command ends with ``LINK_TIMEOUT``.
    capacity_bytes, ranks : int or None
        DIMM capacity and rank count of the ``mem`` port (remote DRAM writes);
        ``None`` takes them from ``load_dram_config()``.
    """

    def __init__(self, sram=None, config: LinkConfig = None, *, outstanding: int = 4,
                 max_dimms: int = 8, response_timeout: int = 1 << 20, capacity_bytes=None,
                 ranks=None):
        if capacity_bytes is None or ranks is None:
            org = load_dram_config()[0]
            capacity_bytes = org.capacity_bytes if capacity_bytes is None else capacity_bytes
            ranks = org.ranks if ranks is None else ranks
        mem = memory_client_signature(capacity_bytes, ranks)      # validates both
        if capacity_bytes > DRAM_SPACE:
            raise ValueError(f"capacity_bytes must be at most {DRAM_SPACE:#x} (39 address bits), "
                             f"got {capacity_bytes!r}")
        self.capacity_bytes, self.ranks = capacity_bytes, ranks
        self.geometry = g = check_sram_geometry(sram)
        if config is None:
            config = LinkConfig()
        if not isinstance(config, LinkConfig):
            raise ValueError(f"config must be a LinkConfig, got {config!r}")
        self.config = config
        self.outstanding = check_int("outstanding", outstanding, 1, 16)
        self.max_dimms = check_int("max_dimms", max_dimms, 2, 1 << DIMM_ID_BITS)
        self.response_timeout = check_int("response_timeout", response_timeout, 16, 1 << 30)
        self.chunk_words = config.max_payload // WORD_BYTES
        self.cmd_layout = link_command_layout(g)
        self.job_layout = _job_layout(g)
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "status": Out(stream.Signature(status_layout())),
            "tx": Out(packet_signature()),
            "rx": In(packet_signature()),
            "sram_read": Out(g.port_signature),
            "sram_write": Out(g.port_signature),
            "mem": Out(mem),
            "window_base": In(WINDOW_BITS),
            "window_limit": In(WINDOW_BITS),
            "my_id": In(DIMM_ID_BITS),
            "n_dimms": In(DIMM_ID_BITS + 1),
            "busy": Out(1),
            "packets_sent": Out(32),
            "packets_received": Out(32),
            "bad_packets": Out(32),
            "stale_responses": Out(32),
            "dram_bursts_written": Out(32),
        })

    def _remote_range_ok(self, m, address, n_words, name):
        """Whether ``n_words`` words at byte ``address`` are aligned and inside this SRAM."""
        ok = Signal(name=name)
        end = Signal(REMOTE_ADDR_BITS + 1, name=f"{name}_end")
        m.d.comb += [end.eq(address + n_words * WORD_BYTES),
                     ok.eq((address[:5] == 0) & (end <= self.geometry.size_bytes))]
        return ok

    def _dram_range_ok(self, m, address, n_words):
        """Whether ``n_words`` words at DRAM byte ``address`` are whole aligned bursts inside the
        protection window and the DIMM."""
        ok = Signal(name="dram_range_ok")
        end = Signal(REMOTE_ADDR_BITS + 1, name="dram_range_end")
        m.d.comb += [end.eq(address + n_words * WORD_BYTES),
                     ok.eq((address[:_BURST_SHIFT] == 0) & (n_words[0] == 0) & (address >= self.window_base) &
                           (end <= self.window_limit) & (end <= self.capacity_bytes))]
        return ok

    def elaborate(self, platform):
        m = Module()
        g = self.geometry
        word_shift = (WORD_BYTES - 1).bit_length()

        m.submodules.responses = responses = fifo.SyncFIFOBuffered(
            width=self.job_layout.size, depth=self.outstanding * self.max_dimms)
        m.submodules.writer = writer = ResultWriter(g, max_batch=1, index_bits=_WRITER_INDEX_BITS)
        wiring.connect(m, writer.sram, wiring.flipped(self.sram_write))

        # Target -> initiator: one response for the current command (or a stale one).
        got_response = Signal()
        got_tag = Signal(TAG_BITS)
        got_code = Signal(4)

        # ---------------- initiator ----------------
        op = Signal(4)
        dest = Signal(DIMM_ID_BITS)
        remote = Signal(REMOTE_ADDR_BITS)
        local_word = Signal(g.addr_bits)
        words_left = Signal(g.addr_bits + 1)
        pending = Signal(g.addr_bits + 1)           # packets not yet answered
        in_flight = Signal(range(self.outstanding + 1))
        serial = Signal(TAG_BITS)
        code = Signal(4)
        cycles = Signal(STATUS_CYCLES_BITS)
        quiet = Signal(range(self.response_timeout + 1))

        offer = Signal()                            # the initiator offers a request job
        offer_job = Signal(self.job_layout)
        offer_taken = Signal()
        chunk = Signal(8)
        m.d.comb += chunk.eq(words_left)
        with m.If(words_left > self.chunk_words):
            m.d.comb += chunk.eq(self.chunk_words)
        is_read = op == LinkOp.READ_REQUEST
        m.d.comb += [
            offer_job.header.op.eq(op),
            offer_job.header.dest.eq(dest),
            offer_job.header.src.eq(self.my_id),
            offer_job.header.tag.eq(serial),
            offer_job.header.address.eq(remote),
            offer_job.header.length_words.eq(chunk),
            offer_job.header.reply_address.eq(local_word << word_shift),
            offer_job.src_word.eq(local_word),
            offer_job.n_words.eq(chunk),
        ]
        with m.If(is_read):
            m.d.comb += offer_job.n_words.eq(0)

        c = self.cmd.payload
        size = g.size_bytes
        current = got_response & (got_tag == serial)
        m.d.sync += self.stale_responses.eq(self.stale_responses + (got_response & (got_tag != serial)))
        with m.FSM(name="initiator"):
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += cycles.eq(0)
                    legal_op = ((c.op == LinkOp.WRITE) | (c.op == LinkOp.READ_REQUEST) |
                                (c.op == LinkOp.ATOMIC_ADD_FP32) | (c.op == LinkOp.ATOMIC_ADD_INT32))
                    with m.If(~legal_op | (c.dest >= self.n_dimms)):
                        offer_status(m, self.status, Status.BAD_FIELD, 0)
                    with m.Elif((c.local_addr[:5] != 0) | (c.remote_addr[:5] != 0) | (c.n_bytes[:5] != 0)):
                        offer_status(m, self.status, Status.MISALIGNED, 0)
                    with m.Elif(c.local_addr + c.n_bytes > size):
                        offer_status(m, self.status, Status.SRAM_RANGE, 0)
                    with m.Elif(c.n_bytes == 0):
                        offer_status(m, self.status, Status.OK, 0)
                    with m.Else():
                        words = c.n_bytes >> word_shift
                        m.d.sync += [
                            op.eq(c.op), dest.eq(c.dest), remote.eq(c.remote_addr),
                            local_word.eq(c.local_addr >> word_shift), words_left.eq(words),
                            pending.eq((words + self.chunk_words - 1) // self.chunk_words),
                            in_flight.eq(0), serial.eq(serial + 1), code.eq(Status.OK), quiet.eq(0),
                        ]
                        m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1),
                             offer.eq((words_left != 0) & (in_flight < self.outstanding))]
                m.d.sync += [cycles.eq(cycles + 1), quiet.eq(quiet + 1)]
                with m.If(offer_taken):
                    m.d.sync += [remote.eq(remote + (chunk << word_shift)),
                                 local_word.eq(local_word + chunk),
                                 words_left.eq(words_left - chunk)]
                with m.If(offer_taken | current | (in_flight == 0)):
                    m.d.sync += quiet.eq(0)      # the timeout counts only silence with packets out
                with m.If(current):
                    m.d.sync += pending.eq(pending - 1)
                    with m.If((code == Status.OK) & (got_code != Status.OK)):
                        m.d.sync += code.eq(got_code)
                m.d.sync += in_flight.eq(in_flight + offer_taken - current)
                with m.If(current & (pending == 1)):
                    resolved = Signal(4)
                    m.d.comb += resolved.eq(code)
                    with m.If(code == Status.OK):
                        m.d.comb += resolved.eq(got_code)
                    offer_status(m, self.status, resolved, cycles + 1)
                with m.Elif((quiet == self.response_timeout) & (in_flight != 0)):
                    offer_status(m, self.status, Status.LINK_TIMEOUT, cycles + 1)
            status_state(m, self.status, self.busy)

        # ---------------- sender ----------------
        job = Signal(self.job_layout)
        prefer_response = Signal()
        rd_addr = Signal(g.addr_bits)
        issued = Signal(8)
        sent = Signal(8)
        q = self.job_layout(responses.r_data)
        with m.FSM(name="sender"):
            with m.State("IDLE"):
                with m.If(responses.r_rdy & (prefer_response | ~offer)):
                    m.d.comb += responses.r_en.eq(1)
                    m.d.sync += [job.eq(q), prefer_response.eq(0)]
                    m.next = "HEADER"
                with m.Elif(offer):
                    m.d.comb += offer_taken.eq(1)
                    m.d.sync += [job.eq(offer_job), prefer_response.eq(1)]
                    m.next = "HEADER"
            with m.State("HEADER"):
                m.d.comb += [self.tx.valid.eq(1),
                             self.tx.payload.data.eq(job.header.as_value()),
                             self.tx.payload.payload_words.eq(job.n_words),
                             self.tx.payload.first.eq(1),
                             self.tx.payload.last.eq(job.n_words == 0)]
                with m.If(self.tx.ready):
                    m.d.sync += [self.packets_sent.eq(self.packets_sent + 1),
                                 rd_addr.eq(job.src_word), issued.eq(0), sent.eq(0)]
                    m.next = "IDLE"
                    with m.If(job.n_words != 0):
                        m.next = "PAYLOAD"
            with m.State("PAYLOAD"):
                rd = self.sram_read
                m.d.comb += [rd.req.valid.eq(issued != job.n_words),
                             rd.req.payload.addr.eq(rd_addr),
                             rd.req.payload.write.eq(0),
                             self.tx.valid.eq(rd.resp.valid),
                             self.tx.payload.data.eq(rd.resp.payload),
                             self.tx.payload.last.eq(sent == job.n_words - 1),
                             rd.resp.ready.eq(self.tx.ready)]
                with m.If(rd.req.valid & rd.req.ready):
                    m.d.sync += [rd_addr.eq(rd_addr + 1), issued.eq(issued + 1)]
                with m.If(self.tx.valid & self.tx.ready):
                    m.d.sync += sent.eq(sent + 1)
                    with m.If(self.tx.payload.last):
                        m.next = "IDLE"

        # ---------------- target ----------------
        beat = self.rx.payload
        hdr_in = transaction_header_layout(beat.data[:transaction_header_layout.size])
        hdr = Signal(transaction_header_layout)
        words = Signal(8)
        fed = Signal(8)
        reply = Signal(self.job_layout)             # response to queue after the packet
        reply_pending = Signal()
        notify_pending = Signal()
        status_code = Signal(4)

        in_ok = self._remote_range_ok(m, hdr_in.address, beat.payload_words, "write_range_ok")
        to_dram = (hdr_in.op == LinkOp.WRITE) & hdr_in.address[REMOTE_ADDR_BITS - 1]
        dram_ok = self._dram_range_ok(m, hdr_in.address[:REMOTE_ADDR_BITS - 1], beat.payload_words)
        read_ok = self._remote_range_ok(m, hdr_in.address, hdr_in.length_words, "read_range_ok")

        def completion(m, header, code_value):
            m.d.sync += [reply.eq(0), reply.header.op.eq(LinkOp.COMPLETION),
                         reply.header.dest.eq(header.src), reply.header.src.eq(self.my_id),
                         reply.header.tag.eq(header.tag), reply.header.status.eq(code_value),
                         reply_pending.eq(1)]

        m.d.comb += [
            writer.cmd.payload.y_addr.eq(hdr.address),
            writer.cmd.payload.y_pitch.eq(0),
            writer.cmd.payload.accumulate.eq((hdr.op == LinkOp.ATOMIC_ADD_FP32) |
                                             (hdr.op == LinkOp.ATOMIC_ADD_INT32)),
            writer.cmd.payload.is_int.eq(hdr.op == LinkOp.ATOMIC_ADD_INT32),
            writer.cmd.payload.batch_minus_one.eq(0),
            writer.cmd.payload.n_out.eq(words * RESULT_LANES),
        ]
        for lane in range(RESULT_LANES):
            m.d.comb += writer.results.payload.data[lane].eq(beat.data[lane * ACC_BITS:(lane + 1) * ACC_BITS])
        m.d.comb += [writer.results.payload.count.eq(RESULT_LANES),
                     writer.results.payload.batch.eq(0),
                     writer.results.payload.index.eq(fed * RESULT_LANES),
                     writer.results.payload.last.eq(fed == words - 1)]

        # Remote DRAM writes: request lane 0 is a register, acknowledgements are always taken.
        req = self.mem.req[0]
        dram_burst = Signal(len(req.payload.burst))
        low = Signal(WORD_BYTES * 8)                # the first word of a burst
        have_low = Signal()
        load = Signal()
        lane_free = ~req.valid | req.ready
        acks = Signal(range(len(self.mem.resp) + 1))
        dram_in_flight = Signal(range(self.chunk_words + 2))
        m.d.comb += acks.eq(sum(r.valid for r in self.mem.resp))
        for r in self.mem.resp:
            m.d.comb += r.ready.eq(1)
        with m.If(load):
            m.d.sync += [req.valid.eq(1), req.payload.write.eq(1), req.payload.burst.eq(dram_burst),
                         req.payload.tag.eq(0), req.payload.data.eq(Cat(low, beat.data)),
                         dram_burst.eq(dram_burst + 1),
                         self.dram_bursts_written.eq(self.dram_bursts_written + 1)]
        with m.Elif(req.ready):
            m.d.sync += req.valid.eq(0)
        m.d.sync += dram_in_flight.eq(dram_in_flight + load - acks)

        with m.FSM(name="target"):
            with m.State("IDLE"):
                # A response is queued (or handed over) before the next packet is looked at.
                with m.If(reply_pending):
                    m.d.comb += [responses.w_en.eq(1), responses.w_data.eq(reply)]
                    with m.If(responses.w_rdy):
                        m.d.sync += reply_pending.eq(0)
                with m.Elif(notify_pending):
                    m.d.comb += [got_response.eq(1), got_tag.eq(hdr.tag), got_code.eq(status_code)]
                    m.d.sync += notify_pending.eq(0)
                with m.Else():
                    m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid & self.rx.ready):
                    m.d.sync += [hdr.eq(hdr_in), words.eq(beat.payload_words), fed.eq(0)]
                    with m.If(~beat.first):
                        m.d.sync += self.bad_packets.eq(self.bad_packets + 1)
                        with m.If(~beat.last):
                            m.next = "DRAIN"
                    with m.Else():
                        m.d.sync += self.packets_received.eq(self.packets_received + 1)
                        with m.If(~beat.last):
                            m.next = "DRAIN"        # default: discard what follows the header
                        with m.Switch(hdr_in.op):
                            with m.Case(LinkOp.WRITE, LinkOp.ATOMIC_ADD_FP32, LinkOp.ATOMIC_ADD_INT32,
                                        LinkOp.READ_RESPONSE):
                                is_response = hdr_in.op == LinkOp.READ_RESPONSE
                                with m.If(is_response & (hdr_in.status != Status.OK)):
                                    m.d.sync += [notify_pending.eq(1), status_code.eq(hdr_in.status)]
                                with m.Elif(to_dram):
                                    with m.If(~dram_ok):
                                        completion(m, hdr_in, Status.REMOTE_RANGE)
                                    with m.Elif(beat.payload_words == 0):
                                        completion(m, hdr_in, Status.OK)
                                    with m.Else():
                                        m.d.sync += [dram_burst.eq(hdr_in.address[_BURST_SHIFT:REMOTE_ADDR_BITS - 1]),
                                                     have_low.eq(0)]
                                        m.next = "DRAM_FEED"
                                with m.Elif(~in_ok):
                                    with m.If(is_response):
                                        m.d.sync += [notify_pending.eq(1), status_code.eq(Status.REMOTE_RANGE)]
                                    with m.Else():
                                        completion(m, hdr_in, Status.REMOTE_RANGE)
                                with m.Elif(beat.payload_words == 0):
                                    with m.If(is_response):
                                        m.d.sync += [notify_pending.eq(1), status_code.eq(Status.OK)]
                                    with m.Else():
                                        completion(m, hdr_in, Status.OK)
                                with m.Else():
                                    m.next = "COMMAND"
                            with m.Case(LinkOp.READ_REQUEST):
                                m.d.sync += [reply.eq(0), reply.header.op.eq(LinkOp.READ_RESPONSE),
                                             reply.header.dest.eq(hdr_in.src),
                                             reply.header.src.eq(self.my_id),
                                             reply.header.tag.eq(hdr_in.tag),
                                             reply.header.address.eq(hdr_in.reply_address),
                                             reply.src_word.eq(hdr_in.address >> word_shift),
                                             reply_pending.eq(1)]
                                with m.If(read_ok):
                                    m.d.sync += [reply.header.status.eq(Status.OK),
                                                 reply.n_words.eq(hdr_in.length_words)]
                                with m.Else():
                                    m.d.sync += reply.header.status.eq(Status.REMOTE_RANGE)
                            with m.Case(LinkOp.COMPLETION):
                                m.d.sync += [notify_pending.eq(1), status_code.eq(hdr_in.status)]
                            with m.Default():
                                m.d.sync += self.bad_packets.eq(self.bad_packets + 1)
            with m.State("COMMAND"):
                m.d.comb += writer.cmd.valid.eq(1)
                with m.If(writer.cmd.ready):
                    m.next = "FEED"
            with m.State("FEED"):
                m.d.comb += [writer.results.valid.eq(self.rx.valid),
                             self.rx.ready.eq(writer.results.ready)]
                with m.If(self.rx.valid & self.rx.ready):
                    m.d.sync += fed.eq(fed + 1)
                    with m.If(self.rx.payload.last):
                        m.next = "WRITTEN"
            with m.State("WRITTEN"):
                m.d.comb += writer.status.ready.eq(1)
                with m.If(writer.status.valid):
                    with m.If(hdr.op == LinkOp.READ_RESPONSE):
                        m.d.sync += [notify_pending.eq(1), status_code.eq(writer.status.payload.code)]
                    with m.Else():
                        completion(m, hdr, writer.status.payload.code)
                    m.next = "IDLE"
            with m.State("DRAM_FEED"):
                # Payload words in pairs: the first waits in `low`, the second completes a burst.
                m.d.comb += self.rx.ready.eq(~have_low | lane_free)
                with m.If(self.rx.valid & self.rx.ready):
                    m.d.sync += have_low.eq(~have_low)
                    with m.If(~have_low):
                        m.d.sync += low.eq(beat.data)
                    with m.Else():
                        m.d.comb += load.eq(1)
                    with m.If(beat.last):
                        m.next = "DRAM_ACKS"
            with m.State("DRAM_ACKS"):
                with m.If(~req.valid & (dram_in_flight == 0)):
                    completion(m, hdr, Status.OK)
                    m.next = "IDLE"
            with m.State("DRAIN"):
                m.d.comb += self.rx.ready.eq(1)
                with m.If(self.rx.valid & self.rx.payload.last):
                    m.next = "IDLE"
        return m
