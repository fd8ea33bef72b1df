"""The NDP core: command processor driving the GEMV datapath, SRAM and memory system of one DIMM.

::

    host CSR port --> CommandProcessor --+--> WeightStreamer --mem--> MemorySystem --> DRAM (PHY ports)
                                         +--> GemvEngine <-- weights     ^   ^
                                         +--> ActivationFeeder --acts--/     |
                                         +--> ResultWriter <-- results       |
                                         +--> DmaEngine ----------mem--------/
                                         +--> ActivationSequencer (+ ActivationUnit)
    host pass-through port --------------------------------------> MemorySystem
    CommandProcessor --> LinkTransaction <--> LinkRouter <--> link_left / link_right   (link=True)
                     --> RelayoutUnit --> (DmaEngine, LinkTransaction)                     (link=True)
                         LinkTransaction --mem (remote DRAM writes)--> MemorySystem client 2
    SRAM ports: 0 streamer (index lists), 1 DMA, 2 feeder, 3 writer,
                4 activation reads, 5 activation writes (6 link reads, 7 link writes)

The host programs it through the registers of ``hw/registers.py`` and the
descriptors of ``hw/descriptors.py`` (see ``hw/core/command_processor.py`` for the
checks, protection window and completion semantics); host pass-through DRAM
reads and writes use the ``host`` port at any time. ``irq`` is high while a
completion waits in the completion queue (level-triggered: it drops when the
host pops the last one), so a host need not poll ``CQ_HEAD``. The DRAM arbitration
policy is the ``POLICY`` register, carried into the DRAM clock by a two-flop
synchroniser (it is quasi-static: privileged, changed only while idle).

Operands of a GEMV live in the SRAM (activations, index lists, results) and
the weights in DRAM in the streamer's layout; a program moves data between
DRAM and SRAM with DMA descriptors. ACT, SOFTMAX and ELTWISE descriptors run
on the activation unit SRAM to SRAM (``hw/activation/sequencer.py``).

``act_lanes`` (default 16) sets the activation unit's lanes. The SPEC's
reference point has 256; here one SRAM port moves one 32 B word (16 FP16) per
cycle each way, so lanes past 16 would only wait for the SRAM: 16 lanes
already stream at the port's rate (the sequencer's docstring has the
figures). Wider configurations elaborate and work, at the same throughput.

``link=True`` builds the DIMM-Link transaction layer and router in
(``hw/link/transaction.py``, ``hw/link/router.py``): LINK_SEND and ATOMIC_ADD
descriptors then run (remote SRAM writes, reads, atomic adds), the ``LINK_ID``
register sets this DIMM's id and the chain length, and the router's two chain
sides are the packet ports ``link_left_tx``/``link_left_rx`` and
``link_right_tx``/``link_right_rx`` (beats of ``packet_beat_layout``), which a
system connects through DIMM-Link ports (link layer + PHY) to the neighbours.
A DIMM addressed by itself (``dest`` = its own id) loops back inside the router.
``CAPS`` bit 48 says whether the link is built. The link target writes remote
DRAM WRITEs (transaction address bit 39) through a third memory-system client,
inside the window of ``WINDOW_BASE``/``WINDOW_LIMIT``. RELAYOUT descriptors
run on the relayout unit (``hw/link/relayout.py``), which borrows the DMA
engine and the link initiator while it runs (their command ports are shared
with the command processor, selected by the unit's ``busy``: the command
processor waits for the RELAYOUT meanwhile). A core without the link builds
none of this, exactly as before.

The activation sequencer and unit sit in a gated clock domain (``act``,
``hw/clock_gate.py``): their clock runs only while they hold or are offered a
descriptor (and in reset), which changes no cycle of their behaviour and
spares the simulator (and the silicon) their sixteen FP32 lanes the rest of
the time.

Cycle behaviour: that of the parts (descriptor dispatch in 3 cycles, then the
blocks' own pipelines; see their docstrings).
"""

