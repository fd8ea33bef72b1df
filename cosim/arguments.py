"""argparse value types shared by the command lines (``sw/cli.py``, ``cosim/model/calibrate.py``,
``cosim/bench_*.py``): a bad value exits with status 2 and a one-line reason."""

import argparse

__all__ = ["positive_int"]


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value
