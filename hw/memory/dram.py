"""Organisation and timing of the DRAM behind one NDP-DIMM's buffer chip.

Two frozen dataclasses hold the numbers, ``load_dram_config()`` reads them from
a TOML file (default ``hw/configs/ddr4-3200.toml``) through the project's configuration loader
(``hw/config_file.py``: every number written ``{ value = ..., source = "..." }``). The RTL bank scheduler, the DRAM model (``ndpdimm.cosim.dram.model``)
and the performance model are all parameterised from the same objects, so a
timing value is written exactly once.

All timing values are in DRAM clock cycles (nCK, ``tCK_ns`` each: 0.625 ns,
1.6 GHz for DDR4-3200); the NDP core runs on its own 1 GHz clock.

This module uses only the standard library (it sits in ``hw/`` because the RTL
reads it, and ``hw/`` may import nothing but Amaranth and its own modules).
"""

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from ndpdimm.hw import config_file
from ndpdimm.hw.formats import NDP_CLOCK_HZ

__all__ = [
    "DEFAULT_CONFIG_PATH", "DramOrganization", "DramTiming",
    "load_dram_config", "peak_bandwidth_bytes_per_s", "DIMM_DRAM_BYTES_PER_CYCLE",
]

#: The DDR4-3200 configuration from SPEC.md section 1 (packaged with ``ndpdimm.hw``).
DEFAULT_CONFIG_PATH = config_file.package_folder("ndpdimm.hw", "configs") / "ddr4-3200.toml"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_positive_int(key: str, value, power_of_two: bool = False):
    if not _is_int(value) or value <= 0:
        raise ValueError(f"{key} must be a positive integer, got {value!r}")
    if power_of_two and value & (value - 1):
        raise ValueError(f"{key} must be a power of two, got {value!r}")


@dataclass(frozen=True)
class DramOrganization:
    """Geometry of one DIMM: ranks x bank groups x banks x rows x row bytes.

    A *column* here is one burst (``burst_bytes``, BL8 on the x64 bus), the unit
    of a RD/WR command, so ``bursts_per_row`` columns make one row.
    """
    ranks: int
    bank_groups: int
    banks_per_group: int
    row_bytes: int
    burst_bytes: int
    rows_per_bank: int

    def __post_init__(self):
        for f in dataclasses.fields(self):
            _check_positive_int(f.name, getattr(self, f.name), power_of_two=True)
        if self.burst_bytes > self.row_bytes:
            raise ValueError(f"burst_bytes ({self.burst_bytes}) must not exceed "
                             f"row_bytes ({self.row_bytes})")

    @property
    def banks_per_rank(self) -> int:
        return self.bank_groups * self.banks_per_group

    @property
    def bursts_per_row(self) -> int:
        """Column addresses (bursts) per row."""
        return self.row_bytes // self.burst_bytes

    @property
    def rank_bytes(self) -> int:
        return self.banks_per_rank * self.rows_per_bank * self.row_bytes

    @property
    def capacity_bytes(self) -> int:
        """Bytes of one DIMM."""
        return self.ranks * self.rank_bytes

    @property
    def address_bits(self) -> int:
        """Width of a DIMM-local byte address."""
        return self.capacity_bytes.bit_length() - 1


