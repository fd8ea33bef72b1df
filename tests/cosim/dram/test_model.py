"""DRAM model: config loader, address map, sparse store and the DDR4 timing checker.

Every timing rule has a sequence that passes at exactly the minimum spacing and
fails one cycle earlier with that rule's name; a realistic 4-rank read stream
at the peak rate (with refresh) runs through the checker without a violation.

The store and checker tests run on both implementations (fixture ``impl``): the
Python model (``cosim/dram/model.py``) and the C++ one of the fast harness
(``cosim/dram/native.py``); tests/cosim/dram/test_native.py compares the two
on a long random command stream.
"""

import dataclasses
import random
import re

import numpy as np
import pytest

from ndpdimm.cosim.dram import model as dram_model
from ndpdimm.cosim.dram import native as dram_model_native
from ndpdimm.cosim.dram.model import DramModel, TimingViolation
from ndpdimm.hw.config_file import ConfigError
from ndpdimm.hw.memory.address_map import DEFAULT_SCHEME, AddressMap, DramCoord
from ndpdimm.hw.memory.dram import (
    DEFAULT_CONFIG_PATH,
    DramOrganization,
    load_dram_config,
    peak_bandwidth_bytes_per_s,
)

ORG, T = load_dram_config()
REFI = T.tREFI

IMPLS = {"python": dram_model, "native": dram_model_native}


@pytest.fixture(params=list(IMPLS))
def impl(request):
    """The module whose ``SparseStore`` / ``TimingChecker`` a test runs on."""
    return IMPLS[request.param]


# ---- config ---------------------------------------------------------------------------------

SPEC_TIMING = dict(tCK_ns=0.625, tRC=76, tRCD=24, tCL=24, tRP=24, tRAS=52, tBL=4, tCCD_S=4,
                   tCCD_L=8, tRRD_S=4, tRRD_L=6, tFAW=26, tWR=24, tWTR_S=4, tWTR_L=12,
                   tRTP=12, CWL=16, tREFI=12480, tRFC=560, max_postponed_refs=8)
SPEC_ORG = dict(ranks=4, bank_groups=2, banks_per_group=4, row_bytes=8192, burst_bytes=64,
                rows_per_bank=131072)


def test_default_config_is_the_spec():
    assert dataclasses.asdict(ORG) == SPEC_ORG
    assert dataclasses.asdict(T) == SPEC_TIMING
    assert ORG.capacity_bytes == 32 << 30
    assert ORG.bursts_per_row == 128 and ORG.banks_per_rank == 8 and ORG.address_bits == 35
    assert peak_bandwidth_bytes_per_s(ORG, T) == pytest.approx(102.4e9)
    assert T.clock_hz == pytest.approx(1.6e9)
    assert (T.write_to_precharge, T.write_to_read(False), T.write_to_read(True),
            T.read_to_write, T.refresh_deadline) == (44, 24, 32, 14, 9 * 12480)


def test_explicit_default_path_loads_the_same():
    assert load_dram_config(DEFAULT_CONFIG_PATH) == (ORG, T)


def _v(key, value):
    """The start of ``key``'s line in the DRAM file, with ``value``."""
    return f"{key} = {{ value = {value},"


