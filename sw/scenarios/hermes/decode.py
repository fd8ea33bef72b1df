"""Hermes decode, functionally: one decode step of a reduced ReLU LLM split between a GPU and NDP-DIMMs.

What it does. :class:`ReducedModel` is a tiny OPT-style decoder (pre-LayerNorm,
multi-head attention, residual, MLP ``fc1 -> ReLU -> fc2``, residual; no final
LayerNorm, no embeddings: a step takes hidden states and returns hidden
states) with deterministic random FP16 weight matrices from a seed. Its fc1
biases are shifted negative so that ReLU fires for roughly 10-30 % of the
neurons per token, and a ``hot_fraction`` of neurons get a positive bias and
fire most of the time (the skew Hermes exploits). :func:`reference_decode_step`
is the plain torch forward of one decode step over a KV cache (float32, or
float64 for the accuracy check), and reports which neurons fired.

:class:`HermesNdp` deploys the model on "a GPU" (torch float32, the stand-in)
plus a list of :class:`~ndpdimm.sw.driver.dimm.Dimm` objects following a
:class:`Placement`, and :meth:`HermesNdp.decode_step` runs one step for a batch
of ``B`` = 1..4 sequences:

=================================  ================================================================
GPU (torch float32)                DIMMs (driver API, every kernel checked against the golden model)
=================================  ================================================================
LayerNorms, residuals, merges      QKV rows placed on DIMM ``d``: dense GEMV (FP16 weights, FP16 LN
                                   output, FP32 result, bias added by the result writer's
                                   ``accumulate``)
QKV rows placed on the GPU         attention, head ``h`` on DIMM ``h mod n``, per sequence: scores
                                   ``K q`` (GEMV), ``* 1/sqrt(d)`` (ACT SCALE), softmax (FP32 ->
                                   FP16), ``V^T p`` (GEMV) over that sequence's FP16 KV cache
output projection                  predicted-active cold neurons of DIMM ``d``: row gather of their
                                   fc1 rows (bias via ``accumulate``), ReLU (ACT FP32 -> FP16),
                                   column gather of their fc2 columns (weights stored "axpy")
hot neurons (all of them), sums
of the DIMMs' partial results
=================================  ================================================================

Cold neurons not predicted active are skipped (their contribution is lost if
they did fire); predicted ones that do not fire cost cycles and add ReLU's
zeros. The KV cache (float32 on the host, as prefill on the GPU leaves it) is
written to each head's DIMM as FP16 images at the step (host writes, no NDP
cycles; a serving system would append the new token's row in place).

Several DIMMs. ``dimms`` may list distinct ``Dimm`` objects or the same one
several times. Several ``Dimm("rtl")`` can coexist in one process (each
``RtlBackend`` owns its own harness handle and ``VerilatedContext``; two
instances of one library ran interleaved GEMVs bit-exactly), but each is a full
Verilated core with its own DRAM model, so the tests use one RTL ``Dimm``
serving every logical DIMM's share in turn (``[dimm] * n``); the records still
name the logical DIMM, and its cycles are summed per logical DIMM as if they
ran in parallel.

Checks built in (:class:`StepResult`). Every NDP kernel's result is compared
bit for bit with the golden model fed the same inputs (``cosim/golden/numerics.py`` for
GEMVs and the result writer's accumulate, ``cosim/golden/activation.py`` for
ACT / SOFTMAX); the step's output is compared with
:func:`reference_decode_step` in float64 on the same FP16 weights.

Numerics and tolerance. The GPU side works in float32 on FP16-valued weights.
Everything that enters a DIMM is rounded to FP16 (unit roundoff
``u = 2**-11``): the LN outputs feeding QKV and fc1, ``q``, ``K``, ``V``, the
softmax output, the ReLU outputs; GEMVs accumulate exactly-rounded FP32 (error
``<= K 2**-24`` relative to ``sum |w x|``, negligible against ``u``), and the
softmax's exp has a few FP16 ULP of approximation error. That is ``R = 6``
FP16 rounding points per layer, each a relative perturbation ``<= u`` of one
operand of a sublayer, so the error of each sublayer's update is at most about
``R u`` times its size when the roundings line up (more only where sums cancel
badly), and the layers add up. The check is on the step's *update* (``out -
x``, not diluted by the residual stream): ``||out - ref||_2 <= TOLERANCE_FACTOR
* R * L * u * ||ref - x||_2`` with ``TOLERANCE_FACTOR = 1``, i.e. 5.9e-3 for 2
layers (:func:`tolerance`). The default model measures 2e-4 .. 4e-4 (batch 1..4):
independent roundings mostly cancel, so the bound is a working worst case, not
a proof. With the oracle prediction (the neurons that actually fire, union over
the batch) the NDP path must meet it; a prediction that misses firing neurons
fails it once enough is dropped (one strongly firing neuron of the default
model already costs about 10x the oracle's error), and the error is reported
either way.

Cycle behaviour. Each NDP kernel records the backend's numbers from
``Dimm.last_run``: ``elapsed_cycles`` (first submit to last completion,
including the operand / result DMAs between the DIMM's DRAM and SRAM) and the
descriptor cycles by opcode (``GEMV``, ``ACT``, ``SOFTMAX``, ``DMA``), with the
backend's name ("rtl": the Verilated core's own cycles; "model": the
calibrated performance model). Per layer, the DIMMs work in parallel and one
DIMM runs its kernels in order, so :attr:`StepResult.ndp_cycles` sums each
logical DIMM's elapsed cycles and takes the max over DIMMs per layer phase
(QKV, attention, MLP). GPU time and host transfers are not modelled here
(``sw/scenarios/hermes/costs.py`` does that).

INT8 cold neurons (option, ``cold_dtype="int8"``): each DIMM's fc1 rows are
stored as INT8 with one symmetric scale per row, its fc2 columns with one scale
per output; the LN output and the ReLU output are quantised per sequence
(symmetric, absmax / 127), both GEMVs accumulate in INT32 (bit-exact vs the
golden model). The rescale, bias, ReLU and requantisation between the two
GEMVs run on the host (the activation unit has no INT8 formats), so there is no
ACT kernel. Its error against the float64 reference is reported (about 6e-3 of
the update on the default model, against 2e-4 .. 4e-4 for FP16), not held to
:func:`tolerance`.
"""

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.dimm import Dimm
# the golden chain of the activation unit and bit comparison, shared with ``run-layer``
from ndpdimm.sw.layer.run import bit_identical, golden_elementwise, golden_softmax, tensor_bits

