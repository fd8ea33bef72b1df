"""TriMoE's workload: MoE routing traces, which experts each token is routed to, and a run's traces.

A trace is an integer array ``experts[step, layer, token, slot]`` (int16): in
every MoE layer each token of a step's batch goes to ``top_k`` distinct
experts out of ``n_experts``. A token's experts are a set; recorded traces
list them by descending router logit. :meth:`RoutingTrace.loads` turns a trace
into ``[step, layer, expert]`` token counts, what expert placement and load
balancing work from. A trace is stored in one ``.npz`` file
(:meth:`RoutingTrace.save` / :meth:`RoutingTrace.load`): the ``experts``
array, ``n_experts``, a format name and version, and ``meta`` (where the
trace came from, the generator parameters) as a JSON string.

Two sources:

* :func:`synthetic_routing` - a generator whose properties are parameters
  (:class:`RoutingTraceConfig`). Experts have popularity ranks ``r = 0 ..
  n_experts - 1``:

  - **classes**: ranks ``0 .. n_hot - 1`` are hot, the next ``n_warm``
    warm, the rest cold; the classes carry the masses ``m_hot = hot_mass``,
    ``m_warm = warm_mass``, ``m_cold = 1 - hot_mass - warm_mass`` of the
    routing slots. A token takes an expert at most once, so a class needs
    ``n_c >= top_k m_c`` experts: ``n_c = max(round(fraction_c n_experts),
    ceil(top_k m_c))`` for hot and warm (a fraction > 0 with mass 0 may give
    an empty class; a mass > 0 with fraction 0 is an error), and the cold
    experts, the rest, must be enough for their mass;
  - **skew**: within its class, rank ``r`` (``j``-th of the class) has the
    base popularity ``b_r = m_c (j + 1)^-skew / sum_{j' < n_c} (j' + 1)^-skew``;
  - **layer variation**: layer ``l`` maps ranks to experts by a permutation
    ``pi_l``: a base permutation ``pi`` with ``round(layer_variation *
    n_experts)`` randomly chosen positions reshuffled among themselves (0:
    every layer ranks the experts alike, 1: independent rankings);
    :func:`expert_ranking` gives ``pi_l``;
  - **drift**: each rank's log-popularity follows an AR(1) process over the
    steps, ``z_0 ~ volatility N(0, 1)``, ``z_{s+1} = rho z_s + sqrt(1 - rho^2)
    volatility N(0, 1)`` with ``rho = temporal_correlation`` (stationary,
    std-dev ``volatility``), independent per layer and rank; the popularity
    at step ``s`` is ``p_r = m_c b_r e^z_r / sum_{r' in c} b_r' e^z_r'``:
    loads wander within a class, while the class masses hold at every step
    (a study sweeping ``hot_mass`` gets that share of slots, not only on
    average);
  - **slots**: expert ``r`` is in a token's set with probability ``lambda_r
    = min(1, a_c p_r)``, ``a_c`` such that ``sum_{r in c} lambda_r = top_k
    m_c`` (popularity above ``1 / top_k`` is capped, the excess goes to the
    rest of the class);
  - **tokens**: each token draws its ``top_k`` experts by Pareto order
    sampling (Rosen 1997): the experts with ``lambda = 1``, then the largest
    keys ``lambda_r / (1 - lambda_r) * U_r / (1 - U_r)``, ``U_r ~ U(0, 1)``
    i.i.d. Its inclusion probabilities are ``lambda_r`` to within ~0.002
    (measured over 200k tokens). Drawing in proportion to popularity without
    replacement (multinomial, Gumbel top-k) would flatten the load instead:
    with the default classes an expert meant for 99 % of the tokens lands in
    ~70 % and the hot share comes out at 0.40 instead of 0.45.

  Three independent random streams of ``seed`` drive the structure (classes,
  rankings), the drift and the token draws, so a longer trace starts with
  the steps of a shorter one. ``meta`` holds the configuration, the class
  sizes and the realised share of slots per class.

* :func:`record_routing` - forward hooks on the router ("gate") modules of
  any torch model: for every batch and gate, each token's ``top_k`` largest
  router logits give its experts (one gate = one MoE layer, one batch = one
  step).

Bad input (configuration values out of range, a file that is not a routing
trace, an invalid trace) raises :class:`TraceError` naming the field or file
and the bad value.
"""

