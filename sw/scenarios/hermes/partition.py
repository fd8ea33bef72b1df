"""Hermes' offline hot/cold neuron placement: an ILP over neuron groups, then a balanced DIMM split.

Input (:class:`PartitionProblem`): each MLP neuron's firing frequency per
layer (from an activation trace), the bytes of one neuron's weights, the time
one activated neuron costs on the GPU and on an NDP-DIMM, the GPU memory the
neurons may use and the DIMMs' count and capacity.

The objective is the sum over layers of ``max(GPU time, slowest DIMM time)``
with expected times ``sum(frequency x cost)`` of the neurons placed there.

Structure used to make it small enough for the largest models (LLaMA2-70B:
80 layers x 28672 neurons):

1. **Frequency prefixes.** A layer's cost depends only on the work ``W`` it
   puts on the GPU (``max(c_gpu W, c_ndp (W_total - W) / D)``), and its most
   frequent neurons reach any ``W`` with the fewest bytes; so each layer's
   choice is how many of its neurons, in decreasing frequency, go to the GPU
   (optimal up to one neuron's work per layer while the DIMMs' capacity does
   not bind; when it does, other mixes are not considered).
2. **Groups.** Neurons are cut into groups of ``group`` in that order: a
   layer chooses a number of groups. This rounds each layer's threshold to a
   group boundary: at most one group's work per layer
   (:attr:`Partition.group_gap_bound`; the tests compare with ``group=1``).
3. **Symmetric DIMMs.** The DIMMs are charged the layer's NDP work divided by
   their count; after solving, each layer's cold neurons are dealt to the
   DIMMs one by one in decreasing frequency in a snake order (0, 1, .., D-1,
   D-1, .., 0, ...), which keeps both the neuron counts (capacity) and the
   work balanced. The achieved objective with that real split is reported
   next to the ILP's.

ILP (a multiple-choice knapsack): a binary ``x[l, k]`` per layer ``l`` and
option ``k`` (its first ``k`` groups on the GPU), exactly one per layer (layers
with identical frequencies form one class with an integer count per option
instead, which removes the symmetry)::

    minimise   sum_lk cost_lk x_lk,   cost_lk = max(c_gpu W_l(k), c_ndp / D (W_l - W_l(k)))
    subject to sum_k x_lk = 1                                  for every layer
               sum_lk bytes_lk x_lk <= gpu_budget
               total_bytes - sum_lk bytes_lk x_lk <= D * dimm_capacity

(``W_l(k)`` the summed frequencies of the first ``k`` groups). Options past a
layer's cheapest one only cost more and use more GPU memory, so they are left
out unless the DIMM capacity could need them. Solved with HiGHS through PuLP
(CBC as the fallback); the solve time, status, size and objective are in the
:class:`Partition`.

A layer may also have a *dense* block (``dense_bytes`` > 0: Hermes' QKV
projection, computed in full every token; it runs in its own phase, before
the MLP): a layer's option is then a pair ``(k, j)``, ``k`` MLP groups and the
share ``j / dense_levels`` of the block's rows on the GPU, costing the MLP
term plus ``max(j/J g, (1 - j/J) n / D)`` (``g``, ``n`` the whole block's GPU
and one-DIMM times) and using ``j/J dense_bytes`` more GPU memory. Only the
Pareto front of (GPU bytes, cost) is kept per layer (unless DIMM capacity is
tight), which keeps the ILP small (LLaMA2-70B: 2320 binaries, under a
second). The chosen share per layer is :attr:`Partition.dense_gpu_share`.
``hot_groups`` forces the number of MLP groups on the GPU in every layer (a
hot-share sweep); the dense block stays free.

Impossible capacities (the neurons do not fit on GPU + DIMMs) raise
``ValueError`` before solving.
"""

import dataclasses
import time
import warnings

import numpy as np

__all__ = ["PartitionProblem", "Partition", "solve_partition", "snake_split", "cold_counts",
           "cold_pool"]


