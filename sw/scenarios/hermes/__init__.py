"""ndpdimm.sw.scenarios.hermes."""