import dataclasses
import json
import math
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["TraceError", "RoutingTraceConfig", "RoutingTrace", "synthetic_routing",
           "expert_ranking", "record_routing", "FORMAT_NAME", "FORMAT_VERSION", "CLASSES",
           "MAX_EXPERTS"]

FORMAT_NAME = "ndpdimm.moe_routing"
FORMAT_VERSION = 1
CLASSES = ("hot", "warm", "cold")
#: ``experts`` is int16, so this many experts at most.
MAX_EXPERTS = np.iinfo(np.int16).max
_FILE_KEYS = ("format", "version", "n_experts", "experts", "meta")
#: Slack for sums of float parameters (0.45 + 0.55 is not exactly 1).
_EPS = 1e-9


class TraceError(ValueError):
    """A bad routing trace, trace file or generator configuration."""


def _require_int(name, value, low, high=None):
    is_int = isinstance(value, int) and not isinstance(value, bool)
    if not is_int or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise TraceError(f"{name} must be an integer {bound}, got {value!r}")


def _require_real(name, value, low, high, *, high_open=False):
    ok = (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and low <= value and (value < high if high_open else value <= high))
    if not ok:
        raise TraceError(f"{name} must be a number in [{low}, {high}{')' if high_open else ']'}, "
                         f"got {value!r}")


@dataclasses.dataclass(frozen=True)
class RoutingTraceConfig:
    """Parameters of :func:`synthetic_routing` (see the module docstring for the model)."""
    n_experts: int = 160
    top_k: int = 6
    layers: int = 4                     # MoE layers in the trace
    tokens: int = 512                   # tokens per step (the batch; TriMoE uses 64..768)
    steps: int = 16                     # decode/prefill steps
    hot_fraction: float = 0.05          # share of experts that are hot
    hot_mass: float = 0.45              # share of routing slots (token x top_k) to hot experts
    warm_fraction: float = 0.20
    warm_mass: float = 0.35             # the rest, 1 - hot_mass - warm_mass, goes to cold experts
    skew: float = 1.0                   # Zipf exponent of popularity within a class (0: uniform)
    temporal_correlation: float = 0.9   # AR(1) coefficient of the log-popularity between steps
    volatility: float = 0.5             # std-dev of the log-popularity noise
    layer_variation: float = 0.5        # 0: every layer ranks the experts alike, 1: independently
    seed: int = 0

    def __post_init__(self):
        _require_int("n_experts", self.n_experts, 1, MAX_EXPERTS)
        _require_int("top_k", self.top_k, 1, self.n_experts)
        for name in ("layers", "tokens", "steps"):
            _require_int(name, getattr(self, name), 1)
        _require_int("seed", self.seed, 0)
        for name in ("hot_fraction", "hot_mass", "warm_fraction", "warm_mass", "layer_variation"):
            _require_real(name, getattr(self, name), 0, 1)
        # beyond 10 the popularity is degenerate already (and exp() of the noise stays finite)
        _require_real("skew", self.skew, 0, 10)
        _require_real("volatility", self.volatility, 0, 10)
        _require_real("temporal_correlation", self.temporal_correlation, 0, 1, high_open=True)
        if self.hot_fraction + self.warm_fraction > 1 + _EPS:
            raise TraceError(f"hot_fraction + warm_fraction must be <= 1, got {self.hot_fraction!r}"
                             f" + {self.warm_fraction!r}")
        if self.hot_mass + self.warm_mass > 1 + _EPS:
            raise TraceError(f"hot_mass + warm_mass must be <= 1, got {self.hot_mass!r} + "
                             f"{self.warm_mass!r}")
        sizes, masses = self.class_sizes, self.class_masses
        if sizes["cold"] < 0:
            raise TraceError(f"hot_fraction {self.hot_fraction!r} and warm_fraction "
                             f"{self.warm_fraction!r} make {sizes['hot']} + {sizes['warm']} "
                             f"experts, more than n_experts = {self.n_experts}")
        for c in CLASSES:
            if masses[c] > 0 and sizes[c] == 0:
                raise TraceError(f"the {c} class has mass {masses[c]:g} but no experts: raise its "
                                 "fraction or lower the other fractions")
            if self.top_k * masses[c] > sizes[c] + _EPS:
                raise TraceError(f"the {c} class has {sizes[c]} expert(s), too few for mass "
                                 f"{masses[c]:g} at top_k = {self.top_k} (a token picks an expert "
                                 f"once, so at most {sizes[c] / self.top_k:.3g} of the slots)")

    @property
    def class_sizes(self) -> dict:
        """Experts per class, ``{"hot": n, "warm": n, "cold": n}`` (the module docstring has the
        rule); the cold count is negative when the fractions ask for more than ``n_experts``."""
        masses = self.class_masses

        def size(c, fraction):
            if fraction == 0:
                return 0
            # the fewest experts that hold the class's mass: a token takes an expert once
            return max(round(fraction * self.n_experts), math.ceil(self.top_k * masses[c] - _EPS))
        hot, warm = size("hot", self.hot_fraction), size("warm", self.warm_fraction)
        return {"hot": hot, "warm": warm, "cold": self.n_experts - hot - warm}

    @property
    def class_masses(self) -> dict:
        """Share of routing slots per class."""
        return {"hot": self.hot_mass, "warm": self.warm_mass,
                "cold": max(0.0, 1.0 - self.hot_mass - self.warm_mass)}


