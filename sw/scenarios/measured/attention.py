"""Attention's time fitted to a measured attention grid (LLMServingSim's ``attention.csv``).

A row of the grid is one attention call: a prefill chunk of ``c`` tokens over ``p`` cached ones
beside ``n`` decoding sequences of context ``s`` each. With the model's ``heads``, ``kv_heads``
and ``head_dim``, the decode part reads its K and V caches,
``B = 4 n s kv_heads head_dim`` bytes (16-bit), and the prefill part does
``F = 4 c (p + (c + 1) / 2) heads head_dim`` flops (causal within the chunk). The fit:

    t = t0 + B / bw(B) + F / fl(c)

* ``t0``: the fastest call of the grid (launch);
* ``bw``: the decode bandwidth, the median of ``B / t`` over the larger half of the decode-only
  calls (DRAM-bound), except in the **cache-resident corner**: decode calls whose caches fit the
  GPU's last-level cache run faster than its DRAM allows. The corner is found in the data, as
  the calls reaching more than 1.15 times the DRAM-bound rate; ``corner_bytes`` is the largest
  cache among them, and the corner holds the calls of smaller caches (``corner_bw``: their
  median rate). The largest is a boundary case: on the RTX 4090 (72 MB of L2), 67 MB of K/V
  run from the cache as one sequence of 16,384 tokens, not as sixteen of 1,024, so the corner
  ends just below it.
* ``fl(c)``: the prefill rate per chunk size, the median of ``F / (t - t0)`` over the
  prefill-only calls of that chunk that are not launch-bound, made non-decreasing, power-law
  between chunks;
* ``mixed_t0(n) + B / mixed_bw(n)``: the decode part of a call that also runs a prefill chunk,
  per count ``n`` of decoding sequences: what is left of the time once the launch and the
  prefill part are taken away, fitted by least squares on the relative error as a fixed time
  (non-decreasing in ``n``) plus the bytes at a rate; between measured counts both are
  interpolated in ``log n``. Such a call runs the decoding sequences in the prefill kernel,
  with little parallelism for a few sequences and a fixed cost per sequence (on the RTX 4090,
  one sequence of 16,384 tokens takes 57 us alone and 507 us beside a 256-token chunk; 64
  sequences of 16 tokens add 84 us to a 16-token chunk, 1.3 us each).

:func:`is_corner` tells a check which rows are in the corner: ``gpu-check`` reports them apart.
"""

import dataclasses

import numpy as np

from ndpdimm.sw.scenarios.measured.curves import fixed_plus_rate, interp_log

__all__ = ["AttentionFit", "fit_attention", "attention_work", "CORNER_FACTOR"]

CORNER_FACTOR = 1.15


def attention_work(row, dims) -> tuple:
    """``(B, F)``: the decode part's cache bytes and the prefill part's flops of one row."""
    hd = dims.head_dim
    n_bytes = 4.0 * row.n_decode * row.kv_decode * dims.kv_heads * hd
    flops = 4.0 * row.prefill_chunk * (row.kv_prefill + (row.prefill_chunk + 1) / 2) * dims.heads * hd
    return n_bytes, flops


@dataclasses.dataclass(frozen=True)
class AttentionFit:
    """See the module docstring; times in s, rates in B/s and FLOP/s."""
    t0: float
    bw: float
    corner_bytes: float
    corner_bw: float
    fl_chunks: tuple
    fl: tuple
    mixed_n: tuple = ()
    mixed_bw: tuple = ()
    mixed_t0: tuple = ()

    def seconds(self, row, dims) -> float:
        n_bytes, flops = attention_work(row, dims)
        pre = 0.0
        if flops:
            pre = flops / float(interp_log(row.prefill_chunk, self.fl_chunks, self.fl))
        if flops and n_bytes and self.mixed_bw:
            rate = float(interp_log(row.n_decode, self.mixed_n, self.mixed_bw))
            fixed = float(np.interp(np.log(row.n_decode), np.log(self.mixed_n), self.mixed_t0)) \
                if self.mixed_t0 else 0.0
            return self.t0 + fixed + n_bytes / rate + pre
        return self.t0 + n_bytes / (self.corner_bw if self.is_corner(row, dims) else self.bw) + pre

    def is_corner(self, row, dims) -> bool:
        """A decode call whose caches fit the last-level cache (the corner of the fit)."""
        n_bytes, _ = attention_work(row, dims)
        return 0 < n_bytes < self.corner_bytes

    def as_dict(self) -> dict:
        return {f.name: (list(v) if isinstance(v, tuple) else v)
                for f in dataclasses.fields(self) for v in (getattr(self, f.name),)}

    @classmethod
    def from_dict(cls, d: dict) -> "AttentionFit":
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


def fit_attention(rows, dims) -> AttentionFit:
    """The fit of an attention grid (``AttentionTime`` rows) for a model of ``dims``."""
    if not rows:
        raise ValueError("no attention rows to fit")
    t = np.array([r.seconds for r in rows])
    t0 = float(t.min())
    work = [attention_work(r, dims) for r in rows]
    dec = [(b, r.seconds) for r, (b, f) in zip(rows, work) if b > 0 and f == 0]
    pre = [(r.prefill_chunk, f, r.seconds) for r, (b, f) in zip(rows, work) if f > 0 and b == 0]
    if not dec or not pre:
        raise ValueError("the attention grid needs decode-only and prefill-only calls")
    dec.sort()
    big = dec[len(dec) // 2:]
    bw = float(np.median([b / (s - t0) for b, s in big]))
    corner = [(b, s) for b, s in dec if s > 2 * t0 and b / (s - t0) > CORNER_FACTOR * bw]
    corner_bytes = max((b for b, _ in corner), default=0.0)
    corner_bw = float(np.median([b / (s - t0) for b, s in corner])) if corner else bw
    chunks = sorted({c for c, _, _ in pre})
    rates = []
    for c in chunks:
        mine = [f / (s - t0) for cc, f, s in pre if cc == c and s > 2 * t0]
        rates.append(float(np.median(mine)) if mine else None)
    known = [(c, r) for c, r in zip(chunks, rates) if r is not None]
    if not known:
        known = [(chunks[-1], max(f / s for _, f, s in pre))]
    fl = np.maximum.accumulate([r for _, r in known])
    fit = AttentionFit(t0, bw, float(corner_bytes), corner_bw,
                       tuple(float(c) for c, _ in known), tuple(float(v) for v in fl))
    # calls that mix a prefill chunk with decoding sequences: the decode part's own rate, what
    # is left of the time once the launch and the prefill part are taken away
    left = [(r.n_decode, b, r.seconds, r.seconds - fit.seconds(
                dataclasses.replace(r, n_decode=0, kv_decode=0), dims))
            for r, (b, f) in zip(rows, work) if b > 0 and f > 0]
    ns, fixed, rates = [], [], []
    for m in sorted({n for n, _, _, _ in left}):
        b, t, x = (np.array([p[i] for p in left if p[0] == m]) for i in (1, 2, 3))
        t_fix, inv_rate = fixed_plus_rate(x, b, t)
        if inv_rate <= 0:                       # no word on the rate at this count
            continue
        ns.append(float(m))
        fixed.append(max(float(t_fix), 0.0))
        rates.append(float(1 / inv_rate))
    if not ns:
        return fit
    return dataclasses.replace(fit, mixed_n=tuple(ns), mixed_bw=tuple(rates),
                               mixed_t0=tuple(float(v) for v in np.maximum.accumulate(fixed)))
