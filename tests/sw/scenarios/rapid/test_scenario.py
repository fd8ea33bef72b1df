"""RAPID scenario: the node catalogue, the power ledger, the serving simulator and the controller.

The invariants the issue names are checked on runs that exercise them (the tests assert the
lever was actually pulled, so they cannot pass vacuously): the node power cap at every instant
including transitions, controller cooldowns, at least one GPU per phase, every request served
once across role switches, determinism, and clear errors for bad configurations.
"""

import dataclasses
import math

import numpy as np
import pytest

from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, CatalogError
from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.controller import Controller
from ndpdimm.sw.scenarios.rapid.costs import NdpAttention, ServingPerf
from ndpdimm.sw.scenarios.rapid.power import PowerBudgetError, PowerLedger
from ndpdimm.sw.scenarios.rapid.scenario import RapidConfig, run, systems_for
from ndpdimm.sw.scenarios.rapid.scenario import layout as _layout
from ndpdimm.sw.scenarios.rapid.simulate import ServingSim
from ndpdimm.sw.scenarios.rapid.workload import Trace, generate_trace, load_workload


def run_rapid(cfg, log=None, timeline=None, timeline_system=None, **rtl):
    """The scenario's run as the JSON it writes (``rtl``: the RTL-sampling request)."""
    ctx = RunContext(log=log, timeline=timeline, **rtl)
    return run(cfg, ctx, timeline_system=timeline_system).as_dict()

NODE = load_node()
MODEL = load_serving_model()
PERF = ServingPerf(MODEL, NODE)
ROLES = ["prefill"] * 4 + ["decode"] * 4
NODE_FILE = CONFIG_DIR / "rapid" / "mi300x-node.toml"


def _trace(seconds=120.0, rate_scale=1.0, pattern="bursty", seed=0, workload="mixed"):
    return generate_trace(load_workload(workload), seconds, pattern=pattern, seed=seed,
                          rate_scale=rate_scale)


def _run(trace, roles=ROLES, caps=(600.0,) * 8, mode=None, perf=PERF, slo=(0.2, 0.05), **kw):
    ctrl = Controller(NODE.controller, mode, *slo) if mode else None
    return ServingSim(perf, trace, list(roles), list(caps), controller=ctrl, slo_ttft_s=slo[0],
                      slo_tpot_s=slo[1], **kw).run()


def _node_toml(tmp_path, **changes):
    """The built-in node file with ``section.key = value`` lines replaced."""
    text = NODE_FILE.read_text()
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        lines, inside, done = text.splitlines(), False, False
        for i, line in enumerate(lines):
            if line.startswith("["):
                inside = line.strip() == f"[{section}]"
            elif inside and line.split("=")[0].strip() == key:
                lines[i] = f'{key} = {{ value = {value}, source = "test" }}'
                done = True
        assert done, dotted
        text = "\n".join(lines) + "\n"
    path = tmp_path / "node.toml"
    path.write_text(text)
    return path


# ---- catalogue and performance model ---------------------------------------------------------

def test_model_and_node_load_with_their_documented_numbers():
    assert MODEL.params / 1e9 == pytest.approx(8.03, rel=0.01)
    assert (MODEL.layers, MODEL.kv_heads, MODEL.head_dim) == (32, 8, 128)
    assert NODE.node.gpus == 8 and NODE.node.power_budget_w == 4800
    assert PERF.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2


def test_phase_curves_span_the_spec_ranges():
    pre, dec = NODE.prefill_power, NODE.decode_power
    assert pre.speed(750) / pre.speed(300) == pytest.approx(1.8, rel=0.01)
    assert dec.speed(600) / dec.speed(300) == pytest.approx(1.3, rel=0.01)
    caps = np.arange(300, 751, 50)
    for ph in (pre, dec):
        s = [ph.speed(c) for c in caps]
        assert all(a <= b for a, b in zip(s, s[1:])) and s[-1] == 1.0
    # decode saturates earlier than prefill: giving decode's watts to prefill pays
    assert dec.speed(450) > pre.speed(450)


