"""Monotone curves of measured points, shared by the fits of ``fit.py`` and ``attention.py``:
the upper envelope of points, a curve lowered so that ``x / y`` never decreases, power-law
interpolation between knots (flat beyond them), and the least-squares fit of a fixed time plus
bytes at a rate."""

import numpy as np

__all__ = ["envelope", "at_most_linear", "interp_log", "fixed_plus_rate"]


def envelope(x, y):
    """Sorted ``x`` and the running maximum of ``y`` along it (duplicates of ``x`` merged)."""
    order = np.argsort(x, kind="stable")
    xs, ys = np.asarray(x, float)[order], np.maximum.accumulate(np.asarray(y, float)[order])
    keep = np.append(xs[1:] != xs[:-1], True)
    return xs[keep], ys[keep]


def at_most_linear(xs, ys):
    """``ys`` lowered where it grows faster than ``xs`` between two knots, so that ``x / y``
    never decreases: a larger transfer or GEMM never takes less time."""
    ys = np.array(ys, float)
    for i in range(1, len(ys)):
        ys[i] = min(ys[i], ys[i - 1] * xs[i] / xs[i - 1])
    return ys


def interp_log(x, xs, ys):
    """Power-law interpolation between knots (linear in log-log), flat beyond them."""
    return np.exp(np.interp(np.log(np.asarray(x, float)), np.log(xs), np.log(ys)))


def fixed_plus_rate(seconds, n_bytes, measured):
    """``(fixed, 1 / rate)`` minimising ``sum(((fixed + n_bytes / rate) - seconds) / measured)^2``
    (linear in both): the relative error against the ``measured`` times of the calls."""
    t = np.asarray(measured, float)
    (fixed, inv_rate), *_ = np.linalg.lstsq(
        np.stack([1 / t, np.asarray(n_bytes, float) / t], axis=1), np.asarray(seconds, float) / t,
        rcond=None)
    return float(fixed), float(inv_rate)