@dataclass(frozen=True)
class DramTiming:
    """DDR4 timing parameters in DRAM clock cycles (except ``tCK_ns``).

    Derived spacings used by the checker and the scheduler are properties, so
    their formulas are written once (see ``ndpdimm.cosim.dram.model``).
    """
    tCK_ns: float
    tRC: int
    tRCD: int
    tCL: int
    tRP: int
    tRAS: int
    tBL: int
    tCCD_S: int
    tCCD_L: int
    tRRD_S: int
    tRRD_L: int
    tFAW: int
    tWR: int
    tWTR_S: int
    tWTR_L: int
    tRTP: int
    CWL: int
    tREFI: int
    tRFC: int
    #: REF commands that may be postponed (JESD79-4: 8), so at most
    #: ``(max_postponed_refs + 1) * tREFI`` between two REFs.
    max_postponed_refs: int = 8

    def __post_init__(self):
        if (isinstance(self.tCK_ns, bool) or not isinstance(self.tCK_ns, (int, float))
                or not math.isfinite(self.tCK_ns) or self.tCK_ns <= 0):
            raise ValueError(f"tCK_ns must be a positive number, got {self.tCK_ns!r}")
        for f in dataclasses.fields(self):
            if f.name != "tCK_ns":
                _check_positive_int(f.name, getattr(self, f.name))
        for short, long in (("tCCD_S", "tCCD_L"), ("tRRD_S", "tRRD_L"), ("tWTR_S", "tWTR_L")):
            if getattr(self, long) < getattr(self, short):
                raise ValueError(f"{long} ({getattr(self, long)}) must be >= "
                                 f"{short} ({getattr(self, short)})")
        if self.tRFC >= self.tREFI:
            raise ValueError(f"tRFC ({self.tRFC}) must be shorter than tREFI ({self.tREFI})")

    @property
    def clock_hz(self) -> float:
        return 1e9 / self.tCK_ns

    def ns(self, cycles: int) -> float:
        """DRAM cycles -> nanoseconds."""
        return cycles * self.tCK_ns

    @property
    def write_to_precharge(self) -> int:
        """WR -> PRE, same bank: CWL + tBL + tWR (write recovery after the burst)."""
        return self.CWL + self.tBL + self.tWR

    def write_to_read(self, same_bank_group: bool) -> int:
        """WR -> RD, same rank: CWL + tBL + tWTR_L (same group) or tWTR_S."""
        return self.CWL + self.tBL + (self.tWTR_L if same_bank_group else self.tWTR_S)

    @property
    def read_to_write(self) -> int:
        """RD -> WR, same rank (bus turnaround, "tRTW"): tCL + tBL + 2 - CWL."""
        return self.tCL + self.tBL + 2 - self.CWL

    @property
    def refresh_deadline(self) -> int:
        """Longest legal gap between two REFs to one rank: (max_postponed_refs + 1) * tREFI."""
        return (self.max_postponed_refs + 1) * self.tREFI


def peak_bandwidth_bytes_per_s(org: DramOrganization, timing: DramTiming) -> float:
    """All ranks streaming one burst per tBL on their own buses (102.4 GB/s by default)."""
    return org.ranks * org.burst_bytes / (timing.tBL * timing.tCK_ns * 1e-9)


@dataclass(frozen=True)
class _DramFile:
    """The schema of a DRAM configuration file: two tables."""
    organization: DramOrganization
    timing: DramTiming


def load_dram_config(path=None) -> tuple[DramOrganization, DramTiming]:
    """Read ``(DramOrganization, DramTiming)`` from a TOML file.

    The file has two tables, ``[organization]`` and ``[timing]``, whose keys are
    exactly the dataclass fields (all required, ``max_postponed_refs``
    included), each number written ``{ value = ..., source = "..." }``. Unknown or
    missing tables/keys, a number without its source, NaN or infinity, wrong types,
    non-positive values and non-power-of-two organisation fields raise
    :class:`~ndpdimm.hw.config_file.ConfigError` (a ``ValueError``) naming the key and
    the file.
    """
    path = DEFAULT_CONFIG_PATH if path is None else Path(path)
    cfg = config_file.load(path, _DramFile)
    return cfg.organization, cfg.timing


#: A DIMM's internal DRAM bandwidth per NDP cycle: 4 ranks x 25.6 GB/s at 1 GHz = 102.4,
#: derived from the default DRAM configuration (hw/configs/ddr4-3200.toml); the physical
#: limit the GEMV engine is judged against.
DIMM_DRAM_BYTES_PER_CYCLE = round(peak_bandwidth_bytes_per_s(*load_dram_config()) / NDP_CLOCK_HZ, 6)
