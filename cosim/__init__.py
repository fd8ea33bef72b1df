"""Verification and co-simulation: everything that checks or runs the RTL, and the models beside it.

At the top: ``backend`` (the interface between the host driver and one simulated
DIMM: ``Backend``, ``CoreConfig``, ``Completion``), ``arguments`` (shared
command-line value types), ``cache`` (the one build-cache root every build uses,
``$NDPDIMM_CACHE`` or the user cache folder) and ``timeline`` (the Chrome-trace/Perfetto JSON
writer of every ``--timeline``; ``sw`` may import it). By part: ``golden/`` (the bit-exact torch golden model and
the functional reference of the core), ``gemv/`` (GEMV jobs, their stream traffic and
test cases), ``rtl/`` (Verilator build, the C++ fast harness = the RTL backend, cocotb
benches), ``model/`` (the calibrated performance model = the model backend, and its
calibration), ``dram/`` (the DRAM model with its timing checker, Python and C++),
``link/`` (DIMM-Link models), ``fuzz/`` (the descriptor fuzzer: its drawing half shared with
the cocotb benches, and its run on the fast harness), ``amaranth_sim/`` (helpers for
Amaranth-simulator tests).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``; nothing of ``sw``, ``synth`` or ``bench``.
"""
