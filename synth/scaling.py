"""Scaling 45 nm (NanGate45 / FreePDK45) areas to a 7 nm-class node: one factor for logic, one for SRAM.

Logic and SRAM shrink by different amounts from 45 nm to 7 nm, and neither by
the square of the node names, so the report scales them apart
(``realistic = logic x LOGIC + SRAM x SRAM``) and keeps the square of the node
names only as a labelled lower bound.

* **Logic** (:data:`LOGIC`, 0.059): the area scaling table of A. Stillmaker and
  B. Baas, "Scaling equations for the accurate prediction of CMOS device
  performance from 180 nm to 7 nm", Integration, the VLSI Journal 58 (2017)
  74-81, entry 45 nm -> 7 nm. We read the table through two public
  reproductions that quote it from the paper (UCLA NanoCAD's ``nodeScale``,
  ``areaDict['45']['7'] = 0.059``, and an Accelergy-style scaling module,
  ``AREA_SCALING`` row 45 nm, column 7 nm = 0.059); the paper's table itself was
  not in the material we could read. That is a 17x shrink, against 41x for the
  node names squared. The table is a process-to-process figure (published
  process data and predictive models), not a cell library's: NanGate45's
  licence forbids benchmarking that library against other libraries, so we
  do **not** derive the factor from NanGate45 cell areas against ASAP7's or
  any other library's (``synth/liberty.py``).
  DeepScaleTool (S. Sarangi, B. Baas, ISCAS 2021, arXiv 2102.10195), the
  same group's later fit to a leading foundry's 130 nm..7 nm data, would be
  the better source, but its 45 nm -> 7 nm area factor was not in the material
  we could read, so it is not used.
* **SRAM** (:data:`SRAM`): the 45 nm macros come from a density model
  (``synth/sram_macro.py``: OpenRAM in FreePDK45, 0.826 Mb/mm^2, times the
  two-port factor where a macro needs two ports). At 7 nm the same model uses
  TSMC N7's high-density 6T bitcell, 0.027 um^2 (J. Chang et al., "A 7nm 256Mb
  SRAM in high-k metal-gate FinFET technology with write-assist circuitry for
  low-VMIN applications", ISSCC 2017, paper 12.1, as cited by WikiChip's 7 nm
  process page), and an array efficiency of 0.70 (bitcells / macro area)
  taken from WikiChip's "IEDM 2022: Did We Just Witness The Death Of SRAM?",
  which puts TSMC N3E's 0.021 um^2 bitcell at "roughly 31.8 Mib/mm^2 (assuming
  ISO-assist circuit overhead)": 31.8 x 2^20 bits x 0.021 um^2 / 1 mm^2 =
  0.700. So 7 nm macros hold 0.700 / 0.027 um^2 = 25.9 Mb/mm^2 and the SRAM
  factor is 0.826 / 25.9 = 0.0319: every macro is bits / density x the same
  two-port factor at both nodes, so scaling the 45 nm macro area by the
  density ratio is the same as computing it from bits at 7 nm. Small macros
  carry relatively more periphery than the 0.70 assumes, so the 7 nm SRAM
  figure is optimistic for the many small macros of this design.
* **Lower bound** (:data:`LOWER_BOUND`): ``(7/45)^2 = 0.0242`` on logic and
  SRAM alike, classical scaling with the square of the node names. No real
  7 nm process reaches it (both factors above shrink less), so it is reported
  only as a lower bound. (Earlier reports called it Stillmaker & Baas' factor;
  their table gives 0.059.)

A macro generator does not replace the SRAM density model: OpenRAM (PyPI
``openram``, in a venv of its own with numpy < 2) generates FreePDK45 macros
on these machines, but it has no 7 nm technology, so the 7 nm SRAM factor
stays a density model; what its FreePDK45 macros say about the 45 nm model is
in ``docs/synth.md`` (7 nm estimate).

Delay is not scaled here: the report gives the 45 nm path estimate and the
speed-up a 7 nm node would need for 1 GHz (``docs/synth.md``).
"""

from dataclasses import dataclass

from ndpdimm.synth import sram_macro

__all__ = ["FROM_NM", "TO_NM", "Factor", "LOGIC", "SRAM", "LOWER_BOUND",
           "SRAM_BITCELL_UM2_7NM", "SRAM_ARRAY_EFFICIENCY_7NM", "SRAM_DENSITY_BITS_PER_MM2_7NM",
           "REFERENCE_CORE_MM2_7NM", "REFERENCE_SOURCE", "to_7nm", "to_7nm_lower_bound",
           "as_dict"]

