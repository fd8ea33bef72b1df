"""The GEMV datapath fed from DRAM: memory system, SRAM, weight streamer, DMA engine and GEMV engine.

This is the NDP core minus its command processor and activation unit (which
will drive these ports): every block here is the real RTL, wired as on the chip.

::

    host port ----------------------------\\
                                            MemorySystem (CDC + DRAM controller) -- PHY ports (dram clock)
    WeightStreamer.mem (client 0) --------/ /
    DmaEngine.mem      (client 1) ---------/
    WeightStreamer.sram -> SRAM port 0 (index lists)
    DmaEngine.sram      -> SRAM port 1
    sram (external)     -> SRAM port 2 (activations / results / host, later the command processor)
    WeightStreamer.beats -> GemvEngine.weights

Ports (1 GHz ``sync`` domain unless noted): ``host`` (memory-port server, one
lane); ``streamer_desc``/``streamer_status``, ``dma_desc``/``dma_status``;
``gemv_cmd``, ``gemv_acts``, ``gemv_results`` and the engine's
``gemv_busy``/``gemv_done``/``gemv_error``; ``sram`` (an SRAM client port
into the datapath); the PHY ports of ``MemorySystem`` (``dram`` domain) and
performance counters (``bursts_read``, ``streamer_busy_cycles``,
``streamer_data_wait_cycles``, ``row_hits``, ``row_misses``, ``refreshes``).

Cycle behaviour is that of the parts: the streamer keeps up to ``ring_beats``
weight beats in flight ahead of the engine, so a DRAM-bound GEMV (batch 1)
runs at the DRAM's pace and a compute-bound one (batch >= 4 in FP16) at the
engine's.
"""

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.gemv.engine import GemvEngine
from ndpdimm.hw.hierarchy import replicated_verilog
from ndpdimm.hw.memory.controller import RANK_QUEUE_DEPTH, forward_phy, phy_members
from ndpdimm.hw.memory.dma import MAX_OUTSTANDING, DmaEngine
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import connect_memory_client, forward_stream, memory_server_signature
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry
from ndpdimm.hw.memory.system import MemorySystem
from ndpdimm.hw.memory.weight_streamer import REQUEST_LANES, WeightStreamer, connect_consumer

__all__ = ["GemvDatapath", "gemv_datapath_from_config", "gemv_datapath_verilog"]

STREAMER_CLIENT, DMA_CLIENT = 0, 1




