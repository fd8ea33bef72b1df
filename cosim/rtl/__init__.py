"""The RTL in simulation: Verilator builds, the fast C++ harness (the RTL backend), cocotb benches.

``build`` (elaborate an Amaranth component, build it with Verilator, cached; run
cocotb benches), ``harness_build`` (the Verilated core and the C++ harness, sources in
``cpp/``, built into a shared library, cached), ``harness`` (``RtlBackend`` /
``RtlSystem``: that library loaded with ctypes, driven by one call per command), ``core_top`` and
``system_top`` (simulation tops of one core and of several linked cores),
``link_pair_top`` (two DIMM-Link ports as one top), ``gemv`` (GEMV jobs on the engine
RTL under cocotb), ``benches/`` (the cocotb benches, one module per DUT).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``.
"""
