"""MoE routing traces (``sw/scenarios/trimoe/workload.py``): the generator's properties against its parameters,
the trace validation, the file format and its bad inputs, and the recorder on a toy torch MoE."""

import dataclasses
import json
import math
import time

import numpy as np
import pytest
import torch

from ndpdimm.sw.scenarios.trimoe.workload import (
    FORMAT_NAME,
    FORMAT_VERSION,
    RoutingTrace,
    RoutingTraceConfig,
    TraceError,
    expert_ranking,
    record_routing,
    synthetic_routing,
)

SMALL = RoutingTraceConfig(n_experts=32, top_k=4, layers=2, tokens=64, steps=3)


def _by_rank(trace, config):
    """``[layer, rank]`` token counts over all steps, ranks as in :func:`expert_ranking`."""
    ranking = expert_ranking(config).astype(np.intp)
    return np.take_along_axis(trace.loads().sum(axis=0), ranking, axis=1)


def _consecutive_step_correlation(trace):
    loads = trace.loads().astype(np.float64)
    return np.mean([np.corrcoef(loads[s, layer], loads[s + 1, layer])[0, 1]
                    for s in range(trace.steps - 1) for layer in range(trace.layers)])


# --- generator ---------------------------------------------------------------------------------

def test_shapes_ranges_and_distinct_experts_per_token():
    cfg = RoutingTraceConfig(n_experts=64, top_k=8, layers=3, tokens=100, steps=5)
    t = synthetic_routing(cfg)
    assert t.experts.shape == (5, 3, 100, 8) and t.experts.dtype == np.int16
    assert (t.steps, t.layers, t.tokens, t.top_k, t.n_experts) == (5, 3, 100, 8, 64)
    assert t.experts.min() >= 0 and t.experts.max() < 64
    ordered = np.sort(t.experts, axis=-1)
    assert np.all(np.diff(ordered, axis=-1) > 0)
    loads = t.loads()
    assert loads.shape == (5, 3, 64) and loads.dtype == np.int32
    assert np.all(loads.sum(axis=2) == 100 * 8)
    assert np.array_equal(loads[2, 1], np.bincount(t.experts[2, 1].ravel(), minlength=64))
    assert not t.experts.flags.writeable
    assert t.meta["source"] == "synthetic" and RoutingTraceConfig(**t.meta["config"]) == cfg
    json.dumps(t.meta)


def test_same_seed_same_trace_other_seed_other_trace_longer_trace_extends():
    a, b = synthetic_routing(SMALL), synthetic_routing(SMALL)
    assert np.array_equal(a.experts, b.experts) and a.meta == b.meta
    other = synthetic_routing(dataclasses.replace(SMALL, seed=1))
    assert not np.array_equal(a.experts, other.experts)
    # independent streams: more steps keep the first ones (a profile trace is a prefix of a run)
    longer = synthetic_routing(dataclasses.replace(SMALL, steps=5))
    assert np.array_equal(longer.experts[:3], a.experts)


def test_class_masses_are_the_realised_shares_of_slots():
    cfg = RoutingTraceConfig()                         # 16 steps x 4 layers x 512 tokens, top-6
    t = synthetic_routing(cfg)
    sizes = cfg.class_sizes
    assert sizes == {"hot": 8, "warm": 32, "cold": 120}
    per_rank = _by_rank(t, cfg).sum(axis=0) / (t.steps * t.layers * t.tokens * t.top_k)
    shares = dict(zip(("hot", "warm", "cold"),
                      np.split(per_rank, np.cumsum([sizes["hot"], sizes["warm"]]))))
    # The class masses hold at every step, so only the token draws vary: a token's slots in a
    # class vary at most as independent draws, sum lambda (1 - lambda) <= n_hot / 4 = 2, so
    # the share's std-dev is <= sqrt(2 / 32768 tokens) / 6 = 0.0013; Pareto sampling is off by
    # < 0.001 per class. 0.01 is > 6 sigma.
    for c, mass in cfg.class_masses.items():
        assert abs(shares[c].sum() - mass) < 0.01, (c, shares[c].sum())
        assert t.meta["realised_share"][c] == pytest.approx(shares[c].sum(), abs=1e-12)
    assert t.meta["class_sizes"] == sizes


