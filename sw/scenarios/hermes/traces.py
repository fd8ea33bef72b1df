"""Activation traces for the Hermes scenario: which MLP neurons fire, per token and layer.

A trace is a boolean array ``active[token, layer, neuron]`` (a neuron is
active when its activation output is above the threshold: > 0 for ReLU),
kept as an :class:`ActivationTrace` and stored in a ``.npz`` file
(:meth:`ActivationTrace.save` / :func:`load_trace`: the bits packed, the
shape, a format version and the parameters or source it came from).

Two sources:

* :func:`synthetic_trace` - a generator with the three properties activation
  sparsity schemes rely on, each a parameter:

  - **skew**: neuron ``i`` of a layer (in that layer's own random order of
    popularity) fires with probability ``p_i`` proportional to
    ``(rank_i + 1) ** -skew``, scaled so the layer's mean is
    ``active_fraction`` (capped at ``max_probability``): a minority of hot
    neurons fire most of the time;
  - **token similarity**: each neuron's state is a two-state Markov chain
    over tokens whose stationary probability is ``p_i`` and whose lag-1
    correlation is ``token_similarity`` (``P(on | on) = p + rho (1 - p)``,
    ``P(on | off) = p (1 - rho)``);
  - **layer correlation**: with probability ``layer_correlation`` a neuron
    copies, for this token, the state of its partner in the previous layer
    (the neuron of the same popularity rank there), else it follows its own
    chain; marginals stay ``p_i``.

* :func:`record_trace` - forward hooks on the activation modules of any torch
  model with ReLU or GELU MLPs (``nn.ReLU``, ``nn.GELU`` or any module whose
  class name says GELU/ReLU, e.g. transformers' ``GELUActivation``): every
  token of every batch, a neuron active when its output exceeds
  ``threshold`` (0 for ReLU; GELU needs a small positive threshold, since its
  output is never exactly zero for negative inputs).

Bad input (parameters out of range, a file that is not a trace, a
mismatched shape or version) raises ``ValueError`` with the reason.
"""

import dataclasses
import json
import zipfile
from pathlib import Path

import numpy as np

__all__ = ["ActivationTrace", "synthetic_trace", "record_trace", "load_trace", "FORMAT_VERSION",
           "skew_for_top_share", "token_similarity_for", "popularity"]

FORMAT_VERSION = 1


