"""``ndpdimm synth``: the options and run of ``synth/command.py`` (Yosys synthesis of the blocks
and the area report)."""

import argparse

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("synthesize the blocks with Yosys (NanGate45) and write the area report "
        "(synth/reports/area.md, .json, .png)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.synth import command
    command.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ndpdimm.synth import command
    command.run(args)
    return 0
