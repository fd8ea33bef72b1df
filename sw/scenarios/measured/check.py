"""A GPU model held against a measured table, op by op: the error tables of ``ndpdimm gpu-check``.

For every linear and element-wise op of the tables, the measured time beside the fitted
model's (:class:`~ndpdimm.sw.scenarios.measured.fit.FittedGpu`) and the roofline's
(``sw/scenarios/gpu.py``: a linear op as :meth:`GpuModel.linear`, an element-wise one as a
kernel moving its bytes). Each model's section holds ``median_abs_pct`` and ``max_abs_pct``
over every op, per op kind (and within a kind per token range: ``1-16``, decode GEMVs;
``17-255``; ``256+``, prefill GEMMs; an attention call's tokens are its prefill chunk plus its
decoding sequences; its calls in the fit's cache-resident corner are a kind of their own) and
per op name (an element-wise op by its class; an attention call as ``attention_decode``,
``attention_prefill`` or ``attention_mixed``); an error is
``100 (model / measured - 1)``, so the sign says which way a model is off (``median_pct``).
"""

import numpy as np

from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.measured.fit import ELEM, FittedGpu, elementwise_points, linear_points

__all__ = ["compare", "summary", "TOKEN_RANGES", "KINDS"]

#: the kinds of the error tables: a decode attention call in the fit's cache-resident corner
#: (``attention.py``) is reported apart from the others
KINDS = ("linear", "elementwise", "attention", "attention_cache_resident")

#: token ranges of the error table: (name, lowest, highest)
TOKEN_RANGES = (("1-16", 1, 16), ("17-255", 17, 255), ("256+", 256, 1 << 62))


def summary(errors) -> dict:
    """Median and max absolute error and signed median (%, 2 decimals) of ``errors`` in %."""
    e = np.asarray(errors, float)
    if not e.size:
        return {"points": 0, "median_abs_pct": None, "max_abs_pct": None, "median_pct": None}
    return {"points": int(e.size), "median_abs_pct": round(float(np.median(np.abs(e))), 2),
            "max_abs_pct": round(float(np.max(np.abs(e))), 2),
            "median_pct": round(float(np.median(e)), 2)}


def _errors(rows, key) -> list:
    return [100 * (r[key] / r["measured_s"] - 1) for r in rows]


def _by_tokens(rows, key) -> dict:
    return {name: summary(_errors([r for r in rows if lo <= r["tokens"] <= hi], key))
            for name, lo, hi in TOKEN_RANGES}


def _section(rows, key) -> dict:
    out = summary(_errors(rows, key))
    out["by_kind"] = {}
    for kind in KINDS:
        mine = [r for r in rows if r["kind"] == kind]
        if not mine and kind.startswith("attention"):
            continue
        out["by_kind"][kind] = {**summary(_errors(mine, key)), "by_tokens": _by_tokens(mine, key)}
        if kind.startswith("attention"):         # decode, prefill and mixed calls apart
            out["by_kind"][kind]["by_op"] = {
                op: summary(_errors([r for r in mine if r["op"] == op], key))
                for op in sorted({r["op"] for r in mine})}
    out["by_op"] = {op: summary(_errors([r for r in rows if r["op"] == op], key))
                    for op in sorted({r["op"] for r in rows})}
    return out


def _roofline_attention(roofline: GpuModel, a, d) -> float:
    """The roofline's time of one attention call: its decode and prefill parts, each a kernel."""
    t = 0.0
    if a.n_decode:
        t += roofline.attention(a.n_decode, 1, a.kv_decode, d.heads, d.kv_heads, d.head_dim).seconds
    if a.prefill_chunk:
        t += roofline.attention(1, a.prefill_chunk, a.kv_prefill + a.prefill_chunk, d.heads,
                                d.kv_heads, d.head_dim).seconds
    return t


def compare(tables, dims, fitted: FittedGpu | None, roofline: GpuModel) -> dict:
    """``{"fitted": section or None, "roofline": section, "rows": [...]}`` for the ops of
    ``tables`` (a table's own dimensions first, else ``dims``); an element-wise op whose class
    the fit lacks is compared on the roofline only."""
    rows = []
    for op, tp, m, n, k, t in linear_points(tables, dims):
        rows.append({"op": op, "kind": "linear", "tp": tp, "tokens": m, "measured_s": t,
                     "fitted_s": None if fitted is None else float(fitted.linear_seconds(m, n, k)),
                     "roofline_s": roofline.linear(m, n, k).seconds})
    for cls, tp, m, width, t in elementwise_points(tables, dims):
        fit_s = None
        if fitted is not None and cls in fitted.elementwise:
            fit_s = float(fitted.elementwise_seconds(cls, m, width))
        rows.append({"op": cls, "kind": "elementwise", "tp": tp, "tokens": m, "measured_s": t,
                     "fitted_s": fit_s,
                     "roofline_s": roofline.kernel(0.0, 2.0 * ELEM * m * width).seconds})
    for t in tables:
        d = t.dims or dims
        for a in t.attention:
            corner = fitted is not None and fitted.attention_corner(a, d)
            call = ("mixed" if a.prefill_chunk and a.n_decode else
                    "prefill" if a.prefill_chunk else "decode")
            rows.append({"op": f"attention_{call}", "kind": "attention_cache_resident" if corner
                         else "attention", "tp": 1, "tokens": a.prefill_chunk + a.n_decode,
                         "measured_s": a.seconds,
                         "fitted_s": float(fitted.attention_seconds(a, d))
                         if fitted is not None and fitted.attention else None,
                         "roofline_s": _roofline_attention(roofline, a, d)})
    fitted_rows = [r for r in rows if r["fitted_s"] is not None]
    return {"fitted": _section(fitted_rows, "fitted_s") if fitted is not None else None,
            "roofline": _section(rows, "roofline_s"), "rows": rows}
