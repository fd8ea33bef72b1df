"""Discrete-event simulator of one 8-GPU serving node under a node power cap (RAPID scenario).

What it simulates, event by event (a heap of timed callbacks; no fixed time step):

* **Requests** arrive from a :class:`~ndpdimm.sw.scenarios.rapid.workload.Trace` into one FIFO prefill
  queue. TTFT is from arrival to the end of the request's prefill (the first token); TPOT is
  ``(finish - first token) / (output tokens - 1)``, so any wait for decode counts against it.
* **Prefill workers** take batches from the queue head (up to ``max_prefill_tokens`` prompt
  tokens, at least one request). A batch's time is :meth:`ServingPerf.prefill_seconds` at the
  GPU's effective cap.
* **KV ring**: a finished request's KV cache is copied into a ring of ``slots`` (the producer
  index claims the next free slot; the copy takes ``kv path latency + bytes / bandwidth`` on the
  prefill GPU's outbound link, copies from one GPU one after another; then the slot's ready
  flag is set). Decode workers consume slots strictly in ring order (consumer index). A full
  ring stalls the producer: a prefill GPU with un-pushed outputs starts no new batch.
* **Decode workers** batch continuously: an iteration serves every running request once
  (one token each); requests that arrived meanwhile join at the next iteration boundary. A
  request is admitted only when its whole KV (input + output tokens) fits the worker's free
  capacity and the batch has room (``max_decode_batch``); the ring's head slot goes to the
  decode worker with the most free KV capacity.
* **Coalesced baseline** (no disaggregation): every GPU serves both phases for the requests it
  admitted, prefill first (a waiting prompt that fits its memory pre-empts the next decode
  iteration, as vLLM schedules without chunked prefill); KV never moves.
* **Power**: each GPU's effective cap (:class:`~ndpdimm.sw.scenarios.rapid.power.PowerLedger`) sets its
  phase speed (:class:`~ndpdimm.sw.scenarios.rapid.catalog.PhasePower`). When a cap settles during a
  batch, the batch's remaining share is re-timed at the new speed. A busy GPU draws
  ``min(cap, busy_draw_max_w)`` of its phase, an idle or switching one ``gpu_idle_w``; energy
  and each phase's busy time (:meth:`ServingSim.busy_seconds`) are integrated exactly between
  changes. The node stays within its budget at every instant, checked at the end of the run
  (:class:`SimulationError` otherwise): the reservations' peak, and the GPUs' peak draw plus the
  NDP-DIMM tier's reserve.
* **Role switch** (controller's second lever): a prefill GPU finishes its batch and pushes its
  outputs first; a decode GPU hands its requests (running and waiting) to the other decode
  workers at its next iteration boundary: their KV is copied over the KV path (no copy with the
  NDP tier: the KV stays on the shared DIMMs), and they join the target's next iteration;
  handed-over requests that find no room wait, ahead of the ring, until some decode worker has
  room. The GPU then spends ``role_switch_s`` idle before serving its new phase.
* **Controller** (:mod:`ndpdimm.sw.scenarios.rapid.controller`) runs every ``tick_s`` and acts through
  :meth:`ServingSim.move_power`, :meth:`ServingSim.set_caps` (time-shifting) and
  :meth:`ServingSim.switch_role`.

With ``record=True`` the simulator also keeps what it scheduled, for ``--timeline``
(``sw/scenarios/rapid/timeline.py``): ``work_log`` (GPU, phase, start, end, arguments: every
prefill batch and decode iteration as it actually ran, re-timing included), ``kv_log``
(GPU, kind, start, end, request: every KV copy on a GPU's outbound link) and ``switch_log``
(GPU, from, to, start, end: role switches); the caps come from the ledger's ``changes`` and
the queue depths from ``samples``.

A request is served exactly once: the simulator raises :class:`SimulationError` if a request
would finish twice or finish having decoded other than ``output - 1`` tokens (hand-overs
included), and the run ends when every request has finished (checked).
"""

import collections
import heapq
import math

import numpy as np

