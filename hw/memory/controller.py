"""DRAM controller front end: host/NDP arbitration, address decode and one scheduler per rank.

Two request streams enter - ``host`` (pass-through reads/writes from the
memory channel) and ``ndp`` (the NDP core's weight streamer and DMA) - each
carrying a 64 B burst address and a tag. Every cycle at most one request is
taken: the arbiter considers the head of each stream whose target rank's
queue has room, and picks by the ``policy`` input (a run-time setting, so
one build serves every policy; the constructor's ``policy`` is its reset
value; encoding = index in ``POLICIES``, 3 behaves as ``fair``):

* ``"host_first"``: host whenever it can go (NDP fills the gaps), and host
  requests are *urgent* inside the rank schedulers (served before NDP row
  hits, allowed to close NDP rows);
* ``"ndp_first"``: the reverse;
* ``"fair"``: alternate when both can go (round robin), plain FR-FCFS inside.

Priority at the door alone does not work: admitted host requests are row
misses that FR-FCFS would leave behind a stream of NDP row hits.

The address is decoded with the same field layout as
``AddressMap`` (bank rotation included; the Python model and the runtime use the identical function), and the request is
queued in its rank's ``RankScheduler``; ranks schedule independently (each has
its own bus), so four ranks stream in parallel. One request per cycle is ample:
four ranks need one burst every 4 DRAM cycles each.

Requests are ``memory_request_layout`` beats (burst address, tag, 512-bit
write data). A write's data waits in its rank's *write buffer* (one
``Memory`` of ``queue_depth`` bursts per rank, asynchronous read): a write is
admitted only when its rank has a free buffer slot, the slot number travels
with the request, and the data is read out onto ``dq_wr[r]`` in the cycle the
write data goes on the bus (CWL after WR), which frees the slot.

Data path per rank, in the cycle of the data mark (tCL after RD, CWL after
WR): ``dq_rd[r]`` (driven by the DRAM) is captured into the response
``resp[r]`` = (tag, data) for a read; a write pushes an acknowledgement
(data 0) and drives ``dq_wr[r]``/``dq_wr_en[r]``. The DRAM cannot wait, so
``resp[r]`` has no back-pressure of its own: the owner of the response buffer
reports its fill level on ``resp_level[r]`` and a rank issues a RD/WR only
while ``resp_level + responses in flight < resp_depth``. A push the buffer
cannot take sets the sticky ``resp_overflow`` (a design error, checked by the
benches). The response tag is the request tag with the source on top
(bit ``tag_bits``: 1 = host).

Outputs per rank: the command issued this cycle (``cmd[r]``) and the data
marks (``data_valid``/``data_write``/``data_tag``). Runs in the DRAM command
clock, like the schedulers. Head-of-line: a stream whose head targets a full
rank queue (or, for a write, a full write buffer) waits even if later
requests could go elsewhere.

Refresh: ``refresh="staggered"`` spreads the ranks' refreshes over tREFI
(a rank is down for tRFC while the others serve - lowest host latency);
``"aligned"`` refreshes all ranks together, which costs a lock-step stream
(all ranks feeding one consumer) one tRFC per tREFI instead of one per rank.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import Flow, In, Out

from ndpdimm.hw.memory.address_map import DEFAULT_SCHEME, AddressMap
from ndpdimm.hw.memory.dram import DramOrganization, DramTiming
from ndpdimm.hw.memory.port import BURST_BITS, memory_request_layout, memory_response_layout
from ndpdimm.hw.memory.rank_scheduler import DramCommand, RankScheduler, command_layout

__all__ = ["DramController", "POLICIES", "REFRESH_MODES", "PHY_PORTS", "phy_members",
           "forward_phy", "refresh_phases"]

POLICIES = ("host_first", "ndp_first", "fair")
REFRESH_MODES = ("staggered", "aligned")


def refresh_phases(org: DramOrganization, timing: DramTiming, refresh: str) -> list:
    """Per rank, the DRAM cycle offset of its refresh interval counter: ``staggered`` spreads
    the ranks over one tREFI, ``aligned`` refreshes them together."""
    if refresh not in REFRESH_MODES:
        raise ValueError(f"refresh must be aligned or staggered, got {refresh!r}")
    return [r * timing.tREFI // org.ranks if refresh == "staggered" else 0
            for r in range(org.ranks)]

#: The DRAM-side ports every level that contains the controller passes up (``dram`` domain):
#: commands and data marks out, read data in, write data out, status and counters.
PHY_PORTS = ("cmd", "data_valid", "data_write", "dq_rd", "dq_wr", "dq_wr_en", "resp_overflow",
             "policy", "row_hits", "row_misses", "refreshes")


def phy_members(org: DramOrganization, cmd_layout, policy: str = "fair") -> dict:
    """Signature members of ``PHY_PORTS`` (``policy`` is the arbitration setting, an input)."""
    return {
        "cmd": Out(data.ArrayLayout(cmd_layout, org.ranks)),
        "data_valid": Out(org.ranks),
        "data_write": Out(org.ranks),
        "dq_rd": In(data.ArrayLayout(BURST_BITS, org.ranks)),
        "dq_wr": Out(data.ArrayLayout(BURST_BITS, org.ranks)),
        "dq_wr_en": Out(org.ranks),
        "resp_overflow": Out(1),
        "policy": In(2, init=POLICIES.index(policy)),
        "row_hits": Out(32),
        "row_misses": Out(32),
        "refreshes": Out(32),
    }


def forward_phy(m, outer, inner):
    """Wire ``inner``'s PHY ports to the same-named ports of the component ``outer`` around it."""
    for name in PHY_PORTS:
        if outer.signature.members[name].flow == Flow.In:
            m.d.comb += getattr(inner, name).eq(getattr(outer, name))
        else:
            m.d.comb += getattr(outer, name).eq(getattr(inner, name))


