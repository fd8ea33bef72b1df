"""Hermes' offline placement ILP (``sw/scenarios/hermes/partition.py``): capacities respected, optimality
against brute force on small cases, the grouping's cost against single neurons, a full-size model
in seconds, bad input."""

import itertools

import numpy as np
import pytest

from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.hermes.partition import PartitionProblem, snake_split, solve_partition
from ndpdimm.sw.scenarios.hermes.traces import popularity, synthetic_trace


def _problem(freq, **kw):
    args = dict(neuron_bytes=1000, gpu_seconds_per_neuron=1.0, ndp_seconds_per_neuron=8.0,
                gpu_budget_bytes=freq.size * 1000 * 0.3, dimms=4,
                dimm_capacity_bytes=freq.size * 1000 / 4, group=1)
    args.update(kw)
    return PartitionProblem(freq, **args)


def _cost(p, on_gpu):
    """The objective with DIMM work divided evenly (the ILP's)."""
    total = 0.0
    for l in range(p.frequency.shape[0]):
        f = p.frequency[l]
        total += max(p.gpu_seconds_per_neuron * f[on_gpu[l]].sum(),
                     p.ndp_seconds_per_neuron / p.dimms * f[~on_gpu[l]].sum())
    return total


@pytest.mark.parametrize("solver", ["highs", "cbc"])
def test_small_case_is_optimal_against_brute_force(solver):
    rng = np.random.default_rng(4)
    freq = rng.random((2, 6))
    p = _problem(freq, gpu_budget_bytes=5 * 1000, dimm_capacity_bytes=3000)
    part = solve_partition(p, solver=solver)
    best = min(_cost(p, np.array(bits, dtype=bool).reshape(2, 6))
               for bits in itertools.product([0, 1], repeat=12) if sum(bits) <= 5
               and 12 - sum(bits) <= 4 * 3)
    assert part.status == "Optimal"
    assert part.on_gpu.sum() * 1000 <= 5000
    # exact up to one neuron's work per layer (the prefix structure; see the module docstring)
    slack = sum(max(1.0, 8.0 / 4) * freq[l].max() for l in range(2))
    assert best - 1e-9 <= _cost(p, part.on_gpu) <= best + slack
    assert np.isclose(part.ilp_objective, _cost(p, part.on_gpu))


def test_capacities_are_respected_and_the_split_is_balanced():
    t = synthetic_trace(200, 4, 1024, active_fraction=0.15, skew=1.0, seed=2)
    freq = t.firing_frequency()
    p = _problem(freq, gpu_budget_bytes=0.2 * freq.size * 1000,
                 dimm_capacity_bytes=0.25 * freq.size * 1000, group=32)
    part = solve_partition(p)
    assert part.on_gpu.sum() * 1000 <= p.gpu_budget_bytes
    counts = np.bincount(part.dimm[part.dimm >= 0], minlength=4)
    assert counts.max() * 1000 <= p.dimm_capacity_bytes
    assert counts.max() - counts.min() <= 4          # the snake deals neurons evenly per layer
    assert np.all((part.dimm == -1) == part.on_gpu)
    # hot neurons are the frequent ones: every GPU neuron fires at least as often as the
    # coldest of its layer's GPU group boundary allows
    for l in range(4):
        if part.on_gpu[l].any() and (~part.on_gpu[l]).any():
            assert freq[l, part.on_gpu[l]].mean() > freq[l, ~part.on_gpu[l]].mean()
    # the real split costs little more than the even split the ILP assumed
    assert part.ilp_objective <= part.objective <= part.ilp_objective * 1.05


def test_grouping_costs_at_most_its_bound():
    t = synthetic_trace(100, 3, 512, active_fraction=0.2, skew=0.8, seed=5)
    freq = t.firing_frequency()
    exact = solve_partition(_problem(freq, group=1))
    grouped = solve_partition(_problem(freq, group=64))
    assert exact.ilp_objective <= grouped.ilp_objective + 1e-9
    assert grouped.ilp_objective - exact.ilp_objective <= grouped.group_gap_bound + 1e-9
    assert grouped.variables < exact.variables


