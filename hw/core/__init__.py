"""The NDP core: the command processor and the top that joins every block of one DIMM.

``command_processor`` (registers, descriptor queue, checks and protection, dispatch,
completions), ``ndp_core`` (``NdpCore``: the whole chip, the top the harness, the
benches and synthesis build).

May import: ``ndpdimm.hw`` only.
"""
