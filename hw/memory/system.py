"""The buffer chip's memory system: NDP clients and host pass-through into one DRAM controller, across clocks.

Clock domains
-------------
* ``sync`` - the 1 GHz NDP clock: the ``host`` port and the ``clients[i]``
  ports (weight streamer, DMA engine, ...), all ``hw/memory/port.py`` signatures.
* ``dram`` - the DRAM command clock (1.6 GHz for DDR4-3200, tCK 0.625 ns): the
  ``DramController`` (arbiter, write buffers, one scheduler per rank) and the
  PHY-side ports ``cmd[r]``, ``dq_rd[r]``, ``dq_wr[r]``/``dq_wr_en[r]`` and the
  data marks. Every DRAM timing parameter is exact in this clock (rounding
  tCCD_S = 2.5 ns to 1 GHz cycles would cap streaming at 83 %).

Every crossing is an ``amaranth.lib.fifo.AsyncFIFO`` (Gray-coded pointers,
two-flop synchronisers): one for host requests, one per request *lane* for
the NDP clients, one per rank for responses.

Paths and cycle behaviour
-------------------------
Requests: per lane, a round-robin arbiter (1 GHz side) picks one client's
request per cycle into that lane's FIFO (``req_depth`` entries) and tags it
with the client number (above the client's ``CLIENT_TAG_BITS``); on the DRAM
side a round-robin arbiter offers one lane's head per DRAM cycle to the
controller's ``ndp`` port, and the host FIFO feeds its ``host`` port. Two
lanes at 1 GHz (2 requests/ns) exceed what the controller admits (1 per DRAM
cycle = 1.6/ns = 102.4 B/ns, the DIMM's peak), so the crossing never limits
bandwidth.

Responses: each rank's responses (read data or write acknowledgement) go
into that rank's FIFO (``resp_depth`` entries); the controller only issues a
RD/WR when the FIFO, counting responses still in flight, has room (its
``resp_level`` input is the FIFO's write-side level), so a response is never
dropped even when a client holds ``ready`` low. On the 1 GHz side the head of
each rank FIFO goes to the host or to the client named in its tag. A request
sees roughly 3 cycles of crossing each way on top of the DRAM latency
(tRCD + tCL + queueing in DRAM cycles).

``resp_overflow`` (sticky, DRAM domain) would mean a response was pushed into
a full FIFO - impossible by construction; the benches check it stays low.
"""

from amaranth.hdl import Cat, Const, DomainRenamer, Module, Signal
from amaranth.lib import fifo, wiring
from amaranth.lib.wiring import Out

from ndpdimm.hw.memory.address_map import DEFAULT_SCHEME
from ndpdimm.hw.memory.controller import RANK_QUEUE_DEPTH, DramController, forward_phy, phy_members
from ndpdimm.hw.memory.dram import DramOrganization, DramTiming
from ndpdimm.hw.memory.port import CLIENT_TAG_BITS, memory_server_signature

__all__ = ["MemorySystem"]


def _round_robin(m, valids, name):
    """Index of the first valid after the last grant (a one-hot-free rotating priority).

    Returns ``(grant_index, any_valid, commit)``; call ``commit(cond)`` once, with the
    condition under which the grant is taken, to advance the pointer.
    """
    n = len(valids)
    last = Signal(range(max(n, 2)), name=f"{name}_last")
    grant = Signal(range(max(n, 2)), name=f"{name}_grant")
    any_ = Signal(name=f"{name}_any")
    # scan candidates in priority order last+1, last+2, ..., last (written out for every last)
    for lst in range(n):
        with m.If(last == lst):
            for k in reversed(range(1, n + 1)):
                i = (lst + k) % n
                with m.If(valids[i]):
                    m.d.comb += grant.eq(i)
    m.d.comb += any_.eq(Cat(valids) != 0)

    def commit(cond, domain="sync"):
        with m.If(cond & any_):
            m.d[domain] += last.eq(grant)
    return grant, any_, commit


