"""The C++ DRAM model (cosim/dram/native.py) against the Python one (cosim/dram/model.py).

tests/cosim/dram/test_model.py runs every store and per-rule checker test on both
implementations; here both get the same long random stream of legal and illegal
commands (refresh, deadline misses, junk arguments included) and must agree on
every decision, exception field, message, earliest cycle, open row, clock and
counter. Then the build cache: reuse, a new key on any change, one compile under
concurrent builders, compiler errors reported.
"""

import collections
import dataclasses
import multiprocessing
import os
import random
import shutil
import stat
from pathlib import Path

import pytest

from ndpdimm.cosim.dram import model as py_model
from ndpdimm.cosim.dram import native as native
from ndpdimm.cosim.dram.model import TimingViolation
from ndpdimm.hw.memory.dram import DramOrganization, load_dram_config

ORG, T = load_dram_config()

ALL_CONSTRAINTS = {"tRFC", "CMD-bus", "tRC", "tRP", "tRAS", "tRCD", "tRRD_S", "tRRD_L", "tFAW",
                   "tCCD_S", "tCCD_L", "tWTR_S", "tWTR_L", "tRTW", "tWR", "tRTP", "CL", "CWL",
                   "protocol", "REF-open-bank", "tREFI"}

ONE_GROUP = DramOrganization(ranks=2, bank_groups=1, banks_per_group=4, row_bytes=1024,
                             burst_bytes=64, rows_per_bank=16)
FOUR_GROUPS = DramOrganization(ranks=1, bank_groups=4, banks_per_group=2, row_bytes=512,
                               burst_bytes=64, rows_per_bank=8)

# (organisation, timing overrides): short tREFI so that refresh deadlines and the
# credit rule matter within a few hundred commands; narrow tCCD makes the data bus
# (CL/CWL) binding; tRC > tRAS + tRP makes tRC binding alone.
VARIANTS = [
    (ORG, {}),
    (ORG, dict(tREFI=700, tRFC=90)),
    (ORG, dict(tCCD_S=2, tCCD_L=2, tREFI=900, tRFC=100)),
    (ORG, dict(tRC=80, tREFI=800, tRFC=60, max_postponed_refs=2)),
    (ONE_GROUP, dict(tREFI=600, tRFC=50)),
    (FOUR_GROUPS, dict(tREFI=650, tRFC=70, max_postponed_refs=1)),
]

JUNK_INDEX = [None, -1, True, "x", 1.5, 2 ** 70, -(2 ** 64)]


def outcome(fn, *args):
    """What a call did: its result, or everything about the exception it raised."""
    try:
        return ("ok", fn(*args))
    except TimingViolation as e:
        return ("violation", e.command, e.cycle, e.constraint, e.rank, e.bank_group, e.bank,
                e.earliest, e.detail, e.others, str(e),
                tuple(type(x).__name__ for x in (e.rank, e.bank_group, e.bank, e.earliest)))
    except ValueError as e:
        return ("value", str(e))