from amaranth.hdl import Cat, DomainRenamer, Module, ResetSignal, Signal
from amaranth.lib import cdc, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.activation.sequencer import SRAM_WORD_BYTES, ActivationSequencer
from ndpdimm.hw.clock_gate import gated_domain
from ndpdimm.hw.core.command_processor import CommandProcessor, csr_request_layout
from ndpdimm.hw.gemv.activation_feeder import ActivationFeeder
from ndpdimm.hw.gemv.engine import GemvEngine
from ndpdimm.hw.gemv.result_writer import ResultWriter
from ndpdimm.hw.hierarchy import replicated_verilog
from ndpdimm.hw.link.formats import LinkConfig
from ndpdimm.hw.link.relayout import RelayoutUnit, share_command_port
from ndpdimm.hw.link.router import LEFT, LOCAL, RIGHT, LinkRouter, packet_signature
from ndpdimm.hw.link.transaction import LinkTransaction
from ndpdimm.hw.memory.controller import PHY_PORTS, RANK_QUEUE_DEPTH, phy_members
from ndpdimm.hw.memory.dma import MAX_OUTSTANDING, DmaEngine
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import connect_memory_client, forward_stream, memory_server_signature
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry
from ndpdimm.hw.memory.system import MemorySystem
from ndpdimm.hw.memory.weight_streamer import REQUEST_LANES, WeightStreamer, connect_consumer
from ndpdimm.hw.registers import CSR_DATA_BITS, register

__all__ = ["NdpCore", "ndp_core_from_config", "silenced_ndp_core", "ndp_core_verilog", "core_caps"]

(STREAMER_PORT, DMA_PORT, FEEDER_PORT, WRITER_PORT, ACT_READ_PORT, ACT_WRITE_PORT,
 LINK_READ_PORT, LINK_WRITE_PORT) = range(8)
#: PHY-side ports the core exposes (the arbitration policy is a register, not a pin).
CORE_PHY_PORTS = tuple(p for p in PHY_PORTS if p != "policy")


def core_caps(n_units, sram_size, ranks, max_batch, act_lanes=0, link=False) -> int:
    """The ``CAPS`` register value (its fields in ``hw/registers.py``); ``ValueError`` for a
    parameter too wide for its field."""
    return register("CAPS").pack(UNITS=n_units, SRAM_LOG2=sram_size.bit_length() - 1, RANKS=ranks,
                                 MAX_BATCH=max_batch, ACT_LANES=act_lanes, LINK=int(bool(link)))




