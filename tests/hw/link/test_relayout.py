"""Relayout unit: striped <-> localized over DIMM-Link, against a Python reference.

Each DIMM of a chain (``cosim/link/chain.py`` with ``relayout=True``: SRAM,
DMA engine, relayout unit, transaction layer, router; DRAM behind a
``MemoryPortModel`` with random latency, order and back-pressure; links
stalling at random) runs the same RELAYOUT descriptor, as the host would
issue it on every member of a group. The DRAM of every DIMM is compared with
:func:`relayout_reference`; a round trip striped -> localized -> striped (to
a new base) must give back the original bytes.
"""

import gc
import random
import warnings

import pytest
from amaranth.hdl import UnusedElaboratable
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim.streams import get, put
from ndpdimm.cosim.link.chain import CAPACITY, SRAM_SIZE, Chain
from ndpdimm.cosim.link.relayout import relayout_moves
from ndpdimm.hw.link.relayout import RelayoutUnit
from ndpdimm.hw.memory.port import Status

STAGING = 1024


def relayout_reference(drams, fields):
    """Apply one RELAYOUT (the same ``fields`` on every member) to ``drams`` (``{dimm: {address:
    bytes}}`` block images); returns the blocks each DIMM read and the blocks each received."""
    sent, received = {}, {}
    for frm, at, to, to_at in relayout_moves(fields):
        drams.setdefault(to, {})[to_at] = drams[frm][at]
        sent[frm] = sent.get(frm, 0) + 1
        received[to] = received.get(to, 0) + 1
    return sent, received


def _desc(**kw):
    f = {"to_localized": 1, "group_base": 0, "group_dimms": 2, "target": 0, "block_bytes": 64,
         "n_blocks": 1, "src": 0x10000, "dst": 0x40000, "staging": STAGING}
    f.update(kw)
    return f


def _run(chain, phases, cycles_limit=100_000):
    """Run ``phases`` (each ``{dimm: fields}``; a phase starts when every DIMM finished the one
    before, as a host waiting for all would do); returns ``[{dimm: (Status, cycles)}]``."""
    sim = Simulator(chain)
    sim.add_clock(1e-9)
    chain.serve_drams(sim)
    results = [{} for _ in phases]

    def driver(i):
        async def tb(ctx):
            unit = chain.relayouts[i]
            for p, phase in enumerate(phases):
                while p and len(results[p - 1]) < len(phases[p - 1]):
                    await ctx.tick()
                if i in phase:
                    await put(ctx, unit.desc, unit.descriptor_layout.const(
                        {"opcode": 9, "id": p, **phase[i]}).as_value().value)
                    beat = await get(ctx, unit.status)
                    results[p][i] = (Status(beat.code), int(beat.cycles))
        return tb

    async def watchdog(ctx):
        for _ in range(cycles_limit):
            if all(len(r) == len(ph) for r, ph in zip(results, phases)):
                return
            await ctx.tick()
        raise AssertionError(f"relayout did not finish in {cycles_limit} cycles: {results}")

    async def staller(ctx):
        rng = random.Random(5)
        while True:
            ctx.set(chain.stall, sum(1 << k for k in range(len(chain.links)) if rng.random() < 0.3))
            await ctx.tick()

    for i in range(chain.n):
        sim.add_testbench(driver(i))
    sim.add_testbench(watchdog)
    if chain.links:
        sim.add_testbench(staller, background=True)
    sim.run()
    return results


def _check_drams(chain, want):
    for dimm, blocks in want.items():
        for addr, data in blocks.items():
            got = chain.drams[dimm].dump(addr, len(data))
            assert got == data, f"DIMM {dimm}: block at {addr:#x} differs"