def test_slot_probabilities_are_not_flattened():
    """Without drift each hot expert of rank r is in 6 x 0.45 / (r H_8) of the tokens (Zipf 1
    over 8 hot experts). Drawing in proportion to popularity without replacement would put the
    hottest (0.993) in only ~70 % of the tokens."""
    cfg = RoutingTraceConfig(volatility=0.0)
    t = synthetic_routing(cfg)
    frequency = _by_rank(t, cfg).sum(axis=0)[:8] / (t.steps * t.layers * t.tokens)
    harmonic = sum(1 / r for r in range(1, 9))
    expected = np.array([6 * 0.45 / (r * harmonic) for r in range(1, 9)])
    # binomial std-dev over 32768 tokens <= 0.0028 (0.00045 for the hottest): 0.015 is 5 sigma
    assert np.allclose(frequency, expected, atol=0.015), (frequency, expected)
    assert abs(frequency[0] - expected[0]) < 0.003


def test_hot_experts_can_saturate_and_the_class_mass_still_holds():
    # 2 hot experts share 1.8 of a token's 6 slots: the hotter one at a step is in (nearly)
    # every token, and the drift (volatility 1) rarely lets the other one overtake
    cfg = RoutingTraceConfig(n_experts=40, hot_fraction=0.05, hot_mass=0.3, skew=2.0,
                             volatility=1.0, steps=8)
    t = synthetic_routing(cfg)
    frequency = _by_rank(t, cfg).sum(axis=0) / (t.steps * t.layers * t.tokens)
    assert frequency[0] > 0.9
    assert abs(t.meta["realised_share"]["hot"] - 0.3) < 0.01


def test_temporal_correlation_keeps_loads_from_step_to_step():
    still = synthetic_routing(RoutingTraceConfig(temporal_correlation=0.95))
    fresh = synthetic_routing(RoutingTraceConfig(temporal_correlation=0.0))
    # measured 0.99 and 0.87: the shared base popularity correlates even independent steps
    assert _consecutive_step_correlation(still) > _consecutive_step_correlation(fresh) + 0.05
    calm = synthetic_routing(RoutingTraceConfig(volatility=0.0, temporal_correlation=0.0))
    assert _consecutive_step_correlation(calm) > _consecutive_step_correlation(fresh)


def test_layer_variation_sets_how_alike_the_layers_rank_their_experts():
    def ranking_and_hottest(variation):
        cfg = RoutingTraceConfig(layers=6, steps=4, tokens=256, volatility=0.0,
                                 layer_variation=variation)
        return expert_ranking(cfg), synthetic_routing(cfg).loads().sum(axis=0).argmax(axis=1)

    ranking, hottest = ranking_and_hottest(0.0)
    assert np.all(ranking == ranking[0]) and np.all(hottest == ranking[0, 0])
    ranking, hottest = ranking_and_hottest(1.0)
    assert len(set(hottest.tolist())) > 1
    assert np.mean(ranking[1:] == ranking[0]) < 0.05          # independent: ~1/160 agree


def test_layer_variation_reshuffles_that_share_of_the_base_ranking():
    ranking = expert_ranking(RoutingTraceConfig(layers=40, layer_variation=0.5))
    assert np.all(np.sort(ranking, axis=1) == np.arange(160))
    # the base ranking is each position's most frequent expert: there in ~half of the layers,
    # any other expert in ~40 x 0.5 / 80 = 0.25 of them
    base = np.array([np.bincount(column, minlength=160).argmax() for column in ranking.T])
    # each layer keeps 80 positions, plus the reshuffle's fixed points (~Poisson(1), <= 8)
    same = np.mean(ranking == base, axis=1)
    assert np.all((same >= 0.5) & (same <= 0.55)), same


def test_the_largest_trace_is_fast():
    cfg = RoutingTraceConfig(layers=60, tokens=768, top_k=8, steps=16)
    start = time.perf_counter()
    t = synthetic_routing(cfg)
    # ~1-2 s measured; the bound only catches a per-token Python loop or a full sort
    assert time.perf_counter() - start < 8
    assert t.experts.shape == (16, 60, 768, 8)


