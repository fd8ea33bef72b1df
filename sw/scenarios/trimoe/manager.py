"""TriMoE's dynamic data management: EMA load predictor, hot-expert prefetch, layouts, rebalancing.

* :class:`EmaPredictor` - per (layer, expert) an exponential moving average
  of the tokens routed to it: ``ema <- alpha x load + (1 - alpha) x ema``
  (``alpha`` = 0.3 by default), float32, so ``layers x experts x 4`` bytes of
  state (DeepSeek-V2: 59 x 160 x 4 = 37.8 KB). Before each update it scores
  its prediction against the load that arrived: the weighted absolute
  percentage error ``sum |ema - load| / sum load`` and the precision / recall
  of the predicted hot set (experts with ``ema > theta x max ema``) against
  the actual one (``load > theta x max load``).
* :class:`GpuResidency` - which experts of each layer are resident in GPU
  memory (``slots`` per layer). :meth:`GpuResidency.plan_prefetch` names the
  experts whose EMA exceeds ``theta_hot`` (0.7) times the layer's largest EMA
  and are not resident, each replacing the resident expert with the lowest
  EMA (only if that one's EMA is lower); the scenario copies them over PCIe
  while the GPU computes and charges whatever does not fit into the PCIe's
  idle time as migration.
* :class:`ExpertLayout` - where each expert's weights sit in the NDP-DIMMs
  (which are the host's memory): ``STRIPED`` over all DIMMs (the host address
  map's interleave: fastest for the CPU and for GPU misses) or localized on
  one DIMM (the only layout its NDP core can compute). Capacity is tracked
  per DIMM. :meth:`ExpertLayout.localize` localizes a set of experts
  balancing their predicted NDP load over the DIMMs (longest first onto the
  least loaded DIMM with room). :meth:`ExpertLayout.rebalance` moves localized experts from the
  DIMM with the largest predicted load to the one with the smallest while
  that lowers the larger of the two by more than the move costs per step over
  the rebalancing window (at most ``max_moves``), and returns the moves
  (charged as DIMM-Link move time).

Relayout on a change of device choice is decided by the scenario
(``sw/scenarios/trimoe/scenario.py``): a striped expert the scheduler puts on a DIMM is
gathered there first (its relayout time is part of that NDP task); a
localized expert the scheduler gives to the CPU or as a GPU miss is spread
back to striped once the time it lost being read from one DIMM adds up to
the relayout's cost.
"""

import numpy as np

__all__ = ["EmaPredictor", "GpuResidency", "ExpertLayout", "STRIPED"]

STRIPED = -1


def _fraction(name, v, lo=0.0, hi=1.0, open_lo=True):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (
            (lo < v if open_lo else lo <= v) and v <= hi):
        raise ValueError(f"{name} must be in {'(' if open_lo else '['}{lo}, {hi}], got {v!r}")
    return float(v)


