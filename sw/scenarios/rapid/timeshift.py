"""Power time-shifting: in low-load periods the controller raises the prefill GPUs' caps to work
ahead on queued prefill, keeping the power decode gave ready to go back as soon as the load
rises (SPEC section 5: "raise caps in low-load periods to work ahead, keeping headroom for
peaks"). An option of the dynamic controller (``controller.py``; ``ndpdimm rapid --time-shift``).

The node budget holds at every instant on the caps' reservations (``power.py``), so nothing can be
banked for later: what shifts in time is *work*. In a trough the decode phase runs far under its
SLO, and decode gains nothing from a cap above its curve's saturation (500 W of the node file),
while a prefill GPU at the home cap (600 W) is ~8 % short of its saturated speed. Time-shifting
moves that slack to the prefill GPUs, so the prompts that arrive in the trough are prefilled at the
prefill curve's full speed: each batch ends ahead of where it would at the home cap, and the
queue is emptier when the load rises.

**Low load** (:meth:`TimeShift.is_low`), measured over the controller's ``window_s`` (10 s) with
what the controller already watches, thresholds from the node file's ``[time_shift]`` table
(:class:`~ndpdimm.sw.scenarios.rapid.catalog.TimeShiftConfig`, each value's reason in its source):

* the prefill GPUs were busy less than ``low_utilisation`` (0.5) of the window (their busy time
  integrated exactly by the simulator, :meth:`ServingSim.busy_seconds`): prefill's load. Its
  pressure is no load measure: with prompts up to 8K tokens, the p90 TTFT is mostly the longest
  prompts' own prefill, near the SLO at any load (it is what the raised cap shortens);
* decode's pressure (``controller.py``: TPOT and iteration time over the TPOT SLO, KV ring
  occupancy) is under ``low_pressure`` (0.5): decode has slack to give;
* a whole window has passed since the run began (a shorter one has not shown the load yet).

**The shift** (:meth:`TimeShift.plan`), made when the load is low, prefill has work (a prompt
queued, or prefill busy time in the window) and no cap change or controller cooldown is under
way: the prefill GPUs are raised, lowest cap first, in ``power_step_w`` (50 W) steps towards the
prefill curve's saturation ``prefill_power.p_sat_w`` (700 W: a higher cap makes prefill no
faster), with the budget's free headroom first, then power from the decode GPUs, highest cap
first, each down to no lower than decode's saturation ``decode_power.p_sat_w`` (500 W): a decode
GPU gives only power its curve cannot use, so the shift never slows decode, at any load. At the
node file's numbers the shift is prefill 600 -> 700 W, decode 600 -> 500 W (a busy decode GPU
then draws 500 W instead of 560 W); a decode GPU the controller has already lowered to 500 W or
less gives nothing.

**Headroom for the peak.** The shift is one set of cap commands (:meth:`ServingSim.set_caps`:
lowerings first, raisings once they have settled), made once per low period, and the allocation
it found is kept, so the node can always return to it in one set too: the boosted GPUs lowered
at once, the donors raised once that has settled, ``2 x (power command + settling)`` (0.4 s),
less than a tick (0.5 s). While shifted the controller makes no other move (the power it would
move to prefill is already there). At the first tick at which the load is no longer low:

* if decode's pressure has reached ``low_pressure``, the found allocation is restored: decode,
  the phase that gave, has its power back 0.4 s later, while still at half its SLO, long before
  it would need help (``act_above``) - whatever the curves' error, the power it gave is back
  before it could matter;
* otherwise it is prefill's load that rose (the ramp to the peak) with decode still under half
  its SLO: the raised prefill caps are what that load needs and decode lost no speed to them,
  so they are handed to the controller, whose moves and role switches carry on from them as
  without time-shifting.

Busy time while shifted counts at the found caps' speed (:meth:`TimeShift.utilisation`), so the
raise's own speed-up is not read as a lower load, and a new shift waits a whole window after a
restore, so the window that shows the load low again was measured at the restored caps: a load
at the threshold does not flap the caps. The budget holds throughout: every command goes through
the power ledger.
"""

import collections

from ndpdimm.sw.scenarios.rapid.catalog import ControllerConfig, TimeShiftConfig

__all__ = ["TimeShift"]


