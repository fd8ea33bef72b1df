"""ndpdimm.hw.core."""
