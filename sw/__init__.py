"""Host runtime, scenarios and the ndpdimm CLI."""
