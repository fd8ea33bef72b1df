"""Mapping between a DIMM-local byte address and a DRAM coordinate.

A coordinate is ``(rank, bank_group, bank, row, column, offset)``: ``column`` is
the burst index inside the row (one RD/WR command moves one 64 B burst) and
``offset`` the byte inside that burst. The address is the concatenation of these
fields; a *scheme* names their order from the least significant to the most
significant bits, e.g. the default::

    offset:bank_group:rank:column:bank:row

Each field is ``log2`` of its count wide (``DramOrganization``). With the SPEC
organisation (32 GiB, 35 address bits) the default scheme is::

    bits  0..5   offset      byte inside a 64 B burst (BL8 x 8 B)
    bit   6      bank_group  consecutive bursts alternate the 2 bank groups
    bits  7..8   rank        every 128 B moves to the next of the 4 ranks
    bits  9..15  column      128 bursts of the 8 KiB row
    bits 16..17  bank        bank inside the bank group
    bits 18..34  row         131072 rows

Why this order:

* ``bank_group`` right above the burst: tCCD_L = 8 but tCCD_S = 4, so a stream
  whose consecutive column commands stay in one bank group reaches only 50 % of
  a rank's bus; alternating groups lets a rank issue a RD every tBL = 4 cycles.
* ``rank`` next: each rank has its own x64 bus to the buffer chip, so a
  sequential stream must touch all 4 ranks in every 512 B to use all of them
  in parallel (4 x 25.6 GB/s).
* ``column`` below ``bank``/``row``: a sequential stream of 64 KiB keeps one
  row open in each of the 2 x 4 (group, rank) pairs and reads all 128 of its
  bursts (row hits) before it needs a new row; the next 64 KiB go to the next
  bank, whose ACT can be issued while the current one is still streaming.

Bank rotation (``bank_rotate``, on by default): the bank a coordinate names
is the address's bank field plus its row field, modulo the banks per group
(a permutation for every row, so the map stays a bijection). Two addresses whose distance is a multiple of
the 4-bank span (256 KiB by default) - e.g. consecutive 64 B chunks of the
streamer's layout for a 4096-row matrix - would otherwise hit the same bank
in different rows and pay a precharge + activate (tRP + tRCD) at every switch
that no other bank can hide; rotated, they land in different banks and the
next row opens while the current one streams. A sequential stream still
changes bank at every segment, also where the bank field wraps into the next
row (bank 3 + r -> bank 0 + r + 1 differ by 2). An XOR of bank and row bits
would not have that property (it maps some row wraps onto the same bank).

Addresses and coordinates are plain ints; ``field_slices()`` gives ``(lsb,
width)`` of every field for the RTL to slice an address with (the RTL applies
the same rotation when ``bank_rotate`` is set).
"""

from typing import NamedTuple

from ndpdimm.hw.memory.dram import DramOrganization

__all__ = ["FIELDS", "DEFAULT_SCHEME", "DramCoord", "AddressMap"]

#: Field names a scheme must contain, each exactly once.
FIELDS = ("offset", "column", "bank_group", "bank", "rank", "row")

DEFAULT_SCHEME = "offset:bank_group:rank:column:bank:row"


class DramCoord(NamedTuple):
    """Where a byte lives: rank, bank group, bank, row, column (burst) and byte offset."""
    rank: int
    bank_group: int
    bank: int
    row: int
    column: int
    offset: int = 0


