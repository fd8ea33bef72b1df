"""A chain of DIMMs' DIMM-Link blocks for Amaranth-simulator tests (transaction layer, relayout).

Each DIMM: a ``BankedSram``, a ``LinkTransaction`` and a ``LinkRouter``; with
``relayout=True`` also a ``DmaEngine`` and a ``RelayoutUnit`` driving it and
the transaction layer's initiator (as in the core while a RELAYOUT runs). The
links between routers are packet FIFOs whose outputs the testbench can stall
(``stall`` bit ``k`` holds FIFO ``k``, 2 per neighbour pair); the link layer
and PHY below have tests of their own. Each DIMM's DRAM is a
``MemoryPortModel`` (random back-pressure, latency and response order) that
:meth:`Chain.serve_drams` attaches to every memory client of that DIMM.

SRAM ports: 0 link reads, 1 link writes, 2 testbench (:meth:`Chain.tb_port`),
3 DMA (with ``relayout``).
"""

from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import fifo, wiring

from ndpdimm.cosim.dram.port_model import MemoryPortModel
from ndpdimm.hw.link.formats import LinkConfig, packet_beat_layout
from ndpdimm.hw.link.relayout import RelayoutUnit
from ndpdimm.hw.link.router import LEFT, LOCAL, RIGHT, LinkRouter
from ndpdimm.hw.link.transaction import LinkTransaction
from ndpdimm.hw.memory.dma import DmaEngine
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import forward_stream
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry

__all__ = ["Chain", "SRAM_SIZE", "GEOMETRY", "CONFIG", "BEAT", "CAPACITY"]

SRAM_SIZE = 4096
GEOMETRY = SramGeometry(SRAM_SIZE, 4, 256, 3)
CONFIG = LinkConfig(max_payload=128)          # 4 words per packet: transfers span several packets
BEAT = packet_beat_layout()
CAPACITY = load_dram_config()[0].capacity_bytes


class Chain(Elaboratable):
    """``n`` DIMMs in a chain (see module docstring).

    ``windows[i]`` is DIMM ``i``'s protection window ``(base, limit)`` (default the whole
    DIMM); ``dram_kw`` go to every ``MemoryPortModel`` (seeded ``seed + i``)."""

    def __init__(self, n, outstanding=2, response_timeout=1 << 20, *, relayout=False,
                 windows=None, seed=0, **dram_kw):
        self.n = n
        self.relayout = relayout
        self.windows = list(windows) if windows is not None else [(0, CAPACITY)] * n
        ports = 4 if relayout else 3
        self.srams = [BankedSram(SRAM_SIZE, 4, 256, ports) for _ in range(n)]
        self.units = [LinkTransaction(GEOMETRY, CONFIG, outstanding=outstanding, max_dimms=max(n, 2),
                                      response_timeout=response_timeout) for _ in range(n)]
        self.routers = [LinkRouter() for _ in range(n)]
        self.links = [fifo.SyncFIFOBuffered(width=BEAT.size, depth=4) for _ in range(2 * (n - 1))]
        self.stall = Signal(max(len(self.links), 1))
        self.dmas = self.relayouts = []
        if relayout:
            self.dmas = [DmaEngine(sram_size_bytes=SRAM_SIZE) for _ in range(n)]
            self.relayouts = [RelayoutUnit(GEOMETRY) for _ in range(n)]
        self.drams = [MemoryPortModel(seed=seed + i, **dram_kw) for i in range(n)]

    def tb_port(self, i):
        return self.srams[i].ports[2]

    def serve_drams(self, sim):
        """Add the processes that serve every DIMM's memory clients from its DRAM model."""
        for i, dram in enumerate(self.drams):
            clients = [self.units[i].mem] + ([self.dmas[i].mem] if self.relayout else [])
            for client in clients:
                async def serve(ctx, dram=dram, client=client):
                    await dram.serve(ctx, client)
                sim.add_process(serve)

    def elaborate(self, platform):
        m = Module()
        for i, (sram, unit, router) in enumerate(zip(self.srams, self.units, self.routers)):
            m.submodules[f"sram{i}"] = sram
            m.submodules[f"unit{i}"] = unit
            m.submodules[f"router{i}"] = router
            wiring.connect(m, unit.sram_read, sram.ports[0])
            wiring.connect(m, unit.sram_write, sram.ports[1])
            base, limit = self.windows[i]
            m.d.comb += [unit.my_id.eq(i), unit.n_dimms.eq(self.n), router.my_id.eq(i),
                         router.n_dimms.eq(self.n), unit.window_base.eq(base),
                         unit.window_limit.eq(limit)]
            forward_stream(m, unit.tx, router.ins[LOCAL])
            forward_stream(m, router.outs[LOCAL], unit.rx)
            if self.relayout:
                dma, rl = self.dmas[i], self.relayouts[i]
                m.submodules[f"dma{i}"] = dma
                m.submodules[f"relayout{i}"] = rl
                wiring.connect(m, dma.sram, sram.ports[3])
                wiring.connect(m, rl.dma_desc, dma.desc)
                wiring.connect(m, dma.status, rl.dma_status)
                wiring.connect(m, rl.link_cmd, unit.cmd)
                wiring.connect(m, unit.status, rl.link_status)
                m.d.comb += [rl.my_id.eq(i), rl.n_dimms.eq(self.n), rl.window_base.eq(base),
                             rl.window_limit.eq(limit)]
        # Chain ends: nothing comes in; anything sent out is taken (and would be lost).
        for end, side in ((self.routers[0], LEFT), (self.routers[-1], RIGHT)):
            m.d.comb += [end.ins[side].valid.eq(0), end.outs[side].ready.eq(1)]
        for k, link in enumerate(self.links):
            m.submodules[f"link{k}"] = link
            pair, direction = divmod(k, 2)
            src = self.routers[pair].outs[RIGHT] if direction == 0 else self.routers[pair + 1].outs[LEFT]
            dst = self.routers[pair + 1].ins[LEFT] if direction == 0 else self.routers[pair].ins[RIGHT]
            m.d.comb += [link.w_en.eq(src.valid), link.w_data.eq(src.payload), src.ready.eq(link.w_rdy),
                         dst.valid.eq(link.r_rdy & ~self.stall[k]), dst.payload.eq(link.r_data),
                         link.r_en.eq(dst.ready & ~self.stall[k])]
        return m
