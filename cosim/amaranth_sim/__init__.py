"""ndpdimm.cosim.amaranth_sim."""