class GemvDatapath(wiring.Component):
    """See module docstring. Parameters: DRAM ``org``/``timing``; engine ``n_units``,
    ``max_batch``, ``radix_bits``; streamer ``ring_beats``; SRAM ``sram_size`` and
    ``sram_banks``; memory-system ``policy``, ``refresh``, ``queue_depth``; DMA
    ``dma_outstanding``."""

    def __init__(self, org, timing, *, n_units=16, max_batch=16, radix_bits=1, ring_beats=8,
                 sram_size=131072, sram_banks=16, policy="fair", refresh="aligned", queue_depth=RANK_QUEUE_DEPTH,
                 dma_outstanding=MAX_OUTSTANDING, hierarchical=False):
        self.org, self.timing = org, timing
        self.memory = MemorySystem(org, timing, n_clients=2, lanes=REQUEST_LANES, policy=policy,
                                   queue_depth=queue_depth, refresh=refresh)
        self.sram_geometry = SramGeometry(sram_size, sram_banks, 256, 3)
        self.sram_block = BankedSram(sram_size, sram_banks, 256, 3)
        self.engine = GemvEngine(n_units=n_units, max_batch=max_batch, radix_bits=radix_bits,
                                 hierarchical=hierarchical)
        self.streamer = WeightStreamer(n_units=n_units, ring_beats=ring_beats, org=org,
                                       sram=self.sram_geometry, index_bits=self.engine.index_bits,
                                       step_bits=self.engine.step_bits, hierarchical=hierarchical)
        self.dma = DmaEngine(capacity_bytes=org.capacity_bytes, ranks=org.ranks,
                             sram_size_bytes=sram_size, max_outstanding=dma_outstanding)
        ms, e = self.memory, self.engine
        super().__init__({
            "host": Out(memory_server_signature(org.capacity_bytes, org.ranks, 1)),
            "streamer_desc": In(stream.Signature(self.streamer.descriptor_layout)),
            "streamer_status": Out(stream.Signature(self.streamer.status_layout)),
            "dma_desc": In(stream.Signature(self.dma.desc.payload.shape())),
            "dma_status": Out(stream.Signature(self.dma.status.payload.shape())),
            "gemv_cmd": In(stream.Signature(e.cmd_layout)),
            "gemv_acts": In(stream.Signature(e.acts.payload.shape())),
            "gemv_results": Out(stream.Signature(e.result_layout)),
            "gemv_busy": Out(1),
            "gemv_done": Out(1),
            "gemv_error": Out(1),
            "sram": In(self.sram_geometry.port_signature),
            # DRAM side (``dram`` clock domain)
            **phy_members(org, ms.controller.cmd_layout, policy),
            # streamer counters (1 GHz)
            "bursts_read": Out(32),
            "streamer_busy_cycles": Out(32),
            "streamer_data_wait_cycles": Out(32),
        })

    def elaborate(self, platform):
        m = Module()
        ms, sram, st, dma, e = self.memory, self.sram_block, self.streamer, self.dma, self.engine
        m.submodules.memory = ms
        m.submodules.sram = sram
        m.submodules.streamer = st
        m.submodules.dma = dma
        m.submodules.engine = e

        connect_memory_client(m, st.mem, ms.clients[STREAMER_CLIENT])
        connect_memory_client(m, dma.mem, ms.clients[DMA_CLIENT])
        wiring.connect(m, st.sram, sram.ports[0])
        wiring.connect(m, dma.sram, sram.ports[1])
        wiring.connect(m, wiring.flipped(self.sram), sram.ports[2])
        connect_consumer(m, st, e.weights, e.weight_committed)

        forward_stream(m, self.host.req[0], ms.host.req[0])
        for r in range(self.org.ranks):
            forward_stream(m, ms.host.resp[r], self.host.resp[r])
        forward_stream(m, self.streamer_desc, st.desc)
        forward_stream(m, st.status, self.streamer_status)
        forward_stream(m, self.dma_desc, dma.desc)
        forward_stream(m, dma.status, self.dma_status)
        forward_stream(m, self.gemv_cmd, e.cmd)
        forward_stream(m, self.gemv_acts, e.acts)
        forward_stream(m, e.results, self.gemv_results)

        forward_phy(m, self, ms)
        m.d.comb += [
            self.gemv_busy.eq(e.busy), self.gemv_done.eq(e.done), self.gemv_error.eq(e.error),
            self.bursts_read.eq(st.bursts_read), self.streamer_busy_cycles.eq(st.busy_cycles),
            self.streamer_data_wait_cycles.eq(st.data_wait_cycles),
        ]
        return m


def gemv_datapath_from_config(config_path: str | None = None, **params) -> GemvDatapath:
    """``GemvDatapath`` for the DRAM of a TOML config (default DDR4-3200): a factory with
    JSON-able arguments, for benches and builds."""
    org, timing = load_dram_config(config_path)
    return GemvDatapath(org, timing, **params)


def gemv_datapath_verilog(config_path: str | None = None, name: str = "gemv_datapath",
                          **params) -> str:
    """Verilog of the datapath with the engine's units and the streamer's ring columns as
    instances of one ``gemv_unit`` and one ``ring_column`` module (each emitted once): at 256 units the flat netlist is ~1.1 M lines that Verilator cannot build in
    useful time; this is a few hundred thousand. Same behaviour, same ports."""
    from amaranth.back import verilog
    dp = gemv_datapath_from_config(config_path, hierarchical=True, **params)
    return replicated_verilog(dp.engine, dp.streamer) + verilog.convert(dp, name=name)
