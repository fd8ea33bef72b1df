"""argparse value types shared by the command lines (``sw/cli.py``, ``cosim/model/calibrate/command.py``,
``cosim/bench_*.py``): a bad value exits with status 2 and a one-line reason."""

import argparse

__all__ = ["positive_int", "non_negative_int"]


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
