"""Relayout unit: converts a tensor between striped and localized layout over DIMM-Link, without the host.

Layouts (``docs/dimm_link.md``, "Relayout"): a tensor of ``n_blocks`` blocks of
``B = block_bytes`` bytes is *striped* over a group of ``D = group_dimms``
DIMMs (member ``j`` is DIMM ``group_base + j``) when block ``k`` sits on member
``k mod D`` at ``base + (k div D) B``, and *localized* on member ``t`` when
block ``k`` sits there at ``base' + k B``.

Descriptor (``desc``, :func:`~.descriptors.relayout_descriptor_layout`)
-----------------------------------------------------------------------
The host issues the same descriptor on every member of the group and waits
for all of them; each member moves the blocks it holds:

* ``to_localized = 1``: member ``i`` (this DIMM: ``my_id - group_base``) sends
  its striped blocks ``k = i, i + D, ...`` (from ``src + j B``, ``j = 0, 1, ...``)
  to member ``target`` at ``dst + k B``.
* ``to_localized = 0``: member ``target`` holds the localized tensor at
  ``src`` and sends block ``k`` to member ``k mod D`` at ``dst + (k div D) B``;
  the other members have nothing to send (``OK`` after the checks).

A block for this DIMM itself goes through the router's self-loop like any
other. Source and destination regions must not overlap on any DIMM.

Checks, in this order, before any side effect (no DMA, no link command):

* ``group_dimms`` 0 or above 16, ``target >= group_dimms``, this DIMM not in
  the group, the group past the chain (``group_base + group_dimms > n_dimms``,
  from ``LINK_ID``), ``block_bytes == 0`` -> ``BAD_FIELD``;
* ``block_bytes``, ``src`` or ``dst`` not a multiple of 64 (a DRAM burst), or
  ``staging`` not a multiple of 32 (an SRAM word) -> ``MISALIGNED``;
* the blocks this DIMM reads, ``[src, src + c B)`` (``c`` its block count),
  outside the window ``[window_base, window_limit)``, or the destination range
  on a receiving DIMM (``dst`` + its blocks x ``B``) past the DIMM's capacity
  (members have equal capacities) -> ``DRAM_RANGE``;
* two staging blocks, ``[staging, staging + 2 B)``, past the SRAM -> ``SRAM_RANGE``;
* nothing to send (``n_blocks == 0``, or not the target when ``to_localized = 0``)
  -> ``OK``.

Every receiving DIMM checks its own protection window: a destination outside
it (or any other link error) ends the descriptor with the link's status
(``REMOTE_RANGE``, ``LINK_TIMEOUT``).

Data path: borrowing the DMA engine
-----------------------------------
The unit is a sequencer: it reads its blocks from DRAM into SRAM staging
with the core's :class:`~.dma.DmaEngine` (``dma_desc``/``dma_status``)
and hands each staged block as one remote-DRAM WRITE (transaction address bit
39 set, see ``hw/link/transaction.py``) to the link initiator
(``link_cmd``/``link_status``). The command processor runs one descriptor at a
time, so while a RELAYOUT runs the DMA engine and the initiator are idle; the
core shares their command ports with :func:`share_command_port` (``busy``
selects the unit). Borrowing the DMA engine rather than adding a memory client
of its own costs no fourth memory-system client, no SRAM port and no second
copy of the burst-to-SRAM datapath, and its completion (after the last SRAM
write) is exactly what staging needs.

Two staging buffers (``staging`` and ``staging + B``): the DMA reads block
``j + 1`` into one while the link sends block ``j`` from the other. A block's
WRITE starts once its DMA completed; a buffer is reused once the WRITE of the
block before completed (the initiator's status: every target acknowledged,
every DRAM write done). Per block this costs about the larger of the DMA time
(``B / 32`` cycles + DRAM latency) and the link time (``B / 32`` cycles + hops +
the target's DRAM write latency + the completion's way back).

Status (``status``, :func:`~.port.status_layout`): ``OK`` when every
block's WRITE completed, else the first error; after an error the unit starts
nothing new and reports once the DMA engine and initiator are idle (blocks
already written stay written). ``cycles`` counts from the descriptor
handshake; the checks take ``RELAYOUT_COUNT_BITS + 3`` cycles (a bit-serial
division of ``n_blocks`` by ``D``). ``blocks_sent`` counts completed WRITEs
since reset.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.descriptors import RELAYOUT_COUNT_BITS, relayout_descriptor_layout
from ndpdimm.hw.gemv.activation_feeder import check_sram_geometry
from ndpdimm.hw.link.formats import WORD_BYTES, LinkOp
from ndpdimm.hw.link.router import DIMM_ID_BITS
from ndpdimm.hw.link.transaction import DRAM_SPACE, WINDOW_BITS, link_command_layout
from ndpdimm.hw.memory.dma import dma_descriptor_layout
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import (
    BURST_BYTES,
    STATUS_CYCLES_BITS,
    Status,
    burst_address_bits,
    offer_status,
    status_layout,
    status_state,
    take_command_state,
)

__all__ = ["RelayoutUnit", "share_command_port", "MAX_GROUP_DIMMS"]

#: Most DIMMs in a relayout group (DIMM ids are 4 bits).
MAX_GROUP_DIMMS = 1 << DIMM_ID_BITS


def share_command_port(m, use_second, first, second, cmd, status):
    """Connect the block whose command sink is ``cmd`` and status source ``status`` to one of two
    users, ``first`` or (while ``use_second``) ``second``, each a ``(cmd, status)`` pair of
    the user's command source and status sink. The unselected user sees ``ready``/``valid`` low.
    Only for users that never drive the block at the same time (the relayout unit drives the
    DMA engine and the link initiator only while the command processor waits for it)."""
    for sel, (user_cmd, user_status) in ((~use_second, first), (use_second, second)):
        with m.If(sel):
            m.d.comb += [cmd.valid.eq(user_cmd.valid), cmd.payload.eq(user_cmd.payload),
                         user_cmd.ready.eq(cmd.ready),
                         user_status.valid.eq(status.valid), user_status.payload.eq(status.payload),
                         status.ready.eq(user_status.ready)]


class RelayoutUnit(wiring.Component):
    """Striped <-> localized relayout (see module docstring).

    Parameters
    ----------
    sram : SramGeometry or None
        The SRAM (256-bit words), as the DMA engine and link initiator see it.
    capacity_bytes : int or None
        DIMM capacity (``None``: ``load_dram_config()``).

    Ports
    -----
    ``desc`` In / ``status`` Out (the descriptor and its completion), ``dma_desc`` Out /
    ``dma_status`` In (to the DMA engine), ``link_cmd`` Out / ``link_status`` In (to the
    link initiator), ``my_id``, ``n_dimms``, ``window_base``, ``window_limit`` In, ``busy``,
    ``blocks_sent`` Out.
    """

    def __init__(self, sram=None, *, capacity_bytes=None):
        if capacity_bytes is None:
            capacity_bytes = load_dram_config()[0].capacity_bytes
        burst_address_bits(capacity_bytes)                 # validates the capacity
        if capacity_bytes > DRAM_SPACE:
            raise ValueError(f"capacity_bytes must be at most {DRAM_SPACE:#x}, got {capacity_bytes!r}")
        self.geometry = g = check_sram_geometry(sram)
        self.capacity_bytes = capacity_bytes
        self.descriptor_layout = relayout_descriptor_layout(capacity_bytes.bit_length() - 1,
                                                            g.size_bytes.bit_length() - 1)
        self.dma_layout = dma_descriptor_layout(capacity_bytes, g.size_bytes)
        self.link_layout = link_command_layout(g)
        super().__init__({
            "desc": In(stream.Signature(self.descriptor_layout)),
            "status": Out(stream.Signature(status_layout())),
            "dma_desc": Out(stream.Signature(self.dma_layout)),
            "dma_status": In(stream.Signature(status_layout())),
            "link_cmd": Out(stream.Signature(self.link_layout)),
            "link_status": In(stream.Signature(status_layout())),
            "my_id": In(DIMM_ID_BITS),
            "n_dimms": In(DIMM_ID_BITS + 1),
            "window_base": In(WINDOW_BITS),
            "window_limit": In(WINDOW_BITS),
            "busy": Out(1),
            "blocks_sent": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        N = RELAYOUT_COUNT_BITS
        burst_low = (BURST_BYTES - 1).bit_length()
        word_low = (WORD_BYTES - 1).bit_length()
        d = Signal(self.descriptor_layout)
        B, D = d.block_bytes, d.group_dimms
        cyc = Signal(STATUS_CYCLES_BITS)
        me = Signal(DIMM_ID_BITS + 1)               # this DIMM's member index
        m.d.comb += me.eq(self.my_id - d.group_base)

        # n_blocks = quo * D + rem, bit-serially (MSB first), one quotient bit per cycle
        num = Signal(N)
        quo = Signal(N)
        rem = Signal(DIMM_ID_BITS + 1)
        steps = Signal(range(N))
        trial = Signal(DIMM_ID_BITS + 2)
        m.d.comb += trial.eq(Cat(num[N - 1], rem))

        # derived from the quotient: blocks this DIMM sends, blocks one receiver gets
        count = Signal(N + 1)
        extent = Signal(N + 1)
        is_target = me == d.target
        m.d.comb += [
            count.eq(Mux(d.to_localized, quo + (me < rem), Mux(is_target, d.n_blocks, 0))),
            extent.eq(Mux(d.to_localized, d.n_blocks, quo + (rem != 0))),
        ]
        wide = N + 1 + len(B) + len(d.src) + 1
        local_end = Signal(wide)
        dst_end = Signal(wide)
        m.d.comb += [local_end.eq(d.src + count * B), dst_end.eq(d.dst + extent * B)]

        # ---- the walk: reader (DMA into staging) and sender (link WRITE from staging) ------
        err = Signal(Status)
        r_issued = Signal(N + 1)                    # blocks handed to the DMA engine
        r_done = Signal(N + 1)                      # ... staged
        s_issued = Signal(N + 1)                    # blocks handed to the link initiator
        s_done = Signal(N + 1)                      # ... written at the receiver
        dma_wait = Signal()
        link_wait = Signal()
        r_addr = Signal(len(d.src))                 # DRAM address of the next block to stage
        s_remote = Signal(len(d.dst))               # receiver's DRAM address of the next block
        s_member = Signal(DIMM_ID_BITS)             # to_striped: receiving member of the next block
        s_step = Signal(len(B) + DIMM_ID_BITS + 1)  # s_remote step (to_localized: D B)
        run = Signal()

        dp, lp = self.dma_desc.payload, self.link_cmd.payload
        m.d.comb += [
            dp.to_dram.eq(0), dp.dram_addr.eq(r_addr),
            dp.sram_addr.eq(d.staging + Mux(r_issued[0], B, 0)), dp.n_bytes.eq(B),
            lp.op.eq(LinkOp.WRITE),
            lp.dest.eq(d.group_base + Mux(d.to_localized, d.target, s_member)),
            lp.remote_addr.eq(DRAM_SPACE | s_remote),
            lp.local_addr.eq(d.staging + Mux(s_issued[0], B, 0)), lp.n_bytes.eq(B),
            self.dma_desc.valid.eq(run & (err == Status.OK) & ~dma_wait & (r_issued != count) &
                                   (r_issued < s_done + 2)),
            self.link_cmd.valid.eq(run & (err == Status.OK) & ~link_wait & (s_issued != r_done)),
            self.dma_status.ready.eq(run),
            self.link_status.ready.eq(run),
        ]
        with m.If(self.dma_desc.valid & self.dma_desc.ready):
            m.d.sync += [dma_wait.eq(1), r_issued.eq(r_issued + 1), r_addr.eq(r_addr + B)]
        with m.If(self.link_cmd.valid & self.link_cmd.ready):
            m.d.sync += [link_wait.eq(1), s_issued.eq(s_issued + 1)]
            row_end = s_member == D - 1             # to_striped: the next block starts a new row
            with m.If(d.to_localized | row_end):
                m.d.sync += s_remote.eq(s_remote + s_step)
            with m.If(~d.to_localized):
                m.d.sync += s_member.eq(Mux(row_end, 0, s_member + 1))
        dma_back = self.dma_status.valid & self.dma_status.ready
        link_back = self.link_status.valid & self.link_status.ready
        with m.If(dma_back):
            m.d.sync += [dma_wait.eq(0), r_done.eq(r_done + 1)]
        with m.If(link_back):
            m.d.sync += [link_wait.eq(0), s_done.eq(s_done + 1)]
            with m.If(self.link_status.payload.code == Status.OK):
                m.d.sync += self.blocks_sent.eq(self.blocks_sent + 1)
        # the first error wins (the DMA's if both come in one cycle)
        with m.If(err == Status.OK):
            with m.If(dma_back & (self.dma_status.payload.code != Status.OK)):
                m.d.sync += err.eq(self.dma_status.payload.code)
            with m.Elif(link_back & (self.link_status.payload.code != Status.OK)):
                m.d.sync += err.eq(self.link_status.payload.code)

        # ---- control -------------------------------------------------------------------------
        def finish(code):
            offer_status(m, self.status, code, cyc + 1)

        size = self.geometry.size_bytes
        with m.FSM():
            take_command_state(m, self.desc, d, cyc)
            with m.State("CHECK"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += cyc.eq(cyc + 1)
                with m.If((D == 0) | (D > MAX_GROUP_DIMMS) | (d.target >= D) |
                          (self.my_id < d.group_base) | (me >= D) |
                          (d.group_base + D > self.n_dimms) | (B == 0)):
                    finish(Status.BAD_FIELD)
                with m.Elif(B[:burst_low].any() | d.src[:burst_low].any() | d.dst[:burst_low].any() |
                            d.staging[:word_low].any()):
                    finish(Status.MISALIGNED)
                with m.Else():
                    m.d.sync += [num.eq(d.n_blocks), quo.eq(0), rem.eq(0), steps.eq(0)]
                    m.next = "DIVIDE"
            with m.State("DIVIDE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += [cyc.eq(cyc + 1), num.eq(num << 1), steps.eq(steps + 1)]
                with m.If(trial >= D):
                    m.d.sync += [rem.eq(trial - D), quo.eq(Cat(1, quo))]
                with m.Else():
                    m.d.sync += [rem.eq(trial), quo.eq(Cat(0, quo))]
                with m.If(steps == N - 1):
                    m.next = "RANGE"
            with m.State("RANGE"):
                m.d.comb += self.busy.eq(1)
                m.d.sync += cyc.eq(cyc + 1)
                with m.If((d.src < self.window_base) | (local_end > self.window_limit) |
                          (dst_end > self.capacity_bytes)):
                    finish(Status.DRAM_RANGE)
                with m.Elif(d.staging + 2 * B > size):
                    finish(Status.SRAM_RANGE)
                with m.Elif(count == 0):
                    finish(Status.OK)
                with m.Else():
                    m.d.sync += [
                        err.eq(Status.OK), r_issued.eq(0), r_done.eq(0), s_issued.eq(0),
                        s_done.eq(0), dma_wait.eq(0), link_wait.eq(0), r_addr.eq(d.src),
                        s_member.eq(0),
                        s_remote.eq(Mux(d.to_localized, d.dst + me * B, d.dst)),
                        s_step.eq(Mux(d.to_localized, D * B, B)),
                    ]
                    m.next = "RUN"
            with m.State("RUN"):
                m.d.comb += [self.busy.eq(1), run.eq(1)]
                m.d.sync += cyc.eq(cyc + 1)
                with m.If(~dma_wait & ~link_wait & ((err != Status.OK) | (s_done == count))):
                    finish(err)
            status_state(m, self.status, self.busy)
        return m
