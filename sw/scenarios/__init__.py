"""The scenarios: published system designs that use NDP-DIMMs, co-simulated end to end.

``catalog`` (dense model shapes, the GPU and PCIe records and the strict TOML readers every
scenario's catalogue uses, from ``sw/configs`` with their sources),
``gpu`` (the GPU time model: measured fits, the roofline beside them), ``energy`` (the energy model and price catalogue Hermes
and RAPID's NDP tier share), ``base`` (what every scenario shares: the core choice, the run
context, the cost DIMM, the tally, typed results), ``kernel_logs`` (one default run of Hermes
and TriMoE logged: the calibration's held-out streams); one package per scenario:
``hermes/`` (dense LLM, activation sparsity), ``trimoe/`` (MoE over GPU + AMX CPU + DIMMs),
``rapid/`` (power-capped disaggregated serving). The three hold the same modules for the same
roles (``config``, ``workload``, ``costs``, ``simulate``, ``scenario`` with ``run(cfg, ctx) ->
Result``, ``report``, ``bench``; ``base.py`` says what each is) beside their own parts, and
charge their NDP work through the kernels of ``sw/kernels``.

May import: ``ndpdimm.hw`` (formats), ``ndpdimm.sw`` (no scenario package another), the driver, ``cosim.backend``
(``CoreConfig``), ``cosim.golden`` and ``cosim.timeline`` (the Chrome-trace writer of
``--timeline``); never a backend class.
"""
