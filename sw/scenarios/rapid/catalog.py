"""The RAPID scenario's catalogue: the serving node, its power curves and the NDP-DIMM tier.

Node (``sw/configs/rapid/<name>.toml``): the GPUs and the node power budget, each phase's
performance-vs-power-cap curve (:class:`PhasePower`), the three KV-transfer paths, the KV ring,
the controller's defaults, the thresholds of its power time-shifting (:class:`TimeShiftConfig`)
and the NDP-DIMM decode tier. Every number is written
``{ value = ..., source = "..." }`` (an assumption says so in its source). The model comes from ``sw/configs/serving_models``
(:func:`load_serving_model`, the shapes of :class:`~ndpdimm.sw.scenarios.catalog.ModelShape`).

The file rules are those of :mod:`ndpdimm.sw.scenarios.catalog` (``hw/config_file.py``): every
key required, no other accepted; a missing, unknown or mistyped key, a number without its
source, NaN or infinity, or an impossible value
(a curve whose saturation lies below its floor, a cap range outside the budget, fewer GPUs than
two phases need, a time-shifting threshold outside its range) raises :class:`~ndpdimm.sw.scenarios.catalog.CatalogError` naming the file and the key.
"""

import dataclasses

from ndpdimm.sw.scenarios.catalog import (
    CatalogError,
    ModelShape,
    available_names,
    catalog_path,
    load_catalog,
    load_model,
)

__all__ = ["NodePower", "ServingGpu", "PhasePower", "KvPath", "KvRing", "ControllerConfig",
           "TimeShiftConfig", "NdpTier", "ServingNode", "KV_PATHS", "load_node", "list_nodes", "load_serving_model",
           "list_serving_models", "CatalogError"]

_NODES, _MODELS = "rapid", "serving_models"
KV_PATHS = ("host", "p2p", "direct")


@dataclasses.dataclass(frozen=True)
class NodePower:
    gpus: int
    power_budget_w: float
    gpu_min_cap_w: float
    gpu_max_cap_w: float
    gpu_idle_w: float


@dataclasses.dataclass(frozen=True)
class ServingGpu:
    name: str
    peak_tflops: float
    hbm_gb: float
    hbm_tb_s: float
    prefill_mfu: float
    decode_bw_efficiency: float
    decode_mfu: float
    kv_reserve: float
    prefill_overhead_s: float
    decode_overhead_s: float
    max_prefill_tokens: int
    max_decode_batch: int


@dataclasses.dataclass(frozen=True)
class PhasePower:
    """A phase's relative speed at power cap ``P`` (1.0 from ``p_sat_w`` up)::

        speed(P) = speed_at_min + (1 - speed_at_min) * x ** gamma,
        x = (clip(P, p_min_w, p_sat_w) - p_min_w) / (p_sat_w - p_min_w)

    and the power a busy GPU draws: ``min(cap, busy_draw_max_w)``."""
    p_min_w: float
    p_sat_w: float
    speed_at_min: float
    gamma: float
    busy_draw_max_w: float

    def speed(self, cap_w: float) -> float:
        x = (min(max(cap_w, self.p_min_w), self.p_sat_w) - self.p_min_w) / (self.p_sat_w
                                                                            - self.p_min_w)
        return self.speed_at_min + (1.0 - self.speed_at_min) * x ** self.gamma

    def busy_draw_w(self, cap_w: float) -> float:
        return min(cap_w, self.busy_draw_max_w)

    @property
    def range_gain(self) -> float:
        """Speed at saturation over speed at the floor (SPEC: ~1.8x prefill, ~1.3x decode)."""
        return 1.0 / self.speed_at_min


@dataclasses.dataclass(frozen=True)
class KvPath:
    bandwidth_gb_s: float
    latency_s: float

    def seconds(self, nbytes: float) -> float:
        return self.latency_s + nbytes / (self.bandwidth_gb_s * 1e9)


@dataclasses.dataclass(frozen=True)
class KvRing:
    slots: int


@dataclasses.dataclass(frozen=True)
class ControllerConfig:
    tick_s: float
    window_s: float
    power_step_w: float
    power_cooldown_s: float
    role_cooldown_s: float
    power_command_s: float
    power_settle_s: float
    role_switch_s: float
    min_gpus_per_phase: int
    act_above: float
    donate_below: float
    baseline_percentile: float


@dataclasses.dataclass(frozen=True)
class TimeShiftConfig:
    """When the controller's power time-shifting (``sw/scenarios/rapid/timeshift.py``) counts the
    load as low: the prefill GPUs busy less than ``low_utilisation`` of the monitoring window and
    decode's pressure (latency / SLO) under ``low_pressure``."""
    low_utilisation: float
    low_pressure: float


@dataclasses.dataclass(frozen=True)
class NdpTier:
    dimms: int
    capacity_gb: float
    peak_bandwidth_gb_s: float
    gpu_link_gb_s: float
    per_layer_overhead_s: float


