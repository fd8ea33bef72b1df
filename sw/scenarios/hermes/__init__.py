"""The Hermes scenario: dense LLM decode on one consumer GPU plus NDP-DIMMs (activation sparsity), against its baselines.

Main entry points: :func:`ndpdimm.sw.scenarios.hermes.scenario.run_hermes` with a
:class:`ndpdimm.sw.scenarios.hermes.config.HermesConfig` (``ndpdimm hermes`` through
``report.hermes_command``), ``bench.run_hermes_bench``, ``demo.run_hermes_demo`` and, for the
functional check on the RTL, :func:`ndpdimm.sw.scenarios.hermes.decode.run_hermes_decode`.

Modules. The run: ``config`` (HermesConfig, SYSTEMS, ABLATIONS), ``traces`` (activation traces),
``predictor`` (online neuron predictor), ``workload`` (traces + predictions of a run), ``costs``
(NDP kernel cost lines through the driver, ``Costs``/``measure_costs``), ``partition`` (offline
placement ILP), ``remap`` (DIMM remapping), ``timing`` (every system's decode steps), ``energy``
(energy and price), ``scenario`` (``run_hermes``: placement, runs, aggregation), ``report``
(tables, JSON, plots, sweeps), ``bench``, ``demo``. The functional check: ``reduced_model`` (a
tiny ReLU decoder, its KV cache and torch forward), ``decode`` (the GPU/DIMM split of one step,
``HermesNdp``), ``checks`` (golden comparison, tolerance, cycle records, ``StepResult``).

May import: the driver ``ndpdimm.sw.driver``, ``ndpdimm.cosim.backend`` (``CoreConfig``),
``ndpdimm.cosim.golden``, ``ndpdimm.hw.formats`` (and ``ndpdimm.hw.activation.unit``'s ``ActOp``)
and other ``ndpdimm.sw`` modules; never a backend class.
"""