def test_prefill_and_decode_times_follow_the_documented_formulas():
    L = 4096
    t600, t300 = PERF.prefill_seconds(L, 1, L * L, 600), PERF.prefill_seconds(L, 1, L * L, 300)
    fixed, scalable = PERF.prefill_parts(L, 1, L * L)
    assert t600 == pytest.approx(fixed + scalable / NODE.prefill_power.speed(600))
    assert t300 > t600
    flops = 2 * (MODEL.params - 2 * MODEL.vocab * MODEL.hidden) * L + 2 * MODEL.vocab * \
        MODEL.hidden + 2 * MODEL.layers * MODEL.hidden * L * L
    assert scalable == pytest.approx(flops / (NODE.gpu.peak_tflops * 1e12 * NODE.gpu.prefill_mfu))
    # decode is memory-bound: weights once plus every cached token's KV
    d = PERF.decode_seconds(64, 64 * 2048, 600)
    mem = (PERF.matmul_params * 2 + PERF.kv_bytes_per_token * 64 * 2048) / (
        NODE.gpu.hbm_tb_s * 1e12 * NODE.gpu.decode_bw_efficiency)
    assert d == pytest.approx(NODE.gpu.decode_overhead_s + mem / NODE.decode_power.speed(600))
    assert PERF.decode_seconds(64, 64 * 4096, 600) > d


def test_ndp_tier_time_power_and_capacity():
    att = NdpAttention(fixed_cycles=1000.0, slope_cycles=10.0, backend="model", units=256,
                       samples=())
    perf = ServingPerf(MODEL, NODE, att, 2.2, 0.05, 0.3, 6.5, 0.7)
    sec = perf.ndp_attention_seconds(8, 8 * 1000, decode_gpus=4)
    cycles = 32 * 8 * (8 * 1000 + 10 * 8000)
    io = 32 * (NODE.ndp.per_layer_overhead_s + 8 * 2 * 4096 * 2 / (NODE.ndp.gpu_link_gb_s * 1e9))
    assert sec == pytest.approx(cycles / (NODE.ndp.dimms / 4 * 1e9) + io)
    # the GPU no longer reads the KV cache
    fixed, scalable = perf.decode_parts(8, 8000, 4)
    assert fixed == pytest.approx(NODE.gpu.decode_overhead_s + sec)
    assert scalable == pytest.approx(PERF.decode_parts(8, 0, 1)[1])
    # peak reservation covers every DIMM streaming at peak with the core busy
    assert perf.ndp_reserved_w > NODE.ndp.dimms * (2.2 + 0.3)
    assert perf.kv_capacity_bytes(2) == pytest.approx(16 * 32 * 2 ** 30)


@pytest.mark.parametrize("edit, message", [
    ({"node.power_budget_w": 2000.0}, "exceed power_budget_w"),
    ({"prefill_power.p_sat_w": 250.0}, "p_sat_w"),
    ({"controller.donate_below": 1.5}, "hysteresis"),
    ({"gpu.prefill_mfu": 1.5}, "prefill_mfu"),
    ({"ring.slots": 0}, "slots"),
    ({"node.gpus": 1}, "min_gpus_per_phase"),
    ({"time_shift.low_utilisation": 1.5}, r"\[time_shift\]: low_utilisation must be in \(0, 1\), got 1.5"),
    ({"time_shift.low_utilisation": 0.0}, "time_shift.low_utilisation must be positive"),
    ({"time_shift.low_pressure": 0.9}, r"low_pressure must be in \(0, controller.donate_below = 0.8\]"),
])
def test_bad_node_files_are_rejected_naming_the_key(tmp_path, edit, message):
    with pytest.raises(CatalogError, match=message):
        load_node(_node_toml(tmp_path, **edit))


def test_node_file_with_an_unknown_key_is_rejected(tmp_path):
    path = tmp_path / "n.toml"
    path.write_text(NODE_FILE.read_text().replace("[ring]\n", "[ring]\nspeed = 3\n"))
    with pytest.raises(CatalogError, match="unknown key ring.speed"):
        load_node(path)


# ---- power ledger ---------------------------------------------------------------------------

def _ledger(caps=(600.0, 600.0), budget=1200.0, other=0.0):
    return PowerLedger(caps, budget, 300.0, 750.0, 0.12, 0.08, other)


