"""Replicated blocks as instances of one shared Verilog module (for builds and synthesis).

A block that a component repeats many times (the GEMV engine's units, the
weight streamer's ring columns) is elaborated once into its own Verilog module
and instantiated by name, so Verilator and Yosys see one module used ``n``
times instead of ``n`` copies (Amaranth would otherwise emit a module per
instance). :func:`shared_instance` adds such an instance to a module and
returns an interface object with the block's ports, to be driven and read
exactly like the submodule it stands for.
"""

from amaranth.hdl import ClockSignal, Instance, ResetSignal
from amaranth.lib.wiring import In

__all__ = ["shared_instance", "replicated_verilog"]


def shared_instance(m, name: str, module_name: str, signature):
    """Instance ``name`` of the Verilog module ``module_name`` with ``signature``'s ports (plus
    ``clk`` and ``rst``) in ``m``; returns the port interface (``signature.create()``)."""
    iface = signature.create(path=(name,))
    ports = {}
    for path, member, value in signature.flatten(iface):
        port = "__".join(str(p) for p in path)
        ports[("i_" if member.flow == In else "o_") + port] = \
            value.as_value() if hasattr(value, "as_value") else value
    m.submodules[name] = Instance(module_name, i_clk=ClockSignal(), i_rst=ResetSignal(), **ports)
    return iface


def replicated_verilog(engine, streamer) -> str:
    """The Verilog of the shared modules a hierarchical ``engine`` (GemvEngine) and
    ``streamer`` (WeightStreamer) instantiate: ``gemv_unit`` and ``ring_column``, once each."""
    from amaranth.back import verilog

    from ndpdimm.hw.gemv.unit import GEMV_UNIT_MODULE, GemvUnit
    from ndpdimm.hw.memory.ring_column import RING_COLUMN_MODULE, RingColumn
    unit = GemvUnit(engine.radix_bits, engine.max_batch)
    column = RingColumn(streamer.ring_beats, streamer.ranks)
    return (verilog.convert(unit, name=GEMV_UNIT_MODULE) + "\n" +
            verilog.convert(column, name=RING_COLUMN_MODULE) + "\n")
