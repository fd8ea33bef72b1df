"""The two-phase estimator, Neyman's allocation and the sub-sample plans on synthetic kernels whose
totals are known (sw/sampling/estimate.py, stats.py, subsample.py)."""

import numpy as np
import pytest

from ndpdimm.sw.kernels import shape
from ndpdimm.sw.sampling.estimate import estimate_kind
from ndpdimm.sw.sampling.stats import Design, allocate, interval, neyman_weights, reestimate, t_interval
from ndpdimm.sw.sampling.subsample import plan


class Population:
    """A kind of ``N`` invocations: charged ``c``, the model backend ``M = c (1 + fit error)``
    (the cost line's spread, ``fit``), the RTL ``M w`` with ``w`` the model's error around
    ``w0`` (spread ``model``); a sub-sample of invocation ``i`` measures ``w_i (1 + bias) + noise``."""

    def __init__(self, seed, n=400, fit=0.08, w0=1.04, model=0.01, bias=0.004, noise=0.006):
        rng = np.random.default_rng(seed)
        self.c = rng.uniform(1e5, 1e6, n)
        self.m = self.c * (1 + fit * rng.standard_normal(n))
        self.w = w0 + model * rng.standard_normal(n)
        self.rtl = self.m * self.w
        self.bias, self.noise = bias, noise
        self.truth = self.rtl.sum() / self.c.sum()

    def sample(self, rng, n1, n2, n3, sub=True):
        p = self.c / self.c.sum()
        idx = rng.choice(self.c.size, size=n1, replace=True, p=p)
        x = self.m[idx] / self.c[idx]
        rtl, q = [], []
        for k, i in enumerate(idx[:n2]):
            if sub:
                u = self.w[i] * (1 + self.bias) + self.noise * rng.standard_normal()
                yh = x[k] * u
                if len(q) < n3:
                    q.append((self.rtl[i] / self.c[i]) / yh)
            else:
                yh = self.rtl[i] / self.c[i]
            rtl.append((x[k], yh, sub))
        return estimate_kind(x, rtl, q)


@pytest.mark.parametrize("n1, n2, n3, sub", [(60, 8, 4, True), (8, 8, 0, False), (80, 6, 0, False)])
def test_the_two_phase_interval_covers_the_known_total_near_nominal(n1, n2, n3, sub):
    """Over 400 seeds the estimate is unbiased within its standard error and its 95 % interval
    covers the population's true ratio 91-99 % of the time (sub-sampled draws with a biased
    sub-sample corrected by full replays; whole replays with and without extra model draws)."""
    pop = Population(seed=1)
    hits, means = 0, []
    for seed in range(400):
        rng = np.random.default_rng(1000 + seed)
        est = pop.sample(rng, n1, n2, n3, sub)
        iv = interval(est["mean"], est["terms"])
        means.append(est["mean"])
        hits += iv["low"] <= pop.truth <= iv["high"]
    means = np.array(means)
    se = means.std(ddof=1) / np.sqrt(means.size)
    assert abs(means.mean() - pop.truth) < 4 * se + 1e-3 * pop.truth, (means.mean(), pop.truth)
    assert 0.91 <= hits / 400 <= 0.99, f"coverage {hits / 400} (seeds 1000..1399)"


def test_model_draws_narrow_the_interval_at_the_same_rtl_draws():
    """The cost lines' spread is carried by the cheap model draws: 80 model draws beside 6 RTL
    draws give a narrower interval than the 6 RTL draws alone, on the same populations."""
    pop = Population(seed=2)
    wide, narrow = [], []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        a = pop.sample(rng, 6, 6, 0, sub=False)
        rng = np.random.default_rng(seed)
        b = pop.sample(rng, 80, 6, 0, sub=False)
        wide.append(interval(a["mean"], a["terms"])["half_width"])
        narrow.append(interval(b["mean"], b["terms"])["half_width"])
    assert np.median(narrow) < 0.6 * np.median(wide)


def test_without_extra_draws_or_sub_sampling_it_is_the_plain_t_interval():
    vals = [(1.0, 1.02, False), (1.1, 1.15, False), (0.9, 0.93, False)]
    est = estimate_kind([v[0] for v in vals], vals, [])
    plain = t_interval([v[1] for v in vals])
    assert est["mean"] == pytest.approx(plain["mean"])
    assert interval(est["mean"], est["terms"])["half_width"] == pytest.approx(plain["half_width"])


def test_sub_sampled_draws_need_a_correction():
    est = estimate_kind([1.0, 1.0], [(1.0, 1.0, True), (1.0, 1.1, True)], [])
    assert est["mean"] is None and "correction" in est["note"]
    assert reestimate({"k": 10.0}, {"k": est})["rtl_cycles"] is None
    with pytest.raises(ValueError, match="n2 <= n1"):
        estimate_kind([1.0], [(1.0, 1.0, False), (1.0, 1.0, False)], [])


