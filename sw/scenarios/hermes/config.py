"""The configuration of a Hermes run and the names and sizes every part of the scenario shares.

Holds :class:`HermesConfig` (one run: model, hardware, batch, DIMMs, NDP core,
trace, predictor, online adjustment, remapping and ILP parameters, checked on
construction; :meth:`HermesConfig.core` gives the NDP core's
:class:`~ndpdimm.cosim.backend.CoreConfig`), the systems and ablations a run
compares (:data:`SYSTEMS`, :data:`ABLATIONS`) and the sizes the step timing
uses (``ELEM``: bytes of an FP16 weight or activation, ``MERGE_CHUNK``: bytes
of one DIMM-Link ATOMIC_ADD of the MLP merge).

Trace parameters: see ``sw/scenarios/hermes/traces.py``; the run:
``sw/scenarios/hermes/scenario.py``.
"""

import dataclasses

from ndpdimm.sw.scenarios.base import CoreChoice

__all__ = ["HermesConfig", "SYSTEMS", "ABLATIONS", "ELEM", "MERGE_CHUNK"]

SYSTEMS = ("accelerate", "flexgen", "dejavu", "powerinfer", "ndp_dense", "hermes", "datacenter")
ABLATIONS = ("random", "offline", "online", "hermes")
MERGE_CHUNK = 4096
ELEM = 2                                   # FP16 weights and activations


