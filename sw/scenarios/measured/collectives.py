"""Measured all-reduce times (tensor parallelism on several GPUs): Vidur's network table, read and
fitted.

**Table.** Vidur's ``all_reduce.csv`` (``../shared/gpu-profiles/vidur/a100/network/``): one row per
message ``size`` (bytes) and worker count, ``time_stats.all_reduce.median`` in ms, and
``devices_per_node`` (the rows where it equals ``num_workers`` are the all-reduces inside one
node, over NVLink/NVSwitch, the ones read here; the others cross nodes). A missing column, a
count that is not a positive integer or a time that is not a positive finite number is a
:class:`~ndpdimm.sw.scenarios.measured.tables.ProfileError` naming the file and the line.

**Fit**, per worker count ``n``: the time against the message size made non-decreasing (the
minimum over every larger message: a bigger all-reduce never takes less time, so a slow small
one is the profiler's noise, not the collective's cost), kept at the fewest sizes between which
power-law interpolation stays within 2 % (``TOLERANCE``) of that curve, flat below the smallest
and growing linearly in bytes beyond the largest. A worker count between two measured ones is interpolated in the ring
all-reduce's traffic factor ``2 (n - 1) / n`` (the bytes each GPU sends); outside the measured
counts it is an error.
"""

import csv
import dataclasses
import math
from pathlib import Path

import numpy as np

from ndpdimm.sw.scenarios.measured.curves import interp_log
from ndpdimm.sw.scenarios.measured.tables import ProfileError

__all__ = ["AllReduceFit", "read_all_reduce", "fit_all_reduce", "ring_factor", "TOLERANCE"]

TOLERANCE = 0.02
_TIME = "time_stats.all_reduce.median"
_COLUMNS = (_TIME, "num_workers", "size", "devices_per_node")


def ring_factor(workers: int) -> float:
    """Bytes each GPU sends in a ring all-reduce, per byte of the message: ``2 (n - 1) / n``."""
    return 2.0 * (workers - 1) / workers


def read_all_reduce(path) -> dict:
    """``{workers: [(size_bytes, seconds), ...]}`` of the single-node rows of a Vidur
    all-reduce table (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such all-reduce table")
    out: dict = {}
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ProfileError(f"{path}:1: not an all-reduce table: missing column(s) "
                               f"{', '.join(missing)}")
        for line, row in enumerate(reader, start=2):
            vals = {}
            for c in _COLUMNS:
                text = (row.get(c) or "").strip()
                try:
                    v = float(text)
                except ValueError:
                    raise ProfileError(f"{path}:{line}: {c} is {text!r}, not a number") from None
                if not math.isfinite(v) or v <= 0 or (c != _TIME and v != int(v)):
                    raise ProfileError(f"{path}:{line}: {c} must be a positive "
                                       f"{'finite number' if c == _TIME else 'integer'}, got {text!r}")
                vals[c] = v
            n = int(vals["num_workers"])
            if int(vals["devices_per_node"]) == n:
                out.setdefault(n, []).append((int(vals["size"]), vals[_TIME] * 1e-3))
    if not out:
        raise ProfileError(f"{path}: no all-reduce inside one node (devices_per_node = num_workers)")
    return {n: sorted(v) for n, v in sorted(out.items())}


@dataclasses.dataclass(frozen=True)
class AllReduceFit:
    """Per worker count (``workers[i]``) the knots ``sizes[i]`` (bytes) and ``seconds[i]``;
    ``source`` the table."""
    source: str
    workers: tuple
    sizes: tuple
    seconds: tuple

    def time(self, n_bytes: float, workers: int) -> float:
        """One all-reduce of ``n_bytes`` over ``workers`` GPUs of one node (module docstring)."""
        if workers == 1:
            return 0.0
        lo, hi = min(self.workers), max(self.workers)
        if not lo <= workers <= hi:
            raise ValueError(f"all-reduce over {workers} GPUs: the table ({self.source}) measured "
                             f"{', '.join(map(str, self.workers))}")
        if workers in self.workers:
            return self._at(self.workers.index(workers), n_bytes)
        i = max(j for j, w in enumerate(self.workers) if w < workers)
        a, b = self.workers[i], self.workers[i + 1]
        w = (ring_factor(workers) - ring_factor(a)) / (ring_factor(b) - ring_factor(a))
        return (1 - w) * self._at(i, n_bytes) + w * self._at(i + 1, n_bytes)

    def _at(self, i: int, n_bytes: float) -> float:
        xs, ys = self.sizes[i], self.seconds[i]
        if n_bytes > xs[-1]:
            return ys[-1] * n_bytes / xs[-1]
        return float(interp_log(max(n_bytes, 1.0), xs, ys))

    def as_dict(self) -> dict:
        return {"source": self.source, "workers": list(self.workers),
                "sizes": [list(s) for s in self.sizes], "seconds": [list(s) for s in self.seconds]}

    @classmethod
    def from_dict(cls, d: dict) -> "AllReduceFit":
        if set(d) != {"source", "workers", "sizes", "seconds"}:
            raise ValueError(f"not an all-reduce fit: keys {sorted(d)}")
        return cls(d["source"], tuple(d["workers"]), tuple(tuple(s) for s in d["sizes"]),
                   tuple(tuple(s) for s in d["seconds"]))


def _knots(x, t) -> list:
    """Indices of the points kept: from each knot, the farthest point such that the power-law
    line between them stays within ``TOLERANCE`` of every point it passes (``x`` distinct and
    sorted, ``t`` non-decreasing)."""
    keep, i = [0], 0
    lx, lt = np.log(x), np.log(t)
    while i < len(x) - 1:
        j = i + 1
        while j + 1 < len(x):
            seg = slice(i, j + 2)
            line = np.interp(lx[seg], [lx[i], lx[j + 1]], [lt[i], lt[j + 1]])
            if np.max(np.abs(np.exp(line - lt[seg]) - 1)) > TOLERANCE:
                break
            j += 1
        keep.append(j)
        i = j
    return keep


def fit_all_reduce(path) -> AllReduceFit:
    """The fit of the all-reduce table at ``path`` (module docstring)."""
    table = read_all_reduce(path)
    workers, sizes, seconds = [], [], []
    for n, rows in table.items():
        if n == 1:
            continue
        x = np.array([s for s, _ in rows], float)
        t = np.minimum.accumulate(np.array([s for _, s in rows], float)[::-1])[::-1]
        distinct = np.append(x[1:] != x[:-1], True)        # a size measured twice: once
        x, t = x[distinct], t[distinct]
        keep = _knots(x, t)
        workers.append(n)
        sizes.append(tuple(float(v) for v in x[keep]))
        seconds.append(tuple(float(v) for v in t[keep]))
    if not workers:
        raise ProfileError(f"{path}: no all-reduce over more than one GPU")
    return AllReduceFit(str(path), tuple(workers), tuple(sizes), tuple(seconds))