__all__ = ["ReducedModel", "LayerWeights", "KvCache", "ReferenceStep", "Placement", "HermesNdp",
           "KernelRecord", "StepResult", "reference_decode_step", "prefill", "neuron_frequency",
           "make_placement", "oracle_prediction", "tolerance", "hermes_decode_step",
           "run_hermes_decode", "MAX_BATCH", "FP16_UNIT_ROUNDOFF", "ROUNDINGS_PER_LAYER",
           "TOLERANCE_FACTOR"]

F16, F32, F64 = torch.float16, torch.float32, torch.float64
#: Sequences per decode step (the GEMV engine's batch shares one weight stream).
MAX_BATCH = 4
FP16_UNIT_ROUNDOFF = 2.0 ** -11
#: FP16 roundings on the NDP path per layer: LN1 out, q, K/V, softmax out, LN2 out, ReLU out.
ROUNDINGS_PER_LAYER = 6
TOLERANCE_FACTOR = 1.0
LN_EPS = 1e-5


def _positive_int(name, v):
    if not isinstance(v, int) or isinstance(v, bool) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return v


def tolerance(layers: int) -> float:
    """Bound on ``||out - ref||_2 / ||ref - x||_2`` of one step of a ``layers``-layer model."""
    return TOLERANCE_FACTOR * ROUNDINGS_PER_LAYER * layers * FP16_UNIT_ROUNDOFF


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
            _positive_int(name, getattr(self, name))
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


def _layer_norm(x, w, b):
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
        h = _layer_norm(r, lw.ln1_w, lw.ln1_b)
        qkv = h @ lw.w_qkv.to(dtype).T + lw.b_qkv.to(dtype)
        q, k, v = qkv.split(model.hidden, dim=1)
        K = torch.cat([K0.to(dtype), k[:, None]], dim=1)
        V = torch.cat([V0.to(dtype), v[:, None]], dim=1)
        keys.append(K.to(F32))
        values.append(V.to(F32))
        r = r + _attend(q, K, V, model.heads) @ lw.w_o.to(dtype).T + lw.b_o.to(dtype)
        z = _layer_norm(r, lw.ln2_w, lw.ln2_b) @ lw.w_fc1.to(dtype).T + lw.b_fc1.to(dtype)
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
    _positive_int("tokens", tokens)
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


