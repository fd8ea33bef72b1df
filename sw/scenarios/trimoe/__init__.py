"""ndpdimm.sw.scenarios.trimoe."""