def test_ledger_lowers_before_freeing_and_reserves_before_raising():
    led = _ledger()
    with pytest.raises(PowerBudgetError, match="budget has 0.0 W free"):
        led.command(0.0, 1, 650.0)
    assert led.reserved == [600.0, 600.0] and not led.in_transition()
    t = led.command(0.0, 0, 550.0)
    assert t == pytest.approx(0.2) and led.reserved[0] == 600.0 and led.cap[0] == 600.0
    with pytest.raises(PowerBudgetError, match="already under way"):
        led.command(0.1, 0, 500.0)
    with pytest.raises(PowerBudgetError):       # not freed yet
        led.command(0.1, 1, 650.0)
    led.settle(t, 0)
    assert led.cap[0] == led.reserved[0] == 550.0 and led.headroom_w == 50.0
    t2 = led.command(t, 1, 650.0)
    assert led.reserved[1] == 650.0 and led.cap[1] == 600.0
    led.settle(t2, 1)
    assert led.cap == [550.0, 650.0] and led.max_reserved_w <= 1200.0


def test_ledger_rejects_caps_over_budget_and_outside_range():
    with pytest.raises(PowerBudgetError, match="over the node budget of 1200"):
        _ledger((650.0, 600.0))
    with pytest.raises(PowerBudgetError, match="reserved for the NDP-DIMM tier"):
        _ledger((600.0, 600.0), other=10.0)
    with pytest.raises(PowerBudgetError, match="outside"):
        _ledger((200.0, 600.0))
    led = _ledger()
    with pytest.raises(PowerBudgetError, match="outside"):
        led.command(0.0, 0, 800.0)


# ---- simulator ------------------------------------------------------------------------------

def test_static_run_serves_every_request_once_with_sane_latencies():
    trace = _trace(60.0)
    sim = _run(trace)
    arrival, ttft, tpot, moves = sim.latencies()
    assert sim.finished == len(trace) > 500
    assert np.all(ttft > 0) and np.all(tpot >= 0) and moves.sum() == 0
    # TTFT can never beat the request's own prefill at 600 W
    own = np.array([PERF.prefill_seconds(n, 1, n * n, 600.0) for n in trace.input_tokens])
    assert np.all(ttft >= own - 1e-9)
    # decode iterations are at least the weights' read time
    assert np.all(tpot[trace.output_tokens > 1] >= PERF.decode_seconds(1, 1, 600.0) * 0.99)
    assert sim.max_draw_w <= 4800.0
    assert not sim.actions


def test_dynamic_run_keeps_the_node_cap_at_every_instant_and_respects_cooldowns(replay_budget):
    trace = _trace(240.0, rate_scale=1.2)
    sim = _run(trace, mode="dynamic")
    power = [a for a in sim.actions if a[1] == "power"]
    roles = [a for a in sim.actions if a[1] == "role"]
    assert len(power) >= 3, "the controller never moved power: the test checks nothing"
    worst, cap_over = replay_budget(sim)
    assert worst <= 4800.0 + 1e-9 and not cap_over
    assert sim.ledger.max_reserved_w <= 4800.0 + 1e-9 and sim.max_draw_w <= 4800.0 + 1e-9
    c = NODE.controller
    gap = 2 * sim.ledger.delay_s + c.power_cooldown_s
    for a, b in zip(power, power[1:]):
        assert b[0] - a[0] >= gap - 1e-9 or any(a[0] < r[0] <= b[0] for r in roles)
    for a, b in zip(roles, roles[1:]):
        assert b[0] - a[0] >= c.role_switch_s + c.role_cooldown_s - 1e-9
    for r in roles:
        later = [p[0] for p in power if p[0] > r[0]]
        assert not later or later[0] - r[0] >= c.role_switch_s + c.power_cooldown_s - 1e-9
    caps = np.array([s[2] for s in sim.samples])
    assert caps.min() >= NODE.node.gpu_min_cap_w and caps.max() <= NODE.node.gpu_max_cap_w


