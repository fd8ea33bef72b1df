"""ndpdimm.hw.activation."""
