"""TriMoE scenario: a small MoE through the whole run, determinism, traces, bad input, CLI."""

import dataclasses
import json

import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.cli import main
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.system import NdpSystem
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import CatalogError
from ndpdimm.sw.scenarios.trimoe.catalog import MoeShape, load_moe_model, load_trimoe_hardware
from ndpdimm.sw.scenarios.trimoe.costs import measure_domain_costs
from ndpdimm.sw.scenarios.trimoe.report import HEADLINE, figures, format_report, write_report
from ndpdimm.sw.scenarios.trimoe.scenario import SYSTEMS, TriMoeConfig, run
from ndpdimm.sw.scenarios.trimoe.workload import RoutingTraceConfig, synthetic_routing


def run_trimoe(cfg, costs=None, timeline=None, **rtl):
    """The scenario's run (its typed result), quiet; ``rtl``: the RTL-sampling request."""
    return run(cfg, RunContext(log=None, timeline=timeline, **rtl), costs=costs)

SMALL = dict(hidden=512, layers=4, dense_layers=0, dense_ffn=0, experts=32, top_k=4,
             shared_experts=1, expert_ffn=256, heads=8, kv_heads=8,
             attention_params_per_layer=4 * 512 * 512, vocab=1000, tied_embeddings=False)


def _toml(d: dict) -> str:
    """``d`` as a model file: strings and booleans bare, numbers with a source."""
    return "\n".join(f"{k} = " + (str(v).lower() if isinstance(v, bool) else json.dumps(v)
                                   if isinstance(v, str) else
                                   f'{{ value = {json.dumps(v)}, source = "test" }}')
                     for k, v in d.items()) + "\n"


@pytest.fixture(scope="module")
def small_model(tmp_path_factory):
    shape = MoeShape(name="small-moe", source="test", nominal_params_b=1.0, **SMALL)
    path = tmp_path_factory.mktemp("moe") / "small-moe.toml"
    path.write_text(_toml({"name": "small-moe", "source": "tests/sw/scenarios/trimoe/test_scenario.py",
                           "nominal_params_b": shape.params / 1e9, **SMALL}))
    return str(path)


@pytest.fixture(scope="module")
def small_costs(small_model):
    model, hw = load_moe_model(small_model), load_trimoe_hardware()
    with Dimm("model", CoreConfig(), functional=False) as dimm:
        return measure_domain_costs(model, hw, dimm)


def _cfg(small_model, **kw):
    base = dict(model=small_model, batch=128, steps=6, profile_steps=4, sample_layers=2,
                units=16, act_lanes=16, rebalance_every=2)
    return TriMoeConfig(**{**base, **kw})


@pytest.fixture(scope="module")
def small_run(small_model, small_costs):
    return run_trimoe(_cfg(small_model), costs=small_costs)


def test_every_system_reports_consistent_figures(small_run):
    r = small_run
    assert list(r.as_dict()["systems"]) == list(SYSTEMS)
    for name, s in r.as_dict()["systems"].items():
        assert s["moe_layer_latency_ms"] > 0
        assert s["moe_layer_latency_p99_ms"] >= s["moe_layer_latency_ms"] * 0.999
        assert s["throughput_tokens_per_s"] == pytest.approx(
            128 / (s["step_moe_time_ms"] / 1e3 + s["migration_stall_share"] /
                   (1 - s["migration_stall_share"]) * s["step_moe_time_ms"] / 1e3), rel=1e-6)
        for dom, u in s["utilisation"].items():
            assert u is None or 0 <= u <= 1 + 1e-9
        assert s["scheduler"]["greedy_makespan_ms"] >= 0
    only = r.as_dict()["systems"]["gpu_only"]
    assert only["executions"]["cpu"] == only["executions"]["ndp"] == 0
    assert r.as_dict()["systems"]["gpu_cpu"]["executions"]["ndp"] == 0
    assert r.as_dict()["systems"]["gpu_ndp"]["executions"]["cpu"] == 0
    routed_on_cpu = r.as_dict()["systems"]["cpu_routed"]["executions"]
    assert routed_on_cpu["cpu"] == sum(routed_on_cpu.values()) > 0
    # a domain the system does not have is never busy
    assert only["utilisation"]["cpu"] is None and only["utilisation"]["ndp"] is None
    # more devices help here: the GPU alone pays PCIe for every miss
    assert r.as_dict()["systems"]["trimoe"]["moe_layer_latency_ms"] < only["moe_layer_latency_ms"]