@pytest.mark.parametrize("change, message", [
    ({"n_experts": 0}, r"n_experts must be an integer in \[1, 32767\], got 0"),
    ({"n_experts": 40000}, "n_experts .* got 40000"),
    ({"top_k": True}, "top_k must be an integer .* got True"),
    ({"top_k": 7, "n_experts": 6}, r"top_k must be an integer in \[1, 6\], got 7"),
    ({"layers": 2.0}, "layers must be an integer >= 1, got 2.0"),
    ({"tokens": 0}, "tokens .* got 0"),
    ({"steps": "4"}, "steps .* got '4'"),
    ({"seed": -1}, "seed .* got -1"),
    ({"seed": False}, "seed .* got False"),
    ({"hot_fraction": -0.1}, r"hot_fraction must be a number in \[0, 1\], got -0.1"),
    ({"hot_mass": math.nan}, "hot_mass .* got nan"),
    ({"warm_mass": True}, "warm_mass .* got True"),
    ({"skew": -1.0}, "skew .* got -1.0"),
    ({"volatility": math.inf}, "volatility .* got inf"),
    ({"temporal_correlation": 1.0}, r"temporal_correlation must be a number in \[0, 1\), got 1.0"),
    ({"layer_variation": 1.5}, "layer_variation .* got 1.5"),
    ({"hot_fraction": 0.6, "warm_fraction": 0.5}, "hot_fraction \\+ warm_fraction must be <= 1"),
    ({"hot_mass": 0.7, "warm_mass": 0.4}, "hot_mass \\+ warm_mass must be <= 1, got 0.7 \\+ 0.4"),
    ({"hot_fraction": 0.0}, "the hot class has mass 0.45 but no experts"),
    ({"hot_fraction": 0.5, "warm_fraction": 0.5}, "the cold class has mass 0.2 but no experts"),
    ({"n_experts": 3, "top_k": 1, "hot_fraction": 0.5, "warm_fraction": 0.5},
     "make 2 \\+ 2 experts, more than n_experts = 3"),
    ({"n_experts": 8, "top_k": 4, "hot_fraction": 0.25, "warm_fraction": 0.5, "hot_mass": 0.2,
      "warm_mass": 0.2}, "the cold class has 2 expert\\(s\\), too few for mass 0.6 at top_k = 4"),
])
def test_bad_configuration(change, message):
    with pytest.raises(TraceError, match=message):
        RoutingTraceConfig(**change)


@pytest.mark.parametrize("n_experts, top_k, sizes", [
    (160, 6, {"hot": 8, "warm": 32, "cold": 120}),      # the fractions
    (8, 2, {"hot": 1, "warm": 2, "cold": 5}),           # Mixtral-like: at least one expert
    (64, 8, {"hot": 4, "warm": 13, "cold": 47}),        # 0.45 x 8 slots need 4 hot experts
    (16, 6, {"hot": 3, "warm": 3, "cold": 10}),
])
def test_class_sizes_follow_the_fractions_and_hold_their_mass(n_experts, top_k, sizes):
    cfg = RoutingTraceConfig(n_experts=n_experts, top_k=top_k, steps=2, tokens=64)
    assert cfg.class_sizes == sizes
    assert abs(synthetic_routing(cfg).meta["realised_share"]["hot"] - 0.45) < 0.05


def test_edge_configurations_are_valid():
    # top_k = n_experts: every token takes every expert, whatever the popularity
    t = synthetic_routing(RoutingTraceConfig(n_experts=6, top_k=6, hot_fraction=1.0, hot_mass=1.0,
                                             warm_fraction=0.0, warm_mass=0.0, steps=2, tokens=5))
    assert np.all(np.sort(t.experts, axis=-1) == np.arange(6))
    # experts of a class without mass are never routed to
    cfg = RoutingTraceConfig(n_experts=20, top_k=2, hot_mass=0.4, warm_mass=0.6, steps=2)
    cold = expert_ranking(cfg)[:, 5:]
    t = synthetic_routing(cfg)
    assert all(not np.isin(t.experts[:, layer], cold[layer]).any() for layer in range(t.layers))
    with pytest.raises(TraceError, match="config must be a RoutingTraceConfig"):
        synthetic_routing({"n_experts": 8})


# --- trace validation and files ----------------------------------------------------------------

def test_save_load_round_trip_is_exact(tmp_path):
    t = synthetic_routing(SMALL)
    path = tmp_path / "routing"                   # no suffix: written exactly there
    t.save(path)
    back = RoutingTrace.load(path)
    assert np.array_equal(back.experts, t.experts) and back.experts.dtype == np.int16
    assert back.n_experts == t.n_experts and back.meta == t.meta


@pytest.mark.parametrize("experts, n_experts, meta, message", [
    (np.zeros((1, 1, 2, 2)), 4, {}, "integer array .* got float64"),
    ([[[[0, 1]]]], 4, {}, "integer array .* got list"),
    (np.zeros((1, 2, 2), np.int16), 4, {}, r"4-D .* got shape \(1, 2, 2\)"),
    (np.zeros((1, 1, 0, 2), np.int16), 4, {}, "non-empty"),
    (np.array([[[[0, 1]]]]), True, {}, "n_experts .* got True"),
    (np.array([[[[0, 1, 2]]]]), 2, {}, "top_k = 3 experts per token, more than n_experts = 2"),
    (np.array([[[[0, 1]], [[1, 4]]]]), 4, {},
     r"expert id 4 at \[step, layer, token, slot\] \[0, 1, 0, 1\] is outside \[0, 4\)"),
    (np.array([[[[0, 1]], [[-1, 2]]]]), 4, {}, "expert id -1"),
    (np.array([[[[0, 1], [3, 3]]]]), 4, {},
     r"expert 3 appears twice in the token at \[step, layer, token\] \[0, 0, 1\]"),
    (np.array([[[[0, 1]]]]), 4, [], "meta must be a dict, got list"),
    (np.array([[[[0, 1]]]]), 4, {"x": object()}, "meta must be JSON-able"),
])
def test_bad_traces(experts, n_experts, meta, message):
    with pytest.raises(TraceError, match=message):
        RoutingTrace(experts, n_experts, meta)


