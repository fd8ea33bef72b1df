"""The host runtime: the driver API, real-layer runs, the scenarios, sweeps and the ``ndpdimm`` CLI.

``driver/`` (the host driver over either backend), ``kernels/`` (the NDP kernels the
scenarios run: shapes, descriptor streams, cost lines), ``layer/`` (one real transformer
layer through the driver or the engine RTL), ``scenarios/`` (Hermes, TriMoE, RAPID and
their shared catalogue), ``sampling/`` (sampled RTL co-simulation of a scenario run), ``reproduce/`` (``ndpdimm reproduce``:
the papers' set-ups, our figures beside the published ones), ``sweep/`` (design-space sweeps and the sharded regression on
Dask), ``cli`` (the command line) and ``commands/`` (its commands, one module each),
``result_files`` (JSON and PNG outputs), ``configs/`` (model and hardware TOML files with their
sources).

May import: ``ndpdimm.hw``; ``ndpdimm.cosim`` only through the driver (``sw.driver``),
the backend interface (``cosim.backend``), the golden model (``cosim.golden``), the
timeline writer (``cosim.timeline``) and the provenance writer (``cosim.provenance``), never
a backend class; the CLI and its commands may import anything, and nothing else imports them
(``tests/test_layering.py``).
"""
