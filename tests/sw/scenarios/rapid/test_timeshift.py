"""RAPID's power time-shifting (``sw/scenarios/rapid/timeshift.py``, ``Levers.set_caps``): the
shift in a trough and the prefill it works ahead on, the two ways a shift ends (decode's caps back
within the cap-change latency, or prefill's raised caps handed to the controller), the node budget
at every instant, and the option's bad values. Every trace is drawn from an explicit seed."""

import numpy as np
import pytest

from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.config import RapidConfig, systems_for
from ndpdimm.sw.scenarios.rapid.controller import Controller
from ndpdimm.sw.scenarios.rapid.costs import ServingPerf
from ndpdimm.sw.scenarios.rapid.power import PowerBudgetError
from ndpdimm.sw.scenarios.rapid.simulate import ServingSim, SimulationError
from ndpdimm.sw.scenarios.rapid.timeshift import TimeShift
from ndpdimm.sw.scenarios.rapid.workload import Trace, generate_trace, load_workload

NODE = load_node()
PERF = ServingPerf(load_serving_model(), NODE)
ROLES = ["prefill"] * 4 + ["decode"] * 4
HOME = [600.0] * 8
#: the shift at the node file's numbers: prefill to its curve's saturation, decode to its own
SHIFTED = [NODE.prefill_power.p_sat_w] * 4 + [NODE.decode_power.p_sat_w] * 4
BUDGET = NODE.node.power_budget_w
SETTLE = NODE.controller.power_command_s + NODE.controller.power_settle_s
EPS = 1e-9      # times summed in another order differ in the last bits


def _serve(trace, shift: bool, slo=(0.2, 0.05), caps=HOME, mode="dynamic"):
    ctrl = Controller(NODE.controller, mode, *slo, time_shift=NODE.time_shift if shift else None)
    return ServingSim(PERF, trace, ROLES, list(caps), controller=ctrl, slo_ttft_s=slo[0],
                      slo_tpot_s=slo[1]).run()


def _trough_then_rush(seed, rush_rate, rush_input, rush_output):
    """30 s of a trough (3 rps of 1024-token prompts, 16-token answers), then 15-20 s of a rush
    (``rush_rate`` rps of ``rush_input``-token prompts, ``rush_output``-token answers)."""
    rng = np.random.default_rng(seed)
    parts = []
    for start, end, rate, inp, out in ((0.0, 30.0, 3.0, 1024, 16),
                                       (30.0, 50.0, rush_rate, rush_input, rush_output)):
        n = int((end - start) * rate)
        parts.append((np.sort(rng.uniform(start, end, n)), np.full(n, inp), np.full(n, out)))
    return Trace(f"trough-then-rush-{seed}",
                 *(np.concatenate([p[i] for p in parts]) for i in range(3)))


def _caps_at(sim, t):
    """Every GPU's effective cap at time ``t`` (the ledger's record replayed)."""
    cap = [0.0] * len(sim.gpus)
    for when, gid, what, value in sim.ledger.changes:
        if when <= t and what == "cap":
            cap[gid] = value
    return cap


def _decisions(sim, prefix="time-shift"):
    return [(t, d, a) for t, _, d, a in sim.controller.history if a and a.startswith(prefix)]


def test_in_a_trough_the_prefill_caps_rise_and_prefill_works_ahead():
    """5 rps of the mixed workload: after one window of low load the prefill GPUs go to their
    curve's saturation with the decode GPUs' unusable power; every later prompt's first token
    comes no later than without time-shifting, in less prefill GPU time and energy."""
    trace = generate_trace(load_workload("mixed"), 60.0, "steady", seed=5, rate_scale=0.2)
    plain, shifted = _serve(trace, shift=False), _serve(trace, shift=True)
    (t, _, action), = _decisions(shifted)
    assert t == NODE.controller.window_s and action.startswith("time-shift: caps 700/")
    assert _caps_at(shifted, t + 2 * SETTLE + EPS) == SHIFTED
    assert _caps_at(plain, 60.0) == HOME and not plain.actions
    arrival, ttft_plain = plain.latencies()[:2]
    ttft_shifted = shifted.latencies()[1]
    later = arrival >= t + 2 * SETTLE + EPS
    assert later.sum() > 200
    assert np.all(ttft_shifted[later] <= ttft_plain[later] + 1e-12)
    assert ttft_shifted[later].mean() < 0.95 * ttft_plain[later].mean()
    assert shifted.busy_seconds("prefill") < 0.96 * plain.busy_seconds("prefill")
    assert shifted.gpu_energy_j() < plain.gpu_energy_j()
    assert shifted.max_draw_w <= BUDGET


def test_when_decode_pressure_rises_its_caps_are_back_within_the_cap_change_latency():
    """A trough, then a rush of long answers: at the first tick at which decode's pressure
    reaches low_pressure the found caps are restored, and are in place two cap changes later."""
    trace = _trough_then_rush(seed=7, rush_rate=60.0, rush_input=64, rush_output=1024)
    sim = _serve(trace, shift=True, slo=(0.2, 0.015))
    (t_shift, _, _), (t_back, d_back, back) = _decisions(sim)
    assert back == "time-shift: back to caps " + "/".join(["600"] * 8) + " W"
    crossed = [t for t, _, d, _ in sim.controller.history
               if t > t_shift and d >= NODE.time_shift.low_pressure]
    assert crossed and crossed[0] == t_back and d_back >= NODE.time_shift.low_pressure
    assert _caps_at(sim, t_back) == SHIFTED
    assert _caps_at(sim, t_back + 2 * SETTLE + EPS) == HOME
    # the boosted GPUs are lowered first, the donors raised only once that has settled
    after = [(w, g, what, v) for w, g, what, v in sim.ledger.changes
             if t_back <= w <= t_back + 2 * SETTLE + EPS]
    raised = [w for w, g, what, v in after if what == "reserved" and g >= 4]
    lowered = [w for w, g, what, v in after if what == "cap" and g < 4]
    assert raised and lowered and min(raised) >= max(lowered)