@dataclasses.dataclass
class ActivationTrace:
    """``active[token, layer, neuron]`` (bool) and where it came from (``meta``, JSON-able)."""
    active: np.ndarray
    meta: dict

    def __post_init__(self):
        a = self.active
        if not isinstance(a, np.ndarray) or a.dtype != np.bool_ or a.ndim != 3:
            raise ValueError("active must be a 3-D bool array [token, layer, neuron], got "
                             f"{getattr(a, 'dtype', type(a))} {getattr(a, 'shape', '')}")

    @property
    def tokens(self) -> int:
        return self.active.shape[0]

    @property
    def layers(self) -> int:
        return self.active.shape[1]

    @property
    def neurons(self) -> int:
        return self.active.shape[2]

    def firing_frequency(self) -> np.ndarray:
        """``[layer, neuron]``: share of tokens on which each neuron fired."""
        return self.active.mean(axis=0)

    def token_similarity(self, min_frequency: float = 0.05) -> float:
        """Mean lag-1 correlation of a neuron's state between consecutive tokens, over the
        neurons (of all layers) firing on a share of tokens in ``[min_frequency, 1 -
        min_frequency]`` (rarer ones have too few events for an estimate); 0 if there are none."""
        a = self.active.astype(np.float64)
        f = a.mean(0)
        keep = (f >= min_frequency) & (f <= 1 - min_frequency)
        x, y = a[:-1][:, keep], a[1:][:, keep]
        if x.shape[0] < 2 or not keep.any():
            return 0.0
        cov = ((x - x.mean(0)) * (y - y.mean(0))).mean(0)
        var = x.std(0) * y.std(0)
        ok = var > 0
        return float((cov[ok] / var[ok]).mean()) if ok.any() else 0.0

    def similarity(self, lag: int) -> float:
        """Share of a token's active neurons that are active again ``lag`` tokens later, over
        all token pairs and layers (``|A_t & A_t+lag| / |A_t|``: our reading of the Hermes
        paper's "activation similarity" between tokens, Fig. 4a); 0 without such pairs."""
        _check("lag", lag, 1, 1 << 20, int)
        if self.tokens <= lag:
            raise ValueError(f"lag {lag} needs more than {lag} tokens, the trace has {self.tokens}")
        a, b = self.active[:-lag], self.active[lag:]
        n = int(a.sum())
        return float((a & b).sum() / n) if n else 0.0

    def top_share(self, share: float = 0.2) -> float:
        """Mean over layers of the share of activations carried by the ``share`` most active
        neurons of the layer (the paper's "20 % of neurons, 80 % of the computation")."""
        _check("share", share, 1e-9, 1.0)
        counts = np.sort(self.active.sum(axis=0), axis=1)[:, ::-1]        # [layers, neurons]
        k = max(1, int(round(share * counts.shape[1])))
        total = counts.sum(axis=1)
        return float(np.mean(np.where(total > 0, counts[:, :k].sum(axis=1) / np.maximum(total, 1),
                                      0)))

    def layer_correlation(self, layer: int) -> float:
        """Mean over the neurons of ``layer`` of their largest correlation (over tokens) with any
        neuron of ``layer - 1``: how well the previous layer predicts this one."""
        if not 1 <= layer < self.layers:
            raise ValueError(f"layer must be 1..{self.layers - 1}, got {layer!r}")

        def standard(m):
            m = m.astype(np.float64)
            sd = m.std(0)
            return (m - m.mean(0)) / np.where(sd > 0, sd, 1), sd > 0
        x, okx = standard(self.active[:, layer - 1])
        y, oky = standard(self.active[:, layer])
        corr = (x[:, okx].T @ y[:, oky]) / self.tokens
        return float(corr.max(axis=0).mean()) if corr.size else 0.0

    def save(self, path) -> Path:
        path = Path(path)
        np.savez_compressed(path, bits=np.packbits(self.active, axis=-1),
                            shape=np.array(self.active.shape, dtype=np.int64),
                            version=np.array(FORMAT_VERSION),
                            meta=np.array(json.dumps(self.meta, sort_keys=True)))
        return path if path.suffix == ".npz" else path.with_name(path.name + ".npz")


