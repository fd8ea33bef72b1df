"""Fixtures and hooks shared by every test folder.

* pytest imports the test files in ``importlib`` mode (``pyproject.toml``: the folders
  mirror the packages, so file names repeat), naming each after its path
  (``tests.cosim.dram.test_native``) without putting the repository on ``sys.path``;
  ``spawn_importable`` puts it there for tests whose ``multiprocessing`` children
  import the test module.
* Every test starts with the global random generators (``random``, ``numpy.random``,
  torch's default generator) seeded from its node id, so a draw a test makes without
  its own generator is the same in every process and every run; a failing test's
  report names that seed. Tests that draw from their own seeded generator print or
  parametrize their seed themselves.
"""

import random
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def global_seed(nodeid: str) -> int:
    """The seed of a test's global generators: a stable hash of its node id."""
    return zlib.crc32(nodeid.encode())


@pytest.fixture(autouse=True)
def _seeded_global_generators(request):
    seed = global_seed(request.node.nodeid)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    yield


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        report.sections.append(("random seed", f"global generators seeded with {global_seed(item.nodeid)} "
                                               f"(zlib.crc32 of the node id)"))
    return report


@pytest.fixture
def spawn_importable(monkeypatch):
    """Let ``multiprocessing`` spawn children import the calling test module (for a target
    defined in it): the children start with the parent's ``sys.path``, the repository on it."""
    monkeypatch.syspath_prepend(str(REPO))


#: The shared GPU operator tables: ``../shared/gpu-profiles`` beside the checkout (CI has them).
GPU_PROFILES = Path(__file__).resolve().parents[1].parent / "shared" / "gpu-profiles"


@pytest.fixture
def gpu_profiles() -> Path:
    """The shared GPU operator tables' folder; a test that needs them fails without them."""
    assert GPU_PROFILES.is_dir(), f"{GPU_PROFILES}: the shared GPU profiles are missing"
    return GPU_PROFILES