def test_execution_counts_match_the_trace(small_model, small_costs, small_run):
    from ndpdimm.sw.scenarios.trimoe.workload import make_traces
    _, run, _ = make_traces(_cfg(small_model), load_moe_model(small_model))
    active = int((run > 0).sum())
    for s in small_run.as_dict()["systems"].values():
        assert sum(s["executions"].values()) == active


def test_provenance_and_predictor(small_run):
    r = small_run
    assert r.as_dict()["provenance"]["ndp_expert"].startswith(
        "model backend (calibrated performance model), NdpCore 16 units")
    assert r.as_dict()["provenance"]["ndp_calibrated"] is True
    # the GPU's times name the measured fit they come from, carried to the PCIe card
    assert r.as_dict()["provenance"]["gpu"].startswith(
        "an expert's three GEMMs on the measured fit of the H100 PCIe 80GB: ")
    assert "(fit of H100 SXM5 80GB x 0.597 bandwidth" in r.as_dict()["provenance"]["gpu"]
    assert "GPU: an expert's three GEMMs on the measured fit" in format_report(r)
    p = r.as_dict()["systems"]["trimoe"]["predictor"]
    assert 0 <= p["load_accuracy"] <= 1 and p["state_bytes_full_model"] == 4 * 32 * 4
    assert "TriMoE (GPU + CPU + NDP)" in format_report(r)


def test_deterministic_for_a_seed(small_model, small_costs, small_run):
    again = run_trimoe(_cfg(small_model), costs=small_costs)
    for name in SYSTEMS:
        a, b = small_run.as_dict()["systems"][name], again.as_dict()["systems"][name]
        drop = ("scheduler",)
        assert {k: v for k, v in a.items() if k not in drop} == \
            {k: v for k, v in b.items() if k not in drop}
    other = run_trimoe(_cfg(small_model, seed=3), costs=small_costs)
    assert other.as_dict()["systems"]["trimoe"]["placement"] != small_run.as_dict()["systems"]["trimoe"]["placement"]


def test_recorded_trace_replays(tmp_path, small_model, small_costs):
    trace = synthetic_routing(RoutingTraceConfig(n_experts=32, top_k=4, layers=2, tokens=64,
                                                 steps=7, seed=5))
    path = tmp_path / "t.npz"
    trace.save(path)
    r = run_trimoe(_cfg(small_model, trace=str(path), systems=("gpu_ndp", "trimoe")),
                   costs=small_costs)
    assert r.as_dict()["trace"]["run_steps"] == 3 and r.as_dict()["trace"]["profile_steps"] == 4
    assert list(r.as_dict()["systems"]) == ["gpu_ndp", "trimoe"]
    assert r.as_dict()["systems"]["trimoe"]["executions"] and sum(
        r.as_dict()["systems"]["trimoe"]["executions"].values()) == int((trace.loads()[4:] > 0).sum())


def test_figures_name_the_run_and_carry_units_and_values(small_run, figure_rules):
    figure_rules(figures(small_run), ["small-moe", "128 tokens/step",
                                      "h100-amx (16 NDP-DIMMs of 16 units)",
                                      "model backend (calibrated)"])
    assert HEADLINE in format_report(small_run) and HEADLINE.startswith("MoE layers only")


def test_report_files(tmp_path, small_run):
    files = write_report(small_run, tmp_path)
    assert [f.name for f in files] == ["trimoe.json", "trimoe_latency.png", "trimoe_utilisation.png",
                                       "trimoe_placement.png"]
    assert json.loads(files[0].read_text())["systems"]["trimoe"]["moe_layer_latency_ms"] > 0
    assert all(f.stat().st_size > 1000 for f in files[1:])


@pytest.mark.parametrize("kw, match", [
    ({"batch": 0}, "batch"), ({"steps": True}, "steps"), ({"alpha": 0.0}, "alpha"),
    ({"theta_hot": 2}, "theta_hot"), ({"rebalance_every": 0}, "rebalance_every"),
    ({"backend": "fpga"}, "backend"), ({"systems": ("gpu_only", "tpu")}, "systems"),
    ({"systems": ()}, "systems"), ({"rebalance_moves": -1}, "rebalance_moves"),
    ({"refinement": ["trimoe"]}, "refinement"), ({"refinement": ("gpu_tpu",)}, "refinement"),
    ({"dynamic_layout": 1}, "dynamic_layout"),
])
def test_bad_config(kw, match):
    with pytest.raises(ValueError, match=match):
        TriMoeConfig(**kw)


