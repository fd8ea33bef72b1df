"""What one MoE expert costs in each TriMoE domain: GPU (hit / miss), AMX CPU, NDP-DIMM.

An expert is a SwiGLU MLP of ``3 H F`` weights (``sw/scenarios/trimoe/catalog.py``,
:class:`MoeShape`); ``t`` tokens routed to it do ``6 H F t`` flops and read
its ``3 H F x 2`` bytes of BF16/FP16 weights once.

* **GPU, resident** (a hit): the expert's three GEMMs as the GPU model times
  them (``sw/scenarios/gpu.py``): ``gate`` and ``up`` ``[F x H]`` and ``down``
  ``[H x F]`` with ``t`` tokens each (three kernels, as the profiled Mixtral
  layer's ``w1``, ``w3``, ``w2``), on the measured fit the hardware file's
  ``[gpu] measured`` names (an H100 SXM table carried to the PCIe card through
  the datasheets), or on the roofline where it names none.
* **GPU, miss**: the weights come from host memory over PCIe; the copy is
  pipelined with the compute, so ``max(GPU compute, PCIe transfer, host DRAM
  read)`` plus the PCIe latency.
* **CPU** (AMX): ``overhead + max(flops / (AMX peak x eff(t)), host DRAM
  read)``, the same efficiency curve with the CPU's parameters.
* **Host DRAM read** depends on the expert's layout in the NDP-DIMMs (which
  are the host's memory): *striped* experts (4 KiB blocks interleaved over
  all DIMMs, as the host address map spreads them) read at the full
  ``channels x channel bandwidth x efficiency``; a *localized* expert (all on
  one DIMM, the NDP-friendly layout) reads at one channel's bandwidth.
* **NDP**: the expert localized on a DIMM, computed by its core: the cycles
  are *measured through the driver API* on the chosen backend
  (:func:`~ndpdimm.sw.kernels.expert.ndp_expert_cost`: up, gate, SiLU x up,
  down for 1..max_batch tokens, several weight passes beyond), with and
  without background host reads at a few spacings (the contended runs on an
  expert at most ``CONTENTION_FFN`` wide: each host read is a driver call);
  :meth:`DomainCosts.ndp` scales the expert's time by the measured slowdown
  ratio at the striped-read bandwidth the DIMM serves meanwhile (per-DIMM GB/s = striped bytes read by CPU/GPU / DIMMs /
  layer time). An expert in striped layout must first be gathered into the
  DIMM (relayout, below).
* **Relayout and moves over DIMM-Link**, also measured through the driver on
  the model backend's DIMM-Link fabric (``cosim/link/model.py``; the RTL
  cores of a linked system run only in the cocotb bench): RELAYOUT striped
  -> localized and back for a tensor of a few blocks over ``D`` DIMMs
  (fitted per block and scaled to the expert's blocks), and a DIMM-to-DIMM
  move of a localized expert as blocks of DMA in + LINK_SEND on the source
  and DMA out on the receiver (per-block time the slower of the two queues).
  With a bit-error rate (``link_ber``) the fabric NAKs and replays corrupted
  frames as the RTL link layer does: the relayouts and moves take longer, and
  the links' error counters (CRC errors, NAKs, replays, replay cycles) are
  kept with the costs, so a report can tell a bad link (errors, replay time)
  from a slow one (no errors).

Everything NDP-side records its backend, so each scenario figure traces to
RTL cycles or the calibrated model.
"""

import dataclasses

import numpy as np

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.system import NdpSystem, relayout_round_trip_cycles
from ndpdimm.sw.kernels.expert import ExpertCost, ndp_expert_cost
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.trimoe.catalog import MoeShape, TriMoeHardware

__all__ = ["DomainCosts", "LinkCosts", "measure_domain_costs", "measure_link_costs",
           "HOST_SPACINGS", "CONTENTION_FFN", "BLOCK_BYTES", "ELEM"]

ELEM = 2                        # BF16 / FP16 weights
BLOCK_BYTES = 4096              # striping block of the host address map
#: background host-read spacings (NDP cycles between 64 B reads) the contention is measured at:
#: about 0.06, 0.26 and 1.0 GB/s per DIMM achieved. The backends serve one host access at a
#: time, so about 1 GB/s per DIMM is the most a measurement can drive (the CPU streaming
#: striped experts at its full 197 GB/s would put 12.3 GB/s on each of 16 DIMMs); above the
#: densest point the measured slowdown is held (the model's penalty saturates well below it)
HOST_SPACINGS = (1000, 250, 64)
#: widest expert (intermediate size) the contention runs use (DeepSeek-V2's and Qwen3's 1536)
CONTENTION_FFN = 1536


