"""ndpdimm.sw.scenarios."""
