"""Synthesis: Yosys (yowasp) over every block and the top, area with the NanGate45 Liberty.

``command`` (``ndpdimm synth`` / ``make synth``), ``blocks`` (the blocks reported and
their parameters), ``flow`` (drive Yosys, collect statistics), ``liberty`` (the cell
library), ``sram_macro`` (SRAMs as macros with a density model), ``parallel_multiplier``
(the comparison circuit), ``scaling`` (45 nm -> 7 nm-class factors: logic, SRAM, lower
bound), ``report`` (Markdown, JSON, chart into ``synth/reports/``; re-rendering an
existing ``area.json``).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim`` (Verilog elaboration helpers); never ``sw``.
"""
