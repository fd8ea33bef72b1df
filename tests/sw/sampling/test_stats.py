"""The sample design and interval arithmetic of sampled RTL co-simulation
(``sw/sampling/record.py``, ``sw/sampling/stats.py``): stratified, reproducible draws and the
t-interval / propagated-interval math on numbers worked out by hand."""

import math

import pytest

from ndpdimm.sw.kernels.attention import Shape as Attention
from ndpdimm.sw.kernels.cold_mlp import Shape as ColdMlp
from ndpdimm.sw.kernels.dense import Shape as Dense
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.stats import allocate, check_samples_request, draw, reestimate, t_interval

T_975_2 = 4.302652729749464      # Student t quantile, 0.975, 2 degrees of freedom (tables)
T_975_4 = 2.7764451051977934     # ... 4 degrees of freedom


def _log():
    log = KernelLog()
    for k in (10, 20, 30):
        log.add(ColdMlp(k=k, pool=1024, hidden=128, batch=1, dtype="fp16", gated=False), 100.0 * k,
                count=5)
    log.add(Attention(context=64, head_dim=64, group=8), 50.0, count=40)
    log.add(Dense(rows=8, hidden=128, batch=1), 30.0, count=2)
    return log


def test_the_log_aggregates_identical_invocations():
    log = KernelLog()
    log.add(Attention(context=64, head_dim=64, group=8), 10.0, count=3)
    log.add(Attention(group=8, head_dim=64, context=64), 10.0)       # same shape, other order
    log.add(Attention(context=65, head_dim=64, group=8), 11.0)
    assert log.invocations() == 5 and len(log.entries("attention")) == 2
    assert log.total_cycles() == 4 * 10.0 + 11.0
    assert log.summary()["attention"] == {"invocations": 5, "shapes": 2, "model_cycles": 51.0}


@pytest.mark.parametrize("args, message", [
    (("", 1.0), "kernel kind"), ((Dense(8, 128, 1), 1.0, -1), "count"), ((Dense(8, 128, 1), -1.0), "cycles"),
    ((Dense(8, 128, 1), float("nan")), "cycles")])
def test_the_log_refuses_bad_entries(args, message):
    log = KernelLog()
    with pytest.raises(ValueError, match=message):
        log.add(*args)
    assert log.invocations() == 0


def test_allocation_gives_each_kind_two_then_shares_the_rest_by_cycles():
    totals = {"a": 600.0, "b": 300.0, "c": 100.0}
    assert allocate(totals, 6) == {"a": 2, "b": 2, "c": 2}
    assert allocate(totals, 16) == {"a": 8, "b": 5, "c": 3}         # 10 more: 6, 3, 1
    assert allocate(totals, 4) == {"a": 2, "b": 1, "c": 1}          # below 2 per kind: 1 each
    assert allocate(totals, 2) == {"a": 1, "b": 1, "c": 0}          # the largest kinds first
    assert sum(allocate(totals, 37).values()) == 37


def test_draws_are_stratified_and_reproducible_by_seed():
    log = _log()
    a, b, c = draw(log, 12, seed=7), draw(log, 12, seed=7), draw(log, 12, seed=8)
    assert a == b and a != c
    per_kind = {k: sum(d.kind == k for d in a) for k in log.kinds()}
    assert per_kind == allocate({k: log.total_cycles(k) for k in log.kinds()}, 12)
    for d in a:                                     # each draw is one of the logged shapes
        e = next(e for e in log.entries(d.kind) if e.params == d.params)
        assert d.model_cycles == e.cycles_each
    assert len({d.seed for d in a}) == len(a)       # each draw its own data


def test_draws_within_a_kind_follow_the_charged_cycles():
    log = KernelLog()
    log.add(Attention(context=1, head_dim=64, group=1), 1.0, count=1)
    log.add(Attention(context=2, head_dim=64, group=1), 9.0, count=1)   # 90 % of the kind's cycles
    picks = [d.params["context"] for d in draw(log, 2000, seed=1)]
    assert 0.87 < picks.count(2) / len(picks) < 0.93


@pytest.mark.parametrize("n, seed, workers, message", [
    (-1, 0, 2, "rtl_samples"), (True, 0, 2, "rtl_samples"), (2, "x", 2, "rtl_seed"),
    (2, 0, -1, "rtl_workers")])
def test_bad_sample_requests_name_the_value(n, seed, workers, message):
    with pytest.raises(ValueError, match=message):
        check_samples_request(n, seed, workers)


def test_bad_sample_counts_are_refused():
    with pytest.raises(ValueError, match="got 0"):
        draw(_log(), 0, seed=0)
    with pytest.raises(ValueError, match="nothing to sample"):
        draw(KernelLog(), 3, seed=0)


def test_identical_ratios_give_a_zero_width_interval():
    iv = t_interval([1.05] * 5)
    assert iv["mean"] == pytest.approx(1.05) and iv["half_width"] == 0.0
    assert iv["low"] == iv["high"] == pytest.approx(1.05)


def test_a_known_t_interval():
    iv = t_interval([1.0, 2.0, 3.0])                 # mean 2, s 1
    assert iv["stdev"] == pytest.approx(1.0)
    assert iv["half_width"] == pytest.approx(T_975_2 / math.sqrt(3))
    assert t_interval([4.0])["half_width"] is None   # one value: no interval


def test_the_re_estimate_propagates_the_strata_intervals():
    totals = {"a": 100.0, "b": 300.0}
    ratios = {"a": t_interval([1.0, 2.0, 3.0]), "b": t_interval([1.0, 1.0, 1.0])}
    r = reestimate(totals, ratios)
    assert r["rtl_cycles"] == pytest.approx(100 * 2 + 300 * 1)
    # only stratum a varies: variance 100^2 * 1 / 3 with its 2 degrees of freedom
    assert r["half_width"] == pytest.approx(T_975_2 * math.sqrt(100 ** 2 / 3))
    # two equal strata: Welch-Satterthwaite gives 2 x 2 = 4 degrees of freedom
    r = reestimate({"a": 1.0, "b": 1.0}, {"a": ratios["a"], "b": ratios["a"]})
    assert r["half_width"] == pytest.approx(T_975_4 * math.sqrt(2 / 3))
    assert r["relative_half_width"] == pytest.approx(r["half_width"] / 4)


def test_the_re_estimate_says_what_is_missing():
    r = reestimate({"a": 10.0, "b": 5.0}, {"a": t_interval([1.0, 1.1])})
    assert r["rtl_cycles"] is None and "b" in r["note"]
    r = reestimate({"a": 10.0}, {"a": t_interval([1.1])})
    assert r["rtl_cycles"] == pytest.approx(11.0) and r["half_width"] is None
