"""The predictor's operating points: a workload re-thresholded without refitting, the accuracy a
run reports at other thresholds, and a run without the ablations."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.scenario import operating_points, run
from ndpdimm.sw.scenarios.hermes.workload import make_workload


def run_hermes(cfg, log=None, decode=True, recall_thresholds=(), **kw):
    """The run as the JSON it writes; ``decode=False``: the placement's operating points only."""
    if not decode:
        return operating_points(cfg, recall_thresholds, log, **kw)
    return run(cfg, RunContext(log=log), recall_thresholds=recall_thresholds, **kw).as_dict()


CFG = HermesConfig(model="llama2-7b", tokens=6, prompt=16, profile_tokens=12, sample_layers=2,
                   recall_floor=0.0)


def _quiet(_):
    pass


@pytest.fixture(scope="module")
def workload():
    return make_workload(CFG)


def test_the_configured_point_is_a_threshold_of_the_kept_scores(workload):
    assert workload.scores.shape == workload.predicted.shape
    same = workload.at_threshold(0.5 / CFG.coefficient)
    # float32 scores against the float64 comparison of the predictor: equal but for rounding
    assert np.mean(same.predicted == workload.predicted) > 0.9999
    lower = workload.at_threshold(0.1)
    assert (lower.predicted >= same.predicted).all() and lower.predicted.sum() > same.predicted.sum()
    assert workload.at_threshold(0.0).predicted.all()
    assert lower.run is workload.run                     # nothing refitted or copied


@pytest.mark.parametrize("bad", [-0.1, 1.5, "0.3", True])
def test_bad_thresholds_are_refused(workload, bad):
    with pytest.raises(ValueError, match="threshold must be a number in"):
        workload.at_threshold(bad)
    with pytest.raises(ValueError, match="recall thresholds must be numbers in"):
        run_hermes(CFG, workload=workload, log=_quiet, recall_thresholds=[bad])


def test_operating_points_match_runs_at_those_points(workload):
    grid = [0.5 / CFG.coefficient, 0.2, 0.0]
    base = run_hermes(CFG, workload=workload, log=_quiet, ablations=False, recall_thresholds=grid)
    assert set(base["ablations"]) == {"hermes"} and base["imbalance"]["static"] is None
    pts = base["predictor"]["operating_points"]
    # the placement alone gives the same operating points, without decoding any system
    quick = run_hermes(CFG, workload=workload, log=_quiet, recall_thresholds=grid, decode=False)
    assert quick["predictor"]["operating_points"] == pts and "systems" not in quick
    assert [p["threshold"] for p in pts] == grid
    recalls = [p["recall"] for p in pts]
    assert recalls == sorted(recalls) and recalls[-1] == 1.0 and pts[-1]["predicted_share"] == 1.0
    for p in pts[1:]:
        at = run_hermes(CFG, workload=workload.at_threshold(p["threshold"]), log=_quiet,
                        ablations=False)
        assert at["predictor"]["recall"] == pytest.approx(p["recall"])
        assert at["predictor"]["precision"] == pytest.approx(p["precision"])
    # computing more neurons cannot make Hermes faster
    dense = run_hermes(CFG, workload=workload.at_threshold(0.0), log=_quiet, ablations=False)
    assert dense["systems"]["hermes"]["tokens_per_s"] < base["systems"]["hermes"]["tokens_per_s"]


def test_the_recall_floor_picks_the_sparsest_point_that_meets_it(workload):
    """floor_point: the highest score threshold at which the run's cold recall is at least the
    floor; one step sparser (the next higher score among the activated cold neurons) misses it."""
    from ndpdimm.sw.scenarios.hermes.scenario import _offline, floor_point
    o = _offline(CFG, _quiet, workload, None, None, None, ())
    cold = ~o.part.on_gpu[np.arange(workload.run.layers)]
    s = np.sort(workload.scores[workload.run.active & cold[None]])
    for floor in (0.5, 0.8, 0.9, 0.99):
        th = floor_point(workload, o.part, floor)["threshold"]
        recall = (s >= th).mean()
        assert recall >= floor
        above = s[s > th]
        if above.size:                                  # a sparser point exists and misses
            assert (s >= above.min()).mean() < floor
    assert floor_point(workload, o.part, 0.0) == {"recall_floor": 0.0, "threshold": None}


def test_the_default_run_computes_the_model_asked_for():
    """The scenario's default (recall floor 0.9): the run's cold recall is at or above it, and
    the result says at which point it ran; the paper's metric is tokens over prefill + decode."""
    cfg = HermesConfig(model="llama2-7b", tokens=6, prompt=16, profile_tokens=12, sample_layers=2)
    assert cfg.recall_floor == 0.9
    r = run(cfg, RunContext(log=None), ablations=False)
    assert r.predictor["recall"] >= 0.9
    assert r.predictor["operating_point"]["recall_floor"] == 0.9
    assert r.predictor["operating_point"]["threshold"] is not None
    for name, s in r.systems.items():
        decode_s = s.ms_per_step / 1e3 * cfg.tokens
        assert s.e2e_tokens_per_s == pytest.approx(cfg.batch * cfg.tokens / (s.ttft_s + decode_s)), name
        assert s.e2e_tokens_per_s < s.tokens_per_s
    lossy = run(HermesConfig(**{**cfg.__dict__, "recall_floor": 0.0}), RunContext(log=None),
                ablations=False)
    assert lossy.predictor["recall"] <= r.predictor["recall"]
    assert lossy.predictor["operating_point"]["threshold"] is None
