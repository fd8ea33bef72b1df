"""The activation unit: ReLU, SiLU, GELU, softmax, element-wise ops and conversions, SRAM to SRAM.

``unit`` (the ``lanes``-wide datapath, stream to stream), ``sequencer`` (runs ACT /
SOFTMAX / ELTWISE descriptors over vectors longer than the lanes).

May import: ``ndpdimm.hw`` only.
"""
