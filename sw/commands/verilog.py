"""``ndpdimm verilog``: the GEMV engine's Verilog, hierarchical (``hw/gemv/engine.py``)."""

import argparse
import sys

from ndpdimm.cosim.arguments import positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = "write the GEMV engine Verilog (hierarchical)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--units", type=positive_int, default=256)
    parser.add_argument("--max-batch", type=positive_int, default=16)
    parser.add_argument("--radix-bits", type=positive_int, default=1)
    parser.add_argument("-o", "--output", default="-", help="file, or - for stdout")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.hw.gemv.engine import engine_verilog
    text = engine_verilog(n_units=args.units, max_batch=args.max_batch, radix_bits=args.radix_bits)
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w") as f:
            f.write(text)
    return 0