class NdpCore(wiring.Component):
    def __init__(self, org, timing, *, n_units=16, max_batch=16, radix_bits=1, ring_beats=8,
                 sram_size=131072, sram_banks=16, refresh="aligned", queue_depth=RANK_QUEUE_DEPTH,
                 dma_outstanding=MAX_OUTSTANDING, desc_queue=8, cq_depth=8, act_lanes=16,
                 hierarchical=False, link=False, link_max_payload=1024):
        self.org, self.timing = org, timing
        self.memory = MemorySystem(org, timing, n_clients=3 if link else 2, lanes=REQUEST_LANES,
                                   queue_depth=queue_depth, refresh=refresh)
        self.has_link = bool(link)
        self.sram_geometry = SramGeometry(sram_size, sram_banks, 8 * SRAM_WORD_BYTES, 8 if link else 6)
        self.link = self.router = self.relayout = None
        if link:
            self.link = LinkTransaction(self.sram_geometry, LinkConfig(max_payload=link_max_payload),
                                        max_dimms=16, capacity_bytes=org.capacity_bytes,
                                        ranks=org.ranks)
            self.router = LinkRouter()
            self.relayout = RelayoutUnit(self.sram_geometry, capacity_bytes=org.capacity_bytes)
        self.engine = GemvEngine(n_units=n_units, max_batch=max_batch, radix_bits=radix_bits,
                                 hierarchical=hierarchical)
        e = self.engine
        self.streamer = WeightStreamer(n_units=n_units, ring_beats=ring_beats, org=org,
                                       sram=self.sram_geometry, index_bits=e.index_bits,
                                       step_bits=e.step_bits, hierarchical=hierarchical)
        self.dma = DmaEngine(capacity_bytes=org.capacity_bytes, ranks=org.ranks,
                             sram_size_bytes=sram_size, max_outstanding=dma_outstanding)
        self.feeder = ActivationFeeder(sram=self.sram_geometry, max_batch=max_batch,
                                       step_bits=e.step_bits)
        self.writer = ResultWriter(sram=self.sram_geometry, max_batch=max_batch,
                                   index_bits=e.index_bits)
        self.act = ActivationSequencer(self.sram_geometry, lanes=act_lanes)
        self.cp = CommandProcessor(
            streamer_desc_layout=self.streamer.descriptor_layout,
            streamer_status_layout=self.streamer.status_layout,
            engine_cmd_layout=e.cmd_layout, feeder_cmd_layout=self.feeder.cmd_layout,
            writer_cmd_layout=self.writer.cmd_layout,
            dma_desc_layout=self.dma.desc.payload.shape(),
            act_desc_layout=self.act.descriptor_layout,
            n_units=n_units, max_batch=max_batch, index_bits=e.index_bits,
            step_bits=e.step_bits, sram_size=sram_size, capacity_bytes=org.capacity_bytes,
            queue_depth=desc_queue, cq_depth=cq_depth,
            caps=core_caps(n_units, sram_size, org.ranks, max_batch, act_lanes, link),
            link_cmd_layout=self.link.cmd_layout if link else None)
        link_ports = {}
        if link:
            link_ports = {f"link_{side}_{d}": (Out if d == "tx" else In)(packet_signature())
                          for side in ("left", "right") for d in ("tx", "rx")}
        phy = phy_members(org, self.memory.controller.cmd_layout)
        super().__init__({
            "csr": In(stream.Signature(csr_request_layout())),
            "csr_resp": Out(stream.Signature(CSR_DATA_BITS)),
            "irq": Out(1),
            "host": Out(memory_server_signature(org.capacity_bytes, org.ranks, 1)),
            **{name: phy[name] for name in CORE_PHY_PORTS},
            **link_ports,
        })

    def elaborate(self, platform):
        m = Module()
        ms, st, dma, e, fd, wr, cp = (self.memory, self.streamer, self.dma, self.engine,
                                      self.feeder, self.writer, self.cp)
        g = self.sram_geometry
        sram = BankedSram(g.size_bytes, g.n_banks, g.word_bits, g.n_ports)
        for name, block in (("memory", ms), ("sram", sram), ("streamer", st), ("dma", dma),
                            ("engine", e), ("feeder", fd), ("writer", wr), ("cp", cp)):
            m.submodules[name] = block
        # The activation sequencer and unit run on a gated clock (hw/clock_gate.py): clocked
        # while they hold a descriptor (busy: from its handshake until the status is taken,
        # every read answered and every pipeline stage drained before that), while one is
        # offered (its handshake happens at the next edge) and in reset. Idle, nothing of
        # theirs changes, so stopping the clock changes no behaviour.
        act = self.act
        gated_domain(m, "act", act.busy | act.desc.valid | ResetSignal())
        m.submodules.act = DomainRenamer("act")(act)

        connect_memory_client(m, st.mem, ms.clients[0])
        connect_memory_client(m, dma.mem, ms.clients[1])
        forward_stream(m, self.host.req[0], ms.host.req[0])
        for r in range(self.org.ranks):
            forward_stream(m, ms.host.resp[r], self.host.resp[r])

        for block, port in ((st, STREAMER_PORT), (dma, DMA_PORT), (fd, FEEDER_PORT),
                            (wr, WRITER_PORT)):
            wiring.connect(m, block.sram, sram.ports[port])
        wiring.connect(m, self.act.rd, sram.ports[ACT_READ_PORT])
        wiring.connect(m, self.act.wr, sram.ports[ACT_WRITE_PORT])
        connect_consumer(m, st, e.weights, e.weight_committed)
        wiring.connect(m, fd.acts, e.acts)
        wiring.connect(m, e.results, wr.results)

        # command processor
        wiring.connect(m, wiring.flipped(self.csr), cp.csr)
        wiring.connect(m, cp.csr_resp, wiring.flipped(self.csr_resp))
        m.d.comb += self.irq.eq(cp.irq)
        wiring.connect(m, cp.streamer_desc, st.desc)
        wiring.connect(m, st.status, cp.streamer_status)
        wiring.connect(m, cp.engine_cmd, e.cmd)
        wiring.connect(m, cp.feeder_cmd, fd.cmd)
        wiring.connect(m, fd.status, cp.feeder_status)
        wiring.connect(m, cp.writer_cmd, wr.cmd)
        wiring.connect(m, wr.status, cp.writer_status)
        if not self.has_link:
            wiring.connect(m, cp.dma_desc, dma.desc)
            wiring.connect(m, dma.status, cp.dma_status)
        wiring.connect(m, cp.act_desc, self.act.desc)
        wiring.connect(m, self.act.status, cp.act_status)
        m.d.comb += [
            cp.streamer_validated.eq(st.validated),
            cp.bursts_read.eq(st.bursts_read),
            cp.gemv_busy.eq(e.busy), cp.dma_busy.eq(dma.busy), cp.act_busy.eq(self.act.busy),
        ]
        if self.has_link:
            lk, rt = self.link, self.router
            m.submodules.link = lk
            m.submodules.router = rt
            wiring.connect(m, lk.sram_read, sram.ports[LINK_READ_PORT])
            wiring.connect(m, lk.sram_write, sram.ports[LINK_WRITE_PORT])
            connect_memory_client(m, lk.mem, ms.clients[2])
            rl = self.relayout
            m.submodules.relayout = rl
            wiring.connect(m, cp.relayout_desc, rl.desc)
            wiring.connect(m, rl.status, cp.relayout_status)
            # the relayout unit borrows the DMA engine and the initiator while it runs
            share_command_port(m, rl.busy, (cp.dma_desc, cp.dma_status), (rl.dma_desc, rl.dma_status),
                               dma.desc, dma.status)
            share_command_port(m, rl.busy, (cp.link_cmd, cp.link_status),
                               (rl.link_cmd, rl.link_status), lk.cmd, lk.status)
            for block in (lk, rl):
                m.d.comb += [block.my_id.eq(cp.link_my_id), block.n_dimms.eq(cp.link_n_dimms),
                             block.window_base.eq(cp.window_base),
                             block.window_limit.eq(cp.window_limit)]
            m.d.comb += [rt.my_id.eq(cp.link_my_id), rt.n_dimms.eq(cp.link_n_dimms)]
            forward_stream(m, lk.tx, rt.ins[LOCAL])
            forward_stream(m, rt.outs[LOCAL], lk.rx)
            for side, port in (("left", LEFT), ("right", RIGHT)):
                forward_stream(m, rt.outs[port], getattr(self, f"link_{side}_tx"))
                forward_stream(m, getattr(self, f"link_{side}_rx"), rt.ins[port])
        # DRAM counters reach the registers as coherent snapshots through a small asynchronous
        # FIFO (pushed whenever it has room, the latest popped one is held: a few cycles old);
        # the policy is quasi-static (privileged, changed only while idle): two-flop synchroniser
        counters = ("row_hits", "row_misses", "refreshes")
        snap = fifo.AsyncFIFO(width=32 * len(counters), depth=4, w_domain="dram", r_domain="sync")
        m.submodules.counter_snapshots = snap
        held = Signal(32 * len(counters))
        m.d.comb += [snap.w_data.eq(Cat(getattr(ms, n) for n in counters)), snap.w_en.eq(snap.w_rdy),
                     snap.r_en.eq(1)]
        with m.If(snap.r_rdy):
            m.d.sync += held.eq(snap.r_data)
        for i, n in enumerate(counters):
            m.d.comb += getattr(cp, n).eq(held[32 * i:32 * (i + 1)])
        m.submodules.policy_sync = cdc.FFSynchronizer(cp.policy, ms.policy, o_domain="dram")
        for name in CORE_PHY_PORTS:
            if name == "dq_rd":
                m.d.comb += ms.dq_rd.eq(self.dq_rd)
            else:
                m.d.comb += getattr(self, name).eq(getattr(ms, name))
        return m