def load_trace(path) -> ActivationTrace:
    """A trace saved by :meth:`ActivationTrace.save`; ``ValueError`` naming what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as f:
            content = {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: not a readable trace file ({e})") from None
    missing = {"bits", "shape", "version", "meta"} - set(content)
    if missing:
        raise ValueError(f"{path}: not an activation trace (missing {', '.join(sorted(missing))})")
    version = int(content["version"])
    if version != FORMAT_VERSION:
        raise ValueError(f"{path}: trace format version {version}, this reader knows "
                         f"{FORMAT_VERSION}")
    shape = tuple(int(v) for v in content["shape"])
    bits = content["bits"]
    try:
        meta = json.loads(str(content["meta"]))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: unreadable metadata ({e})") from None
    if len(shape) != 3 or min(shape) < 1 or bits.shape != (*shape[:2], -(-shape[2] // 8)):
        raise ValueError(f"{path}: packed bits {bits.shape} do not match the shape {shape}")
    active = np.unpackbits(bits, axis=-1, count=shape[2]).astype(bool)
    return ActivationTrace(active, meta)


def _check(name, value, low, high, kind=(int, float)):
    if isinstance(value, bool) or not isinstance(value, kind) or not low <= value <= high:
        raise ValueError(f"{name} must be in [{low}, {high}], got {value!r}")


def popularity(neurons: int, active_fraction: float, skew: float, max_probability: float = 0.98):
    """Firing probabilities by popularity rank (most popular first): power law with exponent
    ``skew``, mean ``active_fraction``, each at most ``max_probability``."""
    w = (np.arange(neurons) + 1.0) ** -skew
    target = active_fraction * neurons
    scale = target / w.sum()
    for _ in range(60):          # renormalise the uncapped ones after capping
        p = np.minimum(w * scale, max_probability)
        short = target - p.sum()
        if abs(short) < 1e-9 * target:
            break
        free = w[p < max_probability].sum()
        if free == 0:
            break
        scale += short / free
    return np.minimum(w * scale, max_probability)


def synthetic_trace(tokens: int, layers: int, neurons: int, *, active_fraction: float = 0.1,
                    skew: float = 1.0, token_similarity: float = 0.6,
                    layer_correlation: float = 0.3, max_probability: float = 0.98,
                    seed: int = 0, model_seed: int = 0,
                    copy_similarity: float | None = None) -> ActivationTrace:
    """A synthetic trace (see the module docstring for what each parameter does). ``model_seed``
    fixes the model: which neurons are hot in each layer and the partners across layers (a
    profiling trace and a later run of the same model share it); ``seed`` the tokens.
    ``copy_similarity``: None draws the layer-correlation copy decisions afresh for every token;
    a number makes each neuron's decision a two-state chain of its own (stationary
    ``layer_correlation``, lag-1 correlation ``copy_similarity``), so a neuron that follows its
    partner keeps following it: without it, the fresh draws cap the adjacent-token similarity
    (about 0.84 at layer correlation 0.8 and the 20/80 skew)."""
    for name, v, lo, hi in (("tokens", tokens, 1, 1 << 20), ("layers", layers, 1, 4096),
                            ("neurons", neurons, 1, 1 << 20)):
        _check(name, v, lo, hi, int)
    _check("active_fraction", active_fraction, 1e-6, max_probability)
    _check("skew", skew, 0.0, 4.0)
    _check("token_similarity", token_similarity, 0.0, 0.999)
    _check("layer_correlation", layer_correlation, 0.0, 1.0)
    _check("max_probability", max_probability, 1e-3, 1.0)
    if copy_similarity is not None:
        _check("copy_similarity", copy_similarity, 0.0, 0.999)
        copy_on = layer_correlation + copy_similarity * (1 - layer_correlation)
        copy_off = layer_correlation * (1 - copy_similarity)
    _check("seed", seed, 0, 2 ** 63 - 1, int)
    _check("model_seed", model_seed, 0, 2 ** 63 - 1, int)
    model_rng = np.random.default_rng(model_seed)
    order = np.stack([model_rng.permutation(neurons) for _ in range(layers)])  # layer, rank -> neuron
    rng = np.random.default_rng(seed)
    p_rank = popularity(neurons, active_fraction, skew, max_probability)
    p = np.empty((layers, neurons))
    for layer in range(layers):
        p[layer, order[layer]] = p_rank
    rho = token_similarity
    on_on, off_on = p + rho * (1 - p), p * (1 - rho)
    active = np.zeros((tokens, layers, neurons), dtype=bool)
    chain = rng.random((layers, neurons)) < p
    copies = None
    for t in range(tokens):
        if t:
            u = rng.random((layers, neurons))
            chain = np.where(chain, u < on_on, u < off_on)
        state = chain.copy()
        if layer_correlation > 0:
            if copy_similarity is not None:
                # the copy decisions persist over tokens: a chain of their own per neuron
                if copies is None:
                    copies = rng.random((layers, neurons)) < layer_correlation
                else:
                    u = rng.random((layers, neurons))
                    copies = np.where(copies, u < copy_on, u < copy_off)
            for layer in range(1, layers):
                copy = copies[layer] if copy_similarity is not None else \
                    rng.random(neurons) < layer_correlation
                # the partner: the previous layer's neuron of the same popularity rank
                partner_state = np.empty(neurons, dtype=bool)
                partner_state[order[layer]] = state[layer - 1, order[layer - 1]]
                state[layer] = np.where(copy, partner_state, state[layer])
        active[t] = state
    meta = {"source": "synthetic", "active_fraction": active_fraction, "skew": skew,
            "token_similarity": token_similarity, "layer_correlation": layer_correlation,
            "max_probability": max_probability, "seed": seed, "model_seed": model_seed,
            **({"copy_similarity": copy_similarity} if copy_similarity is not None else {})}
    return ActivationTrace(active, meta)


def skew_for_top_share(active_fraction: float, top_share: float, share: float = 0.2,
                       neurons: int = 8192, max_probability: float = 0.98) -> float:
    """The power-law exponent whose firing probabilities (:func:`popularity`) put ``top_share``
    of a layer's activations on its ``share`` most popular neurons (bisection; ``ValueError``
    when no exponent in [0, 4] reaches it)."""
    _check("top_share", top_share, 1e-6, 1.0)

    def carried(skew):
        p = popularity(neurons, active_fraction, skew, max_probability)
        return float(p[:max(1, int(round(share * neurons)))].sum() / p.sum())
    return _solve_increasing(
        carried, top_share, 0.0, 4.0, 50,
        lambda *_: f"no skew in [0, 4] puts {top_share:.0%} of activations on the top "
                   f"{share:.0%} of neurons at active fraction {active_fraction}")


def token_similarity_for(adjacent: float, *, active_fraction: float, skew: float,
                         layer_correlation: float, neurons: int = 8192, layers: int = 4,
                         tokens: int = 64, seed: int = 0) -> float:
    """The chains' lag-1 correlation (``token_similarity`` and ``copy_similarity`` of
    :func:`synthetic_trace`, the same value) at which a generated trace's :meth:`ActivationTrace.similarity` at lag 1 is ``adjacent`` (bisection on
    traces of ``neurons`` x ``layers`` x ``tokens``, seed ``seed``); ``ValueError`` when the
    range [0, 0.999] does not reach it."""
    _check("adjacent", adjacent, 0.0, 1.0)

    def sim(rho):
        return synthetic_trace(tokens, layers, neurons, active_fraction=active_fraction, skew=skew,
                               token_similarity=rho, layer_correlation=layer_correlation,
                               seed=seed, model_seed=seed, copy_similarity=rho).similarity(1)
    return _solve_increasing(
        sim, adjacent, 0.0, 0.999, 14,
        lambda at_lo, at_hi: f"adjacent-token similarity {adjacent} is out of the generator's "
                             f"reach [{at_lo:.3f}, {at_hi:.3f}] at skew {skew:.3f}")


def _solve_increasing(f, target: float, lo: float, hi: float, steps: int, refusal) -> float:
    """The ``x`` in [lo, hi] where the non-decreasing ``f`` reaches ``target``, by ``steps``
    halvings; ``ValueError(refusal(f(lo), f(hi)))`` when ``target`` lies outside them."""
    at_lo, at_hi = f(lo), f(hi)
    if not at_lo <= target <= at_hi:
        raise ValueError(refusal(at_lo, at_hi))
    for _ in range(steps):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return (lo + hi) / 2


def _is_activation(module) -> bool:
    name = type(module).__name__.lower()
    return ("relu" in name or "gelu" in name) and not list(module.children())


def record_trace(model, batches, *, threshold: float = 0.0, modules=None,
                 source: str = "") -> ActivationTrace:
    """Run ``model`` on each item of ``batches`` (called as ``model(**item)`` for dicts, else
    ``model(item)``) under ``torch.no_grad`` and record which outputs of its MLP activation
    modules exceed ``threshold`` - every token of every batch, layers in module order.
    ``modules``: the modules to hook (default: every leaf module whose class name contains
    ReLU or GELU). ``ValueError`` when there is nothing to hook or the layers disagree in width."""
    import torch

    _check("threshold", threshold, -1e30, 1e30)
    hooked = list(modules) if modules is not None else [m for m in model.modules() if _is_activation(m)]
    if not hooked:
        raise ValueError("no ReLU/GELU activation modules found to hook; pass modules=")
    captured = [[] for _ in hooked]

    def hook(i):
        def fn(_module, _inputs, output):
            out = output.detach()
            captured[i].append((out.reshape(-1, out.shape[-1]) > threshold).cpu().numpy())
        return fn

    handles = [m.register_forward_hook(hook(i)) for i, m in enumerate(hooked)]
    try:
        with torch.no_grad():
            for item in batches:
                model(**item) if isinstance(item, dict) else model(item)
    finally:
        for h in handles:
            h.remove()
    widths = {c[0].shape[1] for c in captured if c}
    if any(not c for c in captured):
        raise ValueError("a hooked module never ran: is it on the model's forward path?")
    if len(widths) != 1:
        raise ValueError(f"the hooked layers have different widths {sorted(widths)}")
    layers = [np.concatenate(c, axis=0) for c in captured]
    active = np.stack(layers, axis=1)
    meta = {"source": source or f"recorded from {type(model).__name__}", "threshold": threshold,
            "layers": len(hooked)}
    return ActivationTrace(active, meta)
