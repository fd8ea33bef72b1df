"""A GPU model held against a measured table, op by op: the error tables of ``ndpdimm gpu-check``.

For every linear and element-wise op of the tables, the measured time beside the fitted
model's (:class:`~ndpdimm.sw.scenarios.measured.fit.FittedGpu`) and the roofline's
(``sw/scenarios/gpu.py``: a linear op as :meth:`GpuModel.linear`, an element-wise one as a
kernel moving its bytes). Each model's section holds ``median_abs_pct`` and ``max_abs_pct``
over every op, per op kind (and within a kind per token range: ``1-16``, decode GEMVs;
``17-255``; ``256+``, prefill GEMMs) and per op name (an element-wise op by its class); an
error is
``100 (model / measured - 1)``, so the sign says which way a model is off (``median_pct``).
"""

import numpy as np

from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.measured.fit import ELEM, FittedGpu, elementwise_points, linear_points

__all__ = ["compare", "TOKEN_RANGES"]

#: token ranges of the error table: (name, lowest, highest)
TOKEN_RANGES = (("1-16", 1, 16), ("17-255", 17, 255), ("256+", 256, 1 << 62))


def _summary(errors) -> dict:
    e = np.asarray(errors, float)
    if not e.size:
        return {"points": 0, "median_abs_pct": None, "max_abs_pct": None, "median_pct": None}
    return {"points": int(e.size), "median_abs_pct": round(float(np.median(np.abs(e))), 2),
            "max_abs_pct": round(float(np.max(np.abs(e))), 2),
            "median_pct": round(float(np.median(e)), 2)}


def _errors(rows, key) -> list:
    return [100 * (r[key] / r["measured_s"] - 1) for r in rows]


def _by_tokens(rows, key) -> dict:
    return {name: _summary(_errors([r for r in rows if lo <= r["tokens"] <= hi], key))
            for name, lo, hi in TOKEN_RANGES}


def _section(rows, key) -> dict:
    out = _summary(_errors(rows, key))
    out["by_kind"] = {}
    for kind in ("linear", "elementwise"):
        mine = [r for r in rows if r["kind"] == kind]
        out["by_kind"][kind] = {**_summary(_errors(mine, key)), "by_tokens": _by_tokens(mine, key)}
    out["by_op"] = {op: _summary(_errors([r for r in rows if r["op"] == op], key))
                    for op in sorted({r["op"] for r in rows})}
    return out


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
    fitted_rows = [r for r in rows if r["fitted_s"] is not None]
    return {"fitted": _section(fitted_rows, "fitted_s") if fitted is not None else None,
            "roofline": _section(rows, "roofline_s"), "rows": rows}
