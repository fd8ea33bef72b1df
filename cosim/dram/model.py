"""Simulation-only model of the DRAM behind one NDP-DIMM's buffer chip.

Three parts, used by cocotb benches and by the fast harness:

* ``SparseStore``: the DIMM's bytes (32 GiB by default), stored as pages
  allocated on first write; untouched memory reads as zeros and costs nothing.
* ``TimingChecker``: replays the DDR4 command stream a controller issues
  (ACT, RD, WR, PRE, PREA, REF) and raises ``TimingViolation`` on the first
  command that breaks a timing or protocol rule. A rejected command changes no
  state, so a test can go on after catching the exception.
* ``DramModel``: both of the above plus the address map, for benches: commands
  with data, and ``load``/``dump`` that bypass timing for test set-up.

Clocks. Every cycle here is a DRAM clock cycle (nCK, ``timing.tCK_ns`` =
0.625 ns, 1.6 GHz for DDR4-3200). The NDP core runs at 1 GHz; converting its
cycles is the caller's business (1 NDP cycle = 1.6 nCK by default).

Organisation. Each rank has its own x64 data bus and its own command/address
bus to the buffer chip (that is what lets the buffer stream all 4 ranks in
parallel), so ranks share no constraint: nothing below relates two ranks.

Constraints (c = cycle of the new command, all rules are ">=": c must be at
least the bound; "same bank" means same rank, bank group and bank)

========== ====================================================================
name       rule
========== ====================================================================
tRCD       RD/WR  >= ACT(same bank) + tRCD
tRP        ACT    >= PRE/PREA(same bank, closing an open row) + tRP;
           REF    >= every bank's last PRE/PREA + tRP
tRAS       PRE/PREA >= ACT(same bank) + tRAS          (PREA: every open bank)
tRC        ACT    >= ACT(same bank) + tRC
tRRD_S     ACT    >= ACT(same rank, other bank group) + tRRD_S
tRRD_L     ACT    >= ACT(same rank, same bank group) + tRRD_L
tFAW       ACT    >= 4th-previous ACT(same rank) + tFAW  (<= 4 ACTs per window)
tCCD_S     RD/WR  >= RD/WR(same rank, other bank group) + tCCD_S
tCCD_L     RD/WR  >= RD/WR(same rank, same bank group) + tCCD_L
tWR        PRE/PREA >= WR(same bank) + CWL + tBL + tWR
tWTR_S     RD     >= WR(same rank, other bank group) + CWL + tBL + tWTR_S
tWTR_L     RD     >= WR(same rank, same bank group) + CWL + tBL + tWTR_L
tRTP       PRE/PREA >= RD(same bank) + tRTP
tRTW       WR     >= RD(same rank) + tCL + tBL + 2 - CWL     (bus turnaround)
CL / CWL   data of a RD occupies the rank's data bus for [c + tCL, c + tCL + tBL),
           of a WR for [c + CWL, c + CWL + tBL); a burst overlapping another on
           the same rank's bus is a violation, named after the new command's
           latency (CL for RD, CWL for WR)
tRFC       any command to a rank >= REF(same rank) + tRFC
CMD-bus    at most one command per rank per cycle (1N command timing)
REF-open-bank  REF needs every bank of the rank precharged
tREFI      refresh deadline, checked at every command to a rank and by
           ``check_refresh``: with n = REFs credited to the rank so far and p =
           ``max_postponed_refs`` (8), a violation when
           c > last REF (or cycle 0) + (p + 1) * tREFI   (gap between REFs), or
           c > (n + p + 1) * tREFI                        (more than p REFs owed:
           the k-th REF is due at k * tREFI and may be postponed p times).
           REFs issued more than p intervals ahead earn no extra credit.
protocol   ACT to an open bank, RD/WR to a closed bank or to another row than
           the open one, ACT without a row, rank/bank group/bank/row/column
           index out of range
========== ====================================================================

A PRE to a bank that is already closed is legal and a no-op (JESD79-4 treats it
as NOP): it starts no tRP. Cycles must not decrease from one command to the
next (any rank); going back in time is a ``ValueError``, as is an unknown
command name.

When a command breaks several rules, the exception names the *binding* one,
i.e. the rule that needs the latest cycle, ties broken in the order tRFC,
CMD-bus, tRC, tRP, tRAS, tRCD, tRRD_S, tRRD_L, tFAW, tCCD_S, tCCD_L, tWTR_S,
tWTR_L, tRTW, tWR, tRTP, CL, CWL (so with the default timing, where tRC =
tRAS + tRP, an early ACT after a PRE at tRAS reports tRC). Protocol,
REF-open-bank and tREFI errors are reported before any of these. The message
lists the other broken rules too.

Counters (``stats()``): commands per type, row hits (RD/WR to a row already
accessed since its ACT) and row misses (the first RD/WR after an ACT), REFs.

Not modelled: per-bank refresh and fine-granularity refresh modes, refresh
pull-in beyond the credit rule above, self-refresh, power-down (tCKE, tXP),
ODT, ZQ calibration, mode-register commands, additive latency, CRC/DBI/CA
parity, read/write preamble options, 2N command timing, DLL, temperature
dependent tREFI, and the data bus delay between DRAM and buffer chip. Data is
not corrupted by missed refreshes: a deadline miss is reported instead.
"""

