"""TriMoE's per-layer expert scheduler: greedy initial assignment, then bottleneck-aware refinement.

Input: the experts a MoE layer must run this step (:class:`ExpertTask`: the
expert, its token count, and for every device it may run on the time it
would take there and the bytes of that device's capacity it would use) and
the devices (:class:`Device`: a name, a domain - ``gpu``, ``cpu`` or ``ndp``
- and a capacity in bytes). A device runs its experts one after the other,
so its *load* is the sum of their times and the layer takes the largest
load, the *makespan*; devices run in parallel.

1. **Greedy** (longest processing time first): tasks in decreasing order of
   their best time; each goes to the device where it would finish first
   (current load + its time there) among the devices with room for it.
2. **Refinement** (bottleneck-aware): take the device with the largest load;
   try its experts from the most expensive there down, each on every other
   device with room, and apply the first move after which neither the
   bottleneck nor the receiving device reaches the old bottleneck load.
   Repeat until no such move exists (or ``max_iterations``). Every applied
   move lowers the bottleneck's load below the old makespan and keeps the
   receiver under it, so the makespan never increases, and the sorted load
   vector decreases strictly, so the loop ends. When several devices tie
   at the makespan a move can leave the makespan unchanged while removing
   one of them from the top; the next iterations then lower the others.

Capacity: ``ExpertTask.bytes[d]`` is what running the task on ``d`` takes of
``d``'s capacity (a GPU miss stages the expert's weights in the GPU's
staging buffer; an expert in striped layout assigned to a DIMM must first be
gathered into it; an expert already resident takes nothing). A placement
never exceeds a capacity: a task with no device that has room raises
:class:`InfeasibleSchedule` (naming the expert and the devices' free bytes)
rather than returning an over-full placement.

Cost: the greedy pass is ``O(T D)``, each refinement iteration ``O(T_b D)``
for ``T_b`` tasks on the bottleneck; :attr:`Schedule.seconds` records the
wall time of the call (the scenario reports it per layer).
"""

import dataclasses
import math
import time

__all__ = ["Device", "ExpertTask", "Schedule", "InfeasibleSchedule", "schedule", "DOMAINS"]

DOMAINS = ("gpu", "cpu", "ndp")
#: loads closer than this (seconds) count as equal: a move must win by more than float noise
EPS = 1e-15


class InfeasibleSchedule(ValueError):
    """No device has the capacity left for a task."""


@dataclasses.dataclass(frozen=True)
class Device:
    name: str
    domain: str                    # "gpu", "cpu" or "ndp"
    capacity: float = math.inf     # bytes a placement may use on it

    def __post_init__(self):
        if self.domain not in DOMAINS:
            raise ValueError(f"device {self.name!r}: domain must be one of {DOMAINS}, "
                             f"got {self.domain!r}")
        if not self.capacity >= 0:
            raise ValueError(f"device {self.name!r}: capacity must be >= 0, got {self.capacity!r}")


@dataclasses.dataclass(frozen=True)
class ExpertTask:
    expert: int
    tokens: int
    times: dict                    # device name -> seconds on it (only devices it may run on)
    bytes: dict = dataclasses.field(default_factory=dict)   # device name -> capacity used (default 0)

    def __post_init__(self):
        if not self.times:
            raise ValueError(f"expert {self.expert}: no device can run it")
        bad = {d: t for d, t in self.times.items() if not (t >= 0 and math.isfinite(t))}
        if bad:
            raise ValueError(f"expert {self.expert}: times must be finite and >= 0, got {bad}")
        if any(not b >= 0 for b in self.bytes.values()):
            raise ValueError(f"expert {self.expert}: bytes must be >= 0, got {self.bytes}")


@dataclasses.dataclass
class Schedule:
    assignment: dict               # expert -> device name
    loads: dict                    # device name -> seconds
    used: dict                     # device name -> capacity bytes used
    initial_makespan: float        # after the greedy pass
    makespan: float
    iterations: int                # refinement moves applied
    seconds: float                 # wall time of scheduling

    def domain_of(self, devices) -> dict:
        """expert -> domain, given the devices the schedule was made for."""
        dom = {d.name: d.domain for d in devices}
        return {e: dom[d] for e, d in self.assignment.items()}


def _check(tasks, devices):
    names = [d.name for d in devices]
    if not devices or len(set(names)) != len(names):
        raise ValueError(f"devices must be non-empty with distinct names, got {names}")
    experts = [t.expert for t in tasks]
    if len(set(experts)) != len(experts):
        raise ValueError("each expert may appear once per layer")
    known = set(names)
    for t in tasks:
        unknown = set(t.times) - known | set(t.bytes) - known
        if unknown:
            raise ValueError(f"expert {t.expert}: unknown devices {sorted(unknown)}")


def schedule(tasks, devices, max_iterations: int = 10_000) -> Schedule:
    """Place ``tasks`` (ExpertTask) on ``devices`` (Device); see the module docstring."""
    start = time.perf_counter()
    tasks, devices = list(tasks), list(devices)
    _check(tasks, devices)
    capacity = {d.name: d.capacity for d in devices}
    load = {d.name: 0.0 for d in devices}
    used = {d.name: 0.0 for d in devices}
    where = {}
    by_expert = {t.expert: t for t in tasks}

    def fits(t, d):
        return used[d] + t.bytes.get(d, 0.0) <= capacity[d]

    for t in sorted(tasks, key=lambda t: (-min(t.times.values()), t.expert)):
        options = [d for d in t.times if fits(t, d)]
        if not options:
            free = {d: capacity[d] - used[d] for d in t.times}
            raise InfeasibleSchedule(f"expert {t.expert} ({t.tokens} tokens) fits no device: "
                                     f"needs {t.bytes}, free {free}")
        d = min(options, key=lambda d: (load[d] + t.times[d], d))
        where[t.expert] = d
        load[d] += t.times[d]
        used[d] += t.bytes.get(d, 0.0)
    initial = max(load.values())

    iterations = 0
    while iterations < max_iterations:
        b = max(load, key=lambda d: (load[d], d))
        top = load[b]
        on_b = sorted((e for e, d in where.items() if d == b),
                      key=lambda e: (-by_expert[e].times[b], e))
        move = None
        for e in on_b:
            t = by_expert[e]
            after_b = top - t.times[b]
            for d in sorted(t.times, key=lambda d: (load[d] + t.times[d], d)):
                if d != b and fits(t, d) and load[d] + t.times[d] < top - EPS and after_b < top - EPS:
                    move = (e, d)
                    break
            if move:
                break
        if move is None:
            break
        e, d = move
        t = by_expert[e]
        load[b] -= t.times[b]
        used[b] -= t.bytes.get(b, 0.0)
        load[d] += t.times[d]
        used[d] += t.bytes.get(d, 0.0)
        where[e] = d
        iterations += 1
    return Schedule(where, load, used, initial, max(load.values()), iterations,
                    time.perf_counter() - start)
