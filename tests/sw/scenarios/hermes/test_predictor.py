"""Hermes' online predictor (``sw/scenarios/hermes/predictor.py``) on synthetic traces of one model."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.hermes.predictor import NeuronPredictor, _Bloom, evaluate
from ndpdimm.sw.scenarios.hermes.traces import synthetic_trace


def _traces(**kw):
    args = dict(active_fraction=0.1, skew=1.0, token_similarity=0.95, layer_correlation=0.95)
    args.update(kw)
    # one model (model_seed), two runs of tokens: profiling and the run being predicted
    return (synthetic_trace(300, 4, 512, seed=1, **args),
            synthetic_trace(150, 4, 512, seed=2, **args))


def test_predictable_activations_are_predicted():
    prof, run = _traces()
    p = NeuronPredictor(4, 512).fit(prof)
    acc = evaluate(p, run)
    assert acc.precision > 0.85 and acc.recall > 0.6
    assert p.similar_hits > 0                   # similar recent tokens were found


def test_nothing_to_learn_gives_the_base_rate():
    prof, run = _traces(skew=0.0, token_similarity=0.0, layer_correlation=0.0)
    acc = evaluate(NeuronPredictor(4, 512, coefficient=1.5).fit(prof), run)
    assert abs(acc.precision - 0.1) < 0.05


def test_the_coefficient_trades_recall_for_precision():
    prof, run = _traces(token_similarity=0.6, layer_correlation=0.6)
    results = [evaluate(NeuronPredictor(4, 512, coefficient=c).fit(prof), run)
               for c in (0.7, 0.85, 1.0, 1.2)]
    recalls = [r.recall for r in results]
    precisions = [r.precision for r in results]
    assert recalls == sorted(recalls) and precisions == sorted(precisions, reverse=True)


def test_the_cross_layer_table_finds_the_partner():
    prof, _ = _traces(layer_correlation=1.0, token_similarity=0.0, skew=0.5)
    p = NeuronPredictor(4, 512, top_k=2).fit(prof)
    f = prof.firing_frequency()
    # with full correlation a neuron copies its popularity partner: P(j | partner) = 1, and the
    # table's first entry is a neuron firing exactly when j does
    mid = np.flatnonzero((f[2] > 0.2) & (f[2] < 0.8))[:20]
    assert len(mid) >= 5
    for j in mid:
        assert p.table_prob[2, j, 0] == 1.0
        assert np.array_equal(prof.active[:, 1, p.table[2, j, 0]], prof.active[:, 2, j])


def test_cold_mask_counts_only_cold_neurons():
    prof, run = _traces()
    cold = np.zeros((4, 512), dtype=bool)
    cold[:, 256:] = True
    acc = evaluate(NeuronPredictor(4, 512).fit(prof), run, cold)
    assert acc.predictions == 150 * 4 * 256
    with pytest.raises(ValueError, match="cold mask"):
        evaluate(NeuronPredictor(4, 512).fit(prof), run, cold[:, :10])


def test_bloom_filter_and_window_forget_old_tokens():
    b = _Bloom(1024)
    for k in range(20):
        b.add(k * 7919)
    assert all(k * 7919 in b for k in range(20))
    assert sum(k * 104729 + 1 in b for k in range(1000)) < 50      # few false positives
    p = NeuronPredictor(2, 64, window=3)
    prev = np.zeros(64, dtype=bool)
    prev[:5] = True
    p.observe(1, np.ones(64, dtype=bool), prev)
    p.scores(1, prev)
    assert p.similar_hits == 1                   # the similar token is found in the window
    other = np.zeros(64, dtype=bool)
    other[40:45] = True
    for _ in range(3):                           # three other tokens push it out of the window
        p.observe(1, np.zeros(64, dtype=bool), other)
    p.scores(1, prev)
    assert p.similar_hits == 1                   # forgotten (the Bloom filter was rebuilt)


def test_memory_footprint_of_llama2_70b():
    m = load_model("llama2-70b")
    p = NeuronPredictor(2, 16)                    # the formula, at the model's size
    p.layers, p.neurons = m.layers, m.ffn
    mem = p.memory_bytes()
    assert mem["correlation_table"] == m.layers * m.ffn * 4 * (15 + 8) // 8
    assert mem["window_bitmaps"] == m.layers * 16 * m.ffn // 8
    assert mem["counters"] == m.layers * m.ffn * 2 // 8
    # the working set of one layer is the few hundred KB Hermes aims at; all layers are not
    layer = p.memory_bytes(per_layer=True)
    assert 200e3 < sum(layer.values()) < 500e3
    assert sum(mem.values()) == pytest.approx(m.layers * sum(layer.values()), rel=1e-3)


@pytest.mark.parametrize("kw, message", [
    ({"window": 0}, "window"), ({"top_k": 0}, "top_k"), ({"coefficient": 0}, "coefficient"),
    ({"counter_bits": 9}, "counter_bits"), ({"layers": 1.5}, "layers"),
])
def test_bad_parameters(kw, message):
    with pytest.raises(ValueError, match=message):
        NeuronPredictor(**{"layers": 2, "neurons": 8, **kw})


def test_a_trace_of_another_shape_is_refused():
    prof, _ = _traces()
    with pytest.raises(ValueError, match="4 layers x 512 neurons"):
        NeuronPredictor(3, 512).fit(prof)
