"""Activation feeder: reads a GEMV's activations from the on-chip SRAM and sends the engine's ``acts`` stream.

What it does
------------
It takes one command (``cmd``, :func:`feeder_command_layout`), reads the
activations (and, for a column gather, the index list) through its SRAM port
(``sram``, :func:`~ndpdimm.hw.memory.sram.sram_port_signature`, reads only) and sends
exactly the GEMV engine's activation stream (``acts``, one 128-bit word per
beat; ``cosim.gemv.job.GemvJob.act_words`` is the reference): for each group
``g < n_groups``, for each step ``s < n_steps``, for each batch element ``b``
one word (the same words repeat for every group). Then one ``status`` beat.

SRAM data layouts
-----------------
``e`` = bytes per element (2 FP16/BF16, 1 INT8), ``lanes = 16 / e`` elements
per 128-bit activation word. All addresses are SRAM byte addresses.

* DOT (dense GEMV, row gather), ``X`` [B, K = n_cols]: element (b, k) at
  ``x_addr + b*x_pitch + k*e``. ``x_addr`` and ``x_pitch`` are multiples of 16
  (one activation word); the pitch may be larger than a row. Word ``s`` of row
  ``b`` is the 16 bytes at ``x_addr + b*x_pitch + 16*s`` (one half of a 256-bit
  SRAM word). Lanes at or past K in the last word are sent as **zero**,
  whatever the SRAM holds there (it may hold a NaN pattern; a zero weight
  times NaN would poison the sum).
* AXPY (column gather), ``H`` [B, J]: the same addressing; the index list is
  ``n_steps`` uint32 entries, little endian, at ``idx_addr`` (a multiple of 4;
  8 entries per 256-bit SRAM word, entry ``s`` at ``idx_addr + 4*s``). Step
  ``s`` sends ``H[b, idx[s]]`` (at ``x_addr + b*x_pitch + idx[s]*e``) in
  element 0 of the word and zeros in every other element.

Command and checks
------------------
``mode`` (``GemvMode``), ``dtype`` (``Dtype`` code), ``batch_minus_one``,
``n_cols`` (K, DOT only), ``n_steps`` (DOT: ``ceil(K/lanes)``; AXPY: index list
length), ``n_groups`` (the engine's output groups, ``ceil(n_out /
outs_per_group)``), ``x_addr``, ``x_pitch``, ``idx_addr`` (AXPY only). Checked
in the cycle the command is taken, before any SRAM access, first failure
reported: dtype 3, or DOT with ``n_steps != ceil(n_cols/lanes)`` ->
``BAD_FIELD``; ``x_addr`` or ``x_pitch`` not a multiple of 16, or (AXPY)
``idx_addr`` not a multiple of 4 -> ``MISALIGNED``. ``n_steps == 0`` or
``n_groups == 0`` -> ``OK`` with no read and no word (the engine consumes no
activation then). The command processor checks ranges (the rows and the index
list inside the SRAM, every ``idx[s] < J``) before it issues a command; this
block does not: an out-of-range address wraps modulo the SRAM size (it can
never fault), so such a command returns garbage words, never hangs.

``status`` (:func:`feeder_status_layout`): ``code`` (``Status``) and
``cycles`` from the command handshake to the first cycle ``status.valid`` is
high. It is offered 2 cycles after the last word was accepted by the engine
(in cycle 1 for an error / empty command); ``cmd.ready`` is high only while idle, i.e.
after the previous status beat was taken.

Cycle behaviour
---------------
* Command taken in cycle 0; a check failure offers its status in cycle 1.
* Address generation walks (g, s, b). Per step, one setup cycle computes the
  step's base address (DOT ``x_addr + 16*s`` and the valid bytes of the word;
  AXPY ``x_addr + idx[s]*e``), then one read per batch element per cycle.
  AXPY first loads the index list word holding ``idx[s]`` (at the group's
  first step and whenever ``s`` crosses into the next SRAM word, i.e. every 8
  steps) and waits for it: about ``READ_LATENCY + 2`` cycles every 8 steps.
* The request is a register (``sram.req`` is driven from flip-flops); it
  refills in the cycle it is accepted. At most ``depth`` activation reads are
  outstanding (from loading the request to the engine taking the word): space
  in the ``depth``-word output buffer is reserved before a read is issued, so
  ``sram.resp.ready`` is always 1 and the SRAM is never stalled by us.
* A response is formatted (half select and zeroing; AXPY element extraction)
  and written to the output buffer in the cycle it arrives; ``acts.valid``
  rises in the next cycle. First word: ``acts.valid`` in cycle 6 after the
  command handshake when the SRAM grants at once.
* Rate: ``batch`` words per ``batch + 1`` cycles (DOT; tests: batch 4, 5
  steps, status 31 cycles after the command), the same plus the index wait
  every 8 steps (AXPY). The engine takes a word at most every 8 cycles
  (``slot_cycles``); even if every read waited the SRAM's worst case of
  ``n_ports - 1`` = 3 cycles for its bank, a word would take at most 5, so
  the feeder keeps up, and the output buffer (``depth`` words, default 4)
  covers the read latency and the AXPY index waits. While the buffer is full
  the next reads wait (an index read does not: it goes out early).

Buffers are flip-flops (a few words), not ``Memory``: the SRAM banks stay the
only macros.
"""

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.formats import WORD_BITS, Dtype, GemvMode, check_int
from ndpdimm.hw.memory.port import (
    STATUS_CYCLES_BITS,
    Status,
    offer_status,
    status_layout,
    status_state,
)
from ndpdimm.hw.memory.sram import SramGeometry