import collections

from ndpdimm.hw.memory.address_map import AddressMap, DramCoord
from ndpdimm.hw.memory.dram import DramOrganization, DramTiming

__all__ = ["COMMANDS", "SparseStore", "TimingViolation", "TimingChecker", "DramModel",
           "check_org_timing", "check_store_args", "byte_view", "is_int"]

COMMANDS = ("ACT", "RD", "WR", "PRE", "PREA", "REF")

#: Tie-break order between violated timing rules (lower index wins).
_ORDER = ("tRFC", "CMD-bus", "tRC", "tRP", "tRAS", "tRCD", "tRRD_S", "tRRD_L", "tFAW",
          "tCCD_S", "tCCD_L", "tWTR_S", "tWTR_L", "tRTW", "tWR", "tRTP", "CL", "CWL")
_RANK_OF = {name: i for i, name in enumerate(_ORDER)}

#: "Never happened" timestamp: far enough back that NEVER + any timing is < 0.
_NEVER = -(1 << 60)


def is_int(value) -> bool:
    """An ``int`` that is not a ``bool`` (the arguments' type check, shared with ``native``)."""
    return isinstance(value, int) and not isinstance(value, bool)


def byte_view(data) -> memoryview:
    """``data`` as a flat byte view; ``ValueError`` unless it is a contiguous bytes-like object."""
    try:
        return memoryview(data).cast("B")
    except TypeError:
        raise ValueError(f"data must be a C-contiguous bytes-like object, "
                         f"got {type(data).__name__}") from None


def check_store_args(capacity_bytes, page_bytes):
    """``ValueError`` unless the capacity is a positive int and the page a power of two."""
    if not is_int(capacity_bytes) or capacity_bytes <= 0:
        raise ValueError(f"capacity_bytes must be a positive int, got {capacity_bytes!r}")
    if not is_int(page_bytes) or page_bytes <= 0 or page_bytes & (page_bytes - 1):
        raise ValueError(f"page_bytes must be a positive power of two, got {page_bytes!r}")