def test_bad_model_trace_and_hardware(tmp_path, small_model, small_costs):
    with pytest.raises(CatalogError, match="unknown MoE model"):
        run_trimoe(TriMoeConfig(model="gpt-5"))
    with pytest.raises(CatalogError):
        run_trimoe(TriMoeConfig(hardware=str(tmp_path / "missing.toml")))
    wrong = synthetic_routing(RoutingTraceConfig(n_experts=16, top_k=4, layers=2, tokens=8, steps=6))
    wrong.save(tmp_path / "w.npz")
    with pytest.raises(ValueError, match="16 experts"):
        run_trimoe(_cfg(small_model, trace=str(tmp_path / "w.npz")), costs=small_costs)
    short = synthetic_routing(RoutingTraceConfig(n_experts=32, top_k=4, layers=2, tokens=8, steps=3))
    short.save(tmp_path / "s.npz")
    with pytest.raises(ValueError, match="need more than"):
        run_trimoe(_cfg(small_model, trace=str(tmp_path / "s.npz")), costs=small_costs)
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.npz"):
        run_trimoe(_cfg(small_model, trace=str(tmp_path / "bad.npz")), costs=small_costs)


def test_cli(tmp_path, small_model, capsys):
    out = tmp_path / "out"
    rc = main(["trimoe", "--model", small_model, "--steps", "2", "--profile-steps", "2",
               "--sample-layers", "1", "--batch", "64", "--units", "16", "--act-lanes", "16",
               "--systems", "gpu_cpu,trimoe", "--out-dir", str(out),
               "--timeline", str(tmp_path / "timeline.json")])
    assert rc == 0
    text = capsys.readouterr().out
    assert "GPU + AMX CPU" in text and "TriMoE (GPU + CPU + NDP)" in text
    assert (out / "trimoe.json").exists() and (out / "trimoe_placement.png").exists()
    from ndpdimm.cosim.timeline import read_timeline
    f = read_timeline(tmp_path / "timeline.json")
    assert {p for p, _ in f.tracks} == {"TriMoE gpu_cpu", "TriMoE trimoe"}
    assert f.metadata["systems"] == ["gpu_cpu", "trimoe"] and f"wrote {tmp_path / 'timeline.json'}" in text
    assert main(["trimoe", "--systems", "gpu_only,tpu", "--out-dir", str(out)]) == 2
    assert main(["trimoe", "--model", "nope", "--out-dir", str(out)]) == 2
    assert "unknown MoE model 'nope'" in capsys.readouterr().err