# ---- placement -------------------------------------------------------------------------------

@dataclass
class Placement:
    """Where each layer's rows live: ``neurons`` [layers, ffn] and ``qkv`` [layers, 3 hidden]
    (int: -1 = GPU, ``d`` = DIMM ``d``). Attention heads go to DIMMs round-robin."""
    neurons: np.ndarray
    qkv: np.ndarray

    def __post_init__(self):
        self.neurons = _as_int_array("placement neurons", self.neurons)
        self.qkv = _as_int_array("placement qkv", self.qkv)

    def check(self, model: ReducedModel, n_dimms: int):
        for name, arr, width in (("neurons", self.neurons, model.ffn),
                                 ("qkv", self.qkv, 3 * model.hidden)):
            if arr.shape != (model.layers, width):
                raise ValueError(f"placement {name} must have shape ({model.layers}, {width}), "
                                 f"got {arr.shape}")
            bad = arr[(arr < -1) | (arr >= n_dimms)]
            if bad.size:
                raise ValueError(f"placement {name} holds DIMM index {int(bad[0])}: the entries "
                                 f"must be -1 (GPU) or 0..{n_dimms - 1} ({n_dimms} DIMMs)")


def _as_int_array(name, a):
    if isinstance(a, torch.Tensor):
        a = a.numpy()
    a = np.asarray(a)
    if a.ndim != 2 or not (np.issubdtype(a.dtype, np.integer) and a.dtype != np.bool_):
        raise ValueError(f"{name} must be a 2-D integer array, got {a.dtype} with shape {a.shape}")
    return a.astype(np.int64)


