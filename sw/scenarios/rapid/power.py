"""The node's power caps over time: reservations against the budget, actuation delay, the record.

Each GPU has an *effective* cap (what its power limiter enforces: it sets the GPU's speed and
bounds its draw) and a *reservation* (its share of the node budget). The ledger keeps, at every
instant::

    effective cap <= reservation          for every GPU
    sum(reservations) + reserved_other <= budget

``reserved_other`` is power the node must keep for other parts (the NDP-DIMM tier's peak draw).
A cap change is a command that takes effect ``command_s + settle_s`` later (SPEC: ~120 ms plus
~80 ms). Lowering keeps the old reservation until the new cap has settled, then frees it;
raising reserves the new value when the command is issued, and the cap follows when it
settles. So moving power "lowers the source before raising the target": the target's raise is
only accepted once the source's reservation is free, and the budget holds during transitions.
A raise the budget cannot cover is refused (:class:`PowerBudgetError`) and changes nothing.

Every change is recorded (:attr:`PowerLedger.changes`: time, GPU, what, value) so a test can
replay the reservations and check the budget at every instant.
"""

__all__ = ["PowerLedger", "PowerBudgetError"]


class PowerBudgetError(ValueError):
    """A cap change the node budget (or a GPU's cap range) does not allow."""


class PowerLedger:
    def __init__(self, caps, budget_w: float, min_cap_w: float, max_cap_w: float,
                 command_s: float, settle_s: float, reserved_other_w: float = 0.0):
        caps = [float(c) for c in caps]
        for i, c in enumerate(caps):
            if not min_cap_w <= c <= max_cap_w:
                raise PowerBudgetError(f"GPU {i}: cap {c} W outside [{min_cap_w}, {max_cap_w}] W")
        total = sum(caps) + reserved_other_w
        if total > budget_w + 1e-9:
            raise PowerBudgetError(
                f"caps {caps} W" + (f" plus {reserved_other_w:.1f} W reserved for the NDP-DIMM "
                                    f"tier" if reserved_other_w else "") +
                f" add up to {total:.1f} W, over the node budget of {budget_w} W")
        self.cap = caps
        self.reserved = list(caps)
        self.target = list(caps)
        self.budget_w, self.min_cap_w, self.max_cap_w = budget_w, min_cap_w, max_cap_w
        self.delay_s = command_s + settle_s
        self.reserved_other_w = reserved_other_w
        self.changes = [(0.0, i, "cap", c) for i, c in enumerate(caps)]
        self.max_reserved_w = total

    @property
    def headroom_w(self) -> float:
        return self.budget_w - self.reserved_other_w - sum(self.reserved)

    def in_transition(self, gpu: int | None = None) -> bool:
        idx = range(len(self.cap)) if gpu is None else (gpu,)
        return any(self.target[i] != self.cap[i] for i in idx)

    def command(self, t: float, gpu: int, new_cap_w: float) -> float:
        """Start changing ``gpu``'s cap at ``t``; returns when it settles (the caller calls
        :meth:`settle` then). Refused (nothing changes) outside the cap range, while the GPU is
        already changing, or when a raise does not fit the budget."""
        new_cap_w = float(new_cap_w)
        if not self.min_cap_w <= new_cap_w <= self.max_cap_w:
            raise PowerBudgetError(f"GPU {gpu}: cap {new_cap_w} W outside "
                                   f"[{self.min_cap_w}, {self.max_cap_w}] W")
        if self.in_transition(gpu):
            raise PowerBudgetError(f"GPU {gpu}: a cap change is already under way")
        if new_cap_w > self.reserved[gpu]:
            if new_cap_w - self.reserved[gpu] > self.headroom_w + 1e-9:
                raise PowerBudgetError(
                    f"GPU {gpu}: raising to {new_cap_w} W needs "
                    f"{new_cap_w - self.reserved[gpu]:.1f} W, the budget has "
                    f"{self.headroom_w:.1f} W free")
            self.reserved[gpu] = new_cap_w
            self.changes.append((t, gpu, "reserved", new_cap_w))
            self.max_reserved_w = max(self.max_reserved_w,
                                      sum(self.reserved) + self.reserved_other_w)
        self.target[gpu] = new_cap_w
        return t + self.delay_s

    def settle(self, t: float, gpu: int) -> None:
        """The cap commanded for ``gpu`` takes effect; a lowered reservation is freed."""
        self.cap[gpu] = self.target[gpu]
        self.changes.append((t, gpu, "cap", self.cap[gpu]))
        if self.reserved[gpu] > self.cap[gpu]:
            self.reserved[gpu] = self.cap[gpu]
            self.changes.append((t, gpu, "reserved", self.cap[gpu]))
