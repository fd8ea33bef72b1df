"""DIMM-Link link layer: frames, sequence numbers, CRC-32C, ACK/NAK, go-back-N replay and credits.

One ``LinkLayer`` is one end of a link (``docs/dimm_link.md``, section "Link
layer"; bit formats in :mod:`.formats`). It sits between the transaction
layer (``tx_packet`` / ``rx_packet``, beats of :func:`packet_beat_layout`) and
the PHY (``phy_tx`` / ``phy_rx``, beats of :func:`phy_flit_layout`). It is two
independent halves that only exchange a few registers:

Transmitter (:class:`LinkTransmitter`)
--------------------------------------
* **Ingest.** A packet (header beat, then ``payload_words`` beats; ``last`` is
  not looked at, ``payload_words`` of the header beat rules) is written into
  the *replay buffer* (a ``Memory`` of ``replay_flits`` flits, 1 write + 1
  read port) as the frame it will be: word 0 = frame header (``frame_type``
  DATA, ``seq``, ``payload_words``, transaction header; the link fields are
  filled in at transmit time), then the payload words, two per flit, then zero
  padding and room for the CRC (an extra all-zero flit when the last word
  fills a flit). The header beat is taken only when the whole frame fits in
  the free part of the buffer (``ready`` depends on its ``payload_words``); the
  payload beats are then taken one per cycle. A packet with ``payload_words *
  32 > max_payload`` is taken and thrown away (``oversize_packets``). A frame
  is *committed* (may be sent) in the cycle its last flit is written, i.e. in
  the cycle of its last beat, or one cycle later when the zero CRC flit is
  needed (odd ``payload_words``). Store-and-forward keeps one invariant simple:
  the sender only starts frames it can finish.
* **Send.** A send pointer walks the buffer. At a frame boundary, in priority
  order: a pending replay sends RESYNC and moves the pointer back to the
  oldest unacknowledged frame; a committed frame is started if it is a replay
  (sequence number already sent once) or if it fits the partner's credits
  (``credit_limit - credits_used >= frame flits``, modulo 2**16; only first
  transmissions consume credits); otherwise a LINK_CTRL frame is sent when the
  receiver half asks for one (ack, credit or NAK to report, or a duplicate to
  re-acknowledge) and no frame header is already waiting in the pipeline (so
  at most one is pending and headers of data frames piggyback first).
  Pipeline: issue (memory read) -> ``s1`` (read data) -> ``out`` register =
  ``phy_tx``. Going from ``s1`` to ``out``, a frame's first flit gets the
  *current* ``ack_seq``, ``nak`` and ``credit_limit`` of the receiver half,
  the running CRC-32C is advanced by one flit (a 32 x 544 XOR matrix) and the
  last flit gets the final CRC in its last 4 bytes. One flit per cycle when
  the PHY takes one per cycle.
* **Ack / replay.** A good frame from the partner carries its cumulative
  ``ack_seq``; the acknowledged frames' flits are freed at once (a small
  table keeps each frame's end position). A NAK, or ``replay_timeout`` cycles
  without acknowledgement progress while frames are outstanding (counted only
  while ``link_up``), or ``link_up`` rising again after having been up, sets
  *replay pending*: RESYNC then every unacknowledged frame again (go-back-N).
  ``replay_timeout`` must exceed the ack round trip plus the time to send a
  full replay buffer, or replays repeat needlessly (still correct). An ack
  that covers the frame being replayed frees its flits at once: a new packet
  may overwrite the rest of that frame while it goes out; the CRC covers what
  was sent and the header (sent first) has the old ``seq``, so the receiver
  drops it as a duplicate. At a frame boundary the sender skips acknowledged
  frames. While
  ``link_up`` is low nothing is sent, ``phy_tx.valid`` is low and the
  ``s1``/``out`` stages are flushed (the PHY takes nothing then; the one
  exception to "valid stays up until taken"); a frame cut off that way is
  replayed after the RESYNC.

Receiver (:class:`LinkReceiver`)
--------------------------------
* DATA flits are parsed into frames (length from the header's
  ``payload_words``) and the CRC-32C is checked on the last flit. A frame
  whose ``seq`` is the expected one is written into the *receive buffer* (a
  ``Memory`` of ``rx_buffer_flits`` flits) as it arrives, whole flits
  including header and CRC flit (so it costs exactly its frame flits of
  credit), and committed when its CRC checks; otherwise the write pointer
  rolls back to the last commit. A good duplicate (``seq`` behind) is dropped
  and re-acknowledged (``duplicates``), a good LINK_CTRL frame only updates
  ack/credit/NAK state.
* Error episode: a bad CRC, an ERROR beat, a sequence gap (good frame,
  ``seq`` ahead), a bad ``frame_type`` or ``payload_words * 32 > max_payload``
  (``malformed_frames``, detected on the header flit), or an expected frame
  that does not fit the free buffer (``overflows``: the partner broke the
  credit rule or the length was corrupted) -> the partial frame is dropped, a
  NAK is requested (it goes out in a LINK_CTRL frame of its own, ahead of data
  frames at the next frame boundary - data frame headers never carry a NAK,
  because a partner in an error episode of its own reads only one-flit
  LINK_CTRL frames - then is cleared: once per episode) and every flit is
  discarded until a RESYNC flit.
  While discarding, a DATA flit that is on its own a good one-flit LINK_CTRL
  frame (frame type and CRC-32C check as a frame's first and last flit) still
  delivers its ack, NAK and credit fields: otherwise two ends that both drop
  frames (bit errors both ways) ignore each other's NAKs and recover only by
  replay timeouts (measured: goodput at BER 1e-4 collapsed to a few percent).
  A middle flit of a data frame passes for one with probability ~2**-32.
  If the episode is still on ``replay_timeout`` cycles after the NAK went out
  (NAK or RESYNC lost while the partner had nothing outstanding to time out
  on), the NAK is sent again (and so on every ``replay_timeout`` cycles): an
  addition to "once per episode" without which such an episode never ends.
  A RESYNC outside an episode just drops a partial frame.
* Delivery: committed frames are read from the receive buffer one flit at a
  time (read port, then the flit's two words go out as beats): header beat
  (transaction header in ``data[0:128]``, ``payload_words``, ``first``) and
  payload beats (``payload_words`` 0), ``last`` on the final one, one beat per
  cycle while ``rx_packet.ready``; a CRC-only flit takes one cycle with no
  beat. Each flit consumed returns one credit: ``credit_limit`` starts at
  ``rx_buffer_flits`` and counts up modulo 2**16.

Cycle behaviour (tests/hw/link/test_layer.py measures these)
---------------------------------------------------------
* ``tx_packet`` last beat taken in cycle t -> the frame's first flit is valid
  on ``phy_tx`` in cycle t + 3 (t + 4 with the extra CRC flit), if the
  transmitter was idle and credits allow. Store-and-forward: a 1 KiB packet's
  first flit leaves 3-4 cycles after its 33rd beat.
* Last flit of a frame on ``phy_rx`` in cycle t -> header beat valid on
  ``rx_packet`` in cycle t + 2.
* Ack round trip: frame accepted in cycle t -> the receiver's ``ack_seq``
  changes in t + 1 -> an idle transmitter has the LINK_CTRL flit valid on
  ``phy_tx`` in t + 3 -> the partner frees the acknowledged flits of its replay
  buffer 2 cycles after that flit arrived (``replay_level`` drops in the cycle
  after next). With a 12-cycle wire each way, a 2-flit frame's buffer space
  is free 30 cycles after its last flit left.
* Goodput back to back (no errors, enough credits): a flit in every PHY slot,
  i.e. 64 B payloads = 2 flits (32 B per flit slot, 12.1 GB/s at 25 GB/s raw),
  1 KiB = 17 flits (60.2 B per slot, 22.8 GB/s); the default 64-flit buffers
  cover the credit and ack round trips at a 12-cycle wire.
* At most ``min(replay_flits rounded up to a power of two, 2**(seq_bits-1) - 1)``
  frames are unacknowledged at a time (64 at the defaults, 7 at ``seq_bits=4``).

``reset`` returns everything (pointers, sequence numbers, credits, counters)
to the power-up state in the next cycle; memory contents are not cleared (not
needed: only committed flits are ever read).
"""