from ndpdimm.sw.kernels.attention import Shape as AttentionShape
from ndpdimm.sw.scenarios.rapid.costs import ServingPerf
from ndpdimm.sw.scenarios.rapid.levers import Levers
from ndpdimm.sw.scenarios.rapid.power import PowerLedger

__all__ = ["ServingSim", "SimulationError", "ROLES"]

ROLES = ("prefill", "decode", "coalesced")


class SimulationError(RuntimeError):
    """The simulation broke one of its own invariants (a bug, never a workload property)."""


class _Request:
    __slots__ = ("rid", "arrival", "inp", "out", "kv_bytes", "first_token", "finish",
                 "prefill_gpu", "decode_gpus", "join_step", "generated", "migrations")

    def __init__(self, rid, arrival, inp, out, kv_bytes):
        self.rid, self.arrival, self.inp, self.out, self.kv_bytes = rid, arrival, inp, out, kv_bytes
        self.first_token = self.finish = math.nan
        self.prefill_gpu = -1
        self.decode_gpus = []
        self.join_step = 0
        self.generated = 0             # tokens decoded before the last hand-over
        self.migrations = 0


class _Gpu:
    def __init__(self, gid, role):
        self.gid, self.role = gid, role
        self.switch_to = None          # role it is draining towards
        self.busy = None               # "prefill" / "decode" while working
        self.work_began, self.work_args = 0.0, {}    # the running work's start and arguments
        self.version = 0               # bumps when the running work is re-timed
        self.work = None               # (start, duration, fixed_s, scalable_s, speed phase)
        self.batch = []                # prefill batch in flight
        self.outbox = collections.deque()    # prefilled requests waiting for a ring slot
        self.link_free = 0.0           # outbound KV link busy until
        self.running = {}              # decode: rid -> request
        self.pending = []              # decode: admitted, join at the next iteration
        self.finish_heap = []          # (finish step, rid)
        self.step = 0
        self.ctx_sum = 0
        self.kv_used = 0.0
        self.draw = 0.0
        self.last_t = 0.0
        self.energy = 0.0
        self.counted = None            # the phase busy since last_t, or None
        self.busy_s = {"prefill": 0.0, "decode": 0.0}    # busy seconds per phase until last_t
        self.iterations = 0


class _Window:
    """Timestamped values, oldest first (two deques so reading the values is one C call)."""

    def __init__(self):
        self.times, self.values = collections.deque(), collections.deque()

    def append(self, item):
        self.times.append(item[0])
        self.values.append(item[1])

    def since(self, t0) -> list:
        while self.times and self.times[0] < t0:
            self.times.popleft()
            self.values.popleft()
        return list(self.values)


