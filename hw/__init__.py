"""Amaranth RTL of the NDP core, one file per block; shared formats in formats.py."""
