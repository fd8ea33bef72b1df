"""ndpdimm.cosim.golden.numerics."""
