"""Monotone curves of measured points, shared by the fits of ``fit.py`` and ``attention.py``:
the upper envelope of points, a curve lowered so that ``x / y`` never decreases, and power-law
interpolation between knots (flat beyond them)."""

import numpy as np

__all__ = ["envelope", "at_most_linear", "interp_log"]


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
