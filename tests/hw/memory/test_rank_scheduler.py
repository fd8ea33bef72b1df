"""Amaranth-simulator tests of the per-rank DDR4 command scheduler.

Every command the scheduler issues goes through the DRAM model's
``TimingChecker`` (which raises on any violated constraint); every request
must be served exactly once by a RD/WR with its own coordinates, and the data
marks must follow at tCL / CWL.
"""

import dataclasses
import random

import pytest
from amaranth.sim import Simulator

from ndpdimm.cosim.dram.model import TimingChecker
from ndpdimm.hw.memory.address_map import AddressMap
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.rank_scheduler import DramCommand, RankScheduler

ORG, TIMING = load_dram_config()


def run_scheduler(requests, n_cycles, timing=TIMING, queue_depth=8, refresh_phase=0,
                  idle_prob=0.0, seed=0, **kwargs):
    """Drive ``requests`` (dicts) into rank 0's scheduler; check every command; return stats.

    ``log``: every command as (cycle, kind, bank group, bank, row); ``accepted``: (cycle, tag)
    of every request taken into the queue."""
    dut = RankScheduler(ORG, timing, queue_depth=queue_depth, refresh_phase=refresh_phase, **kwargs)
    checker = TimingChecker(ORG, timing)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    rng = random.Random(seed)
    pending = {}
    served, data_marks = [], []
    col_cycles = []
    issued = {k: 0 for k in DramCommand}
    log, accepted_log = [], []

    async def tb(ctx):
        it = iter(requests)
        nxt = next(it, None)
        for cycle in range(n_cycles):
            offer = nxt is not None and rng.random() >= idle_prob
            ctx.set(dut.req.valid, offer)
            if offer:
                ctx.set(dut.req.payload, nxt)
            kind = DramCommand(ctx.get(dut.cmd.kind))
            if kind != DramCommand.NOP:
                issued[kind] += 1
                bg, bank = ctx.get(dut.cmd.bank_group), ctx.get(dut.cmd.bank)
                row, col = ctx.get(dut.cmd.row), ctx.get(dut.cmd.column)
                log.append((cycle, kind, bg, bank, row))
                if kind == DramCommand.ACT:
                    checker.issue(cycle, "ACT", 0, bg, bank, row=row)
                elif kind in (DramCommand.RD, DramCommand.WR):
                    tag = ctx.get(dut.cmd.tag)
                    want = {k: v for k, v in pending.pop(tag).items() if k != "urgent"}
                    got = {"write": int(kind == DramCommand.WR), "bank_group": bg, "bank": bank,
                           "row": row, "column": col, "tag": tag}
                    assert got == want, f"cycle {cycle}: served {got}, request was {want}"
                    checker.issue(cycle, kind.name, 0, bg, bank, row=row, column=col)
                    served.append((cycle, tag, kind))
                    col_cycles.append(cycle)
                elif kind == DramCommand.PRE:
                    checker.issue(cycle, "PRE", 0, bg, bank)
                else:
                    checker.issue(cycle, "REF", 0)
            else:
                checker.check_refresh(cycle, 0)
            if ctx.get(dut.data_valid):
                data_marks.append((cycle, ctx.get(dut.data_tag), ctx.get(dut.data_write)))
            accepted = offer and ctx.get(dut.req.ready)
            await ctx.tick()
            if accepted:
                pending[nxt["tag"]] = dict(nxt)
                accepted_log.append((cycle, nxt["tag"]))
                nxt = next(it, None)
        ctx.set(dut.req.valid, 0)

    sim.add_testbench(tb)
    sim.run()
    return {"served": served, "pending": pending, "marks": data_marks, "issued": issued,
            "col_cycles": col_cycles, "checker": checker, "log": log, "accepted": accepted_log}


def random_requests(n, rng, rows=3, write_share=0.3):
    reqs = []
    for tag in range(n):
        reqs.append({"write": int(rng.random() < write_share), "bank_group": rng.randrange(2),
                     "bank": rng.randrange(4), "row": rng.randrange(rows),
                     "column": rng.randrange(128), "tag": tag % 256})
    return reqs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_traffic_obeys_every_timing_rule(seed):
    rng = random.Random(seed)
    reqs = random_requests(200, rng)
    # tags must be unique while pending: 200 < 256
    res = run_scheduler(reqs, 12000, idle_prob=0.3, seed=seed)
    assert not res["pending"] and len(res["served"]) == 200, "every request served exactly once"
    by_tag = {tag: (cycle, kind) for cycle, tag, kind in res["served"]}
    for cycle, tag, write in res["marks"]:
        issue_cycle, kind = by_tag[tag]
        assert write == (kind == DramCommand.WR)
        assert cycle - issue_cycle == (TIMING.CWL if write else TIMING.tCL)
    assert len(res["marks"]) == 200


