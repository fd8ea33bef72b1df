"""cocotb benches: one module per DUT, holding its cocotb tests.

Each bench is run through :func:`ndpdimm.cosim.rtl.build.run`, which elaborates
the Amaranth component, builds it with Verilator (cached) and runs the module in
a fresh simulator process. A bench reads the parameters it was built with from
:func:`ndpdimm.cosim.rtl.build.bench_params`.
"""
