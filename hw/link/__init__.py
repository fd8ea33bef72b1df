"""ndpdimm.hw.link."""