@dataclasses.dataclass(frozen=True)
class HermesConfig(CoreChoice):
    """One Hermes run: model and hardware files, batch and NDP-DIMMs, prompt and decode lengths,
    the activation traces (parameters: ``sw/scenarios/hermes/traces.py``), the predictor, the
    online adjustment and remapping, the placement ILP, and the NDP core every DIMM carries
    (:class:`~ndpdimm.sw.scenarios.base.CoreChoice`: 256 units and 256 lanes unless told). The
    ``metadata`` of a field is what its ``ndpdimm hermes`` option needs (help, ...;
    ``sw/commands/options.py``); ``sw/commands/hermes.py`` names the fields that are options."""
    model: str = dataclasses.field(default="llama2-70b", metadata={
        "builtins": "models",
        "help": "a built-in model, a TOML file, or a Hugging Face config.json (or its folder: OPT, "
                "LLaMA, Mistral, Falcon) (default llama2-70b)"})
    hardware: str = dataclasses.field(default="hermes", metadata={
        "builtins": "hardware", "help": "built-in hardware or a TOML file (default hermes)"})
    gpu: str = dataclasses.field(default="", metadata={
        "builtins": "gpus",
        "help": "a built-in GPU or a TOML file in place of the hardware file's (default: the "
                "hardware file's)"})
    batch: int = dataclasses.field(default=1, metadata={
        "positive": True, "help": "sequences per decode step, 1..16"})
    dimms: int | None = dataclasses.field(default=None, metadata={      # None: the hardware file's
        "positive": True, "help": "NDP-DIMMs (default: the hardware file's)"})
    prompt: int = dataclasses.field(default=512, metadata={   # prompt tokens (prefill) = initial context
        "positive": True, "help": "prompt tokens (default 512)"})
    tokens: int = dataclasses.field(default=64, metadata={    # decode steps simulated
        "positive": True, "help": "decode steps simulated (default 64)"})
    profile_tokens: int = 64
    sample_layers: int = dataclasses.field(default=4, metadata={
        "positive": True,
        "help": "distinct layers simulated; layer l replays sample l mod S (default 4)"})
    active_fraction: float = 0.1           # per sequence and token
    skew: float = 1.2
    token_similarity: float = 0.9
    layer_correlation: float = 0.8
    copy_similarity: float | None = None   # None: copies drawn afresh per token (traces.py)
    predictor: str = dataclasses.field(default="window", metadata={
        "choices": ("paper", "window", "paper-token-only", "paper-layer-only"),
        "help": "the online predictor: 'paper' (Hermes Section IV-C: 4-bit state, top-2 table, "
                "s1 + 6 x s2 > 15), 'window' (SPEC section 5: window, Bloom filter, table, "
                "counters), or one of the paper's with one evidence only (its Fig. 13 ablations)"})
    recall_floor: float = dataclasses.field(default=0.9, metadata={
        "help": "run the sparse systems at the sparsest operating point of the predictor whose "
                "recall on the activated cold neurons is at least this (default 0.9: the model "
                "asked for is computed); 0: the predictor's own rule, however lossy"})
    predictor_window: int = 16
    coefficient: float = dataclasses.field(default=0.85, metadata={"help": "predictor coefficient"})
    adjust_window: int = 16
    adjust_swaps: int = 64                 # per layer and window
    adjust_margin: float = 0.25            # a swap needs this share of the window more firings
    remap_window: int = 32
    remap_threshold: float = 1.1
    remap_swaps: int = 64
    gpu_reserve_gb: float = 1.5            # CUDA context, activations, workspace (assumption)
    group: int = 256
    hot_share: float | None = dataclasses.field(default=None, metadata={
        "help": "force this share of MLP neurons on the GPU (default: the ILP's choice)"})
    cold_dtype: str = dataclasses.field(default="fp16", metadata={   # "int8": cold neurons in INT8
        "option": "--cold-int8", "const": "int8",
        "help": "cold neurons stored in INT8 on the DIMMs (half their DRAM traffic); the accuracy "
                "cost is measured on the reduced model"})
    solver: str = "highs"
    seed: int = 0

    def __post_init__(self):
        super().__post_init__()
        ints = {"batch": (1, 16), "prompt": (1, 1 << 20), "tokens": (1, 1 << 16), "profile_tokens": (2, 1 << 16),
                "sample_layers": (1, 4096), "predictor_window": (1, 1024),
                "adjust_window": (1, 1 << 16), "adjust_swaps": (0, 1 << 20),
                "remap_window": (1, 1 << 16), "remap_swaps": (1, 1 << 20), "group": (1, 1 << 20),
                "seed": (0, 2 ** 62)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
        if self.dimms is not None and (isinstance(self.dimms, bool) or not isinstance(self.dimms, int)
                                       or not 1 <= self.dimms <= 64):
            raise ValueError(f"dimms must be an int in [1, 64] or None, got {self.dimms!r}")
        choices = type(self).__dataclass_fields__["predictor"].metadata["choices"]
        if self.predictor not in choices:
            raise ValueError(f"predictor must be one of {', '.join(choices)}, got {self.predictor!r}")
        if self.cold_dtype not in ("fp16", "int8"):
            raise ValueError(f"cold_dtype must be 'fp16' or 'int8', got {self.cold_dtype!r}")
        if self.solver not in ("highs", "cbc"):
            raise ValueError(f"solver must be 'highs' or 'cbc', got {self.solver!r}")
        floats = {"active_fraction": (1e-4, 0.9), "skew": (0.0, 4.0),
                  "token_similarity": (0.0, 0.999), "layer_correlation": (0.0, 1.0),
                  "coefficient": (0.05, 2.0), "remap_threshold": (1.0, 100.0),
                  "adjust_margin": (0.0, 1.0), "recall_floor": (0.0, 1.0),
                  "gpu_reserve_gb": (0.0, 1e4)}
        for name, (lo, hi) in floats.items():
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                raise ValueError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
        if self.copy_similarity is not None and (isinstance(self.copy_similarity, bool) or not
                isinstance(self.copy_similarity, (int, float)) or not 0 <= self.copy_similarity <= 0.999):
            raise ValueError(f"copy_similarity must be in [0, 0.999] or None, got "
                             f"{self.copy_similarity!r}")
        if self.hot_share is not None and (isinstance(self.hot_share, bool) or not isinstance(
                self.hot_share, (int, float)) or not 0 <= self.hot_share <= 1):
            raise ValueError(f"hot_share must be in [0, 1] or None, got {self.hot_share!r}")
