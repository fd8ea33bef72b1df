"""Activation traces (``sw/scenarios/hermes/traces.py``): the synthetic generator's properties, the
recorder on a small ReLU network and on the real MiniLM (GELU), the file format and bad input."""

import numpy as np
import pytest
import torch

from ndpdimm.sw.scenarios.hermes.traces import (
    ActivationTrace,
    load_trace,
    popularity,
    record_trace,
    skew_for_top_share,
    synthetic_trace,
    token_similarity_for,
)


def test_popularity_is_a_capped_power_law_with_the_asked_mean():
    p = popularity(10000, 0.1, 1.0)
    assert abs(p.mean() - 0.1) < 1e-6 and p.max() <= 0.98
    assert np.all(np.diff(p) <= 0)
    assert np.allclose(popularity(100, 0.2, 0.0), 0.2)          # no skew: all equal
    # hot minority: the top 20 % of neurons carry most of the firings at skew 1
    assert p[:2000].sum() / p.sum() > 0.6


def test_synthetic_trace_has_its_parameters_properties():
    t = synthetic_trace(1000, 3, 2000, active_fraction=0.1, skew=1.0, token_similarity=0.7,
                        layer_correlation=0.0, seed=1)
    assert t.active.shape == (1000, 3, 2000) and t.active.dtype == np.bool_
    assert abs(t.active.mean() - 0.1) < 0.01
    assert abs(t.token_similarity() - 0.7) < 0.05
    # per layer its own hot set: the hottest neurons of layers 0 and 1 barely overlap
    f = t.firing_frequency()
    hot0, hot1 = set(np.argsort(-f[0])[:100]), set(np.argsort(-f[1])[:100])
    assert len(hot0 & hot1) < 30
    flat = synthetic_trace(400, 1, 2000, token_similarity=0.0, layer_correlation=0.0, seed=1)
    assert abs(flat.token_similarity()) < 0.05


def test_layer_correlation_makes_the_previous_layer_predictive():
    kw = dict(tokens=300, layers=2, neurons=400, active_fraction=0.2, skew=0.8, seed=3)
    loose = synthetic_trace(layer_correlation=0.0, **kw)
    tight = synthetic_trace(layer_correlation=0.9, **kw)
    assert tight.layer_correlation(1) > 0.8
    assert loose.layer_correlation(1) < 0.4
    assert abs(tight.active.mean() - 0.2) < 0.02                  # marginals kept
    with pytest.raises(ValueError, match="layer must be"):
        tight.layer_correlation(0)


def test_similarity_and_top_share_on_hand_made_traces():
    a = np.zeros((4, 1, 10), dtype=bool)
    a[0, 0, :4] = True                     # token 0: neurons 0-3
    a[1, 0, 2:6] = True                    # token 1: 2-5 (2 of token 0's 4 again)
    a[2, 0, 2:6] = True                    # token 2: the same as token 1
    a[3, 0, 9] = True
    t = ActivationTrace(a, {})
    assert t.similarity(1) == pytest.approx((2 + 4 + 0) / (4 + 4 + 4))
    assert t.similarity(2) == pytest.approx((2 + 0) / (4 + 4))
    # neurons 2-5 fire twice or three times: the top 2 of 10 (20 %) carry 2 x 3 of 13 firings
    assert t.top_share(0.2) == pytest.approx(6 / 13)
    with pytest.raises(ValueError, match="lag 4 needs more than 4 tokens"):
        t.similarity(4)


def test_top_share_counts_the_most_active_fifth():
    active = np.zeros((10, 1, 10), dtype=bool)
    active[:, 0, 0] = True                                 # 10 firings on neuron 0
    active[:2, 0, 1:5] = True                              # 8 more spread on neurons 1-4
    # top 20 % = neurons 0 and one of 1-4: (10 + 2) / 18
    assert ActivationTrace(active, {}).top_share() == pytest.approx(12 / 18)