class MemorySystem(wiring.Component):
    """Host + NDP clients -> clock crossing -> ``DramController`` (see module docstring).

    Parameters: DRAM ``org``/``timing`` and address ``scheme``; ``n_clients``
    NDP client ports with ``lanes`` request lanes each; controller ``policy`` (reset value of the run-time ``policy`` input, ``dram`` domain),
    ``queue_depth`` and ``refresh`` mode; ``req_depth`` / ``resp_depth`` of
    the crossing FIFOs (powers of two).
    """

    def __init__(self, org: DramOrganization, timing: DramTiming, *, scheme: str = DEFAULT_SCHEME,
                 n_clients: int = 2, lanes: int = 2, policy: str = "fair", queue_depth: int = RANK_QUEUE_DEPTH,
                 refresh: str = "staggered", req_depth: int = 8, resp_depth: int = 16):
        for name, value, high in (("n_clients", n_clients, 8), ("lanes", lanes, 4)):
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
                raise ValueError(f"{name} must be an integer in 1..{high}, got {value!r}")
        for name, value in (("req_depth", req_depth), ("resp_depth", resp_depth)):
            if not isinstance(value, int) or value < 4 or value & (value - 1):
                raise ValueError(f"{name} must be a power of two >= 4, got {value!r}")
        self.org, self.timing = org, timing
        self.n_clients, self.lanes = n_clients, lanes
        self.req_depth, self.resp_depth = req_depth, resp_depth
        self.client_bits = max((n_clients - 1).bit_length(), 1)
        self.ctrl_tag_bits = CLIENT_TAG_BITS + self.client_bits
        self.controller = DramController(org, timing, scheme, policy=policy, queue_depth=queue_depth,
                                         tag_bits=self.ctrl_tag_bits, refresh=refresh,
                                         resp_depth=resp_depth)
        client = memory_server_signature(org.capacity_bytes, org.ranks, lanes)
        host = memory_server_signature(org.capacity_bytes, org.ranks, 1)
        super().__init__({
            "host": Out(host),
            "clients": Out(client).array(n_clients),
            # DRAM (PHY) side, ``dram`` domain
            **phy_members(org, self.controller.cmd_layout, policy),
        })

    def elaborate(self, platform):
        m = Module()
        org, C, L = self.org, self.n_clients, self.lanes
        ctrl = self.controller
        m.submodules.controller = DomainRenamer("dram")(ctrl)
        req_bits = ctrl.req_layout.size
        resp_bits = ctrl.resp_layout.size

        def async_fifo(name, width, depth, w_domain, r_domain):
            f = fifo.AsyncFIFO(width=width, depth=depth, w_domain=w_domain, r_domain=r_domain)
            m.submodules[name] = f
            return f

        def to_controller(req, client, name):
            """A client's request with the controller's wider tag (client number on top)."""
            out = Signal(ctrl.req_layout, name=name)
            m.d.comb += [out.write.eq(req.write), out.burst.eq(req.burst), out.data.eq(req.data),
                         out.tag.eq(Cat(req.tag, Const(client, self.client_bits)))]
            return out

        # ---- host requests -> dram -----------------------------------------------------------
        host_fifo = async_fifo("host_req", req_bits, self.req_depth, "sync", "dram")
        hreq = self.host.req[0]
        m.d.comb += [host_fifo.w_data.eq(to_controller(hreq.payload, 0, "host_payload")),
                     host_fifo.w_en.eq(hreq.valid), hreq.ready.eq(host_fifo.w_rdy),
                     ctrl.host.payload.eq(host_fifo.r_data), ctrl.host.valid.eq(host_fifo.r_rdy),
                     host_fifo.r_en.eq(ctrl.host.ready)]

        # ---- client lanes -> dram ------------------------------------------------------------
        lane_fifos = []
        for lane in range(L):
            reqs = [self.clients[c].req[lane] for c in range(C)]
            grant, any_, commit = _round_robin(m, [r.valid for r in reqs], f"lane{lane}")
            f = async_fifo(f"lane{lane}_req", req_bits, self.req_depth, "sync", "dram")
            lane_fifos.append(f)
            with m.Switch(grant):
                for c, r in enumerate(reqs):
                    with m.Case(c):
                        m.d.comb += f.w_data.eq(to_controller(r.payload, c, f"lane{lane}_c{c}"))
            for c, r in enumerate(reqs):
                m.d.comb += r.ready.eq(any_ & (grant == c) & f.w_rdy)
            m.d.comb += f.w_en.eq(any_)
            commit(f.w_rdy)
        grant, any_, commit = _round_robin(m, [f.r_rdy for f in lane_fifos], "ndp")
        with m.Switch(grant):
            for lane, f in enumerate(lane_fifos):
                with m.Case(lane):
                    m.d.comb += ctrl.ndp.payload.eq(f.r_data)
        for lane, f in enumerate(lane_fifos):
            m.d.comb += f.r_en.eq(any_ & (grant == lane) & ctrl.ndp.ready)
        m.d.comb += ctrl.ndp.valid.eq(any_)
        commit(ctrl.ndp.ready, domain="dram")

        # ---- responses: dram -> sync, routed to host or client -------------------------------
        tb = self.ctrl_tag_bits
        for r in range(org.ranks):
            f = async_fifo(f"rank{r}_resp", resp_bits, self.resp_depth, "dram", "sync")
            m.d.comb += [f.w_data.eq(ctrl.resp[r].payload.as_value()), f.w_en.eq(ctrl.resp[r].valid),
                         ctrl.resp[r].ready.eq(f.w_rdy), ctrl.resp_level[r].eq(f.w_level)]
            head = ctrl.resp_layout(f.r_data)
            is_host = head.tag[tb]
            client = head.tag[CLIENT_TAG_BITS:tb]
            targets = [(self.host.resp[r], is_host)] + \
                [(self.clients[c].resp[r], ~is_host & (client == c)) for c in range(C)]
            taken = []
            for port, sel in targets:
                m.d.comb += [port.valid.eq(f.r_rdy & sel),
                             port.payload.tag.eq(head.tag[:CLIENT_TAG_BITS]),
                             port.payload.data.eq(head.data)]
                taken.append(sel & port.ready)
            m.d.comb += f.r_en.eq(Cat(taken) != 0)

        forward_phy(m, self, ctrl)
        return m


def memory_system_from_config(config_path: str | None = None, **params) -> MemorySystem:
    """``MemorySystem`` for the DRAM described by a TOML config (default DDR4-3200) - a factory
    with JSON-able arguments, for benches and builds."""
    from ndpdimm.hw.memory.dram import load_dram_config
    org, timing = load_dram_config(config_path)
    return MemorySystem(org, timing, **params)
