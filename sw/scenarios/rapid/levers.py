"""The controller's levers on a running serving simulation: power moves, whole allocations, role switches.

:class:`Levers` is the part of :class:`~ndpdimm.sw.scenarios.rapid.simulate.ServingSim` the
controller (``controller.py``) acts through, kept apart from the serving itself: it uses the
simulator's event heap (``at``), power ledger, GPUs and queues. Cycle behaviour (simulated
time): a power move lowers the source's cap at once and raises the target's once the lowered
cap has settled (``power command + settling`` later, source before target, so the node budget
holds throughout); a whole new allocation (:meth:`Levers.set_caps`: time-shifting's shift and
restore, ``timeshift.py``) lowers every GPU it lowers at once and raises the others once those
have settled, so it is in place ``2 x (power command + settling)`` after it is set; a role
switch drains the GPU (a prefill GPU finishes its batch and pushes its outputs; a decode GPU
hands its requests to the other decode workers at its next iteration boundary), then idles
``role_switch_s`` before serving its new phase.
"""

from ndpdimm.sw.scenarios.rapid.power import PowerBudgetError

__all__ = ["Levers"]


class Levers:
    """Power moves and role switches of a :class:`~ndpdimm.sw.scenarios.rapid.simulate.ServingSim`
    (a mixin: the simulator holds the state these methods change)."""

    def move_power(self, src, dst, step_w):
        """Lower GPU ``src`` by ``step_w``, and once that has settled raise ``dst`` by the same
        (``src`` ``None``: raise from the budget's free headroom). Refusals raise
        :class:`~ndpdimm.sw.scenarios.rapid.power.PowerBudgetError` before anything changes."""
        if src is not None:
            settle = self.ledger.command(self.t, src, self.ledger.cap[src] - step_w)
            self.at(settle, self._settled, src, dst, step_w)
        else:
            self.at(self.ledger.command(self.t, dst, self.ledger.cap[dst] + step_w),
                    self._settled, dst, None, 0.0)
        self.actions.append((self.t, "power", {"from": src, "to": dst, "step_w": step_w}))
        self.power_busy_until = self.t + 2 * self.ledger.delay_s

    def _settled(self, gid, then_raise, step_w):
        self.ledger.settle(self.t, gid)
        g = self.gpus[gid]
        if g.busy is not None:
            self._retime(g)
        self._set_draw(g)
        if then_raise is not None:
            try:
                settle = self.ledger.command(self.t, then_raise,
                                             self.ledger.cap[then_raise] + step_w)
            except PowerBudgetError as e:       # the freed power stays unallocated
                self.actions.append((self.t, "power-refused", {"to": then_raise, "why": str(e)}))
                return
            self.at(settle, self._settled, then_raise, None, 0.0)

    def set_caps(self, caps, kind="caps"):
        """Move every GPU to its cap in ``caps``: the lowerings commanded now, the raisings once
        every lowering has settled (so the node budget holds throughout, as for a power move),
        recorded as an action of ``kind``. Refused (``PowerBudgetError``, nothing changes) when
        a cap is outside the GPU's range, the caps do not fit the budget, or a GPU it changes is
        already changing."""
        led = self.ledger
        caps = [float(c) for c in caps]
        if len(caps) != len(led.cap):
            raise ValueError(f"need a cap for each of the {len(led.cap)} GPUs, got {len(caps)}")
        changed = [i for i, c in enumerate(caps) if c != led.target[i]]   # target: cap once settled
        for i in changed:
            if not led.min_cap_w <= caps[i] <= led.max_cap_w or led.in_transition(i):
                raise PowerBudgetError(f"GPU {i}: cannot move to {caps[i]} W now (range "
                                       f"[{led.min_cap_w}, {led.max_cap_w}] W, changing: "
                                       f"{led.in_transition(i)})")
        if sum(caps) + led.reserved_other_w > led.budget_w + 1e-9:
            raise PowerBudgetError(f"caps {caps} W plus {led.reserved_other_w:.1f} W reserved "
                                   f"exceed the node budget of {led.budget_w} W")
        lowered = [i for i in changed if caps[i] < led.cap[i]]
        raised = {i: caps[i] for i in changed if caps[i] > led.cap[i]}
        for i in lowered:
            self.at(led.command(self.t, i, caps[i]), self._settled, i, None, 0.0)
        if lowered:     # after the lowerings' settle events: same time, later in the heap
            self.at(self.t + led.delay_s, self._raise_caps, raised)
        else:
            self._raise_caps(raised)
        self.actions.append((self.t, kind, {"caps": caps}))
        self.power_busy_until = self.t + (2 if lowered and raised else 1) * led.delay_s

    def _raise_caps(self, raised):
        for gid, cap in raised.items():
            try:
                settle = self.ledger.command(self.t, gid, cap)
            except PowerBudgetError as e:       # cannot happen after the checks; recorded if so
                self.actions.append((self.t, "power-refused", {"to": gid, "why": str(e)}))
                continue
            self.at(settle, self._settled, gid, None, 0.0)

    # ---- roles ----
    def active(self, role):
        """GPUs serving ``role`` and not draining towards another."""
        return [g for g in self.gpus if g.role == role and g.switch_to is None]

    def switch_role(self, gid, new_role):
        g = self.gpus[gid]
        if g.role not in ("prefill", "decode") or new_role not in ("prefill", "decode") \
                or new_role == g.role or g.switch_to is not None:
            raise ValueError(f"GPU {gid} ({g.role}) cannot switch to {new_role!r} now")
        if len(self.active(g.role)) - 1 < self.node.controller.min_gpus_per_phase:
            raise ValueError(f"switching GPU {gid} would leave {g.role} with fewer than "
                             f"{self.node.controller.min_gpus_per_phase} GPU(s)")
        g.switch_to = new_role
        self.actions.append((self.t, "role", {"gpu": gid, "from": g.role, "to": new_role}))
        if g.busy is None:
            self._drain(g)

    def _drain(self, g):
        """``g`` is idle and draining: hand over its work, then switch."""
        if g.role == "prefill":
            if g.outbox:
                return                          # _push_outboxes calls back when empty
        else:
            self._hand_over(g)
        if self.record:
            self.switch_log.append((g.gid, g.role, g.switch_to, self.t,
                                    self.t + self.node.controller.role_switch_s))
        g.role = "switching"
        self.at(self.t + self.node.controller.role_switch_s, self._switched, g)

    def _switched(self, g):
        g.role, g.switch_to = g.switch_to, None
        g.link_free = max(g.link_free, self.t)
        if g.role == "prefill":
            self._dispatch_prefill()
        else:
            self._consume()

    def _hand_over(self, g):
        moving = list(g.running.values()) + g.pending
        link_free = self.t
        for r in moving:
            if r.rid in g.running:
                r.generated += g.step - r.join_step
            ctx = r.inp + 1 + r.generated
            r.migrations += 1
            if self.perf.ndp is None:
                start = max(link_free, self.t)
                link_free = max(link_free, self.t) + self.kv.seconds(ctx * self.perf.kv_bytes_per_token)
                if self.record:
                    self.kv_log.append((g.gid, "hand-over", start, link_free, r.rid))
            self.at(link_free, self._handed, r)
        g.running.clear()
        g.pending = []
        g.finish_heap = []
        g.ctx_sum = 0
        g.kv_used = 0.0

    def _handed(self, r):
        self.decode_wait.append(r)
        self._consume()

    # ---- prefill ----