def make_placement(model: ReducedModel, n_dimms: int, hot_fraction: float = 0.2,
                   qkv_gpu_fraction: float = 0.25, frequency: torch.Tensor | None = None) -> Placement:
    """Hot/cold split from a firing profile (``frequency``, default :func:`neuron_frequency`):
    each layer's ``hot_fraction`` most frequent neurons on the GPU, the others dealt to the DIMMs
    greedily (most frequent first, to the DIMM with the least expected activations so far);
    the first ``qkv_gpu_fraction`` of the QKV rows on the GPU, the rest in contiguous blocks."""
    _positive_int("n_dimms", n_dimms)
    for name, v in (("hot_fraction", hot_fraction), ("qkv_gpu_fraction", qkv_gpu_fraction)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
            raise ValueError(f"{name} must be in [0, 1], got {v!r}")
    freq = neuron_frequency(model) if frequency is None else frequency
    if tuple(freq.shape) != (model.layers, model.ffn):
        raise ValueError(f"frequency must be [{model.layers}, {model.ffn}], got {tuple(freq.shape)}")
    neurons = np.full((model.layers, model.ffn), -1, np.int64)
    n_hot = round(hot_fraction * model.ffn)
    for layer in range(model.layers):
        order = torch.argsort(freq[layer], descending=True, stable=True).tolist()
        load = [0.0] * n_dimms
        for j in order[n_hot:]:
            d = min(range(n_dimms), key=lambda i: (load[i], i))
            neurons[layer, j] = d
            load[d] += float(freq[layer, j]) + 1e-3   # ties: spread by count as well
    rows = 3 * model.hidden
    n_gpu = round(qkv_gpu_fraction * rows)
    qkv = np.full((model.layers, rows), -1, np.int64)
    bounds = [n_gpu + (rows - n_gpu) * i // n_dimms for i in range(n_dimms + 1)]
    for d in range(n_dimms):
        qkv[:, bounds[d]:bounds[d + 1]] = d
    return Placement(neurons, qkv)


# ---- records ---------------------------------------------------------------------------------

@dataclass
class KernelRecord:
    """One NDP kernel of a step: what ran where, its cycles and its golden check."""
    layer: int
    phase: str            # "qkv", "attention", "mlp"
    op: str               # e.g. "GEMV dense", "ACT RELU", "SOFTMAX"
    dimm: int             # logical DIMM
    rows: int             # output rows / neurons / elements
    batch: int
    backend: str
    elapsed_cycles: int
    cycles_by_opcode: dict
    bit_exact: bool
    note: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class StepResult:
    """:meth:`HermesNdp.decode_step`'s result (see the module docstring)."""
    out: torch.Tensor                 # float32 [B, hidden]
    cache: KvCache                    # with this token appended (float32, as the GPU holds it)
    kernels: list                     # KernelRecord
    reference: ReferenceStep          # float64
    predicted: torch.Tensor           # [layers, ffn] bool, as given
    relative_error: float             # ||out - ref|| / ||ref - x||
    max_abs_error: float
    tolerance: float
    missed: list                      # per layer: neurons that fired but were not computed
    extra: list                       # per layer: cold neurons computed that did not fire
    cold_computed: list               # per layer: cold neurons computed on the DIMMs
    n_dimms: int = 1

    @property
    def all_bit_exact(self) -> bool:
        return all(k.bit_exact for k in self.kernels)

    @property
    def within_tolerance(self) -> bool:
        return self.relative_error <= self.tolerance

    @property
    def ok(self) -> bool:
        return self.all_bit_exact and self.within_tolerance

    def cycles_by_dimm(self) -> dict:
        """Sum of elapsed cycles per (layer, phase, logical DIMM)."""
        out = {}
        for k in self.kernels:
            key = (k.layer, k.phase, k.dimm)
            out[key] = out.get(key, 0) + k.elapsed_cycles
        return out

    @property
    def ndp_cycles(self) -> int:
        """Critical path of the step's NDP work: per (layer, phase) the busiest DIMM, summed."""
        per_phase = {}
        for (layer, phase, _), c in self.cycles_by_dimm().items():
            per_phase[layer, phase] = max(per_phase.get((layer, phase), 0), c)
        return sum(per_phase.values())

    def as_dict(self) -> dict:
        return {"batch": self.out.shape[0], "n_dimms": self.n_dimms,
                "backend": self.kernels[0].backend if self.kernels else None,
                "all_bit_exact": self.all_bit_exact, "relative_error": self.relative_error,
                "max_abs_error": self.max_abs_error, "tolerance": self.tolerance,
                "within_tolerance": self.within_tolerance, "missed": self.missed,
                "extra": self.extra, "cold_computed": self.cold_computed,
                "ndp_cycles": self.ndp_cycles,
                "kernels": [k.as_dict() for k in self.kernels]}

    def summary(self) -> list:
        """Kernels grouped by (layer, phase, op, DIMM): count, rows, cycles, all bit-exact."""
        groups = {}
        for k in self.kernels:
            g = groups.setdefault((k.layer, k.phase, k.op, k.dimm), {
                "layer": k.layer, "phase": k.phase, "op": k.op, "dimm": k.dimm, "kernels": 0,
                "rows": 0, "elapsed_cycles": 0, "gemv_cycles": 0, "bit_exact": True})
            g["kernels"] += 1
            g["rows"] += k.rows
            g["elapsed_cycles"] += k.elapsed_cycles
            g["gemv_cycles"] += k.cycles_by_opcode.get("GEMV", 0)
            g["bit_exact"] &= k.bit_exact
        return list(groups.values())

    def table(self) -> str:
        """The :meth:`summary` as text, with the critical path and the error."""
        lines = [f"{'layer':>5} {'phase':9} {'op':16} {'dimm':>4} {'kernels':>7} {'rows':>5} "
                 f"{'cycles':>8} {'GEMV':>7} {'golden':>9}"]
        for g in self.summary():
            lines.append(f"{g['layer']:>5} {g['phase']:9} {g['op']:16} {g['dimm']:>4} "
                         f"{g['kernels']:>7} {g['rows']:>5} {g['elapsed_cycles']:>8,} "
                         f"{g['gemv_cycles']:>7,} {'bit-exact' if g['bit_exact'] else 'DIFFERS':>9}")
        backend = self.kernels[0].backend if self.kernels else "-"
        lines.append(f"NDP critical path {self.ndp_cycles:,} cycles ({backend} backend); error vs "
                     f"float64 {self.relative_error:.3g} (bound {self.tolerance:.3g}); missed "
                     f"{self.missed}, computed cold {self.cold_computed}")
        return "\n".join(lines)

    def kernel_table(self) -> str:
        """Every kernel, one line each."""
        lines = [f"{'layer':>5} {'phase':9} {'op':16} {'dimm':>4} {'rows':>5} {'batch':>5} "
                 f"{'cycles':>8} {'GEMV':>7} {'golden':>9}"]
        for k in self.kernels:
            lines.append(f"{k.layer:>5} {k.phase:9} {k.op:16} {k.dimm:>4} {k.rows:>5} {k.batch:>5} "
                         f"{k.elapsed_cycles:>8,} {k.cycles_by_opcode.get('GEMV', 0):>7,} "
                         f"{'bit-exact' if k.bit_exact else 'DIFFERS':>9}")
        return "\n".join(lines)


# ---- golden helpers --------------------------------------------------------------------------

def _golden_accumulate(prior, y):
    """The result writer's ``accumulate``: FP32 ``prior + y`` bit for bit."""
    return golden.bits_f32(golden.accumulate_bits(tensor_bits(prior), tensor_bits(y), False).astype(np.int64))


def _quantise(t, dim):
    """Symmetric INT8 with one scale per slice along ``dim`` (absmax / 127)."""
    scale = t.abs().amax(dim=dim, keepdim=True).clamp_min(1e-12) / 127
    return torch.clamp(torch.round(t / scale), -127, 127).to(torch.int8), scale


# ---- the deployment --------------------------------------------------------------------------

@dataclass
class _DimmLayer:
    qkv_rows: torch.Tensor | None = None         # global QKV rows on this DIMM
    qkv_w: object = None
    neurons: torch.Tensor | None = None          # global neuron ids on this DIMM (sorted)
    fc1_w: object = None                         # DOT [J, H] (fp16, or int8)
    fc2_w: object = None                         # AXPY [J, H]
    fc1_q: torch.Tensor | None = None            # INT8: the stored matrices (golden check)
    fc2_q: torch.Tensor | None = None
    fc1_scale: torch.Tensor | None = None        # INT8: per row [J, 1]
    fc2_scale: torch.Tensor | None = None        # INT8: per output [1, H]


class HermesNdp:
    """``model`` deployed on the GPU stand-in and ``dimms`` (a list of :class:`Dimm`, one per
    logical DIMM; the same object may appear several times) following ``placement``.

    The cold QKV rows and neurons of every layer are stored on their DIMMs at construction
    (FP16, or INT8 with ``cold_dtype="int8"``); :meth:`close` frees them.
    """

    def __init__(self, model: ReducedModel, dimms, placement: Placement, cold_dtype: str = "fp16"):
        if not isinstance(model, ReducedModel):
            raise ValueError(f"model must be a ReducedModel, got {type(model).__name__}")
        if isinstance(dimms, Dimm):
            dimms = [dimms]
        dimms = list(dimms) if isinstance(dimms, (list, tuple)) else None
        if not dimms or not all(isinstance(d, Dimm) for d in dimms):
            raise ValueError("dimms must be a non-empty list of Dimm objects")
        if not isinstance(placement, Placement):
            raise ValueError(f"placement must be a Placement, got {type(placement).__name__}")
        placement.check(model, len(dimms))
        if cold_dtype not in ("fp16", "int8"):
            raise ValueError(f"cold_dtype must be 'fp16' or 'int8', got {cold_dtype!r}")
        self.model, self.dimms, self.placement, self.cold_dtype = model, dimms, placement, cold_dtype
        self.layers = []
        self._stored = []
        try:
            for layer, lw in enumerate(model.weights):
                per = []
                for d, dimm in enumerate(dimms):
                    dl = _DimmLayer()
                    rows = torch.from_numpy(np.nonzero(placement.qkv[layer] == d)[0])
                    if rows.numel():
                        dl.qkv_rows = rows
                        dl.qkv_w = self._store(dimm, lw.w_qkv[rows].contiguous(), "dot")
                    ids = torch.from_numpy(np.nonzero(placement.neurons[layer] == d)[0])
                    if ids.numel():
                        dl.neurons = ids
                        w1, w2t = lw.w_fc1[ids].contiguous(), lw.w_fc2[:, ids].T.contiguous()
                        if cold_dtype == "int8":
                            dl.fc1_q, dl.fc1_scale = _quantise(w1.float(), 1)
                            dl.fc2_q, dl.fc2_scale = _quantise(w2t.float(), 0)
                            w1, w2t = dl.fc1_q, dl.fc2_q
                        dl.fc1_w = self._store(dimm, w1, "dot")
                        dl.fc2_w = self._store(dimm, w2t, "axpy")
                    per.append(dl)
                self.layers.append(per)
        except BaseException:
            self.close()
            raise

    def _store(self, dimm, W, layout):
        wb = dimm.store_weights(W, layout=layout)
        self._stored.append((dimm, wb))
        return wb

    def close(self):
        """Free the weights this deployment stored."""
        for dimm, wb in self._stored:
            if wb.buffer.live:
                dimm.free(wb)
        self._stored = []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- one step ----------------------------------------------------------------------------
    def check_prediction(self, predicted) -> torch.Tensor:
        m = self.model
        if not isinstance(predicted, torch.Tensor) or predicted.dtype != torch.bool or \
                tuple(predicted.shape) != (m.layers, m.ffn):
            raise ValueError(f"predicted must be a bool tensor [{m.layers}, {m.ffn}], got "
                             f"{getattr(predicted, 'dtype', type(predicted).__name__)} "
                             f"{tuple(getattr(predicted, 'shape', ()))}")
        return predicted

    def decode_step(self, cache: KvCache, x: torch.Tensor, predicted: torch.Tensor) -> StepResult:
        """One decode step of ``x`` (float32 [B, hidden]) over ``cache`` with the cold neurons in
        ``predicted`` ([layers, ffn] bool, union over the batch) computed on the DIMMs."""
        m = self.model
        m.check_input(x, cache)
        self.check_prediction(predicted)
        B = x.shape[0]
        limit = min(d.config.max_batch for d in self.dimms)
        if B > limit:
            raise ValueError(f"batch {B} exceeds the DIMMs' max_batch {limit}")
        run = _StepRun(self, B)
        r = x.clone()
        keys, values = [], []
        for layer, lw in enumerate(m.weights):
            run.layer = layer
            h = _layer_norm(r, lw.ln1_w, lw.ln1_b)
            qkv = self._qkv(run, layer, lw, h)
            q, k, v = qkv.split(m.hidden, dim=1)
            K = torch.cat([cache.keys[layer], k[:, None]], dim=1)
            V = torch.cat([cache.values[layer], v[:, None]], dim=1)
            keys.append(K)
            values.append(V)
            attn = self._attention(run, q, K, V)
            r = r + attn @ lw.w_o.float().T + lw.b_o
            h2 = _layer_norm(r, lw.ln2_w, lw.ln2_b)
            r = r + self._mlp(run, layer, lw, h2, predicted[layer]) + lw.b_fc2
        ref = reference_decode_step(m, cache, x, F64)
        delta = (ref.out - x.double()).norm().item()
        err = (r.double() - ref.out).norm().item()
        actual = ref.active.any(dim=1)
        cold = torch.from_numpy(self.placement.neurons >= 0)
        return StepResult(
            out=r, cache=KvCache(keys, values), kernels=run.records, reference=ref,
            predicted=predicted.clone(), relative_error=err / max(delta, 1e-30),
            max_abs_error=(r.double() - ref.out).abs().max().item(), tolerance=tolerance(m.layers),
            missed=(actual & ~predicted & cold).sum(1).tolist(),
            extra=(~actual & predicted & cold).sum(1).tolist(),
            cold_computed=(predicted & cold).sum(1).tolist(), n_dimms=len(self.dimms))

    def _qkv(self, run, layer, lw, h):
        B = h.shape[0]
        out = torch.empty(B, 3 * self.model.hidden)
        gpu = torch.from_numpy(np.nonzero(self.placement.qkv[layer] < 0)[0])
        if gpu.numel():
            out[:, gpu] = h @ lw.w_qkv[gpu].float().T + lw.b_qkv[gpu]
        h16 = h.to(F16)
        for d, dl in enumerate(self.layers[layer]):
            if dl.qkv_rows is None:
                continue
            bias = lw.b_qkv[dl.qkv_rows].repeat(B, 1)
            W = lw.w_qkv[dl.qkv_rows]
            want = _golden_accumulate(bias, golden.gemv_dot(W, h16, Dtype.FP16))
            out[:, dl.qkv_rows] = run.kernel(
                "qkv", "GEMV dense", d, len(dl.qkv_rows),
                lambda dimm: dimm.gemv(dl.qkv_w, h16, accumulate=bias), want)
        return out

    def _attention(self, run, q, K, V):
        m = self.model
        B, T, _ = K.shape
        dh = m.head_dim
        scale = 1 / math.sqrt(dh)
        out = torch.empty(B, m.hidden)
        for head in range(m.heads):
            d = head % len(self.dimms)
            dimm = self.dimms[d]
            cols = slice(head * dh, (head + 1) * dh)
            lanes = dimm.config.act_lanes
            for b in range(B):
                Kb = K[b, :, cols].to(F16).contiguous()               # [T, d]
                Vt = V[b, :, cols].T.to(F16).contiguous()             # [d, T]
                qb = q[b:b + 1, cols].to(F16)
                kw, vw = dimm.store_weights(Kb), dimm.store_weights(Vt)
                try:
                    s = run.kernel("attention", "GEMV scores", d, T,
                                   lambda dm: dm.gemv(kw, qb), golden.gemv_dot(Kb, qb, Dtype.FP16))
                    ss = run.kernel("attention", "ACT SCALE", d, T,
                                    lambda dm: dm.activation("scale", s, k=scale),
                                    golden_elementwise(ActOp.SCALE, s, k=scale))
                    p = run.kernel("attention", "SOFTMAX", d, T,
                                   lambda dm: dm.softmax(ss, out_dtype=F16),
                                   golden_softmax(ss, lanes))
                    out[b:b + 1, cols] = run.kernel(
                        "attention", "GEMV V^T p", d, dh, lambda dm: dm.gemv(vw, p),
                        golden.gemv_dot(Vt, p, Dtype.FP16))
                finally:
                    dimm.free(kw)
                    dimm.free(vw)
        return out

    def _mlp(self, run, layer, lw, h2, predicted):
        B = h2.shape[0]
        hot = torch.from_numpy(np.nonzero(self.placement.neurons[layer] < 0)[0])
        y = torch.zeros(B, self.model.hidden)
        if hot.numel():
            a = torch.relu(h2 @ lw.w_fc1[hot].float().T + lw.b_fc1[hot])
            y += a @ lw.w_fc2[:, hot].float().T
        for d, dl in enumerate(self.layers[layer]):
            if dl.neurons is None:
                continue
            local = torch.nonzero(predicted[dl.neurons]).flatten()
            if not local.numel():
                continue
            ids = dl.neurons[local]
            if self.cold_dtype == "int8":
                y += self._mlp_int8(run, d, dl, lw, h2, local, ids)
            else:
                y += self._mlp_fp16(run, d, dl, lw, h2, local, ids)
        return y

    def _mlp_fp16(self, run, d, dl, lw, h2, local, ids):
        B, n = h2.shape[0], local.numel()
        h16 = h2.to(F16)
        bias = lw.b_fc1[ids].repeat(B, 1)
        W1 = lw.w_fc1[ids]
        z = run.kernel("mlp", "GEMV row_gather", d, n,
                       lambda dm: dm.gemv(dl.fc1_w, h16, op="row_gather", idx=local,
                                          accumulate=bias),
                       _golden_accumulate(bias, golden.gemv_dot(W1, h16, Dtype.FP16)))
        a = run.kernel("mlp", "ACT RELU", d, n, lambda dm: dm.activation("relu", z, out_dtype=F16),
                       golden_elementwise(ActOp.RELU, z, out=F16))
        H = torch.zeros(B, len(dl.neurons), dtype=F16)
        H[:, local] = a
        W2t = lw.w_fc2[:, dl.neurons].T.contiguous()
        return run.kernel("mlp", "GEMV col_gather", d, n,
                          lambda dm: dm.gemv(dl.fc2_w, H, op="col_gather", idx=local),
                          golden.gemv_col_gather(W2t, H, local, Dtype.FP16))

    def _mlp_int8(self, run, d, dl, lw, h2, local, ids):
        B, n = h2.shape[0], local.numel()
        hq, hs = _quantise(h2, 1)                                        # per sequence
        zi = run.kernel("mlp", "GEMV row_gather", d, n,
                        lambda dm: dm.gemv(dl.fc1_w, hq, op="row_gather", idx=local),
                        golden.gemv_row_gather(dl.fc1_q, hq, local, Dtype.INT8), note="int8")
        z = zi.double() * hs.double() * dl.fc1_scale[local].double().T + lw.b_fc1[ids].double()
        a = torch.relu(z).float()
        aq, as_ = _quantise(a, 1)
        H = torch.zeros(B, len(dl.neurons), dtype=torch.int8)
        H[:, local] = aq
        yi = run.kernel("mlp", "GEMV col_gather", d, n,
                        lambda dm: dm.gemv(dl.fc2_w, H, op="col_gather", idx=local),
                        golden.gemv_col_gather(dl.fc2_q, H, local, Dtype.INT8), note="int8")
        return (yi.double() * as_.double() * dl.fc2_scale.double()).float()


class _StepRun:
    """Runs one step's kernels on their DIMMs, checks them, keeps the records."""

    def __init__(self, ndp, batch):
        self.ndp, self.batch, self.layer, self.records = ndp, batch, 0, []

    def kernel(self, phase, op, d, rows, fn, want, note=""):
        dimm = self.ndp.dimms[d]
        got = fn(dimm)
        st = dimm.last_run
        self.records.append(KernelRecord(
            layer=self.layer, phase=phase, op=op, dimm=d, rows=rows, batch=got.shape[0] if
            got.dim() > 1 else 1, backend=st.backend, elapsed_cycles=st.elapsed_cycles,
            cycles_by_opcode=st.cycles_by_opcode(), bit_exact=bit_identical(got, want), note=note))
        return got


def hermes_decode_step(ndp: HermesNdp, cache: KvCache, x: torch.Tensor,
                       predicted: torch.Tensor) -> StepResult:
    """:meth:`HermesNdp.decode_step` as a function."""
    return ndp.decode_step(cache, x, predicted)


def run_hermes_decode(backend="model", batch: int = 2, n_dimms: int = 2, prompt_tokens: int = 6,
                      config=None, seed: int = 0, json_out=None, log=print) -> dict:
    """The built-in configuration end to end: the default :class:`ReducedModel`, a prompt of
    ``prompt_tokens`` random tokens per sequence prefilled on the GPU, one decode step of
    ``batch`` sequences with the oracle prediction over ``n_dimms`` logical DIMMs (all served by
    one ``Dimm`` on ``backend``, ``config`` its :class:`CoreConfig`). Prints the kernel table,
    returns (and writes to ``json_out``) :meth:`StepResult.as_dict` plus the setup."""
    _positive_int("batch", batch)
    _positive_int("prompt_tokens", prompt_tokens)
    model = ReducedModel(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    cache = prefill(model, torch.randn(batch, prompt_tokens, model.hidden, generator=g))
    x = torch.randn(batch, model.hidden, generator=g)
    placement = make_placement(model, n_dimms)
    with Dimm(backend, config) as dimm:
        with HermesNdp(model, [dimm] * n_dimms, placement) as ndp:
            res = ndp.decode_step(cache, x, oracle_prediction(model, cache, x))
        cfg = dimm.config.as_dict()
    log(f"[hermes-decode] {model.layers} layers, hidden {model.hidden}, {model.heads} heads, ffn "
        f"{model.ffn}; batch {batch}, KV cache {prompt_tokens} + 1 tokens, {n_dimms} DIMMs on the "
        f"{backend} backend")
    log(res.table())
    doc = {"model": {"hidden": model.hidden, "heads": model.heads, "ffn": model.ffn,
                     "layers": model.layers, "seed": seed}, "prompt_tokens": prompt_tokens,
           "config": cfg, "source_of_cycles": ("RTL simulation (Verilated NdpCore)" if backend == "rtl"
                                               else "calibrated performance model"),
           **res.as_dict()}
    if json_out:
        path = Path(json_out)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")
        log(f"wrote {path}")
    return doc
