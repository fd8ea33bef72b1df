"""Which code produced a result: the git commit of the checkout this package runs from.

Every committed result (benchmark JSON, calibration files) records it, so a figure can be
traced to the code beside it. Outside a git checkout (an installed wheel) both answer None.
"""

import subprocess
from pathlib import Path

__all__ = ["git_commit", "git_dirty"]

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
