"""``ndpdimm cache``: the shared build cache (``cosim/cache.py``): its root and size per kind;
``--path`` only the root, ``--clear`` empty it."""

import argparse

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("the shared build cache (Verilator, harness, native, synth, calibration runs): its root "
        "and size per kind")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--path", action="store_true", help="print only the cache root")
    what.add_argument("--clear", action="store_true",
                      help="remove every kind's folder under the root (only a root ndpdimm created)")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.cosim import cache
    if args.path:
        print(cache.cache_root())
    elif args.clear:
        print(f"freed {cache.format_bytes(cache.clear_cache())}")
    else:
        print(cache.cache_report())
    return 0
