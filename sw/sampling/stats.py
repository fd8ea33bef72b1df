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

__all__ = ["Draw", "Design", "ALLOCATIONS", "check_samples_request", "allocate", "neyman_weights", "terms_of", "interval",
           "stored_corrections", "draw", "t_interval", "reestimate", "CONFIDENCE", "METHOD"]

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


ALLOCATIONS = ("proportional", "neyman")


@dataclasses.dataclass(frozen=True)
class Design:
    """How a run's RTL samples are taken (``--rtl-*`` options; the defaults replay every draw
    whole, allocated in proportion to charged cycles, as before sub-sampling existed).

    ``sub_cycles``: sub-sample invocations charged more than about this many cycles
    (``sw/sampling/subsample.py``; None: whole replays); ``warmup``: warm-up groups before a
    sub-sample; ``full``: per kind, that many sub-sampled draws also replayed whole (the
    correction, ``sw/sampling/estimate.py``); ``model_draws``: per kind, that many draws on the
    timing-only model backend (the first phase; at least the RTL draws); ``allocation``:
    ``"proportional"`` or ``"neyman"`` (a pilot of the floor's draws, then the rest by
    :func:`neyman_weights`); ``correction``: per kind a stored sub-sample correction
    ``{"mean", "stdev", "n", "source"}`` used for a kind without full replays of its own
    (:func:`stored_corrections` reads the sampling benchmark's)."""
    sub_cycles: float | None = None
    warmup: int = 1
    full: int = 0
    model_draws: int = 0
    allocation: str = "proportional"
    correction: dict | None = None

    def __post_init__(self):
        from ndpdimm.sw.sampling.subsample import check_sub_request
        check_sub_request(self.sub_cycles, self.warmup)
        for name in ("full", "model_draws"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        if self.allocation not in ALLOCATIONS:
            raise ValueError(f"allocation must be one of {', '.join(ALLOCATIONS)}, got {self.allocation!r}")
        for kind, c in (self.correction or {}).items():
            if not isinstance(c, dict) or any(not isinstance(c.get(f), (int, float)) or isinstance(c.get(f), bool)
                                              for f in ("mean", "stdev", "n")) or c["n"] < 2 \
                    or not c["mean"] > 0 or not c["stdev"] >= 0:
                raise ValueError(f"the stored correction of {kind!r} must have a mean > 0, a stdev >= 0 "
                                 f"and n >= 2, got {c!r}")
        if self.sub_cycles is not None and self.full == 1:
            raise ValueError("full must be 0 or >= 2 with sub-sampling: the correction's interval "
                             "needs two full replays per kind")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)

    @property
    def method(self) -> str:
        """The one-line method of a run with this design (every JSON result carries it)."""
        if self == Design():
            return METHOD
        return ("stratified by kernel kind ({} allocation); within a kind, draws with probability "
                "proportional to the charged cycles, with replacement; per kind a two-phase ratio "
                "estimate (sw/sampling/estimate.py): {} draws whole on the timing-only model "
                "backend, the first of them on the RTL{}; interval from the summed variance terms "
                "with Welch-Satterthwaite degrees of freedom").format(
                    self.allocation, f"max({self.model_draws}, n)",
                    "" if self.sub_cycles is None else
                    f", sub-sampled above {self.sub_cycles:,.0f} charged cycles after {self.warmup} "
                    f"warm-up group(s), {self.full} of them also whole for the correction"
                    + ("" if not self.correction else
                       f" (kinds without: the stored correction of {', '.join(sorted(self.correction))})"))


def stored_corrections(path) -> dict:
    """Per kind ``{"mean", "stdev", "n", "source"}`` of the sub-sample corrections in the
    ``coverage`` section of a sampling benchmark file (``bench/results/sampling.json``);
    ``ValueError`` naming the file if it has none."""
    import json
    from pathlib import Path
    try:
        doc = json.loads(Path(path).read_text())
        cov = doc["coverage"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: no sampling benchmark coverage section to take corrections "
                         f"from ({type(e).__name__}: {e})") from None
    out = {}
    for kind, e in cov.items():
        if isinstance(e, dict) and e.get("n", 0) >= 2 and "q_mean" in e:
            out[kind] = {"mean": e["q_mean"], "stdev": e["q_stdev"], "n": e["n"],
                         "source": f"{path} coverage section (commit {str(cov.get('git_commit'))[:7]}, "
                                   f"{e['n']} invocations from {e.get('source')})"}
    if not out:
        raise ValueError(f"{path}: its coverage section has no kind with corrections")
    return out


def _t(df: float) -> float:
    from scipy.stats import t
    return float(t.ppf(0.5 + CONFIDENCE / 2, df))


def check_samples_request(n: int, seed: int, workers: int) -> None:
    """``ValueError`` naming the bad value of a ``--rtl-samples`` request (0 samples: none)."""
    for name, v, low in (("rtl_samples", n, 0), ("rtl_seed", seed, None), ("rtl_workers", workers, 0)):
        if isinstance(v, bool) or not isinstance(v, int) or (low is not None and v < low):
            raise ValueError(f"{name} must be an int{'' if low is None else f' >= {low}'}, "
                             f"got {v!r}")


