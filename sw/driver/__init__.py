"""ndpdimm.sw.driver.dimm."""
