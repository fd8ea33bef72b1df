"""DIMM-Link inside the NDP core (RTL harness): descriptors through the command processor,
transaction layer and router of a core built with ``link=True``.

The same tests run on the model backend (``cosim/link/model.py``). One DIMM
in a chain of one addresses itself (``dest`` = its own id): the router loops
the packets back to its own target, so LINK_SEND, ATOMIC_ADD, remote DRAM
writes and RELAYOUT (a group of one) run their whole on-chip path (command
processor -> initiator -> router -> target -> result writer -> SRAM, and the
completion back) through the driver API. Chains
of several cores are tested at the transaction level in
``tests/hw/link/test_transaction.py`` and as whole RTL cores joined by DIMM-Link
ports in ``tests/cosim/rtl/test_system_top.py``.
"""

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden.numerics import accumulate_bits
from ndpdimm.hw.memory.port import Status
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.errors import NdpError

CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, link=True)


@pytest.fixture(scope="module", params=["rtl", "model"])
def dimm(request):
    """The same driver-level tests on both backends (the model through ``cosim/link/model.py``)."""
    d = Dimm(request.param, CFG)
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
    ({"remote": 1 << 39 | 32}, Status.REMOTE_RANGE),          # DRAM: not a whole burst
    ({"remote": 1 << 39 | 1 << 36}, Status.REMOTE_RANGE),     # DRAM: past the 32 GiB DIMM
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


def _random_bytes(rng, n):
    return torch.from_numpy(rng.integers(0, 256, n, dtype=np.uint8))


def test_self_addressed_dram_write(dimm):
    """A LINK_SEND to transaction address bit 39 writes the target's DRAM (here: our own)."""
    rng = np.random.default_rng(2)
    n = 1536                                         # a 1 KiB packet and a 512 B one
    src = dimm.alloc_sram(n)
    dst = dimm.alloc(n)
    data = _random_bytes(rng, n)
    dimm.write(src, data)
    dimm.run([dimm.link_descriptor(0, 1 << 39 | dst.addr, src.addr, n)], "remote DRAM write")
    assert torch.equal(dimm.read(dst, torch.uint8, (n,)), data)
    for buf in (src, dst):
        dimm.free(buf)


@pytest.mark.parametrize("block_bytes, n_blocks", [(64, 5), (1024, 3)])
def test_self_loop_relayout_round_trip(dimm, block_bytes, n_blocks):
    """A group of one DIMM: RELAYOUT to localized and back runs the whole path (command processor
    -> relayout unit -> DMA engine and link initiator -> router self-loop -> target -> DRAM)."""
    rng = np.random.default_rng(block_bytes)
    n = block_bytes * n_blocks
    striped, localized, back = dimm.alloc(n), dimm.alloc(n), dimm.alloc(n)
    staging = dimm.alloc_sram(2 * block_bytes)
    data = _random_bytes(rng, n)
    dimm.write(striped, data)
    there = dimm.relayout_descriptor(True, 1, 0, block_bytes, n_blocks, striped.addr,
                                     localized.addr, staging.addr)
    comps = dimm.run([there], "to localized")
    assert torch.equal(dimm.read(localized, torch.uint8, (n,)), data)
    home = dimm.relayout_descriptor(False, 1, 0, block_bytes, n_blocks, localized.addr, back.addr,
                                    staging.addr)
    comps += dimm.run([home], "to striped")
    assert torch.equal(dimm.read(back, torch.uint8, (n,)), data)
    print(f"B={block_bytes} x {n_blocks}: {[c.cycles for c in comps]} cycles")
    for buf in (striped, localized, back, staging):
        dimm.free(buf)


@pytest.mark.parametrize("fields, status", [
    ({"group_dimms": 2}, Status.BAD_FIELD),                   # a group past the chain of one
    ({"block_bytes": 96}, Status.MISALIGNED),
    ({"dst": (1 << 35) - 64}, Status.DRAM_RANGE),             # destination past the DIMM
    ({"staging": 16384 - 64}, Status.SRAM_RANGE),
])
def test_bad_relayout_descriptors_fail_without_side_effect(dimm, fields, status):
    src, dst = dimm.alloc(256), dimm.alloc(256)
    dimm.write(dst, torch.zeros(256, dtype=torch.uint8))
    f = {"to_localized": True, "group_dimms": 1, "target": 0, "block_bytes": 128, "n_blocks": 2,
         "src": src.addr, "dst": dst.addr, "staging": 0}
    f.update(fields)
    with pytest.raises(NdpError) as err:
        dimm.run([dimm.relayout_descriptor(**f)], "bad relayout")
    assert err.value.status == status
    assert torch.equal(dimm.read(dst, torch.uint8, (256,)), torch.zeros(256, dtype=torch.uint8))
    for buf in (src, dst):
        dimm.free(buf)


def test_link_id_is_checked(dimm):
    with pytest.raises(ValueError, match="dimm_id"):
        dimm.set_link_id(2, 2)
    with pytest.raises(ValueError, match="n_dimms"):
        dimm.set_link_id(0, 17)


def test_a_core_without_the_link_reports_unsupported():
    d = Dimm("model", CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4))
    buf = d.alloc_sram(128)
    for desc in (d.link_descriptor(0, 0, buf.addr, 64),
                 d.relayout_descriptor(True, 1, 0, 64, 1, 0, 4096, buf.addr)):
        with pytest.raises(NdpError) as err:
            d.run([desc], "no link")
        assert err.value.status == Status.UNSUPPORTED
