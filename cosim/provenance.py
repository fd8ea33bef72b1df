"""Which code produced a result, and the one writer that records it.

Every JSON the project commits (``bench/results/``, ``synth/reports/``, the calibration files
in ``cosim/model/calibration/``, the reproduction outputs) starts with the four fields of
:data:`FIELDS`, so a figure can be traced to the code beside it:

* ``git_commit``: HEAD of the checkout the code ran from (full hash; None outside a checkout,
  e.g. an installed wheel);
* ``git_dirty``: whether tracked files differed from that commit (None outside a checkout;
  also None in the few older files whose writer did not record it);
* ``command``: the command line that reproduces the file (the caller's, else this process's);
* ``date``: when it was written, UTC, ISO 8601 to the second.

:func:`stamp` makes the four fields, :func:`write_result` writes a result with them in front,
:func:`without` is a result read back without them. ``tests/cosim/test_provenance.py`` fails
on a committed result without them, or whose commit is not in the repository's history.
"""

import datetime
import json
import subprocess
import sys
from pathlib import Path

from ndpdimm.hw.config_file import non_finite

__all__ = ["FIELDS", "git_commit", "git_dirty", "now", "command_line", "stamp", "write_result",
           "dumps_finite", "without"]

FIELDS = ("git_commit", "git_dirty", "command", "date")

_HERE = Path(__file__).resolve().parent


def git_commit() -> str | None:
    """HEAD of the checkout this code runs from (None outside one)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              cwd=_HERE, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def git_dirty() -> bool | None:
    """Whether tracked files differ from HEAD (None outside a checkout)."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=_HERE,
                             capture_output=True, text=True, check=True).stdout
        return bool(out.strip())
    except (OSError, subprocess.CalledProcessError):
        return None


def now() -> str:
    """The current time as a result records it: UTC, ISO 8601, seconds."""
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")


def command_line(argv: list[str] | None = None) -> str:
    """The command that runs this process (or ``argv``), as a user types it: ``ndpdimm ARGS``
    for the console script, ``python -m MODULE ARGS`` for a module, else ``python ARGV``."""
    if argv is None:
        orig = getattr(sys, "orig_argv", None) or []
        if len(orig) >= 3 and orig[1] == "-m":
            return " ".join(["python", "-m", *orig[2:]])
        argv = sys.argv
    if argv and Path(argv[0]).name == "ndpdimm":
        return " ".join(["ndpdimm", *argv[1:]])
    return " ".join(["python", *argv])


def stamp(command: str | None = None) -> dict:
    """The provenance fields (:data:`FIELDS`) of a result written now by ``command``
    (default: this process's :func:`command_line`)."""
    return {"git_commit": git_commit(), "git_dirty": git_dirty(),
            "command": command if command is not None else command_line(), "date": now()}


def write_result(data: dict, path, *, command: str | None = None, indent: int = 1,
                 default=None) -> Path:
    """Write the result ``data`` as JSON at ``path`` (folders made) with the provenance fields
    first: ``command`` if given, else ``data``'s own ``command`` (a suite's reproduction line),
    else this process's; ``data``'s other provenance fields are replaced by the current ones.
    ``default`` converts what ``json`` cannot write. A number that is not finite (NaN,
    infinity: not JSON) is a ``ValueError`` naming its key, nothing written: a result that has
    no value holds None (``null``). Returns the path."""
    if not isinstance(data, dict):
        raise TypeError(f"a result is a JSON object (dict), not {type(data).__name__}")
    head = stamp(command if command is not None else data.get("command"))
    body = {k: v for k, v in data.items() if k not in FIELDS}
    path = Path(path)
    text = dumps_finite({**head, **body}, path, indent=indent, default=default)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return path


def dumps_finite(data, path, *, indent: int | None = 1, default=None) -> str:
    """``json.dumps`` with ``allow_nan=False``: a NaN or infinity (which ``json`` would write as
    the bare, non-JSON ``NaN`` / ``Infinity``) is a ``ValueError`` naming ``path`` and the key."""
    try:
        return json.dumps(data, indent=indent, default=default, allow_nan=False)
    except ValueError:
        bad = non_finite(json.loads(json.dumps(data, default=default)))
        if bad is None:
            raise
        raise ValueError(f"{path}: {bad[0] or 'the value'} is {bad[1]!r}, which JSON cannot hold "
                         f"(a result without a value holds None)") from None


def without(doc: dict) -> dict:
    """``doc`` (a result read back) without the provenance fields: what the run computed."""
    return {k: v for k, v in doc.items() if k not in FIELDS}
