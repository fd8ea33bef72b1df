"""The structure of one NDP core as the performance model sees it, taken from the hardware description.

:class:`CoreStructure` gathers, for a :class:`~ndpdimm.cosim.backend.CoreConfig`, every
number the model uses that is not fitted: the DRAM's organisation and timing converted to
NDP cycles (peak burst rate, tRFC, tREFI, postponed refreshes), the 64 KiB span a bank's
rows form in the default address map, the streamer's ring, the activation unit's reduction
tree, the slot cycles of each dtype, and the RTL constants the blocks are built with
(``BURST_BYTES``, the SRAM word, the DMA's outstanding requests, the streamer's request
lanes), imported from the ``hw/`` modules that define them rather than restated. It models
no cycles itself; the parts of ``cosim/model/perf/`` read it.
"""

from dataclasses import dataclass

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.hw.activation.sequencer import SRAM_WORD_BYTES
from ndpdimm.hw.formats import NDP_CLOCK_HZ, Dtype, serial_digits, slot_cycles
from ndpdimm.hw.memory.address_map import AddressMap
from ndpdimm.hw.memory.dma import MAX_OUTSTANDING
from ndpdimm.hw.memory.port import BURST_BYTES
from ndpdimm.hw.memory.weight_streamer import INDEX_ENTRY_BYTES, REQUEST_LANES

__all__ = ["CoreStructure", "BURST_BYTES", "SRAM_WORD_BYTES", "DMA_OUTSTANDING", "ISSUE_PER_CYCLE",
           "INDEX_ENTRIES_PER_WORD", "MAX_PAIRS", "SlotTiming"]

#: Bursts the core's DMA engine keeps in flight (``NdpCore``'s ``dma_outstanding``).
DMA_OUTSTANDING = MAX_OUTSTANDING
#: Bursts the weight streamer issues per cycle at most: one per request lane.
ISSUE_PER_CYCLE = REQUEST_LANES
#: Index-list entries in one SRAM word: the streamer's pre-scan checks one word a cycle.
INDEX_ENTRIES_PER_WORD = SRAM_WORD_BYTES // INDEX_ENTRY_BYTES
#: (rank, bank group) pairs a 64 KiB span spreads over in the default address map (4 ranks x
#: 2 bank groups): the rows one span opens, at most.
MAX_PAIRS = 8


@dataclass(frozen=True)
class SlotTiming:
    """The engine's timing of one dtype: multiplier digits ``D``, reducer lanes ``L`` and
    cycles per slot ``P`` (``hw/formats.py``)."""
    digits: int
    lanes: int
    slot: int


@dataclass(frozen=True, eq=False)
class CoreStructure:
    """What the model takes from the configuration and the hardware description (see the
    module docstring); ``CoreStructure.of(config)`` builds it."""
    config: CoreConfig
    org: object                   # DramOrganization
    timing: object                # DramTiming
    #: peak weight bursts per NDP cycle over all ranks
    burst_rate: float
    #: a refresh's tRFC, the refresh interval and the refreshes a rank may postpone
    trfc: float
    trefi: float
    postponed: int
    #: the streamer's ring in DOT chunks (4 beats each)
    ring_chunks: int
    #: SRAM words per 64 B burst (the DMA moves one SRAM word a cycle)
    words_per_burst: int
    #: depth of the activation unit's reduction tree
    tree: int
    #: (rank, bank group) pairs a span opens rows in
    pairs: int
    banks: int
    #: bursts in one 64 KiB span: one row of every rank and bank group of one bank
    span_bursts: int
    address_map: AddressMap
    slots: dict               # Dtype -> SlotTiming

    @classmethod
    def of(cls, config: CoreConfig) -> "CoreStructure":
        org, t = config.dram()
        ns = 1e9 / NDP_CLOCK_HZ                                  # ns per NDP cycle
        dram = t.tCK_ns / ns                                     # NDP cycles per DRAM cycle
        return cls(
            config=config, org=org, timing=t,
            burst_rate=org.ranks / (t.tBL * dram),
            trfc=t.tRFC * dram, trefi=t.tREFI * dram, postponed=t.max_postponed_refs,
            ring_chunks=max(config.ring_beats // 4, 1),
            words_per_burst=BURST_BYTES // SRAM_WORD_BYTES,
            tree=max(config.act_lanes - 1, 0).bit_length(),
            pairs=min(MAX_PAIRS, org.ranks * org.bank_groups),
            banks=org.banks_per_group,
            span_bursts=org.ranks * org.bank_groups * org.bursts_per_row,
            address_map=AddressMap(org),
            slots={d: SlotTiming(serial_digits(d, config.radix_bits), d.info.lanes,
                                 slot_cycles(d, config.radix_bits)) for d in Dtype})

    @property
    def reaches_dram_bound(self) -> bool:
        """Whether the engine can consume weights faster than the DRAM gives them in every
        dtype (dense, batch 1): only then do descriptors run on the DRAM-bound path."""
        peak = self.burst_rate * BURST_BYTES
        return all(self.config.n_units * d.info.lanes * d.info.elem_bits / 8 / s.slot >= peak
                   for d, s in self.slots.items())

    def span_bank(self, span: int) -> int:
        """The bank a 64 KiB span of the weight layout lies in: the address map's bank field
        with its row rotation (``hw/memory/address_map.py``)."""
        return int(self.address_map.field("bank", span * self.span_bursts * BURST_BYTES))
