"""The Hermes paper's predictor (sw/scenarios/hermes/paper_predictor.py) on hand-made traces: the
state's bands, +4/-1 with saturation, the s1 + 6 x s2 > 15 rule, T_h, the table, the ablations,
and its use in a workload."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.paper_predictor import (
    RULE_SCORE,
    SCALE,
    PaperPredictor,
    initial_state,
)
from ndpdimm.sw.scenarios.hermes.workload import make_workload


def test_initial_state_bands():
    f = np.array([0.0, 0.019, 0.02, 0.0828, 0.09, 0.46, 0.8999, 0.9, 0.901, 1.0])
    # below 2 % -> 0; [2 %, 90 %] in 14 equal bands of 6.2857 % -> 1..14; above 90 % -> 15
    assert initial_state(f).tolist() == [0, 0, 1, 1, 2, 8, 14, 14, 15, 15]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        initial_state(np.array([1.5]))


def test_state_moves_up_four_down_one_and_saturates():
    p = PaperPredictor(1, 3)
    p.state[0] = [0, 13, 5]
    p.observe(0, np.array([True, True, False]))
    assert p.state[0].tolist() == [4, 15, 4]          # 0 + 4, 13 + 4 saturates at 15, 5 - 1
    for _ in range(3):
        p.observe(0, np.array([True, True, False]))
    assert p.state[0].tolist() == [15, 15, 1]         # 4 + 12 saturates; 4 - 3
    for _ in range(5):
        p.observe(0, np.array([False, False, False]))
    assert p.state[0].tolist() == [10, 10, 0]         # 15 - 5; 1 - 5 saturates at 0


def test_the_rule_s1_plus_six_s2_above_fifteen():
    # layer 1's neurons j = 0..5, each with the table entries (0, 1) of layer 0
    p = PaperPredictor(2, 6)
    p.table[1] = [[0, 1]] * 6
    p.table_valid[1] = True
    p.state[1] = [15, 4, 3, 9, 10, 0]
    both, one, none = np.array([1, 1, 0, 0, 0, 0], bool), np.array([1, 0, 0, 0, 0, 0], bool), \
        np.zeros(6, bool)
    assert p.correlated_fired(1, both).tolist() == [2] * 6
    # s2 = 2: 12 + s1 > 15 <=> s1 >= 4
    assert p.predict(1, both).tolist() == [True, True, False, True, True, False]
    # s2 = 1: s1 >= 10
    assert p.predict(1, one).tolist() == [True, False, False, False, True, False]
    # s2 = 0: s1 > 15 never (15 is not above 15)
    assert not p.predict(1, none).any()
    # the score is the rule over 32, exact: at RULE_SCORE exactly the predicted ones
    assert ((p.score(1, both) >= RULE_SCORE) == p.predict(1, both)).all()
    assert (p.score(1, both) * SCALE).tolist() == [27, 16, 15, 21, 22, 12]
    # layer 0 has no previous layer: s2 = 0
    assert p.correlated_fired(0, both).tolist() == [0] * 6
    # an invalid table entry never counts
    p.table_valid[1, :, 1] = False
    assert p.correlated_fired(1, both).tolist() == [1] * 6


def test_hot_means_state_above_ten():
    p = PaperPredictor(1, 4)
    p.state[0] = [9, 10, 11, 15]
    assert p.hot(0).tolist() == [False, False, True, True]


def test_ablations_hold_the_missing_evidence_at_its_middle():
    tok, lay = PaperPredictor(2, 4, mode="token-only"), PaperPredictor(2, 4, mode="layer-only")
    for p in (tok, lay):
        p.table[1] = [[0, 1]] * 4
        p.table_valid[1] = True
        p.state[1] = [9, 10, 15, 0]
    fired = np.array([1, 1, 0, 0], bool)
    # token-only: s1 + 6 > 15 <=> s1 >= 10, whatever fired
    assert tok.predict(1, fired).tolist() == [False, True, True, False]
    assert tok.predict(1, np.zeros(4, bool)).tolist() == [False, True, True, False]
    # layer-only: 7.5 + 6 s2 > 15 <=> s2 = 2, whatever the state
    assert lay.predict(1, fired).tolist() == [True] * 4
    assert not lay.predict(1, np.array([1, 0, 0, 0], bool)).any()
    with pytest.raises(ValueError, match="mode"):
        PaperPredictor(1, 4, mode="both-ish")


def test_fit_finds_the_partner_and_start_reads_the_prompt():
    rng = np.random.default_rng(3)
    a = np.zeros((200, 2, 8), dtype=bool)
    a[:, 0] = rng.random((200, 8)) < 0.3
    a[:, 1, 5] = a[:, 0, 2]                        # neuron 5 of layer 1 follows neuron 2
    a[:, 1, 6] = a[:, 0, 2] & a[:, 0, 7]           # ... 6 fires only when 2 and 7 both do
    p = PaperPredictor(2, 8).fit(a)
    assert p.table[1, 5, 0] == 2
    assert set(p.table[1, 6].tolist()) == {2, 7}
    p.start(a[:20])
    assert (p.state == initial_state(a[:20].mean(axis=0))).all()
    with pytest.raises(ValueError, match="bool array"):
        p.fit(a[:, :1])
    with pytest.raises(ValueError, match="layers"):
        PaperPredictor(0, 8)


def test_workload_with_the_paper_predictor_matches_a_replay():
    """make_workload's paper path: the predictions are the rule replayed token by token over
    the lead layer and the sampled ones; the states start from the prompt's tokens."""
    cfg = HermesConfig(model="llama2-7b", prompt=6, tokens=5, profile_tokens=8, sample_layers=2,
                       predictor="paper", active_fraction=0.112, skew=1.5, token_similarity=0.8,
                       layer_correlation=0.9, copy_similarity=0.8, seed=4)
    wl = make_workload(cfg)
    assert wl.run.active.shape == (5, 2, wl.model.ffn)
    assert wl.run.meta["lead_layers"] == 1 and wl.run.meta["prompt_tokens"] == 6
    assert (wl.predicted == (wl.scores >= 0.5)).all()
    assert wl.at_threshold(RULE_SCORE).predicted.tolist() == wl.predicted.tolist()
    assert set(wl.predictor_memory) == {"states", "correlation_table"}
    # the scores are multiples of 1 / 32 (exact)
    assert np.allclose(wl.scores * SCALE, np.round(wl.scores * SCALE))
    with pytest.raises(ValueError, match="predictor must be one of"):
        HermesConfig(predictor="oracle")