def ndp_core_from_config(config_path: str | None = None, **params) -> NdpCore:
    """``NdpCore`` for the DRAM of a TOML config (default DDR4-3200): a factory with JSON-able
    arguments, for benches and builds."""
    org, timing = load_dram_config(config_path)
    return NdpCore(org, timing, **params)


def silenced_ndp_core(config_path: str | None = None, **params) -> NdpCore:
    """``ndp_core_from_config`` for a core built only for its parts (layouts, parameters), never
    elaborated whole: no ``UnusedElaboratable`` warnings for it or its blocks."""
    core = ndp_core_from_config(config_path, **params)
    for part in (core, core.memory, core.memory.controller, core.engine, core.streamer, core.dma,
                 core.feeder, core.writer, core.act, core.act.unit, core.cp, core.link,
                 core.router, core.relayout):
        if part is not None:
            part._MustUse__silence = True
    return core


def ndp_core_verilog(config_path: str | None = None, name: str = "ndp_core", **params) -> str:
    """Verilog of the core with the GEMV units and the streamer's ring columns as instances of
    one ``gemv_unit`` and one ``ring_column`` module (see ``hw.gemv.datapath.gemv_datapath_verilog``)."""
    from amaranth.back import verilog
    core = ndp_core_from_config(config_path, hierarchical=True, **params)
    return replicated_verilog(core.engine, core.streamer) + verilog.convert(core, name=name)
