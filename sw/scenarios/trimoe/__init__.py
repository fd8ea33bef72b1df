"""TriMoE: MoE layers across a GPU, an AMX CPU and NDP-DIMMs (hot, warm and cold experts).

``scenario`` (the run and its baselines), ``catalog`` (MoE shapes and the system),
``traces`` (routing traces: synthetic and recorded), ``costs`` (an expert's cost in
each domain), ``expert`` (one expert as a chain of NDP kernels), ``scheduler`` (greedy
placement, bottleneck-aware refinement), ``manager`` (EMA predictor, prefetch,
layouts, rebalancing), ``check`` (a reduced MoE with its DIMM experts executed),
``report`` (``ndpdimm trimoe``), ``bench`` (``ndpdimm bench --suite trimoe``).

May import: as ``ndpdimm.sw.scenarios``.
"""
