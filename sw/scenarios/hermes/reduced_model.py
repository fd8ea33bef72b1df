"""The reduced model of the Hermes decode check: a tiny OPT-style ReLU decoder, its KV cache and its torch forward.

:class:`ReducedModel` is a tiny OPT-style decoder (pre-LayerNorm,
multi-head attention, residual, MLP ``fc1 -> ReLU -> fc2``, residual; no final
LayerNorm, no embeddings: a step takes hidden states and returns hidden
states) with deterministic random FP16 weight matrices from a seed
(:class:`LayerWeights`, one per layer). Its fc1 biases are shifted negative so
that ReLU fires for roughly 10-30 % of the neurons per token, and a
``hot_fraction`` of neurons get a positive bias and fire most of the time (the
skew Hermes exploits). :func:`reference_decode_step` is the plain torch forward
of one decode step over a :class:`KvCache` (float32, or float64 for the
accuracy check) and reports which neurons fired (:class:`ReferenceStep`).

Entry points: :class:`ReducedModel`, :class:`KvCache`,
:func:`reference_decode_step`, :func:`prefill` (the cache after a prompt, on
"the GPU"), :func:`neuron_frequency` (the offline firing profile a hot/cold
split is made from) and :func:`oracle_prediction` (a perfect predictor).
The GPU/DIMM split of a step is ``sw/scenarios/hermes/decode.py``, its checks
``sw/scenarios/hermes/checks.py``.
"""

import math
from dataclasses import dataclass, field

import torch

__all__ = ["ReducedModel", "LayerWeights", "KvCache", "ReferenceStep", "reference_decode_step",
           "prefill", "neuron_frequency", "oracle_prediction", "MAX_BATCH", "layer_norm",
           "positive_int"]

F16, F32, F64 = torch.float16, torch.float32, torch.float64
#: Sequences per decode step (the GEMV engine's batch shares one weight stream).
MAX_BATCH = 4
LN_EPS = 1e-5


def positive_int(name, v):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


# ---- the model -------------------------------------------------------------------------------

@dataclass
class LayerWeights:
    """One decoder layer. Matrices FP16 (``[out, in]``), biases and LayerNorm parameters float32.
    ``w_qkv`` stacks the q, k and v projections: rows ``[0, H)``, ``[H, 2H)``, ``[2H, 3H)``."""
    ln1_w: torch.Tensor
    ln1_b: torch.Tensor
    w_qkv: torch.Tensor
    b_qkv: torch.Tensor
    w_o: torch.Tensor
    b_o: torch.Tensor
    ln2_w: torch.Tensor
    ln2_b: torch.Tensor
    w_fc1: torch.Tensor
    b_fc1: torch.Tensor
    w_fc2: torch.Tensor
    b_fc2: torch.Tensor