def _count(name, v, lo=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


class EmaPredictor:
    """Per (layer, expert) EMA of routed tokens, with accuracy bookkeeping (module docstring)."""

    def __init__(self, layers: int, experts: int, alpha: float = 0.3, theta: float = 0.7):
        self.alpha = _fraction("alpha", alpha)
        self.theta = _fraction("theta", theta)
        self.ema = np.zeros((_count("layers", layers), _count("experts", experts)), np.float32)
        self.seen = np.zeros(layers, bool)
        self.abs_error = 0.0
        self.total_load = 0.0
        self.tp = self.fp = self.fn = 0

    @property
    def state_bytes(self) -> int:
        return self.ema.nbytes

    def predict(self, layer: int) -> np.ndarray:
        return self.ema[layer]

    def hot(self, layer: int) -> np.ndarray:
        e = self.ema[layer]
        return e > self.theta * e.max() if e.max() > 0 else np.zeros_like(e, bool)

    def update(self, layer: int, loads) -> None:
        """Score the prediction for ``layer`` against ``loads`` (tokens per expert), then learn."""
        loads = np.asarray(loads, np.float32)
        if loads.shape != self.ema[layer].shape or (loads < 0).any():
            raise ValueError(f"loads must be {self.ema.shape[1]} counts >= 0, got shape {loads.shape}")
        if self.seen[layer]:
            self.abs_error += float(np.abs(self.ema[layer] - loads).sum())
            self.total_load += float(loads.sum())
            pred = self.hot(layer)
            real = loads > self.theta * loads.max() if loads.max() > 0 else np.zeros_like(pred)
            self.tp += int((pred & real).sum())
            self.fp += int((pred & ~real).sum())
            self.fn += int((~pred & real).sum())
            self.ema[layer] = self.alpha * loads + (1 - self.alpha) * self.ema[layer]
        else:
            self.ema[layer] = loads          # first sight: the EMA starts at the observed load
            self.seen[layer] = True

    def accuracy(self) -> dict:
        wape = self.abs_error / self.total_load if self.total_load else None
        return {"load_wape": wape, "load_accuracy": None if wape is None else max(0.0, 1 - wape),
                "hot_precision": self.tp / (self.tp + self.fp) if self.tp + self.fp else None,
                "hot_recall": self.tp / (self.tp + self.fn) if self.tp + self.fn else None,
                "state_bytes": self.state_bytes, "alpha": self.alpha, "theta": self.theta}


class GpuResidency:
    """Resident experts per layer, ``slots`` each; prefetch planning (module docstring)."""

    def __init__(self, layers: int, experts: int, slots: int, theta_hot: float = 0.7):
        self.experts = _count("experts", experts)
        self.slots = min(_count("slots", slots, 0), experts)
        self.theta_hot = _fraction("theta_hot", theta_hot)
        self.resident = [set() for _ in range(_count("layers", layers))]

    def fill(self, layer: int, ema) -> None:
        """Make the ``slots`` highest-EMA experts resident (initial placement from a profile)."""
        order = np.argsort(-np.asarray(ema), kind="stable")
        self.resident[layer] = set(int(e) for e in order[:self.slots])

    def is_resident(self, layer: int, expert: int) -> bool:
        return expert in self.resident[layer]

    def plan_prefetch(self, layer: int, ema) -> list:
        """``(expert in, expert out or None)`` pairs: hot experts not resident, each replacing the
        lowest-EMA resident one whose EMA is lower."""
        ema = np.asarray(ema)
        if self.slots == 0 or ema.max() <= 0:
            return []
        res = self.resident[layer]
        hot = [int(e) for e in np.argsort(-ema, kind="stable")
               if ema[e] > self.theta_hot * ema.max() and int(e) not in res]
        victims = sorted(res, key=lambda e: (ema[e], e))
        plan = []
        for e in hot:
            if len(res) + sum(1 for _, out in plan if out is None) < self.slots:
                plan.append((e, None))
            elif victims and ema[victims[0]] < ema[e]:
                plan.append((e, victims.pop(0)))
        return plan

    def apply(self, layer: int, plan) -> None:
        for e_in, e_out in plan:
            if e_out is not None:
                self.resident[layer].discard(e_out)
            self.resident[layer].add(e_in)
        if len(self.resident[layer]) > self.slots:
            raise RuntimeError(f"layer {layer}: {len(self.resident[layer])} resident > {self.slots}")


class ExpertLayout:
    """Each expert's layout in the NDP-DIMMs: ``home[layer, expert]`` is a DIMM or STRIPED."""

    def __init__(self, layers: int, experts: int, dimms: int, expert_bytes: int,
                 dimm_capacity: float):
        self.dimms = _count("dimms", dimms)
        self.expert_bytes = _count("expert_bytes", expert_bytes)
        if not dimm_capacity > 0:
            raise ValueError(f"dimm_capacity must be > 0, got {dimm_capacity!r}")
        self.capacity = float(dimm_capacity)
        self.home = np.full((_count("layers", layers), _count("experts", experts)), STRIPED, np.int16)
        # a striped expert takes 1/D of its bytes on every DIMM
        self.used = np.full(dimms, layers * experts * expert_bytes / dimms, float)

    def localized(self, layer: int, expert: int) -> bool:
        return self.home[layer, expert] != STRIPED

    def free(self, dimm: int) -> float:
        return self.capacity - self.used[dimm]

    def set_home(self, layer: int, expert: int, dimm: int) -> None:
        """Change one expert's layout (``dimm`` or STRIPED), keeping the capacity books."""
        old = int(self.home[layer, expert])
        if old == dimm:
            return
        share = self.expert_bytes / self.dimms
        if old == STRIPED:
            self.used -= share
        else:
            self.used[old] -= self.expert_bytes
        if dimm == STRIPED:
            self.used += share
        else:
            self.used[dimm] += self.expert_bytes
        self.home[layer, expert] = dimm
        if (self.used > self.capacity * (1 + 1e-12)).any():
            raise RuntimeError(f"DIMM capacity exceeded: used {self.used.max():.3g} B of "
                               f"{self.capacity:.3g} B")

    def dimm_loads(self, layer: int, weights) -> np.ndarray:
        """Sum of ``weights`` (per expert) of the experts localized on each DIMM."""
        h = self.home[layer]
        out = np.zeros(self.dimms)
        np.add.at(out, h[h != STRIPED], np.asarray(weights, float)[h != STRIPED])
        return out

    def localize(self, layer: int, experts, predicted) -> None:
        """Localize ``experts`` of ``layer``, the longest ``predicted`` NDP time (per expert of the
        layer) first, each onto the DIMM with room whose predicted load is the smallest."""
        predicted = np.asarray(predicted, float)
        load = self.dimm_loads(layer, predicted)
        for e in sorted(experts, key=lambda e: (-predicted[e], e)):
            room = [d for d in range(self.dimms)
                    if self.free(d) >= self.expert_bytes * (1 - 1 / self.dimms)]
            if not room:
                break
            d = min(room, key=lambda d: (load[d], d))
            self.set_home(layer, int(e), d)
            load[d] += predicted[e]

    def rebalance(self, layer: int, predicted, max_moves: int, move_cost=None, horizon: int = 1) -> list:
        """Move localized experts from the most to the least loaded DIMM (by ``predicted`` time
        per expert and step) while the larger of the two drops by more than the move costs
        (``move_cost(from, to)`` seconds, spread over ``horizon`` steps; default free); returns
        ``(expert, from, to)`` moves."""
        predicted = np.asarray(predicted, float)
        moves = []
        for _ in range(_count("max_moves", max_moves, 0)):
            load = self.dimm_loads(layer, predicted)
            hi, lo = int(np.argmax(load)), int(np.argmin(load))
            if hi == lo or self.free(lo) < self.expert_bytes:
                break
            mine = [int(e) for e in np.flatnonzero(self.home[layer] == hi)]
            best = None
            cost = 0.0 if move_cost is None else move_cost(hi, lo) / _count("horizon", horizon)
            for e in sorted(mine, key=lambda e: (-predicted[e], e)):
                gain = load[hi] - max(load[hi] - predicted[e], load[lo] + predicted[e])
                if gain > cost and predicted[e] > 0:
                    best = e
                    break
            if best is None:
                break
            self.set_home(layer, best, lo)
            moves.append((best, hi, lo))
        return moves
