"""RAPID's ``--timeline``: one simulated serving run as a Chrome-trace/Perfetto timeline.

:func:`lay_run` turns what a :class:`~ndpdimm.sw.scenarios.rapid.simulate.ServingSim` run
with ``record=True`` scheduled into tracks of a :class:`~ndpdimm.cosim.timeline.Timeline`
(process ``RAPID <system>``):

* ``GPU g``: every prefill batch (its requests and prompt tokens) and decode iteration (batch,
  context tokens) from the moment it started to the moment it ended - a cap that settled
  mid-batch re-timed its remaining share, so the slice is what actually ran - and the role
  switches (the GPU idle for ``role_switch_s``); a GPU does one thing at a time;
* ``GPU g KV out``: the KV copies into the ring's slots, one after another on the prefill
  GPU's outbound link; ``GPU g KV hand-over``: a draining decode GPU's requests' KV copies
  (the model starts each hand-over's copies at the hand-over, so two hand-overs could overlap:
  that track spreads them over lanes);
* counters: every GPU's effective cap and reservation at each change of the power ledger
  (``PowerLedger.changes``), the NDP-DIMM tier's reserved power, the node's draw and the
  queue depths at each controller tick (``ServingSim.samples``: prefill queue, KV ring backlog,
  hand-overs waiting, requests decoding).
"""

from ndpdimm.cosim.timeline import Timeline

__all__ = ["lay_run", "gpu_track"]


def gpu_track(g: int) -> str:
    return f"GPU {g}"


def lay_run(sim, timeline: Timeline, system: str) -> None:
    """Lay ``sim`` (run with ``record=True``) on ``timeline`` as process ``RAPID <system>``."""
    if not sim.record:
        raise ValueError("the run was not recorded: make the ServingSim with record=True")
    p = f"RAPID {system}"
    n = len(sim.gpus)
    for g in range(n):
        timeline.track(p, gpu_track(g))
    for g in range(n):
        timeline.track(p, f"GPU {g} KV out")
        timeline.track(p, f"GPU {g} KV hand-over", exclusive=False)
    for gid, phase, start, end, args in sim.work_log:
        timeline.slice(p, gpu_track(gid), phase, start, end - start, args)
    for gid, old, new, start, end in sim.switch_log:
        timeline.slice(p, gpu_track(gid), f"role switch {old} -> {new}", start, end - start,
                       {"from": old, "to": new})
    for gid, kind, start, end, rid in sim.kv_log:
        hand = kind == "hand-over"
        timeline.slice(p, f"GPU {gid} KV {'hand-over' if hand else 'out'}", f"KV request {rid}",
                       start, end - start, {"request": rid, "slot": kind}, exclusive=not hand)
    led = sim.ledger
    cap, reserved = [None] * n, [None] * n
    for t, gid, what, value in led.changes:
        (cap if what == "cap" else reserved)[gid] = value
        if reserved[gid] is None:                 # at start a GPU reserves its cap
            reserved[gid] = value
        if None in cap or None in reserved:
            continue
        timeline.counter(p, "power cap (W)", t, {f"GPU {g}": c for g, c in enumerate(cap)})
        timeline.counter(p, "power reserved (W)", t,
                         {**{f"GPU {g}": r for g, r in enumerate(reserved)},
                          "NDP-DIMM tier": led.reserved_other_w})
    for t, _roles, _caps, draws, queue, ring, wait, running in sim.samples:
        timeline.counter(p, "node draw (W)", t, {"GPUs": sum(draws)})
        timeline.counter(p, "queue depth", t, {"prefill queue": queue, "KV ring backlog": ring,
                                               "hand-overs waiting": wait, "decoding": running})