def test_relayout_keeps_an_expert_intact():
    """An expert's bytes striped over 4 DIMMs -> localized on DIMM 2 -> striped again, with the
    RELAYOUT descriptors the scenario's relayout costs are measured with."""
    block, n_blocks, d = 4096, 10, 4
    data = torch.randint(0, 256, (n_blocks * block,), dtype=torch.uint8,
                         generator=torch.Generator().manual_seed(1))
    system = NdpSystem(d, "model", CoreConfig(link=True))
    try:
        per = -(-n_blocks // d)
        striped = [x.alloc(per * block) for x in system]
        localized = [x.alloc(n_blocks * block) for x in system]
        back = [x.alloc(per * block) for x in system]
        staging = [x.alloc_sram(2 * block) for x in system]
        for k in range(n_blocks):
            system[k % d].write(striped[k % d], data[k * block:(k + 1) * block], (k // d) * block)
        for to_loc, src, dst in ((True, striped, localized), (False, localized, back)):
            descs = [x.relayout_descriptor(to_loc, d, 2, block, n_blocks, src[i].addr, dst[i].addr,
                                           staging[i].addr) for i, x in enumerate(system)]
            for x, desc in zip(system, descs):
                x.submit([desc])
            for x, desc in zip(system, descs):
                assert x.wait([desc.id])[0].ok
            if to_loc:
                assert torch.equal(system[2].read(localized[2], torch.uint8), data)
        for k in range(n_blocks):
            got = system[k % d].read(back[k % d], torch.uint8, block, (k // d) * block)
            assert torch.equal(got, data[k * block:(k + 1) * block])
    finally:
        system.close()


def test_domain_costs_shape(small_costs):
    c = small_costs
    # GPU miss is never faster than a hit; a localized expert reads slower than a striped one
    for t in (1, 16, 100):
        assert c.gpu(t, False) >= c.gpu(t, True)
        assert c.cpu(t, striped=False) >= c.cpu(t, striped=True)
        assert c.ndp(t, 12.8) >= c.ndp(t) > 0
    assert c.ndp(33) > c.ndp(16) > 0              # three passes of max_batch vs one
    assert c.link.move(15) > c.link.move(1) > 0
    with pytest.raises(ValueError, match="hops"):
        c.link.move(0)
    assert dataclasses.asdict(c.link)["dimms"] == 16


def test_link_errors_cost_time_and_show_in_the_counters(small_costs):
    from ndpdimm.sw.scenarios.trimoe.costs import measure_link_costs
    clean = small_costs.link
    assert clean.ber == 0 and clean.counters["frames_sent"] > 0 and clean.counters["crc_errors"] == 0
    assert clean.replay_share == 0
    bad = measure_link_costs(small_costs.expert_bytes, 16, CoreConfig(), ber=1e-4)
    assert bad.counters["crc_errors"] > 0 and bad.counters["replays"] > 0
    assert bad.replay_share > 0.1
    assert bad.move(15) > clean.move(15) and bad.to_striped > clean.to_striped


def test_bad_link_ber(tmp_path):
    for v in (-1e-6, 0.5, True):
        with pytest.raises(ValueError, match="link_ber"):
            TriMoeConfig(link_ber=v)
    assert main(["trimoe", "--link-ber", "2", "--out-dir", str(tmp_path)]) == 2


def test_timeline_lays_every_system_schedule(small_model, small_costs, tmp_path):
    """--timeline: one process per system; every device track holds its tasks one after
    another, the layer slices are the reported latencies, the steps add the migration stalls."""
    from ndpdimm.cosim.timeline import Timeline, read_timeline
    from ndpdimm.sw.scenarios.base import Tally
    _dimm_track = Tally.dimm_track
    tl = Timeline()
    r = run_trimoe(_cfg(small_model), costs=small_costs, timeline=tl)
    f = read_timeline(tl.write(tmp_path / "trimoe.json"))
    assert f.metadata["sample_layers"] == 2 and f.metadata["moe_layers"] == SMALL["layers"]
    dimms = load_trimoe_hardware().ndp.dimms
    for system, res in r.as_dict()["systems"].items():
        p = f"TriMoE {system}"
        names = set(f.track_names(p))
        assert {"step", "MoE layer", "GPU"} <= names
        assert ("CPU (AMX)" in names) == (system in ("gpu_cpu", "cpu_routed", "trimoe"))
        assert ({_dimm_track(j) for j in range(dimms)} <= names) == (system in ("gpu_ndp", "trimoe"))
        for track in names - {"DIMM-Link"}:
            assert not f.overlaps(p, track), (system, track, f.overlaps(p, track)[:1])
        layers = f.tracks[(p, "MoE layer")]
        assert len(layers) == 6 * 2
        assert sum(s[1] for s in layers) / len(layers) / 1e3 == pytest.approx(res["moe_layer_latency_ms"])
        # every device's tasks end within their layer
        for s0, d0, _, a in layers:
            for track in names - {"step", "MoE layer", "DIMM-Link", "PCIe prefetch"}:
                inside = [s for s in f.tracks[(p, track)] if s0 - 1e-6 <= s[0] < s0 + d0 - 1e-6]
                assert all(s[0] + s[1] <= s0 + d0 + 1e-6 for s in inside), (system, track)
        steps = f.tracks[(p, "step")]
        extra = sum(v for k, v in res["migration_seconds"].items() if k != "relayout_in_task")
        assert sum(s[1] for s in steps) == pytest.approx(sum(s[1] for s in layers) + extra * 1e6)
        execs = sum(1 for t in names if t.startswith(("GPU", "CPU", "DIMM "))
                    for s in f.tracks[(p, t)] if s[3]["expert"] >= 0)
        assert execs == sum(res["executions"].values())


def test_timeline_step_end_splits_the_prefetch_at_the_idle_pcie_time():
    """The copies that fit the PCIe's idle time lie inside the step, the rest (the stall) after
    the step's layers and its link work: the prefetch track never overlaps, and the step is its
    layers plus everything charged beyond them."""
    from ndpdimm.cosim.timeline import Timeline
    from ndpdimm.sw.scenarios.trimoe.simulate import PREFETCH, STEP, _lay_step_end
    from ndpdimm.sw.scenarios.trimoe.simulate import SystemTally as _Tally
    tl = Timeline()
    tally = _Tally(tl, "TriMoE test")
    before = dict(tally.migration)
    tally.clock = 10.0                                   # the step's layers: 0 .. 10 s
    tally.migration.update(prefetch_stall=6.0, rebalance=1.0, relayout_back=0.5)
    _lay_step_end(tally, 0, 0.0, before, prefetch_s=8.0)  # 8 s of idle PCIe, 14 s of copies
    track = tl.track("TriMoE test", PREFETCH).slices
    assert [(s[2], s[0] / 1e6, s[1] / 1e6) for s in track] == [
        ("prefetch copies (PCIe idle time)", 0.0, 8.0), ("prefetch stall", 11.5, 6.0)]
    assert tally.clock == 17.5 and tl.track("TriMoE test", STEP).slices[0][1] / 1e6 == 17.5
    tl.events()                                          # no overlap on an exclusive track


def test_the_ndp_expert_executions_are_logged_for_rtl_samples(small_run, small_model):
    """Every NDP execution of the trimoe system is in the kernel log (``--rtl-samples``), each
    charged the uncontended cycles of its cost; a sample without the trimoe system is refused."""
    log = small_run.as_dict()["ndp_kernels"]
    assert log["system"] == "trimoe" and set(log["kinds"]) == {"expert"}
    assert log["kinds"]["expert"]["invocations"] == small_run.as_dict()["systems"]["trimoe"]["executions"]["ndp"]
    with pytest.raises(ValueError, match="needs the trimoe system"):
        run_trimoe(_cfg(small_model, systems=("gpu_only",)), rtl_samples=2)


def test_refinement_and_dynamic_layout_switches(small_model, small_costs, small_run):
    """Without refinement no scheduler moves are made (the greedy placement stays); with the
    layouts fixed TriMoE makes no relayout or rebalancing move (the reproduction's full run
    shows them made with the default); the defaults change nothing."""
    from ndpdimm.sw.scenarios.trimoe.simulate import simulate
    from ndpdimm.sw.scenarios.trimoe.workload import make_traces
    model, hw = load_moe_model(small_model), load_trimoe_hardware()
    cfg = _cfg(small_model, refinement=(), dynamic_layout=False)
    profile, run, _ = make_traces(cfg, model)
    for system in SYSTEMS:
        out = simulate(system, cfg, model, hw, small_costs, profile, run).as_dict()
        assert out["scheduler"]["iterations_max"] == 0
        counts = out["migration_counts"]
        assert counts["relayouts_in_task"] == counts["relayouts_back"] == counts["rebalance_moves"] == 0
    refined = small_run.as_dict()["systems"]["trimoe"]
    assert refined["scheduler"]["iterations_max"] > 0            # the default refines
    again = simulate("trimoe", _cfg(small_model), model, hw, small_costs, profile, run).as_dict()
    assert again["moe_layer_latency_ms"] == refined["moe_layer_latency_ms"]


def test_costs_on_other_hardware_keep_the_measured_ndp(small_costs):
    hw = small_costs.hw
    faster = dataclasses.replace(hw, pcie=dataclasses.replace(hw.pcie, gt_per_s=2 * hw.pcie.gt_per_s))
    other = small_costs.with_hardware(faster)
    assert other.ndp(4, 0.5) == small_costs.ndp(4, 0.5)
    assert other.relayout(True) == small_costs.relayout(True)
    assert other.pcie_transfer() < small_costs.pcie_transfer()
    fewer = dataclasses.replace(hw, ndp=dataclasses.replace(hw.ndp, dimms=8))
    with pytest.raises(ValueError, match="NDP-DIMMs must stay"):
        small_costs.with_hardware(fewer)


def test_a_layer_whose_reads_cannot_be_withdrawn_keeps_the_first_schedule():
    """DeepSeek-V2 with one sampled layer: the DIMMs' share of room for it holds 11 experts, so
    withdrawing the host reads (striped experts then only gathered into DIMMs) cannot fit; the
    layer keeps the schedule with every option instead of failing."""
    from ndpdimm.sw.scenarios.trimoe.simulate import simulate
    from ndpdimm.sw.scenarios.trimoe.workload import make_traces
    model, hw = load_moe_model("deepseek-v2"), load_trimoe_hardware()
    with Dimm("model", CoreConfig(), functional=False) as dimm:
        costs = measure_domain_costs(model, hw, dimm)
    cfg = TriMoeConfig(batch=64, steps=2, profile_steps=4, sample_layers=1, units=16,
                       act_lanes=16, hot_mass=0.3, systems=("trimoe",))
    profile, run, _ = make_traces(cfg, model)
    out = simulate("trimoe", cfg, model, hw, costs, profile, run).as_dict()
    assert out["moe_layer_latency_ms"] > 0


# ---- the baseline systems' defining behaviour (the reproduction's Klotski-, KTransformers- and
# MoNDE-like baselines, sw/reproduce/trimoe.py) on a GPU that holds only 7 experts per layer ----

@pytest.fixture(scope="module")
def tight_gpu(small_model, small_costs):
    """The small MoE on a GPU with room for 7 routed experts per layer (of 32), so that some
    experts miss it: (model, hardware, costs, config, profile loads, run loads)."""
    from ndpdimm.sw.scenarios.trimoe.workload import make_traces
    model, hw = load_moe_model(small_model), load_trimoe_hardware()
    hw = dataclasses.replace(hw, gpu=dataclasses.replace(hw.gpu, reserved_gb=79.97))
    cfg = _cfg(small_model, seed=0)
    profile, loads, _ = make_traces(cfg, model)
    return model, hw, small_costs.with_hardware(hw), cfg, profile, loads


def _simulate(system, tight_gpu, hw=None):
    from ndpdimm.sw.scenarios.trimoe.simulate import simulate
    model, base, costs, cfg, profile, loads = tight_gpu
    hw = base if hw is None else hw
    return simulate(system, cfg, model, hw, costs if hw is base else costs.with_hardware(hw),
                    profile, loads)


def _half_pcie(hw):
    return dataclasses.replace(hw, pcie=dataclasses.replace(
        hw.pcie, protocol_efficiency=hw.pcie.protocol_efficiency / 2))


def test_gpu_only_streams_the_missed_experts_over_pcie(tight_gpu):
    """Klotski-like: every routed expert runs on the GPU, the non-resident ones copied over PCIe
    (pipelined with their compute), so halving the PCIe bandwidth slows the layer down."""
    out = _simulate("gpu_only", tight_gpu)
    assert out.gpu_slots_per_layer == 7
    assert out.executions["cpu"] == out.executions["ndp"] == 0
    assert out.executions["gpu_miss"] > 0 and out.executions["gpu_hit"] > 0
    slower = _simulate("gpu_only", tight_gpu, _half_pcie(tight_gpu[1]))
    assert slower.moe_layer_latency_ms > 1.5 * out.moe_layer_latency_ms


def test_cpu_routed_computes_every_routed_expert_on_the_cpu_never_the_gpu_or_ndp(tight_gpu):
    """KTransformers-like: the AMX CPU computes every routed expert, the GPU only the shared
    expert (it is busy, and keeps no routed expert), nothing crosses PCIe and no DIMM computes."""
    from ndpdimm.sw.scenarios.trimoe.config import DOMAINS, ROUTED_DOMAINS
    assert DOMAINS["cpu_routed"] == ("gpu", "cpu") and ROUTED_DOMAINS["cpu_routed"] == ("cpu",)
    out = _simulate("cpu_routed", tight_gpu)
    active = int((tight_gpu[5] > 0).sum())
    assert out.executions == {"gpu_hit": 0, "gpu_miss": 0, "cpu": active, "ndp": 0}
    assert out.gpu_slots_per_layer == 0 and out.migration_counts["prefetches"] == 0
    assert 0 < out.utilisation["gpu"] < out.utilisation["cpu"] and out.utilisation["ndp"] is None
    slower_pcie = _simulate("cpu_routed", tight_gpu, _half_pcie(tight_gpu[1]))
    assert slower_pcie.moe_layer_latency_ms == out.moe_layer_latency_ms


def test_gpu_ndp_sends_hot_experts_to_the_gpu_and_cold_ones_to_the_dimms_never_the_cpu(tight_gpu):
    """MoNDE-like: the experts the GPU computes (resident or copied over PCIe) carry many tokens,
    those the NDP-DIMMs compute near memory few; the CPU never computes."""
    import numpy as np
    out = _simulate("gpu_ndp", tight_gpu)
    loads = tight_gpu[5]
    assert out.executions["cpu"] == 0 and out.utilisation["cpu"] is None
    assert out.executions["ndp"] > 0 and out.executions["gpu_miss"] > 0
    gpu, ndp = [], []                   # tokens of the first sampled layer's experts, per step
    for step, codes in enumerate(out.placement):
        for expert, code in enumerate(codes):
            (gpu if code in (1, 2) else ndp if code == 4 else []).append(loads[step, 0, expert])
    assert gpu and ndp and np.mean(gpu) > 5 * np.mean(ndp)