@dataclasses.dataclass(frozen=True)
class PartitionProblem:
    frequency: np.ndarray              # [layers, neurons], each in [0, 1]
    neuron_bytes: int                  # weights of one neuron (all its MLP rows / columns)
    gpu_seconds_per_neuron: float      # one activated neuron on the GPU
    ndp_seconds_per_neuron: float      # one activated neuron on one DIMM
    gpu_budget_bytes: float            # GPU memory the MLP neurons may use
    dimms: int
    dimm_capacity_bytes: float
    group: int = 256
    dense_bytes: int = 0               # per layer, 0 = no dense block
    dense_gpu_seconds: float = 0.0     # the whole block on the GPU
    dense_ndp_seconds: float = 0.0     # the whole block on one DIMM
    dense_levels: int = 8
    hot_groups: int | None = None

    def __post_init__(self):
        f = self.frequency
        if not isinstance(f, np.ndarray) or f.ndim != 2 or f.size == 0:
            raise ValueError(f"frequency must be a non-empty [layers, neurons] array, got "
                             f"{getattr(f, 'shape', type(f))}")
        if not np.all(np.isfinite(f)) or f.min() < 0 or f.max() > 1:
            raise ValueError("frequency values must be in [0, 1]")
        for name in ("neuron_bytes", "dimms", "group", "dense_levels"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        for name in ("gpu_seconds_per_neuron", "ndp_seconds_per_neuron"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not v > 0:
                raise ValueError(f"{name} must be > 0, got {v!r}")
        for name in ("gpu_budget_bytes", "dimm_capacity_bytes"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0:
                raise ValueError(f"{name} must be >= 0, got {v!r}")
        if isinstance(self.dense_bytes, bool) or not isinstance(self.dense_bytes, int) \
                or self.dense_bytes < 0:
            raise ValueError(f"dense_bytes must be an int >= 0, got {self.dense_bytes!r}")
        for name in ("dense_gpu_seconds", "dense_ndp_seconds"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or v < 0 or (self.dense_bytes and not v > 0):
                raise ValueError(f"{name} must be > 0 with a dense block (>= 0 without), got {v!r}")
        if self.hot_groups is not None:
            top = -(-f.shape[1] // self.group)
            if isinstance(self.hot_groups, bool) or not isinstance(self.hot_groups, int) \
                    or not 0 <= self.hot_groups <= top:
                raise ValueError(f"hot_groups must be an int in [0, {top}], got {self.hot_groups!r}")
        total = f.size * self.neuron_bytes + f.shape[0] * self.dense_bytes
        room = self.gpu_budget_bytes + self.dimms * self.dimm_capacity_bytes
        if total > room:
            raise ValueError(f"impossible capacities: the neurons need {total / 2**30:.2f} GiB, "
                             f"GPU budget + DIMMs hold {room / 2**30:.2f} GiB")


@dataclasses.dataclass
class Partition:
    on_gpu: np.ndarray            # [layers, neurons] bool
    dimm: np.ndarray              # [layers, neurons] int: DIMM index of a cold neuron, -1 on the GPU
    ilp_objective: float          # seconds per token, DIMMs charged work / D
    objective: float              # seconds per token with the real DIMM split
    gpu_seconds: np.ndarray       # [layers]
    dimm_seconds: np.ndarray      # [layers, dimms]
    group_gap_bound: float        # seconds: what grouping can cost at most (one group per layer)
    dense_gpu_share: np.ndarray   # [layers]: share of the dense block's rows on the GPU
    solve_seconds: float
    status: str
    solver: str
    variables: int

    @property
    def hot_share(self) -> float:
        """Share of the neurons placed on the GPU."""
        return float(self.on_gpu.mean())


def snake_split(weights: np.ndarray, dimms: int) -> np.ndarray:
    """DIMM index per item: items in decreasing ``weights`` dealt 0..D-1, D-1..0, ... ."""
    order = np.argsort(-weights, kind="stable")
    lap = np.arange(len(order)) % (2 * dimms)
    slot = np.where(lap < dimms, lap, 2 * dimms - 1 - lap)
    out = np.empty(len(order), dtype=np.int64)
    out[order] = slot
    return out


def cold_counts(dimm: np.ndarray, dimms: int) -> np.ndarray:
    """Cold neurons per DIMM under the placement ``dimm`` (the DIMM of each cold neuron, -1 on
    the GPU): ``[dimms]`` for one layer's row, ``[layers, dimms]`` for a ``[layers, neurons]``
    placement."""
    if dimm.ndim == 1:
        return np.bincount(dimm[dimm >= 0], minlength=dimms)
    return np.stack([cold_counts(row, dimms) for row in dimm])


def cold_pool(dimm: np.ndarray, dimms: int) -> int:
    """The cold neurons a DIMM stores in a layer under the placement ``dimm`` ([layers,
    neurons]): the upper median over layers and DIMMs of :func:`cold_counts` (a count some DIMM
    has; 0 if no neuron is cold)."""
    counts = cold_counts(dimm, dimms).ravel()
    counts = np.sort(counts[counts > 0])
    return int(counts[len(counts) // 2]) if len(counts) else 0


def _groups(freq_row: np.ndarray, group: int):
    order = np.argsort(-freq_row, kind="stable")
    return [order[i:i + group] for i in range(0, len(order), group)]


def solve_partition(problem: PartitionProblem, *, solver: str = "highs",
                    time_limit: float = 600.0, gap: float = 1e-6) -> Partition:
    """Solve ``problem`` (see the module docstring); ``solver`` "highs" or "cbc"."""
    import pulp

    if solver not in ("highs", "cbc"):
        raise ValueError(f"solver must be 'highs' or 'cbc', got {solver!r}")
    p = problem
    layers, neurons = p.frequency.shape
    groups = [_groups(p.frequency[l], p.group) for l in range(layers)]
    total_bytes = layers * (neurons * p.neuron_bytes + p.dense_bytes)
    # options per layer: the k most frequent groups (and the share j / J of the dense block) on
    # the GPU; an option costing more than a cheaper one with fewer GPU bytes can never be chosen
    # (fewer DIMM bytes is its only use, kept while the DIMM capacity could need it)
    shares = np.arange(p.dense_levels + 1) / p.dense_levels if p.dense_bytes else np.zeros(1)
    dense_cost = np.maximum(shares * p.dense_gpu_seconds,
                            (1 - shares) * p.dense_ndp_seconds / p.dimms)
    dense_bytes = shares * p.dense_bytes
    dimm_tight = total_bytes > p.dimms * p.dimm_capacity_bytes - neurons * p.neuron_bytes \
        - p.dense_bytes
    # layers with identical frequencies are interchangeable: one class each, and an integer
    # count of the class's layers per option replaces a binary per layer (the same ILP without
    # its symmetry, which otherwise stalls branch and bound when a trace's layers repeat)
    classes = {}
    for l in range(layers):
        classes.setdefault(p.frequency[l].tobytes(), []).append(l)
    members = list(classes.values())
    options = []
    for l in (m[0] for m in members):
        gs = groups[l]
        w = np.concatenate([[0.0], np.cumsum([p.frequency[l, g].sum() for g in gs])])
        n = np.concatenate([[0], np.cumsum([len(g) for g in gs])])
        cost = np.maximum(p.gpu_seconds_per_neuron * w,
                          p.ndp_seconds_per_neuron / p.dimms * (w[-1] - w))
        ks = range(len(w)) if p.hot_groups is None else [min(p.hot_groups, len(w) - 1)]
        opts = sorted(((int(k), float(f), float(cost[k] + dc), float(n[k] * p.neuron_bytes + db))
                       for k in ks for f, dc, db in zip(shares, dense_cost, dense_bytes)),
                      key=lambda o: (o[3], o[2]))
        if not dimm_tight:          # the Pareto front of (GPU bytes, cost)
            front = []
            for o in opts:
                if not front or o[2] < front[-1][2]:
                    front.append(o)
            opts = front
        options.append(opts)
    prob = pulp.LpProblem("hermes_placement", pulp.LpMinimize)
    x = [[prob.add_variable(f"x_{c}_{i}", lowBound=0, upBound=len(members[c]),
                            cat="Binary" if len(members[c]) == 1 else "Integer")
          for i in range(len(opts))] for c, opts in enumerate(options)]
    prob += pulp.lpSum(o[2] * x[c][i] for c, opts in enumerate(options)
                       for i, o in enumerate(opts))
    for c, m in enumerate(members):
        prob += pulp.lpSum(x[c]) == len(m)
    gpu_bytes = pulp.lpSum(o[3] * x[c][i] for c, opts in enumerate(options)
                           for i, o in enumerate(opts))
    prob += gpu_bytes <= p.gpu_budget_bytes
    prob += total_bytes - gpu_bytes <= p.dimms * p.dimm_capacity_bytes
    if solver == "highs":
        cmd = pulp.HiGHS(msg=False, timeLimit=time_limit, gapRel=gap)
    else:      # the CBC binary PuLP 3 ships (deprecated there for PuLP 4's COIN_CMD)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            cmd = pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit, gapRel=gap)
    t0 = time.perf_counter()
    prob.solve(cmd)
    solve_seconds = time.perf_counter() - t0
    status = pulp.LpStatus[prob.status]
    if status != "Optimal":
        raise RuntimeError(f"the placement ILP ended {status} after {solve_seconds:.1f} s")

    on_gpu = np.zeros((layers, neurons), dtype=bool)
    dense_share = np.zeros(layers)
    for c, opts in enumerate(options):
        chosen = [o for i, o in enumerate(opts) for _ in range(int(round(x[c][i].value())))]
        for l, (k, dense_share[l], _, _) in zip(members[c], chosen):
            for g in groups[l][:k]:
                on_gpu[l, g] = True
    dense_s = np.maximum(dense_share * p.dense_gpu_seconds,
                         (1 - dense_share) * p.dense_ndp_seconds / p.dimms)
    dimm = np.full((layers, neurons), -1, dtype=np.int64)
    gpu_s = np.zeros(layers)
    dimm_s = np.zeros((layers, p.dimms))
    for l in range(layers):
        cold = np.flatnonzero(~on_gpu[l])
        dimm[l, cold] = snake_split(p.frequency[l, cold], p.dimms)
        gpu_s[l] = p.gpu_seconds_per_neuron * p.frequency[l, on_gpu[l]].sum()
        np.add.at(dimm_s[l], dimm[l, cold], p.ndp_seconds_per_neuron * p.frequency[l, cold])
    per_dimm_bytes = np.bincount(dimm[dimm >= 0], minlength=p.dimms) * p.neuron_bytes + \
        (1 - dense_share).sum() * p.dense_bytes / p.dimms
    if per_dimm_bytes.max(initial=0) > p.dimm_capacity_bytes:
        raise RuntimeError(f"the DIMM split needs {per_dimm_bytes.max()} B on one DIMM, more than "
                           f"its {p.dimm_capacity_bytes:.0f} B (capacity within one group of full)")
    bound = sum(max(p.gpu_seconds_per_neuron, p.ndp_seconds_per_neuron / p.dimms) *
                float(np.sort(p.frequency[l])[-p.group:].sum()) for l in range(layers)) \
        if p.group > 1 else 0.0
    return Partition(on_gpu=on_gpu, dimm=dimm, ilp_objective=float(pulp.value(prob.objective)),
                     objective=float(np.maximum(gpu_s, dimm_s.max(axis=1)).sum() + dense_s.sum()),
                     gpu_seconds=gpu_s, dimm_seconds=dimm_s, group_gap_bound=bound,
                     dense_gpu_share=dense_share,
                     solve_seconds=solve_seconds, status=status, solver=solver,
                     variables=sum(len(r) for r in x))