import enum
import functools

from amaranth.hdl import Cat, Const, Module, Mux, ResetInserter, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.link.formats import (
    CRC_BYTES,
    WORD_BYTES,
    FlitKind,
    FrameType,
    LinkConfig,
    frame_header_layout,
    packet_beat_layout,
    phy_flit_layout,
    transaction_header_layout,
)

__all__ = ["LinkLayer", "LinkTransmitter", "LinkReceiver", "Crc32cStep", "CRC32C_POLY_REFLECTED",
           "crc32c_matrix", "crc32c_next", "COUNTER_BITS", "CREDIT_BITS", "TX_COUNTERS",
           "RX_COUNTERS"]

#: CRC-32C (Castagnoli) polynomial, bit-reversed (the LSB-first form).
CRC32C_POLY_REFLECTED = 0x82F63B78
#: Width of ``credit_limit`` (cumulative flits, modulo 2**16).
CREDIT_BITS = 16
#: Width of the event counters (wrapping).
COUNTER_BITS = 32

#: Counters of the transmitter half: DATA frames sent (first transmissions and
#: replays), LINK_CTRL frames sent, replays (RESYNC flits sent), NAKs received,
#: replay timeouts, packets dropped for ``payload_words * 32 > max_payload``.
TX_COUNTERS = ("frames_sent", "ctrl_frames_sent", "replays", "naks_received", "timeouts",
               "oversize_packets")
#: Counters of the receiver half: DATA frames accepted, LINK_CTRL frames accepted,
#: NAKs sent, CRC errors, duplicates dropped, ERROR beats, malformed headers,
#: sequence gaps, expected frames that did not fit the receive buffer.
RX_COUNTERS = ("frames_received", "ctrl_frames_received", "naks_sent", "crc_errors",
               "duplicates", "error_beats", "malformed_frames", "seq_errors", "overflows")

_WORD_BITS = WORD_BYTES * 8
_CRC_BITS = CRC_BYTES * 8
_CRC_INIT = 0xFFFFFFFF


@functools.cache
def crc32c_matrix(data_bits: int) -> tuple:
    """XOR masks of one CRC-32C step over ``data_bits`` (LSB first).

    Bit ``i`` of the next state is the parity of ``mask[i] & (state | data << 32)``
    (no init / final XOR: the caller applies them). Built by running the
    bit-serial LSB-first CRC on each basis vector, as the update is linear.
    """
    def run(state, word):
        for k in range(data_bits):
            if (state ^ (word >> k)) & 1:
                state = (state >> 1) ^ CRC32C_POLY_REFLECTED
            else:
                state >>= 1
        return state

    columns = [run(1 << j, 0) for j in range(32)] + [run(0, 1 << k) for k in range(data_bits)]
    return tuple(sum(((col >> i) & 1) << j for j, col in enumerate(columns)) for i in range(32))


