"""Sampled RTL co-simulation of a scenario's NDP kernels (``--rtl-samples N``).

A scenario running on the model backend logs every NDP kernel invocation it costs
(``record``: :class:`~ndpdimm.sw.sampling.record.KernelLog`, identical invocations
aggregated); afterwards a random sample of them, stratified by kernel kind, is replayed
through the driver on the RTL backend of the same core configuration, in parallel on the
project's Dask runner, each replay checked bit for bit against the golden model
(``replay``); ``stats`` holds the sample design (allocation, draws) and the interval
arithmetic (t-intervals per kind, the scenario's NDP time re-estimated with a propagated
interval). The replays run the kernels of ``sw/kernels/`` (a logged shape's ``run``): this
package imports no scenario. The method is described in docs/cosim.md ("Sampled RTL
co-simulation").

Why here and not in ``sw/driver``: the kernels sit above the driver, and the parallel replay
uses the Dask runner of ``sw/sweep``. A replay chooses its backend by name through the driver
(``Dimm("rtl", core)``), as every scenario does, so no backend class is imported.

May import: ``ndpdimm.hw``, ``ndpdimm.sw`` (driver, kernels, sweep; never a scenario) and, of
``ndpdimm.cosim``, only ``cosim.backend`` and ``cosim.golden`` (``tests/test_layering.py``).
"""
