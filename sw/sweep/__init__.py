"""Design-space sweeps and the sharded RTL regression, on Dask distributed.

``run`` (``ndpdimm sweep FILE``: grids and points, cache, resume, outputs), ``jobs``
(what a sweep point can run), ``tasks`` (one way onto a Dask cluster, worker-loss
resubmission), ``regress`` (``ndpdimm regress`` / ``make sim SCHEDULER=...``), ``bench``
(``ndpdimm bench --suite sweep``).

May import: as ``ndpdimm.sw``; ``regress`` also the Verilator environment of
``cosim.rtl.build`` (listed in ``tests/test_layering.py``).
"""