class Stream:
    """Random operations on one (Python, native) checker pair; every one is compared."""

    def __init__(self, rng, org, timing):
        self.rng, self.org, self.t = rng, org, timing
        self.py = py_model.TimingChecker(org, timing)
        self.nat = native.TimingChecker(org, timing)
        self.last_ref = [0] * org.ranks
        self.dead = set()             # ranks that missed their refresh deadline
        self.binding = collections.Counter()
        self.kinds = collections.Counter()

    # ---- running one operation on both -------------------------------------------------
    def run(self, method, *args):
        a = outcome(getattr(self.py, method), *args)
        b = outcome(getattr(self.nat, method), *args)
        assert a == b, (method, args)
        if a[0] != "ok":
            # The C++ model's own message (used by the C++ harness) is Python's, too.
            assert self.nat.last_error_message() == a[-2 if a[0] == "violation" else 1]
        if a[0] == "violation":
            self.binding[a[3]] += 1
            if a[3] == "tREFI":
                self.dead.add(a[4])
        assert self.py.cycle == self.nat.cycle
        assert self.py.stats() == self.nat.stats()
        self.kinds[(method, a[0])] += 1
        return a

    def issue(self, *cmd):
        res = self.run("issue", *cmd)
        if res[0] == "ok" and cmd[1] == "REF":
            self.last_ref[cmd[2]] = cmd[0]
        if res[0] == "ok":                      # the rank's bank states agree
            for g in range(self.org.bank_groups):
                for b in range(self.org.banks_per_group):
                    assert self.py.open_row(cmd[2], g, b) == self.nat.open_row(cmd[2], g, b)
        return res

    # ---- generating operations ---------------------------------------------------------
    def near(self, earliest):
        """A cycle at, just before or just after ``earliest`` (never before the clock)."""
        c = earliest + self.rng.choice([-3, -2, -1, -1, -1, 0, 0, 0, 0, 0, 1, 2, 5])
        return max(c, self.py.cycle)

    def pick_rank(self):
        alive = [r for r in range(self.org.ranks) if r not in self.dead]
        if alive and self.rng.random() < 0.95:
            return self.rng.choice(alive)
        return self.rng.randrange(self.org.ranks)

    def command(self, rank):
        """A command that is mostly protocol-legal for the bank it picks."""
        rng, org = self.rng, self.org
        g, b = rng.randrange(org.bank_groups), rng.randrange(org.banks_per_group)
        open_row = self.py.open_row(rank, g, b)
        col = rng.randrange(org.bursts_per_row)
        if open_row is None:
            cmd = rng.choices(["ACT", "PRE", "RD", "WR"], [12, 1, 0.3, 0.3])[0]
        else:
            cmd = rng.choices(["RD", "WR", "PRE", "PREA", "ACT"], [8, 5, 2, 1, 0.3])[0]
        row = None
        if cmd == "ACT":
            row = rng.randrange(min(org.rows_per_bank, 4))
        elif cmd in ("RD", "WR") and open_row is not None and rng.random() < 0.3:
            row = open_row if rng.random() < 0.8 else (open_row + 1) % org.rows_per_bank
        if cmd == "PREA":
            return cmd, (rank,)
        if cmd == "PRE":
            return cmd, (rank, g, b)
        return cmd, (rank, g, b, row, None if cmd == "ACT" else col)

    def refresh(self, rank):
        if any(self.py.open_row(rank, g, b) is not None
               for g in range(self.org.bank_groups) for b in range(self.org.banks_per_group)):
            if self.rng.random() < 0.9:
                cmd, args = "PREA", (rank,)
            else:
                cmd, args = "REF", (rank,)        # REF with a bank open
        else:
            cmd, args = "REF", (rank,)
        res = self.run("earliest_cycle", cmd, *args)
        cycle = self.near(res[1]) if res[0] == "ok" else self.py.cycle
        self.issue(cycle, cmd, *args)

    def junk(self):
        """A call with bad arguments: every error path must agree, message included."""
        rng, org, now = self.rng, self.org, self.py.cycle
        cmd, args = self.command(self.pick_rank())
        args = list(args) + [None] * (5 - len(args))
        what = rng.randrange(6)
        if what == 0:
            args[rng.randrange(5)] = rng.choice(JUNK_INDEX + [org.ranks, org.bank_groups,
                                                              org.banks_per_group, org.rows_per_bank,
                                                              org.bursts_per_row])
            self.run("earliest_cycle", cmd, *args)
            self.issue(now + rng.randrange(3), cmd, *args)
        elif what == 1:
            bad = rng.choice(["NOP", None, 3, "act", ("ACT",)])
            self.run("earliest_cycle", bad, *args)
            self.issue(now + 1, bad, *args)
        elif what == 2:
            self.issue(rng.choice([-1, "5", None, 2.0, True, now - 1 if now else -5]), cmd, *args)
        elif what == 3:
            self.run("check_refresh", now + rng.randrange(50), rng.choice([-1, org.ranks, "x", True, 1.0]))
        elif what == 4:
            self.run("check_refresh", rng.choice([-1, "7", None, now - 1 if now else -3]))
        else:                                   # PREA/REF ignore bank group and bank, whatever they are
            self.issue(now + rng.randrange(3), rng.choice(["PREA", "REF"]), self.pick_rank(),
                       rng.choice(JUNK_INDEX), rng.choice(JUNK_INDEX))

    def act_burst(self, rank):
        """ACTs to the rank's closed banks back to back: the tFAW window binds."""
        org = self.org
        for g, b in self.rng.sample([(g, b) for g in range(org.bank_groups)
                                     for b in range(org.banks_per_group)], min(6, org.banks_per_rank)):
            if self.py.open_row(rank, g, b) is None:
                args = (rank, g, b, self.rng.randrange(min(org.rows_per_bank, 4)))
                res = self.run("earliest_cycle", "ACT", *args)
                self.issue(self.near(res[1]), "ACT", *args)

    def step(self):
        rng, t = self.rng, self.t
        rank = self.pick_rank()
        overdue = (self.py.cycle - self.last_ref[rank]) / t.tREFI
        u = rng.random()
        if u < 0.01:                            # a long idle gap: refresh deadlines may pass
            self.run("check_refresh", self.py.cycle + rng.randrange(3 * t.tREFI))
        elif u < 0.05:
            self.junk()
        elif u < 0.08:
            self.run("check_refresh", self.py.cycle + rng.randrange(20), rng.choice([None, rank]))
        elif u < 0.10:
            self.act_burst(rank)
        elif u < 0.12 + 0.25 * max(0.0, overdue - 1):
            self.refresh(rank)
        else:
            cmd, args = self.command(rank)
            res = self.run("earliest_cycle", cmd, *args)
            cycle = self.near(res[1]) if res[0] == "ok" else self.py.cycle + rng.randrange(4)
            self.issue(cycle, cmd, *args)