def crc32c_next(state, word):
    """Amaranth value: CRC-32C register after ``word`` (bit 0 first) from register ``state``."""
    vec = Cat(state, word)
    return Cat(*[(vec & Const(mask, len(vec))).xor() for mask in crc32c_matrix(len(word))])


class Crc32cStep(wiring.Component):
    """Combinational CRC-32C update by one ``data_bits`` word: ``next = f(state, data)``.

    A component of its own so that a simulator re-evaluates the 32 XOR trees
    only when their inputs change (it costs nothing in synthesis).
    """

    def __init__(self, data_bits: int):
        self.data_bits = data_bits
        super().__init__({"state": In(_CRC_BITS), "data": In(data_bits), "next": Out(_CRC_BITS)})

    def elaborate(self, platform):
        m = Module()
        m.d.comb += self.next.eq(crc32c_next(self.state, self.data))
        return m


def _frame_flits(payload_words):
    """Flits of a DATA frame with this many payload words (64-byte flits): (n + 1) // 2 + 1."""
    return ((payload_words + 1) >> 1) + 1


def _inc(ptr, depth):
    """``ptr + 1`` modulo ``depth``, as wide as ``ptr`` (it is concatenated into table entries)."""
    return Mux(ptr == depth - 1, 0, ptr + 1)[:len(ptr)]


def _pow2_at_least(n):
    return 1 << max(n - 1, 0).bit_length()


class _Item(enum.IntEnum):
    """What the transmitter's ``s1`` stage holds."""
    DATA = 0      # a flit read from the replay buffer
    RESYNC = 1
    CTRL = 2      # a LINK_CTRL frame (built in the out stage)


def _between_halves(c: LinkConfig) -> dict:
    """The signals between the two halves, as the transmitter sees them (the receiver has
    them flipped)."""
    sb = c.seq_bits
    return {
        # from the receiver half: what to put into outgoing headers
        "ack_seq": In(sb),
        "credit_limit": In(CREDIT_BITS, init=c.rx_buffer_flits % (1 << CREDIT_BITS)),
        "nak_request": In(1),
        "ctrl_request": In(1),
        "header_sent": Out(1),   # a header with the above values went out this cycle
        "ctrl_sent": Out(1),     # ... and it was a LINK_CTRL frame's (the only ones with a NAK)
        # from the receiver half: the partner's fields of a good frame (one-cycle pulse)
        "remote_valid": In(1),
        "remote_ack_seq": In(sb),
        "remote_nak": In(1),
        "remote_credit_limit": In(CREDIT_BITS),
    }