def test_snake_split_balances_counts_and_work():
    w = np.sort(np.random.default_rng(1).random(103))[::-1]
    d = snake_split(w, 4)
    counts = np.bincount(d, minlength=4)
    assert counts.max() - counts.min() <= 1
    loads = np.bincount(d, weights=w, minlength=4)
    assert loads.max() - loads.min() <= w.max()


def test_llama2_70b_solves_in_seconds():
    m = load_model("llama2-70b")
    rng = np.random.default_rng(0)
    p_rank = popularity(m.ffn, 0.1, 1.0)
    freq = np.stack([rng.permutation(p_rank) for _ in range(m.layers)])
    nb = 3 * m.hidden * 2
    p = PartitionProblem(freq, nb, nb / (1008e9 * 0.85), nb / (102.4e9 * 0.9), 16e9, 8,
                         32 * 2 ** 30, group=256)
    part = solve_partition(p)
    assert part.solve_seconds < 60
    assert part.on_gpu.sum() * nb <= 16e9
    assert 0 < part.hot_share < 0.5


@pytest.mark.parametrize("kw, message", [
    ({"gpu_budget_bytes": 0, "dimm_capacity_bytes": 10}, "impossible capacities"),
    ({"dimms": 0}, "dimms"),
    ({"group": 2.5}, "group"),
    ({"gpu_seconds_per_neuron": 0}, "gpu_seconds_per_neuron"),
    ({"neuron_bytes": -1}, "neuron_bytes"),
])
def test_bad_problems_are_refused(kw, message):
    with pytest.raises(ValueError, match=message):
        _problem(np.full((2, 8), 0.5), **kw)
    with pytest.raises(ValueError, match="\\[0, 1\\]"):
        _problem(np.full((2, 8), 1.5))


def test_unknown_solver():
    with pytest.raises(ValueError, match="solver"):
        solve_partition(_problem(np.full((1, 4), 0.5)), solver="gurobi")


def test_dense_block_and_repeated_layers_are_optimal_against_brute_force():
    """A QKV-like dense block shares the GPU budget; identical layers form one class (integer
    counts): the result equals the best of all (groups, share) choices per layer."""
    rng = np.random.default_rng(7)
    row = rng.random(4)
    freq = np.stack([row, row, rng.random(4)])            # layers 0 and 1 identical
    kw = dict(neuron_bytes=1000, gpu_seconds_per_neuron=1.0, ndp_seconds_per_neuron=8.0,
              gpu_budget_bytes=6000, dimms=2, dimm_capacity_bytes=20000, group=1,
              dense_bytes=2000, dense_gpu_seconds=1.5, dense_ndp_seconds=10.0, dense_levels=2)
    p = PartitionProblem(freq, **kw)
    part = solve_partition(p)
    shares = (0.0, 0.5, 1.0)

    def layer_cost(l, k, f):
        order = np.argsort(-freq[l], kind="stable")
        w, total = freq[l, order[:k]].sum(), freq[l].sum()
        return max(w, 8.0 / 2 * (total - w)) + max(f * 1.5, (1 - f) * 10.0 / 2)

    best = min(sum(layer_cost(l, k, f) for l, (k, f) in enumerate(choice))
               for choice in itertools.product(itertools.product(range(5), shares), repeat=3)
               if sum(k * 1000 + f * 2000 for k, f in choice) <= 6000)
    assert part.ilp_objective == pytest.approx(best)
    used = part.on_gpu.sum() * 1000 + part.dense_gpu_share.sum() * 2000
    assert used <= 6000
    assert set(part.dense_gpu_share) <= set(shares)
    # the two identical layers are one class: fewer variables than 3 layers' options
    assert part.variables < 3 * 5 * 3


def test_forced_hot_groups_and_bad_dense_parameters():
    freq = np.random.default_rng(1).random((2, 8))
    p = _problem(freq, group=2, hot_groups=1, gpu_budget_bytes=1e9)
    assert (solve_partition(p).on_gpu.sum(axis=1) == 2).all()
    with pytest.raises(ValueError, match="hot_groups"):
        _problem(freq, group=2, hot_groups=5)
    with pytest.raises(ValueError, match="dense_gpu_seconds"):
        _problem(freq, dense_bytes=100, dense_gpu_seconds=0.0, dense_ndp_seconds=1.0)
    with pytest.raises(ValueError, match="dense_bytes"):
        _problem(freq, dense_bytes=-1)
