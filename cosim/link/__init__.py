"""DIMM-Link models: reference codes and frames, behavioural channels, and the link on the model backend.

``line_code`` (64b/66b reference), ``frames`` (frame reference and a flit channel),
``channel`` (one direction of a link's channel: rate, latency, bit errors), ``chain``
(several DIMMs' link blocks for Amaranth-simulator tests); the link on the model backend:
``model`` (``LinkFabric``: link descriptors between model-backend DIMMs, checked and applied),
``timing`` (their error-free time, fitted to the RTL), ``bit_errors`` (``LinkErrors``: the
links' bit errors, replays and counters; goodput against the RTL link bench) and ``relayout``
(RELAYOUT's blocks, checks, effect and time).

May import: ``ndpdimm.hw``, ``cosim.golden``, ``cosim.gemv``, ``cosim.dram``, ``cosim.link`` and
cosim's top-level modules (``backend``, ``cache``, ...): never ``cosim.rtl`` or ``cosim.model``,
which build on it (``tests/test_layering.py``).
"""