def test_sequential_stream_reaches_peak_rate_with_refresh():
    """A sequential read stream of one rank (default address map) sustains >= 90 % of the bus."""
    amap = AddressMap(ORG)
    reqs, tag = [], 0
    addr = 0
    while len(reqs) < 6000:
        c = amap.decode_burst(addr)
        addr += 64
        if c.rank != 0:
            continue
        reqs.append({"write": 0, "bank_group": c.bank_group, "bank": c.bank, "row": c.row,
                     "column": c.column, "tag": tag % 256})
        tag += 1
    # short tREFI/tRFC (same 5 % cost share, same rules) so the run spans several refreshes:
    # refresh is postponed while the queue is busy, so the first REF comes after 8 tREFI
    timing = dataclasses.replace(TIMING, tREFI=1500, tRFC=75)
    res = run_scheduler(reqs, 28000, timing=timing, queue_depth=8)
    cols = res["col_cycles"]
    first, last = cols[0], cols[-1]
    bus_share = len(cols) * TIMING.tCCD_S / (last - first + TIMING.tCCD_S)
    refresh_cost = timing.tRFC / timing.tREFI
    assert len(cols) == len(reqs) and res["issued"][DramCommand.REF] >= 5
    print(f"bus share {bus_share:.4f}, refresh cost {refresh_cost:.3f}, REFs {res['issued'][DramCommand.REF]}")
    assert bus_share >= 0.98 - refresh_cost - 0.02, f"bus share {bus_share:.3f}"


def test_refresh_when_idle_keeps_deadline():
    timing = dataclasses.replace(TIMING, tREFI=500, tRFC=100)
    res = run_scheduler([], 6000, timing=timing)
    assert 10 <= res["issued"][DramCommand.REF] <= 12


def test_bad_parameters():
    with pytest.raises(ValueError, match="queue_depth"):
        RankScheduler(ORG, TIMING, queue_depth=0)
    with pytest.raises(ValueError, match="refresh_phase"):
        RankScheduler(ORG, TIMING, refresh_phase=TIMING.tREFI)
    for bad in (0, 70000, 1.5, True):
        with pytest.raises(ValueError, match="age_limit"):
            RankScheduler(ORG, TIMING, age_limit=bad)


def test_read_never_passes_older_write_to_same_burst():
    """RD A, WR X, RD X in one row: the WR is held by read-to-write turnaround while the
    younger RD X is ready - it must still wait for the write (same-burst order)."""
    base = {"bank_group": 0, "bank": 1, "row": 7}
    reqs = [{**base, "write": 0, "column": 3, "tag": 1},
            {**base, "write": 1, "column": 9, "tag": 2},
            {**base, "write": 0, "column": 9, "tag": 3},
            {**base, "write": 0, "column": 10, "tag": 4}]
    res = run_scheduler(reqs, 400)
    order = [tag for _, tag, _ in res["served"]]
    assert order.index(2) < order.index(3), order
    # a read to another column may pass the waiting write (FR-FCFS still reorders)
    assert order.index(4) < order.index(2), order


def test_no_column_command_without_response_space():
    dut = RankScheduler(ORG, TIMING)
    sim = Simulator(dut)
    sim.add_clock(1e-9)
    seen = []

    async def tb(ctx):
        ctx.set(dut.resp_space, 0)
        ctx.set(dut.req.payload, {"write": 0, "bank_group": 0, "bank": 0, "row": 1, "column": 2,
                                  "tag": 5})
        ctx.set(dut.req.valid, 1)
        await ctx.tick().until(dut.req.ready)
        ctx.set(dut.req.valid, 0)
        for cycle in range(300):
            if cycle == 200:
                ctx.set(dut.resp_space, 1)
            seen.append((cycle, DramCommand(ctx.get(dut.cmd.kind))))
            await ctx.tick()

    sim.add_testbench(tb)
    sim.run()
    cols = [c for c, k in seen if k in (DramCommand.RD, DramCommand.WR)]
    assert any(k == DramCommand.ACT for _, k in seen[:100])      # rows still open meanwhile
    assert cols and cols[0] >= 200 and len(cols) == 1, cols


#: No refresh inside the short runs below (the refresh PREs close rows under their own rule).
NO_REFRESH = dataclasses.replace(TIMING, tREFI=60000)


