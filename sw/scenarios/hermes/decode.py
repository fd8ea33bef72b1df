"""Hermes decode, functionally: one decode step of a reduced ReLU LLM split between a GPU and NDP-DIMMs.

:class:`HermesNdp` deploys the reduced model
(:class:`~ndpdimm.sw.scenarios.hermes.reduced_model.ReducedModel`) on "a GPU"
(torch float32, the stand-in) plus a list of
:class:`~ndpdimm.sw.driver.dimm.Dimm` objects following a :class:`Placement`
(:func:`make_placement`: hot/cold split from a firing profile), and
:meth:`HermesNdp.decode_step` (or :func:`hermes_decode_step`) runs one step
for a batch of ``B`` = 1..4 sequences, returning a
:class:`~ndpdimm.sw.scenarios.hermes.checks.StepResult`;
:func:`run_hermes_decode` is the built-in configuration end to end
(``ndpdimm demo``). The split:

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

Checks, tolerance and cycle records: ``sw/scenarios/hermes/checks.py``.

INT8 cold neurons (option, ``cold_dtype="int8"``): each DIMM's fc1 rows are
stored as INT8 with one symmetric scale per row, its fc2 columns with one scale
per output; the LN output and the ReLU output are quantised per sequence
(symmetric, absmax / 127), both GEMVs accumulate in INT32 (bit-exact vs the
golden model). The rescale, bias, ReLU and requantisation between the two
GEMVs run on the host (the activation unit has no INT8 formats), so there is no
ACT kernel. Its error against the float64 reference is reported (about 6e-3 of
the update on the default model, against 2e-4 .. 4e-4 for FP16), not held to
:func:`~ndpdimm.sw.scenarios.hermes.checks.tolerance`.
"""

import math
from dataclasses import dataclass

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.activation.unit import ActOp
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.dimm import Dimm, cycles_source

# the golden chain of the activation unit, shared with ``run-layer``
from ndpdimm.sw.layer.run import golden_elementwise, golden_softmax
from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.scenarios.hermes.checks import StepResult, StepRun, golden_accumulate, tolerance
from ndpdimm.sw.scenarios.hermes.reduced_model import (
    F16,
    F64,
    KvCache,
    ReducedModel,
    layer_norm,
    neuron_frequency,
    oracle_prediction,
    positive_int,
    prefill,
    reference_decode_step,
)

__all__ = ["Placement", "HermesNdp", "make_placement", "hermes_decode_step", "run_hermes_decode"]


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
    positive_int("n_dimms", n_dimms)
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


# ---- INT8 ------------------------------------------------------------------------------------

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
        run = StepRun(self, B)
        r = x.clone()
        keys, values = [], []
        for layer, lw in enumerate(m.weights):
            run.layer = layer
            h = layer_norm(r, lw.ln1_w, lw.ln1_b)
            qkv = self._qkv(run, layer, lw, h)
            q, k, v = qkv.split(m.hidden, dim=1)
            K = torch.cat([cache.keys[layer], k[:, None]], dim=1)
            V = torch.cat([cache.values[layer], v[:, None]], dim=1)
            keys.append(K)
            values.append(V)
            attn = self._attention(run, q, K, V)
            r = r + attn @ lw.w_o.float().T + lw.b_o
            h2 = layer_norm(r, lw.ln2_w, lw.ln2_b)
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
            want = golden_accumulate(bias, golden.gemv_dot(W, h16, Dtype.FP16))
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
                       golden_accumulate(bias, golden.gemv_dot(W1, h16, Dtype.FP16)))
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
    positive_int("batch", batch)
    positive_int("prompt_tokens", prompt_tokens)
    model = ReducedModel(seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    cache = prefill(model, torch.randn(batch, prompt_tokens, model.hidden, generator=g))
    x = torch.randn(batch, model.hidden, generator=g)
    placement = make_placement(model, n_dimms)
    with Dimm(backend, config) as dimm:
        with HermesNdp(model, [dimm] * n_dimms, placement) as ndp:
            res = ndp.decode_step(cache, x, oracle_prediction(model, cache, x))
        cfg = dimm.config.as_dict()
        source, calibrated = cycles_source(backend, dimm.config)
    log(f"[hermes-decode] {model.layers} layers, hidden {model.hidden}, {model.heads} heads, ffn "
        f"{model.ffn}; batch {batch}, KV cache {prompt_tokens} + 1 tokens, {n_dimms} DIMMs on the "
        f"{backend} backend")
    log(res.table())
    doc = {"model": {"hidden": model.hidden, "heads": model.heads, "ffn": model.ffn,
                     "layers": model.layers, "seed": seed}, "prompt_tokens": prompt_tokens,
           "config": cfg, "source_of_cycles": source, "ndp_calibrated": calibrated,
           **res.as_dict()}
    if json_out:
        path = write_json(doc, json_out)
        log(f"wrote {path}")
    return doc