@dataclass
class ReducedModel:
    """A small OPT-style ReLU decoder with deterministic random weights (see the module docstring).

    ``hot_fraction`` of each layer's neurons get a positive fc1 bias (``hot_bias``) and fire for
    most tokens; the others a negative one (``cold_bias`` with a per-neuron spread of 0.3), so a
    few tens of percent of a layer's neurons fire per token.
    """
    hidden: int = 128
    heads: int = 4
    ffn: int = 512
    layers: int = 2
    seed: int = 0
    hot_fraction: float = 0.1
    hot_bias: float = 1.0
    cold_bias: float = -1.3
    weights: list = field(init=False, repr=False)
    hot: torch.Tensor = field(init=False, repr=False)      # [layers, ffn] bool, by construction

    def __post_init__(self):
        for name in ("hidden", "heads", "ffn", "layers"):
            positive_int(name, getattr(self, name))
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {self.seed!r}")
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if not (isinstance(self.hot_fraction, (int, float)) and 0 <= self.hot_fraction <= 1):
            raise ValueError(f"hot_fraction must be in [0, 1], got {self.hot_fraction!r}")
        for name in ("hot_bias", "cold_bias"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        g = torch.Generator().manual_seed(self.seed)
        H, F = self.hidden, self.ffn

        def mat(rows, cols):       # variance-preserving: outputs of unit-variance inputs ~ N(0, 1)
            return (torch.randn(rows, cols, generator=g) / math.sqrt(cols)).to(F16)

        def vec(n, scale):
            return torch.randn(n, generator=g) * scale

        self.weights, hots = [], []
        n_hot = round(self.hot_fraction * F)
        for _ in range(self.layers):
            hot = torch.zeros(F, dtype=torch.bool)
            hot[torch.randperm(F, generator=g)[:n_hot]] = True
            b_fc1 = torch.where(hot, torch.full((F,), float(self.hot_bias)),
                                self.cold_bias + vec(F, 0.3))
            self.weights.append(LayerWeights(
                ln1_w=1 + vec(H, 0.1), ln1_b=vec(H, 0.1),
                w_qkv=mat(3 * H, H), b_qkv=vec(3 * H, 0.1),
                w_o=mat(H, H), b_o=vec(H, 0.1),
                ln2_w=1 + vec(H, 0.1), ln2_b=vec(H, 0.1),
                w_fc1=mat(F, H), b_fc1=b_fc1.float(),
                w_fc2=(torch.randn(H, F, generator=g) / math.sqrt(F * 0.2)).to(F16),
                b_fc2=vec(H, 0.1)))
            hots.append(hot)
        self.hot = torch.stack(hots)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def check_input(self, x, cache=None):
        """``ValueError`` unless ``x`` is a float32 [B, hidden] batch (B = 1..MAX_BATCH) of finite
        values and ``cache`` (if given) a :class:`KvCache` of this model for B sequences."""
        if not isinstance(x, torch.Tensor) or x.dtype != F32:
            raise ValueError(f"x must be a float32 torch.Tensor [B, {self.hidden}], got "
                             f"{x.dtype if isinstance(x, torch.Tensor) else type(x).__name__}")
        if x.dim() != 2 or x.shape[1] != self.hidden or not 1 <= x.shape[0] <= MAX_BATCH:
            raise ValueError(f"x must be [B, {self.hidden}] with B in 1..{MAX_BATCH}, got shape "
                             f"{tuple(x.shape)}")
        if not torch.isfinite(x).all():
            raise ValueError("x holds non-finite values")
        if cache is not None:
            if not isinstance(cache, KvCache):
                raise ValueError(f"cache must be a KvCache, got {type(cache).__name__}")
            cache.check(self, x.shape[0])


def layer_norm(x, w, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), w.to(x.dtype), b.to(x.dtype), LN_EPS)


# ---- the KV cache and the reference forward --------------------------------------------------

@dataclass
class KvCache:
    """Past keys and values per layer: ``keys[l]``, ``values[l]`` float32 [B, T, hidden]."""
    keys: list
    values: list

    @classmethod
    def empty(cls, model: ReducedModel, batch: int) -> "KvCache":
        z = torch.zeros(batch, 0, model.hidden)
        return cls([z.clone() for _ in range(model.layers)], [z.clone() for _ in range(model.layers)])

    @property
    def length(self) -> int:
        return self.keys[0].shape[1]

    def check(self, model, batch):
        if len(self.keys) != model.layers or len(self.values) != model.layers:
            raise ValueError(f"the cache holds {len(self.keys)} / {len(self.values)} layers of keys / "
                             f"values, the model has {model.layers}")
        t = self.keys[0].shape[1] if self.keys[0].dim() == 3 else -1
        for kv in self.keys + self.values:
            if not isinstance(kv, torch.Tensor) or kv.dtype != F32 or \
                    tuple(kv.shape) != (batch, t, model.hidden):
                raise ValueError(f"every cache tensor must be float32 [{batch}, T, {model.hidden}] "
                                 f"with one T, got {getattr(kv, 'dtype', None)} "
                                 f"{tuple(getattr(kv, 'shape', ()))}")


