"""The RAPID reproduction: the 90 %-load finder, the load grid's continuation to RAPID's own
limit, the paper's set-up in the cases, and the reduced run end to end."""

import dataclasses
import json

import pytest

from ndpdimm.sw import cli
from ndpdimm.sw.reproduce.core import ReproductionError
from ndpdimm.sw.reproduce.params import load_params
from ndpdimm.sw.reproduce.rapid import PUBLISHED, SYSTEMS, max_sustained_load, next_rate_scale

HEADLINE = {"longbench": "long-context", "synthetic-8k-128": "synthetic-8k-128",
            "synthetic-512-512": "synthetic-512-512"}


def test_max_sustained_load_interpolates_the_first_crossing():
    # 0.95 at 10, 0.85 at 20: the target 0.9 is crossed half-way
    assert max_sustained_load([10, 20, 30], [0.95, 0.85, 0.95], 0.9) == (pytest.approx(15.0), "interpolated")
    assert max_sustained_load([30, 10, 20], [0.1, 1.0, 0.9], 0.9) == (pytest.approx(20.0), "interpolated")
    assert max_sustained_load([10, 20], [0.99, 0.95], 0.9) == (20, "above grid")
    assert max_sustained_load([10, 20], [0.5, 0.4], 0.9) == (None, "below grid")


def _continued_grid(start, attainment, step, max_points):
    """The grid :func:`next_rate_scale` builds from ``start`` when RAPID's attainment at a rate
    scale is ``attainment[scale]`` (hand-made), as the reproduction runs it."""
    scales = list(start)
    while (nxt := next_rate_scale(scales, [attainment[s] for s in scales], 0.9, step,
                                  max_points)) is not None:
        scales.append(nxt)
    return scales


def test_the_grid_continues_until_rapid_itself_falls_below_the_target():
    attainment = {0.5: 0.99, 1.0: 0.97, 1.5: 0.93, 2.0: 0.91, 2.5: 0.85, 3.0: 0.5, 3.5: 0.1}
    # the starting grid holds the target everywhere: continued one step at a time up to the
    # first point below it, and no further
    scales = _continued_grid([0.5, 1.0], attainment, 0.5, 10)
    assert scales == [0.5, 1.0, 1.5, 2.0, 2.5]
    load, how = max_sustained_load(scales, [attainment[s] for s in scales], 0.9)
    assert (load, how) == (pytest.approx(2.0 + 0.5 * (0.91 - 0.9) / (0.91 - 0.85)), "interpolated")
    # a starting grid that already brackets the limit is not continued
    assert _continued_grid([1.0, 2.5, 0.5], attainment, 0.5, 10) == [1.0, 2.5, 0.5]
    # nor one whose lowest point misses the target, or one with a dip below it on the way up
    assert _continued_grid([3.0], attainment, 0.5, 10) == [3.0]
    assert _continued_grid([0.5, 1.0], {**attainment, 1.0: 0.89}, 0.5, 10) == [0.5, 1.0]
    # the cap on points: RAPID still at the target on the last point, its limit above the grid
    assert _continued_grid([0.5, 1.0], attainment, 0.5, 3) == [0.5, 1.0, 1.5]
    assert _continued_grid([0.5], attainment, 1.0, 10) == [0.5, 1.5, 2.5]
    with pytest.raises(ReproductionError, match="step must be > 0"):
        next_rate_scale([1.0], [1.0], 0.9, 0.0, 5)


def test_the_headline_cases_are_the_papers_set_up():
    """Llama-3.1-8B at TP 1 on LongBench-like, 8K/128 and 512/512 prompts with Poisson (steady)
    arrivals, the reduced run the same cases, the 70B case outside the headline, and the node
    budget of 4800 W both here and in the node file (checked by _check_node_values)."""
    from ndpdimm.sw.reproduce.rapid import _case_table, _cases
    params = load_params("rapid")
    table = _case_table(params)
    assert [c.name for c in table.values() if c.headline] == list(HEADLINE)
    for name, workload in HEADLINE.items():
        c = table[name]
        assert (c.model, c.tensor_parallel, c.workload, c.pattern) == ("llama3.1-8b", 1, workload, "steady")
    assert not table["sustained-decode"].headline and not table["mixed"].headline
    assert params["node.node.power_budget_w"].value == 4800.0
    reduced = _cases(params, reduced=True)
    assert [c.name for c in reduced] == list(HEADLINE)
    assert all(c.rate_scales == tuple(params["reduced.rate_scales"].value) for c in reduced)
    bad = {**params, "cases.longbench.tensor_parallel": dataclasses.replace(
        params["cases.longbench.tensor_parallel"], value=2)}
    with pytest.raises(ReproductionError, match="cases.longbench.tensor_parallel is 2.*parallelism 1 only"):
        _case_table(bad)