class SparseStore:
    """Byte store of ``capacity_bytes`` that allocates ``page_bytes`` pages on first write."""

    def __init__(self, capacity_bytes: int, page_bytes: int = 4096):
        check_store_args(capacity_bytes, page_bytes)
        self.capacity_bytes = capacity_bytes
        self.page_bytes = page_bytes
        self._shift = page_bytes.bit_length() - 1
        self._pages = {}

    def _check_range(self, addr, n):
        if not is_int(addr) or not is_int(n):
            raise ValueError(f"address and length must be ints, got {addr!r}, {n!r}")
        if n < 0:
            raise ValueError(f"length must be >= 0, got {n}")
        if addr < 0 or addr + n > self.capacity_bytes:
            raise ValueError(f"range [{addr:#x}, {addr + n:#x}) is outside the store "
                             f"(0..{self.capacity_bytes:#x})")

    def _chunks(self, addr: int, n: int):
        """Split ``[addr, addr+n)`` at page boundaries: yields (page, offset in page, pos, length)."""
        pos = 0
        while pos < n:
            a = addr + pos
            page, off = a >> self._shift, a & (self.page_bytes - 1)
            chunk = min(n - pos, self.page_bytes - off)
            yield page, off, pos, chunk
            pos += chunk

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes from ``addr``; untouched bytes are zero (nothing is allocated)."""
        self._check_range(addr, n)
        out = bytearray(n)
        for page, off, pos, chunk in self._chunks(addr, n):
            data = self._pages.get(page)
            if data is not None:
                out[pos:pos + chunk] = data[off:off + chunk]
        return bytes(out)

    def write(self, addr: int, data) -> None:
        """Write a bytes-like object at ``addr``; the whole range is checked before any byte is written."""
        view = byte_view(data)
        n = len(view)
        self._check_range(addr, n)
        for page, off, pos, chunk in self._chunks(addr, n):
            buf = self._pages.get(page)
            if buf is None:
                buf = self._pages[page] = bytearray(self.page_bytes)
            buf[off:off + chunk] = view[pos:pos + chunk]

    @property
    def touched_bytes(self) -> int:
        """Bytes allocated so far (whole pages)."""
        return len(self._pages) * self.page_bytes


class TimingViolation(AssertionError):
    """A DRAM command broke a timing or protocol rule.

    ``command``, ``cycle``, ``constraint`` (e.g. ``"tRCD"``), ``rank``,
    ``bank_group``, ``bank``; ``earliest`` is the earliest cycle at which the
    same command would have met every timing rule, given the commands before it
    (``None`` for protocol, REF-open-bank and refresh-deadline errors, where
    waiting alone does not help); ``others`` lists further rules the command
    broke as ``(constraint, earliest cycle for that rule)``.
    """

    def __init__(self, command, cycle, constraint, rank=None, bank_group=None, bank=None,
                 earliest=None, detail="", others=()):
        self.command, self.cycle, self.constraint = command, cycle, constraint
        self.rank, self.bank_group, self.bank = rank, bank_group, bank
        self.earliest, self.detail, self.others = earliest, detail, tuple(others)
        where = f"rank {rank}"
        if bank_group is not None:
            where += f" bank group {bank_group}"
        if bank is not None:
            where += f" bank {bank}"
        msg = f"{command} at cycle {cycle} violates {constraint} on {where}"
        if earliest is not None:
            msg += f": earliest legal cycle is {earliest}"
        else:
            msg += ": waiting alone does not make it legal"
        if detail:
            msg += f" ({detail})"
        if self.others:
            msg += "; also violates " + ", ".join(f"{c} (earliest {e})" for c, e in self.others)
        super().__init__(msg)


class _Bank:
    __slots__ = ("open_row", "act", "pre", "last_rd", "last_wr", "accessed")

    def __init__(self):
        self.open_row = None
        self.act = _NEVER          # last ACT
        self.pre = _NEVER          # last PRE/PREA that closed a row
        self.last_rd = _NEVER      # last RD since the ACT
        self.last_wr = _NEVER      # last WR since the ACT
        self.accessed = False      # a RD/WR hit the open row since its ACT


class _Rank:
    __slots__ = ("banks", "acts", "last_act_bg", "last_col_bg", "last_wr_bg", "last_rd",
                 "bursts", "ref", "ref_base", "ref_count", "last_cmd", "open_banks")

    def __init__(self, n_groups, n_banks):
        self.banks = [[_Bank() for _ in range(n_banks)] for _ in range(n_groups)]
        self.acts = collections.deque(maxlen=4)     # last 4 ACT cycles (tFAW)
        self.last_act_bg = [_NEVER] * n_groups
        self.last_col_bg = [_NEVER] * n_groups
        self.last_wr_bg = [_NEVER] * n_groups
        self.last_rd = _NEVER
        self.bursts = collections.deque()           # (start, end) on the data bus, by start
        self.ref = _NEVER                           # last REF (tRFC)
        self.ref_base = 0                           # last REF or cycle 0 (deadline gap)
        self.ref_count = 0                          # REFs credited (deadline debt)
        self.last_cmd = _NEVER
        self.open_banks = 0


def check_org_timing(org, timing):
    """``(org, timing)`` if they are a ``DramOrganization`` and a ``DramTiming``, else ``ValueError``."""
    if not isinstance(org, DramOrganization):
        raise ValueError(f"org must be a DramOrganization, got {org!r}")
    if not isinstance(timing, DramTiming):
        raise ValueError(f"timing must be a DramTiming, got {timing!r}")
    return org, timing


class TimingChecker:
    """Checks a DDR4 command stream against every rule in the module docstring."""

    def __init__(self, org: DramOrganization, timing: DramTiming):
        self.org, self.timing = check_org_timing(org, timing)
        self._ranks = [_Rank(org.bank_groups, org.banks_per_group) for _ in range(org.ranks)]
        self._now = 0
        self._counts = dict.fromkeys(COMMANDS, 0)
        self._row_hits = 0
        self._row_misses = 0

    # ---- helpers -----------------------------------------------------------------------
    def read_data_cycle(self, cmd_cycle: int) -> int:
        """First cycle of a RD's data on the rank's bus."""
        return cmd_cycle + self.timing.tCL

    def write_data_cycle(self, cmd_cycle: int) -> int:
        """First cycle of a WR's data on the rank's bus."""
        return cmd_cycle + self.timing.CWL

    def open_row(self, rank: int, bank_group: int, bank: int):
        """Open row of a bank, or ``None``."""
        return self._ranks[rank].banks[bank_group][bank].open_row

    @property
    def cycle(self) -> int:
        """Cycle of the last command (or check)."""
        return self._now

    def stats(self) -> dict:
        """Counters: ``commands`` per type, ``row_hits``, ``row_misses``, ``refreshes``."""
        return {"commands": dict(self._counts), "row_hits": self._row_hits,
                "row_misses": self._row_misses, "refreshes": self._counts["REF"]}

    # ---- rule evaluation ---------------------------------------------------------------
    def _protocol(self, cycle, command, rank, bank_group, bank, row, column):
        """Raise for protocol errors; return the rank state (and bank state or None)."""
        org = self.org

        def bad(detail):
            return TimingViolation(command, cycle, "protocol", rank, bank_group, bank, None, detail)

        if not is_int(rank) or not 0 <= rank < org.ranks:
            raise bad(f"rank {rank!r} is outside 0..{org.ranks - 1}")
        r = self._ranks[rank]
        if command in ("PREA", "REF"):
            return r, None
        if not is_int(bank_group) or not 0 <= bank_group < org.bank_groups:
            raise bad(f"bank group {bank_group!r} is outside 0..{org.bank_groups - 1}")
        if not is_int(bank) or not 0 <= bank < org.banks_per_group:
            raise bad(f"bank {bank!r} is outside 0..{org.banks_per_group - 1}")
        if row is not None and (not is_int(row) or not 0 <= row < org.rows_per_bank):
            raise bad(f"row {row!r} is outside 0..{org.rows_per_bank - 1}")
        if column is not None and (not is_int(column) or not 0 <= column < org.bursts_per_row):
            raise bad(f"column {column!r} is outside 0..{org.bursts_per_row - 1}")
        b = r.banks[bank_group][bank]
        if command == "ACT":
            if row is None:
                raise bad("ACT needs a row")
            if b.open_row is not None:
                raise bad(f"bank already has row {b.open_row} open")
        elif command in ("RD", "WR"):
            if b.open_row is None:
                raise bad("bank is closed")
            if row is not None and row != b.open_row:
                raise bad(f"row {row} is not the open row {b.open_row}")
        return r, b

    def _bounds(self, command, r, bank_group, b):
        """``[(constraint, earliest cycle)]`` of every lower-bound rule for this command."""
        t = self.timing
        out = [("tRFC", r.ref + t.tRFC), ("CMD-bus", r.last_cmd + 1)]
        if command == "ACT":
            out += [("tRC", b.act + t.tRC), ("tRP", b.pre + t.tRP),
                    ("tRRD_L", r.last_act_bg[bank_group] + t.tRRD_L)]
            others = [c for g, c in enumerate(r.last_act_bg) if g != bank_group]
            if others:
                out.append(("tRRD_S", max(others) + t.tRRD_S))
            if len(r.acts) == 4:
                out.append(("tFAW", r.acts[0] + t.tFAW))
        elif command in ("RD", "WR"):
            out += [("tRCD", b.act + t.tRCD), ("tCCD_L", r.last_col_bg[bank_group] + t.tCCD_L)]
            others = [c for g, c in enumerate(r.last_col_bg) if g != bank_group]
            if others:
                out.append(("tCCD_S", max(others) + t.tCCD_S))
            if command == "RD":
                out.append(("tWTR_L", r.last_wr_bg[bank_group] + t.write_to_read(True)))
                others = [c for g, c in enumerate(r.last_wr_bg) if g != bank_group]
                if others:
                    out.append(("tWTR_S", max(others) + t.write_to_read(False)))
            else:
                out.append(("tRTW", r.last_rd + t.read_to_write))
        elif command in ("PRE", "PREA"):
            banks = [b] if command == "PRE" else [x for grp in r.banks for x in grp]
            for x in banks:
                if x.open_row is not None:
                    out += [("tRAS", x.act + t.tRAS), ("tRTP", x.last_rd + t.tRTP),
                            ("tWR", x.last_wr + t.write_to_precharge)]
        elif command == "REF":
            out.append(("tRP", max(x.pre for grp in r.banks for x in grp) + t.tRP))
        return out

    def _bus_earliest(self, command, r, cycle):
        """Earliest cycle >= ``cycle`` whose data burst fits the rank's bus."""
        lat = self.timing.tCL if command == "RD" else self.timing.CWL
        bl = self.timing.tBL
        c = cycle
        moved = True
        while moved:
            moved = False
            for s, e in r.bursts:
                if s < c + lat + bl and c + lat < e:
                    c = e - lat
                    moved = True
        return c

    def _deadline(self, r) -> int:
        t = self.timing
        return min(r.ref_base + t.refresh_deadline,
                   (r.ref_count + t.max_postponed_refs + 1) * t.tREFI)

    def _check_deadline(self, command, rank, r, cycle, bank_group=None, bank=None):
        deadline = self._deadline(r)
        if cycle > deadline:
            t = self.timing
            raise TimingViolation(
                command, cycle, "tREFI", rank, bank_group, bank, None,
                f"refresh deadline was cycle {deadline}: {r.ref_count} REFs credited, last REF "
                f"or start at cycle {r.ref_base}, at most {t.max_postponed_refs} postponed "
                f"(tREFI {t.tREFI})")

    # ---- public API --------------------------------------------------------------------
    def earliest_cycle(self, command, rank, bank_group=None, bank=None, row=None, column=None) -> int:
        """Earliest cycle >= the current one at which ``command`` meets every lower-bound rule.

        Raises ``TimingViolation`` (protocol) if no cycle would make it legal; the
        refresh deadline is not considered (it is an upper bound).
        """
        if command not in COMMANDS:
            raise ValueError(f"unknown DRAM command {command!r}: expected one of {', '.join(COMMANDS)}")
        r, b = self._protocol(self._now, command, rank, bank_group, bank, row, column)
        c = max([self._now] + [e for _, e in self._bounds(command, r, bank_group, b)])
        if command in ("RD", "WR"):
            c = self._bus_earliest(command, r, c)
        return c

    def check_refresh(self, cycle: int, rank=None) -> None:
        """Raise ``TimingViolation("tREFI")`` if a rank (or ``rank``) has missed its refresh deadline at ``cycle``."""
        self._advance(cycle)
        if rank is not None and (not is_int(rank) or not 0 <= rank < self.org.ranks):
            raise ValueError(f"rank {rank!r} is outside 0..{self.org.ranks - 1}")
        ranks = range(self.org.ranks) if rank is None else [rank]
        for i in ranks:
            self._check_deadline("check_refresh", i, self._ranks[i], cycle)

    def _advance(self, cycle):
        if not is_int(cycle) or cycle < 0:
            raise ValueError(f"cycle must be a non-negative int, got {cycle!r}")
        if cycle < self._now:
            raise ValueError(f"cycle {cycle} goes back in time (last command at cycle {self._now})")
        self._now = cycle

    def issue(self, cycle, command, rank, bank_group=None, bank=None, row=None, column=None) -> None:
        """Check one command and, if legal, apply it; raise ``TimingViolation`` otherwise."""
        if command not in COMMANDS:
            raise ValueError(f"unknown DRAM command {command!r}: expected one of {', '.join(COMMANDS)}")
        if not is_int(cycle) or cycle < 0:
            raise ValueError(f"cycle must be a non-negative int, got {cycle!r}")
        if cycle < self._now:
            raise ValueError(f"cycle {cycle} goes back in time (last command at cycle {self._now})")
        r, b = self._protocol(cycle, command, rank, bank_group, bank, row, column)
        if command == "REF" and r.open_banks:
            open_list = [(g, i) for g, grp in enumerate(r.banks) for i, x in enumerate(grp)
                         if x.open_row is not None]
            raise TimingViolation(command, cycle, "REF-open-bank", rank, None, None, None,
                                  f"open (bank group, bank): {open_list}")
        self._check_deadline(command, rank, r, cycle, bank_group, bank)
        violated = [(name, e) for name, e in self._bounds(command, r, bank_group, b) if cycle < e]
        if command in ("RD", "WR"):
            e = self._bus_earliest(command, r, cycle)
            if e != cycle:
                violated.append(("CL" if command == "RD" else "CWL", e))
        if violated:
            violated.sort(key=lambda v: (-v[1], _RANK_OF[v[0]]))
            name, earliest = violated[0]
            # The true earliest legal cycle satisfies all of them at once.
            earliest = self._joint_earliest(command, r, bank_group, b, cycle)
            raise TimingViolation(command, cycle, name, rank, bank_group, bank, earliest,
                                  others=violated[1:])
        self._now = cycle
        self._apply(cycle, command, r, bank_group, b, row)

    def _joint_earliest(self, command, r, bank_group, b, cycle):
        c = max([cycle] + [e for _, e in self._bounds(command, r, bank_group, b)])
        if command in ("RD", "WR"):
            c = self._bus_earliest(command, r, c)
        return c

    def _apply(self, cycle, command, r, bank_group, b, row):
        t = self.timing
        self._counts[command] += 1
        r.last_cmd = cycle
        if command == "ACT":
            b.open_row, b.act = row, cycle
            b.last_rd = b.last_wr = _NEVER
            b.accessed = False
            r.acts.append(cycle)
            r.last_act_bg[bank_group] = cycle
            r.open_banks += 1
        elif command in ("RD", "WR"):
            if b.accessed:
                self._row_hits += 1
            else:
                self._row_misses += 1
                b.accessed = True
            r.last_col_bg[bank_group] = cycle
            if command == "RD":
                b.last_rd = r.last_rd = cycle
                start = cycle + t.tCL
            else:
                b.last_wr = r.last_wr_bg[bank_group] = cycle
                start = cycle + t.CWL
            # Drop bursts no new command can reach (new data starts >= cycle + min latency).
            horizon = cycle + min(t.tCL, t.CWL)
            while r.bursts and r.bursts[0][1] <= horizon:
                r.bursts.popleft()
            r.bursts.append((start, start + t.tBL))
            if len(r.bursts) > 1 and r.bursts[-2][0] > start:     # WR data before an earlier RD's
                r.bursts = collections.deque(sorted(r.bursts))
        elif command in ("PRE", "PREA"):
            banks = [b] if command == "PRE" else [x for grp in r.banks for x in grp]
            for x in banks:
                if x.open_row is not None:
                    x.open_row = None
                    x.pre = cycle
                    r.open_banks -= 1
        elif command == "REF":
            r.ref = r.ref_base = cycle
            # A REF more than max_postponed_refs intervals ahead of its due time earns no credit.
            r.ref_count = min(r.ref_count + 1, cycle // t.tREFI + t.max_postponed_refs)


class DramModel:
    """Sparse store + timing checker + address map: the DRAM a bench connects a controller to.

    The store is indexed by DIMM-local byte address; a burst coordinate is
    translated with ``address_map``, so a controller that maps addresses
    differently from the model reads other data than ``load`` put there and the
    bench's data check fails.

    ``command`` checks timing and also every rank's refresh deadline (a rank
    nobody refreshes fails the run even if it gets no commands).
    """

    def __init__(self, org: DramOrganization, timing: DramTiming, address_map: AddressMap = None,
                 page_bytes: int = 4096):
        self.org, self.timing = org, timing
        self.address_map = AddressMap(org) if address_map is None else address_map
        if self.address_map.org != org:
            raise ValueError(f"address map is for {self.address_map.org}, model is {org}")
        self.store = SparseStore(org.capacity_bytes, page_bytes)
        self.checker = TimingChecker(org, timing)

    def command(self, cycle, cmd, rank, bank_group=None, bank=None, row=None, column=None) -> None:
        """Check and apply one DRAM command (see ``TimingChecker.issue``)."""
        self.checker.check_refresh(cycle)           # first, so a rejected command changes nothing
        self.checker.issue(cycle, cmd, rank, bank_group, bank, row, column)

    def _burst_addr(self, coord) -> int:
        coord = DramCoord(*coord)
        if coord.offset:
            raise ValueError(f"burst coordinate must have offset 0, got {coord}")
        return self.address_map.encode(coord)

    def write_burst(self, coord, data) -> None:
        """Store one burst (``burst_bytes``) of write data at ``coord`` (no timing check)."""
        data = bytes(data)
        if len(data) != self.org.burst_bytes:
            raise ValueError(f"a burst is {self.org.burst_bytes} bytes, got {len(data)}")
        self.store.write(self._burst_addr(coord), data)

    def read_burst(self, coord) -> bytes:
        """The burst (``burst_bytes``) at ``coord`` (no timing check)."""
        return self.store.read(self._burst_addr(coord), self.org.burst_bytes)

    def rd(self, cycle, coord) -> bytes:
        """RD command at ``cycle`` to ``coord`` (row must be open), returning its data."""
        coord = DramCoord(*coord)
        self.command(cycle, "RD", coord.rank, coord.bank_group, coord.bank, coord.row, coord.column)
        return self.read_burst(coord)

    def wr(self, cycle, coord, data) -> None:
        """WR command at ``cycle`` to ``coord`` (row must be open) with its data."""
        coord = DramCoord(*coord)
        if len(bytes(data)) != self.org.burst_bytes:
            raise ValueError(f"a burst is {self.org.burst_bytes} bytes, got {len(bytes(data))}")
        self.command(cycle, "WR", coord.rank, coord.bank_group, coord.bank, coord.row, coord.column)
        self.write_burst(coord, data)

    def load(self, addr: int, data) -> None:
        """Test set-up: write bytes at a DIMM-local address, bypassing timing."""
        self.store.write(addr, data)

    def dump(self, addr: int, n: int) -> bytes:
        """Read ``n`` bytes at a DIMM-local address, bypassing timing."""
        return self.store.read(addr, n)

    def check_refresh(self, cycle: int) -> None:
        self.checker.check_refresh(cycle)

    def stats(self) -> dict:
        s = self.checker.stats()
        s["touched_bytes"] = self.store.touched_bytes
        return s
