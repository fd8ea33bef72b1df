"""The sample design and the interval arithmetic of sampled RTL co-simulation.

**Design.** The strata are the kernel kinds of a :class:`~ndpdimm.sw.sampling.record.KernelLog`.
:func:`allocate` shares ``N`` samples among them: two each first (a t-interval needs two),
one each if ``N`` is smaller than twice the number of kinds (then kinds with one sample
get no interval), the largest kinds first if ``N`` is smaller still; the rest in
proportion to each kind's share of the charged NDP cycles (largest remainders). Within a
kind, :func:`draw` picks invocations with probability proportional to the cycles charged
for them, independently and with replacement (``numpy.random.default_rng(seed)``: the
sample is a pure function of the log and the seed). Each draw gets its own data seed, so
a shape drawn twice is replayed on different synthetic data.

**Estimate.** Drawn that way, each sample's ratio ``r = RTL cycles / charged cycles`` has
expectation ``sum(RTL) / sum(charged)`` over the kind: the mean ratio is an unbiased
estimate of the kind's RTL-to-model time ratio, and its 95 % interval is the Student t
interval ``mean +- t(0.975, n-1) s / sqrt(n)`` over the n independent draws
(:func:`t_interval`). The scenario's NDP time re-estimated is ``sum_k C_k r_k`` (``C_k``
the cycles charged to kind ``k``); its variance ``sum_k C_k^2 s_k^2 / n_k`` (independent
strata), and its interval uses the t quantile at the Welch-Satterthwaite degrees of
freedom (:func:`reestimate`). A kind drawn fewer than twice leaves the total's interval
undefined (reported as ``None``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ndpdimm.sw.kernels.base import OfShape, Shape
from ndpdimm.sw.sampling.record import KernelLog

__all__ = ["Draw", "check_samples_request", "allocate", "draw", "t_interval", "reestimate", "CONFIDENCE", "METHOD"]

CONFIDENCE = 0.95

#: one line stating the method, copied into every JSON result
METHOD = ("stratified by kernel kind; within a kind, draws with probability proportional to "
          "the charged cycles, with replacement; per kind the mean RTL/model cycle ratio with a "
          "Student t 95 % interval; NDP time = sum over kinds of charged cycles x mean ratio, "
          "interval from the summed variances with Welch-Satterthwaite degrees of freedom")


@dataclasses.dataclass(frozen=True)
class Draw(OfShape):
    """One sampled invocation: its kernel shape, the cycles the scenario charged for it and the
    seed of its synthetic data."""
    shape: Shape
    model_cycles: float
    seed: int


def _t(df: float) -> float:
    from scipy.stats import t
    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def check_samples_request(n: int, seed: int, workers: int) -> None:
    """``ValueError`` naming the bad value of a ``--rtl-samples`` request (0 samples: none)."""
    for name, v, low in (("rtl_samples", n, 0), ("rtl_seed", seed, None), ("rtl_workers", workers, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
            raise ValueError(f"{name} must be an int{'' if low is None else f' >= {low}'}, "
                             f"got {v!r}")


def allocate(totals: dict, n: int) -> dict:
    """Samples per kind for ``n`` samples over kinds charged ``totals[kind]`` cycles."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of RTL samples must be an int >= 1, got {n!r}")
    kinds = sorted((k for k, c in totals.items() if c > 0), key=lambda k: (-totals[k], k))
    if not kinds:
        raise ValueError("the scenario costed no NDP kernel: nothing to sample")
    floor = 2 if n >= 2 * len(kinds) else 1
    alloc = {k: (floor if i < n else 0) for i, k in enumerate(kinds)}
    rest = n - sum(alloc.values())
    if rest > 0:
        total = sum(totals[k] for k in kinds)
        ideal = {k: rest * totals[k] / total for k in kinds}
        for k in kinds:
            alloc[k] += int(ideal[k])
        left = n - sum(alloc.values())
        for k in sorted(kinds, key=lambda k: (-(ideal[k] - int(ideal[k])), kinds.index(k)))[:left]:
            alloc[k] += 1
    return alloc


def draw(log: KernelLog, n: int, seed: int) -> list[Draw]:
    """``n`` invocations of ``log``, stratified by kind (see the module docstring)."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"the sample seed must be an int, got {seed!r}")
    alloc = allocate({k: log.total_cycles(k) for k in log.kinds()}, n)
    rng = np.random.default_rng(seed)
    out = []
    for kind in sorted(alloc):
        entries = log.entries(kind)
        w = np.array([e.cycles for e in entries], float)
        picks = rng.choice(len(entries), size=alloc[kind], replace=True, p=w / w.sum())
        for i in picks:
            e = entries[int(i)]
            out.append(Draw(e.shape, e.cycles_each, int(rng.integers(2 ** 31))))
    return out


def t_interval(values) -> dict:
    """Mean, sample standard deviation and the Student t 95 % interval of ``values``
    (``low``/``high``/``half_width`` ``None`` below two values)."""
    v = np.asarray(list(values), float)
    if v.size == 0:
        raise ValueError("a t-interval needs at least one value")
    mean = float(v.mean())
    if v.size < 2:
        return {"n": 1, "mean": mean, "stdev": None, "half_width": None, "low": None, "high": None}
    s = float(v.std(ddof=1))
    half = _t(v.size - 1) * s / math.sqrt(v.size)
    return {"n": int(v.size), "mean": mean, "stdev": s, "half_width": half,
            "low": mean - half, "high": mean + half}


def reestimate(totals: dict, ratios: dict) -> dict:
    """The NDP time re-estimated with the ratios: ``totals[kind]`` charged cycles, ``ratios[kind]``
    a :func:`t_interval` result (or missing for a kind not sampled)."""
    model = float(sum(totals.values()))
    if any(k not in ratios for k in totals if totals[k] > 0):
        missing = sorted(k for k in totals if totals[k] > 0 and k not in ratios)
        return {"model_cycles": model, "rtl_cycles": None, "low": None, "high": None,
                "half_width": None, "relative_half_width": None, "ratio": None,
                "note": f"kinds not sampled: {', '.join(missing)}"}
    est = sum(totals[k] * ratios[k]["mean"] for k in ratios if k in totals)
    out = {"model_cycles": model, "rtl_cycles": est, "ratio": est / model if model else None}
    terms = [(totals[k] ** 2 * ratios[k]["stdev"] ** 2 / ratios[k]["n"], ratios[k]["n"])
             for k in ratios if k in totals and ratios[k]["stdev"] is not None]
    if any(ratios[k]["stdev"] is None for k in ratios if k in totals):
        half = None
    else:
        var = sum(v for v, _ in terms)
        if var == 0:
            half = 0.0
        else:
            df = var ** 2 / sum(v ** 2 / (n - 1) for v, n in terms if v > 0)
            half = _t(df) * math.sqrt(var)
    out.update({"half_width": half, "low": None if half is None else est - half,
                "high": None if half is None else est + half,
                "relative_half_width": None if half is None or not est else half / est})
    return out