def _write(path, **fields):
    """A trace file with some of its fields replaced."""
    content = {"format": np.array(FORMAT_NAME), "version": np.array(FORMAT_VERSION),
               "n_experts": np.array(4), "experts": np.array([[[[0, 1], [2, 3]]]], np.int16),
               "meta": np.array("{}")}
    content.update(fields)
    np.savez(path, **{k: v for k, v in content.items() if v is not None})
    return path


def test_the_file_writer_stand_in_is_valid(tmp_path):
    t = RoutingTrace.load(_write(tmp_path / "ok.npz"))
    assert t.experts.shape == (1, 1, 2, 2) and t.n_experts == 4


@pytest.mark.parametrize("fields, message", [
    ({"experts": None}, "not a routing trace \\(missing experts\\)"),
    ({"format": np.array("ndpdimm.activations")}, "format .*ndpdimm.activations"),
    ({"version": np.array(2)}, "format version 2, this reader knows 1"),
    ({"version": np.array("1")}, "version must be an integer scalar"),
    ({"n_experts": np.array([4, 4])}, "n_experts must be an integer scalar"),
    ({"meta": np.array("{not json")}, "unreadable meta"),
    ({"meta": np.array("[1, 2]")}, "meta must be a dict"),
    ({"experts": np.array([[[[0, 9]]]])}, "expert id 9 .* outside \\[0, 4\\)"),
    ({"experts": np.array([[[[2, 2]]]])}, "expert 2 appears twice"),
    ({"experts": np.array([[[0, 1]]])}, "4-D"),
    ({"experts": np.array([[[[0.0, 1.0]]]])}, "integer array"),
    ({"n_experts": np.array(1)}, "more than n_experts = 1"),
])
def test_bad_trace_files_name_the_file_and_the_problem(tmp_path, fields, message):
    path = _write(tmp_path / "bad.npz", **fields)
    with pytest.raises(TraceError, match=f"bad.npz: .*{message}"):
        RoutingTrace.load(path)


def test_files_that_are_not_npz_archives(tmp_path):
    with pytest.raises(TraceError, match="absent.npz: no such trace file"):
        RoutingTrace.load(tmp_path / "absent.npz")
    with pytest.raises(TraceError, match="no such trace file"):
        RoutingTrace.load(tmp_path)                       # a directory
    (tmp_path / "junk.npz").write_bytes(b"not a zip archive")
    with pytest.raises(TraceError, match="junk.npz: not a readable .npz file"):
        RoutingTrace.load(tmp_path / "junk.npz")
    (tmp_path / "cut.npz").write_bytes(_write(tmp_path / "ok.npz").read_bytes()[:60])
    with pytest.raises(TraceError, match="cut.npz: not a readable .npz file"):
        RoutingTrace.load(tmp_path / "cut.npz")
    np.save(tmp_path / "array.npy", np.zeros((1, 1, 1, 2), np.int16))
    with pytest.raises(TraceError, match="array.npy: a single .npy array"):
        RoutingTrace.load(tmp_path / "array.npy")


# --- recorder ----------------------------------------------------------------------------------

class ToyMoELayer(torch.nn.Module):
    """A residual MoE layer: a linear router to ``n_experts`` tiny MLPs, top-k softmax weights."""

    def __init__(self, width, n_experts, top_k):
        super().__init__()
        self.top_k = top_k
        self.router = torch.nn.Linear(width, n_experts, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 8), torch.nn.ReLU(),
                                torch.nn.Linear(8, width))
            for _ in range(n_experts))

    def forward(self, x):
        weights, chosen = self.router(x).softmax(dim=-1).topk(self.top_k, dim=-1)
        out = torch.zeros_like(x)
        for e, expert in enumerate(self.experts):
            weight = (weights * (chosen == e)).sum(dim=-1, keepdim=True)
            out = out + weight * expert(x)
        return x + out


