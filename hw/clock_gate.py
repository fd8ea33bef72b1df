"""Clock gating: a domain whose clock runs only in the cycles a block has work.

``gated_domain(m, name, enable)`` adds the local clock domain ``name`` to
module ``m``: its clock is the ``sync`` clock ANDed with ``enable`` as it was
at the last falling edge (a latch-free integrated clock gate: ``en_q`` is a
flip-flop on the falling edge, so it changes only while the clock is low and
the gated clock has no glitches); its reset is ``sync``'s. Put a block in it
with ``DomainRenamer(name)``.

Cycle behaviour: the block's registers update at the rising edge ending
cycle ``t`` exactly when ``enable`` was high during cycle ``t`` (sampled at
that cycle's falling edge, after every ``sync`` register has settled, since
no ``sync`` logic changes at falling edges). ``enable`` must therefore be
high in every cycle in which clocking the block could change a register it
owns or a handshake it takes part in - the caller states why its expression
is enough - and reset must be part of it, so the block resets with the rest.
Both clocks rise together; signals cross between ``sync`` and the gated
domain as inside one domain.

Why: an idle block's logic costs nothing in silicon power while its clock is
stopped, and nothing in simulation either: Verilator evaluates a domain's
logic only at edges of its clock, so the activation unit's sixteen FP32 lanes
no longer cost simulation time during GEMVs and DMAs (docs/cosim.md, Speed).
"""

from amaranth.hdl import ClockDomain, ClockSignal, ResetSignal, Signal

__all__ = ["gated_domain"]


def gated_domain(m, name: str, enable) -> ClockDomain:
    """Add the clock domain ``name`` (``sync``'s clock gated by ``enable``) to ``m``; see the
    module docstring."""
    gate = ClockDomain(f"{name}_gate", clk_edge="neg", reset_less=True, local=True)
    domain = ClockDomain(name, local=True)
    m.domains += [gate, domain]
    en_q = Signal(name=f"{name}_clock_enable")
    m.d.comb += ClockSignal(gate.name).eq(ClockSignal("sync"))
    m.d[gate.name] += en_q.eq(enable)
    m.d.comb += [ClockSignal(name).eq(ClockSignal("sync") & en_q),
                 ResetSignal(name).eq(ResetSignal("sync"))]
    return domain