#: Requests each rank scheduler holds (default). The weight streamer's DOT layout jumps by
#: ``n_rows * 64`` bytes from one 64 B chunk of a group to the next, so every 256 bursts the
#: stream moves to new rows; the next rows can only be opened early if their requests are
#: already queued. Measured (``tests/hw/memory/test_controller.py``, 256-burst chunks 128 KiB apart,
#: one request per DRAM cycle), with bank-level parallelism (issue 27): 4 entries 0.895 bursts
#: per DRAM cycle, 8 entries 0.939, 16 entries 0.983; before it 8 entries 0.909, 16 entries
#: 0.974, 32 entries 0.976, a purely sequential stream 0.991.
RANK_QUEUE_DEPTH = 16


class DramController(wiring.Component):
    """Host/NDP arbiter + address decode + per-rank schedulers (see module docstring)."""

    def __init__(self, org: DramOrganization, timing: DramTiming, scheme: str = DEFAULT_SCHEME,
                 bank_rotate: bool = True, policy: str = "fair",
                 queue_depth: int = RANK_QUEUE_DEPTH, tag_bits: int = 8,
                 refresh: str = "staggered", resp_depth: int = 16):
        if policy not in POLICIES:
            raise ValueError(f"unknown arbitration policy {policy!r}: expected one of "
                             f"{', '.join(POLICIES)}")
        if refresh not in REFRESH_MODES:
            raise ValueError(f"unknown refresh mode {refresh!r}: expected one of "
                             f"{', '.join(REFRESH_MODES)}")
        if not isinstance(resp_depth, int) or not 2 <= resp_depth <= 1024:
            raise ValueError(f"resp_depth must be an integer in 2..1024, got {resp_depth!r}")
        self.org, self.timing, self.refresh = org, timing, refresh
        self.address_map = AddressMap(org, scheme, bank_rotate)
        self.queue_depth, self.tag_bits, self.resp_depth = queue_depth, tag_bits, resp_depth
        self.req_layout = memory_request_layout(org.capacity_bytes, tag_bits)
        self.resp_layout = memory_response_layout(tag_bits + 1)
        self.slot_bits = max((queue_depth - 1).bit_length(), 1)
        self.cmd_layout = cmd = command_layout(org, tag_bits + 1 + self.slot_bits)
        super().__init__({
            "host": In(stream.Signature(self.req_layout)),
            "ndp": In(stream.Signature(self.req_layout)),
            "data_tag": Out(data.ArrayLayout(tag_bits + 1, org.ranks)),
            "resp": Out(stream.Signature(self.resp_layout)).array(org.ranks),
            "resp_level": In(data.ArrayLayout(range(resp_depth + 1), org.ranks)),
            **phy_members(org, cmd, policy),
        })

    def elaborate(self, platform):
        m = Module()
        org, t = self.org, self.timing
        slices = self.address_map.field_slices()
        scheds = []
        for r, phase in enumerate(refresh_phases(org, t, self.refresh)):
            s = RankScheduler(org, t, self.queue_depth, self.tag_bits + 1 + self.slot_bits,
                              refresh_phase=phase)
            m.submodules[f"rank{r}"] = s
            scheds.append(s)

        def field(burst, name):
            lsb, width = slices[name]
            lsb -= slices["offset"][1]             # burst address has no offset bits
            return burst[lsb:lsb + width]

        def rank_of(req):
            return field(req.payload.burst, "rank") if org.ranks > 1 else 0

        # ---- write buffers: one slot per queued write, freed when its data goes out ------------
        Q = self.queue_depth
        wbufs, wfree, wslot, wslot_ok = [], [], [], []
        for r in range(org.ranks):
            mem = memory.Memory(shape=BURST_BITS, depth=Q, init=[])
            m.submodules[f"wbuf{r}"] = mem
            free = Signal(Q, init=(1 << Q) - 1, name=f"wfree{r}")
            first = Signal(range(Q), name=f"wslot{r}")
            for i in reversed(range(Q)):
                with m.If(free[i]):
                    m.d.comb += first.eq(i)
            wbufs.append(mem)
            wfree.append(free)
            wslot.append(first)
            wslot_ok.append(free != 0)

        def can_take(req):
            r = rank_of(req)
            room = Cat(s.req.ready for s in scheds).bit_select(r, 1)
            slot = Cat(wslot_ok).bit_select(r, 1)
            return req.valid & room & (~req.payload.write | slot)

        host_can = can_take(self.host)
        ndp_can = can_take(self.ndp)
        last_host = Signal()                          # fair: who went last
        pick_host = Signal()
        host_first = self.policy == POLICIES.index("host_first")
        ndp_first = self.policy == POLICIES.index("ndp_first")
        with m.If(host_first):
            m.d.comb += pick_host.eq(host_can)
        with m.Elif(ndp_first):
            m.d.comb += pick_host.eq(host_can & ~ndp_can)
        with m.Else():
            m.d.comb += pick_host.eq(host_can & (~ndp_can | ~last_host))
        pick_ndp = ndp_can & ~pick_host
        with m.If(pick_host | pick_ndp):
            m.d.sync += last_host.eq(pick_host)
        m.d.comb += [self.host.ready.eq(pick_host), self.ndp.ready.eq(pick_ndp)]

        chosen = Mux(pick_host, self.host.payload.as_value(), self.ndp.payload.as_value())
        chosen = self.req_layout(chosen)
        target = Mux(pick_host, rank_of(self.host), rank_of(self.ndp))
        tag_w = self.tag_bits + 1
        overflow = Signal()
        for r, s in enumerate(scheds):
            p = s.req.payload
            take = (pick_host | pick_ndp) & (target == r)
            slot = wslot[r]
            m.d.comb += [
                s.req.valid.eq(take),
                p.write.eq(chosen.write),
                p.bank_group.eq(field(chosen.burst, "bank_group")),
                p.bank.eq(field(chosen.burst, "bank") +
                          (field(chosen.burst, "row")[:slices["bank"][1]] if self.address_map.bank_rotate
                           else 0)),
                p.row.eq(field(chosen.burst, "row")),
                p.column.eq(field(chosen.burst, "column")),
                p.tag.eq(Cat(chosen.tag, pick_host, slot)),
                p.urgent.eq((host_first & pick_host) | (ndp_first & ~pick_host)),
                self.cmd[r].eq(s.cmd),
                self.data_valid[r].eq(s.data_valid),
                self.data_write[r].eq(s.data_write),
                self.data_tag[r].eq(s.data_tag[:tag_w]),
            ]
            # write data in at admission, out at the data mark
            wport = wbufs[r].write_port()
            rport = wbufs[r].read_port(domain="comb")
            take_write = take & chosen.write
            mark_slot = s.data_tag[tag_w:]
            wr_out = s.data_valid & s.data_write
            m.d.comb += [wport.addr.eq(slot), wport.data.eq(chosen.data), wport.en.eq(take_write),
                         rport.addr.eq(mark_slot),
                         self.dq_wr[r].eq(Mux(wr_out, rport.data, 0)), self.dq_wr_en[r].eq(wr_out)]
            set_bits = Mux(take_write, Const(1, Q) << slot, 0)
            clr_bits = Mux(wr_out, Const(1, Q) << mark_slot, 0)
            m.d.sync += wfree[r].eq((wfree[r] & ~set_bits) | clr_bits)

            # responses: one per column command; never issue one the buffer could not take
            in_flight = Signal(range(self.resp_depth + 8), name=f"in_flight{r}")
            col_issued = (s.cmd.kind == DramCommand.RD) | (s.cmd.kind == DramCommand.WR)
            m.d.sync += in_flight.eq(in_flight + col_issued - s.data_valid)
            m.d.comb += [
                s.resp_space.eq(self.resp_level[r] + in_flight < self.resp_depth),
                self.resp[r].valid.eq(s.data_valid),
                self.resp[r].payload.tag.eq(s.data_tag[:tag_w]),
                self.resp[r].payload.data.eq(Mux(s.data_write, 0, self.dq_rd[r])),
            ]
            with m.If(self.resp[r].valid & ~self.resp[r].ready):
                m.d.sync += overflow.eq(1)
        m.d.comb += [
            self.resp_overflow.eq(overflow),
            self.row_hits.eq(sum(s.row_hits for s in scheds)),
            self.row_misses.eq(sum(s.row_misses for s in scheds)),
            self.refreshes.eq(sum(s.refreshes for s in scheds)),
        ]
        return m
