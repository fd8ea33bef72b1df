"""ndpdimm.sw.layer."""