class ServingSim(Levers):
    """One run: ``roles`` and ``caps`` per GPU at start, ``controller`` (or ``None``: static)."""

    def __init__(self, perf: ServingPerf, trace, roles, caps, kv_path: str = "direct",
                 controller=None, slo_ttft_s: float = math.inf, slo_tpot_s: float = math.inf,
                 progress=None, record: bool = False, kernels=None):
        node = perf.node
        if len(roles) != node.node.gpus or len(caps) != node.node.gpus:
            raise ValueError(f"need a role and a cap for each of the {node.node.gpus} GPUs, got "
                             f"{len(roles)} roles and {len(caps)} caps")
        for r in roles:
            if r not in ROLES:
                raise ValueError(f"role must be one of {', '.join(ROLES)}, got {r!r}")
        coalesced = "coalesced" in roles
        if coalesced and any(r != "coalesced" for r in roles):
            raise ValueError(f"a coalesced node has every GPU coalesced, got {list(roles)}")
        if coalesced and perf.ndp is not None:
            raise ValueError("the NDP-DIMM decode tier needs disaggregated decode workers")
        if not coalesced:
            for phase in ("prefill", "decode"):
                if roles.count(phase) < node.controller.min_gpus_per_phase:
                    raise ValueError(f"at least {node.controller.min_gpus_per_phase} GPU(s) per "
                                     f"phase, got roles {list(roles)}")
        self.perf, self.node = perf, node
        self.kv_path_name = "host" if perf.ndp is not None else kv_path
        self.kv = node.kv_path(self.kv_path_name)
        c = node.controller
        self.ledger = PowerLedger(caps, node.node.power_budget_w, node.node.gpu_min_cap_w,
                                  node.node.gpu_max_cap_w, c.power_command_s, c.power_settle_s,
                                  perf.ndp_reserved_w)
        self.gpus = [_Gpu(i, r) for i, r in enumerate(roles)]
        self.controller = controller
        self.slo_ttft_s, self.slo_tpot_s = slo_ttft_s, slo_tpot_s
        kvb = perf.kv_bytes_per_token
        self.requests = [_Request(i, float(a), int(n), int(o), (int(n) + int(o)) * kvb)
                         for i, (a, n, o) in enumerate(zip(trace.arrival_s, trace.input_tokens,
                                                           trace.output_tokens))]
        long = [r for r in self.requests if r.inp + r.out > perf.model.max_positions]
        if long:
            r = long[0]
            raise ValueError(f"request {r.rid} ({r.inp} + {r.out} tokens) exceeds the model's "
                             f"{perf.model.max_positions} positions")
        cap = perf.kv_capacity_bytes(1 if coalesced else max(1, roles.count("decode")))
        too_big = [r for r in self.requests if r.kv_bytes > cap]
        if too_big:
            r = too_big[0]
            raise ValueError(f"request {r.rid} ({r.inp} + {r.out} tokens, "
                             f"{r.kv_bytes / 1e9:.2f} GB of KV) cannot fit one worker's KV "
                             f"capacity of {cap / 1e9:.2f} GB")
        self.queue = collections.deque()
        self.ring = [None] * node.ring.slots
        self.ring_head = self.ring_tail = 0
        self.decode_wait = collections.deque()
        self.events = []
        self._seq = 0
        self.t = 0.0
        self.finished = 0
        self.ttft_window = _Window()                # first-token times, TTFT
        self.tpot_window = _Window()                # finish times, TPOT
        self.step_window = _Window()                # decode iteration ends, their seconds
        self.total_draw = 0.0
        self.max_draw_w = 0.0
        self.ndp_joules = 0.0
        self.actions = []                           # (time, kind, detail)
        self.samples = []
        self.tick_s = c.tick_s
        self.power_busy_until = 0.0
        self.progress = progress
        self.record = record
        self.work_log, self.kv_log, self.switch_log = [], [], []
        self.kernels = kernels      # a KernelLog of the NDP attention kernels (--rtl-samples)
        for g in self.gpus:
            self._set_draw(g)

    # ---- event heap ----
    def at(self, t, fn, *args):
        self._seq += 1
        heapq.heappush(self.events, (t, self._seq, fn, args))

    def run(self):
        """Simulate until every request has finished; returns ``self``."""
        for r in self.requests:
            self.at(r.arrival, self._arrive, r)
        self.at(0.0, self._tick)
        n, report_every = len(self.requests), max(1, len(self.requests) // 100)
        while self.events and self.finished < n:
            t, _, fn, args = heapq.heappop(self.events)
            self.t = t
            before = self.finished
            fn(*args)
            if self.progress and self.finished // report_every != before // report_every:
                self.progress(self.finished, n)
        if self.finished != n:
            raise SimulationError(f"simulation stalled at t={self.t:.3f} s with "
                                  f"{n - self.finished} of {n} requests unfinished")
        for g in self.gpus:
            self._set_draw(g)
        self.end_t = self.t
        self._check_budget()
        return self

    def _check_budget(self):
        """:class:`SimulationError` unless the node stayed within its budget at every instant."""
        led = self.ledger
        if led.max_reserved_w > led.budget_w + 1e-9 or \
                self.max_draw_w + led.reserved_other_w > led.budget_w + 1e-9:
            raise SimulationError(
                f"the node exceeded its {led.budget_w:.0f} W budget: reservations peaked at "
                f"{led.max_reserved_w:.1f} W, GPU draw at {self.max_draw_w:.1f} W plus "
                f"{led.reserved_other_w:.1f} W reserved for the NDP-DIMM tier")

    # ---- power and energy ----
    def _phase_draw(self, g) -> float:
        if g.busy is None:
            return self.node.node.gpu_idle_w
        return self.node.phase_power(g.busy).busy_draw_w(self.ledger.cap[g.gid])

    def _set_draw(self, g):
        g.energy += g.draw * (self.t - g.last_t)
        if g.counted is not None:
            g.busy_s[g.counted] += self.t - g.last_t
        g.counted = g.busy
        g.last_t = self.t
        new = self._phase_draw(g)
        self.total_draw += new - g.draw
        g.draw = new
        self.max_draw_w = max(self.max_draw_w, self.total_draw)

    def _speed(self, g, phase) -> float:
        return self.node.phase_power(phase).speed(self.ledger.cap[g.gid])

    def _start(self, g, phase, fixed_s, scalable_s, done):
        g.busy = phase
        g.version += 1
        dur = fixed_s + scalable_s / self._speed(g, phase)
        g.work = [self.t, dur, fixed_s, scalable_s, done]
        g.work_began = self.t
        self._set_draw(g)
        self.at(self.t + dur, self._work_done, g, g.version)
        return dur

    def _retime(self, g):
        """The cap changed mid-work: the remaining share runs at the new speed."""
        start, dur, fixed_s, scalable_s, done = g.work
        left = 1.0 - (self.t - start) / dur if dur > 0 else 0.0
        new_dur = fixed_s + scalable_s / self._speed(g, g.busy)
        g.version += 1
        g.work = [self.t - (1 - left) * new_dur, new_dur, fixed_s, scalable_s, done]
        self.at(self.t + left * new_dur, self._work_done, g, g.version)

    def _work_done(self, g, version):
        if version != g.version:
            return
        start, dur, _, _, done = g.work
        if self.record:
            self.work_log.append((g.gid, g.busy, g.work_began, self.t, g.work_args))
        g.busy, g.work = None, None
        self._set_draw(g)
        done(g, dur)

    def _arrive(self, r):
        self.queue.append(r)
        self._dispatch_prefill()

    def _dispatch_prefill(self):
        for g in self.gpus:
            if not self.queue:
                return
            if g.busy is not None or g.switch_to is not None:
                continue
            if g.role == "prefill" and not g.outbox:
                self._start_prefill(g, self._take_batch(g, math.inf))
            elif g.role == "coalesced":
                self._coalesced_next(g)

    def _take_batch(self, g, kv_free):
        batch, tokens = [], 0
        limit = self.node.gpu.max_prefill_tokens
        while self.queue:
            r = self.queue[0]
            if batch and tokens + r.inp > limit or r.kv_bytes > kv_free:
                break
            if g.role == "coalesced" and len(g.running) + len(g.pending) + len(batch) \
                    >= self.node.gpu.max_decode_batch:
                break
            self.queue.popleft()
            batch.append(r)
            tokens += r.inp
            kv_free -= r.kv_bytes
        return batch

    def _start_prefill(self, g, batch):
        if not batch:
            return False
        fixed, scalable = self.perf.prefill_parts(sum(r.inp for r in batch), len(batch),
                                                  float(sum(r.inp * r.inp for r in batch)))
        for r in batch:
            r.prefill_gpu = g.gid
        g.batch = batch
        if self.record:
            g.work_args = {"requests": [r.rid for r in batch],
                           "prompt_tokens": sum(r.inp for r in batch)}
        if g.role == "coalesced":
            g.kv_used += sum(r.kv_bytes for r in batch)
        self._start(g, "prefill", fixed, scalable, self._prefill_done)
        return True

    def _prefill_done(self, g, dur):
        batch, g.batch = g.batch, []
        for r in batch:
            r.first_token = self.t
            self.ttft_window.append((self.t, self.t - r.arrival))
        for r in batch:
            if r.out == 1:
                if g.role == "coalesced":
                    g.kv_used -= r.kv_bytes
                self._finish(r)
            elif g.role == "coalesced":
                g.pending.append(r)
            else:
                g.outbox.append(r)
        if g.role == "coalesced":
            self._coalesced_next(g)
            return
        self._push_outboxes()
        self._idle(g)

    def _push_outboxes(self):
        """Producers claim free ring slots in order (oldest output first across GPUs)."""
        while True:
            if self.ring[self.ring_head] is not None:
                return
            waiting = [g for g in self.gpus if g.outbox]
            if not waiting:
                return
            g = min(waiting, key=lambda g: g.outbox[0].first_token)
            r = g.outbox.popleft()
            slot = self.ring_head
            self.ring[slot] = ["writing", r]
            self.ring_head = (slot + 1) % len(self.ring)
            start = max(self.t, g.link_free)
            g.link_free = start + self.kv.seconds(r.inp * self.perf.kv_bytes_per_token)
            if self.record:
                self.kv_log.append((g.gid, f"ring slot {slot}", start, g.link_free, r.rid))
            self.at(g.link_free, self._slot_ready, slot)
            if not g.outbox and g.busy is None:
                self._idle(g)

    def _slot_ready(self, slot):
        self.ring[slot][0] = "ready"
        self._consume()

    def _idle(self, g):
        if g.busy is not None:
            return
        if g.switch_to is not None:
            if g.role != "switching":
                self._drain(g)
            return
        if g.role == "prefill" and not g.outbox and self.queue:
            self._start_prefill(g, self._take_batch(g, math.inf))
        elif g.role == "decode" and (g.running or g.pending):
            self._start_decode(g)

    # ---- decode ----
    def _decode_gpus(self) -> int:
        """GPUs in the decode role (draining ones included): they share the NDP-DIMM pool."""
        return max(1, sum(1 for g in self.gpus if g.role == "decode"))

    def _kv_cap(self):
        return self.perf.kv_capacity_bytes(self._decode_gpus())

    def _place(self, r):
        """The decode worker with the most free KV that can take ``r``, or ``None``."""
        cap, best = self._kv_cap(), None
        for g in self.active("decode"):
            free = cap - g.kv_used
            if free >= r.kv_bytes and len(g.running) + len(g.pending) < self.node.gpu.max_decode_batch \
                    and (best is None or free > cap - best.kv_used):
                best = g
        return best

    def _consume(self):
        """Hand-overs first, then ring slots in ring order, while a decode worker has room."""
        changed = False
        while True:
            if self.decode_wait:
                r = self.decode_wait[0]
            else:
                slot = self.ring[self.ring_tail]
                if slot is None or slot[0] != "ready":
                    break
                r = slot[1]
            g = self._place(r)
            if g is None:
                break
            if self.decode_wait:
                self.decode_wait.popleft()
            else:
                self.ring[self.ring_tail] = None
                self.ring_tail = (self.ring_tail + 1) % len(self.ring)
                changed = True
            g.pending.append(r)
            g.kv_used += r.kv_bytes
            if g.busy is None:
                self._start_decode(g)
        if changed:
            self._push_outboxes()
            self._dispatch_prefill()

    def _start_decode(self, g):
        for r in g.pending:
            r.join_step = g.step
            r.decode_gpus.append(g.gid)
            g.running[r.rid] = r
            g.ctx_sum += r.inp + 1 + r.generated
            heapq.heappush(g.finish_heap, (g.step + r.out - 1 - r.generated, r.rid))
        g.pending = []
        b, c = len(g.running), g.ctx_sum
        if self.record:
            g.work_args = {"batch": b, "context_tokens": c, "iteration": g.step}
        ndecode = self._decode_gpus()
        fixed, scalable = self.perf.decode_parts(b, c, ndecode)
        if self.perf.ndp is not None:
            attention = self.perf.ndp_attention_seconds(b, c, ndecode)
            if self.kernels is not None and b:
                self._log_attention(b, c)
            self.ndp_joules += self.perf.ndp_attention_joules(b, c, attention, ndecode)
        self._start(g, "decode", fixed, scalable, self._decode_done)

    def _log_attention(self, b, c):
        """The iteration's NDP attention kernels (``--rtl-samples``): one per request, layer and
        K/V head, at the batch's mean context, each charged its share of the line's cycles."""
        m, a = self.perf.model, self.perf.ndp
        self.kernels.add(AttentionShape(context=max(1, round(c / b)), head_dim=m.head_dim,
                                         group=m.heads // m.kv_heads),
                         a.fixed_cycles + a.slope_cycles * c / b, count=b * m.layers * m.kv_heads)

    def _decode_done(self, g, dur):
        g.step += 1
        g.iterations += 1
        g.ctx_sum += len(g.running)
        self.step_window.append((self.t, dur))
        freed = False
        while g.finish_heap and g.finish_heap[0][0] <= g.step:
            _, rid = heapq.heappop(g.finish_heap)
            r = g.running.pop(rid)
            if r.generated + g.step - r.join_step != r.out - 1:
                raise SimulationError(f"request {r.rid} decoded {r.generated + g.step - r.join_step}"
                                      f" tokens, not {r.out - 1}")
            g.ctx_sum -= r.inp + r.out
            g.kv_used -= r.kv_bytes
            self._finish(r)
            freed = True
        if g.role == "coalesced":
            self._coalesced_next(g)
        elif g.switch_to is not None:
            self._drain(g)
        elif g.running or g.pending:
            self._start_decode(g)
        if freed:
            self._consume()

    def _coalesced_next(self, g):
        if g.busy is not None:
            return
        cap = self.perf.kv_capacity_bytes(1)
        if self.queue and self._start_prefill(g, self._take_batch(g, cap - g.kv_used)):
            return
        if g.running or g.pending:
            self._start_decode(g)

    def _finish(self, r):
        if not math.isnan(r.finish):
            raise SimulationError(f"request {r.rid} finished twice")
        r.finish = self.t
        self.finished += 1
        if r.out > 1:
            self.tpot_window.append((self.t, (r.finish - r.first_token) / (r.out - 1)))

    # ---- controller and samples ----
    def _tick(self):
        if self.controller is not None:
            self.controller.tick(self)
        self._sample()
        if self.finished < len(self.requests):
            self.at(self.t + self.tick_s, self._tick)

    def ring_backlog(self) -> int:
        """KV ring slots in use plus prefilled or handed-over requests waiting for one."""
        return (sum(1 for s in self.ring if s is not None) + sum(len(g.outbox) for g in self.gpus)
                + len(self.decode_wait))

    def window(self, window: "_Window", window_s: float) -> list:
        """The values recorded in the last ``window_s`` seconds (older ones dropped)."""
        return window.since(self.t - window_s)

    def _sample(self):
        ring_ready = sum(1 for s in self.ring if s is not None)
        self.samples.append((self.t, tuple(g.role for g in self.gpus),
                             tuple(self.ledger.cap), tuple(g.draw for g in self.gpus),
                             len(self.queue), ring_ready + sum(len(g.outbox) for g in self.gpus),
                             len(self.decode_wait), sum(len(g.running) for g in self.gpus)))

    # ---- results ----
    def latencies(self):
        """Per request: arrival, TTFT, TPOT (0 for one-token outputs), decode hand-overs."""
        rs = self.requests
        arrival = np.array([r.arrival for r in rs])
        ttft = np.array([r.first_token - r.arrival for r in rs])
        tpot = np.array([(r.finish - r.first_token) / (r.out - 1) if r.out > 1 else 0.0
                         for r in rs])
        return arrival, ttft, tpot, np.array([r.migrations for r in rs])

    def busy_seconds(self, phase: str) -> float:
        """GPU-seconds spent on ``phase`` (``"prefill"`` or ``"decode"``) by every GPU so far,
        work under way included."""
        return sum(g.busy_s[phase] + (self.t - g.last_t if g.counted == phase else 0.0)
                   for g in self.gpus)

    def gpu_energy_j(self) -> float:
        return sum(g.energy for g in self.gpus)

    def ndp_energy_j(self) -> float:
        if self.perf.ndp is None:
            return 0.0
        return self.perf.ndp_idle_w * self.end_t + self.ndp_joules
