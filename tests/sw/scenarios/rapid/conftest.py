"""What the RAPID tests share: ``replay_budget``, the node's power rebuilt from the power ledger's
record, so a test checks the budget at every instant independently of the ledger's own count."""

import pytest


def _replay_budget(sim):
    """Reservations and caps rebuilt from the ledger's record: the worst instant's total, and
    whether any cap ever exceeded its reservation."""
    n = len(sim.gpus)
    cap, res = [0.0] * n, [0.0] * n
    worst, cap_over = 0.0, False
    for _, gid, what, value in sim.ledger.changes:
        (cap if what == "cap" else res)[gid] = value
        if what == "cap" and res[gid] == 0.0:
            res[gid] = value                       # the initial entries set both
        worst = max(worst, sum(res) + sim.ledger.reserved_other_w)
        cap_over |= any(c > r + 1e-9 for c, r in zip(cap, res))
    return worst, cap_over


@pytest.fixture
def replay_budget():
    """``replay_budget(sim) -> (worst instant's reservations plus the NDP reserve, whether a cap
    ever exceeded its reservation)`` of a finished :class:`ServingSim`."""
    return _replay_budget
