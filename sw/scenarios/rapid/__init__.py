"""RAPID: power-aware disaggregated prefill/decode serving on one 8-GPU node, with an NDP-DIMM decode tier.

``scenario`` (the run: modes and baselines), ``catalog`` (the node, its power curves,
the DIMM tier), ``workload`` (requests and replayable traces), ``perf`` (prefill and
decode times, the DIMM tier's), ``power`` (caps, reservations, actuation),
``controller`` (power first, roles second), ``simulator`` (the discrete-event serving
simulator), ``report`` (``ndpdimm rapid``), ``bench`` (``ndpdimm bench --suite rapid``).

May import: as ``ndpdimm.sw.scenarios``.
"""