__all__ = ["ActivationFeeder", "feeder_command_layout", "feeder_status_layout",
           "check_sram_geometry", "STATUS_CYCLES_BITS"]

#: SRAM word width the GEMV helpers are built for: one result beat, two activation words.
GEMV_SRAM_WORD_BITS = 256
_ACT_BYTES = WORD_BITS // 8          # 16
_IDX_BYTES = 4


def check_sram_geometry(sram) -> SramGeometry:
    """``sram`` (``None`` -> default) if it is a ``SramGeometry`` with 256-bit words; else ``ValueError``."""
    if sram is None:
        return SramGeometry()
    if not isinstance(sram, SramGeometry):
        raise ValueError(f"sram must be a SramGeometry, got {sram!r}")
    if sram.word_bits != GEMV_SRAM_WORD_BITS:
        raise ValueError(f"the GEMV SRAM helpers need {GEMV_SRAM_WORD_BITS}-bit SRAM words, "
                         f"got word_bits={sram.word_bits!r}")
    return sram


def _byte_addr_bits(sram: SramGeometry) -> int:
    return sram.size_bytes.bit_length() - 1


def feeder_command_layout(sram: SramGeometry, max_batch: int, step_bits: int,
                          group_bits: int) -> data.StructLayout:
    """One feeder command (fields in the module docstring); addresses are SRAM byte addresses."""
    a = _byte_addr_bits(sram)
    return data.StructLayout({
        "mode": GemvMode,
        "dtype": 2,
        "batch_minus_one": range(max(max_batch, 2)),
        "n_cols": step_bits + 4,
        "n_steps": step_bits,
        "n_groups": group_bits,
        "x_addr": a,
        "x_pitch": a,
        "idx_addr": a,
    })


feeder_status_layout = status_layout


def _bits(value):
    """The raw bits of a signal or a layout view."""
    return value.as_value() if hasattr(value, "as_value") else value


class _RegFifo:
    """A small flip-flop FIFO inside ``m``: drive ``push``/``w_data``/``pop``; read ``r_data``, ``level``.

    The caller never pushes when full nor pops when empty (its credit logic
    guarantees it).
    """

    def __init__(self, m, name, shape, depth):
        self.level = Signal(range(depth + 1), name=f"{name}_level")
        self.push = Signal(name=f"{name}_push")
        self.pop = Signal(name=f"{name}_pop")
        self.w_data = Signal(shape, name=f"{name}_w_data")
        self.r_data = Signal(shape, name=f"{name}_r_data")
        width = len(_bits(self.w_data))
        entries = Array(Signal(width, name=f"{name}_{i}") for i in range(depth))
        head = Signal(range(depth), name=f"{name}_head")
        tail = Signal(range(depth), name=f"{name}_tail")
        m.d.comb += _bits(self.r_data).eq(entries[head])
        with m.If(self.push):
            m.d.sync += [entries[tail].eq(_bits(self.w_data)),
                         tail.eq(Mux(tail == depth - 1, 0, tail + 1))]
        with m.If(self.pop):
            m.d.sync += head.eq(Mux(head == depth - 1, 0, head + 1))
        with m.If(self.push & ~self.pop):
            m.d.sync += self.level.eq(self.level + 1)
        with m.Elif(self.pop & ~self.push):
            m.d.sync += self.level.eq(self.level - 1)


