"""GEMV operations as the engine sees them: jobs, their stream traffic, expected results, test cases.

``job`` (``GemvJob``: validation, stream traffic, expected results), ``cases``
(directed corner cases and constrained-random jobs), ``engine_model`` (reference of
the engine at its stream boundary), ``weight_layout`` (weight layouts in DRAM and the
streamer's descriptor, host side), ``lane_products`` (reference of the multiplier
unit's lane products).

May import: ``ndpdimm.hw``, ``cosim.golden``, ``cosim.gemv``, ``cosim.dram``, ``cosim.link`` and
cosim's top-level modules (``backend``, ``cache``, ...): never ``cosim.rtl`` or ``cosim.model``,
which build on it (``tests/test_layering.py``).
"""
