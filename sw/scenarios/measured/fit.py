"""A GPU's achieved throughput fitted to its measured operator table.

**Linear ops.** A linear layer ``Y[m, n] = X[m, k] W^T`` (``m`` tokens) moves
``B = 2 (n k + m k + m n)`` bytes (16-bit elements) and does ``F = 2 m n k`` flops. Its time is

    t = max(t_min, (mem^p + comp^p)^(1/p)),   mem = B / bw(B),   comp = 2 m' n k / fl(m')

* ``bw(B)``: the achieved bandwidth against the bytes moved, the upper envelope of ``B / t``
  over the table's points, non-decreasing in ``B`` (a small transfer cannot fill the memory
  system; a large one reaches the card's sustained rate) but never faster than ``B`` (so
  ``B / bw(B)`` never decreases), power-law between the points and flat beyond them;
* ``m'``: the tokens padded to the GEMM library's tile, ``ceil(m / tile) tile`` above one tile
  (a 272-token GEMM costs what a 320-token one does: the measured tables step every 64 or 128
  tokens); ``tile`` is the one of 1, 32, 64, 128 that fits the table best;
* ``fl(m')``: the achieved FLOP/s at ``m'`` tokens, per padded token count where some op is
  not memory-bound (its memory term under 95 % of its time; the others say nothing of the
  compute rate) the value that minimises the summed absolute log error of the table's ops at
  that count, then made
  non-decreasing in ``m'`` but never faster than ``m'`` (more tokens never take less time),
  power-law between the counts and flat beyond them;
* ``p``: a smooth maximum (4): where both terms are close a kernel is neither purely
  memory- nor compute-bound;
* ``t_min``: the fastest op of the table (linear or element-wise), a launch-and-tail floor.

**Attention** (an attention grid): ``attention.py``. **All-reduce** (tensor parallelism, a
network table: ``gpu-fit --all-reduce``): ``collectives.py``.

**Another card** of no table (:meth:`FittedGpu.scaled`): the fit of a measured card with every
achieved bandwidth scaled by the ratio of the two datasheets' memory bandwidths and every
achieved FLOP/s by the ratio of their tensor peaks (the H100 PCIe from the SXM card's table).

**Element-wise ops**, per class (norm, activation, rotary, embedding, add: ``ops.CLASSES``):
``t = t0 + B / bw``, ``B = 4 x tokens x width`` bytes (a 16-bit element read and one
written), ``t0`` (launch) and ``bw`` of the class by least squares on the relative error.
Small element-wise ops are launch-bound and their data stay in the L2 cache: ``bw`` is an
effective figure, not the DRAM's.

Generalisation: the curves are functions of bytes and tokens, not of op names, so a fit
predicts other shapes of the same GPU (``docs/gpu_model.md`` has the held-out errors). What
it cannot know: a library's choice of a slower kernel at one shape (the RTX 4090 table's
``gate_up_proj`` at 272-320 tokens), and a profiler's own overheads (Vidur's and
LLMServingSim's H100 tables differ by 10-15 % on like shapes).

A fit is a plain dict (:meth:`FittedGpu.as_dict`): it is committed as JSON with its source.
"""

import dataclasses
import math

import numpy as np

from ndpdimm.sw.scenarios.measured.attention import AttentionFit, fit_attention
from ndpdimm.sw.scenarios.measured.collectives import AllReduceFit
from ndpdimm.sw.scenarios.measured.curves import at_most_linear, envelope, fixed_plus_rate, interp_log
from ndpdimm.sw.scenarios.measured.ops import CLASSES, ModelDims, op_shape

__all__ = ["FittedGpu", "fit_gpu", "fit_tables", "linear_points", "elementwise_points", "TILES", "SMOOTH_P"]

TILES = (1, 32, 64, 128)
SMOOTH_P = 4.0
ELEM = 2


def linear_points(tables, dims: ModelDims | None = None) -> list:
    """``(op, tp, m, n, k, seconds)`` of every linear op of ``tables`` (a table's own
    dimensions first, else ``dims``)."""
    out = []
    for t in tables:
        d = t.dims or dims
        for o in t.ops:
            if d is None:
                raise ValueError(f"{t.path}: the profiled model's dimensions are needed (--model)")
            s = op_shape(o.op, d, o.tp)
            if s.kind == "linear":
                out.append((o.op, o.tp, o.tokens, s.n_out, s.n_in, o.seconds))
    return out


def elementwise_points(tables, dims: ModelDims | None = None) -> list:
    """``(class, tp, tokens, width, seconds)`` of every element-wise op of ``tables``."""
    out = []
    for t in tables:
        d = t.dims or dims
        for o in t.ops:
            s = op_shape(o.op, d, o.tp)
            if s.kind == "elementwise":
                out.append((CLASSES[o.op], o.tp, o.tokens, s.width, o.seconds))
    return out