def test_random_stream_python_and_native_agree():
    rng = random.Random(20240605)
    binding, kinds = collections.Counter(), collections.Counter()
    n_ops = 0
    for org, overrides in VARIANTS:
        timing = dataclasses.replace(T, **overrides)
        streams = []
        for i in range(1000):
            # a fresh pair every 500 steps and once every rank has missed its refresh
            if not streams or i == 500 or len(streams[-1].dead) == org.ranks:
                streams.append(Stream(rng, org, timing))
            streams[-1].step()
        for s in streams:
            binding.update(s.binding)
            kinds.update(s.kinds)
            n_ops += sum(s.kinds.values())
    assert n_ops > 10000
    # The stream exercised every rule as the binding one, and every kind of outcome.
    assert set(binding) == ALL_CONSTRAINTS, ALL_CONSTRAINTS - set(binding)
    issued = {k: v for (m, k), v in kinds.items() if m == "issue"}
    n_issued = sum(issued.values())
    assert n_issued > 5000
    assert issued["ok"] > 0.5 * n_issued and issued["violation"] > 0.2 * n_issued and issued["value"] > 20
    assert kinds[("check_refresh", "violation")] > 0 and kinds[("check_refresh", "value")] > 0
    assert kinds[("earliest_cycle", "violation")] > 0 and kinds[("earliest_cycle", "value")] > 0


def test_random_store_traffic_agrees():
    rng = random.Random(7)
    cap = 1 << 24
    a, b = py_model.SparseStore(cap, page_bytes=512), native.SparseStore(cap, page_bytes=512)
    for _ in range(3000):
        addr = rng.choice([rng.randrange(cap), rng.randrange(4096), cap - rng.randrange(1, 600),
                           -rng.randrange(1, 9), cap + rng.randrange(9), 2 ** 70, "0"])
        n = rng.choice([0, 1, rng.randrange(2000), -1, 2 ** 64])
        if rng.random() < 0.5:
            data = rng.randbytes(n if isinstance(n, int) and 0 <= n < 4096 else 8)
            data = rng.choice([data, bytearray(data), memoryview(data)])
            assert outcome(a.write, addr, data) == outcome(b.write, addr, data)
        else:
            assert outcome(a.read, addr, n) == outcome(b.read, addr, n)
        assert a.touched_bytes == b.touched_bytes
    assert a.touched_bytes > 100 * 512
    assert a.read(0, cap) == b.read(0, cap)


def test_constructors_reject_what_python_rejects():
    for args in ((0,), (-5,), (1.0,), (True,), (1 << 20, 1000), (1 << 20, 0), (1 << 20, "4096")):
        assert outcome(py_model.SparseStore, *args)[:2] == outcome(native.SparseStore, *args)[:2]
        assert outcome(native.SparseStore, *args)[0] == "value"
    for args in ((ORG, None), ("org", T), (T, ORG)):
        assert outcome(py_model.TimingChecker, *args) == outcome(native.TimingChecker, *args)
        assert outcome(native.TimingChecker, *args)[0] == "value"


