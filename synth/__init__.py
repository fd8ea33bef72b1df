"""Yosys synthesis flow and area reports (issue 7)."""