BROKEN = [
    ("unknown key", "[timing]\n", "[timing]\ntXYZ = { value = 3, source = 's' }\n", "timing.tXYZ"),
    ("missing key", "\ntRCD = ", "\nxRCD = ", "timing.tRCD"),
    ("missing org key", "\nranks = ", "\nrankz = ", "organization.ranks"),
    ("zero", _v("tRCD", 24), _v("tRCD", 0), "tRCD"),
    ("negative", _v("tFAW", 26), _v("tFAW", -26), "tFAW"),
    ("float cycles", _v("tRP", 24), _v("tRP", 24.5), "tRP"),
    ("bool", _v("tRP", 24), _v("tRP", "true"), "tRP"),
    ("string", _v("CWL", 16), _v("CWL", '"16"'), "CWL"),
    ("tCK zero", _v("tCK_ns", 0.625), _v("tCK_ns", 0.0), "tCK_ns"),
    ("tCK nan", _v("tCK_ns", 0.625), _v("tCK_ns", "nan"), "timing.tCK_ns is nan"),
    ("tRC inf", _v("tRC", 76), _v("tRC", "inf"), "timing.tRC is inf"),
    ("misspelt source", 'tRP = { value = 24, source = "', 'tRP = { value = 24, sorce = "',
     "timing.tRP has unknown key sorce"),
    ("bare number", re.compile(r"tRP = \{ value = 24, source = .*"), "tRP = 24",
     "timing.tRP = 24 has no source"),
    ("no source", re.compile(r"(tWR = \{ value = 24), source = [^}]*"), r"\1 ",
     "timing.tWR has no source"),
    ("empty source", re.compile(r"(tWR = \{ value = 24, source = )\"[^\"]*\""), r'\1"  "',
     "timing.tWR has no source"),
    ("not power of two", _v("ranks", 4), _v("ranks", 3), "ranks"),
    ("rows not power of two", _v("rows_per_bank", 131072), _v("rows_per_bank", 100000),
     "rows_per_bank"),
    ("non-positive org", _v("bank_groups", 2), _v("bank_groups", 0), "bank_groups"),
    ("L below S", _v("tCCD_L", 8), _v("tCCD_L", 2), "tCCD_L"),
    ("unknown table", "[timing]", "[extra]\nx = 1\n[timing]", "extra"),
    ("missing table", "[organization]", "[organisation]", "organisation"),
    ("bad toml", _v("tRP", 24), "tRP = = 24", "not valid TOML"),
]