class TimeShift:
    """The time-shifting state of one controller (module docstring): ``step`` each tick."""

    def __init__(self, cfg: TimeShiftConfig, controller: ControllerConfig):
        self.cfg, self.window_s = cfg, controller.window_s
        self.step_w = controller.power_step_w
        self.saved = None           # the allocation the shift found (caps per GPU), while shifted
        self.shift_ok_at = 0.0      # no new shift before (a window after a restore)
        self._busy = collections.deque()    # per tick: time, prefill busy GPU-seconds so far,
                                            # the same at the saved caps (utilisation)

    @property
    def shifted(self) -> bool:
        return self.saved is not None

    def utilisation(self, sim) -> float:
        """The fraction of the last ``window_s`` the GPUs now serving prefill were busy with it
        (from the tick at or before the window's start; 0 before a second tick), at the caps the
        shift found: busy time while shifted counts at the speed the raise gave (prefill curve,
        mean over the prefill GPUs), so the raised cap's own speed-up is not read as a lower
        load (that would end a shift only to start it again)."""
        busy = sim.busy_seconds("prefill")
        if self._busy:
            t0, b0, e0 = self._busy[-1]
            equivalent = e0 + (busy - b0) * self._speed_up(sim)
        else:
            equivalent = busy
        self._busy.append((sim.t, busy, equivalent))
        while len(self._busy) > 1 and self._busy[1][0] <= sim.t - self.window_s:
            self._busy.popleft()
        (t0, _, e0), (t1, _, e1) = self._busy[0], self._busy[-1]
        gpus = len(sim.active("prefill"))
        return (e1 - e0) / (gpus * (t1 - t0)) if t1 > t0 and gpus else 0.0

    def _speed_up(self, sim) -> float:
        """Mean prefill speed of the prefill GPUs at their caps over that at the saved ones."""
        if not self.shifted:
            return 1.0
        curve, caps = sim.node.prefill_power, sim.ledger.cap
        gpus = [g.gid for g in sim.active("prefill")]
        return sum(curve.speed(caps[i]) / curve.speed(self.saved[i]) for i in gpus) / len(gpus)

    def is_low(self, sim, decode_pressure: float) -> bool:
        """Whether the load is low now (module docstring); call once per tick."""
        busy = self.utilisation(sim)
        c = self.cfg
        return (sim.t >= self.window_s and busy < c.low_utilisation
                and decode_pressure < c.low_pressure)

    def plan(self, sim) -> list | None:
        """The shifted caps (one per GPU) from the current ones, or ``None`` when no prefill GPU
        can be raised (module docstring)."""
        node, led, step = sim.node, sim.ledger, self.step_w
        target = min(node.prefill_power.p_sat_w, led.max_cap_w)
        floor = max(node.decode_power.p_sat_w, led.min_cap_w)
        caps = list(led.cap)
        receivers = [g.gid for g in sim.active("prefill")]
        donors = [g.gid for g in sim.active("decode")]
        free = led.headroom_w
        while True:
            takers = [i for i in receivers if caps[i] + step <= target]
            if not takers:
                break
            if free >= step:
                free -= step
            else:
                givers = [i for i in donors if caps[i] - step >= floor]
                if not givers:
                    break
                caps[max(givers, key=lambda i: (caps[i], -i))] -= step
            caps[min(takers, key=lambda i: (caps[i], i))] += step
        return None if caps == list(led.cap) else caps

    def step(self, sim, decode_pressure: float, may_move: bool):
        """One tick: end the shift when the load is no longer low (restoring the found caps when
        decode's pressure rose, handing the shifted ones to the controller when prefill's load
        did), shift when it is low and ``may_move`` (no cap change or controller cooldown under
        way); returns the action taken (a string for the controller's history) or ``None``."""
        low = self.is_low(sim, decode_pressure)
        if self.shifted:
            if low or sim.ledger.in_transition():
                return None
            saved, self.saved = self.saved, None
            if decode_pressure < self.cfg.low_pressure:
                return "time-shift: prefill's load rose, caps handed to the controller"
            sim.set_caps(saved, kind="time-shift back")
            self.shift_ok_at = sim.t + 2 * sim.ledger.delay_s + self.window_s
            return "time-shift: back to " + _caps_text(saved)
        if not (low and may_move and sim.t >= self.shift_ok_at):
            return None
        if not sim.queue and sim.busy_seconds("prefill") == self._busy[0][1]:
            return None                 # no prefill work in the window: nothing to work ahead on
        caps = self.plan(sim)
        if caps is None:
            return None
        self.saved = list(sim.ledger.cap)
        sim.set_caps(caps, kind="time-shift")
        return "time-shift: " + _caps_text(caps)


def _caps_text(caps) -> str:
    return "caps " + "/".join(f"{c:g}" for c in caps) + " W"
