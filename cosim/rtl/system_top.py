"""Several RTL NDP cores joined by DIMM-Link ports, as one Verilator top: the DUT of
``cosim/rtl/benches/system.py``.

``link_system_verilog(n_cores=3, **core_params)`` (an ``rtl_build`` factory,
``ndpdimm.cosim.rtl.system_top:link_system_verilog``) composes the Verilog of

* ``n_cores`` instances of one ``ndp_core`` module (``NdpCore(link=True,
  **core_params)``, the same module the harness builds; Verilator compiles it
  once however many instances there are),
* two instances of one ``link_port`` module (:class:`~ndpdimm.hw.link.port.LinkPort`
  with the cores' ``max_payload``) per pair of neighbours: ``l{i}a`` on core
  ``i``'s right side, ``l{i}b`` on core ``i + 1``'s left side, their packet
  ports wired to the cores' ``link_right_*`` / ``link_left_*`` packet ports,

in a top ``link_system`` (a chain, DIMM ``i`` = core ``i``). The outer ends
of the chain are tied off (nothing arrives, anything sent is taken: the
router never sends past the chain, ``LINK_ID`` tells it the length).

Top ports: the shared ``clk``/``rst``/``dram_clk``/``dram_rst`` (resets
registered in their clock, as ``cosim/rtl/core_top.py`` does and for the same
reason), every other port of core ``i`` as ``c{i}__<port>`` (host CSR, IRQ,
host pass-through, DRAM PHY: a bench drives each core as it drives one core),
and every port of link port ``l{i}a``/``l{i}b`` except the packet ports as
``l{i}a__<port>`` (``serial_tx``, ``serial_rx``, ``link_reset``, ``link_up``,
the counters). The serial lanes are not joined inside: the bench moves them
through behavioural channels (``cosim/link/channel.py``: latency, skew, bit
errors, dropped chunks), as the link-pair bench does.
"""

import re

from ndpdimm.cosim.rtl.core_top import module_ports

__all__ = ["link_system_verilog", "LINK_SYSTEM_TOP", "LINK_SYSTEM_FACTORY", "MAX_CORES",
           "core_prefix", "port_prefix"]

LINK_SYSTEM_TOP = "link_system"
LINK_SYSTEM_FACTORY = "ndpdimm.cosim.rtl.system_top:link_system_verilog"
#: More would only make the build and the simulation slower; the router handles 16.
MAX_CORES = 4

_CLOCKS = {"clk": "clk", "rst": "rst_q", "dram_clk": "dram_clk", "dram_rst": "dram_rst_q"}
# core packet port -> link port packet port it meets (core tx feeds port tx_packet)
_PACKET = {"tx": "tx_packet", "rx": "rx_packet"}


def core_prefix(i: int) -> str:
    """Top-port prefix of core ``i``."""
    return f"c{i}__"


def port_prefix(link: int, end: str) -> str:
    """Top-port prefix of link ``link``'s end ``a`` (core ``link``) or ``b`` (core ``link + 1``)."""
    return f"l{link}{end}__"


def link_system_verilog(n_cores: int = 3, config_path: str | None = None, **core_params) -> str:
    """Verilog of the top ``link_system`` (see the module docstring)."""
    from amaranth.back import verilog

    from ndpdimm.hw.core.ndp_core import ndp_core_verilog
    from ndpdimm.hw.link.formats import LinkConfig
    from ndpdimm.hw.link.port import LinkPort

    if not isinstance(n_cores, int) or isinstance(n_cores, bool) or not 2 <= n_cores <= MAX_CORES:
        raise ValueError(f"n_cores must be 2..{MAX_CORES}, got {n_cores!r}")
    if core_params.pop("link", True) is not True:
        raise ValueError("a link system's cores are built with link=True")
    core_v = ndp_core_verilog(config_path, name="ndp_core", link=True, **core_params)
    link_config = LinkConfig(max_payload=core_params.get("link_max_payload", 1024))
    port_v = verilog.convert(LinkPort(link_config), name="link_port")
    core_ports, link_ports = module_ports(core_v, "ndp_core"), module_ports(port_v, "link_port")

    top_ports = [("input", "", name) for name in _CLOCKS]
    wires, body = [], []
    # internal wires between core i and its link ports
    for i in range(n_cores):
        for d, w, name in core_ports:
            m = re.match(r"link_(left|right)_(tx|rx)__(\w+)$", name)
            if m:
                side = m.group(1)
                joined = (side == "right" and i < n_cores - 1) or (side == "left" and i > 0)
                if joined:
                    wires.append(f"  wire {w + ' ' if w else ''}c{i}_{name};")
            elif name not in _CLOCKS:
                top_ports.append((d, w, core_prefix(i) + name))
    for link in range(n_cores - 1):
        for end in "ab":
            for d, w, name in link_ports:
                if name not in _CLOCKS and not name.startswith(("tx_packet__", "rx_packet__")):
                    top_ports.append((d, w, port_prefix(link, end) + name))

    def core_connection(i, name):
        if name in _CLOCKS:
            return _CLOCKS[name]
        m = re.match(r"link_(left|right)_(tx|rx)__(\w+)$", name)
        if not m:
            return core_prefix(i) + name
        side, direction, field = m.groups()
        if (side == "right" and i < n_cores - 1) or (side == "left" and i > 0):
            return f"c{i}_{name}"
        # the chain's outer ends: nothing arrives; a sender is never held
        if direction == "rx":
            return "1'b0" if field == "valid" else ("" if field == "ready" else "0")
        return "1'b1" if field == "ready" else ""

    for i in range(n_cores):
        conns = [f"    .{name}({core_connection(i, name)})" for _, _, name in core_ports]
        body += [f"  ndp_core core{i} (", ",\n".join(conns), "  );"]
    for link in range(n_cores - 1):
        for end, core, side in (("a", link, "right"), ("b", link + 1, "left")):
            conns = []
            for _, _, name in link_ports:
                if name in _CLOCKS:
                    target = _CLOCKS[name]
                else:
                    m = re.match(r"(tx|rx)_packet__(\w+)$", name)
                    target = (f"c{core}_link_{side}_{m.group(1)}__{m.group(2)}" if m
                              else port_prefix(link, end) + name)
                conns.append(f"    .{name}({target})")
            body += [f"  link_port l{link}{end} (", ",\n".join(conns), "  );"]

    lines = [f"module {LINK_SYSTEM_TOP}({', '.join(n for _, _, n in top_ports)});"]
    lines += [f"  {d} {w + ' ' if w else ''}{n};" for d, w, n in top_ports]
    lines += ["  reg rst_q = 1'b1;", "  reg dram_rst_q = 1'b1;",
              "  always @(posedge clk) rst_q <= rst;",
              "  always @(posedge dram_clk) dram_rst_q <= dram_rst;"]
    lines += wires + body + ["endmodule", ""]
    return core_v + "\n" + port_v + "\n" + "\n".join(lines)