def test_neyman_allocation_on_strata_with_known_variances():
    """Kinds of equal charged cycles and equal costs get draws in proportion to their standard
    deviations; a kind four times as costly half as many; the floor of two stays."""
    totals = {"a": 1.0, "b": 1.0, "c": 1.0}
    w = neyman_weights(totals, {"a": 0.01, "b": 0.03, "c": 0.0}, {"a": 1.0, "b": 1.0, "c": 1.0})
    assert allocate(totals, 26, w) == {"a": 2 + 5, "b": 2 + 15, "c": 2}
    w = neyman_weights(totals, {"a": 0.02, "b": 0.02, "c": 0.02}, {"a": 1.0, "b": 4.0, "c": 1.0})
    alloc = allocate(totals, 6 + 25, w)
    assert alloc == {"a": 12, "b": 7, "c": 12}
    # the variance of sum C_k r_k at the Neyman allocation: within 10 % of Neyman's optimum
    # (sum C_k S_k)^2 / n (the floor and the rounding cost the rest), about half the proportional
    sd = {"a": 0.01, "b": 0.05, "c": 0.002}
    var = lambda al: sum(totals[k] ** 2 * sd[k] ** 2 / al[k] for k in totals)
    ney = allocate(totals, 30, neyman_weights(totals, sd, {k: 1.0 for k in totals}))
    optimum = sum(totals[k] * sd[k] for k in totals) ** 2 / 30
    assert optimum <= var(ney) < 1.1 * optimum < 0.6 * var(allocate(totals, 30))
    with pytest.raises(ValueError, match="pilot spread"):
        neyman_weights(totals, {"a": 0.1}, {"a": 1.0})
    with pytest.raises(ValueError, match="allocation weights"):
        allocate(totals, 6, {"a": 1.0, "b": float("nan"), "c": 1.0})


def test_a_plan_picks_distinct_groups_after_a_warm_up():
    s = shape("cold_mlp", {"k": 640, "pool": 1024, "hidden": 256, "batch": 1, "dtype": "fp16",
                           "gated": True})
    assert s.groups(16) == 20
    p = plan(s, 1e6, 7, 16, 1e5, warmup=1)
    assert len(p.groups) == 2 and len(p.warmup) == 1 and not set(p.groups) & set(p.warmup)
    assert p == plan(s, 1e6, 7, 16, 1e5, warmup=1)              # a function of the seed
    assert plan(s, 1e6, 7, 16, None).whole                       # no target: whole
    assert plan(s, 1e6, 7, 16, 6e5, warmup=9).whole              # 12 + 9 >= 20 groups: whole
    assert shape("attention", {"context": 64, "head_dim": 64, "group": 1}).groups(16) == 1
    assert shape("expert", {"hidden": 64, "ffn": 32, "tokens": 33, "dtype": "float16"}).groups(16) == 1
    for bad in ({"sub_cycles": 0}, {"sub_cycles": float("inf")}, {"warmup": -1},
                {"full": -1}, {"model_draws": 1.5}, {"allocation": "optimal"},
                {"sub_cycles": 1e5, "full": 1}):
        with pytest.raises(ValueError):
            Design(**bad)


def test_a_stored_correction_stands_in_for_full_replays(tmp_path):
    """Sub-sampled draws without full replays take a stored correction with its own count: the
    same estimate as the run's own full replays with that mean, spread and count would give."""
    import json

    from ndpdimm.sw.sampling.stats import stored_corrections
    rtl = [(1.0, 1.02, True), (1.1, 1.12, True), (0.95, 0.97, True)]
    q = [1.01, 0.99, 1.02, 1.0]
    own = estimate_kind([r[0] for r in rtl], rtl, q)
    c = t_interval(q)
    stored = estimate_kind([r[0] for r in rtl], rtl, [], {"mean": c["mean"], "stdev": c["stdev"],
                                                          "n": 4, "source": "test"})
    assert stored["mean"] == pytest.approx(own["mean"])
    assert [t[1] for t in stored["terms"]] == [t[1] for t in own["terms"]] == [2, 3]
    assert [t[0] for t in stored["terms"]] == pytest.approx([t[0] for t in own["terms"]])
    assert stored["correction"]["source"] == "test"
    path = tmp_path / "sampling.json"
    path.write_text(json.dumps({"coverage": {"git_commit": "abc1234", "cold_mlp": {
        "n": 20, "q_mean": 1.003, "q_stdev": 0.004, "source": "hermes_b1"}}}))
    got = stored_corrections(path)
    assert got["cold_mlp"]["mean"] == 1.003 and got["cold_mlp"]["n"] == 20
    assert "abc1234" in got["cold_mlp"]["source"]
    with pytest.raises(ValueError, match="no sampling benchmark coverage"):
        stored_corrections(tmp_path / "missing.json")
    with pytest.raises(ValueError, match="stored correction"):
        Design(sub_cycles=1e5, correction={"cold_mlp": {"mean": 1.0, "stdev": 0.01, "n": 1}})
