"""TriMoE: MoE layers across a GPU, an AMX CPU and NDP-DIMMs (hot, warm and cold experts).

The roles every scenario package shares (``sw/scenarios/base.py``): ``config`` (TriMoeConfig,
SYSTEMS), ``catalog`` (MoE shapes and the system), ``workload`` (routing traces: synthetic and
recorded, a run's traces), ``costs`` (an expert's cost in each domain; the NDP expert is the
kernel of ``sw/kernels/expert.py``), ``simulate`` (every system's MoE layers), ``scenario``
(``run(cfg, ctx) -> TriMoeResult``), ``report`` (``ndpdimm trimoe``), ``bench`` (``ndpdimm bench
--suite trimoe``). Its own parts: ``scheduler`` (greedy placement, bottleneck-aware refinement),
``manager`` (EMA predictor, prefetch, layouts, rebalancing), ``check`` (a reduced MoE with its
DIMM experts executed).

May import: as ``ndpdimm.sw.scenarios``; never another scenario package.
"""
