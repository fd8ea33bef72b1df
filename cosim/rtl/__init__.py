"""ndpdimm.cosim.rtl."""
