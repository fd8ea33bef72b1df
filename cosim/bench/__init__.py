"""ndpdimm.cosim.bench."""
