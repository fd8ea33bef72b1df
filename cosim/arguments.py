"""argparse value types shared by the command lines (the ``ndpdimm`` commands of ``sw/commands/``,
``cosim/model/calibrate/command.py``, ``synth/command.py``): a bad value exits with status 2 and a
one-line reason. Every float type refuses NaN and infinity (``float()`` reads ``nan`` and ``inf``).

The output-path types (:func:`output_folder`, :func:`output_file`) check, when the options are
parsed and so before any work, that a run's results can be written where the user asked: a
folder that exists must be a writable folder; one that does not must be creatable (its nearest
existing parent a writable folder). They create nothing: the command makes the folder when it
writes. "Writable" is ``os.access``'s answer, which sees permissions, the user (root writes into a
``chmod 555`` folder) and read-only file systems."""

import argparse
import math
import os
from pathlib import Path

__all__ = ["positive_int", "non_negative_int", "positive_float", "finite_float",
           "output_folder", "output_file"]


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


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK | os.X_OK)


def _creatable(path: Path) -> None:
    """``ArgumentTypeError`` unless the folder ``path`` exists and is writable or can be made."""
    if path.exists():
        if not path.is_dir():
            raise argparse.ArgumentTypeError(f"{str(path)!r} is a file, not a folder")
        if not _writable(path):
            raise argparse.ArgumentTypeError(f"folder {str(path)!r} is not writable")
        return
    above = path.absolute().parent
    while not above.exists():
        above = above.parent
    if not above.is_dir():
        raise argparse.ArgumentTypeError(f"cannot create folder {str(path)!r}: "
                                         f"{str(above)!r} is a file")
    if not _writable(above):
        raise argparse.ArgumentTypeError(f"cannot create folder {str(path)!r}: "
                                         f"{str(above)!r} is not writable")


def output_folder(text: str) -> str:
    """A folder results are written into: an existing writable folder, or one that can be
    created (see the module docstring). Returns ``text``."""
    _creatable(Path(text))
    return text


def output_file(text: str) -> str:
    """A file a result is written to: not a folder, not an existing read-only file, in a folder
    that exists writable or can be created. Returns ``text``."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder, give a file name "
                                         f"(e.g. {str(path / 'result.json')!r})")
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"file {text!r} is not writable")
    _creatable(path.parent)
    return text