class ActivationFeeder(wiring.Component):
    """The activation feeder (see module docstring).

    Parameters
    ----------
    sram : SramGeometry or None
        The SRAM behind the port (``None``: ``SramGeometry()``); 256-bit words.
    max_batch : int
        The engine's ``max_batch`` (1..64, default 16).
    step_bits : int
        The engine's ``step_bits`` (1..30, default 16); ``n_cols`` has ``step_bits + 4``.
    group_bits : int
        Width of ``n_groups`` (1..30, default 16).
    depth : int
        Output buffer words = most activation reads outstanding (2..16, default 4).

    Ports
    -----
    ``cmd`` In(stream of :func:`feeder_command_layout`), ``status`` Out(stream of
    :func:`feeder_status_layout`), ``sram`` Out(SRAM port), ``acts``
    Out(stream of 128 bits), ``busy`` Out(1) (from the command handshake until
    the status beat is taken).
    """

    def __init__(self, sram: SramGeometry = None, max_batch: int = 16, step_bits: int = 16,
                 group_bits: int = 16, depth: int = 4):
        self.geometry = check_sram_geometry(sram)
        self.max_batch = check_int("max_batch", max_batch, 1, 64)
        self.step_bits = check_int("step_bits", step_bits, 1, 30)
        self.group_bits = check_int("group_bits", group_bits, 1, 30)
        self.depth = check_int("depth", depth, 2, 16)
        self.cmd_layout = feeder_command_layout(self.geometry, max_batch, step_bits, group_bits)
        self.status_layout = feeder_status_layout()
        super().__init__({
            "cmd": In(stream.Signature(self.cmd_layout)),
            "status": Out(stream.Signature(self.status_layout)),
            "sram": Out(self.geometry.port_signature),
            "acts": Out(stream.Signature(WORD_BITS)),
            "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        A = _byte_addr_bits(self.geometry)
        D = self.depth
        word_shift = self.geometry.word_bytes.bit_length() - 1          # 5
        req, resp = self.sram.req, self.sram.resp

        cfg = Signal(self.cmd_layout)
        is_axpy = cfg.mode == GemvMode.AXPY
        is_int8 = cfg.dtype == Dtype.INT8
        cyc = Signal(STATUS_CYCLES_BITS)

        # ---- address generation state ----------------------------------------------------
        g_cnt = Signal(self.group_bits)
        s_cnt = Signal(self.step_bits)
        b_cnt = Signal.like(cfg.batch_minus_one)
        idx_ptr = Signal(A - 2)               # address of idx[s] in 4-byte units
        need_idx = Signal()                   # AXPY: the word holding idx[s] must be (re)loaded
        idx_valid = Signal()
        idx_word = Signal(self.geometry.word_bits)
        step_base = Signal(A)                 # byte address of (s, b = 0)
        row_off = Signal(A)                   # b * x_pitch
        step_vbytes = Signal(range(_ACT_BYTES + 1))   # DOT: bytes of the word that are < K
        act_addr = Signal(A)
        m.d.comb += act_addr.eq(step_base + row_off)

        # ---- request register, in-flight info, output buffer ----------------------------
        info_layout = data.StructLayout({"is_idx": 1, "sel": word_shift,
                                         "vbytes": range(_ACT_BYTES + 1)})
        info = _RegFifo(m, "info", info_layout, D + 1)   # <= D activation reads + 1 index read
        out = _RegFifo(m, "out", WORD_BITS, D)
        reserved = Signal(range(D + 1))       # activation reads loaded, word not yet taken
        r_valid = Signal()
        r_addr = Signal(self.geometry.addr_bits)
        r_free = ~r_valid | req.ready
        load_act = Signal()
        load_idx = Signal()
        acts_taken = self.acts.valid & self.acts.ready
        m.d.comb += [
            req.valid.eq(r_valid),
            req.payload.addr.eq(r_addr),
            req.payload.write.eq(0),
        ]
        with m.If(load_act | load_idx):
            m.d.sync += [
                r_valid.eq(1),
                r_addr.eq(Mux(load_idx, idx_ptr >> (word_shift - 2), act_addr >> word_shift)),
            ]
        with m.Elif(req.ready):
            m.d.sync += r_valid.eq(0)
        m.d.comb += [
            info.push.eq(load_act | load_idx),
            info.w_data.is_idx.eq(load_idx),
            info.w_data.sel.eq(act_addr[:word_shift]),
            info.w_data.vbytes.eq(step_vbytes),
        ]
        m.d.sync += reserved.eq(reserved + load_act - acts_taken)

        # ---- responses: index word, or an activation word into the buffer ---------------
        head = info.r_data
        got = resp.valid                      # only reads we issued come back
        word = resp.payload
        m.d.comb += [resp.ready.eq(1), info.pop.eq(got)]
        with m.If(got & head.is_idx):
            m.d.sync += [idx_word.eq(word), idx_valid.eq(1)]
        half = Mux(head.sel[4], word[WORD_BITS:], word[:WORD_BITS])
        dot_word = Cat(Mux(j < head.vbytes, half.word_select(j, 8), 0) for j in range(_ACT_BYTES))
        word_bytes = Array(word.word_select(j, 8) for j in range(self.geometry.word_bytes))
        elem_lo = word_bytes[head.sel]
        elem_hi = Mux(is_int8, 0, word_bytes[head.sel | 1])     # FP elements are 2-byte aligned
        axpy_word = Cat(elem_lo, elem_hi, Const(0, WORD_BITS - 16))
        m.d.comb += [
            out.push.eq(got & ~head.is_idx),
            out.w_data.eq(Mux(is_axpy, axpy_word, dot_word)),
            out.pop.eq(acts_taken),
            self.acts.valid.eq(out.level != 0),
            self.acts.payload.eq(out.r_data),
        ]

        # ---- control -----------------------------------------------------------------------
        p = self.cmd.payload
        p_int8 = p.dtype == Dtype.INT8
        p_words = Mux(p_int8, (p.n_cols + 15) >> 4, (p.n_cols + 7) >> 3)
        bad_field = (p.dtype == 3) | ((p.mode == GemvMode.DOT) & (p_words != p.n_steps))
        misaligned = (p.x_addr[:4].any() | p.x_pitch[:4].any() |
                      ((p.mode == GemvMode.AXPY) & p.idx_addr[:2].any()))
        empty = (p.n_steps == 0) | (p.n_groups == 0)

        kbytes = Mux(is_int8, cfg.n_cols, cfg.n_cols << 1)
        rem = Signal(len(kbytes) + 1)
        m.d.comb += rem.eq(kbytes - (s_cnt << 4))
        idx_elem = idx_word.word_select(idx_ptr[:3], 32)
        elem_off = Mux(is_int8, idx_elem, idx_elem << 1)
        can_act = r_free & (reserved < D)
        b_last = b_cnt == cfg.batch_minus_one
        s_last = s_cnt + 1 == cfg.n_steps
        g_last = g_cnt + 1 == cfg.n_groups

        def finish(code, cycles=cyc + 1):
            offer_status(m, self.status, code, cycles)

        with m.If(self.busy):
            m.d.sync += cyc.eq(cyc + 1)
        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.cmd.ready.eq(1)
                with m.If(self.cmd.valid):
                    m.d.sync += [
                        cfg.eq(p), cyc.eq(1),
                        g_cnt.eq(0), s_cnt.eq(0), b_cnt.eq(0),
                        idx_ptr.eq(p.idx_addr[2:]), need_idx.eq(1), idx_valid.eq(0),
                    ]
                    with m.If(bad_field):
                        finish(Status.BAD_FIELD, 1)
                    with m.Elif(misaligned):
                        finish(Status.MISALIGNED, 1)
                    with m.Elif(empty):
                        finish(Status.OK, 1)
                    with m.Else():
                        m.next = "STEP"
            with m.State("STEP"):
                m.d.comb += self.busy.eq(1)
                with m.If(is_axpy & need_idx):
                    m.d.comb += load_idx.eq(r_free)
                    with m.If(r_free):
                        m.d.sync += [need_idx.eq(0), idx_valid.eq(0)]
                with m.Elif(~is_axpy | idx_valid):
                    m.d.sync += [
                        step_base.eq(Mux(is_axpy, cfg.x_addr + elem_off,
                                         cfg.x_addr + (s_cnt << 4))),
                        step_vbytes.eq(Mux(rem >= _ACT_BYTES, _ACT_BYTES, rem)),
                        row_off.eq(0),
                        b_cnt.eq(0),
                    ]
                    m.next = "ISSUE"
            with m.State("ISSUE"):
                m.d.comb += [self.busy.eq(1), load_act.eq(can_act)]
                with m.If(can_act):
                    m.d.sync += [row_off.eq(row_off + cfg.x_pitch), b_cnt.eq(b_cnt + 1)]
                    with m.If(b_last):
                        m.next = "STEP"
                        with m.If(s_last):
                            m.d.sync += [s_cnt.eq(0), idx_ptr.eq(cfg.idx_addr[2:]),
                                         need_idx.eq(1), g_cnt.eq(g_cnt + 1)]
                            with m.If(g_last):
                                m.next = "DRAIN"
                        with m.Else():
                            m.d.sync += [s_cnt.eq(s_cnt + 1), idx_ptr.eq(idx_ptr + 1),
                                         need_idx.eq((idx_ptr + 1)[:3] == 0)]
            with m.State("DRAIN"):
                m.d.comb += self.busy.eq(1)
                with m.If(reserved == 0):          # every word taken by the engine
                    finish(Status.OK)
            status_state(m, self.status, self.busy)
        return m