FROM_NM, TO_NM = 45, 7


@dataclass(frozen=True)
class Factor:
    """An area factor from 45 nm to the 7 nm-class node and where it comes from."""
    value: float
    source: str


LOGIC = Factor(0.059, (
    "A. Stillmaker, B. Baas, \"Scaling equations for the accurate prediction of CMOS device "
    "performance from 180 nm to 7 nm\", Integration, the VLSI Journal 58 (2017) 74-81, area "
    "scaling table, 45 nm -> 7 nm = 0.059 (read from public reproductions of the table: UCLA "
    "NanoCAD nodeScale areaDict['45']['7'], an Accelergy-style AREA_SCALING table); a "
    "process-to-process factor, not a library comparison (NanGate45's licence forbids those)"))

#: TSMC N7 high-density 6T SRAM bitcell, um^2 (Chang et al., ISSCC 2017).
SRAM_BITCELL_UM2_7NM = 0.027
#: Bitcell area / macro area: WikiChip's 31.8 Mib/mm^2 for a 0.021 um^2 bitcell (TSMC N3E).
SRAM_ARRAY_EFFICIENCY_7NM = 31.8 * 2 ** 20 * 0.021e-6
#: Bits per mm^2 of a 7 nm single-port macro.
SRAM_DENSITY_BITS_PER_MM2_7NM = SRAM_ARRAY_EFFICIENCY_7NM / (SRAM_BITCELL_UM2_7NM * 1e-6)

SRAM = Factor(sram_macro.DENSITY_BITS_PER_MM2 / SRAM_DENSITY_BITS_PER_MM2_7NM, (
    f"45 nm macro density {sram_macro.DENSITY_BITS_PER_MM2 / 1e6:.3f} Mb/mm^2 (synth/sram_macro.py) "
    f"over a 7 nm macro density of {SRAM_DENSITY_BITS_PER_MM2_7NM / 1e6:.1f} Mb/mm^2 = TSMC N7 "
    f"high-density 6T bitcell {SRAM_BITCELL_UM2_7NM} um^2 (J. Chang et al., \"A 7nm 256Mb SRAM "
    "in high-k metal-gate FinFET technology with write-assist circuitry for low-VMIN "
    "applications\", ISSCC 2017; as cited by WikiChip, 7 nm lithography process) at an array "
    f"efficiency of {SRAM_ARRAY_EFFICIENCY_7NM:.2f} (WikiChip, \"IEDM 2022: Did We Just Witness "
    "The Death Of SRAM?\": a 0.021 um^2 bitcell is roughly 31.8 Mib/mm^2); the two-port factor "
    "applies at both nodes"))

LOWER_BOUND = Factor((TO_NM / FROM_NM) ** 2, (
    "lower bound only: classical scaling, area with the square of the node names, (7/45)^2, on "
    "logic and SRAM alike; real 7 nm logic and SRAM shrink less"))

#: SPEC section 1: the published centre-buffer NDP-DIMM design point (256 bit-serial units, 1 GHz).
REFERENCE_CORE_MM2_7NM = 1.23
REFERENCE_SOURCE = "SPEC section 1: 1.23 mm^2 per NDP core in a 7 nm process"


def to_7nm(logic_mm2_45: float, sram_mm2_45: float) -> float:
    """The 7 nm-class estimate of a block: its 45 nm logic and SRAM areas (mm^2), each scaled by its factor."""
    return logic_mm2_45 * LOGIC.value + sram_mm2_45 * SRAM.value


def to_7nm_lower_bound(total_mm2_45: float) -> float:
    """The lower bound: a 45 nm area (mm^2) scaled by the square of the node names."""
    return total_mm2_45 * LOWER_BOUND.value


def as_dict() -> dict:
    """The ``scaling`` section of ``area.json``: every factor with its source, and the reference."""
    return {
        "from_nm": FROM_NM, "to_nm": TO_NM,
        "logic_factor": LOGIC.value, "logic_source": LOGIC.source,
        "sram_factor": SRAM.value, "sram_source": SRAM.source,
        "sram_bitcell_um2_7nm": SRAM_BITCELL_UM2_7NM,
        "sram_array_efficiency_7nm": SRAM_ARRAY_EFFICIENCY_7NM,
        "sram_density_bits_per_mm2_7nm": SRAM_DENSITY_BITS_PER_MM2_7NM,
        "lower_bound_factor": LOWER_BOUND.value, "lower_bound_source": LOWER_BOUND.source,
        "reference_core_mm2_7nm": REFERENCE_CORE_MM2_7NM, "reference_source": REFERENCE_SOURCE,
    }
