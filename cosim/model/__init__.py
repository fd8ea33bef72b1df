"""The model backend: a functional reference plus a transaction-level timing model calibrated on the RTL.

``perf`` (cycles of a descriptor from its fields, one module per hardware part; parameters
from ``calibration/``),
``backend`` (``ModelBackend``: the driver's backend interface over the reference model
and the timing model), ``calibrate`` (``ndpdimm calibrate``: fit the timing model to RTL
cycle counts, held-out error reported).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``.
"""