def test_role_switches_keep_a_gpu_per_phase_and_lose_no_request():
    # a long burst of prompts pulls decode GPUs into prefill, then decode has to get them back
    trace = _trace(300.0, rate_scale=1.6)
    sim = _run(trace, mode="dynamic")
    roles = [a for a in sim.actions if a[1] == "role"]
    assert roles and any(a[2]["from"] == "decode" for a in roles)
    for s in sim.samples:
        assert s[1].count("prefill") >= 1 and s[1].count("decode") >= 1
    arrival, ttft, tpot, moves = sim.latencies()
    assert sim.finished == len(trace) and moves.sum() > 0      # requests were handed over
    assert np.all(np.isfinite(ttft)) and np.all(np.isfinite(tpot))


def test_switch_role_refuses_to_empty_a_phase():
    sim = ServingSim(PERF, _trace(5.0), ["prefill"] + ["decode"] * 7, [600.0] * 8)
    with pytest.raises(ValueError, match="fewer than 1 GPU"):
        sim.switch_role(0, "decode")
    with pytest.raises(ValueError, match="cannot switch"):
        sim.switch_role(1, "decode")


def test_full_ring_back_pressures_prefill_without_losing_requests(tmp_path):
    node = load_node(_node_toml(tmp_path, **{"ring.slots": 1, "kv_host.bandwidth_gb_s": 2.0}))
    perf = ServingPerf(MODEL, node)
    trace = _trace(30.0)
    sim = ServingSim(perf, trace, ROLES, [600.0] * 8, kv_path="host").run()
    assert sim.finished == len(trace)
    backlog = [s[5] for s in sim.samples]
    assert max(backlog) > 1                   # prefilled requests waited for the one slot
    slow = sim.latencies()[2].mean()
    fast = _run(trace).latencies()[2].mean()
    assert slow > fast


def test_coalesced_baseline_serves_both_phases_on_every_gpu():
    trace = _trace(60.0)
    sim = _run(trace, roles=["coalesced"] * 8)
    assert sim.finished == len(trace)
    assert sim.latencies()[3].sum() == 0
    assert {r.prefill_gpu for r in sim.requests} == set(range(8))
    assert all(r.decode_gpus in ([], [r.prefill_gpu]) for r in sim.requests)


def test_a_cap_change_mid_batch_re_times_the_rest():
    one = Trace("one", np.array([0.0]), np.array([8192]), np.array([2]))
    base = ServingSim(PERF, one, ROLES, [600.0] * 8).run()
    slow = ServingSim(PERF, one, ROLES, [600.0] * 8)
    slow.at(0.01, slow.move_power, 0, 4, 300.0)      # GPU 0 to 300 W while it prefills
    slow.run()
    t_base, t_slow = base.requests[0].first_token, slow.requests[0].first_token
    full = PERF.prefill_seconds(8192, 1, 8192.0 ** 2, 600.0)
    low = PERF.prefill_seconds(8192, 1, 8192.0 ** 2, 300.0)
    settle = 0.01 + 0.2
    assert t_base == pytest.approx(full)
    assert t_slow == pytest.approx(settle + (1 - settle / full) * low, rel=1e-6)


def test_same_seed_same_results_and_a_different_seed_differs():
    a = _run(_trace(90.0, seed=3), mode="dynamic")
    b = _run(_trace(90.0, seed=3), mode="dynamic")
    c = _run(_trace(90.0, seed=4), mode="dynamic")
    la, lb, lc = a.latencies(), b.latencies(), c.latencies()
    assert all(np.array_equal(x, y) for x, y in zip(la, lb))
    assert a.actions == b.actions and a.samples == b.samples
    assert len(lc[0]) != len(la[0]) or not np.array_equal(lc[1], la[1])


@pytest.mark.parametrize("roles, caps, message", [
    (ROLES, [650.0] * 8, "over the node budget"),
    (ROLES[:7], [600.0] * 7, "a role and a cap for each"),
    (["prefill"] * 8, [600.0] * 8, "at least 1 GPU"),
    (["coalesced"] * 4 + ["decode"] * 4, [600.0] * 8, "every GPU coalesced"),
    (["idle"] + ROLES[1:], [600.0] * 8, "role must be one of"),
])
def test_bad_layouts_are_rejected_before_anything_runs(roles, caps, message):
    with pytest.raises(ValueError, match=message):
        ServingSim(PERF, _trace(5.0), roles, caps)


