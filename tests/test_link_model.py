"""DIMM-Link on the model backend: N DIMMs in a chain (``NdpSystem`` + ``cosim/link_model.py``).

Remote writes, reads and atomic adds between the DIMMs' models through the
driver API, a GEMV split over three DIMMs and merged by FP32 atomic adds (bit
for bit the golden ``(y0 + y1) + y2``: the documented merge order is the
order the host issues the adds in), the link's timing (hops, frames), and bad
input. The single-DIMM link tests of ``tests/test_link_core.py`` run on both
backends.
"""

import numpy as np
import pytest
import torch

from ndpdimm.cosim import golden
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.link_model import (DRAM_PACKET_CYCLES, DRAM_WORD_CYCLES, HOP_CYCLES,
                                     HOP_WORD_CYCLES, TARGET_PACKET_CYCLES, WRITE_WORD_CYCLES,
                                     LinkFabric)
from ndpdimm.cosim.model_backend import ModelBackend
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.link_formats import LinkConfig, frame_flits
from ndpdimm.hw.memory_port import Status
from ndpdimm.sw.driver import NdpError, NdpSystem

CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, link=True)
DRAM = 1 << 39


@pytest.fixture()
def chain():
    return NdpSystem(3, "model", CFG)


def _bytes(rng, n):
    return torch.from_numpy(rng.integers(0, 256, n, dtype=np.uint8))


def test_link_ids_and_remote_write_read_over_two_hops(chain):
    rng = np.random.default_rng(1)
    assert [d.backend.csr_read("LINK_ID") for d in chain] == [0x30, 0x31, 0x32]
    a, c = chain[0], chain[2]
    src, back = a.alloc_sram(2048), a.alloc_sram(2048)
    far = c.alloc_sram(2048)
    data = _bytes(rng, 2048)
    a.write(src, data)
    w = a.run([a.link_descriptor(2, far.addr, src.addr, 2048)], "write 0 -> 2")[0]
    assert torch.equal(c.read(far, torch.uint8, (2048,)), data)
    r = a.run([a.link_descriptor(2, far.addr, back.addr, 2048, read=True)], "read 2 -> 0")[0]
    assert torch.equal(a.read(back, torch.uint8, (2048,)), data)
    assert w.ok and r.ok and w.dram_bytes == 0


def test_remote_dram_write_lands_in_the_target_window(chain):
    rng = np.random.default_rng(2)
    a, b = chain[0], chain[1]
    src = a.alloc_sram(1536)
    dst = b.alloc(1536)
    data = _bytes(rng, 1536)
    a.write(src, data)
    a.run([a.link_descriptor(1, DRAM | dst.addr, src.addr, 1536)], "remote DRAM write")
    assert torch.equal(b.read(dst, torch.uint8, (1536,)), data)


def test_split_gemv_merged_by_atomic_adds_is_bit_exact(chain):
    """W [64, 384] FP16 split by columns over three DIMMs; each computes its partial Y on its own
    engine, DIMM 1 then DIMM 2 add theirs into DIMM 0's with ATOMIC_ADD (FP32)."""
    torch.manual_seed(3)
    W = torch.randn(64, 384).half()
    x = torch.randn(2, 384).half()
    parts = [slice(128 * i, 128 * (i + 1)) for i in range(3)]
    partial = [d.gemv(d.store_weights(W[:, s].contiguous()), x[:, s].contiguous())
               for d, s in zip(chain, parts)]
    for y, s in zip(partial, parts):
        assert torch.equal(y.view(torch.int32), golden.gemv_dot(W[:, s], x[:, s], Dtype.FP16)
                           .view(torch.int32))
    bufs = [d.alloc_sram(y.numel() * 4) for d, y in zip(chain, partial)]
    for d, buf, y in zip(chain, bufs, partial):
        d.write(buf, y.contiguous())
    for i in (1, 2):                                   # the merge order: DIMM 1, then DIMM 2
        d = chain[i]
        d.run([d.atomic_add_descriptor(0, bufs[0].addr, bufs[i].addr, bufs[i].nbytes)], f"merge {i}")
    got = chain[0].read(bufs[0], torch.float32, (2, 64))
    acc = partial[0].numpy().view(np.uint32)
    for y in partial[1:]:
        acc = golden.accumulate_bits(acc, y.numpy().view(np.uint32), is_int=False)
    assert np.array_equal(got.numpy().view(np.uint32), np.asarray(acc, dtype=np.uint32))
    # and against float64 math: within the FP32 summation bound of the whole product
    ref = golden.reference_f64_dense(W, x)
    assert torch.allclose(got.double(), ref, rtol=1e-5, atol=1e-4)


