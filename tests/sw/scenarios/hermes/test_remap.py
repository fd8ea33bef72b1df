"""Hermes' window-based remapping (``sw/scenarios/hermes/remap.py``)."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.hermes.remap import imbalance, replay
from ndpdimm.sw.scenarios.hermes.traces import synthetic_trace


def _trace():
    return synthetic_trace(256, 3, 512, active_fraction=0.1, skew=1.0, token_similarity=0.8,
                           layer_correlation=0.2, seed=4)


def _skewed_placement(trace, dimms=4):
    """Cold neurons dealt by neuron id, blind to frequency: the hot ones bunch up somewhere."""
    f = trace.firing_frequency()
    dimm = np.empty((trace.layers, trace.neurons), dtype=np.int64)
    for l in range(trace.layers):
        order = np.argsort(-f[l])
        dimm[l, order] = np.repeat(np.arange(dimms), trace.neurons // dimms)   # hottest on 0
    dimm[:, np.arange(0, trace.neurons, 16)] = -1                              # some on the GPU
    return dimm


def test_remapping_reduces_imbalance_and_keeps_capacities():
    t = _trace()
    start = _skewed_placement(t)
    r = replay(t, start, 4, window=32)
    assert r.imbalance_static > 2.0                 # the bunched placement is badly imbalanced
    assert r.imbalance < r.imbalance_static * 0.7
    assert r.migrated_neurons > 0
    # swaps only: every DIMM keeps its neuron count per layer, GPU neurons never move
    for l in range(t.layers):
        assert np.array_equal(np.bincount(r.final_dimm[l][r.final_dimm[l] >= 0], minlength=4),
                              np.bincount(start[l][start[l] >= 0], minlength=4))
    assert np.array_equal(r.final_dimm == -1, start == -1)
    for token, layer, neuron, frm, to in r.migrations:
        assert frm != to and 0 <= frm < 4 and 0 <= to < 4 and start[layer, neuron] >= 0


def test_a_balanced_placement_is_left_alone():
    t = _trace()
    f = t.firing_frequency()
    from ndpdimm.sw.scenarios.hermes.partition import snake_split
    dimm = np.stack([snake_split(f[l], 4) for l in range(t.layers)])
    r = replay(t, dimm, 4, window=32, threshold=3.0)
    assert r.migrated_neurons == 0 and r.imbalance == pytest.approx(r.imbalance_static)


def test_imbalance_metric():
    active = np.zeros((1, 1, 4), dtype=bool)
    active[0, 0, :2] = True
    dimm = np.array([[0, 0, 1, 1]])
    assert imbalance(active, dimm, 2) == (2.0, 1)          # all load on DIMM 0: max/mean = 2
    dimm = np.array([[0, 1, 0, 1]])
    assert imbalance(active, dimm, 2) == (1.0, 1)


@pytest.mark.parametrize("kw, message", [
    ({"window": 0}, "window"), ({"threshold": 0.5}, "threshold"), ({"max_swaps": 0}, "max_swaps"),
])
def test_bad_parameters(kw, message):
    t = synthetic_trace(8, 1, 16, seed=1)
    with pytest.raises(ValueError, match=message):
        replay(t, np.zeros((1, 16), dtype=np.int64), 2, **kw)
    with pytest.raises(ValueError, match="placement must be"):
        replay(t, np.zeros((2, 16), dtype=np.int64), 2)
    with pytest.raises(ValueError, match="dimms"):
        replay(t, np.full((1, 16), 3, dtype=np.int64), 2)