@dataclasses.dataclass(frozen=True, eq=False)   # eq=False: == on arrays has no single truth value
class RoutingTrace:
    """``experts[step, layer, token, slot]`` (int16, read-only), ``n_experts`` and where the trace
    came from (``meta``, JSON-able). Construction validates (:meth:`check`)."""
    experts: np.ndarray
    n_experts: int
    meta: dict

    def __post_init__(self):
        self.check()
        experts = self.experts.astype(np.int16)      # always a copy: the caller keeps theirs
        experts.setflags(write=False)
        object.__setattr__(self, "experts", experts)

    @property
    def steps(self) -> int:
        return self.experts.shape[0]

    @property
    def layers(self) -> int:
        return self.experts.shape[1]

    @property
    def tokens(self) -> int:
        return self.experts.shape[2]

    @property
    def top_k(self) -> int:
        return self.experts.shape[3]

    def check(self) -> None:
        """``TraceError`` unless ``experts`` is a 4-D integer array of ids in ``[0, n_experts)``,
        distinct within each token, with ``top_k <= n_experts`` and ``meta`` a JSON-able dict."""
        e = self.experts
        if not isinstance(e, np.ndarray) or e.dtype.kind not in "iu":
            raise TraceError("experts must be an integer array [step, layer, token, slot], got "
                             f"{getattr(e, 'dtype', type(e).__name__)}")
        if e.ndim != 4 or e.size == 0:
            raise TraceError(f"experts must be a non-empty 4-D array [step, layer, token, slot], "
                             f"got shape {e.shape}")
        _require_int("n_experts", self.n_experts, 1, MAX_EXPERTS)
        if e.shape[3] > self.n_experts:
            raise TraceError(f"top_k = {e.shape[3]} experts per token, more than n_experts = "
                             f"{self.n_experts}")
        bad = (e < 0) | (e >= self.n_experts)
        if bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise TraceError(f"expert id {int(e[where])} at [step, layer, token, slot] "
                             f"{list(where)} is outside [0, {self.n_experts})")
        ordered = np.sort(e, axis=-1)
        repeated = ordered[..., 1:] == ordered[..., :-1]
        if repeated.any():
            where = tuple(int(i) for i in np.argwhere(repeated)[0])
            raise TraceError(f"expert {int(ordered[where])} appears twice in the token at "
                             f"[step, layer, token] {list(where[:3])}")
        if not isinstance(self.meta, dict):
            raise TraceError(f"meta must be a dict, got {type(self.meta).__name__}")
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as err:
            raise TraceError(f"meta must be JSON-able: {err}") from None

    def loads(self) -> np.ndarray:
        """``[step, layer, expert]`` (int32): tokens routed to each expert."""
        return _count(self.experts, self.n_experts)

    def save(self, path) -> None:
        """Write the trace to ``path`` exactly (no suffix added), an ``.npz`` archive."""
        with open(path, "wb") as f:
            np.savez_compressed(f, format=np.array(FORMAT_NAME), version=np.array(FORMAT_VERSION),
                                n_experts=np.array(self.n_experts), experts=self.experts,
                                meta=np.array(json.dumps(self.meta, sort_keys=True)))

    @classmethod
    def load(cls, path) -> "RoutingTrace":
        """A trace written by :meth:`save`; ``TraceError`` naming the file and what is wrong."""
        path = Path(path)
        if not path.is_file():
            raise TraceError(f"{path}: no such trace file")
        content = _read_npz(path)
        missing = [k for k in _FILE_KEYS if k not in content]
        if missing:
            raise TraceError(f"{path}: not a routing trace (missing {', '.join(missing)})")
        if content["format"].shape != () or str(content["format"]) != FORMAT_NAME:
            raise TraceError(f"{path}: format {content['format']!r}, expected {FORMAT_NAME!r}")
        version, n_experts = (_scalar_int(path, k, content[k]) for k in ("version", "n_experts"))
        if version != FORMAT_VERSION:
            raise TraceError(f"{path}: format version {version}, this reader knows "
                             f"{FORMAT_VERSION}")
        try:
            meta = json.loads(str(content["meta"]))
        except json.JSONDecodeError as err:
            raise TraceError(f"{path}: unreadable meta ({err})") from None
        try:
            return cls(content["experts"], n_experts, meta)
        except TraceError as err:
            raise TraceError(f"{path}: {err}") from None


