"""ndpdimm.sw.sweep.run."""
