"""DIMM-Link between DIMMs through the driver API: N DIMMs in a chain (``NdpSystem``), on both backends.

The same tests run on the model backend (``cosim/link/model.py``) and on the
RTL backend, where the three cores are one Verilated ``link_system`` in the
fast harness (``cosim/rtl/harness.py`` ``RtlSystem``: each core with its own
DRAM model and host driver, the RTL link ports joined by C++ lane channels).
Remote writes, reads and atomic adds, a GEMV split over three DIMMs and
merged by FP32 atomic adds (bit for bit the golden ``(y0 + y1) + y2``: the
documented merge order is the order the host issues the adds in), the link's
timing (hops, frames; on the RTL against the model fitted to it), relayout
round trips, bit errors on the links, and bad input that must change nothing.
The RTL variants are ``sim`` (``make sim``): the three-core harness build takes
minutes. The single-DIMM link tests of ``tests/cosim/rtl/test_link_core.py`` run on both
backends.
"""

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.link.model import LinkFabric
from ndpdimm.cosim.link.timing import (
    DRAM_PACKET_CYCLES,
    DRAM_WORD_CYCLES,
    HOP_CYCLES,
    HOP_WORD_CYCLES,
    TARGET_PACKET_CYCLES,
    WRITE_WORD_CYCLES,
)
from ndpdimm.cosim.model.backend import ModelBackend
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.link.formats import LinkConfig, frame_flits
from ndpdimm.hw.memory.port import Status
from ndpdimm.sw.driver.errors import NdpError
from ndpdimm.sw.driver.system import NdpSystem, relayout_round_trip_cycles

CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, link=True)
DRAM = 1 << 39


#: Largest |RTL - model| / RTL accepted for one link descriptor on a quiet chain (the model's
#: fit to the RTL, docs/dimm_link.md) and for a relayout (as tests/cosim/rtl/test_system_top.py).
MODEL_TOLERANCE, RELAYOUT_TOLERANCE = 0.10, 0.3
BACKENDS = ["model", pytest.param("rtl", marks=pytest.mark.sim)]


@pytest.fixture(params=BACKENDS)
def chain(request):
    system = NdpSystem(3, request.param, CFG)
    yield system
    system.close()


def sram_image(dimm) -> bytes:
    """The whole SRAM of ``dimm``, read out by one DMA (works on both backends)."""
    size = dimm.config.sram_size
    tmp = dimm.alloc(size)
    try:
        dimm.run([dimm.dma_descriptor(1, tmp.addr, 0, size, "SRAM image")], "SRAM image")
        return dimm.backend.dump(tmp.addr, size)
    finally:
        dimm.free(tmp)


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


def check_split_gemv(chain):
    """W [64, 128 n] FP16 split by columns over the n DIMMs; each computes its partial Y on its
    own engine, DIMMs 1, 2, ... then add theirs into DIMM 0's with ATOMIC_ADD (FP32), in that
    order: bit for bit the golden ``((y0 + y1) + y2) + ...``."""
    n = len(chain)
    torch.manual_seed(3)
    W = torch.randn(64, 128 * n).half()
    x = torch.randn(2, 128 * n).half()
    parts = [slice(128 * i, 128 * (i + 1)) for i in range(n)]
    got, partial, _ = chain.gemv_merged(W, x)
    for y, s in zip(partial, parts):
        assert torch.equal(y.view(torch.int32), golden.gemv_dot(W[:, s], x[:, s], Dtype.FP16)
                           .view(torch.int32))
    assert got.shape == (2, 64)
    acc = partial[0].numpy().view(np.uint32)
    for y in partial[1:]:
        acc = golden.accumulate_bits(acc, y.numpy().view(np.uint32), is_int=False)
    assert np.array_equal(got.numpy().view(np.uint32), np.asarray(acc, dtype=np.uint32))
    # and against float64 math: within the FP32 summation bound of the whole product
    ref = golden.reference_f64_dense(W, x)
    assert torch.allclose(got.double(), ref, rtol=1e-5, atol=1e-4)


def test_split_gemv_merged_by_atomic_adds_is_bit_exact(chain):
    check_split_gemv(chain)


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
    if chain[0].name == "rtl":       # the model was fitted to these: it must stay close
        model = NdpSystem(3, "model", CFG)
        m = model[0]
        msrc, mdests = m.alloc_sram(4096), [model[i].alloc_sram(4096) for i in range(3)]
        for (i, n), rtl in cyc.items():
            got = m.run([m.link_descriptor(i, mdests[i].addr, msrc.addr, n)], "w")[0].cycles
            assert abs(got - rtl) <= MODEL_TOLERANCE * rtl, f"{i} hops, {n} B: model {got}, RTL {rtl}"
        return
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
    before = sram_image(b)
    f = {"dest": 1, "remote": 0, "sram": src.addr, "n_bytes": 64}
    f.update(fields)
    with pytest.raises(NdpError) as err:
        a.run([a.link_descriptor(f["dest"], f["remote"], f["sram"], f["n_bytes"])], "bad")
    assert err.value.status == status
    assert sram_image(b) == before
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
    assert sram_image(b)[start:start + 1024] == bytes(data[:1024].numpy())


def test_link_systems_need_a_known_backend_and_a_link_build():
    with pytest.raises(ValueError, match="'model' or 'rtl'"):
        NdpSystem(2, "verilog", CFG)
    with pytest.raises(ValueError, match="n_cores must be 1..4"):    # before any build
        NdpSystem(5, "rtl", CFG)
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


