"""TriMoE data management: EMA predictor, prefetch planning, layouts and rebalancing."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.trimoe.manager import STRIPED, EmaPredictor, ExpertLayout, GpuResidency


def test_ema_follows_the_formula_and_scores_before_learning():
    p = EmaPredictor(layers=1, experts=4, alpha=0.3, theta=0.7)
    p.update(0, [10, 0, 0, 0])                  # first sight: the EMA is the load, nothing scored
    assert p.predict(0).tolist() == [10, 0, 0, 0]
    assert p.accuracy()["load_wape"] is None
    p.update(0, [0, 10, 0, 0])
    np.testing.assert_allclose(p.predict(0), [7, 3, 0, 0])
    a = p.accuracy()
    assert a["load_wape"] == pytest.approx((10 + 10) / 10)     # |10-0| + |0-10| over 10 tokens
    assert a["hot_precision"] == 0 and a["hot_recall"] == 0     # predicted 0 hot, 1 was
    p.update(0, [7, 3, 0, 0])                   # exactly the prediction
    assert p.accuracy()["load_wape"] == pytest.approx(20 / 20)
    assert p.tp == 1


def test_ema_state_is_a_few_tens_of_kb_for_deepseek():
    assert EmaPredictor(59, 160).state_bytes == 59 * 160 * 4 == 37760


def test_ema_learns_a_stationary_load():
    rng = np.random.default_rng(0)
    base = rng.integers(0, 50, 32)
    p = EmaPredictor(1, 32)
    for _ in range(40):
        p.update(0, rng.poisson(base))
    assert p.accuracy()["load_accuracy"] > 0.7
    np.testing.assert_allclose(p.predict(0), base, atol=0.35 * base.max())


@pytest.mark.parametrize("kw, match", [({"alpha": 0}, "alpha"), ({"alpha": 1.5}, "alpha"),
                                       ({"theta": True}, "theta"), ({"layers": 0}, "layers")])
def test_ema_bad_parameters(kw, match):
    args = {"layers": 1, "experts": 4, **kw}
    with pytest.raises(ValueError, match=match):
        EmaPredictor(**args)


def test_ema_bad_loads_change_nothing():
    p = EmaPredictor(1, 4)
    p.update(0, [1, 2, 3, 4])
    with pytest.raises(ValueError, match="counts"):
        p.update(0, [1, 2, 3])
    with pytest.raises(ValueError, match="counts"):
        p.update(0, [1, 2, 3, -4])
    assert p.predict(0).tolist() == [1, 2, 3, 4]


def test_prefetch_brings_hot_experts_and_evicts_the_coldest():
    r = GpuResidency(layers=1, experts=6, slots=2, theta_hot=0.7)
    r.fill(0, [5, 4, 3, 2, 1, 0])
    assert r.resident[0] == {0, 1}
    ema = np.array([1, 6, 0, 0, 10, 8.0])
    plan = r.plan_prefetch(0, ema)
    # hot: > 7 -> experts 4 (10) and 5 (8); victims lowest EMA first: 0 (1) then 1 (6)
    assert plan == [(4, 0), (5, 1)]
    r.apply(0, plan)
    assert r.resident[0] == {4, 5}
    assert r.plan_prefetch(0, ema) == []           # nothing hot is missing any more


def test_prefetch_never_evicts_a_hotter_expert_and_fills_free_slots():
    r = GpuResidency(layers=1, experts=4, slots=3)
    r.fill(0, [9, 9, 0, 0])
    r.resident[0] = {0, 1}                         # one slot free
    plan = r.plan_prefetch(0, [9, 9, 8, 7])
    assert plan == [(2, None)]                     # the free slot; 3 would have to evict a 9
    r.apply(0, plan)
    assert len(r.resident[0]) == 3
    assert GpuResidency(1, 4, 0).plan_prefetch(0, [1, 2, 3, 4]) == []


def test_layout_capacity_books_balance():
    lay = ExpertLayout(layers=1, experts=8, dimms=4, expert_bytes=100, dimm_capacity=300)
    assert lay.used.tolist() == [200] * 4
    lay.set_home(0, 0, 2)
    assert lay.used.tolist() == [175, 175, 275, 175]
    assert lay.localized(0, 0) and not lay.localized(0, 1)
    lay.set_home(0, 0, STRIPED)
    assert lay.used.tolist() == [200] * 4
    lay.set_home(0, 0, 1)
    with pytest.raises(RuntimeError, match="capacity exceeded"):
        lay.set_home(0, 1, 1)                      # 275 - 25 + 100 = 350 > 300


def test_localize_balances_the_predicted_load():
    lay = ExpertLayout(layers=1, experts=16, dimms=4, expert_bytes=10, dimm_capacity=1e9)
    predicted = 1.0 + np.arange(16, dtype=float)
    lay.localize(0, range(8), predicted)
    home = lay.home[0]
    assert (home[:8] != STRIPED).all() and (home[8:] == STRIPED).all()
    loads = lay.dimm_loads(0, predicted)
    assert loads.max() - loads.min() <= 8          # LPT: within the largest item


def test_rebalance_lowers_the_peak_and_reports_moves():
    lay = ExpertLayout(layers=1, experts=6, dimms=2, expert_bytes=10, dimm_capacity=1e9)
    for e in range(6):
        lay.set_home(0, e, 0)                      # all on DIMM 0
    pred = np.array([5, 4, 3, 2, 1, 1.0])
    before = lay.dimm_loads(0, pred).max()
    moves = lay.rebalance(0, pred, max_moves=10)
    after = lay.dimm_loads(0, pred)
    assert after.max() < before
    assert moves and all(src == 0 or src == 1 for _, src, _ in moves)
    assert abs(after[0] - after[1]) <= 5
    assert lay.rebalance(0, pred, max_moves=0) == []