def test_timing_grows_with_hops_and_frames(chain):
    a = chain[0]
    src = a.alloc_sram(4096)
    dests = [chain[i].alloc_sram(4096) for i in range(3)]
    cyc = {}
    for i in range(3):
        for n in (64, 1024, 4096):
            cyc[i, n] = a.run([a.link_descriptor(i, dests[i].addr, src.addr, n)], "w")[0].cycles
    assert cyc[0, 1024] < cyc[1, 1024] < cyc[2, 1024]
    assert cyc[1, 64] < cyc[1, 1024] < cyc[1, 4096]
    c = LinkConfig()
    # one hop, 1 KiB: the packet store-and-forward through the hop, the target's writes
    packet = TARGET_PACKET_CYCLES + 32 * WRITE_WORD_CYCLES
    assert abs(cyc[1, 1024] - (8.2 + HOP_CYCLES + 32 * HOP_WORD_CYCLES + packet)) <= 1
    # 4 KiB streams as four packets: three more at the slower of wire and target
    assert abs((cyc[1, 4096] - cyc[1, 1024]) - 3 * max(packet, frame_flits(1024) * c.flit_cycles)) <= 2
    # no hop: exactly the RTL harness's self-addressed figures the constants were fitted to
    assert [a.run([a.link_descriptor(0, dests[0].addr, src.addr, n)], "w")[0].cycles
            for n in (32, 1024, 2560)] == [18, 56, 132]


@pytest.mark.parametrize("fields, status", [
    ({"dest": 3}, Status.BAD_FIELD),                            # a chain of three
    ({"remote": 16}, Status.MISALIGNED),
    ({"remote": 16384 - 32, "n_bytes": 64}, Status.REMOTE_RANGE),
    ({"remote": DRAM | 64, "n_bytes": 32}, Status.REMOTE_RANGE),  # DRAM needs whole bursts
    ({"remote": DRAM | (1 << 35)}, Status.REMOTE_RANGE),        # past the DIMM
])
def test_bad_link_descriptors_change_nothing_anywhere(chain, fields, status):
    a, b = chain[0], chain[1]
    src = a.alloc_sram(64)
    a.write(src, torch.arange(16, dtype=torch.int32))
    target = b.alloc_sram(16384 - 64)          # the whole rest of DIMM 1's SRAM
    before = b.backend.core.sram[:]
    f = {"dest": 1, "remote": 0, "sram": src.addr, "n_bytes": 64}
    f.update(fields)
    with pytest.raises(NdpError) as err:
        a.run([a.link_descriptor(f["dest"], f["remote"], f["sram"], f["n_bytes"])], "bad")
    assert err.value.status == status
    assert b.backend.core.sram == before
    del target


def test_a_partly_refused_transfer_writes_only_its_good_packets(chain):
    """Packets are checked one by one at the target, as in the RTL: a 2 KiB write whose second
    1 KiB packet runs past the target's SRAM lands its first packet and reports REMOTE_RANGE."""
    a, b = chain[0], chain[1]
    src = a.alloc_sram(2048)
    data = _bytes(np.random.default_rng(4), 2048)
    a.write(src, data)
    start = 16384 - 1024 - 512
    with pytest.raises(NdpError) as err:
        a.run([a.link_descriptor(1, start, src.addr, 2048)], "partly refused")
    assert err.value.status == Status.REMOTE_RANGE
    assert bytes(b.backend.core.sram[start:start + 1024]) == bytes(data[:1024].numpy())