def relayout_round_trip(chain, B=512, n_blocks=10):
    """Striped over every DIMM -> localized on the last -> striped again (to a new base): the
    blocks land where the striping says and the round trip gives back the original bytes.
    Returns the two phases' completions (one per member)."""
    n = len(chain)
    rng = np.random.default_rng(7)
    per = -(-n_blocks // n)
    striped = [d.alloc(per * B) for d in chain]
    localized = [d.alloc(n_blocks * B) for d in chain]
    back = [d.alloc(per * B) for d in chain]
    staging = [d.alloc_sram(2 * B) for d in chain]
    for bufs in (striped, localized, back, staging):
        assert len({b.addr for b in bufs}) == 1, "the group needs the same addresses on every member"
    tensor = [bytes(rng.integers(0, 256, B, dtype=np.uint8)) for _ in range(n_blocks)]
    for k, block in enumerate(tensor):
        chain[k % n].backend.load(striped[0].addr + (k // n) * B, block)
    common = {"group_dimms": n, "target": n - 1, "block_bytes": B, "n_blocks": n_blocks,
              "staging": staging[0].addr}
    there = _relayout_on_all(chain, {"to_localized": True, "src": striped[0].addr,
                                     "dst": localized[0].addr, **common})
    assert [c.status for c in there] == [Status.OK] * n
    assert chain[n - 1].backend.dump(localized[0].addr, n_blocks * B) == b"".join(tensor)
    home = _relayout_on_all(chain, {"to_localized": False, "src": localized[0].addr,
                                    "dst": back[0].addr, **common})
    assert [c.status for c in home] == [Status.OK] * n
    for k, block in enumerate(tensor):
        assert chain[k % n].backend.dump(back[0].addr + (k // n) * B, B) == block
    return there, home


def test_relayout_round_trip_over_three_dimms(chain):
    """The round trip over the three DIMMs; the target's DRAM (written one packet at a time by
    every member) bounds the time on the model, and the model stays near the RTL."""
    B, n_blocks = 512, 10
    there, home = relayout_round_trip(chain, B, n_blocks)
    if chain[0].name == "rtl":       # the model of the same relayout, fitted to the RTL
        model = relayout_round_trip_cycles(3, B, n_blocks, CFG)
        for phase, m in zip((there, home), model):
            r = max(c.cycles for c in phase)
            assert abs(m - r) <= RELAYOUT_TOLERANCE * r, f"model {m} cycles, RTL {r}"
        return
    # every member's blocks are written by DIMM 2's DRAM, one 512 B packet at a time
    per_block = DRAM_PACKET_CYCLES + DRAM_WORD_CYCLES * B // 32
    assert min(c.cycles for c in there) >= n_blocks * per_block
    # to striped: only the target sends (the others finish after the checks)
    assert home[2].cycles > n_blocks * per_block > home[0].cycles == home[1].cycles


@pytest.mark.sim
@pytest.mark.parametrize("n", [2, 4])
def test_rtl_chains_of_two_and_four_cores(n):
    """The other RTL system sizes (each its own harness build): the split GEMV merged by atomic
    adds and the relayout round trip over all n DIMMs."""
    system = NdpSystem(n, "rtl", CFG)
    try:
        assert [d.backend.csr_read("LINK_ID") for d in system] == [i | n << 4 for i in range(n)]
        check_split_gemv(system)
        relayout_round_trip(system, 512, 3 * n + 1)
    finally:
        system.close()


@pytest.mark.parametrize("fields, status", [
    ({"group_dimms": 4}, Status.BAD_FIELD),          # past the chain of three
    ({"target": 3}, Status.BAD_FIELD),
    ({"block_bytes": 96}, Status.MISALIGNED),
    ({"staging": 16}, Status.MISALIGNED),
    ({"dst": (1 << 35) - 1024}, Status.DRAM_RANGE),  # four blocks past the DIMM
    ({"staging": 16384 - 512}, Status.SRAM_RANGE),   # two staging blocks past the SRAM
])
def test_bad_relayout_descriptors_change_nothing(chain, fields, status):
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


@pytest.mark.parametrize("backend", BACKENDS)
def test_bit_errors_on_the_links_cost_replays_never_data(backend):
    """At a BER of 1e-4 on every lane, 4 KiB writes over two hops and a read back arrive
    exactly; the counters show the replays that made them so."""
    system = NdpSystem(3, backend, CFG, link_ber=1e-4, link_seed=5)
    try:
        rng = np.random.default_rng(9)
        a, c = system[0], system[2]
        src, back, far = a.alloc_sram(4096), a.alloc_sram(4096), c.alloc_sram(4096)
        for k in range(3):
            data = _bytes(rng, 4096)
            a.write(src, data)
            a.run([a.link_descriptor(2, far.addr, src.addr, 4096)], f"write {k}")
            assert torch.equal(c.read(far, torch.uint8, (4096,)), data)
            a.run([a.link_descriptor(2, far.addr, back.addr, 4096, read=True)], f"read {k}")
            assert torch.equal(a.read(back, torch.uint8, (4096,)), data)
        counters = system.link_counters()
        assert set(counters) == {"0->1", "1->0", "1->2", "2->1"}
        if backend == "rtl":
            assert sum(r["injected_bit_errors"] for r in counters.values()) > 0
            assert sum(r["rx_crc_errors"] + r["phy_sync_errors"] for r in counters.values()) > 0
            assert sum(r["tx_replays"] for r in counters.values()) > 0
        else:
            assert sum(r["crc_errors"] for r in counters.values()) > 0
            assert sum(r["replays"] for r in counters.values()) > 0
    finally:
        system.close()
