"""ndpdimm.cosim.model."""
