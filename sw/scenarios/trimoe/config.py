"""TriMoE's configuration: one run's model, hardware, batch, trace, predictor and systems.

:class:`TriMoeConfig` embeds the NDP core choice (``sw/scenarios/base.py``); a bad value raises
``ValueError`` naming the field when the configuration is made, before anything runs.
:data:`SYSTEMS` are the compared systems, :data:`DOMAINS` the devices each may schedule on and
:data:`ROUTED_DOMAINS` those its routed experts may use.
"""

import dataclasses

from ndpdimm.sw.scenarios.base import CoreChoice
from ndpdimm.sw.scenarios.trimoe.workload import RoutingTraceConfig

__all__ = ["TriMoeConfig", "SYSTEMS", "DOMAINS", "ROUTED_DOMAINS"]

SYSTEMS = ("gpu_only", "gpu_cpu", "cpu_routed", "gpu_ndp", "trimoe")
#: the devices each system's scheduler may use
DOMAINS = {"gpu_only": ("gpu",), "gpu_cpu": ("gpu", "cpu"), "cpu_routed": ("gpu", "cpu"),
           "gpu_ndp": ("gpu", "ndp"), "trimoe": ("gpu", "cpu", "ndp")}
#: the domains a *routed* expert may run on (shared experts always run on the GPU): every
#: domain of the system, except in ``cpu_routed``, where the GPU computes only the shared experts
#: (and keeps no routed expert in its memory) and the AMX CPU every routed one
#: (KTransformers' placement)
ROUTED_DOMAINS = {**DOMAINS, "cpu_routed": ("cpu",)}


@dataclasses.dataclass(frozen=True)
class TriMoeConfig(CoreChoice):
    """TriMoE's run parameters: the MoE model and the GPU + AMX CPU + DIMMs system, tokens per step
    and steps, the routing trace (parameters: ``sw/scenarios/trimoe/workload.py``), the EMA
    predictor and prefetch threshold, cold-expert rebalancing, DIMM-Link errors, the systems
    compared with their refinement and layout management, and each DIMM's NDP core
    (:class:`~ndpdimm.sw.scenarios.base.CoreChoice`, 256 units and lanes by default). The
    ``metadata`` of a field is what its ``ndpdimm trimoe`` option needs (help, ...;
    ``sw/commands/options.py``); ``sw/commands/trimoe.py`` names the fields that are options."""
    model: str = dataclasses.field(default="deepseek-v2", metadata={
        "builtins": "moe_models",
        "help": "a built-in MoE model, a TOML file, or a Hugging Face config.json (or its folder: "
                "Mixtral, Qwen-MoE, DeepSeek-V2/V3) (default deepseek-v2)"})
    hardware: str = dataclasses.field(default="h100-amx", metadata={
        "builtins": "trimoe_hardware",
        "help": "built-in hardware or a TOML file (default h100-amx)"})
    batch: int = dataclasses.field(default=512, metadata={   # the paper decodes 256..768 (review)
        "positive": True, "help": "tokens per step (default 512)"})
    steps: int = dataclasses.field(default=16, metadata={
        "positive": True, "help": "steps simulated (default 16)"})
    profile_steps: int = dataclasses.field(default=8, metadata={
        "positive": True,
        "help": "steps of the profiling trace that warm the EMA and GPU residency (default 8)"})
    sample_layers: int = dataclasses.field(default=4, metadata={
        "positive": True, "help": "MoE layers simulated (default 4)"})
    trace: str | None = dataclasses.field(default=None, metadata={   # instead of the generator
        "help": "replay a recorded routing trace (.npz)"})
    hot_fraction: float = 0.05
    hot_mass: float = dataclasses.field(default=0.45, metadata={
        "help": "share of routed tokens to hot experts"})
    warm_fraction: float = 0.20
    warm_mass: float = 0.35
    skew: float = dataclasses.field(default=1.0, metadata={
        "help": "Zipf exponent within each expert class"})
    temporal_correlation: float = 0.9
    volatility: float = 0.5
    layer_variation: float = 0.5
    alpha: float = dataclasses.field(default=0.3, metadata={"help": "EMA coefficient (default 0.3)"})
    theta_hot: float = dataclasses.field(default=0.7, metadata={
        "help": "prefetch when EMA > theta x max EMA (default 0.7)"})
    rebalance_every: int = 4
    rebalance_moves: int = 4
    gpu_staging_experts: int = 4           # GPU buffers that missed experts stream through
    link_ber: float = dataclasses.field(default=0.0, metadata={
        "help": "DIMM-Link bit-error rate for relayouts and moves (model; default 0)"})
    seed: int = 0
    systems: tuple = dataclasses.field(default=SYSTEMS, metadata={
        "help": f"comma-separated subset of {','.join(SYSTEMS)} (default all)"})
    # systems whose scheduler runs the bottleneck-aware refinement after the greedy pass (the
    # others keep the greedy placement: prior systems, as TriMoE's ablation removes it)
    refinement: tuple = SYSTEMS
    # trimoe only: manage the layouts while running (relayout into a DIMM inside a task, relayout
    # back to striped, rebalancing); False keeps the initial plan's layout for the whole run
    dynamic_layout: bool = True

    def __post_init__(self):
        super().__post_init__()
        for name in ("batch", "steps", "profile_steps", "sample_layers", "rebalance_every",
                     "gpu_staging_experts"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        if isinstance(self.rebalance_moves, bool) or not isinstance(self.rebalance_moves, int) \
                or self.rebalance_moves < 0:
            raise ValueError(f"rebalance_moves must be an int >= 0, got {self.rebalance_moves!r}")
        for name in ("alpha", "theta_hot"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {v!r}")
        if isinstance(self.link_ber, bool) or not isinstance(self.link_ber, (int, float)) \
                or not 0 <= self.link_ber < 1e-2:
            raise ValueError(f"link_ber must be in [0, 1e-2), got {self.link_ber!r}")
        bad = [s for s in self.systems if s not in SYSTEMS]
        if bad or not self.systems:
            raise ValueError(f"systems must be a non-empty subset of {SYSTEMS}, got {self.systems!r}")
        if not isinstance(self.refinement, tuple) or any(s not in SYSTEMS for s in self.refinement):
            raise ValueError(f"refinement must be a tuple of systems out of {SYSTEMS}, "
                             f"got {self.refinement!r}")
        if not isinstance(self.dynamic_layout, bool):
            raise ValueError(f"dynamic_layout must be a bool, got {self.dynamic_layout!r}")

    def trace_config(self, model, steps, seed) -> RoutingTraceConfig:
        return RoutingTraceConfig(
            n_experts=model.experts, top_k=model.top_k, layers=self.sample_layers,
            tokens=self.batch, steps=steps, hot_fraction=self.hot_fraction,
            hot_mass=self.hot_mass, warm_fraction=self.warm_fraction, warm_mass=self.warm_mass,
            skew=self.skew, temporal_correlation=self.temporal_correlation,
            volatility=self.volatility, layer_variation=self.layer_variation, seed=seed)
