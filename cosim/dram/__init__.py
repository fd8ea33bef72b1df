"""ndpdimm.cosim.dram."""
