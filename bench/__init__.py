"""ndpdimm.bench."""
