"""RAPID: power-aware disaggregated prefill/decode serving on one 8-GPU node, with an NDP-DIMM decode tier.

The roles every scenario package shares (``sw/scenarios/base.py``): ``config`` (RapidConfig,
modes, the configurations a run compares), ``catalog`` (the node, its power curves, the DIMM
tier, the serving models), ``workload`` (requests and replayable traces), ``costs`` (prefill and
decode times and power, the DIMM tier's attention measured through the driver), ``simulate``
(the discrete-event serving simulator, a configuration's layout and summary), ``scenario``
(``run(cfg, ctx) -> RapidResult``), ``report`` (``ndpdimm rapid``), ``bench`` (``ndpdimm bench
--suite rapid``). Its own parts: ``power`` (caps, reservations, actuation), ``controller``
(power first, roles second), ``timeshift`` (the controller's power time-shifting option),
``levers`` (power moves, whole allocations, role switches), ``timeline`` (a run laid on a
Perfetto timeline).

May import: as ``ndpdimm.sw.scenarios``; never another scenario package.
"""
