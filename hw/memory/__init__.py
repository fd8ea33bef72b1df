"""ndpdimm.hw.memory."""
