"""The 45 nm -> 7 nm-class factors (synth/scaling.py): present, sourced, and shrinking less than the node names squared."""

import pytest

from ndpdimm.synth import scaling, sram_macro
from ndpdimm.synth.sram_macro import MemoryMacro, macro_area_um2


def test_each_factor_has_a_value_and_a_source():
    for f in (scaling.LOGIC, scaling.SRAM, scaling.LOWER_BOUND):
        assert 0 < f.value < 1 and len(f.source) > 40
    assert "Stillmaker" in scaling.LOGIC.source and "licence" in scaling.LOGIC.source
    assert "0.027 um^2" in scaling.SRAM.source and "ISSCC 2017" in scaling.SRAM.source
    assert "lower bound" in scaling.LOWER_BOUND.source


def test_logic_and_sram_shrink_less_than_the_lower_bound():
    assert scaling.LOWER_BOUND.value == pytest.approx((7 / 45) ** 2)
    assert scaling.LOGIC.value > scaling.LOWER_BOUND.value
    assert scaling.SRAM.value > scaling.LOWER_BOUND.value


def test_sram_density_from_the_bitcell_and_array_efficiency():
    raw = 1 / (0.027e-6)                         # bits per mm^2 of bare N7 HD bitcells
    assert scaling.SRAM_ARRAY_EFFICIENCY_7NM == pytest.approx(0.700, abs=0.001)
    assert scaling.SRAM_DENSITY_BITS_PER_MM2_7NM == pytest.approx(0.700 * raw, rel=2e-3)
    # denser than the 45 nm OpenRAM macros, less dense than bare bitcells
    assert sram_macro.DENSITY_BITS_PER_MM2 < scaling.SRAM_DENSITY_BITS_PER_MM2_7NM < raw


def test_scaling_a_two_port_macro_equals_computing_it_from_bits_at_7nm():
    macro = MemoryMacro("m", "ram", width=64, depth=512, read_ports=1, write_ports=1,
                        shared_address=False)
    at_7nm_from_bits = (macro.bits / scaling.SRAM_DENSITY_BITS_PER_MM2_7NM * 1e6
                        * sram_macro.TWO_PORT_FACTOR)
    assert macro_area_um2(macro) * scaling.SRAM.value == pytest.approx(at_7nm_from_bits)


def test_realistic_and_lower_bound_arithmetic():
    assert scaling.to_7nm(2.0, 3.0) == pytest.approx(2.0 * scaling.LOGIC.value +
                                                     3.0 * scaling.SRAM.value)
    assert scaling.to_7nm_lower_bound(5.0) == pytest.approx(5.0 * (7 / 45) ** 2)
    assert scaling.to_7nm(2.0, 3.0) > scaling.to_7nm_lower_bound(5.0)


def test_json_section_lists_both_factors_and_sources():
    d = scaling.as_dict()
    for key in ("logic", "sram", "lower_bound"):
        assert d[f"{key}_factor"] == getattr(scaling, key.upper()).value
        assert d[f"{key}_source"] == getattr(scaling, key.upper()).source
    assert d["reference_core_mm2_7nm"] == 1.23
