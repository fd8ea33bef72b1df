"""Amaranth RTL of the NDP core that sits in a DIMM's buffer chip: one file per block.

At the top, what every block and the host side share: ``formats`` (data types, GEMV
modes, stream payload layouts), ``descriptors`` (the command queue's descriptor
formats), ``registers`` (the memory-mapped register map and its fields), ``clock_gate`` and
``hierarchy`` (replicated blocks as one shared Verilog module); ``export`` writes the core's
Verilog with its register map as a C header, SystemRDL and a FuseSoC core file;
``config_file`` is the one loader of every configuration file of the project (every number with
its source, no NaN; the lowest layer, so every package may import it). The blocks, by part:
``gemv/`` (the GEMV engine), ``memory/`` (SRAM, DRAM controller, weight streamer,
DMA), ``activation/``, ``link/`` (DIMM-Link and relayout), ``core/`` (command
processor and the ``NdpCore`` top). Main entry point: ``ndpdimm.hw.core.ndp_core.NdpCore``.

May import: only ``ndpdimm.hw`` (and Amaranth). Nothing of ``cosim``, ``sw`` or ``synth``
(``tests/test_layering.py`` checks it).
"""