class ToyMoE(torch.nn.Module):
    def __init__(self, width=16, n_experts=8, top_k=2, layers=2):
        super().__init__()
        self.blocks = torch.nn.ModuleList(ToyMoELayer(width, n_experts, top_k)
                                          for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


@pytest.fixture
def toy():
    torch.manual_seed(0)
    return ToyMoE().eval()


def test_recorded_experts_are_the_top_k_router_logits(toy):
    batches = [torch.randn(2, 5, 16) for _ in range(3)]           # [batch, seq, width]
    t = record_routing(toy, batches, ["blocks.0.router", "blocks.1.router"], top_k=2)
    assert t.experts.shape == (3, 2, 10, 2) and t.n_experts == 8
    for step, x in enumerate(batches):
        with torch.no_grad():
            hidden = x
            for layer, block in enumerate(toy.blocks):
                logits = block.router(hidden).reshape(-1, 8).numpy()
                expected = np.argsort(-logits, axis=1)[:, :2]          # largest first
                assert np.array_equal(t.experts[step, layer], expected)
                hidden = block(hidden)
    assert t.meta == {"source": "recorded", "model": "ToyMoE",
                      "gates": ["blocks.0.router", "blocks.1.router"], "top_k": 2}
    # gates as modules, 2-D token batches, keyword batches, the hooks gone afterwards
    flat = [x.reshape(-1, 16) for x in batches]
    again = record_routing(toy, flat, [b.router for b in toy.blocks], top_k=2, n_experts=8)
    assert np.array_equal(again.experts, t.experts) and again.meta["gates"] == t.meta["gates"]
    named = record_routing(toy, [{"x": x} for x in batches], ["blocks.0.router"], top_k=2)
    assert np.array_equal(named.experts[:, 0], t.experts[:, 0])
    assert all(not b.router._forward_hooks for b in toy.blocks)


def _with_unused_router():
    model = ToyMoE()
    model.spare = torch.nn.Linear(16, 8)           # registered, never called by forward
    return model


class _Halve(torch.nn.Module):
    def forward(self, x):
        return x[: x.shape[0] // 2]


class _Pair(torch.nn.Module):
    def forward(self, x):
        return x, x


@pytest.mark.parametrize("model, batches, gates, kwargs, message", [
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.gate"], {},
     "gate 'blocks.0.gate' not found in ToyMoE"),
    (ToyMoE(), [torch.randn(4, 16)], "blocks.0.router", {}, "gates must be a non-empty list"),
    (ToyMoE(), [torch.randn(4, 16)], [], {}, "gates must be a non-empty list"),
    (ToyMoE(), [torch.randn(4, 16)], [3], {}, "gates\\[0\\] must be a module or a module name"),
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.router"] * 2, {}, "a gate is listed twice"),
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.router"], {"top_k": 9},
     "top_k = 9 is more than n_experts = 8"),
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.router"], {"top_k": 0}, "top_k .* got 0"),
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.router"], {"n_experts": 6},
     "gate 'blocks.0.router' gives 8 logits per token, expected n_experts = 6"),
    (ToyMoE(), [torch.randn(4, 16)], ["blocks.0.router", "blocks.0"], {},
     "gate 'blocks.0' gives 16 logits per token, expected n_experts = 8"),
    (ToyMoE(), [torch.randn(4, 16), torch.randn(3, 16)], ["blocks.0.router"], {},
     "batch 1 has 3 tokens, batch 0 had 4"),
    (ToyMoE(), [], ["blocks.0.router"], {}, "batches is empty"),
    (_with_unused_router(), [torch.randn(4, 16)], ["spare"], {},
     "gate 'spare' did not run on batch 0"),
    (torch.nn.Sequential(torch.nn.Linear(4, 8), _Halve(), torch.nn.Linear(8, 8)),
     [torch.randn(6, 4)], ["0", "2"], {},
     r"different token counts on batch 0: \{'0': 6, '2': 3\}"),
    (torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Unflatten(-1, (2, 4))),
     [torch.randn(2, 3, 4)], ["1"], {},
     r"gate '1' must give router logits .* got shape \(2, 3, 2, 4\)"),
    (torch.nn.Sequential(torch.nn.Linear(4, 8), _Pair()), [torch.randn(2, 4)], ["1"], {},
     "gate '1' must give router logits .* got tuple"),
])
def test_recorder_rejects_what_is_not_a_router(model, batches, gates, kwargs, message):
    with pytest.raises(TraceError, match=message):
        record_routing(model, batches, gates, **{"top_k": 2, **kwargs})
    assert all(not m._forward_hooks for m in model.modules())
