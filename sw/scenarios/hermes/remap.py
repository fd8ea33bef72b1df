"""Hermes' window-based remapping: keep the activated cold neurons balanced across the DIMMs.

The offline placement balances expected work; the actual activations drift
token by token. Every ``window`` tokens the remapper looks at how many
activations each DIMM served in each layer during the window and, in every
layer whose busiest DIMM served more than ``threshold`` times the mean, pairs
the busiest DIMM with the least busy one and swaps neurons between them: the
busiest one's most active neurons against the least busy one's least active
(a swap keeps every DIMM's neuron count, so capacities stay as placed), as
long as a swap narrows the gap between the two and at most ``max_swaps`` per
layer and window. The new placement serves the next window. Each swap moves
two neurons' weights over DIMM-Link; the log records every migration (token,
layer, neuron, from, to).

Imbalance of a token and layer is ``max_d load / mean_d load`` over the DIMMs
(1.0 = perfect; layers with no cold activation are skipped); :func:`replay`
reports its mean over the run with the remapping and, for the same trace and
initial placement, without it.
"""

import dataclasses

import numpy as np

from ndpdimm.sw.scenarios.hermes.traces import ActivationTrace

__all__ = ["RemapResult", "replay", "imbalance", "rebalance_layer"]


@dataclasses.dataclass
class RemapResult:
    imbalance: float              # mean max/mean DIMM load with remapping
    imbalance_static: float       # the same without remapping
    migrations: list              # (token, layer, neuron, from DIMM, to DIMM)
    final_dimm: np.ndarray        # [layers, neurons] placement at the end (-1 = GPU)

    @property
    def migrated_neurons(self) -> int:
        return len(self.migrations)


def imbalance(active: np.ndarray, dimm: np.ndarray, dimms: int) -> tuple:
    """Sum and count of per-(token, layer) ``max/mean`` DIMM loads of ``active`` [token, layer,
    neuron] under placement ``dimm`` [layer, neuron]."""
    total, count = 0.0, 0
    for l in range(dimm.shape[0]):
        cold = dimm[l] >= 0
        if not cold.any():
            continue
        onehot = np.zeros((cold.sum(), dimms))
        onehot[np.arange(cold.sum()), dimm[l, cold]] = 1
        loads = active[:, l][:, cold].astype(np.float64) @ onehot        # [token, dimm]
        mean = loads.mean(axis=1)
        ok = mean > 0
        total += float((loads[ok].max(axis=1) / mean[ok]).sum())
        count += int(ok.sum())
    return total, count


def rebalance_layer(window_active, dimm_row, dimms, max_swaps):
    """Swaps for one layer from one window's activations; returns [(neuron, from, to)]."""
    counts = window_active.sum(axis=0)            # activations per neuron in the window
    cold = dimm_row >= 0
    loads = np.bincount(dimm_row[cold], weights=counts[cold], minlength=dimms)
    busy, idle = int(np.argmax(loads)), int(np.argmin(loads))
    moves = []
    if busy == idle:
        return moves
    hot_side = [int(n) for n in np.flatnonzero(dimm_row == busy)[np.argsort(
        -counts[dimm_row == busy], kind="stable")]]
    cool_side = [int(n) for n in np.flatnonzero(dimm_row == idle)[np.argsort(
        counts[dimm_row == idle], kind="stable")]]
    gap = loads[busy] - loads[idle]
    for a, b in zip(hot_side, cool_side):
        if len(moves) >= 2 * max_swaps:
            break
        delta = counts[a] - counts[b]
        if delta <= 0 or abs(gap - 2 * delta) >= gap:     # the swap must narrow the gap
            continue
        gap -= 2 * delta
        dimm_row[a], dimm_row[b] = idle, busy
        moves += [(a, busy, idle), (b, idle, busy)]
    return moves


def replay(trace: ActivationTrace, dimm: np.ndarray, dimms: int, *, window: int = 32,
           threshold: float = 1.1, max_swaps: int = 64) -> RemapResult:
    """Replay ``trace`` over the placement ``dimm`` ([layer, neuron], -1 for GPU neurons),
    remapping after every window (see the module docstring)."""
    dimm = np.array(dimm, dtype=np.int64)
    if dimm.shape != (trace.layers, trace.neurons):
        raise ValueError(f"placement must be {trace.layers} x {trace.neurons}, got {dimm.shape}")
    if isinstance(dimms, bool) or not isinstance(dimms, int) or dimms < 1 or dimm.max() >= dimms \
            or dimm.min() < -1:
        raise ValueError(f"dimms must be an int above every DIMM index of the placement, "
                         f"got {dimms!r}")
    for name, v in (("window", window), ("max_swaps", max_swaps)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    if not isinstance(threshold, (int, float)) or threshold < 1:
        raise ValueError(f"threshold must be >= 1, got {threshold!r}")
    static_total, static_n = imbalance(trace.active, dimm, dimms)
    total, n = 0.0, 0
    migrations = []
    for start in range(0, trace.tokens, window):
        chunk = trace.active[start:start + window]
        t, k = imbalance(chunk, dimm, dimms)
        total, n = total + t, n + k
        for l in range(trace.layers):
            cold = dimm[l] >= 0
            if not cold.any():
                continue
            loads = np.bincount(dimm[l, cold], weights=chunk[:, l][:, cold].sum(0),
                                minlength=dimms)
            if loads.mean() > 0 and loads.max() > threshold * loads.mean():
                for neuron, frm, to in rebalance_layer(chunk[:, l], dimm[l], dimms, max_swaps):
                    migrations.append((start + len(chunk), l, neuron, frm, to))
    return RemapResult(imbalance=total / n if n else 1.0,
                       imbalance_static=static_total / static_n if static_n else 1.0,
                       migrations=migrations, final_dimm=dimm)
