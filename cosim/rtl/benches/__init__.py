"""cocotb benches: one module per DUT, holding its cocotb tests, and the helpers benches share.

The helpers hold no cocotb test: stream drivers (``streams``), the DRAM device model
(``dram_device``), and a large bench's testbench and generators in modules of their own
(``random_tb`` and ``descriptor_streams``, used by ``random_traffic``).

Each bench is run through :func:`ndpdimm.cosim.rtl.build.run`, which elaborates
the Amaranth component, builds it with Verilator (cached) and runs the module in
a fresh simulator process. A bench reads the parameters it was built with from
:func:`ndpdimm.cosim.rtl.build.bench_params`.
"""