class AddressMap:
    """Bijective DIMM-local address <-> ``DramCoord`` mapping for one organisation.

    ``scheme`` lists the fields least significant first, separated by ``:``;
    ``offset`` must come first so that a burst is 64 contiguous bytes.
    """

    def __init__(self, org: DramOrganization, scheme: str = DEFAULT_SCHEME, bank_rotate: bool = True):
        if not isinstance(org, DramOrganization):
            raise ValueError(f"org must be a DramOrganization, got {org!r}")
        if not isinstance(scheme, str):
            raise ValueError(f"address map scheme must be a string, got {scheme!r}")
        names = [n.strip() for n in scheme.split(":")]
        for n in names:
            if n not in FIELDS:
                raise ValueError(f"address map scheme {scheme!r}: unknown field {n!r}; "
                                 f"fields are {', '.join(FIELDS)}")
        for n in FIELDS:
            count = names.count(n)
            if count == 0:
                raise ValueError(f"address map scheme {scheme!r}: field {n!r} is missing")
            if count > 1:
                raise ValueError(f"address map scheme {scheme!r}: field {n!r} appears {count} times")
        if names[0] != "offset":
            raise ValueError(f"address map scheme {scheme!r}: 'offset' must be the least "
                             f"significant field (a burst is {org.burst_bytes} contiguous bytes)")
        if not isinstance(bank_rotate, bool):
            raise ValueError(f"bank_rotate must be True or False, got {bank_rotate!r}")
        self.org = org
        self.bank_rotate = bank_rotate
        self._bank_mask = org.banks_per_group - 1 if bank_rotate else 0
        self.scheme = ":".join(names)
        counts = {
            "offset": org.burst_bytes, "column": org.bursts_per_row,
            "bank_group": org.bank_groups, "bank": org.banks_per_group,
            "rank": org.ranks, "row": org.rows_per_bank,
        }
        self._counts = counts
        self._slices = {}
        lsb = 0
        for n in names:
            width = counts[n].bit_length() - 1      # counts are powers of two
            self._slices[n] = (lsb, width)
            lsb += width
        assert 1 << lsb == org.capacity_bytes
        # (name, lsb, mask) in DramCoord field order, for decode/encode.
        self._order = [(n, self._slices[n][0], (1 << self._slices[n][1]) - 1)
                       for n in DramCoord._fields]

    def __repr__(self):
        return f"AddressMap({self.scheme!r}, bank_rotate={self.bank_rotate})"

    def field_slices(self) -> dict:
        """``{field: (lsb, width)}`` of every field in a DIMM-local address."""
        return dict(self._slices)

    def field(self, name: str, addr):
        """Field ``name`` of the byte address(es) ``addr``: an int, or an integer array (numpy)
        for many addresses at once, unchecked (the bank field with its row rotation)."""
        if name not in self._slices:
            raise ValueError(f"unknown address field {name!r}; fields are {', '.join(FIELDS)}")
        lsb, width = self._slices[name]
        value = (addr >> lsb) & ((1 << width) - 1)
        if name == "bank" and self._bank_mask:
            return (value + self.field("row", addr)) & self._bank_mask
        return value

    def _check_addr(self, addr) -> int:
        if not isinstance(addr, int) or isinstance(addr, bool):
            raise ValueError(f"DRAM address must be an int, got {addr!r}")
        if not 0 <= addr < self.org.capacity_bytes:
            raise ValueError(f"DRAM address {addr:#x} is outside the DIMM "
                             f"(0..{self.org.capacity_bytes - 1:#x})")
        return addr

    def decode(self, addr: int) -> DramCoord:
        """Byte address -> coordinate (any alignment)."""
        self._check_addr(addr)
        c = DramCoord(*((addr >> lsb) & mask for _, lsb, mask in self._order))
        return c._replace(bank=(c.bank + c.row) & self._bank_mask) if self._bank_mask else c

    def decode_burst(self, addr: int) -> DramCoord:
        """Burst-aligned address -> coordinate (``offset`` 0); misaligned raises ``ValueError``."""
        self._check_addr(addr)
        if addr % self.org.burst_bytes:
            raise ValueError(f"DRAM address {addr:#x} is not aligned to a "
                             f"{self.org.burst_bytes} B burst")
        return self.decode(addr)

    def encode(self, coord) -> int:
        """Coordinate (a ``DramCoord`` or a tuple in its field order) -> byte address."""
        coord = DramCoord(*coord)
        for (name, lsb, mask), value in zip(self._order, coord):
            if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= mask:
                raise ValueError(f"DRAM coordinate field {name}={value!r} is outside "
                                 f"0..{mask} ({coord})")
        if self._bank_mask:
            coord = coord._replace(bank=(coord.bank - coord.row) & self._bank_mask)
        addr = 0
        for (name, lsb, mask), value in zip(self._order, coord):
            addr |= value << lsb
        return addr

    def burst_coords(self, addr: int, nbytes: int):
        """Coordinates of the bursts covering ``[addr, addr + nbytes)``, in address order."""
        if not isinstance(nbytes, int) or nbytes < 0:
            raise ValueError(f"nbytes must be a non-negative int, got {nbytes!r}")
        if nbytes == 0:
            return []
        self._check_addr(addr)
        self._check_addr(addr + nbytes - 1)
        b = self.org.burst_bytes
        return [self.decode(a) for a in range(addr - addr % b, addr + nbytes, b)]
