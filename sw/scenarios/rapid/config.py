"""RAPID's configuration: the model, node, workload, controller mode and NDP tier of one run.

:class:`RapidConfig` embeds the NDP core choice (``sw/scenarios/base.py``); a bad value raises
``ValueError`` naming the field when it is made, before anything runs. :func:`systems_for`
names the configurations a run compares (``scenario.py`` describes them); ``time_shift`` adds
each controlled system again with the controller's power time-shifting (``<system>+shift``,
``timeshift.py``), so one run compares the two on the same trace.
"""

import dataclasses
import math

from ndpdimm.sw.scenarios.base import BACKENDS, CoreChoice
from ndpdimm.sw.scenarios.rapid.catalog import KV_PATHS
from ndpdimm.sw.scenarios.rapid.workload import PATTERNS

__all__ = ["RapidConfig", "systems_for", "MODES", "DEFAULT_TPOT_SLO_S", "BASE_SYSTEMS",
           "TIME_SHIFT_SUFFIX"]

MODES = ("static", "dynamic-power", "dynamic", "all")
DEFAULT_TPOT_SLO_S = 0.05
BASE_SYSTEMS = ("coalesced", "static-4p4d", "static-4p750-4d450")
#: the suffix of a controlled system run with power time-shifting
TIME_SHIFT_SUFFIX = "+shift"


@dataclasses.dataclass(frozen=True)
class RapidConfig(CoreChoice):
    """One RAPID run: the NDP tier's core (:class:`~ndpdimm.sw.scenarios.base.CoreChoice`; ``units``
    None: 256 on the model, 16 on the RTL; ``act_lanes`` None: ``min(units, 256)``) and the fields
    below; a bad value raises ``ValueError`` naming the field. The ``metadata`` of a field is what
    its ``ndpdimm rapid`` option needs (help, choices, ...; ``sw/commands/options.py``);
    ``sw/commands/rapid.py`` names the fields that are options."""
    backend: str = dataclasses.field(default="model", metadata={
        "choices": BACKENDS,
        "help": "where the NDP attention cycles come from (rtl: the Verilated core, 16 units by "
                "default; default model)"})
    units: int | None = dataclasses.field(default=None, metadata={   # None: 256 model, 16 rtl
        "positive": True, "help": "GEMV units of the NDP core (default 256 on model, 16 on rtl)"})
    act_lanes: int | None = None            # activation lanes (None: min(units, 256))
    model: str = dataclasses.field(default="llama3.1-8b", metadata={
        "builtins": "serving_models",
        "help": "a built-in serving model, a TOML file, or a Hugging Face config.json (or its "
                "folder) (default llama3.1-8b)"})
    node: str = dataclasses.field(default="mi300x-node", metadata={
        "builtins": "rapid", "help": "a built-in node or a TOML file (default mi300x-node)"})
    workload: str = dataclasses.field(default="mixed", metadata={
        "builtins": "rapid_workloads",
        "help": "a built-in workload or a TOML file (default mixed)"})
    pattern: str = dataclasses.field(default="bursty", metadata={
        "choices": PATTERNS, "help": "arrival pattern of the generated trace (default bursty)"})
    duration_s: float = dataclasses.field(default=600.0, metadata={
        "option": "--duration", "positive": True,
        "help": "seconds of generated trace (default 600)"})
    rate_scale: float = dataclasses.field(default=1.0, metadata={
        "positive": True, "option_default": None,   # given or not: --trace refuses it given
        "help": "multiply the workload's arrival rates (default 1; not for --trace)"})
    seed: int = dataclasses.field(default=0, metadata={"help": "trace generator seed (default 0)"})
    trace: str | None = dataclasses.field(default=None, metadata={   # instead of the generator
        "metavar": "FILE",
        "help": "replay a recorded CSV trace instead of generating one (--workload, --pattern "
                "and --duration then do not apply)"})
    kv_path: str = dataclasses.field(default="direct", metadata={
        "choices": KV_PATHS,
        "help": "how KV caches move from prefill to decode GPUs (default direct)"})
    mode: str = dataclasses.field(default="dynamic", metadata={
        "choices": MODES,
        "help": "controlled systems run besides the static ones: dynamic-power (power moves), "
                "dynamic (power and roles), all (both), static (none); default dynamic"})
    time_shift: bool = dataclasses.field(default=False, metadata={
        "help": "also run each controlled system with power time-shifting (as <system>+shift): "
                "in low-load periods (prefill GPUs under half busy and decode under half its "
                "SLO over the window; the node file's [time_shift]) the controller raises the "
                "prefill GPUs' caps to their power curve's saturation with decode's power above "
                "its own (700 and 500 W on mi300x-node), which decode cannot use; when decode's pressure rises it gets its caps back within 0.4 s, "
                "when prefill's load rises the controller carries on from the raised caps; "
                "needs a --mode with a controller (default off)"})
    ndp: bool = dataclasses.field(default=True, metadata={   # also run the NDP-DIMM decode tier
        "help": "do not run the NDP-DIMM decode tier"})
    ndp_dimms: int | None = dataclasses.field(default=None, metadata={   # None: the node file's
        "positive": True,
        "help": "NDP-DIMMs in the node (default: the node file's, 32); their peak power is taken "
                "out of the node budget"})
    ttft_slo_s: float | None = dataclasses.field(default=None, metadata={
        "option": "--ttft-slo", "positive": True, "metavar": "SECONDS",    # None: from the baseline
        "help": "TTFT SLO (default: p90 TTFT of static-4p4d on the steady workload)"})
    tpot_slo_s: float = dataclasses.field(default=DEFAULT_TPOT_SLO_S, metadata={
        "option": "--tpot-slo", "positive": True, "metavar": "SECONDS", "option_default": None,
        "help": "TPOT SLO (default 0.05)"})

    def __post_init__(self):
        super().__post_init__()
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if not isinstance(self.time_shift, bool):
            raise ValueError(f"time_shift must be True or False, got {self.time_shift!r}")
        if self.time_shift and self.mode == "static":
            raise ValueError("time_shift is an option of the dynamic controller: it needs mode "
                             "dynamic-power, dynamic or all, got mode 'static' (no controller)")
        if self.kv_path not in KV_PATHS:
            raise ValueError(f"kv_path must be one of {', '.join(KV_PATHS)}, got {self.kv_path!r}")
        for name in ("duration_s", "rate_scale"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
                raise ValueError(f"{name} must be a positive number, got {v!r}")
        for name in ("ttft_slo_s", "tpot_slo_s"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not 0 < v < math.inf):
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.ndp_dimms is not None and (isinstance(self.ndp_dimms, bool) or not isinstance(
                self.ndp_dimms, int) or not 1 <= self.ndp_dimms <= 1024):
            raise ValueError(f"ndp_dimms must be an int in [1, 1024] or None, got "
                             f"{self.ndp_dimms!r}")



def systems_for(mode: str, ndp: bool, time_shift: bool = False) -> list:
    """The configurations a run compares (see the module docstring)."""
    controlled = {"static": [], "dynamic-power": ["dynamic-power"], "dynamic": ["dynamic"],
                  "all": ["dynamic-power", "dynamic"]}[mode]
    out = list(BASE_SYSTEMS) + controlled
    if time_shift:
        out += [f"{s}{TIME_SHIFT_SUFFIX}" for s in controlled]
    if ndp:
        out += [f"{s}+ndp" for s in (controlled or ["static-4p4d"])]
    return out