def test_persistent_copies_reach_the_papers_adjacent_similarity():
    """Hermes' measured statistics (Section III): the skew that puts 80 % of the activations on
    20 % of the neurons, and the chains' correlation that makes adjacent tokens 90 % similar at
    layer correlation 0.9 (reachable only with persistent copies: fresh draws cap it)."""
    skew = skew_for_top_share(0.112, 0.8)
    p = popularity(8192, 0.112, skew)
    assert p[:1638].sum() / p.sum() == pytest.approx(0.8, abs=1e-3)
    rho = token_similarity_for(0.9, active_fraction=0.112, skew=skew, layer_correlation=0.9)
    t = synthetic_trace(64, 4, 8192, active_fraction=0.112, skew=skew, token_similarity=rho,
                        layer_correlation=0.9, copy_similarity=rho, seed=0, model_seed=0)
    assert t.similarity(1) == pytest.approx(0.9, abs=2e-3)
    assert t.similarity(25) < t.similarity(10) < t.similarity(1)
    fresh = synthetic_trace(64, 4, 8192, active_fraction=0.112, skew=skew, token_similarity=0.999,
                            layer_correlation=0.9, seed=0, model_seed=0)
    assert fresh.similarity(1) < 0.9
    with pytest.raises(ValueError, match="out of the generator's reach"):
        token_similarity_for(0.9999, active_fraction=0.112, skew=skew, layer_correlation=0.9,
                             neurons=512)
    with pytest.raises(ValueError, match="no skew"):
        skew_for_top_share(0.112, 0.999)


def test_same_seed_same_trace_and_the_file_round_trip(tmp_path):
    a = synthetic_trace(50, 2, 333, seed=9)
    b = synthetic_trace(50, 2, 333, seed=9)
    assert np.array_equal(a.active, b.active)
    assert not np.array_equal(a.active, synthetic_trace(50, 2, 333, seed=10).active)
    path = a.save(tmp_path / "trace")
    back = load_trace(path)
    assert np.array_equal(back.active, a.active) and back.meta == a.meta


@pytest.mark.parametrize("kw, message", [
    ({"tokens": 0}, "tokens"),
    ({"active_fraction": 0.0}, "active_fraction"),
    ({"skew": -1.0}, "skew"),
    ({"token_similarity": 1.0}, "token_similarity"),
    ({"layer_correlation": 1.5}, "layer_correlation"),
    ({"neurons": 10.5}, "neurons"),
])
def test_bad_generator_parameters(kw, message):
    args = {"tokens": 4, "layers": 2, "neurons": 16, **kw}
    with pytest.raises(ValueError, match=message):
        synthetic_trace(**args)


def test_malformed_trace_files(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        load_trace(tmp_path / "absent.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a readable trace"):
        load_trace(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", x=np.zeros(3))
    with pytest.raises(ValueError, match="missing bits"):
        load_trace(tmp_path / "other.npz")
    t = synthetic_trace(4, 2, 20, seed=1)
    np.savez(tmp_path / "v2.npz", bits=np.packbits(t.active, axis=-1), shape=np.array([4, 2, 20]),
             version=np.array(2), meta=np.array("{}"))
    with pytest.raises(ValueError, match="version 2"):
        load_trace(tmp_path / "v2.npz")
    np.savez(tmp_path / "shape.npz", bits=np.packbits(t.active, axis=-1), shape=np.array([4, 2, 99]),
             version=np.array(1), meta=np.array("{}"))
    with pytest.raises(ValueError, match="do not match"):
        load_trace(tmp_path / "shape.npz")
    with pytest.raises(ValueError, match="3-D bool"):
        ActivationTrace(np.zeros((2, 2)), {})


def test_record_trace_of_a_relu_network_matches_its_activations():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16),
                              torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 16))
    batches = [torch.randn(5, 16), torch.randn(3, 16)]
    t = record_trace(net, batches)
    assert t.active.shape == (8, 2, 64)
    x = torch.cat(batches)
    h1 = torch.relu(net[0](x))
    h2 = torch.relu(net[3](net[2](h1)))
    assert np.array_equal(t.active[:, 0], (h1 > 0).numpy())
    assert np.array_equal(t.active[:, 1], (h2 > 0).numpy())
    with pytest.raises(ValueError, match="no ReLU/GELU"):
        record_trace(torch.nn.Linear(4, 4), [torch.randn(1, 4)])
    with pytest.raises(ValueError, match="different widths"):
        record_trace(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Linear(4, 8), torch.nn.ReLU()),
                     [torch.randn(2, 4)])


def test_record_trace_of_the_real_minilm_with_a_gelu_threshold():
    from ndpdimm.sw.layer.model import DEFAULT_SENTENCE, load_model
    tokenizer, model = load_model(0)
    batch = dict(tokenizer([DEFAULT_SENTENCE], return_tensors="pt"))
    t = record_trace(model, [batch], threshold=0.05, source="all-MiniLM-L6-v2")
    n_tokens = batch["input_ids"].shape[1]
    assert t.active.shape == (n_tokens, 6, 1536)          # 6 BERT layers, MLP 1536, GELU
    share = t.active.mean()
    assert 0.02 < share < 0.5, share                       # sparse, but not empty
    # a higher threshold can only switch neurons off
    t2 = record_trace(model, [batch], threshold=0.5)
    assert not np.any(t2.active & ~t.active)