class LinkTransmitter(wiring.Component):
    """Transmit half of :class:`LinkLayer` (see module docstring)."""

    def __init__(self, config: LinkConfig):
        _check_config(config)
        self.config = config
        c = config
        members = {
            "tx_packet": In(stream.Signature(packet_beat_layout())),
            "phy_tx": Out(stream.Signature(phy_flit_layout(c.lanes))),
            "link_up": In(1),
            **_between_halves(c),
            "replay_level": Out(range(c.replay_flits + 1)),
        }
        members.update({name: Out(COUNTER_BITS) for name in TX_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        c = self.config
        N = c.replay_flits
        sb = c.seq_bits
        S = 1 << sb
        D = min(_pow2_at_least(N), S // 2)          # frame-end table entries
        # most frames held (sent or not) unacknowledged: below half the sequence space, so
        # "behind"/"ahead" comparisons here and duplicate/gap at the receiver are unambiguous
        max_frames = min(D, S // 2 - 1)
        d_bits = D.bit_length() - 1
        fb = c.flit_bits
        cum_bits = N.bit_length()                    # cumulative flit counts: differences up to N
        max_words = c.max_payload // WORD_BYTES
        ptr_bits = max(N - 1, 1).bit_length()

        buf = m.submodules.replay_buffer = Memory(shape=fb, depth=N, init=[])
        buf_w = buf.write_port()
        buf_r = buf.read_port(transparent_for=())   # only committed flits are read
        ends = m.submodules.frame_ends = Memory(shape=ptr_bits + cum_bits, depth=D, init=[])
        ends_w = ends.write_port()
        ends_send = ends.read_port(domain="comb")
        ends_ack = ends.read_port(domain="comb")

        def seq_index(seq):
            return seq[:d_bits] if d_bits else Const(0, 1)

        # ---- shared state ----
        wr_ptr = Signal(range(N))
        wr_cum = Signal(cum_bits)
        ack_ptr = Signal(range(N))
        ack_cum = Signal(cum_bits)
        commit_seq = Signal(sb)      # frame being ingested = frames committed so far
        acked_seq = Signal(sb)       # oldest unacknowledged frame
        sent_hi = Signal(sb)         # first frame never sent
        remote_limit = Signal(CREDIT_BITS, init=c.rx_buffer_flits % (1 << CREDIT_BITS))
        credits_used = Signal(CREDIT_BITS)
        replay_pending = Signal()
        was_up = Signal()
        timer = Signal(range(c.replay_timeout))
        counters = {name: getattr(self, name) for name in TX_COUNTERS}

        used = Signal(cum_bits)
        m.d.comb += [used.eq(wr_cum - ack_cum), self.replay_level.eq(used)]

        def count(name):
            m.d.sync += counters[name].eq(counters[name] + 1)

        # ---- ingest: tx_packet -> replay buffer ----
        pkt = self.tx_packet.payload
        ing_busy = Signal()
        ing_drop = Signal()
        ing_left = Signal(8)
        ing_lo = Signal(_WORD_BITS)
        ing_half = Signal()
        ing_pad = Signal()

        n_words = pkt.payload_words
        ing_flits = Signal(8)
        m.d.comb += ing_flits.eq(_frame_flits(n_words))
        oversize = n_words > max_words
        frames_held = Signal(sb)
        m.d.comb += frames_held.eq(commit_seq - acked_seq)
        fits = (ing_flits <= N - used) & (frames_held < max_frames)

        header = Signal(frame_header_layout)
        m.d.comb += [
            header.frame_type.eq(FrameType.DATA),
            header.seq.eq(commit_seq),
            header.payload_words.eq(n_words),
            header.transaction.eq(pkt.data[:transaction_header_layout.size]),
        ]

        word = Signal(_WORD_BITS)      # the word this beat contributes
        take_word = Signal()
        word_last = Signal()
        commit = Signal()

        with m.If(ing_pad):
            m.d.comb += [buf_w.en.eq(1), buf_w.data.eq(0), commit.eq(1)]
            m.d.sync += ing_pad.eq(0)
        with m.Elif(ing_busy | ing_drop):
            m.d.comb += self.tx_packet.ready.eq(1)
            with m.If(self.tx_packet.valid):
                m.d.sync += ing_left.eq(ing_left - 1)
                with m.If(ing_left == 1):
                    m.d.sync += [ing_busy.eq(0), ing_drop.eq(0)]
                with m.If(ing_busy):
                    m.d.comb += [take_word.eq(1), word.eq(pkt.data), word_last.eq(ing_left == 1)]
        with m.Else():
            with m.If(self.tx_packet.valid & ~pkt.first):
                m.d.comb += self.tx_packet.ready.eq(1)        # stray beat outside a packet: dropped
            with m.Elif(self.tx_packet.valid & oversize):
                m.d.comb += self.tx_packet.ready.eq(1)
                count("oversize_packets")
                m.d.sync += [ing_drop.eq(n_words != 0), ing_left.eq(n_words)]
            with m.Elif(self.tx_packet.valid & fits):
                m.d.comb += [self.tx_packet.ready.eq(1), take_word.eq(1),
                             word.eq(header.as_value()), word_last.eq(n_words == 0)]
                m.d.sync += [ing_busy.eq(n_words != 0), ing_left.eq(n_words)]

        with m.If(take_word):
            with m.If(~ing_half):
                with m.If(word_last):         # last word in the low half: pad + CRC fit here
                    m.d.comb += [buf_w.en.eq(1), buf_w.data.eq(word), commit.eq(1)]
                with m.Else():
                    m.d.sync += [ing_lo.eq(word), ing_half.eq(1)]
            with m.Else():
                m.d.comb += [buf_w.en.eq(1), buf_w.data.eq(Cat(ing_lo, word))]
                m.d.sync += ing_half.eq(0)
                with m.If(word_last):
                    m.d.sync += ing_pad.eq(1)  # the CRC needs one more (zero) flit

        m.d.comb += buf_w.addr.eq(wr_ptr)
        next_wr_ptr = _inc(wr_ptr, N)
        with m.If(buf_w.en):
            m.d.sync += [wr_ptr.eq(next_wr_ptr), wr_cum.eq(wr_cum + 1)]
        m.d.comb += [ends_w.addr.eq(seq_index(commit_seq)),
                     ends_w.data.eq(Cat(next_wr_ptr, (wr_cum + 1)[:cum_bits])),
                     ends_w.en.eq(commit)]
        with m.If(commit):
            m.d.sync += commit_seq.eq(commit_seq + 1)

        # ---- acknowledgements and credits from the partner ----
        ack_step = Signal(sb)
        outstanding_n = Signal(sb)
        m.d.comb += [ack_step.eq(self.remote_ack_seq - acked_seq),
                     outstanding_n.eq(sent_hi - acked_seq),
                     ends_ack.addr.eq(seq_index((self.remote_ack_seq - 1)[:sb]))]
        ack_progress = self.remote_valid & (ack_step != 0) & (ack_step <= outstanding_n)
        with m.If(ack_progress):
            m.d.sync += [acked_seq.eq(self.remote_ack_seq),
                         ack_ptr.eq(ends_ack.data[:ptr_bits]),
                         ack_cum.eq(ends_ack.data[ptr_bits:])]
        with m.If(self.remote_valid):
            m.d.sync += remote_limit.eq(self.remote_credit_limit)
            with m.If(self.remote_nak):
                m.d.sync += replay_pending.eq(1)
                count("naks_received")

        # ---- send machine ----
        send_ptr = Signal(range(N))
        send_cum = Signal(cum_bits)
        send_seq = Signal(sb)
        send_end = Signal(range(N))
        mid_frame = Signal()

        s1_valid = Signal()
        s1_kind = Signal(_Item)
        s1_first = Signal()
        s1_last = Signal()
        out_valid = Signal()
        out_kind = Signal(2)
        out_data = Signal(fb)
        crc_reg = Signal(_CRC_BITS)

        out_free = self.link_up & (~out_valid | self.phy_tx.ready)   # the PHY takes nothing while down
        s1_adv = s1_valid & out_free
        can_issue = self.link_up & (~s1_valid | out_free)

        m.d.comb += ends_send.addr.eq(seq_index(send_seq))
        send_end_ptr = ends_send.data[:ptr_bits]
        send_flits = Signal(cum_bits)
        m.d.comb += send_flits.eq(ends_send.data[ptr_bits:] - send_cum)
        frame_avail = send_seq != commit_seq
        is_new = send_seq == sent_hi
        credit_room = Signal(CREDIT_BITS)
        m.d.comb += credit_room.eq(remote_limit - credits_used)
        behind_n = Signal(sb)
        m.d.comb += behind_n.eq(acked_seq - send_seq)
        behind = (behind_n != 0) & (behind_n < S // 2)

        issue = Signal()
        issue_kind = Signal(_Item)
        issue_first = Signal()
        issue_last = Signal()
        resync_issue = Signal()
        m.d.comb += buf_r.addr.eq(send_ptr)

        with m.If(mid_frame):
            with m.If(can_issue):
                m.d.comb += [issue.eq(1), issue_kind.eq(_Item.DATA),
                             issue_last.eq(_inc(send_ptr, N) == send_end)]
                with m.If(issue_last):
                    m.d.sync += mid_frame.eq(0)
        with m.Elif(behind):                 # acknowledged while we were not looking: skip it
            m.d.sync += [send_seq.eq(acked_seq), send_ptr.eq(ack_ptr), send_cum.eq(ack_cum)]
        with m.Elif(can_issue):
            with m.If(replay_pending):
                m.d.comb += [issue.eq(1), issue_kind.eq(_Item.RESYNC), resync_issue.eq(1)]
                m.d.sync += [replay_pending.eq(0),
                             send_seq.eq(acked_seq), send_ptr.eq(ack_ptr), send_cum.eq(ack_cum)]
                count("replays")
            with m.Elif(self.nak_request & ~(s1_valid & s1_first & (s1_kind == _Item.CTRL))):
                # A NAK goes first, in its own one-flit LINK_CTRL frame: a partner in an error
                # episode of its own reads only those (data frame headers never carry NAKs).
                m.d.comb += [issue.eq(1), issue_kind.eq(_Item.CTRL), issue_first.eq(1),
                             issue_last.eq(1)]
                count("ctrl_frames_sent")
            with m.Elif(frame_avail & (~is_new | (credit_room >= send_flits))):
                m.d.comb += [issue.eq(1), issue_kind.eq(_Item.DATA), issue_first.eq(1),
                             issue_last.eq(send_flits == 1)]
                m.d.sync += [send_end.eq(send_end_ptr), mid_frame.eq(send_flits != 1),
                             send_seq.eq(send_seq + 1)]
                count("frames_sent")
                with m.If(is_new):
                    m.d.sync += [sent_hi.eq(sent_hi + 1), credits_used.eq(credits_used + send_flits)]
            with m.Elif(self.ctrl_request & ~(s1_valid & s1_first)):
                m.d.comb += [issue.eq(1), issue_kind.eq(_Item.CTRL), issue_first.eq(1),
                             issue_last.eq(1)]
                count("ctrl_frames_sent")

        with m.If(issue & (issue_kind == _Item.DATA)):
            m.d.comb += buf_r.en.eq(1)
            m.d.sync += [send_ptr.eq(_inc(send_ptr, N)), send_cum.eq(send_cum + 1)]
        with m.Else():
            m.d.comb += buf_r.en.eq(0)      # hold s1's data while it waits

        with m.If(issue):
            m.d.sync += [s1_valid.eq(1), s1_kind.eq(issue_kind), s1_first.eq(issue_first),
                         s1_last.eq(issue_last)]
        with m.Elif(s1_adv):
            m.d.sync += s1_valid.eq(0)

        # s1 -> out: fill in link fields, advance the CRC, insert it on the last flit
        patched = Signal(fb)
        ph = data.View(frame_header_layout, patched[:frame_header_layout.size])
        m.d.comb += patched.eq(Mux(s1_kind == _Item.DATA, buf_r.data, 0))
        has_header = s1_first & (s1_kind != _Item.RESYNC)
        with m.If(has_header):
            m.d.comb += [ph.ack_seq.eq(self.ack_seq), ph.credit_limit.eq(self.credit_limit)]
            with m.If(s1_kind == _Item.CTRL):
                m.d.comb += [ph.frame_type.eq(FrameType.LINK_CTRL), ph.nak.eq(self.nak_request)]
        crc = m.submodules.crc = Crc32cStep(fb)
        crc_next = crc.next
        m.d.comb += [crc.state.eq(Mux(s1_first, _CRC_INIT, crc_reg)), crc.data.eq(patched)]
        final = Signal(fb)
        m.d.comb += final.eq(patched)
        with m.If(s1_last):
            m.d.comb += final[fb - _CRC_BITS:].eq(~crc_next)
        m.d.comb += [self.header_sent.eq(s1_adv & has_header),
                     self.ctrl_sent.eq(s1_adv & has_header & (s1_kind == _Item.CTRL))]

        with m.If(s1_adv):
            m.d.sync += [out_valid.eq(1), out_data.eq(final), crc_reg.eq(crc_next),
                         out_kind.eq(Mux(s1_kind == _Item.RESYNC, FlitKind.RESYNC, FlitKind.DATA))]
        with m.Elif(self.phy_tx.ready):
            m.d.sync += out_valid.eq(0)

        m.d.comb += [self.phy_tx.valid.eq(out_valid & self.link_up),
                     self.phy_tx.payload.kind.eq(out_kind),
                     self.phy_tx.payload.data.eq(out_data)]

        # ---- link state, timeout ----
        with m.If(self.link_up):
            m.d.sync += was_up.eq(1)
        with m.Else():
            m.d.sync += [s1_valid.eq(0), out_valid.eq(0), mid_frame.eq(0)]   # flush
            with m.If(was_up):
                m.d.sync += replay_pending.eq(1)

        outstanding = sent_hi != acked_seq
        with m.If(ack_progress | resync_issue | ~outstanding):
            m.d.sync += timer.eq(0)
        with m.Elif(self.link_up & ~replay_pending):
            with m.If(timer == c.replay_timeout - 1):
                m.d.sync += [timer.eq(0), replay_pending.eq(1)]
                count("timeouts")
            with m.Else():
                m.d.sync += timer.eq(timer + 1)
        return m


class LinkReceiver(wiring.Component):
    """Receive half of :class:`LinkLayer` (see module docstring)."""

    def __init__(self, config: LinkConfig):
        _check_config(config)
        self.config = config
        c = config
        members = {
            "phy_rx": In(stream.Signature(phy_flit_layout(c.lanes), always_ready=True)),
            "rx_packet": Out(stream.Signature(packet_beat_layout())),
            **{name: member.flip() for name, member in _between_halves(c).items()},
            "rx_buffer_level": Out(range(c.rx_buffer_flits + 1)),
            "rx_discarding": Out(1),
        }
        members.update({name: Out(COUNTER_BITS) for name in RX_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        c = self.config
        RB = c.rx_buffer_flits
        sb = c.seq_bits
        S = 1 << sb
        fb = c.flit_bits
        F = c.max_frame_flits
        max_words = c.max_payload // WORD_BYTES
        cum_bits = RB.bit_length()
        counters = {name: getattr(self, name) for name in RX_COUNTERS}

        def count(name):
            m.d.sync += counters[name].eq(counters[name] + 1)

        buf = m.submodules.rx_buffer = Memory(shape=fb, depth=RB, init=[])
        buf_w = buf.write_port()
        buf_r = buf.read_port(transparent_for=())   # only committed flits are read

        # ---- pointers ----
        wr_ptr = Signal(range(RB))       # next flit written (tentative, current frame)
        wr_cum = Signal(cum_bits)
        commit_ptr = Signal(range(RB))   # end of the last good frame
        commit_cum = Signal(cum_bits)
        rd_ptr = Signal(range(RB))       # next flit read for delivery
        rd_cum = Signal(cum_bits)
        free_cum = Signal(cum_bits)      # flits consumed (credits returned)
        level = Signal(cum_bits)
        m.d.comb += [level.eq(wr_cum - free_cum), self.rx_buffer_level.eq(level)]

        # ---- frame parser ----
        beat = self.phy_rx.payload
        din = beat.data
        hin = data.View(frame_header_layout, din[:frame_header_layout.size])
        discard = Signal()
        m.d.comb += self.rx_discarding.eq(discard)
        in_frame = Signal()
        flits_left = Signal(range(F + 1))
        f_store = Signal()
        f_ctrl = Signal()
        f_class = Signal(2)              # 0 expected, 1 duplicate, 2 ahead (gap)
        f_ack = Signal(sb)
        f_nak = Signal()
        f_credit = Signal(CREDIT_BITS)
        crc_reg = Signal(_CRC_BITS)
        expected = Signal(sb)
        nak_pending = Signal()
        nak_timer = Signal(range(c.replay_timeout))
        reack_pending = Signal()
        adv_ack = Signal(sb)
        adv_credit = Signal(CREDIT_BITS, init=c.rx_buffer_flits % (1 << CREDIT_BITS))

        n_in = hin.payload_words
        is_data = hin.frame_type == FrameType.DATA
        is_ctrl = hin.frame_type == FrameType.LINK_CTRL
        hdr_flits = Signal(range(F + 2))
        m.d.comb += hdr_flits.eq(Mux(is_data, _frame_flits(n_in), 1))
        malformed = ~(is_data | is_ctrl) | (is_data & (n_in > max_words))
        dseq = Signal(sb)
        m.d.comb += dseq.eq(hin.seq[:sb] - expected)
        hdr_class = Mux(dseq == 0, 0, Mux(dseq < S // 2, 2, 1))
        hdr_store = is_data & (dseq == 0)
        overflow = hdr_store & (hdr_flits > RB - level)

        first = ~in_frame
        is_last = Mux(first, hdr_flits == 1, flits_left == 1)
        store = Mux(first, hdr_store, f_store)
        fr_ctrl = Mux(first, is_ctrl, f_ctrl)
        fr_class = Mux(first, hdr_class, f_class)
        crc_data = Signal(fb)
        m.d.comb += crc_data.eq(din)
        with m.If(is_last):
            m.d.comb += crc_data[fb - _CRC_BITS:].eq(0)
        crc = m.submodules.crc = Crc32cStep(fb)
        crc_calc = crc.next
        m.d.comb += [crc.state.eq(Mux(first, _CRC_INIT, crc_reg)), crc.data.eq(crc_data)]
        crc_ok = (~crc_calc)[:_CRC_BITS] == din[fb - _CRC_BITS:]

        episode = Signal()     # start an error episode this cycle
        data_in = self.phy_rx.valid & (beat.kind == FlitKind.DATA) & ~discard
        m.d.comb += [buf_w.addr.eq(wr_ptr), buf_w.data.eq(din)]
        m.d.sync += self.remote_valid.eq(0)
        next_wr_ptr = _inc(wr_ptr, RB)

        with m.If(data_in):
            with m.If(first & malformed):
                m.d.comb += episode.eq(1)
                count("malformed_frames")
            with m.Elif(first & overflow):
                m.d.comb += episode.eq(1)
                count("overflows")
            with m.Else():
                with m.If(store):
                    m.d.comb += buf_w.en.eq(1)
                    m.d.sync += [wr_ptr.eq(next_wr_ptr), wr_cum.eq(wr_cum + 1)]
                with m.If(first):
                    m.d.sync += [f_store.eq(hdr_store), f_ctrl.eq(is_ctrl), f_class.eq(hdr_class),
                                 f_ack.eq(hin.ack_seq[:sb]), f_nak.eq(hin.nak),
                                 f_credit.eq(hin.credit_limit), flits_left.eq(hdr_flits - 1)]
                with m.Else():
                    m.d.sync += flits_left.eq(flits_left - 1)
                m.d.sync += crc_reg.eq(crc_calc)
                with m.If(~is_last):
                    m.d.sync += in_frame.eq(1)
                with m.Elif(crc_ok):
                    m.d.sync += [in_frame.eq(0), self.remote_valid.eq(1),
                                 self.remote_ack_seq.eq(Mux(first, hin.ack_seq[:sb], f_ack)),
                                 self.remote_nak.eq(Mux(first, hin.nak, f_nak)),
                                 self.remote_credit_limit.eq(Mux(first, hin.credit_limit, f_credit))]
                    with m.If(fr_ctrl):
                        count("ctrl_frames_received")
                    with m.Elif(fr_class == 0):
                        m.d.sync += [commit_ptr.eq(next_wr_ptr), commit_cum.eq(wr_cum + 1),
                                     expected.eq(expected + 1)]
                        count("frames_received")
                    with m.Elif(fr_class == 1):
                        m.d.sync += reack_pending.eq(1)
                        count("duplicates")
                    with m.Else():
                        m.d.comb += episode.eq(1)
                        count("seq_errors")
                with m.Else():
                    m.d.comb += episode.eq(1)
                    count("crc_errors")

        # During an error episode frame boundaries are unknown, but a one-flit LINK_CTRL frame
        # checks on its own: take its ack/NAK/credit, or both ends of a link that drop frames
        # in both directions wait for each other's RESYNC until a replay timeout.
        with m.If(self.phy_rx.valid & (beat.kind == FlitKind.DATA) & discard & is_ctrl & crc_ok):
            m.d.sync += [self.remote_valid.eq(1), self.remote_ack_seq.eq(hin.ack_seq[:sb]),
                         self.remote_nak.eq(hin.nak), self.remote_credit_limit.eq(hin.credit_limit)]
            count("ctrl_frames_received")

        # ---- NAK / ack / credit reporting to our transmitter ----
        m.d.comb += [self.ack_seq.eq(expected), self.nak_request.eq(nak_pending),
                     self.ctrl_request.eq((expected != adv_ack) | (self.credit_limit != adv_credit)
                                          | nak_pending | reack_pending)]
        with m.If(self.header_sent):
            m.d.sync += [adv_ack.eq(expected), adv_credit.eq(self.credit_limit),
                         reack_pending.eq(0)]
        with m.If(self.ctrl_sent):
            m.d.sync += [nak_pending.eq(0), nak_timer.eq(0)]
            with m.If(nak_pending):
                count("naks_sent")
        with m.If(discard & ~nak_pending):
            with m.If(nak_timer == c.replay_timeout - 1):
                m.d.sync += [nak_pending.eq(1), nak_timer.eq(0)]   # NAK or RESYNC lost: again
            with m.Else():
                m.d.sync += nak_timer.eq(nak_timer + 1)

        with m.If(self.phy_rx.valid & (beat.kind == FlitKind.RESYNC)):
            m.d.sync += [discard.eq(0), in_frame.eq(0), nak_pending.eq(0), nak_timer.eq(0),
                         wr_ptr.eq(commit_ptr), wr_cum.eq(commit_cum)]
        with m.If(self.phy_rx.valid & (beat.kind == FlitKind.ERROR)):
            count("error_beats")
            with m.If(~discard):
                m.d.comb += episode.eq(1)
        with m.If(episode):
            m.d.sync += [discard.eq(1), in_frame.eq(0), nak_pending.eq(1), nak_timer.eq(0),
                         wr_ptr.eq(commit_ptr), wr_cum.eq(commit_cum)]

        # ---- delivery: receive buffer -> rx_packet ----
        r1_valid = Signal()
        r_half = Signal()
        r_first = Signal(init=1)
        r_beats = Signal(range(max_words + 2))
        r_flits = Signal(range(F + 1))
        r1_done = Signal()
        rh = data.View(frame_header_layout, buf_r.data[:frame_header_layout.size])
        eff_beats = Signal(range(max_words + 2))
        eff_flits = Signal(range(F + 2))
        m.d.comb += [eff_beats.eq(Mux(r_first, rh.payload_words + 1, r_beats)),
                     eff_flits.eq(Mux(r_first, _frame_flits(rh.payload_words), r_flits))]
        present = eff_beats != 0
        is_header = r_first & ~r_half
        pkt = self.rx_packet.payload
        m.d.comb += [
            self.rx_packet.valid.eq(r1_valid & present),
            pkt.data.eq(Mux(is_header, rh.transaction.as_value(),
                            Mux(r_half, buf_r.data[_WORD_BITS:2 * _WORD_BITS],
                                buf_r.data[:_WORD_BITS]))),
            pkt.payload_words.eq(Mux(is_header, rh.payload_words, 0)),
            pkt.first.eq(is_header),
            pkt.last.eq(eff_beats == 1),
        ]
        step = r1_valid & (~present | self.rx_packet.ready)
        new_beats = Signal.like(eff_beats)
        m.d.comb += new_beats.eq(eff_beats - present)
        flit_done = r_half | ~present | (new_beats == 0)
        with m.If(step):
            m.d.sync += [r_beats.eq(new_beats), r_first.eq(0), r_flits.eq(eff_flits)]
            with m.If(flit_done):
                m.d.comb += r1_done.eq(1)
                m.d.sync += [r_half.eq(0), r_flits.eq(eff_flits - 1)]
                with m.If(eff_flits == 1):
                    m.d.sync += r_first.eq(1)
            with m.Else():
                m.d.sync += r_half.eq(1)

        avail = commit_cum != rd_cum
        r_issue = avail & (~r1_valid | r1_done)
        m.d.comb += [buf_r.addr.eq(rd_ptr), buf_r.en.eq(r_issue)]
        with m.If(r_issue):
            m.d.sync += [rd_ptr.eq(_inc(rd_ptr, RB)), rd_cum.eq(rd_cum + 1), r1_valid.eq(1)]
        with m.Elif(r1_done):
            m.d.sync += r1_valid.eq(0)
        with m.If(r1_done):
            m.d.sync += [free_cum.eq(free_cum + 1), self.credit_limit.eq(self.credit_limit + 1)]
        return m


def _check_config(config):
    if not isinstance(config, LinkConfig):
        raise ValueError(f"config must be a LinkConfig, got {config!r}")
    if config.lanes != 8:
        raise ValueError(f"LinkLayer supports lanes=8 (64-byte flits, two 32-byte words each), "
                         f"got lanes={config.lanes!r}")
    if config.rx_buffer_flits >= 1 << CREDIT_BITS:
        raise ValueError(f"rx_buffer_flits must be below 2**{CREDIT_BITS} (credit_limit width), "
                         f"got {config.rx_buffer_flits!r}")


class LinkLayer(wiring.Component):
    """One end of a DIMM-Link link layer (see module docstring).

    Parameters
    ----------
    config : LinkConfig
        Link parameters; both ends of a link must use the same. Only ``lanes=8``
        (64-byte flits) is supported.

    Ports
    -----
    ``tx_packet`` In(stream of :func:`packet_beat_layout`) from the transaction
    layer; ``rx_packet`` Out(same) to it; ``phy_tx`` Out(stream of
    :func:`phy_flit_layout`, DATA/RESYNC) to the PHY; ``phy_rx`` In(same,
    always ready: DATA/RESYNC/ERROR) from the PHY; ``link_up`` In(1) from the
    PHY; ``reset`` In(1) (back to the power-up state); counters Out
    (:data:`TX_COUNTERS` + :data:`RX_COUNTERS`, 32-bit wrapping), and
    ``rx_discarding`` (an error episode is on: flits dropped until RESYNC);
    ``replay_level`` / ``rx_buffer_level`` (flits held in the replay / receive
    buffer).
    """

    def __init__(self, config: LinkConfig = LinkConfig()):
        _check_config(config)
        self.config = config
        c = config
        members = {
            "tx_packet": In(stream.Signature(packet_beat_layout())),
            "rx_packet": Out(stream.Signature(packet_beat_layout())),
            "phy_tx": Out(stream.Signature(phy_flit_layout(c.lanes))),
            "phy_rx": In(stream.Signature(phy_flit_layout(c.lanes), always_ready=True)),
            "link_up": In(1),
            "reset": In(1),
            "replay_level": Out(range(c.replay_flits + 1)),
            "rx_buffer_level": Out(range(c.rx_buffer_flits + 1)),
            "rx_discarding": Out(1),
        }
        members.update({name: Out(COUNTER_BITS) for name in TX_COUNTERS + RX_COUNTERS})
        super().__init__(members)

    def elaborate(self, platform):
        m = Module()
        tx = m.submodules.tx = LinkTransmitter(self.config)
        rx = m.submodules.rx = LinkReceiver(self.config)
        wiring.connect(m, wiring.flipped(self.tx_packet), tx.tx_packet)
        wiring.connect(m, tx.phy_tx, wiring.flipped(self.phy_tx))
        wiring.connect(m, wiring.flipped(self.phy_rx), rx.phy_rx)
        wiring.connect(m, rx.rx_packet, wiring.flipped(self.rx_packet))
        m.d.comb += [
            tx.link_up.eq(self.link_up),
            *[getattr(tx, n).eq(getattr(rx, n)) if member.flow == In else
              getattr(rx, n).eq(getattr(tx, n)) for n, member in _between_halves(self.config).items()],
            self.replay_level.eq(tx.replay_level),
            self.rx_buffer_level.eq(rx.rx_buffer_level),
            self.rx_discarding.eq(rx.rx_discarding),
        ]
        m.d.comb += [getattr(self, n).eq(getattr(tx, n)) for n in TX_COUNTERS]
        m.d.comb += [getattr(self, n).eq(getattr(rx, n)) for n in RX_COUNTERS]
        return ResetInserter(self.reset)(m)