@pytest.mark.parametrize("age_limit", [150, 400])
def test_starvation_bound_under_adversarial_urgent_hits(age_limit):
    """A normal request to another row of a bank that an endless run of urgent requests keeps
    hitting: urgent requests lead the bank and go first, so without the age bound it would wait
    for the whole run. It is served within ``age_limit`` of becoming the oldest plus one row
    cycle (the urgent hits still pending drain first, at most ``queue_depth`` tCCD_L)."""
    hot = {"write": 0, "bank_group": 0, "bank": 0, "row": 1, "urgent": 1}
    reqs = [{**hot, "column": 0, "tag": 0},
            {"write": 0, "bank_group": 0, "bank": 0, "row": 2, "column": 5, "tag": 1, "urgent": 0}]
    reqs += [{**hot, "column": (k + 1) % 128, "tag": 2 + k} for k in range(250)]
    q = 8
    res = run_scheduler(reqs, 4000, timing=NO_REFRESH, queue_depth=q, age_limit=age_limit)
    assert not res["pending"] and len(res["served"]) == len(reqs)
    order = [tag for _, tag, _ in res["served"]]
    served_at = {tag: c for c, tag, _ in res["served"]}
    head_at = served_at[0]                                # tag 1 is the oldest from here on
    wait = served_at[1] - head_at
    t = NO_REFRESH
    bound = age_limit + q * t.tCCD_L + t.tRTP + t.tRP + t.tRCD + 4
    assert wait <= bound, f"waited {wait} cycles as the oldest, bound {bound}"
    assert wait >= age_limit, "urgent hits must still win until the bound fires"
    assert order.index(1) < len(reqs) - 100, "served long before the urgent run ended"


def _oldest_pending_per_bank(pending_tags, requests_by_tag):
    oldest = {}
    for tag in pending_tags:                              # in arrival order
        r = requests_by_tag[tag]
        oldest.setdefault((r["bank_group"], r["bank"]), r)
    return oldest


@pytest.mark.parametrize("seed", [4, 5])
def test_precharge_rule_from_command_log(seed):
    """Random reads and writes over few rows (no urgent requests, no refresh, age bound out of
    reach): every PRE, reconstructed against the queue from the command log, closes a row that
    no queued request hits, for the bank's oldest queued request, which wants another row."""
    rng = random.Random(seed)
    reqs = random_requests(240, rng, rows=3)
    by_tag = {r["tag"]: r for r in reqs}
    res = run_scheduler(reqs, 16000, timing=NO_REFRESH, idle_prob=0.2, seed=seed, age_limit=65535)
    assert not res["pending"]
    # a command in cycle c is chosen from the queue before that cycle's request enters it
    events = sorted([(c, 1, "accept", tag) for c, tag in res["accepted"]] +
                    [(c, 0, "served", tag) for c, tag, _ in res["served"]] +
                    [(c, 0, "cmd", tuple(e)) for c, *e in res["log"]], key=lambda e: e[:2])
    pending, open_rows, checked = [], {}, 0
    for cycle, _, what, x in events:
        if what == "accept":
            pending.append(x)
        elif what == "served":
            pending.remove(x)
        elif x[0] == DramCommand.ACT:
            open_rows[x[1], x[2]] = x[3]
        elif x[0] == DramCommand.PRE:
            bank = x[1], x[2]
            oldest = _oldest_pending_per_bank(pending, by_tag).get(bank)
            assert oldest is not None and oldest["row"] != open_rows[bank], \
                f"cycle {cycle}: PRE of bank {bank} row {open_rows[bank]} for {oldest}"
            wanted = [t for t in pending if (by_tag[t]["bank_group"], by_tag[t]["bank"],
                                             by_tag[t]["row"]) == (*bank, open_rows[bank])]
            assert not wanted, f"cycle {cycle}: PRE of bank {bank} while {wanted} want its row"
            del open_rows[bank]
            checked += 1
    assert checked > 30


def test_bank_parallelism_from_command_log():
    """Random reads, each to a new row of one of 16 banks: from the command log, several banks
    of the rank are between PRE and ACT at the same time, and ACTs are far closer than the
    tRC of one bank."""
    rng = random.Random(7)
    reqs = [{"write": 0, "bank_group": rng.randrange(2), "bank": rng.randrange(4),
             "row": 10 + k, "column": rng.randrange(128), "tag": k % 256} for k in range(200)]
    res = run_scheduler(reqs, 8000, timing=NO_REFRESH, queue_depth=16)
    assert not res["pending"]
    closing, most = set(), 0
    for _, kind, bg, bank, _ in res["log"]:
        if kind == DramCommand.PRE:
            closing.add((bg, bank))
            most = max(most, len(closing))
        elif kind == DramCommand.ACT:
            closing.discard((bg, bank))
    assert most >= 4, f"at most {most} banks between PRE and ACT at once"
    acts = [c for c, kind, *_ in res["log"] if kind == DramCommand.ACT]
    mean_gap = (acts[-1] - acts[0]) / (len(acts) - 1)
    assert mean_gap < TIMING.tRC / 3, f"mean ACT spacing {mean_gap:.1f} cycles"
