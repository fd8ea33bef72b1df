"""A simulation top around ``ndp_core`` that registers its two resets, for Verilator.

Why: Amaranth writes each register's next-state logic as a combinational block
that ends in ``if (rst) next = init``, so all of it depends on the ``rst``
*input*, and Verilator evaluates logic that depends on inputs (its ``ico``
region) at every ``eval()`` - at every clock edge of either clock, whatever
changed: in the NDP core that is five evaluations per NDP cycle. Behind a flop
the resets are state, and that logic runs only when its own clock ticks
(measured: the 8-unit core's bare clock loop 3-4 k -> 18-23 k cycles/s, see
docs/cosim.md). Cost: each reset takes effect one cycle of its clock later.
Under cocotb the flops must stay private: ``rtl_build`` makes only the top's
ports VPI-visible, because a VPI-writable flop counts as an input again.

The wrapper has exactly the ports of ``ndp_core``, so benches and the C++
harness drive it as they would the core. The fast harness
(``cosim/rtl/harness.py``) builds it as ``ndp_harness_top``; cocotb benches use
:func:`ndp_core_sim_verilog` (top ``ndp_sim_top``) as their factory.
"""

from ndpdimm.cosim.rtl.build import module_ports

__all__ = ["module_ports", "reset_register_wrapper", "ndp_core_sim_verilog", "SIM_TOP"]

#: Top module of :func:`ndp_core_sim_verilog`.
SIM_TOP = "ndp_sim_top"

#: reset input -> the clock it is registered in
_RESETS = {"rst": "clk", "dram_rst": "dram_clk"}


def reset_register_wrapper(core_verilog: str, top: str, module: str = "ndp_core") -> str:
    """Verilog of module ``top`` with the ports of ``module`` (defined in ``core_verilog``),
    instantiating it with ``rst`` / ``dram_rst`` registered in ``clk`` / ``dram_clk``."""
    ports = module_ports(core_verilog, module)
    names = [p[2] for p in ports]
    for rst, clk in _RESETS.items():
        for need in (rst, clk):
            if need not in names:
                raise RuntimeError(f"{module} has no port {need!r}; ports: {names}")
    lines = [f"module {top}({', '.join(names)});"]
    lines += [f"  {d} {w + ' ' if w else ''}{n};" for d, w, n in ports]
    lines += [f"  reg {rst}_q = 1'b1;" for rst in _RESETS]
    lines += [f"  always @(posedge {clk}) {rst}_q <= {rst};" for rst, clk in _RESETS.items()]
    lines.append(f"  {module} core (")
    conn = [f"    .{n}({n + '_q' if n in _RESETS else n})" for n in names]
    lines += [",\n".join(conn), "  );", "endmodule", ""]
    return "\n".join(lines)


def ndp_core_sim_verilog(config_path: str | None = None, **params) -> str:
    """``ndp_core_verilog`` plus the wrapper ``ndp_sim_top`` (an ``rtl_build`` factory)."""
    from ndpdimm.hw.core.ndp_core import ndp_core_verilog
    core = ndp_core_verilog(config_path, **params)
    return core + "\n" + reset_register_wrapper(core, SIM_TOP)
