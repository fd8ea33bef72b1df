"""The scenarios: published system designs that use NDP-DIMMs, co-simulated end to end.

``catalog`` (dense model shapes and hardware, from ``sw/configs`` with their sources),
``gpu`` (the GPU roofline time model); one package per scenario: ``hermes/`` (dense
LLM, activation sparsity), ``trimoe/`` (MoE over GPU + AMX CPU + DIMMs), ``rapid/``
(power-capped disaggregated serving). Each has a catalogue, its model parts, the run,
the report (``ndpdimm <scenario>``) and its benchmark suite.

May import: ``ndpdimm.hw`` (formats), ``ndpdimm.sw``, the driver, ``cosim.backend``
(``CoreConfig``), ``cosim.golden`` and ``cosim.timeline`` (the Chrome-trace writer of
``--timeline``); never a backend class.
"""