def _padded(m, tile):
    m = np.asarray(m, float)
    return np.where(m > tile, np.ceil(m / tile) * tile, m)


def _smooth_max(a, b, p=SMOOTH_P):
    return (a ** p + b ** p) ** (1 / p)


@dataclasses.dataclass(frozen=True)
class FittedGpu:
    """The fitted model of one GPU (see the module docstring): ``bw_bytes``/``bw`` and
    ``ew_bytes``/``ew_bw`` the bandwidth envelopes (B/s) of linear and element-wise ops,
    ``fl_tokens``/``fl`` the achieved FLOP/s per padded token count, ``tile``, ``t_min`` (s);
    ``elementwise``: per op class ``[t0 (s), bw (B/s)]``; ``source`` the tables it was
    fitted to."""
    gpu: str
    source: str
    tile: int
    t_min: float
    bw_bytes: tuple
    bw: tuple
    fl_tokens: tuple
    fl: tuple
    elementwise: dict = dataclasses.field(default_factory=dict)
    attention: dict = dataclasses.field(default_factory=dict)
    all_reduce: dict = dataclasses.field(default_factory=dict)

    def linear_seconds(self, tokens, n_out, n_in):
        """Time of ``Y[tokens, n_out] = X[tokens, n_in] W^T`` (16-bit; arrays broadcast)."""
        m, n, k = (np.asarray(v, float) for v in (tokens, n_out, n_in))
        n_bytes = ELEM * (n * k + m * k + m * n)
        mem = n_bytes / interp_log(n_bytes, self.bw_bytes, self.bw)
        mp = _padded(m, self.tile)
        comp = 2 * mp * n * k / interp_log(mp, self.fl_tokens, self.fl)
        return np.maximum(self.t_min, _smooth_max(mem, comp))

    def elementwise_seconds(self, op_class: str, tokens, width):
        """Time of an element-wise op of ``op_class`` over ``tokens x width`` 16-bit elements."""
        if op_class not in self.elementwise:
            raise ValueError(f"the fit of {self.gpu} has no element-wise op of class "
                             f"{op_class!r} (it has {', '.join(sorted(self.elementwise)) or 'none'})")
        t0, bw = self.elementwise[op_class]
        return t0 + 2 * ELEM * np.asarray(tokens, float) * np.asarray(width, float) / bw

    def attention_seconds(self, row, dims) -> float:
        """Time of one attention call (an ``AttentionTime`` row's shape) of a model of ``dims``
        (``attention.py``)."""
        if not self.attention:
            raise ValueError(f"the fit of {self.gpu} has no attention (its tables had no grid)")
        return AttentionFit.from_dict(self.attention).seconds(row, dims)

    def attention_corner(self, row, dims) -> bool:
        """Whether the call is in the fit's cache-resident corner (``attention.py``)."""
        return bool(self.attention) and AttentionFit.from_dict(self.attention).is_corner(row, dims)

    def all_reduce_seconds(self, n_bytes: float, workers: int) -> float:
        """One all-reduce of ``n_bytes`` over ``workers`` GPUs of one node (``collectives.py``)."""
        if not self.all_reduce:
            raise ValueError(f"the fit of {self.gpu} has no all-reduce table (gpu-fit --all-reduce)")
        return AllReduceFit.from_dict(self.all_reduce).time(n_bytes, workers)

    def scaled(self, gpu: str, memory: float, compute: float) -> "FittedGpu":
        """This fit carried to another card ``gpu`` whose memory bandwidth is ``memory`` times
        this one's and whose tensor peak is ``compute`` times: every achieved bandwidth (linear,
        element-wise, attention) scales by ``memory``, every achieved FLOP/s by ``compute``; the
        launch floors, the tile, the cache corner's size and the all-reduce times stay."""
        if not (memory > 0 and compute > 0 and math.isfinite(memory) and math.isfinite(compute)):
            raise ValueError(f"scale factors must be positive and finite, got {memory!r}, {compute!r}")
        att = dict(self.attention)
        for k in ("bw", "corner_bw"):
            if k in att:
                att[k] = att[k] * memory
        if att.get("mixed_bw"):
            att["mixed_bw"] = [v * memory for v in att["mixed_bw"]]
        if att.get("fl"):
            att["fl"] = [v * compute for v in att["fl"]]
        return dataclasses.replace(
            self, gpu=gpu, source=f"{self.source} (fit of {self.gpu} x {memory:.4g} bandwidth, "
                                  f"x {compute:.4g} FLOP/s)",
            bw=tuple(v * memory for v in self.bw), fl=tuple(v * compute for v in self.fl),
            elementwise={c: (t0, bw * memory) for c, (t0, bw) in self.elementwise.items()},
            attention=att)

    def as_dict(self) -> dict:
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "elementwise":
                v = {c: list(p) for c, p in v.items()}
            elif isinstance(v, tuple):
                v = list(v)
            out[f.name] = v
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "FittedGpu":
        names = {f.name for f in dataclasses.fields(cls)}
        if set(d) - names or {"gpu", "tile", "t_min", "bw_bytes", "bw", "fl_tokens", "fl"} - set(d):
            raise ValueError(f"not a fitted GPU model: keys {sorted(d)}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else
                          {c: tuple(p) for c, p in v.items()} if k == "elementwise" else v)
                      for k, v in d.items()})


