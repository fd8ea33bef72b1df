"""Scaling 45 nm (NanGate45 / FreePDK45) figures to a 7 nm-class node, and the reference design point.

Area: A. Stillmaker and B. Baas, "Scaling equations for the accurate prediction
of CMOS device performance from 180 nm to 7 nm", Integration, the VLSI Journal
58 (2017) 74-81, scale area with the square of the feature size; from 45 nm to
7 nm that is ``(7/45)^2 = 0.0242`` (a 41x shrink). It is applied to logic and
SRAM alike. It is the published, commonly used factor, not a measurement: real
7 nm libraries shrink less than the drawn feature size suggests (fin pitch,
track height and SRAM bitcells do not follow the node name), so read the 7 nm
column as an optimistic estimate. NanGate45's licence forbids comparing it
with other libraries, so no library-to-library ratio is used.

Delay is not scaled here: the report gives the 45 nm path estimate and the
speed-up a 7 nm node would need for 1 GHz (``docs/synth.md``).
"""

__all__ = ["FROM_NM", "TO_NM", "AREA_FACTOR_7NM", "AREA_SOURCE", "REFERENCE_CORE_MM2_7NM",
           "REFERENCE_SOURCE", "to_7nm"]

FROM_NM, TO_NM = 45, 7
#: Area factor 45 nm -> 7 nm (feature size squared, Stillmaker & Baas 2017).
AREA_FACTOR_7NM = (TO_NM / FROM_NM) ** 2
AREA_SOURCE = ("A. Stillmaker, B. Baas, \"Scaling equations for the accurate prediction of CMOS "
               "device performance from 180 nm to 7 nm\", Integration, the VLSI Journal 58 (2017) "
               "74-81: area ~ feature size^2, (7/45)^2")
#: SPEC section 1: the published centre-buffer NDP-DIMM design point (256 bit-serial units, 1 GHz).
REFERENCE_CORE_MM2_7NM = 1.23
REFERENCE_SOURCE = "SPEC section 1: 1.23 mm^2 per NDP core in a 7 nm process"


def to_7nm(area_mm2_45: float) -> float:
    """A 45 nm area in mm^2 scaled to the 7 nm-class node."""
    return area_mm2_45 * AREA_FACTOR_7NM