def test_parameter_file_sources_every_value_and_the_node_values_match():
    params = load_params("rapid")
    for name in params["sensitivity_parameters"].value:
        assert params[name].range_source, name
    assert params["static_baseline"].value in SYSTEMS and params["rapid_system"].value in SYSTEMS


def test_reduced_reproduction_writes_a_complete_table(tmp_path, capsys):
    """`ndpdimm reproduce rapid --reduced`: the table with both published figures, the load
    sweep, the peak load, one tornado bar and the time-shifting pair, from the real scenario (in
    process)."""
    assert cli.main(["reproduce", "rapid", "--reduced", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| figure | unit | published |" in out
    data = json.loads((tmp_path / "rapid.json").read_text())
    figures = {f["key"]: f for f in data["figures"]}
    assert set(figures) == set(PUBLISHED)
    for key, f in figures.items():
        assert f["published"] == PUBLISHED[key][2]
        assert f["ours"] is not None and f["ratio"] == pytest.approx(f["ours"] / f["published"])
        assert f["within_25pct"] or f["explanation"]
    params = load_params("rapid")
    setup = data["setup"]
    # the paper's set-up: the three headline cases, Llama-3.1-8B at TP 1, the node's 4800 W
    assert setup["node"]["power_budget_w"] == 4800.0 and setup["node"]["gpus"] == 8
    assert list(setup["cases"]) == list(HEADLINE)
    for name, workload in HEADLINE.items():
        c = setup["cases"][name]
        assert (c["model"], c["tensor_parallel"], c["headline"], c["workload"], c["pattern"]) == \
            ("llama3.1-8b", 1, True, workload, "steady")
    step = params["reduced.load_grid_step"].value
    cap = params["reduced.load_grid_max_points"].value
    ratios = {}
    for name in HEADLINE:
        case, sweep = setup["results"][name], setup["load_sweep"][name]
        scales = [p["rate_scale"] for p in sweep]
        att = [p["dynamic_slo_attainment"] for p in sweep]
        # the starting grid, continued in steps until RAPID's own attainment fell below 90 %
        # (or the cap): no point before the last would have stopped it
        start = params["reduced.rate_scales"].value
        assert scales[:len(start)] == start and case["rate_scales_run"] == scales
        assert all(b - a == pytest.approx(step) for a, b in zip(scales[len(start) - 1:], scales[len(start):]))
        assert next_rate_scale(scales, att, 0.9, step, cap) is None
        for n in range(len(start), len(scales)):
            assert next_rate_scale(scales[:n], att[:n], 0.9, step, cap) == scales[n]
        assert min(att) < 0.9 or len(scales) == cap
        # the peak load is where the RAPID system's attainment crosses 90 % on the sweep
        loads = [p["offered_rps"] for p in sweep]
        assert case["peak_load_rps"] == pytest.approx(max_sustained_load(loads, att, 0.9)[0])
        at = case["at_peak"]
        ratios[name] = at["dynamic"]["slo_attainment"] / at["static-4p4d"]["slo_attainment"]
    # seeded and deterministic: on this set-up RAPID holds the target at the top of some case's
    # starting grid, so the continuation runs
    assert any(len(setup["load_sweep"][n]) > len(params["reduced.rate_scales"].value) for n in HEADLINE)
    # the published figure is compared with the largest ratio over the headline cases
    assert figures["slo_attainment_ratio_at_peak"]["ours"] == pytest.approx(max(ratios.values()))
    (bar,) = data["sensitivity"]["slo_attainment_ratio_at_peak"]
    assert bar["parameter"] == "node.controller.role_switch_s" and (bar["low"], bar["high"]) == (2.0, 5.0)
    # power time-shifting (step 4, no published figure): the pair on half a diurnal day
    shift = data["setup"]["time_shift"]
    assert shift["systems"] == ["dynamic"] and shift["pattern"] == "diurnal"
    assert shift["duration_s"] == params["reduced.time_shift_duration_s"].value
    assert shift["case"] == "mixed" and "mixed" not in setup["cases"]     # defined, not swept
    plain, shifted = shift["runs"]["dynamic"], shift["runs"]["dynamic+shift"]
    for r in (plain, shifted):
        assert r["max_node_power_w"] <= r["budget_w"] and r["max_reserved_w"] <= r["budget_w"]
    assert not plain["time_shift_decisions"]
    assert shifted["time_shift_decisions"][0][1].startswith("time-shift: caps 700/700/700/700/500")
    # in the night's trough the prefill GPUs run at their curve's saturation instead of 600 W
    assert shifted["hourly"]["prefill_mean_cap_w"][1] == 700.0
    assert plain["hourly"]["prefill_mean_cap_w"][1] == 600.0
    assert shifted["energy_j"] < plain["energy_j"]
    assert {"time_shift_attainment", "time_shift_caps", "time_shift_power"} <= set(data["curves"])
    assert sum(n.startswith("Power time-shifting (no published figure)") for n in data["notes"]) == 1
    for name in ("rapid.md", "rapid.png", "rapid_tornado_slo_attainment_ratio_at_peak.png",
                 "rapid_attainment_longbench.png", "rapid_slo_split_synthetic-8k-128.png",
                 "rapid_time_shift_caps.png"):
        assert (tmp_path / name).stat().st_size > 0, name


def test_node_parameter_that_differs_from_the_node_file_is_rejected():
    from ndpdimm.sw.reproduce.rapid import _check_node_values, _node_path
    from ndpdimm.sw.scenarios.rapid.catalog import load_node
    params = load_params("rapid")
    path = _node_path(params["node_file"].value)
    doc = load_node(path)
    _check_node_values(params, doc, path)
    name = "node.controller.role_switch_s"
    moved = {**params, name: dataclasses.replace(params[name], value=4.0)}
    with pytest.raises(ReproductionError, match=f"'{name}' = 4.0 but .*mi300x-node.toml has 3.0"):
        _check_node_values(moved, doc, path)
    typo = {**params, "node.controller.role_switch": params[name]}
    with pytest.raises(ReproductionError, match="names no key"):
        _check_node_values(typo, doc, path)


def test_a_node_variant_is_the_node_file_with_one_value_and_its_source_changed(tmp_path):
    from ndpdimm.hw import config_file
    from ndpdimm.sw.reproduce.rapid import _node_path, _node_variant
    from ndpdimm.sw.scenarios.rapid.catalog import ServingNode, load_node
    path = _node_path("mi300x-node")
    variant = _node_variant(config_file.read(path), "node.controller.role_switch_s", 5,
                            tmp_path, "mi300x-node")
    node, base = load_node(variant), load_node(path)
    assert node.controller.role_switch_s == 5.0 and isinstance(node.controller.role_switch_s, float)
    assert node == dataclasses.replace(base, controller=dataclasses.replace(
        base.controller, role_switch_s=5.0))
    sources = {}
    config_file.load(variant, ServingNode, given={"name": "n"}, sources=sources)
    assert sources["controller.role_switch_s"].source.startswith(
        "sensitivity point of sw/configs/reproduce/rapid.toml (node.controller.role_switch_s); "
        "the node file's value 3.0: SPEC section 5")


def test_bad_ttft_slo_and_a_failing_point_are_named(tmp_path):
    from ndpdimm.sw.reproduce.rapid import Case, _point, _run, _ttft_slo
    case = Case("x", "llama3.1-8b", "mixed", "bursty", "p90", (1.0,), 10.0)
    with pytest.raises(ReproductionError, match="cases.x.ttft_slo must be .* got 'p90'"):
        _ttft_slo(case, "mi300x-node", 0)
    missing = str(tmp_path / "no-node.toml")
    with pytest.raises(ReproductionError, match="1 RAPID point.* failed.*no-node.toml"):
        _run([_point(case, 1.0, 0.2, 0.05, missing, "direct", 0)], None, lambda m: None, "t")


def test_a_ratio_above_the_published_one_is_explained_by_the_static_splits_cliff():
    """RAPID at the top of the load grid, the static split past its own limit: the explanation
    says where each system's limit falls instead of why the static split keeps up."""
    from ndpdimm.sw.reproduce.rapid import _explain

    class Case:
        name = "sustained-decode"

    at = {"dynamic": {"slo_attainment": 0.90, "ttft_attainment": 0.90, "tpot_attainment": 1.0},
          "static-4p4d": {"slo_attainment": 0.13, "ttft_attainment": 0.16, "tpot_attainment": 0.16}}
    r = {"at_peak": at, "peak_load_rps": 3.0, "peak_how": "above grid",
         "max_load_at_target": {"static-4p4d": {"max_load_rps": 2.12, "how": "interpolated"}}}
    text = _explain("slo_attainment_ratio_at_peak", Case, r, "dynamic", "static-4p4d", {})
    assert "3.0 rps on sustained-decode, the top of the load grid" in text
    assert "holds 90 % only up to 2.12 rps" in text and "attains 0.13" in text
    assert "still attains" not in text
    # below the published ratio the other explanation stands
    at["static-4p4d"]["slo_attainment"] = 0.80
    assert "still attains 0.80" in _explain("slo_attainment_ratio_at_peak", Case, r, "dynamic",
                                            "static-4p4d", {})
