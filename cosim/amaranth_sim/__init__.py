"""Helpers for Amaranth-simulator testbenches, in one place instead of copied per test.

``streams`` (stream put/get), ``sram_access`` (load, dump and compare SRAM images
through a ``BankedSram`` port), ``gemv_unit`` (one GEMV unit and the engine's lane
sequencer driven cycle by cycle as the engine drives them).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``.
"""