@pytest.mark.parametrize("old,new,needle", [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_broken_config_names_key_and_file(tmp_path, old, new, needle):
    text = DEFAULT_CONFIG_PATH.read_text()
    broken = old.sub(new, text, 1) if isinstance(old, re.Pattern) else text.replace(old, new, 1)
    assert broken != text
    path = tmp_path / "broken.toml"
    path.write_text(broken)
    with pytest.raises(ConfigError) as e:
        load_dram_config(path)
    assert needle in str(e.value) and str(path) in str(e.value) and "\n" not in str(e.value)


def test_missing_file_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="nope.toml"):
        load_dram_config(tmp_path / "nope.toml")


# ---- address map ----------------------------------------------------------------------------

SCHEMES = [DEFAULT_SCHEME, "offset:column:bank_group:bank:rank:row", "offset:rank:column:row:bank:bank_group"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_address_map_round_trip(scheme):
    m = AddressMap(ORG, scheme, bank_rotate=False)       # field order only (rotation: below)
    g = random.Random(scheme)
    for _ in range(3000):
        a = g.randrange(ORG.capacity_bytes)
        c = m.decode(a)
        assert m.encode(c) == a
        assert m.decode_burst(a - c.offset) == c._replace(offset=0)
    for _ in range(1000):
        c = DramCoord(g.randrange(ORG.ranks), g.randrange(ORG.bank_groups),
                      g.randrange(ORG.banks_per_group), g.randrange(ORG.rows_per_bank),
                      g.randrange(ORG.bursts_per_row), g.randrange(ORG.burst_bytes))
        assert m.decode(m.encode(c)) == c
    assert m.decode(ORG.capacity_bytes - 1) == DramCoord(3, 1, 3, ORG.rows_per_bank - 1, 127, 63)


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("rotate", [False, True])
def test_address_map_field_of_many_addresses_matches_decode(scheme, rotate):
    """``field`` on an array of addresses gives what ``decode`` gives one at a time (the bank
    with its row rotation); an unknown field name is refused."""
    m = AddressMap(ORG, scheme, bank_rotate=rotate)
    g = random.Random(f"{scheme}{rotate}")
    addrs = [g.randrange(ORG.capacity_bytes) for _ in range(2000)]
    arr = np.array(addrs, dtype=np.int64)
    for name in DramCoord._fields:
        want = [getattr(m.decode(a), name) for a in addrs]
        assert m.field(name, arr).tolist() == want, name
        assert m.field(name, addrs[0]) == want[0], name
    with pytest.raises(ValueError, match="unknown address field 'lane'"):
        m.field("lane", 0)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_address_map_is_a_bijection_on_a_small_organisation(scheme):
    org = DramOrganization(ranks=2, bank_groups=2, banks_per_group=2, row_bytes=256,
                           burst_bytes=64, rows_per_bank=4)
    m = AddressMap(org, scheme)
    coords = {m.decode(a) for a in range(org.capacity_bytes)}
    assert len(coords) == org.capacity_bytes
    assert sorted(m.encode(c) for c in coords) == list(range(org.capacity_bytes))


def test_default_map_alternates_bank_groups_and_cycles_ranks():
    m = AddressMap(ORG)
    assert m.field_slices() == {"offset": (0, 6), "bank_group": (6, 1), "rank": (7, 2),
                                "column": (9, 7), "bank": (16, 2), "row": (18, 17)}
    prev = None
    for i in range(3 * 2 * 4 * 128 * 4):          # 3 full rows in every bank pair of every rank
        c = m.decode_burst(i * 64)
        assert c.bank_group == i % 2
        assert c.rank == (i // 2) % 4
        assert c.column == (i // 8) % 128
        assert c.bank == ((i // 1024) + i // 4096) % 4 and c.row == i // 4096
        if prev is not None:
            assert c.bank_group != prev.bank_group        # never two bursts in a row in one group
        prev = c
    assert [c.rank for c in m.burst_coords(0, 512)] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert len(m.burst_coords(32, 64)) == 2 and m.burst_coords(5, 0) == []


@pytest.mark.parametrize("scheme,needle", [
    ("offset:bank_group:rank:column:bank:rows", "'rows'"),
    ("offset:bank_group:rank:column:bank", "'row' is missing"),
    ("offset:bank_group:rank:column:bank:row:bank", "'bank' appears 2 times"),
    ("bank_group:offset:rank:column:bank:row", "'offset' must be"),
    ("", "unknown field"),
])
def test_bad_scheme_raises_with_value(scheme, needle):
    with pytest.raises(ValueError) as e:
        AddressMap(ORG, scheme)
    assert needle in str(e.value) and repr(scheme) in str(e.value)


def test_bad_addresses_raise():
    m = AddressMap(ORG)
    for bad in (-1, ORG.capacity_bytes, 1 << 40, 1.0, "0", True):
        with pytest.raises(ValueError):
            m.decode(bad)
    with pytest.raises(ValueError, match="0x20 is not aligned"):
        m.decode_burst(32)
    with pytest.raises(ValueError, match="column=128"):
        m.encode(DramCoord(0, 0, 0, 0, 128))
    with pytest.raises(ValueError, match="rank=4"):
        m.encode(DramCoord(4, 0, 0, 0, 0))
    with pytest.raises(ValueError):
        m.burst_coords(ORG.capacity_bytes - 64, 128)


# ---- sparse store ---------------------------------------------------------------------------

def test_sparse_store_first_touch_and_zeros(impl):
    s = impl.SparseStore(32 << 30)
    assert s.read(12345, 100) == bytes(100) and s.touched_bytes == 0
    s.write(4096 - 3, b"abcdef")                       # straddles two pages
    assert s.touched_bytes == 2 * 4096
    assert s.read(4096 - 5, 10) == b"\0\0abcdef\0\0"
    s.write(4096, np.arange(4, dtype=np.uint16))       # any bytes-like, native byte order
    assert s.read(4096, 8) == np.arange(4, dtype=np.uint16).tobytes()
    assert s.touched_bytes == 2 * 4096
    s.write(0, b"")
    assert s.read(0, 0) == b""


def test_sparse_store_out_of_range_writes_nothing(impl):
    cap = 1 << 20
    s = impl.SparseStore(cap, page_bytes=256)
    for addr, n in ((cap - 5, 10), (-1, 4), (cap, 1)):
        with pytest.raises(ValueError):
            s.write(addr, bytes(range(1, n + 1)))
    assert s.touched_bytes == 0 and s.read(cap - 5, 5) == bytes(5)
    for addr, n in ((cap - 5, 10), (-1, 4), (0, -1)):
        with pytest.raises(ValueError):
            s.read(addr, n)
    with pytest.raises(ValueError):
        impl.SparseStore(cap, page_bytes=1000)
    with pytest.raises(ValueError):
        s.write(0, 1234)


def test_32gib_store_costs_only_touched_pages(impl):
    s = impl.SparseStore(ORG.capacity_bytes)
    g = random.Random(1)
    written = {}
    for _ in range(500):
        a = g.randrange(ORG.capacity_bytes - 8) & ~7
        written[a] = g.randbytes(8)
        s.write(a, written[a])
    assert s.touched_bytes <= 500 * 4096
    for a, d in written.items():
        assert s.read(a, 8) == d
    s.write(ORG.capacity_bytes - 8, b"12345678")
    assert s.read(ORG.capacity_bytes - 8, 8) == b"12345678"


# ---- timing checker: one case per rule ----------------------------------------------------

def ACT(c, g=0, b=0, row=0, rank=0):
    return (c, "ACT", rank, g, b, row, None)


def RD(c, g=0, b=0, col=0, rank=0):
    return (c, "RD", rank, g, b, None, col)


def WR(c, g=0, b=0, col=0, rank=0):
    return (c, "WR", rank, g, b, None, col)


def PRE(c, g=0, b=0, rank=0):
    return (c, "PRE", rank, g, b, None, None)


def PREA(c, rank=0):
    return (c, "PREA", rank, None, None, None, None)


def REF(c, rank=0):
    return (c, "REF", rank, None, None, None, None)


NARROW_CCD = dict(tCCD_S=2, tCCD_L=2)     # makes the data bus the binding rule

# (constraint, timing overrides, sequence whose LAST command sits at exactly its minimum cycle)
RULES = [
    ("tRCD", {}, [ACT(0), RD(24)]),
    ("tRCD", {}, [ACT(0), WR(24)]),
    ("tRP", {}, [ACT(0), PRE(60), ACT(84)]),
    ("tRP", {}, [ACT(0), PREA(60), ACT(84)]),
    ("tRP", {}, [ACT(0), PRE(52), REF(76)]),
    ("tRAS", {}, [ACT(0), PRE(52)]),
    ("tRAS", {}, [ACT(0), ACT(4, g=1), PREA(56)]),
    ("tRC", {}, [ACT(0), PRE(52), ACT(76)]),           # ties with tRP: tRC = tRAS + tRP
    ("tRC", {"tRC": 80}, [ACT(0), PRE(52), ACT(80)]),  # tRC alone binding
    ("tRRD_S", {}, [ACT(0, g=0), ACT(4, g=1)]),
    ("tRRD_L", {}, [ACT(0, g=0, b=0), ACT(6, g=0, b=1)]),
    ("tFAW", {}, [ACT(0, 0, 0), ACT(4, 1, 0), ACT(8, 0, 1), ACT(12, 1, 1), ACT(26, 0, 2)]),
    ("tCCD_S", {}, [ACT(0, g=0), ACT(4, g=1), RD(28, g=0), RD(32, g=1)]),
    ("tCCD_S", {}, [ACT(0, g=0), ACT(4, g=1), WR(28, g=0), WR(32, g=1)]),
    ("tCCD_L", {}, [ACT(0), RD(24, col=0), RD(32, col=1)]),
    ("tCCD_L", {}, [ACT(0), WR(24, col=0), WR(32, col=1)]),
    ("tWR", {}, [ACT(0), WR(24), PRE(68)]),
    ("tWR", {}, [ACT(0), WR(24), PREA(68)]),
    ("tWTR_S", {}, [ACT(0, g=0), ACT(4, g=1), WR(28, g=0), RD(52, g=1)]),
    ("tWTR_L", {}, [ACT(0), WR(24), RD(56)]),
    ("tRTP", {}, [ACT(0), RD(50), PRE(62)]),
    ("tRTW", {}, [ACT(0, g=0), ACT(4, g=1), RD(28, g=0), WR(42, g=1)]),
    ("tRTW", {}, [ACT(0), RD(24), WR(38)]),
    ("CL", NARROW_CCD, [ACT(0, g=0), ACT(4, g=1), RD(28, g=0), RD(32, g=1)]),
    ("CWL", NARROW_CCD, [ACT(0, g=0), ACT(4, g=1), WR(28, g=0), WR(32, g=1)]),
    ("tRFC", {}, [REF(0), ACT(560)]),
    ("tRFC", {}, [REF(0), REF(560)]),
    ("tRFC", {}, [REF(0), PRE(560)]),                  # even a no-op PRE waits for the refresh
    ("CMD-bus", {}, [ACT(0, g=0), RD(24, g=0), ACT(25, g=1)]),
]
RULE_IDS = [f"{c}-{i}" for i, (c, _, _) in enumerate(RULES)]


def checker(impl, **overrides):
    return impl.TimingChecker(ORG, dataclasses.replace(T, **overrides))


@pytest.mark.parametrize("constraint,overrides,seq", RULES, ids=RULE_IDS)
def test_rule_passes_at_minimum_spacing(constraint, overrides, seq, impl):
    c = checker(impl, **overrides)
    for cmd in seq[:-1]:
        c.issue(*cmd)
    assert c.earliest_cycle(*seq[-1][1:]) == seq[-1][0]
    c.issue(*seq[-1])


@pytest.mark.parametrize("constraint,overrides,seq", RULES, ids=RULE_IDS)
def test_rule_one_cycle_early_raises(constraint, overrides, seq, impl):
    c = checker(impl, **overrides)
    for cmd in seq[:-1]:
        c.issue(*cmd)
    last = seq[-1]
    with pytest.raises(TimingViolation) as e:
        c.issue(last[0] - 1, *last[1:])
    v = e.value
    assert (v.constraint, v.command, v.cycle, v.rank, v.earliest) == (
        constraint, last[1], last[0] - 1, last[2], last[0])
    assert isinstance(v, AssertionError)
    for text in (constraint, last[1], f"cycle {last[0] - 1}", f"earliest legal cycle is {last[0]}",
                 f"rank {last[2]}"):
        assert text in str(v)
    c.issue(*last)                                     # the rejected command left no trace


def test_violation_lists_every_broken_rule(impl):
    c = checker(impl)
    c.issue(*ACT(0))
    c.issue(*PRE(52))
    with pytest.raises(TimingViolation) as e:
        c.issue(*ACT(70))
    assert e.value.constraint == "tRC" and dict(e.value.others) == {"tRP": 76}
    assert "bank group 0 bank 0" in str(e.value) and "tRP (earliest 76)" in str(e.value)


def test_ranks_are_independent(impl):
    c = checker(impl)
    for rank in range(4):                              # same cycle on 4 ranks: own CA and data buses
        c.issue(*ACT(0, rank=rank))
    for rank in range(4):
        c.issue(*RD(24, rank=rank))
    for rank in range(4):
        c.issue(*RD(32, rank=rank, col=1))


def test_data_helpers(impl):
    c = checker(impl)
    assert c.read_data_cycle(100) == 124 and c.write_data_cycle(100) == 116


# ---- protocol -------------------------------------------------------------------------------

PROTOCOL = [
    ("ACT to open bank", [ACT(0)], ACT(100, row=1), "already has row 0 open"),
    ("RD closed bank", [], RD(100), "bank is closed"),
    ("WR closed bank", [ACT(0), PRE(60)], WR(100), "bank is closed"),
    ("RD other row", [ACT(0, row=7)], (100, "RD", 0, 0, 0, 8, 0), "row 8 is not the open row 7"),
    ("ACT without row", [], (100, "ACT", 0, 0, 0, None, None), "needs a row"),
    ("bad rank", [], ACT(100, rank=4), "rank 4"),
    ("bad bank group", [], ACT(100, g=2), "bank group 2"),
    ("bad bank", [], ACT(100, b=4), "bank 4"),
    ("bad row", [], ACT(100, row=ORG.rows_per_bank), f"row {ORG.rows_per_bank}"),
    ("bad column", [ACT(0)], RD(100, col=128), "column 128"),
    ("PRE without bank", [], (100, "PRE", 0, 0, None, None, None), "bank None"),
]


@pytest.mark.parametrize("prefix,cmd,needle", [p[1:] for p in PROTOCOL], ids=[p[0] for p in PROTOCOL])
def test_protocol_errors(prefix, cmd, needle, impl):
    c = checker(impl)
    for p in prefix:
        c.issue(*p)
    with pytest.raises(TimingViolation) as e:
        c.issue(*cmd)
    assert e.value.constraint == "protocol" and e.value.earliest is None
    assert needle in str(e.value) and "protocol" in str(e.value)


def test_api_misuse_is_value_error(impl):
    c = checker(impl)
    c.issue(*ACT(100))
    with pytest.raises(ValueError, match="back in time"):
        c.issue(*ACT(99, g=1))
    with pytest.raises(ValueError, match="unknown DRAM command"):
        c.issue(200, "NOP", 0)
    with pytest.raises(ValueError):
        c.issue(-1, "REF", 0)


def test_precharge_of_closed_bank_is_a_no_op(impl):
    c = checker(impl)
    c.issue(*PRE(0))
    c.issue(*ACT(1))                                   # no tRP after a PRE that closed nothing
    c.issue(*PREA(53, rank=0))                         # closes (0, 0) only
    c.issue(*ACT(54, g=1, b=3))                        # other banks were closed: no tRP
    c.issue(*ACT(77))                                  # (0, 0): tRP from the PREA


# ---- refresh --------------------------------------------------------------------------------

def test_ref_with_open_bank(impl):
    c = checker(impl)
    c.issue(*ACT(0, g=1, b=2))
    with pytest.raises(TimingViolation) as e:
        c.issue(*REF(1000))
    assert e.value.constraint == "REF-open-bank" and "(1, 2)" in str(e.value)


def test_refresh_deadline_after_nine_intervals(impl):
    c = checker(impl)
    c.issue(*ACT(9 * REFI, rank=1))                    # exactly 9 x tREFI after cycle 0: fine
    c.check_refresh(9 * REFI)
    with pytest.raises(TimingViolation) as e:
        c.issue(*ACT(9 * REFI + 1, rank=2))
    assert e.value.constraint == "tREFI" and e.value.rank == 2
    with pytest.raises(TimingViolation) as e:
        c.check_refresh(9 * REFI + 1)
    assert e.value.constraint == "tREFI" and e.value.command == "check_refresh"
    with pytest.raises(TimingViolation):               # a late REF is still late
        c.issue(*REF(9 * REFI + 1, rank=0))


def test_postponing_eight_refreshes_is_fine_then_they_are_owed(impl):
    c = checker(impl)
    for k in range(9):                                 # 8 postponed + the due one, back to back
        c.issue(*REF(9 * REFI + k * T.tRFC))
    c.check_refresh(18 * REFI, rank=0)
    with pytest.raises(TimingViolation, match="tREFI"):
        c.check_refresh(18 * REFI + 1, rank=0)


def test_refresh_debt_is_enforced_not_just_the_gap(impl):
    # One REF per 9 x tREFI keeps every gap legal but refreshes 1/9 as often as needed.
    c = checker(impl)
    c.issue(*REF(9 * REFI))
    c.check_refresh(10 * REFI, rank=0)
    with pytest.raises(TimingViolation) as e:
        c.check_refresh(10 * REFI + 1, rank=0)
    assert "1 REFs credited" in str(e.value)


def test_pulled_in_refreshes_earn_at_most_eight_credits(impl):
    c = checker(impl)
    for k in range(20):
        c.issue(*REF(k * T.tRFC))
    c.issue(*REF(9 * REFI))
    c.issue(*REF(18 * REFI))
    c.check_refresh(19 * REFI, rank=0)
    with pytest.raises(TimingViolation, match="tREFI"):
        c.check_refresh(19 * REFI + 1, rank=0)


def test_regular_refresh_runs_forever(impl):
    c = checker(impl)
    for k in range(1, 40):
        for rank in range(4):
            c.issue(*REF(k * REFI + rank, rank=rank))
    c.check_refresh(48 * REFI)
    assert c.stats()["refreshes"] == 39 * 4


# ---- DramModel ------------------------------------------------------------------------------

def test_model_data_goes_through_the_address_map():
    m = DramModel(ORG, T)
    payload = bytes(range(256)) * 4
    m.load(0x1234_5640, payload)
    assert m.dump(0x1234_5640, len(payload)) == payload
    coord = m.address_map.decode_burst(0x1234_5640 + 128)
    m.command(0, "ACT", coord.rank, coord.bank_group, coord.bank, row=coord.row)
    assert m.rd(24, coord) == payload[128:192]
    m.wr(40, coord, b"\xaa" * 64)
    assert m.dump(0x1234_5640 + 128, 64) == b"\xaa" * 64
    assert m.read_burst(coord) == b"\xaa" * 64
    s = m.stats()
    assert s["commands"]["RD"] == 1 and s["commands"]["WR"] == 1
    assert (s["row_misses"], s["row_hits"]) == (1, 1) and s["touched_bytes"] == 4096
    with pytest.raises(ValueError):
        m.write_burst(coord, b"short")
    with pytest.raises(ValueError):
        m.load(ORG.capacity_bytes - 1, b"ab")


def test_model_checks_every_ranks_refresh():
    m = DramModel(ORG, T)
    for k in range(1, 10):
        m.command(k * REFI, "REF", 0)                   # rank 0 is refreshed, ranks 1-3 are not
    with pytest.raises(TimingViolation) as e:
        m.command(9 * REFI + 600, "ACT", 0, 0, 0, row=0)
    assert e.value.constraint == "tREFI" and e.value.rank == 1


def test_model_rejects_a_map_of_another_organisation():
    other = dataclasses.replace(ORG, ranks=2)
    with pytest.raises(ValueError):
        DramModel(ORG, T, AddressMap(other))


# ---- a realistic stream at the peak rate ---------------------------------------------------

def rank_stream(rank, segments, t):
    """Commands of one rank reading whole (bank, row) segments, one RD every tCCD_S.

    A segment is 256 bursts (2 bank groups x 128 columns, alternating groups).
    The next segment's rows are opened while the current one streams; every
    tREFI (staggered across ranks) the rank closes its rows and refreshes.
    """
    per_seg = 2 * ORG.bursts_per_row
    step = t.tCCD_S
    span = per_seg * step
    cmds = [ACT(0, 0, *segments[0], rank=rank), ACT(4, 1, *segments[0], rank=rank)]
    s = 4 + t.tRCD
    due = (rank + 1) * t.tREFI // 4
    for i, (bank, row) in enumerate(segments):
        for k in range(per_seg):
            cmds.append(RD(s + step * k, g=k % 2, b=bank, col=k // 2, rank=rank))
        last = i == len(segments) - 1
        refresh = s + span >= due
        if not last and not refresh:
            nbank, nrow = segments[i + 1]
            cmds += [ACT(s + 801, 0, nbank, nrow, rank), ACT(s + 805, 1, nbank, nrow, rank)]
        end0, end1 = s + span - 2 * step, s + span - step           # last RD per group
        cmds += [PRE(end0 + t.tRTP + 1, 0, bank, rank), PRE(end1 + t.tRTP + 1, 1, bank, rank)]
        if refresh:
            ref = end1 + t.tRTP + 1 + t.tRP
            cmds.append(REF(ref, rank))
            due += t.tREFI
            if not last:
                nbank, nrow = segments[i + 1]
                cmds += [ACT(ref + t.tRFC, 0, nbank, nrow, rank),
                         ACT(ref + t.tRFC + 4, 1, nbank, nrow, rank)]
            s = ref + t.tRFC + 4 + t.tRCD - step
        else:
            s += span
    return cmds


def stream_commands(n_bytes):
    m = AddressMap(ORG)
    per_rank = {r: [] for r in range(ORG.ranks)}
    for coord in m.burst_coords(0, n_bytes):
        segs = per_rank[coord.rank]
        if not segs or segs[-1] != (coord.bank, coord.row):
            segs.append((coord.bank, coord.row))
    cmds = [c for r, segs in per_rank.items() for c in rank_stream(r, segs, T)]
    cmds.sort(key=lambda c: c[0])
    return cmds


def test_peak_rate_stream_with_refresh_is_legal(impl):
    n_bytes = 130 * 64 * 1024                          # 130 segments per rank, ~140k cycles
    cmds = stream_commands(n_bytes)
    c = checker(impl)
    for cmd in cmds:
        c.issue(*cmd)
    end = cmds[-1][0]
    c.check_refresh(end)
    assert end > 9 * REFI                              # long enough for the refresh deadline to matter
    s = c.stats()
    n_bursts = n_bytes // ORG.burst_bytes
    assert s["commands"]["RD"] == n_bursts
    assert s["row_misses"] == s["commands"]["ACT"] == n_bursts // 128
    assert s["row_hits"] == n_bursts - s["row_misses"]
    assert s["refreshes"] >= ORG.ranks * (end // REFI)
    # Bus utilisation: all 4 ranks busy except for refresh (tRFC/tREFI = 4.5 %) and its row re-opening.
    efficiency = n_bursts * T.tBL / (ORG.ranks * (end + T.tCL + T.tBL))
    refresh_bound = 1 - (s["refreshes"] / ORG.ranks) * T.tRFC / end     # no data during tRFC
    assert 0.94 < efficiency < refresh_bound


def test_stream_checker_catches_one_early_read(impl):
    cmds = stream_commands(4 * 64 * 1024)
    reads = [i for i, c in enumerate(cmds) if c[1] == "RD"]
    i = reads[500]
    early = (cmds[i][0] - 1,) + cmds[i][1:]
    c = checker(impl)
    for cmd in cmds[:i]:
        if cmd[0] <= early[0]:
            c.issue(*cmd)
    with pytest.raises(TimingViolation) as e:
        c.issue(*early)
    assert e.value.constraint == "tCCD_S" and e.value.earliest == cmds[i][0]


def test_bank_rotation_spreads_same_bank_strides():
    """Addresses a multiple of the 4-bank span (256 KiB) apart: same bank without rotation,
    four different banks with it; a sequential stream still never uses one bank for two
    segments in a row; both maps are bijections."""
    plain, hashed = AddressMap(ORG, bank_rotate=False), AddressMap(ORG)
    span = ORG.banks_per_group * 64 * 1024
    addrs = [5 * 64 + k * span for k in range(4)]
    assert len({plain.decode(a).bank for a in addrs}) == 1
    assert len({hashed.decode(a).bank for a in addrs}) == 4
    segments = [hashed.decode(k * 64 * 1024).bank for k in range(64)]
    assert all(a != b for a, b in zip(segments, segments[1:])), segments
    rng = random.Random(9)
    for _ in range(2000):
        a = rng.randrange(ORG.capacity_bytes)
        for m in (plain, hashed):
            assert m.encode(m.decode(a)) == a
    with pytest.raises(ValueError, match="bank_rotate"):
        AddressMap(ORG, bank_rotate=1)
