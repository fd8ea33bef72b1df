"""The host driver: one NDP-DIMM, or several, over either backend (``"model"`` or ``"rtl"``).

Entry points: ``dimm.Dimm`` (one DIMM: memory, descriptors, submit / wait, operations),
``system.NdpSystem`` (several DIMMs, DIMM-Link) and ``errors.NdpError`` (a descriptor that
completed with an error). Modules: ``dimm`` (``Dimm``, ``Descriptor``, ``RunStats``,
``CoreStatus``, ``make_backend``), ``host_reads`` (``HostReads``: background host reads
while the core computes), ``kernels`` (``Kernels``, the compute
operations ``Dimm`` inherits: ``store_weights``, ``gemv``, ``activation``, ``eltwise``,
``softmax``), ``buffers`` (``Buffer``, ``WeightBuffer``, the allocator, dtype tables and
tensor helpers), ``system`` (``NdpSystem``, ``SplitWeights``, ``SystemRun``), ``timeline`` (descriptor
timelines per engine from the completions: ``Dimm(..., timeline=True).write_timeline``) and
``errors`` (``NdpError``, ``FreedBufferError``). Nothing is re-exported here: import a
name from the module that defines it.

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim`` (the backends); nothing of the rest of
``ndpdimm.sw`` (``tests/test_layering.py``).
"""