def test_link_systems_need_the_model_backend_and_a_link_build():
    with pytest.raises(ValueError, match="model backend only"):
        NdpSystem(2, "rtl", CFG)
    with pytest.raises(ValueError, match="link=True"):
        ModelBackend(CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4),
                     fabric=LinkFabric(2))
    with pytest.raises(ValueError, match="n_dimms"):
        LinkFabric(17)


def _relayout_on_all(system, fields):
    """Issue the same RELAYOUT on every member (as the host does) and wait for all."""
    descs = [d.relayout_descriptor(**fields) for d in system]
    for d, desc in zip(system, descs):
        d.submit([desc])
    return [d.wait([desc.id])[0] for d, desc in zip(system, descs)]


def test_relayout_round_trip_over_three_dimms(chain):
    """Striped -> localized on DIMM 2 -> striped again (to a new base): the blocks land where
    ``relayout_moves`` says, the round trip gives back the original bytes, and the target's DRAM
    (written one packet at a time by every member) bounds the time."""
    rng = np.random.default_rng(7)
    B, n_blocks = 512, 10
    striped = [d.alloc(4 * B) for d in chain]
    localized = [d.alloc(n_blocks * B) for d in chain]
    back = [d.alloc(4 * B) for d in chain]
    staging = [d.alloc_sram(2 * B) for d in chain]
    for bufs in (striped, localized, back, staging):
        assert len({b.addr for b in bufs}) == 1, "the group needs the same addresses on every member"
    tensor = [bytes(rng.integers(0, 256, B, dtype=np.uint8)) for _ in range(n_blocks)]
    for k, block in enumerate(tensor):
        chain[k % 3].backend.load(striped[0].addr + (k // 3) * B, block)
    common = {"group_dimms": 3, "target": 2, "block_bytes": B, "n_blocks": n_blocks,
              "staging": staging[0].addr}
    there = _relayout_on_all(chain, {"to_localized": True, "src": striped[0].addr,
                                     "dst": localized[0].addr, **common})
    assert [c.status for c in there] == [Status.OK] * 3
    assert chain[2].backend.dump(localized[0].addr, n_blocks * B) == b"".join(tensor)
    home = _relayout_on_all(chain, {"to_localized": False, "src": localized[0].addr,
                                    "dst": back[0].addr, **common})
    assert [c.status for c in home] == [Status.OK] * 3
    for k, block in enumerate(tensor):
        assert chain[k % 3].backend.dump(back[0].addr + (k // 3) * B, B) == block
    # every member's blocks are written by DIMM 2's DRAM, one 512 B packet at a time
    per_block = DRAM_PACKET_CYCLES + DRAM_WORD_CYCLES * B // 32
    assert min(c.cycles for c in there) >= n_blocks * per_block
    # to striped: only the target sends (the others finish after the checks)
    assert home[2].cycles > n_blocks * per_block > home[0].cycles == home[1].cycles


@pytest.mark.parametrize("fields, status", [
    ({"group_dimms": 4}, Status.BAD_FIELD),          # past the chain of three
    ({"target": 3}, Status.BAD_FIELD),
    ({"block_bytes": 96}, Status.MISALIGNED),
    ({"staging": 16}, Status.MISALIGNED),
    ({"dst": (1 << 35) - 1024}, Status.DRAM_RANGE),  # four blocks past the DIMM
    ({"staging": 16384 - 512}, Status.SRAM_RANGE),   # two staging blocks past the SRAM
])
def test_bad_relayout_descriptors_change_nothing_on_the_model(chain, fields, status):
    src = [d.alloc(1024) for d in chain]
    dst = [d.alloc(2048) for d in chain]
    for d, buf in zip(chain, dst):
        d.backend.load(buf.addr, bytes(2048))
    f = {"to_localized": True, "group_dimms": 3, "target": 0, "block_bytes": 512, "n_blocks": 4,
         "src": src[0].addr, "dst": dst[0].addr, "staging": 0}
    f.update(fields)
    with pytest.raises(NdpError) as err:
        chain[1].run([chain[1].relayout_descriptor(**f)], "bad relayout")
    assert err.value.status == status
    for d, buf in zip(chain, dst):
        assert d.backend.dump(buf.addr, 2048) == bytes(2048)