def _read_npz(path) -> dict:
    try:
        archive = np.load(path, allow_pickle=False)
        if isinstance(archive, np.lib.npyio.NpzFile):
            with archive:
                return {k: archive[k] for k in archive.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise TraceError(f"{path}: not a readable .npz file ({err})") from None
    raise TraceError(f"{path}: a single .npy array, not an .npz routing trace")


def _scalar_int(path, key, value) -> int:
    if value.shape != () or value.dtype.kind not in "iu":
        raise TraceError(f"{path}: {key} must be an integer scalar, got {value.dtype} "
                         f"{value.shape}")
    return int(value)


def _count(experts, n_experts):
    """``[step, layer, expert]`` (int32) occurrences of each expert in ``experts``."""
    steps, layers = experts.shape[:2]
    offset = (np.arange(steps * layers) * n_experts).reshape(steps, layers, 1, 1)
    counts = np.bincount((experts + offset).ravel(), minlength=steps * layers * n_experts)
    return counts.reshape(steps, layers, n_experts).astype(np.int32)


def expert_ranking(config: RoutingTraceConfig) -> np.ndarray:
    """``[layer, rank]`` (int16): layer ``l``'s experts from the most to the least popular by base
    popularity (``pi_l`` of the module docstring); ``config.class_sizes`` splits a row into the
    hot, warm and cold experts."""
    rng = np.random.default_rng(np.random.SeedSequence(config.seed).spawn(3)[0])
    n = config.n_experts
    base = rng.permutation(n)
    ranking = np.empty((config.layers, n), dtype=np.int16)
    for layer in range(config.layers):
        ranking[layer] = base
        moved = rng.choice(n, size=round(config.layer_variation * n), replace=False)
        ranking[layer, moved] = base[moved[rng.permutation(len(moved))]]
    return ranking


def _class_slices(config):
    sizes = config.class_sizes
    start = np.cumsum([0] + [sizes[c] for c in CLASSES])
    return {c: slice(int(start[i]), int(start[i + 1])) for i, c in enumerate(CLASSES)}


def _water_fill(p, total):
    """Rows of ``min(1, a p)`` with the scale ``a`` of each row making the row sum ``total``
    (``total`` <= the row length)."""
    lam = p * (total / p.sum(axis=-1, keepdims=True))
    while (lam > 1 + 1e-12).any():
        # capping only raises the scale of the rest, so a capped entry stays capped
        capped = lam >= 1
        rest = np.where(capped, 0.0, p)
        free = total - capped.sum(axis=-1, keepdims=True)
        scale = free / np.maximum(rest.sum(axis=-1, keepdims=True), np.finfo(float).tiny)
        lam = np.where(capped, 1.0, rest * scale)
    return np.minimum(lam, 1.0)


def _draw_tokens(lam, tokens, top_k, rng):
    """``[tokens, top_k]`` ranks, Pareto order sampling with inclusion probabilities ``lam``."""
    always = np.flatnonzero(lam >= 1)
    live = np.flatnonzero((lam > 0) & (lam < 1))
    picks = np.empty((tokens, top_k), dtype=np.int16)
    picks[:, :len(always)] = always
    odds = (lam[live] / (1 - lam[live])).astype(np.float32)
    u = rng.random((tokens, len(live)), dtype=np.float32)
    keys = odds * u / (1 - u)
    rows = np.arange(tokens)
    for slot in range(len(always), top_k):     # top_k is small: repeated argmax beats a sort
        best = keys.argmax(axis=1)
        picks[:, slot] = live[best]
        keys[rows, best] = -1.0
    return picks


def synthetic_routing(config: RoutingTraceConfig) -> RoutingTrace:
    """A synthetic routing trace (the model is in the module docstring)."""
    if not isinstance(config, RoutingTraceConfig):
        raise TraceError(f"config must be a RoutingTraceConfig, got {type(config).__name__}")
    _, drift_seed, token_seed = np.random.SeedSequence(config.seed).spawn(3)
    drift_rng, token_rng = np.random.default_rng(drift_seed), np.random.default_rng(token_seed)
    ranking = expert_ranking(config)
    classes, masses = _class_slices(config), config.class_masses
    base = np.zeros(config.n_experts)
    for c, ranks in classes.items():
        zipf = np.arange(1.0, ranks.stop - ranks.start + 1) ** -config.skew
        base[ranks] = masses[c] * zipf / zipf.sum()
    rho, sigma = config.temporal_correlation, config.volatility
    shape = (config.layers, config.n_experts)
    z = sigma * drift_rng.standard_normal(shape)
    experts = np.empty((config.steps, config.layers, config.tokens, config.top_k), dtype=np.int16)
    for step in range(config.steps):
        if step:
            z = rho * z + math.sqrt(1 - rho * rho) * sigma * drift_rng.standard_normal(shape)
        weight = base * np.exp(z)
        lam = np.zeros(shape)
        for c, ranks in classes.items():
            if masses[c] > 0:
                lam[:, ranks] = _water_fill(weight[:, ranks], config.top_k * masses[c])
        for layer in range(config.layers):
            ranks = _draw_tokens(lam[layer], config.tokens, config.top_k, token_rng)
            experts[step, layer] = ranking[layer][ranks]
    loads = _count(experts, config.n_experts).sum(axis=0)                # [layer, expert]
    by_rank = np.take_along_axis(loads, ranking.astype(np.intp), axis=1).sum(axis=0)
    slots = config.steps * config.layers * config.tokens * config.top_k
    meta = {"source": "synthetic", "config": dataclasses.asdict(config),
            "class_sizes": config.class_sizes,
            "realised_share": {c: float(by_rank[r].sum() / slots) for c, r in classes.items()}}
    return RoutingTrace(experts, config.n_experts, meta)


def _gate_modules(model, gates):
    """``[(name, module)]`` of the gates, given as modules or as names inside ``model``."""
    import torch

    if isinstance(gates, (str, torch.nn.Module)) or not gates:
        raise TraceError("gates must be a non-empty list of modules or module names, got "
                         f"{gates!r}")
    names = {id(m): name for name, m in model.named_modules()}
    resolved = []
    for i, gate in enumerate(gates):
        if isinstance(gate, str):
            try:
                resolved.append((gate, model.get_submodule(gate)))
            except AttributeError:
                raise TraceError(f"gate {gate!r} not found in {type(model).__name__}") from None
        elif isinstance(gate, torch.nn.Module):
            resolved.append((names.get(id(gate), f"gates[{i}]"), gate))
        else:
            raise TraceError(f"gates[{i}] must be a module or a module name, got {gate!r}")
    if len({id(m) for _, m in resolved}) != len(resolved):
        raise TraceError(f"a gate is listed twice in {[n for n, _ in resolved]}: one module is one "
                         "layer")
    return resolved


def record_routing(model: "torch.nn.Module", batches, gates, top_k: int,
                   n_experts: int | None = None) -> RoutingTrace:
    """Run ``model`` on each item of ``batches`` (``model(**item)`` for a dict, else
    ``model(item)``) under ``torch.no_grad()`` and record, per batch (step) and gate (layer), each
    token's ``top_k`` experts: the indices of its largest router logits. ``gates``: the router
    modules, or their names in ``model``, each giving logits ``[tokens, n_experts]`` or ``[batch,
    seq, n_experts]`` (the calls of a gate within one batch are concatenated). ``n_experts``
    defaults to the gates' logit width. Put the model in eval mode first if its routing has
    training-time noise."""
    import torch

    _require_int("top_k", top_k, 1)
    if n_experts is not None:
        _require_int("n_experts", n_experts, 1, MAX_EXPERTS)
    gate_list = _gate_modules(model, gates)
    outputs = {name: [] for name, _ in gate_list}

    def hook(name):
        def capture(_module, _inputs, output):
            outputs[name].append(output)
        return capture

    steps = []
    handles = [m.register_forward_hook(hook(name)) for name, m in gate_list]
    try:
        with torch.no_grad():
            for b, item in enumerate(batches):
                model(**item) if isinstance(item, dict) else model(item)
                logits = {name: _router_logits(name, calls, b) for name, calls in outputs.items()}
                for calls in outputs.values():
                    calls.clear()
                if n_experts is None:
                    n_experts = next(iter(logits.values())).shape[1]
                _check_batch(logits, b, top_k, n_experts, steps[0].shape[1] if steps else None)
                steps.append(np.stack([torch.topk(x, top_k, dim=-1).indices.cpu().numpy()
                                       for x in logits.values()]))
    finally:
        for h in handles:
            h.remove()
    if not steps:
        raise TraceError("batches is empty: nothing to record")
    meta = {"source": "recorded", "model": type(model).__name__, "gates": list(outputs),
            "top_k": top_k}
    return RoutingTrace(np.stack(steps), n_experts, meta)


def _router_logits(name, calls, batch):
    """One gate's logits of one batch as ``[tokens, n_experts]``."""
    import torch

    if not calls:
        raise TraceError(f"gate {name!r} did not run on batch {batch}: is it on the model's "
                         "forward path?")
    for out in calls:
        if not isinstance(out, torch.Tensor) or out.ndim not in (2, 3):
            is_tensor = isinstance(out, torch.Tensor)
            got = f"shape {tuple(out.shape)}" if is_tensor else type(out).__name__
            raise TraceError(f"gate {name!r} must give router logits [tokens, n_experts] or "
                             f"[batch, seq, n_experts], got {got}")
    return torch.cat([out.reshape(-1, out.shape[-1]) for out in calls])


def _check_batch(logits, batch, top_k, n_experts, tokens):
    """``TraceError`` unless every gate gave ``n_experts`` logits for the same tokens (as many
    as ``tokens``, the first batch's count, when given) and ``top_k <= n_experts``."""
    for name, x in logits.items():
        if x.shape[1] != n_experts:
            raise TraceError(f"gate {name!r} gives {x.shape[1]} logits per token, expected "
                             f"n_experts = {n_experts}")
    if top_k > n_experts:
        raise TraceError(f"top_k = {top_k} is more than n_experts = {n_experts}")
    counts = {name: x.shape[0] for name, x in logits.items()}
    if len(set(counts.values())) != 1:
        raise TraceError(f"the gates saw different token counts on batch {batch}: {counts}")
    count = next(iter(counts.values()))
    if tokens is not None and count != tokens:
        raise TraceError(f"batch {batch} has {count} tokens, batch 0 had {tokens}: every step of "
                         "a trace has the same token count")


def make_traces(cfg, model) -> tuple:
    """(profile loads, run loads, trace meta) of a run (``cfg`` a
    :class:`~ndpdimm.sw.scenarios.trimoe.config.TriMoeConfig`): one trace of ``profile_steps + steps`` steps (a
    recorded file, or the generator's), its first ``profile_steps`` steps profile (they warm
    the EMA, the GPU residency and the initial layout), the rest are run."""
    if cfg.trace is not None:
        trace = RoutingTrace.load(cfg.trace)
        if trace.n_experts != model.experts or trace.top_k != model.top_k:
            raise ValueError(f"trace {cfg.trace}: {trace.n_experts} experts, top-{trace.top_k}; "
                             f"model {model.name} has {model.experts}, top-{model.top_k}")
        if trace.steps <= cfg.profile_steps:
            raise ValueError(f"trace {cfg.trace}: {trace.steps} steps, need more than "
                             f"profile_steps = {cfg.profile_steps}")
    else:
        trace = synthetic_routing(cfg.trace_config(model, cfg.profile_steps + cfg.steps, cfg.seed))
    loads = trace.loads()
    return loads[:cfg.profile_steps], loads[cfg.profile_steps:], trace.meta