def test_when_prefill_load_rises_the_raised_caps_are_handed_to_the_controller():
    """A trough, then a rush of 8K prompts: decode still under half its SLO, so the shift ends
    without lowering prefill; the controller carries on from the raised caps."""
    trace = _trough_then_rush(seed=8, rush_rate=15.0, rush_input=8192, rush_output=16)
    sim = _serve(trace, shift=True)
    (_, _, _), (t_end, d_end, end) = _decisions(sim)[:2]
    assert end == "time-shift: prefill's load rose, caps handed to the controller"
    assert d_end < NODE.time_shift.low_pressure
    assert _caps_at(sim, t_end + 2 * SETTLE + EPS) == SHIFTED
    assert not [a for a in sim.actions if a[1] == "time-shift back"]
    assert [a for a in sim.actions if a[0] > t_end and a[1] in ("power", "role")]


def test_the_node_budget_holds_at_every_instant_while_time_shifting(replay_budget):
    """A diurnal morning at 1.6x the mixed workload's rates: shifts, their ends, the controller's
    power moves and role switches; reservations, caps and draw never exceed the budget."""
    trace = generate_trace(load_workload("mixed"), 400.0, "diurnal", seed=11, rate_scale=1.6)
    sim = _serve(trace, shift=True)
    kinds = {a[1] for a in sim.actions}
    assert {"time-shift", "power"} <= kinds, kinds
    worst, cap_over = replay_budget(sim)
    assert worst <= BUDGET + 1e-9 and not cap_over
    assert sim.ledger.max_reserved_w <= BUDGET + 1e-9 and sim.max_draw_w <= BUDGET + 1e-9
    # the simulator's own end-of-run check fails a run whose draw went over
    sim.max_draw_w = BUDGET + 1.0
    with pytest.raises(SimulationError, match="exceeded its 4800 W budget"):
        sim._check_budget()


def test_the_shift_takes_only_power_decode_cannot_use():
    """From 600 W decode gives 100 W per GPU (down to its saturation, 500 W); from 520 W
    nothing, and only the budget's free 320 W raises prefill (lowest cap first, 50 W steps)."""
    ts = TimeShift(NODE.time_shift, NODE.controller)
    trace = Trace("one", np.array([0.0]), np.array([512]), np.array([2]))
    assert ts.plan(ServingSim(PERF, trace, ROLES, HOME)) == SHIFTED
    short = ServingSim(PERF, trace, ROLES, [600.0] * 4 + [520.0] * 4)
    assert ts.plan(short) == [700.0, 700.0, 650.0, 650.0] + [520.0] * 4
    assert ts.plan(ServingSim(PERF, trace, ROLES, [700.0] * 4 + [500.0] * 4)) is None


def test_set_caps_lowers_first_and_refuses_before_changing_anything():
    trace = Trace("one", np.array([5.0]), np.array([512]), np.array([2]))
    sim = ServingSim(PERF, trace, ROLES, HOME)
    before = list(sim.ledger.changes)
    for caps, message in (([750.0] * 8, "exceed the node budget"),
                          ([250.0] + [600.0] * 7, "cannot move to 250.0 W"),
                          ([600.0] * 7, "need a cap for each of the 8 GPUs")):
        with pytest.raises(ValueError, match=message):
            sim.set_caps(caps)
        assert sim.ledger.changes == before and sim.ledger.cap == HOME and not sim.actions
    sim.set_caps(SHIFTED, kind="time-shift")
    with pytest.raises(PowerBudgetError, match="cannot move"):
        sim.set_caps(HOME)                       # the lowerings are still under way
    sim.run()
    assert _caps_at(sim, SETTLE - EPS) == HOME
    assert _caps_at(sim, SETTLE + EPS) == [600.0] * 4 + SHIFTED[4:]
    assert _caps_at(sim, 2 * SETTLE + EPS) == SHIFTED
    assert sim.ledger.max_reserved_w <= BUDGET


@pytest.mark.parametrize("kwargs, message", [
    ({"time_shift": "yes"}, "time_shift must be True or False, got 'yes'"),
    ({"time_shift": 1}, "time_shift must be True or False, got 1"),
    ({"time_shift": True, "mode": "static"},
     "time_shift is an option of the dynamic controller: it needs mode dynamic-power, dynamic "
     "or all, got mode 'static'"),
])
def test_bad_time_shift_values_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RapidConfig(**kwargs)


def test_time_shift_adds_each_controlled_system_with_it():
    assert systems_for("all", False, time_shift=True)[-2:] == ["dynamic-power+shift",
                                                                "dynamic+shift"]
    assert systems_for("dynamic", True, time_shift=True)[-2:] == ["dynamic+shift", "dynamic+ndp"]
    assert "dynamic+shift" not in systems_for("dynamic", True)