def test_native_limits_are_value_errors():
    """Python ints are unbounded; the C++ model states its limits instead of overflowing."""
    c = native.TimingChecker(ORG, T)
    with pytest.raises(ValueError, match="exceeds the native checker's limit"):
        c.issue(1 << 61, "REF", 0)
    with pytest.raises(ValueError, match="exceeds the native checker's limit"):
        c.check_refresh(1 << 70)
    assert c.stats()["commands"]["REF"] == 0 and c.cycle == 0
    with pytest.raises(ValueError, match="tREFI must be in 1..1073741824"):
        native.TimingChecker(ORG, dataclasses.replace(T, tREFI=1 << 31))
    with pytest.raises(ValueError, match="64-bit range"):
        native.TimingChecker(ORG, dataclasses.replace(T, tREFI=1 << 64))
    huge = DramOrganization(ranks=1 << 11, bank_groups=1 << 5, banks_per_group=1 << 5, row_bytes=64,
                            burst_bytes=64, rows_per_bank=1)
    with pytest.raises(ValueError, match="at most 1048576 banks in all ranks"):
        native.TimingChecker(huge, T)
    with pytest.raises(ValueError, match="exceeds the native store's limit"):
        native.SparseStore((1 << 62) + 1)
    with pytest.raises(ValueError, match="64-bit range"):
        native.SparseStore(1 << 63)


def test_open_row_indexes_like_a_python_list():
    py, nat = py_model.TimingChecker(ORG, T), native.TimingChecker(ORG, T)
    for c in (py, nat):
        c.issue(0, "ACT", 3, 1, 3, 77)
    for idx in ((3, 1, 3), (-1, -1, -1), (0, 0, 0), (2, 1, 3)):
        assert py.open_row(*idx) == nat.open_row(*idx)
    for idx in ((4, 0, 0), (0, 2, 0), (0, 0, -5)):
        for c in (py, nat):
            with pytest.raises(IndexError):
                c.open_row(*idx)


# ---- build cache ----------------------------------------------------------------------------

def test_library_comes_from_the_cache(monkeypatch):
    lib = native.build_library()
    assert lib.name == native.LIB_NAME and lib.parent.name == native.source_hash()
    assert lib.parent.parent == native.default_build_root()
    assert (lib.parent / "src" / "dram_model.cpp").read_bytes() == \
        (native.SOURCE_DIR / "dram_model.cpp").read_bytes()

    def no_compiling(*args, **kwargs):
        raise AssertionError(f"compiled again: {args}")
    monkeypatch.setattr(native.subprocess, "run", no_compiling)
    assert native.build_library() == lib


def test_hash_follows_sources_and_flags(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(native.SOURCE_DIR, src)
    base = native.source_hash(src)
    assert base == native.source_hash()
    assert native.source_hash(src, native.CXX_FLAGS + ("-DX",)) != base
    with open(src / "dram_model.h", "a") as f:
        f.write("// edited\n")
    assert native.source_hash(src) != base


def _build_in(root, flags, cxx, barrier, out):
    os.environ["CXX"] = cxx
    barrier.wait()                                 # both ask at the same moment
    out.write_text(str(native.build_library(build_root=root, flags=flags)))


def test_concurrent_builders_compile_once(tmp_path, spawn_importable):
    """Two processes asking for the same new library at once: one compiles, both get it."""
    count = tmp_path / "compiles"
    cxx = tmp_path / "counting-g++"                # counts compiles; slow, to widen the race
    cxx.write_text(f'#!/bin/sh\ncase "$*" in *" -o "*) echo x >> {count}; sleep 1;; esac\n'
                   f'exec g++ "$@"\n')
    cxx.chmod(cxx.stat().st_mode | stat.S_IXUSR)
    flags = ("-std=c++17", "-O0", "-shared", "-fPIC")        # -O0: the cheapest real build
    root = tmp_path / "cache"
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(2)
    outs = [tmp_path / f"out{i}" for i in range(2)]
    procs = [ctx.Process(target=_build_in, args=(root, flags, str(cxx), barrier, out)) for out in outs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(300)
    assert [p.exitcode for p in procs] == [0, 0]
    paths = [out.read_text() for out in outs]
    assert paths[0] == paths[1] and Path(paths[0]).is_file()
    assert count.read_text() == "x\n"
    assert [p.name for p in Path(paths[0]).parent.iterdir() if ".tmp" in p.name] == []
    lib = native._load(paths[0])                   # a loadable library with the expected ABI
    assert lib.ndpdram_abi_version() == native.ABI_VERSION


def test_compiler_errors_are_reported_and_leave_no_library(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(native.SOURCE_DIR, src)
    cpp = src / "dram_model.cpp"
    cpp.write_text('#include "deliberately_missing.h"\n' + cpp.read_text())   # fatal at once
    with pytest.raises(RuntimeError, match="deliberately_missing.h"):
        native.build_library(build_root=tmp_path / "cache", sources_dir=src)
    assert list((tmp_path / "cache").rglob(native.LIB_NAME + "*")) == []
