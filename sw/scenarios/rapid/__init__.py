"""ndpdimm.sw.scenarios.rapid."""
