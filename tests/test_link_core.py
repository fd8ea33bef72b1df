"""DIMM-Link inside the NDP core (RTL harness): descriptors through the command processor,
transaction layer and router of a core built with ``link=True``.

One DIMM in a chain of one addresses itself (``dest`` = its own id): the router
loops the packets back to its own target, so LINK_SEND and ATOMIC_ADD run their
whole on-chip path (command processor -> initiator -> router -> target ->
result writer -> SRAM, and the completion back) through the driver API. Chains
of several cores are tested at the transaction level in
``tests/test_link_transaction.py``.
"""

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden import accumulate_bits
from ndpdimm.hw.memory_port import Status
from ndpdimm.sw.driver import Dimm, NdpError

CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, link=True)


@pytest.fixture(scope="module")
def dimm():
    d = Dimm("rtl", CFG)
    d.set_link_id(0, 1)
    return d


def _fp32_corner_values(rng, n):
    pool = np.array([0.0, -0.0, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38, np.inf, -np.inf,
                     np.nan, 1.0, 2.0 ** -126], dtype=np.float32)
    x = rng.uniform(-100, 100, n).astype(np.float32)
    pick = rng.random(n) < 0.4
    x[pick] = rng.choice(pool, pick.sum())
    return torch.from_numpy(x)


def test_caps_and_link_id(dimm):
    assert dimm.backend.csr_read("CAPS") >> 48 & 1 == 1
    assert dimm.backend.csr_read("LINK_ID") == 0x10


def test_self_addressed_write_read_and_atomics_are_bit_exact(dimm):
    rng = np.random.default_rng(1)
    n = 640                                          # 2560 B: three 1 KiB packets
    src = dimm.alloc_sram(4 * n)
    dst = dimm.alloc_sram(4 * n)
    back = dimm.alloc_sram(4 * n)
    a = _fp32_corner_values(rng, n)
    b = _fp32_corner_values(rng, n)
    dimm.write(src, a)
    dimm.write(dst, b)
    dimm.run([dimm.atomic_add_descriptor(0, dst.addr, src.addr, 4 * n)], "atomic add")
    want = accumulate_bits(b.numpy().view(np.uint32), a.numpy().view(np.uint32), is_int=False)
    got = dimm.read(dst, torch.float32, (n,)).numpy().view(np.uint32)
    assert np.array_equal(got, np.asarray(want, dtype=np.uint32))
    # Copy it elsewhere with a remote write, read it back with a remote read.
    dimm.run([dimm.link_descriptor(0, back.addr, dst.addr, 4 * n)], "link write")
    dimm.run([dimm.link_descriptor(0, back.addr, src.addr, 4 * n, read=True)], "link read")
    assert np.array_equal(dimm.read(src, torch.float32, (n,)).numpy().view(np.uint32), got)
    # INT32 lanes wrap around.
    i = torch.from_numpy(rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32))
    j = torch.from_numpy(np.full(n, 2 ** 31 - 1, dtype=np.int32))
    dimm.write(src, i)
    dimm.write(dst, j)
    comps = dimm.run([dimm.atomic_add_descriptor(0, dst.addr, src.addr, 4 * n, int32=True)], "int")
    want = (i.numpy().astype(np.int64) + j.numpy()).astype(np.int64) & 0xFFFFFFFF
    assert np.array_equal(dimm.read(dst, torch.int32, (n,)).numpy().view(np.uint32),
                          want.astype(np.uint32))
    assert comps[0].cycles > 3 * 17                  # at least a cycle per payload word
    for buf in (src, dst, back):
        dimm.free(buf)


@pytest.mark.parametrize("fields, status", [
    ({"dest": 1}, Status.BAD_FIELD),                          # no DIMM 1 in a chain of one
    ({"remote": 16}, Status.MISALIGNED),
    ({"sram": 16384 - 32, "n_bytes": 64}, Status.SRAM_RANGE),
    ({"remote": 16384 - 32, "n_bytes": 64}, Status.REMOTE_RANGE),
    ({"remote": 1 << 39}, Status.REMOTE_RANGE),
])
def test_bad_link_descriptors_fail_without_side_effect(dimm, fields, status):
    buf = dimm.alloc_sram(64)
    dimm.write(buf, torch.arange(16, dtype=torch.int32))
    f = {"dest": 0, "remote": 0, "sram": buf.addr, "n_bytes": 64}
    f.update(fields)
    before = dimm.read(buf, torch.int32, (16,)).clone()
    with pytest.raises(NdpError) as err:
        dimm.run([dimm.link_descriptor(f["dest"], f["remote"], f["sram"], f["n_bytes"])], "bad")
    assert err.value.status == status
    assert torch.equal(dimm.read(buf, torch.int32, (16,)), before)
    dimm.free(buf)


def test_link_id_is_checked(dimm):
    with pytest.raises(ValueError, match="dimm_id"):
        dimm.set_link_id(2, 2)
    with pytest.raises(ValueError, match="n_dimms"):
        dimm.set_link_id(0, 17)


def test_a_core_without_the_link_reports_unsupported():
    d = Dimm("model", CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4))
    buf = d.alloc_sram(64)
    with pytest.raises(NdpError) as err:
        d.run([d.link_descriptor(0, 0, buf.addr, 64)], "no link")
    assert err.value.status == Status.UNSUPPORTED
