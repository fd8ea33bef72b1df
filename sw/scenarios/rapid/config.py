"""RAPID's configuration: the model, node, workload, controller mode and NDP tier of one run.

:class:`RapidConfig` embeds the NDP core choice (``sw/scenarios/base.py``); a bad value raises
``ValueError`` naming the field when it is made, before anything runs. :func:`systems_for`
names the configurations a run compares (``scenario.py`` describes them).
"""

import dataclasses
import math

from ndpdimm.sw.scenarios.base import CoreChoice
from ndpdimm.sw.scenarios.rapid.catalog import KV_PATHS
from ndpdimm.sw.scenarios.rapid.workload import PATTERNS

__all__ = ["RapidConfig", "systems_for", "MODES", "DEFAULT_TPOT_SLO_S", "BASE_SYSTEMS"]

MODES = ("static", "dynamic-power", "dynamic", "all")
DEFAULT_TPOT_SLO_S = 0.05
BASE_SYSTEMS = ("coalesced", "static-4p4d", "static-4p750-4d450")


@dataclasses.dataclass(frozen=True)
class RapidConfig(CoreChoice):
    """One RAPID run: the NDP tier's core (:class:`~ndpdimm.sw.scenarios.base.CoreChoice`; ``units``
    None: 256 on the model, 16 on the RTL; ``act_lanes`` None: ``min(units, 256)``) and the fields
    below; a bad value raises ``ValueError`` naming the field."""
    units: int | None = None                # GEMV units of the NDP core (None: 256 model, 16 rtl)
    act_lanes: int | None = None            # activation lanes (None: min(units, 256))
    model: str = "llama3.1-8b"
    node: str = "mi300x-node"
    workload: str = "mixed"
    pattern: str = "bursty"
    duration_s: float = 600.0
    rate_scale: float = 1.0
    seed: int = 0
    trace: str | None = None                # a recorded trace file instead of the generator
    kv_path: str = "direct"
    mode: str = "dynamic"
    ndp: bool = True                        # also run the NDP-DIMM decode tier variant(s)
    ndp_dimms: int | None = None            # NDP-DIMMs in the node (None: the node file's)
    ttft_slo_s: float | None = None         # None: from the baseline (see the module docstring)
    tpot_slo_s: float = DEFAULT_TPOT_SLO_S

    def __post_init__(self):
        super().__post_init__()
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern must be one of {', '.join(PATTERNS)}, got {self.pattern!r}")
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
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



def systems_for(mode: str, ndp: bool) -> list:
    """The configurations a run compares (see the module docstring)."""
    controlled = {"static": [], "dynamic-power": ["dynamic-power"], "dynamic": ["dynamic"],
                  "all": ["dynamic-power", "dynamic"]}[mode]
    out = list(BASE_SYSTEMS) + controlled
    if ndp:
        out += [f"{s}+ndp" for s in (controlled or ["static-4p4d"])]
    return out