def test_a_request_too_long_for_the_model_or_a_worker_is_rejected(tmp_path):
    huge = Trace("huge", np.array([0.0]), np.array([100000]), np.array([40000]))
    with pytest.raises(ValueError, match="exceeds the model's 131072 positions"):
        ServingSim(PERF, huge, ROLES, [600.0] * 8)
    small = ServingPerf(MODEL, load_node(_node_toml(tmp_path, **{"gpu.hbm_gb": 20.0})))
    big = Trace("big", np.array([0.0]), np.array([30000]), np.array([100]))
    with pytest.raises(ValueError, match="cannot fit one worker's KV"):
        ServingSim(small, big, ROLES, [600.0] * 8)


# ---- scenario -------------------------------------------------------------------------------

def test_layouts_hold_the_budget_including_the_ndp_reserve():
    for system in systems_for("all", True):
        reserve = 250.0 if system.endswith("+ndp") else 0.0
        roles, caps, mode = _layout(system, NODE, reserve)
        assert sum(caps) + reserve <= NODE.node.power_budget_w
        assert (mode is not None) == system.removesuffix("+ndp").startswith("dynamic")
    assert _layout("static-4p750-4d450", NODE, 0.0)[1] == [750.0] * 4 + [450.0] * 4
    # the reserve comes from decode first, then prefill once decode is at its minimum
    assert _layout("dynamic+ndp", NODE, 250.0)[1] == [600.0] * 4 + [530.0] * 4
    assert _layout("dynamic+ndp", NODE, 1500.0)[1] == [520.0] * 4 + [300.0] * 4
    with pytest.raises(ValueError, match="does not fit the 4800 W budget"):
        _layout("dynamic+ndp", NODE, 2500.0)


