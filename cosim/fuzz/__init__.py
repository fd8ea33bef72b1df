"""Descriptor fuzzing: random and edge-value descriptor streams checked against the core's reference.

``plan``: the backend-independent half (reference model, DRAM areas, staged GEMV jobs, mutated
descriptors, the order of a fuzz run), shared by the cocotb benches
(``cosim/rtl/benches/random_traffic.py``) and ``harness``: the fuzzer on the C++ fast harness
(``RtlBackend``), fast enough for 10^4 descriptors in ``make test`` and 10^5 in ``make sim``.
May import ``hw`` and ``cosim``.
"""