@pytest.mark.parametrize("n, group_base, D, t, n_blocks, B", [
    (2, 0, 2, 1, 5, 64),          # odd block count, smallest block
    (3, 0, 3, 0, 5, 128),         # three DIMMs, localized on the first
    (3, 1, 2, 1, 4, 128),         # a group not starting at DIMM 0 (DIMM 0 takes no part)
    (1, 0, 1, 0, 3, 256),         # a group of one: all through the router's self-loop
])
def test_round_trip_striped_localized_striped(n, group_base, D, t, n_blocks, B):
    rng = random.Random(n * 100 + n_blocks)
    chain = Chain(n, relayout=True, seed=n_blocks, min_latency=2, max_latency=40, accept_prob=0.7)
    striped, localized, restriped = 0x10000, 0x80000, 0x200000 + 0x1000
    tensor = [rng.randbytes(B) for _ in range(n_blocks)]
    drams = {group_base + j: {} for j in range(D)}
    for k, block in enumerate(tensor):
        drams[group_base + k % D][striped + (k // D) * B] = block
        chain.drams[group_base + k % D].load(striped + (k // D) * B, block)
    members = range(group_base, group_base + D)
    common = {"group_base": group_base, "group_dimms": D, "target": t, "block_bytes": B,
              "n_blocks": n_blocks}
    there = _desc(**common, to_localized=1, src=striped, dst=localized)
    back = _desc(**common, to_localized=0, src=localized, dst=restriped)
    original = {d: dict(blocks) for d, blocks in drams.items()}
    moves = [relayout_reference(drams, there), relayout_reference(drams, back)]
    results = _run(chain, [{i: there for i in members}, {i: back for i in members}])
    for phase in results:
        assert {i: code for i, (code, _) in phase.items()} == {i: Status.OK for i in members}
    _check_drams(chain, drams)
    # the round trip: every member holds its original striped blocks again, at the new base
    for d, blocks in original.items():
        for addr, data in blocks.items():
            assert chain.drams[d].dump(addr - striped + restriped, B) == data
    # exactly the reference's blocks were moved: each read once where it was, written once
    for i in range(n):
        assert chain.drams[i].reads == sum(m[0].get(i, 0) for m in moves) * B // 64, f"DIMM {i}"
        assert chain.drams[i].writes == sum(m[1].get(i, 0) for m in moves) * B // 64, f"DIMM {i}"
    cycles = {i: c for i, (_, c) in results[0].items()}
    print(f"D={D} blocks={n_blocks} B={B}: to_localized cycles {cycles}, "
          f"to_striped {results[1][group_base + t][1]}")


BAD = {
    "no_dimms": (_desc(group_dimms=0), Status.BAD_FIELD),
    "too_many_dimms": (_desc(group_dimms=17), Status.BAD_FIELD),
    "target_outside_group": (_desc(target=2), Status.BAD_FIELD),
    "not_a_member": (_desc(group_base=0, group_dimms=1), Status.BAD_FIELD),
    "group_past_the_chain": (_desc(group_base=1, group_dimms=2), Status.BAD_FIELD),
    "zero_block": (_desc(block_bytes=0), Status.BAD_FIELD),
    "block_not_a_burst": (_desc(block_bytes=96), Status.MISALIGNED),
    "src_misaligned": (_desc(src=0x10020), Status.MISALIGNED),
    "dst_misaligned": (_desc(dst=0x40020), Status.MISALIGNED),
    "staging_misaligned": (_desc(staging=STAGING + 16), Status.MISALIGNED),
    "src_below_window": (_desc(src=0x8000), Status.DRAM_RANGE),
    # DIMM 1 is member 1 of 2: blocks 1, 3, 5 -> 3 blocks of 64 B from src
    "src_past_window": (_desc(src=0x100000 - 128, n_blocks=6), Status.DRAM_RANGE),
    "dst_past_dimm": (_desc(dst=CAPACITY - 64, n_blocks=2), Status.DRAM_RANGE),
    "staging_past_sram": (_desc(staging=SRAM_SIZE - 64, block_bytes=64), Status.SRAM_RANGE),
    "nothing_to_do": (_desc(n_blocks=0), Status.OK),
    "not_the_holder": (_desc(to_localized=0, target=0), Status.OK),
    "member_without_blocks": (_desc(n_blocks=1), Status.OK),
}


def test_bad_descriptors_have_no_side_effect():
    """Every bad field is reported after the checks, before any DMA or link traffic (DIMM 1 of
    a 2-DIMM chain, window [0x10000, 0x100000)); the last descriptor then works."""
    names = sorted(BAD)
    chain = Chain(2, relayout=True, windows=[(0, CAPACITY), (0x10000, 0x100000)])
    good = _desc(src=0x100000 - 192, n_blocks=6)          # exactly up to the window's limit
    results = [r[1] for r in _run(chain, [{1: BAD[n][0]} for n in names] + [{1: good}])]
    for name, (code, cycles) in zip(names, results):
        assert code == BAD[name][1], name
        assert cycles <= 40, f"{name}: {cycles} cycles"
    assert results[-1][0] == Status.OK
    log = chain.drams[1].log
    assert [w for _, _, w, _, _ in log] == [False] * 3, "only the good descriptor's 3 reads"
    assert chain.drams[0].writes == 3


def test_a_receiver_outside_its_window_answers_remote_range():
    """The receiving DIMM's window excludes the destination: REMOTE_RANGE, nothing written there."""
    chain = Chain(2, relayout=True, windows=[(0, CAPACITY), (0x10000, 0x20000)])
    fields = _desc(target=1, n_blocks=4, dst=0x30000)
    results = _run(chain, [{0: fields, 1: fields}])[0]
    assert results[0][0] == results[1][0] == Status.REMOTE_RANGE
    assert chain.drams[1].writes == 0 and chain.drams[0].writes == 0


@pytest.mark.parametrize("kwargs, match", [
    ({"capacity_bytes": 1000}, "1000"),
    ({"capacity_bytes": 1 << 40}, "capacity_bytes"),
    ({"sram": "big"}, "sram"),
])
def test_bad_parameters(kwargs, match):
    with warnings.catch_warnings():
        # the half-built component is garbage: no "created but never used" warning for it
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match=match):
            RelayoutUnit(**kwargs)
        gc.collect()
