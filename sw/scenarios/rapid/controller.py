"""RAPID's central controller: watch TTFT/TPOT against their SLOs, move power first, roles second.

Every ``tick_s`` the controller computes each phase's *pressure* over the last ``window_s``:

* prefill: ``max(p90 TTFT of requests whose first token came in the window, age of the oldest
  queued prompt) / TTFT SLO`` (the queue age reacts before any slow request has finished);
* decode: ``max(p90 TPOT of requests finished in the window, p90 decode iteration time)
  / TPOT SLO``, and at least ``occupied slots / (slots / 2)`` of the KV ring (with requests
  handed over and waiting counted as occupied): decode workers that cannot admit fast enough
  fill the ring long before any TPOT shows it, and a full ring stalls prefill.

A phase *needs help* when its pressure is above ``act_above`` and the other phase *can give*
when its pressure is below ``donate_below`` (the gap between the two is the hysteresis: a
phase that just received power does not give it straight back at the first dip). Prefill
needs help only while prompts are queued (an empty queue means the window's slow requests
are history). When both phases are over while the ring is full, decode is helped: prefill is
then waiting on decode, not the other way round. Then:

1. **Power** (modes ``dynamic-power`` and ``dynamic``): ``power_step_w`` (50 W) from the giving
   phase's highest-capped GPU to the needing phase's lowest-capped GPU (free budget headroom is
   used first, without lowering anyone); the source is lowered and only once that has settled
   is the target raised (:meth:`ServingSim.move_power`). Caps stay within the GPU's range.
   After a move the controller waits ``power_cooldown_s`` beyond the move's settling.
2. **Roles** (mode ``dynamic`` only), when no power move is possible (the needing phase is at
   its maximum caps or the giving phase at its minimum), or first when the needing phase's
   pressure exceeds ``SEVERE`` (2) x ``act_above`` (power alone cannot buy that much): the
   giving phase's least-loaded GPU switches to the needing phase, as long as the giving phase
   keeps ``min_gpus_per_phase`` GPUs, its pressure scaled to one GPU fewer stays under
   ``act_above``, and, for a decode GPU, the other decode workers have room (KV and batch
   seats) for its requests. Then the
   controller waits ``role_cooldown_s`` beyond the switch time before any role change and
   ``power_cooldown_s`` before any power move.

With ``time_shift`` (the node file's :class:`~ndpdimm.sw.scenarios.rapid.catalog.TimeShiftConfig`;
``ndpdimm rapid --time-shift``), the controller also time-shifts power (``timeshift.py``): in a
low-load period it raises the prefill GPUs' caps with power decode cannot use; when the load
rises it restores the caps it found (decode's pressure rose) or carries on from the raised ones
(prefill's load rose); while shifted it makes no other move.

Every decision is recorded with both pressures (:attr:`Controller.history`).
"""

import math

import numpy as np

from ndpdimm.sw.scenarios.rapid.catalog import ControllerConfig, TimeShiftConfig
from ndpdimm.sw.scenarios.rapid.timeshift import TimeShift

__all__ = ["Controller", "CONTROLLED_MODES"]

CONTROLLED_MODES = ("dynamic-power", "dynamic")


def _percentile(values, pct) -> float:
    return float(np.percentile(values, pct)) if values else 0.0


