"""The GPU side measured, not assumed: operator tables timed on real GPUs, read, mapped to shapes,
and fitted into a model of achieved throughput that the scenarios can charge instead of the
roofline (``sw/scenarios/gpu.py``, which stays the fallback for a GPU without a table).

* ``tables``: readers of the two public profile formats (LLMServingSim's ``layer,tokens,time_us``
  / ``layer_name,input,kv_cache,tp_size,latency(ns)`` and its attention grid; Vidur's
  ``time_stats.<op>.median`` by ``num_tokens`` and tensor-parallel degree): one
  :class:`~ndpdimm.sw.scenarios.measured.tables.ProfileTable` per file, bad rows refused naming
  the file and the line.
* ``ops``: each table's op names mapped to what they compute (a linear layer ``[n_out, n_in]``
  at a tensor-parallel degree, an element-wise op over a width) from the profiled model's
  dimensions (:class:`~ndpdimm.sw.scenarios.measured.ops.ModelDims`).
* ``fit``: the fitted model of one GPU (achieved bandwidth against bytes moved, achieved FLOP/s
  against tokens; element-wise bandwidth against bytes), and its JSON form.
* ``collectives``: a measured all-reduce table (Vidur's network form) read and fitted: what
  tensor parallelism's all-reduces cost on the card it was measured on.
* ``check``: a model (fitted or roofline) held against a table, op by op: the error tables of
  ``ndpdimm gpu-check``.
* ``gpus``: the GPU catalogue (``sw/configs/gpus/``), its committed fits, and which fit a
  hardware file's GPU charges (its ``measured`` key; another card through the datasheets).

The tables themselves are not part of the project (``../shared/gpu-profiles/``, MIT): the code
reads them from a path, and what is committed is what it derives, with the table named.

Imports: numpy and the standard library; of the project, ``sw/scenarios/catalog.py`` (the GPU's
datasheet figures) and ``sw/scenarios/gpu.py`` (the roofline compared against). No scenario
package (``tests/test_layering.py``).
"""
