"""ndpdimm.hw.gemv."""
