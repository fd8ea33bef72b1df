"""DRAM controller front end: host/NDP arbitration, address decode and one scheduler per rank.

Two request streams enter - ``host`` (pass-through reads/writes from the
memory channel) and ``ndp`` (the NDP core's weight streamer and DMA) - each
carrying a 64 B burst address and a tag. Every cycle at most one request is
taken: the arbiter considers the head of each stream whose target rank's
queue has room, and picks by ``policy``:

* ``"host_first"``: host whenever it can go (NDP fills the gaps), and host
  requests are *urgent* inside the rank schedulers (served before NDP row
  hits, allowed to close NDP rows);
* ``"ndp_first"``: the reverse;
* ``"fair"``: alternate when both can go (round robin), plain FR-FCFS inside.

Priority at the door alone does not work: admitted host requests are row
misses that FR-FCFS would leave behind a stream of NDP row hits.

The address is decoded with the same field layout as ``AddressMap`` (the
Python model and the runtime use the identical function), and the request is
queued in its rank's ``RankScheduler``; ranks schedule independently (each has
its own bus), so four ranks stream in parallel. One request per cycle is ample:
four ranks need one burst every 4 DRAM cycles each.

Outputs per rank: the command issued this cycle (``cmd[r]``) and the data
marks (``data_valid``/``data_write``/``data_tag``), where the tag's top bit
says which stream the request came from (1 = host). Runs in the DRAM command
clock, like the schedulers. Head-of-line: a stream whose head targets a full
rank queue waits even if later requests could go elsewhere.
"""

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .address_map import DEFAULT_SCHEME, AddressMap
from .dram_config import DramOrganization, DramTiming
from .rank_scheduler import RankScheduler, command_layout

__all__ = ["DramController", "POLICIES", "controller_request_layout"]

POLICIES = ("host_first", "ndp_first", "fair")


def controller_request_layout(org: DramOrganization, tag_bits: int) -> data.StructLayout:
    burst_bits = (org.capacity_bytes // org.burst_bytes - 1).bit_length()
    return data.StructLayout({"write": 1, "burst": burst_bits, "tag": tag_bits})


class DramController(wiring.Component):
    """Host/NDP arbiter + address decode + per-rank schedulers (see module docstring)."""

    def __init__(self, org: DramOrganization, timing: DramTiming, scheme: str = DEFAULT_SCHEME,
                 policy: str = "fair", queue_depth: int = 8, tag_bits: int = 8,
                 stagger_refresh: bool = True):
        if policy not in POLICIES:
            raise ValueError(f"unknown arbitration policy {policy!r}: expected one of "
                             f"{', '.join(POLICIES)}")
        self.org, self.timing, self.policy = org, timing, policy
        self.address_map = AddressMap(org, scheme)
        self.queue_depth, self.tag_bits = queue_depth, tag_bits
        self.stagger_refresh = stagger_refresh
        self.req_layout = controller_request_layout(org, tag_bits)
        cmd = command_layout(org, tag_bits + 1)
        super().__init__({
            "host": In(stream.Signature(self.req_layout)),
            "ndp": In(stream.Signature(self.req_layout)),
            "cmd": Out(data.ArrayLayout(cmd, org.ranks)),
            "data_valid": Out(org.ranks),
            "data_write": Out(org.ranks),
            "data_tag": Out(data.ArrayLayout(tag_bits + 1, org.ranks)),
        })

    def elaborate(self, platform):
        m = Module()
        org, t = self.org, self.timing
        slices = self.address_map.field_slices()
        scheds = []
        for r in range(org.ranks):
            phase = (r * t.tREFI // org.ranks) if self.stagger_refresh else 0
            s = RankScheduler(org, t, self.queue_depth, self.tag_bits + 1, refresh_phase=phase)
            m.submodules[f"rank{r}"] = s
            scheds.append(s)

        def field(burst, name):
            lsb, width = slices[name]
            lsb -= slices["offset"][1]             # burst address has no offset bits
            return burst[lsb:lsb + width]

        def rank_of(req):
            return field(req.payload.burst, "rank") if org.ranks > 1 else 0

        rank_ready = Signal(org.ranks)
        m.d.comb += rank_ready.eq(Cat(s.req.ready for s in scheds))
        host_can = self.host.valid & rank_ready.bit_select(rank_of(self.host), 1)
        ndp_can = self.ndp.valid & rank_ready.bit_select(rank_of(self.ndp), 1)
        last_host = Signal()                          # fair: who went last
        pick_host = Signal()
        if self.policy == "host_first":
            m.d.comb += pick_host.eq(host_can)
        elif self.policy == "ndp_first":
            m.d.comb += pick_host.eq(host_can & ~ndp_can)
        else:
            m.d.comb += pick_host.eq(host_can & (~ndp_can | ~last_host))
        pick_ndp = ndp_can & ~pick_host
        with m.If(pick_host | pick_ndp):
            m.d.sync += last_host.eq(pick_host)
        m.d.comb += [self.host.ready.eq(pick_host), self.ndp.ready.eq(pick_ndp)]

        chosen = Mux(pick_host, self.host.payload.as_value(), self.ndp.payload.as_value())
        chosen = self.req_layout(chosen)
        target = Mux(pick_host, rank_of(self.host), rank_of(self.ndp))
        for r, s in enumerate(scheds):
            p = s.req.payload
            m.d.comb += [
                s.req.valid.eq((pick_host | pick_ndp) & (target == r)),
                p.write.eq(chosen.write),
                p.bank_group.eq(field(chosen.burst, "bank_group")),
                p.bank.eq(field(chosen.burst, "bank")),
                p.row.eq(field(chosen.burst, "row")),
                p.column.eq(field(chosen.burst, "column")),
                p.tag.eq(Cat(chosen.tag, pick_host)),
                p.urgent.eq({"host_first": pick_host, "ndp_first": ~pick_host,
                             "fair": 0}[self.policy]),
                self.cmd[r].eq(s.cmd),
                self.data_valid[r].eq(s.data_valid),
                self.data_write[r].eq(s.data_write),
                self.data_tag[r].eq(s.data_tag),
            ]
        return m
