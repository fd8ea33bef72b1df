"""Fixtures shared by every test folder.

pytest imports the test files in ``importlib`` mode (``pyproject.toml``: the folders mirror
the packages, so file names repeat), naming each after its path (``tests.cosim.dram.test_native``)
without putting the repository on ``sys.path``.
"""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def spawn_importable(monkeypatch):
    """Let ``multiprocessing`` spawn children import the calling test module (for a target
    defined in it): the children start with the parent's ``sys.path``, the repository on it."""
    monkeypatch.syspath_prepend(str(REPO))