def _fit_linear(points, tile, t_min):
    m, n, k, t = (np.array([p[i] for p in points], float) for i in (2, 3, 4, 5))
    n_bytes = ELEM * (n * k + m * k + m * n)
    bw_x, bw_y = envelope(n_bytes, n_bytes / t)
    bw_y = at_most_linear(bw_x, bw_y)
    mem = n_bytes / interp_log(n_bytes, bw_x, bw_y)
    mp = _padded(m, tile)
    flops = 2 * mp * n * k
    counts, best = [], []
    for c in np.unique(mp):
        i = mp == c
        if np.all(mem[i] >= 0.95 * t[i]):
            continue                  # memory-bound throughout: no word on the compute rate
        cands = np.concatenate([flops[i] / t[i] * s for s in np.geomspace(1.0, 4.0, 41)])
        counts.append(c)
        best.append(min(cands, key=lambda f: float(np.sum(np.abs(
            np.log(_smooth_max(mem[i], flops[i] / f)) - np.log(t[i]))))))
    if not counts:                    # a table of GEMVs only: compute never binds
        counts, best = [1.0], [float(np.max(flops / t)) * 1e3]
    counts = np.array(counts)
    fl = at_most_linear(counts, np.maximum.accumulate(np.array(best)))
    return bw_x, bw_y, counts, fl, t_min


def fit_gpu(gpu: str, source: str, linear: list, elementwise: list = (), attention=(),
            attention_dims: ModelDims | None = None) -> FittedGpu:
    """The fit of ``linear`` points (:func:`linear_points`), ``elementwise`` ones and an
    ``attention`` grid (``AttentionTime`` rows of a model of ``attention_dims``:
    ``attention.py``); the tile of :data:`TILES` with the smallest median absolute error on
    ``linear``."""
    if not linear:
        raise ValueError(f"{source}: no linear op to fit")
    t_min = min(p[-1] for p in [*linear, *elementwise])
    best = None
    for tile in TILES:
        bw_x, bw_y, counts, fl, t_min = _fit_linear(linear, tile, t_min)
        model = FittedGpu(gpu, source, tile, t_min, tuple(bw_x), tuple(bw_y), tuple(counts),
                          tuple(fl))
        err = float(np.median(np.abs(np.log(model.linear_seconds(
            *(np.array([p[i] for p in linear]) for i in (2, 3, 4)))) -
            np.log([p[5] for p in linear]))))
        if best is None or err < best[0] - 1e-12:
            best = (err, model)
    model = best[1]
    classes = {}
    for c in sorted({p[0] for p in elementwise}):
        tok, width, t = (np.array([p[i] for p in elementwise if p[0] == c], float)
                         for i in (2, 3, 4))
        n_bytes = 2 * ELEM * tok * width
        t0, inv_bw = fixed_plus_rate(t, n_bytes, t)
        if inv_bw <= 0:                      # launch-bound throughout: no bandwidth seen
            inv_bw = float(np.min(t / n_bytes)) * 1e-3
        classes[c] = (float(max(t0, 0.0)), float(1 / inv_bw))
    model = dataclasses.replace(model, elementwise=classes)
    if attention:
        model = dataclasses.replace(model, attention=fit_attention(attention, attention_dims).as_dict())
    for name in ("bw", "fl"):
        if not all(math.isfinite(v) and v > 0 for v in getattr(model, name)):
            raise ValueError(f"{source}: the fit of {name} is not positive and finite")
    return model


def fit_tables(gpu: str, groups) -> FittedGpu:
    """The fit of whole profile tables: ``groups`` is ``[(tables, dims), ...]``, each group's
    tables of one profiled model (``dims`` where a table carries none); its ``source`` names
    every table it read. An attention grid of more than one model is refused."""
    grid = [(a, t.dims or d) for ts, d in groups for t in ts for a in t.attention]
    if len({d for _, d in grid}) > 1:
        raise ValueError("attention grids of several models: fit them one --profile at a time")
    source = "; ".join(str(t.path) for ts, _ in groups for t in ts if t.ops or t.attention)
    return fit_gpu(gpu, source, [p for ts, d in groups for p in linear_points(ts, d)],
                   [p for ts, d in groups for p in elementwise_points(ts, d)],
                   [a for a, _ in grid], grid[0][1] if grid else None)
