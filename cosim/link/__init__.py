"""ndpdimm.cosim.link."""