@dataclasses.dataclass(frozen=True)
class LinkCosts:
    """DIMM-Link transfers of one expert, seconds (measured, see the module docstring)."""
    to_localized: float
    to_striped: float
    move_fixed: float           # seconds of a move: move_fixed + move_per_hop x hops
    move_per_hop: float
    dimms: int
    block_bytes: int
    samples: dict
    backend: str = "model (cosim/link/model.py)"
    ber: float = 0.0
    counters: dict = dataclasses.field(default_factory=dict)   # summed over the chain's links

    @property
    def replay_share(self) -> float:
        """Share of the links' busy time lost to replays in the measurements."""
        wire = self.counters.get("wire_cycles", 0.0) + self.counters.get("replay_cycles", 0.0)
        return self.counters.get("replay_cycles", 0.0) / wire if wire else 0.0

    def move(self, hops: int) -> float:
        if isinstance(hops, bool) or not isinstance(hops, (int, np.integer)) or not 1 <= hops < self.dimms:
            raise ValueError(f"hops must be 1..{self.dimms - 1}, got {hops!r}")
        return self.move_fixed + self.move_per_hop * hops


class DomainCosts:
    """Per-expert times in every domain for ``model`` on ``hw`` (see the module docstring).

    ``ndp``: the uncontended :class:`ExpertCost`; ``contended``: ExpertCosts measured with
    background host reads (their ``host_spacing`` set); ``link``: :class:`LinkCosts`.
    """

    def __init__(self, model: MoeShape, hw: TriMoeHardware, ndp: ExpertCost, contended=(),
                 link: LinkCosts | None = None, reference: ExpertCost | None = None):
        self.model, self.hw, self.ndp_cost, self.link = model, hw, ndp, link
        self.expert_bytes = model.expert_bytes(ELEM)
        self.flops_per_token = 2.0 * model.expert_params
        c = hw.cpu
        self.gpu_model = GpuModel(hw.gpu)
        self.pcie = hw.pcie.gbytes_per_s * 1e9
        self.host_striped = c.memory_bandwidth_gbs * 1e9 * c.memory_efficiency
        self.host_localized = c.channel_bandwidth_gbs * 1e9 * c.memory_efficiency
        self.cpu_flops = c.amx_bf16_tflops * 1e12
        # the expert measured under background host reads: (per-DIMM host GB/s, ExpertCost),
        # against ``reference`` measured without (the expert itself unless a narrower one was
        # used for the contention runs, see measure_domain_costs)
        self.reference = ndp if reference is None else reference
        points = [(0.0, self.reference)]
        for cost in contended:
            if cost.host_spacing is None:
                raise ValueError("contended costs must have a host_spacing")
            if (cost.hidden, cost.ffn) != (self.reference.hidden, self.reference.ffn):
                raise ValueError("contended costs must have the reference expert's shape")
            points.append((cost.host_read_gbs, cost))
        points.sort(key=lambda p: p[0])
        self.contention_points = tuple(points)

    def with_hardware(self, hw: TriMoeHardware) -> "DomainCosts":
        """The same measured NDP and DIMM-Link costs on other GPU / PCIe / CPU figures (a
        sensitivity point); the NDP-DIMMs themselves must be the same, since those costs were
        measured for them."""
        if hw.ndp != self.hw.ndp:
            raise ValueError(f"with_hardware keeps the measured NDP costs: the NDP-DIMMs must stay "
                             f"{self.hw.ndp}, got {hw.ndp}")
        return DomainCosts(self.model, hw, self.ndp_cost, [c for _, c in self.contention_points[1:]],
                           self.link, self.reference)

    # ---- GPU and CPU ------------------------------------------------------------------------
    def gpu_compute(self, tokens: int) -> float:
        """The expert's three GEMMs with ``tokens`` tokens on the GPU (module docstring)."""
        if tokens < 0:
            raise ValueError(f"tokens must be >= 0, got {tokens!r}")
        g, h, f = self.gpu_model, self.model.hidden, self.model.expert_ffn
        return 2 * g.linear(tokens, f, h).seconds + g.linear(tokens, h, f).seconds

    def host_read(self, striped: bool) -> float:
        return self.expert_bytes / (self.host_striped if striped else self.host_localized)

    def pcie_transfer(self) -> float:
        return self.hw.pcie.latency_us * 1e-6 + self.expert_bytes / self.pcie

    def gpu(self, tokens: int, resident: bool, striped: bool = True) -> float:
        """A resident expert's time, or a miss's (weights over PCIe, pipelined)."""
        if resident:
            return self.gpu_compute(tokens)
        return max(self.gpu_compute(tokens), self.pcie_transfer(), self.host_read(striped))

    def cpu(self, tokens: int, striped: bool = True) -> float:
        c = self.hw.cpu
        return c.kernel_overhead_us * 1e-6 + max(
            self.flops_per_token * tokens / (self.cpu_flops * c.efficiency_at(tokens)),
            self.host_read(striped))

    # ---- NDP -----------------------------------------------------------------------------------
    def contention(self, tokens: int, host_gbs_per_dimm: float) -> float:
        """Slowdown of the NDP expert with ``tokens`` while its DIMM serves this much striped host
        reads: the measured ratio contended / uncontended, linear between the bracketing
        host-read rates (flat beyond the densest)."""
        base = self.reference.cycles(tokens)
        if not base:
            return 1.0
        xs = [p[0] for p in self.contention_points]
        ys = [p[1].cycles(tokens) / base for p in self.contention_points]
        return float(np.interp(host_gbs_per_dimm, xs, ys))

    def ndp(self, tokens: int, host_gbs_per_dimm: float = 0.0) -> float:
        """The expert localized on a DIMM, ``tokens`` routed to it, the DIMM serving
        ``host_gbs_per_dimm`` of striped host reads meanwhile."""
        return self.ndp_cost.seconds(tokens) * self.contention(tokens, host_gbs_per_dimm)

    def relayout(self, to_localized: bool) -> float:
        if self.link is None:
            raise ValueError("no link costs measured: pass link= to DomainCosts")
        return self.link.to_localized if to_localized else self.link.to_striped

    def move(self, hops: int) -> float:
        """Moving a localized expert ``hops`` DIMMs along the chain."""
        if self.link is None:
            raise ValueError("no link costs measured: pass link= to DomainCosts")
        return self.link.move(hops)

    def as_dict(self) -> dict:
        return {"expert_bytes": self.expert_bytes, "ndp_backend": self.ndp_cost.backend,
                "ndp_samples": [list(s) for s in self.ndp_cost.samples],
                "contention_reference": [self.reference.hidden, self.reference.ffn],
                "contention": [{"host_gbs_per_dimm": g, "host_spacing": c.host_spacing,
                                "samples": [list(p) for p in c.samples]}
                               for g, c in self.contention_points],
                "link": None if self.link is None else dataclasses.asdict(self.link),
                "example_seconds": {t: {"gpu_hit": self.gpu(t, True), "gpu_miss": self.gpu(t, False),
                                        "cpu": self.cpu(t), "ndp": self.ndp(t)}
                                    for t in (1, 16, 64, 256)}}