def test_too_many_ndp_dimms_for_the_budget_is_refused_before_any_run():
    with pytest.raises(ValueError, match="peak reserve does not fit"):
        run_rapid(RapidConfig(duration_s=5.0, ndp_dimms=400, ttft_slo_s=1.0))
    with pytest.raises(ValueError, match="ndp_dimms must be"):
        RapidConfig(ndp_dimms=0)


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "turbo"}, "mode must be one of"),
    ({"pattern": "spiky"}, "pattern must be one of"),
    ({"kv_path": "nvlink"}, "kv_path must be one of"),
    ({"duration_s": -1.0}, "duration_s must be a positive"),
    ({"tpot_slo_s": 0}, "tpot_slo_s must be a positive"),
    ({"backend": "fpga"}, "backend must be"),
    ({"units": 0}, "units must be"),
])
def test_bad_scenario_configs_are_rejected(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RapidConfig(**kwargs)


def test_run_rapid_compares_every_system_on_one_trace():
    r = run_rapid(RapidConfig(duration_s=40.0, mode="all"))
    names = [s["system"] for s in r["systems"]]
    assert names == systems_for("all", True)
    assert r["slo"]["ttft_baseline"]["trace"] == "mixed-steady"
    assert r["slo"]["ttft_s"] > 0 and r["slo"]["tpot_s"] == 0.05
    for s in r["systems"]:
        assert s["requests"] == r["trace"]["requests"] and s["checks"]["finished_once"]
        assert s["checks"]["max_reserved_w"] <= 4800.0 + 1e-9
        assert 0.0 <= s["slo_attainment"] <= min(s["ttft_attainment"], s["tpot_attainment"])
        assert s["qps_per_w"] > 0 and math.isfinite(s["ttft_s"]["p99"])
    ndp = [s for s in r["systems"] if s["ndp_tier"]]
    assert ndp and all(s["checks"]["ndp_reserved_w"] > 0 for s in ndp)
    assert "model backend (calibrated performance model, 256 units)" in r["provenance"]["ndp_attention"]
    assert r["provenance"]["ndp_calibrated"] is True


def test_ndp_tier_timing_comes_from_the_rtl_backend_when_asked():
    cfg = RapidConfig(duration_s=10.0, mode="static", backend="rtl", ttft_slo_s=1.0)
    r = run_rapid(cfg)
    assert "rtl backend (Verilated RTL cycles, 16 units)" in r["provenance"]["ndp_attention"]
    assert r["provenance"]["ndp_calibrated"] is None           # the RTL's own cycles
    assert [s["system"] for s in r["systems"]][-1] == "static-4p4d+ndp"


def test_config_dataclass_round_trips_through_asdict():
    cfg = RapidConfig(workload="long-context", pattern="steady", duration_s=30.0)
    assert RapidConfig(**dataclasses.asdict(cfg)) == cfg


def test_timeline_of_a_controlled_run(tmp_path):
    """--timeline: the dynamic system's run as tracks per GPU (batches, role switches), KV
    links and counters; a GPU and a prefill GPU's KV link do one thing at a time, the caps
    never exceed the budget, every request is prefilled once and every decode step is there."""
    from ndpdimm.cosim.timeline import Timeline, read_timeline
    tl = Timeline()
    cfg = RapidConfig(duration_s=60.0, mode="dynamic", rate_scale=3.0, ttft_slo_s=0.2, ndp=False)
    r = run_rapid(cfg, timeline=tl)
    f = read_timeline(tl.write(tmp_path / "rapid.json"))
    p = "RAPID dynamic"
    assert f.metadata["system"] == "dynamic" and f.metadata["requests"] == r["trace"]["requests"]
    for g in range(8):
        for track in (f"GPU {g}", f"GPU {g} KV out"):
            assert not f.overlaps(p, track), (track, f.overlaps(p, track)[:1])
    gpu = [s for g in range(8) for s in f.tracks[(p, f"GPU {g}")]]
    prefilled = sorted(rid for s in gpu if s[2] == "prefill" for rid in s[3]["requests"])
    assert prefilled == list(range(r["trace"]["requests"]))
    res = next(s for s in r["systems"] if s["system"] == "dynamic")
    switches = [s for s in gpu if s[2].startswith("role switch")]
    # a switch commanded near the end may still be draining when the last request finishes
    assert 0 < len(switches) <= res["role_switches"]
    budget = r["power_budget_w"]
    caps, reserved = f.counters[(p, "power cap (W)")], f.counters[(p, "power reserved (W)")]
    assert caps and reserved and f.counters[(p, "queue depth")]
    ndp = f.metadata["ndp_reserved_w"]
    assert all(sum(v.values()) + ndp <= budget + 1e-6 for _, v in caps)
    assert all(sum(v.values()) <= budget + 1e-6 for _, v in reserved)
    assert len({tuple(v.values()) for _, v in caps}) > 1, "the controller moved no power"
    kv = sorted(s[3]["request"] for g in range(8) for s in f.tracks[(p, f"GPU {g} KV out")])
    assert kv and len(kv) == len(set(kv)), "a request's KV went to the ring twice"


def test_timeline_system_must_be_run(tmp_path):
    from ndpdimm.cosim.timeline import Timeline
    with pytest.raises(ValueError, match="--timeline-system 'dynamic' is not run by --mode static"):
        run_rapid(RapidConfig(duration_s=5.0, mode="static"), timeline=Timeline(),
                  timeline_system="dynamic")


def test_the_ndp_attention_is_logged_for_rtl_samples():
    """The first NDP system's attention kernels are in the kernel log (``--rtl-samples``): per
    iteration, batch x layers x K/V heads invocations, charged the attention line at the
    batch's mean context; sampling without the NDP tier is refused."""
    r = run_rapid(RapidConfig(duration_s=10.0, mode="static", ttft_slo_s=1.0))
    log = r["ndp_kernels"]
    assert log["system"].endswith("+ndp") and set(log["kinds"]) == {"attention"}
    m = r["model"]
    assert log["kinds"]["attention"]["invocations"] % (m["layers"] * m["kv_heads"]) == 0
    assert log["kinds"]["attention"]["model_cycles"] > 0
    with pytest.raises(ValueError, match="drop --no-ndp"):
        run_rapid(RapidConfig(duration_s=10.0, ndp=False), rtl_samples=2)
