"""Helpers for Amaranth-simulator testbenches, in one place instead of copied per test.

``streams`` (stream put/get), ``sram_access`` (load, dump and compare SRAM images
through a ``BankedSram`` port).

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim``.
"""