def _fit_per_block(points) -> tuple:
    n, c = np.array([p[0] for p in points], float), np.array([p[1] for p in points], float)
    slope, fixed = np.polyfit(n, c, 1)
    return float(slope), float(fixed)


def measure_link_costs(expert_bytes: int, dimms: int, config: CoreConfig,
                       block_counts=(2, 4), ber: float = 0.0, seed: int = 0) -> LinkCosts:
    """RELAYOUT and move costs of one expert of ``expert_bytes`` over ``dimms`` DIMMs (model
    backend, DIMM-Link fabric with bit errors at ``ber``), fitted to a line per block from
    ``block_counts`` x ``dimms`` blocks and scaled to the expert's blocks; the links' error
    counters of the measurements come along."""
    config = dataclasses.replace(config, link=True)
    blocks = -(-expert_bytes // BLOCK_BYTES)
    system = NdpSystem(dimms, "model", config, functional=False, link_ber=ber, link_seed=seed)
    try:
        there, back = [], []
        move = {h: [] for h in sorted({1, dimms - 1})}
        for k in block_counts:
            n = k * dimms
            a, b = relayout_round_trip_cycles(dimms, BLOCK_BYTES, n, None, system=system)
            there.append((n, a))
            back.append((n, b))
            for h in move:
                move[h].append((k, _move_blocks(system, k, h)))
        counters = {}
        for link in system.link_counters().values():
            for name, v in link.items():
                counters[name] = counters.get(name, 0) + v
    finally:
        system.close()
    fits = {"to_localized": _fit_per_block(there), "to_striped": _fit_per_block(back),
            **{f"move_{h}_hops": _fit_per_block(p) for h, p in move.items()}}

    def seconds(name):
        slope, fixed = fits[name]
        return (fixed + slope * blocks) / NDP_CLOCK_HZ

    near, far = min(move), max(move)
    per_hop = (seconds(f"move_{far}_hops") - seconds(f"move_{near}_hops")) / (far - near) \
        if far > near else 0.0
    return LinkCosts(seconds("to_localized"), seconds("to_striped"),
                     seconds(f"move_{near}_hops") - per_hop * near, per_hop, dimms, BLOCK_BYTES,
                     {"to_localized": there, "to_striped": back,
                      **{f"move_{h}_hops": p for h, p in move.items()},
                      "fits_cycles_per_block_fixed": fits}, ber=ber, counters=counters)


def _move_blocks(system: NdpSystem, n_blocks: int, hops: int) -> int:
    """Cycles to move ``n_blocks`` blocks from the first DIMM's DRAM to DIMM ``hops``'s: the
    source's DMA in + LINK_SEND per block and the receiver's DMA out per block run on two
    queues at once; the slower queue sets the time."""
    src, dst = system[0], system[hops]
    s_dram, s_sram = src.alloc(n_blocks * BLOCK_BYTES), src.alloc_sram(BLOCK_BYTES)
    d_dram, d_sram = dst.alloc(n_blocks * BLOCK_BYTES), dst.alloc_sram(BLOCK_BYTES)
    try:
        send = []
        for k in range(n_blocks):
            send += [src.dma_descriptor(0, s_dram.addr + k * BLOCK_BYTES, s_sram.addr, BLOCK_BYTES),
                     src.link_descriptor(hops, d_sram.addr, s_sram.addr, BLOCK_BYTES)]
        t_src = sum(c.cycles for c in src.run(send, "move: send"))
        store = [dst.dma_descriptor(1, d_dram.addr + k * BLOCK_BYTES, d_sram.addr, BLOCK_BYTES)
                 for k in range(n_blocks)]
        t_dst = sum(c.cycles for c in dst.run(store, "move: store"))
    finally:
        src.free(s_dram)
        src.free(s_sram)
        dst.free(d_dram)
        dst.free(d_sram)
    return max(t_src, t_dst)


def measure_domain_costs(model: MoeShape, hw: TriMoeHardware, dimm: Dimm, seed: int = 0,
                         spacings=HOST_SPACINGS, link: bool = True, link_ber: float = 0.0) -> DomainCosts:
    """Measure the NDP expert (with and without host reads at ``spacings``) on ``dimm`` and the
    DIMM-Link costs for the hardware's NDP-DIMMs (``ndp.dimms`` of ``hw``) (``link``; bit errors at ``link_ber``), and
    build the cost model."""
    mb = dimm.config.max_batch
    batches = tuple(sorted({1, max(1, mb // 4), mb}))
    base = ndp_expert_cost(model.hidden, model.expert_ffn, dimm, batches, seed=seed)
    # every host read is one driver call: the contention runs use an expert at most
    # CONTENTION_FFN wide (the slowdown is a ratio per pass; its width only scales the pass)
    ffn = min(model.expert_ffn, CONTENTION_FFN)
    reference = base if ffn == model.expert_ffn else ndp_expert_cost(model.hidden, ffn, dimm,
                                                                     batches, seed=seed)
    contended = [ndp_expert_cost(model.hidden, ffn, dimm, batches, seed=seed, host_spacing=s)
                 for s in spacings]
    links = measure_link_costs(model.expert_bytes(ELEM), hw.ndp.dimms, dimm.config, ber=link_ber,
                               seed=seed) if link else None
    return DomainCosts(model, hw, base, contended, links, reference)
