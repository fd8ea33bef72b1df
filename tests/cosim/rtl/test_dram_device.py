"""``DramDevice.refreshes_owed``: the refresh debt the DRAM benches charge for steady-state figures."""

import pytest

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.rtl.benches.dram_device import DramDevice
from ndpdimm.hw.memory.system import memory_system_from_config


@pytest.fixture(scope="module")
def device():
    ms = memory_system_from_config()
    # no simulator: the clock is never awaited here
    return DramDevice(None, DramModel(ms.org, ms.timing), ms.controller.cmd_layout, clock=object())


def test_owed_counts_due_refreshes_not_issued(device):
    t = device.model.timing
    ranks = device.ranks
    device.refs_per_rank = [0] * ranks
    assert device.refreshes_owed("aligned", t.tREFI - 1) == [0] * ranks
    assert device.refreshes_owed("aligned", 3 * t.tREFI) == [3] * ranks
    device.refs_per_rank = [3] + [1] * (ranks - 1)
    assert device.refreshes_owed("aligned", 3 * t.tREFI) == [0] + [2] * (ranks - 1)
    # a rank that refreshed ahead owes nothing (never a negative debt)
    device.refs_per_rank = [5] * ranks
    assert device.refreshes_owed("aligned", 3 * t.tREFI) == [0] * ranks


def test_staggered_phases(device):
    t = device.model.timing
    ranks = device.ranks
    device.refs_per_rank = [0] * ranks
    # just before the first aligned deadline, rank r has had r / ranks of an interval extra
    owed = device.refreshes_owed("staggered", t.tREFI - 1)
    assert owed == [0] + [1] * (ranks - 1)
    device.cycle = t.tREFI - 1            # the default cycle is the device's own
    assert device.refreshes_owed("staggered") == owed


def test_bad_mode_is_refused(device):
    with pytest.raises(ValueError, match="aligned or staggered"):
        device.refreshes_owed("per_bank")