@dataclasses.dataclass(frozen=True)
class ServingNode:
    name: str
    node: NodePower
    gpu: ServingGpu
    prefill_power: PhasePower
    decode_power: PhasePower
    kv_host: KvPath
    kv_p2p: KvPath
    kv_direct: KvPath
    ring: KvRing
    controller: ControllerConfig
    time_shift: TimeShiftConfig
    ndp: NdpTier

    def kv_path(self, name: str) -> KvPath:
        if name not in KV_PATHS:
            raise ValueError(f"kv path must be one of {', '.join(KV_PATHS)}, got {name!r}")
        return getattr(self, f"kv_{name}")

    def phase_power(self, phase: str) -> PhasePower:
        if phase not in ("prefill", "decode"):
            raise ValueError(f"phase must be 'prefill' or 'decode', got {phase!r}")
        return self.prefill_power if phase == "prefill" else self.decode_power


_MAY_BE_ZERO = ("prefill_overhead_s", "decode_overhead_s", "latency_s", "power_cooldown_s",
                "role_cooldown_s", "power_command_s", "power_settle_s", "role_switch_s",
                "per_layer_overhead_s", "gpu_idle_w")
_FRACTIONS = ("prefill_mfu", "decode_bw_efficiency", "decode_mfu", "speed_at_min")


def list_nodes() -> list:
    """Names of the built-in RAPID node files."""
    return available_names(_NODES)


def list_serving_models() -> list:
    """Names of the built-in serving model files."""
    return available_names(_MODELS)


def load_serving_model(name_or_path="llama3.1-8b") -> ModelShape:
    """A serving model's shapes (built-in name or TOML path); :class:`CatalogError` on a bad
    file (the checks of :func:`~ndpdimm.sw.scenarios.catalog.load_model`)."""
    return load_model(name_or_path, folder=_MODELS)


def load_node(name_or_path="mi300x-node") -> ServingNode:
    """The serving node (built-in name or TOML path); :class:`CatalogError` on a bad file."""
    node = load_catalog(_NODES, name_or_path, ServingNode, what="RAPID node", stem_as="name",
                        may_be_zero=_MAY_BE_ZERO)
    path = catalog_path(_NODES, name_or_path, what="RAPID node")
    _check(path, node)
    return node


def _check(path, n: ServingNode) -> None:
    def bad(section, msg):
        raise CatalogError(f"{path} [{section}]: {msg}")
    p, c = n.node, n.controller
    if p.gpus < 2 * c.min_gpus_per_phase:
        bad("node", f"gpus ({p.gpus}) must allow min_gpus_per_phase "
                    f"({c.min_gpus_per_phase}) for each of the two phases")
    if not p.gpu_min_cap_w < p.gpu_max_cap_w:
        bad("node", f"gpu_min_cap_w ({p.gpu_min_cap_w}) must be below gpu_max_cap_w "
                    f"({p.gpu_max_cap_w})")
    if p.gpus * p.gpu_min_cap_w > p.power_budget_w:
        bad("node", f"{p.gpus} GPUs at gpu_min_cap_w ({p.gpu_min_cap_w} W) exceed "
                    f"power_budget_w ({p.power_budget_w} W)")
    for name in ("gpu", "prefill_power", "decode_power"):
        table = getattr(n, name)
        for f in _FRACTIONS:
            if hasattr(table, f) and not getattr(table, f) <= 1:
                bad(name, f"{f} must be in (0, 1], got {getattr(table, f)!r}")
    if not n.gpu.kv_reserve < 1:
        bad("gpu", f"kv_reserve must be below 1, got {n.gpu.kv_reserve!r}")
    for name in ("prefill_power", "decode_power"):
        ph = getattr(n, name)
        if not ph.p_min_w < ph.p_sat_w:
            bad(name, f"p_sat_w ({ph.p_sat_w}) must be above p_min_w ({ph.p_min_w})")
    if not c.donate_below < c.act_above:
        bad("controller", f"donate_below ({c.donate_below}) must be below act_above "
                          f"({c.act_above}): the gap is the hysteresis")
    if not 0 < c.baseline_percentile <= 100:
        bad("controller", f"baseline_percentile must be in (0, 100], got {c.baseline_percentile!r}")
    if c.power_step_w > p.gpu_max_cap_w - p.gpu_min_cap_w:
        bad("controller", f"power_step_w ({c.power_step_w}) is larger than a GPU's cap range")
    ts = n.time_shift
    if not 0 < ts.low_utilisation < 1:
        bad("time_shift", f"low_utilisation must be in (0, 1), got {ts.low_utilisation!r}")
    if not 0 < ts.low_pressure <= c.donate_below:
        bad("time_shift", f"low_pressure must be in (0, controller.donate_below = "
                          f"{c.donate_below}], got {ts.low_pressure!r}: a load the controller "
                          f"may take power from cannot count as low")