@dataclass
class ReferenceStep:
    """:func:`reference_decode_step`'s result: the output [B, hidden], the cache with this token
    appended, the fc1 pre-activations (``z`` [layers, B, ffn]) and which neurons fired
    (``active = z > 0``)."""
    out: torch.Tensor
    cache: KvCache
    z: torch.Tensor

    @property
    def active(self) -> torch.Tensor:
        return self.z > 0


def _attend(q, K, V, heads):
    """Multi-head attention of one query per sequence: q [B, H], K, V [B, T, H] -> [B, H]."""
    B, T, H = K.shape
    d = H // heads
    qh = q.reshape(B, heads, 1, d)
    Kh, Vh = (t.reshape(B, T, heads, d).transpose(1, 2) for t in (K, V))
    p = torch.softmax(qh @ Kh.transpose(-1, -2) / math.sqrt(d), dim=-1)
    return (p @ Vh).reshape(B, H)


def reference_decode_step(model: ReducedModel, cache: KvCache, x: torch.Tensor,
                          dtype=F32) -> ReferenceStep:
    """One decode step in plain torch (``dtype`` float32 or float64) on the model's weights."""
    model.check_input(x, cache)
    if dtype not in (F32, F64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype!r}")
    r = x.to(dtype)
    keys, values, pre = [], [], []
    for lw, K0, V0 in zip(model.weights, cache.keys, cache.values):
        h = layer_norm(r, lw.ln1_w, lw.ln1_b)
        qkv = h @ lw.w_qkv.to(dtype).T + lw.b_qkv.to(dtype)
        q, k, v = qkv.split(model.hidden, dim=1)
        K = torch.cat([K0.to(dtype), k[:, None]], dim=1)
        V = torch.cat([V0.to(dtype), v[:, None]], dim=1)
        keys.append(K.to(F32))
        values.append(V.to(F32))
        r = r + _attend(q, K, V, model.heads) @ lw.w_o.to(dtype).T + lw.b_o.to(dtype)
        z = layer_norm(r, lw.ln2_w, lw.ln2_b) @ lw.w_fc1.to(dtype).T + lw.b_fc1.to(dtype)
        pre.append(z)
        r = r + torch.relu(z) @ lw.w_fc2.to(dtype).T + lw.b_fc2.to(dtype)
    return ReferenceStep(r, KvCache(keys, values), torch.stack(pre))


def prefill(model: ReducedModel, prompts: torch.Tensor) -> KvCache:
    """The KV cache after ``prompts`` (float32 [B, T, hidden]) ran through the model on the GPU
    (token by token with :func:`reference_decode_step` in float32, i.e. causal attention)."""
    if not isinstance(prompts, torch.Tensor) or prompts.dim() != 3:
        raise ValueError(f"prompts must be a [B, T, {model.hidden}] tensor")
    cache = KvCache.empty(model, prompts.shape[0])
    for t in range(prompts.shape[1]):
        cache = reference_decode_step(model, cache, prompts[:, t].contiguous()).cache
    return cache


def neuron_frequency(model: ReducedModel, tokens: int = 32, seed: int = 1) -> torch.Tensor:
    """How often each neuron fires ([layers, ffn] in [0, 1]) over ``tokens`` random tokens of one
    sequence: the offline profile a hot/cold partition is made from."""
    positive_int("tokens", tokens)
    g = torch.Generator().manual_seed(seed)
    xs = torch.randn(tokens, model.hidden, generator=g)
    cache, count = KvCache.empty(model, 1), torch.zeros(model.layers, model.ffn)
    for t in range(tokens):
        ref = reference_decode_step(model, cache, xs[t:t + 1])
        cache = ref.cache
        count += ref.active[:, 0].float()
    return count / tokens


def oracle_prediction(model: ReducedModel, cache: KvCache, x: torch.Tensor) -> torch.Tensor:
    """The neurons that fire for any sequence of the batch ([layers, ffn] bool), from the float64
    reference: a perfect predictor's output."""
    return reference_decode_step(model, cache, x, F64).active.any(dim=1)
