"""The DRAM behind one DIMM's buffer chip, simulation only: sparse store and timing checker.

``model`` (``DramModel``: backing store and a checker that fails the run on any
violated timing constraint), ``native`` (the same model in C++, ``cpp/``, behind the
Python API; the harness links it), ``port_model`` (a behavioural DRAM behind a
memory-client port, for Amaranth-simulator tests of clients).

May import: ``ndpdimm.hw``, ``cosim.golden``, ``cosim.gemv``, ``cosim.dram``, ``cosim.link`` and
cosim's top-level modules (``backend``, ``cache``, ...): never ``cosim.rtl`` or ``cosim.model``,
which build on it (``tests/test_layering.py``).
"""
