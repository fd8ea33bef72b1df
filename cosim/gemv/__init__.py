"""ndpdimm.cosim.gemv."""
