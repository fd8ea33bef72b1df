"""The two-phase estimate of one kernel kind's RTL-to-charged time ratio, with sub-sampled replays.

One kind's draws (with probability proportional to their charged cycles, ``stats.draw``) are
measured at three costs; each phase's draws are the first ones of the phase before, so every
phase is a random sub-sample of the one before (the draws are independent):

1. **model** (``n1`` draws): the whole invocation on the timing-only model backend, about a
   second each: ``x_i = M_i / c_i`` (``M`` the model backend's cycles, ``c`` the charged ones).
2. **RTL** (``n2 <= n1``): the invocation on the RTL, whole or *sub-sampled*: a random subset
   of its like groups after a warm-up group (``sw/sampling/subsample.py``). The ratio
   estimator scales the sub-sample by the model: ``y^_i = x_i * (RTL_sub / M_sub)`` (exact,
   ``y_i = RTL_i / c_i``, when replayed whole).
3. **full** (``n3``, sub-sampled RTL draws also replayed whole on the RTL):
   ``q_j = y_j / y^_j``. Their mean ``Q`` corrects the sub-sampled draws (``y~_i = Q y^_i``);
   its variance ``s_q^2 / n3`` enters the interval.

The kind's ratio is the double-sampling ratio estimator (Cochran, *Sampling Techniques*,
12.8): ``R = (mean_2 y~ / mean_2 x) * mean_1 x``, with variance
``s_y^2 / n1 + (1/n2 - 1/n1) s_d^2 + (mean_1 x / mean_2 x * B)^2 s_q^2 / n3`` where
``d_i = y~_i - (mean_2 y~ / mean_2 x) x_i`` over phase 2 and ``B`` the sub-sampled draws' share
of ``sum_2 y^ / n2``. The first two terms have ``n2 - 1`` degrees of freedom, the third
``n3 - 1`` (``stats.reestimate`` combines them with Welch-Satterthwaite). Because the RTL and
the model backend agree within a few per cent on every replay while the cost lines' fit error
varies between shapes, ``d`` varies far less than ``y``: the many cheap model draws carry the
shape-to-shape spread and the few RTL draws only the model's error. With ``n1 = n2`` and no
sub-sampling it is the plain mean of ``y`` with ``s_y^2 / n2``.

A kind with sub-sampled draws and fewer than two full ones has no interval (``Q`` unknown to
within a variance); :func:`estimate_kind` then reports ``Q`` as missing, unless a *stored*
correction is given (``correction``: the mean, standard deviation and count of ``q`` measured
elsewhere, e.g. the sampling benchmark's ``coverage`` section over 20 invocations of the kind):
it then enters exactly as the run's own full replays would, with its own count and degrees of
freedom. Whether a correction measured on other shapes holds for the run's is an assumption the
result states (``correction.source``).
"""

from __future__ import annotations

import math

import numpy as np

from ndpdimm.sw.sampling.stats import t_interval

__all__ = ["estimate_kind"]


def estimate_kind(x1, rtl: list[tuple[float, float, bool]], q, correction: dict | None = None) -> dict:
    """The kind's ratio estimate (module docstring). ``x1``: phase-1 ratios ``M / c`` (all
    ``n1`` draws); ``rtl``: ``(x_i, y^_i, sub-sampled?)`` for the ``n2`` RTL draws (whose ``x_i``
    are among ``x1``); ``q``: the ``n3`` corrections ``y / y^`` of sub-sampled draws replayed
    whole; ``correction``: a stored ``{"mean", "stdev", "n", "source"}`` used where ``q`` is
    empty. Returns ``mean``, ``terms`` (``[(variance, df), ...]``, ``None`` when no interval),
    the phase sizes and the correction's interval."""
    x1 = np.asarray(list(x1), float)
    q = list(q)
    n1, n2, n3 = x1.size, len(rtl), len(q)
    if n2 < 1 or n1 < n2:
        raise ValueError(f"a two-phase estimate needs 1 <= n2 <= n1 (got n1 {n1}, n2 {n2})")
    xs = np.array([r[0] for r in rtl], float)
    yh = np.array([r[1] for r in rtl], float)
    sub = np.array([bool(r[2]) for r in rtl])
    corr = t_interval(q) if q else None
    if corr is None and correction is not None:
        corr = {"n": int(correction["n"]), "mean": float(correction["mean"]),
                "stdev": float(correction["stdev"]), "source": correction.get("source", "stored")}
        n3 = corr["n"]
    qm = corr["mean"] if corr else 1.0
    if sub.any() and corr is None:
        return {"mean": None, "terms": None, "n1": n1, "n2": n2, "n3": 0, "sub_sampled": int(sub.sum()),
                "correction": None, "note": "sub-sampled draws but no full replay: correction unknown"}
    y = np.where(sub, qm * yh, yh)
    x1m, x2m = float(x1.mean()), float(xs.mean())
    ratio = float(y.mean()) / x2m
    mean = ratio * x1m
    out = {"n1": n1, "n2": n2, "n3": n3, "sub_sampled": int(sub.sum()), "mean": mean,
           "model_over_charged": x1m, "rtl_over_model": ratio, "correction": corr}
    if n2 < 2:
        out["terms"] = None
        return out
    d = y - ratio * xs
    s2y, s2d = float(y.var(ddof=1)), float(d.var(ddof=1))
    terms = [(s2y / n1 + (1 / n2 - 1 / n1) * s2d, n2 - 1)]
    if sub.any():
        b = float(yh[sub].sum()) / n2
        if corr["stdev"] is None:
            out["terms"] = None
            return out
        terms.append(((x1m / x2m * b) ** 2 * corr["stdev"] ** 2 / n3, n3 - 1))
    out["terms"] = terms
    var = sum(v for v, _ in terms)
    out["stdev_of_mean"] = math.sqrt(var)
    return out