def allocate(totals: dict, n: int, weights: dict | None = None) -> dict:
    """Samples per kind for ``n`` samples over kinds charged ``totals[kind]`` cycles: the floor
    (two each, see the module docstring), the rest in proportion to ``weights[kind]`` (default
    ``totals``: proportional allocation; :func:`neyman_weights` for Neyman's)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of RTL samples must be an int >= 1, got {n!r}")
    kinds = sorted((k for k, c in totals.items() if c > 0), key=lambda k: (-totals[k], k))
    if not kinds:
        raise ValueError("the scenario costed no NDP kernel: nothing to sample")
    weights = totals if weights is None else weights
    if any(k not in weights or not weights[k] >= 0 or not math.isfinite(weights[k]) for k in kinds):
        raise ValueError(f"allocation weights must be finite and >= 0 for every kind {kinds}, "
                         f"got {weights!r}")
    floor = 2 if n >= 2 * len(kinds) else 1
    alloc = {k: (floor if i < n else 0) for i, k in enumerate(kinds)}
    rest = n - sum(alloc.values())
    total = sum(weights[k] for k in kinds)
    if rest > 0 and total > 0:
        ideal = {k: rest * weights[k] / total for k in kinds}
        for k in kinds:
            alloc[k] += int(ideal[k])
        left = n - sum(alloc.values())
        for k in sorted(kinds, key=lambda k: (-(ideal[k] - int(ideal[k])), kinds.index(k)))[:left]:
            alloc[k] += 1
    elif rest > 0:                                  # no kind varies: the rest by charged cycles
        return allocate(totals, n)
    return alloc


def neyman_weights(totals: dict, stdev: dict, cost: dict) -> dict:
    """Neyman's allocation with costs: kind ``k`` gets draws in proportion to
    ``C_k S_k / sqrt(c_k)``, with ``C_k`` its charged cycles, ``S_k`` the standard deviation of
    one draw's ratio (from a pilot) and ``c_k`` the cost of one draw (RTL seconds or cycles).
    That minimises the variance of ``sum_k C_k r_k`` for a fixed total cost ``sum_k n_k c_k``
    (Cochran, *Sampling Techniques*, 5.5). A kind with no pilot spread gets weight 0 (only its
    floor)."""
    out = {}
    for k, c in totals.items():
        s, w = stdev.get(k), cost.get(k)
        if s is None or w is None or not w > 0:
            raise ValueError(f"Neyman allocation needs a pilot spread and a cost > 0 for kind {k!r}, "
                             f"got stdev {s!r}, cost {w!r}")
        out[k] = c * s / math.sqrt(w)
    return out


def draw(log: KernelLog, n: int, seed: int, alloc: dict | None = None,
         by: str = "cycles") -> list[Draw]:
    """``n`` invocations of ``log``, stratified by kind (see the module docstring); ``alloc``:
    draws per kind instead of :func:`allocate`'s proportional ones; ``by="invocations"``: every
    invocation equally likely instead of in proportion to its charged cycles."""
    if by not in ("cycles", "invocations"):
        raise ValueError(f"draws are by 'cycles' or 'invocations', got {by!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"the sample seed must be an int, got {seed!r}")
    if alloc is None:
        alloc = allocate({k: log.total_cycles(k) for k in log.kinds()}, n)
    rng = np.random.default_rng(seed)
    out = []
    for kind in sorted(alloc):
        if not alloc[kind]:
            continue
        entries = log.entries(kind)
        w = np.array([e.cycles if by == "cycles" else e.count for e in entries], float)
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


def interval(mean: float | None, terms: list | None) -> dict:
    """``half_width``, ``low``, ``high`` of an estimate ``mean`` with variance terms ``[(var, df)]``
    (Welch-Satterthwaite degrees of freedom; ``None`` without terms or with a term of df < 1)."""
    if mean is None or not terms or any(df < 1 for v, df in terms if v > 0):
        return {"half_width": None, "low": None, "high": None}
    var = sum(v for v, _ in terms)
    if var == 0:
        half = 0.0
    else:
        half = _t(var ** 2 / sum(v ** 2 / df for v, df in terms if v > 0)) * math.sqrt(var)
    return {"half_width": half, "low": mean - half, "high": mean + half}


def terms_of(iv: dict) -> list | None:
    """The variance terms ``[(variance of the mean, degrees of freedom), ...]`` of a ratio
    estimate: its own ``terms`` (a two-phase estimate, ``sw/sampling/estimate.py``) or, for a
    :func:`t_interval`, ``[(s^2 / n, n - 1)]``; ``None`` where it has no interval."""
    if "terms" in iv:
        return iv["terms"]
    if iv.get("stdev") is None:
        return None
    return [(iv["stdev"] ** 2 / iv["n"], iv["n"] - 1)]


def reestimate(totals: dict, ratios: dict) -> dict:
    """The NDP time re-estimated with the ratios: ``totals[kind]`` charged cycles, ``ratios[kind]``
    a :func:`t_interval` result or a two-phase estimate (or missing for a kind not sampled).
    The variance is the sum of every kind's terms times ``C_k^2``; the t quantile uses the
    Welch-Satterthwaite degrees of freedom of all the terms."""
    model = float(sum(totals.values()))
    def missing_kind(k):
        return totals[k] > 0 and (k not in ratios or ratios[k].get("mean") is None)
    if any(missing_kind(k) for k in totals):
        missing = sorted(k for k in totals if missing_kind(k))
        return {"model_cycles": model, "rtl_cycles": None, "low": None, "high": None,
                "half_width": None, "relative_half_width": None, "ratio": None,
                "note": f"kinds not sampled: {', '.join(missing)}"}
    est = sum(totals[k] * ratios[k]["mean"] for k in ratios if k in totals)
    out = {"model_cycles": model, "rtl_cycles": est, "ratio": est / model if model else None}
    kind_terms = {k: terms_of(ratios[k]) for k in ratios if k in totals}
    half = None if any(t is None for t in kind_terms.values()) else interval(
        est, [(totals[k] ** 2 * v, df) for k, ts in kind_terms.items() for v, df in ts])["half_width"]
    out.update({"half_width": half, "low": None if half is None else est - half,
                "high": None if half is None else est + half,
                "relative_half_width": None if half is None or not est else half / est})
    return out
