"""argparse value types shared by the command lines (the ``ndpdimm`` commands of ``sw/commands/``,
``cosim/model/calibrate/command.py``, ``synth/command.py``): a bad value exits with status 2 and a
one-line reason. Every float type refuses NaN and infinity (``float()`` reads ``nan`` and ``inf``)."""

import argparse
import math

__all__ = ["positive_int", "non_negative_int", "positive_float", "finite_float"]


def _int_at_least(text, low: int, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
    return value


def positive_int(text):
    return _int_at_least(text, 1, "a positive integer")


def non_negative_int(text):
    """An int >= 0 (a sample count, a worker count)."""
    return _int_at_least(text, 0, "an int >= 0")


def positive_float(text):
    """A finite number > 0 (seconds, a rate factor)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def finite_float(text):
    """A finite number (no NaN, no infinity); its range is the configuration's to check."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value