class Controller:
    #: pressure above SEVERE x act_above asks for a role switch before power (50 W steps cannot
    #: buy more than the phase curve's ~1.3-1.8x); below it power goes first
    SEVERE = 2.0

    def __init__(self, cfg: ControllerConfig, mode: str, slo_ttft_s: float, slo_tpot_s: float,
                 time_shift: TimeShiftConfig | None = None):
        if mode not in CONTROLLED_MODES:
            raise ValueError(f"controller mode must be one of {', '.join(CONTROLLED_MODES)}, "
                             f"got {mode!r}")
        for name, v in (("slo_ttft_s", slo_ttft_s), ("slo_tpot_s", slo_tpot_s)):
            if not (v > 0 and math.isfinite(v)):
                raise ValueError(f"{name} must be a positive number of seconds, got {v!r}")
        self.cfg, self.mode = cfg, mode
        self.slo_ttft_s, self.slo_tpot_s = slo_ttft_s, slo_tpot_s
        self.power_ok_at = 0.0
        self.role_ok_at = 0.0
        self.time_shift = None if time_shift is None else TimeShift(time_shift, cfg)
        self.history = []            # (t, prefill pressure, decode pressure, action or None)

    def pressures(self, sim) -> tuple:
        c = self.cfg
        ttft = sim.window(sim.ttft_window, c.window_s)
        age = sim.t - sim.queue[0].arrival if sim.queue else 0.0
        tpot = sim.window(sim.tpot_window, c.window_s)
        steps = sim.window(sim.step_window, c.window_s)
        pct = 90.0
        ring = sim.ring_backlog() / (len(sim.ring) / 2)
        return (max(_percentile(ttft, pct), age) / self.slo_ttft_s,
                max(_percentile(tpot, pct) / self.slo_tpot_s, _percentile(steps, pct) / self.slo_tpot_s, ring))

    def tick(self, sim) -> None:
        c = self.cfg
        p, d = self.pressures(sim)
        if self.time_shift is not None:
            may_move = sim.t >= self.power_ok_at and not sim.ledger.in_transition() \
                and sim.t >= sim.power_busy_until
            action = self.time_shift.step(sim, d, may_move)
            if action is not None or self.time_shift.shifted:
                self.history.append((sim.t, p, d, action))
                return
        ring_full = sim.ring_backlog() >= len(sim.ring)
        if d > c.act_above and (p < c.donate_below or ring_full):
            need = "decode"
        elif p > c.act_above and sim.queue and d < c.donate_below:
            need = "prefill"
        else:
            need = None
        action = None
        if need is not None and sim.t >= self.power_ok_at and not sim.ledger.in_transition() \
                and sim.t >= sim.power_busy_until:
            give = "decode" if need == "prefill" else "prefill"
            severe = (p if need == "prefill" else d) > self.SEVERE * c.act_above
            roles_ok = self.mode == "dynamic" and sim.t >= self.role_ok_at
            if severe and roles_ok:
                action = self._switch_role(sim, need, give, p if give == "prefill" else d)
            if action is None:
                action = self._move_power(sim, need, give)
            if action is None and roles_ok and not severe:
                action = self._switch_role(sim, need, give, p if give == "prefill" else d)
        self.history.append((sim.t, p, d, action))

    def _move_power(self, sim, need, give):
        led, step = sim.ledger, self.cfg.power_step_w
        takers = [g.gid for g in sim.active(need) if led.cap[g.gid] + step <= led.max_cap_w]
        if not takers:
            return None
        dst = min(takers, key=lambda i: (led.cap[i], i))
        if led.headroom_w >= step:
            src = None
        else:
            givers = [g.gid for g in sim.active(give) if led.cap[g.gid] - step >= led.min_cap_w]
            if not givers:
                return None
            src = max(givers, key=lambda i: (led.cap[i], -i))
        sim.move_power(src, dst, step)
        self.power_ok_at = sim.t + 2 * led.delay_s + self.cfg.power_cooldown_s
        return f"power {step:g} W {'headroom' if src is None else f'GPU {src}'} -> GPU {dst}"

    def _switch_role(self, sim, need, give, give_pressure):
        c = self.cfg
        pool = sim.active(give)
        if len(pool) - 1 < c.min_gpus_per_phase:
            return None
        # the giving phase's load spread over one GPU fewer must stay under act_above
        if give_pressure * len(pool) / (len(pool) - 1) >= c.act_above:
            return None
        if give == "decode":
            cap = sim.perf.kv_capacity_bytes(max(1, len(pool) - 1))
            g = min(pool, key=lambda g: (g.kv_used, g.gid))
            rest = [x for x in pool if x is not g]
            room = sum(cap - x.kv_used for x in rest)
            seats = sum(sim.node.gpu.max_decode_batch - len(x.running) - len(x.pending)
                        for x in rest)
            if room < g.kv_used or seats < len(g.running) + len(g.pending):
                return None
        else:
            g = min(pool, key=lambda g: (g.busy is not None, len(g.outbox), g.gid))
        sim.switch_role(g.gid, need)
        self.role_ok_at = sim.t + c.role_switch_s + c.role_cooldown_s
        self.power_ok_at = sim.t + c.role_switch_s + c.power_cooldown_s
        return f"role GPU {g.gid} {give} -> {need}"
