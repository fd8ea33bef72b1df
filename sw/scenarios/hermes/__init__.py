"""The Hermes scenario: dense LLM decode on one consumer GPU plus NDP-DIMMs (activation sparsity), against its baselines.

The roles every scenario package shares (``sw/scenarios/base.py``): ``config`` (HermesConfig,
SYSTEMS, ABLATIONS), ``workload`` (traces + predictions of a run), ``costs`` (the NDP kernels'
cost lines through the driver, ``Costs``/``measure_costs``), ``simulate`` (every system's decode
steps), ``scenario`` (``run(cfg, ctx) -> HermesResult``: placement, runs, aggregation;
``operating_points``), ``report`` (``ndpdimm hermes``: tables, JSON, plots, sweeps), ``bench``
(``ndpdimm bench --suite hermes``), ``catalog`` (the system's hardware file: GPU, PCIe, host,
NDP-DIMMs). Hermes' models are the shared dense-model catalogue (``sw/scenarios/catalog.py``),
its energy and prices ``sw/scenarios/energy.py`` (RAPID's NDP tier reads the same file).

Its own parts: ``traces`` (activation traces), ``predictor`` (online neuron predictor),
``partition`` (offline placement ILP), ``remap`` (DIMM remapping), ``demo`` (``ndpdimm demo``).
The functional check on the RTL (:func:`ndpdimm.sw.scenarios.hermes.decode.run_hermes_decode`):
``reduced_model`` (a tiny ReLU decoder, its KV cache and torch forward), ``decode`` (the GPU/DIMM
split of one step, ``HermesNdp``), ``checks`` (golden comparison, tolerance, cycle records,
``StepResult``).

May import: as ``ndpdimm.sw.scenarios``; never another scenario package.
"""
