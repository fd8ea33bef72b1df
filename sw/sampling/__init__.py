"""Sampled RTL co-simulation of a scenario's NDP kernels (``--rtl-samples N``).

A scenario running on the model backend logs every NDP kernel invocation it costs
(``record``: :class:`~ndpdimm.sw.sampling.record.KernelLog`, identical invocations
aggregated); afterwards a random sample of them, stratified by kernel kind, is replayed
through the driver on the RTL backend of the same core configuration, in parallel on the
project's Dask runner, each replay checked bit for bit against the golden model
(``replay``); ``stats`` holds the sample design (allocation, draws) and the interval
arithmetic (t-intervals per kind, the scenario's NDP time re-estimated with a propagated
interval); ``kernels`` holds the replay recipes, one per kernel kind, built from the
scenarios' own kernel code. The method is described in docs/cosim.md ("Sampled RTL
co-simulation").

Why here and not in ``sw/driver``: the recipes are the scenarios' kernels (Hermes's cold
neurons and attention, TriMoE's expert chain), which the driver may not import, and the
parallel replay uses the Dask runner of ``sw/sweep``. A replay chooses its backend by name
through the driver (``Dimm("rtl", core)``), as every scenario does, so no backend class is
imported.

May import: ``ndpdimm.hw``, ``ndpdimm.sw`` (driver, scenarios, sweep) and, of
``ndpdimm.cosim``, only ``cosim.backend`` and ``cosim.golden`` (``tests/test_layering.py``).
``record`` and ``stats`` import nothing of the scenarios, so scenarios can import them.
"""
