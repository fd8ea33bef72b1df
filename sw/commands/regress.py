"""``ndpdimm regress [PATH...]``: the RTL regression sharded over a Dask cluster, one merged
pass/fail report (``sw/sweep/regress.py``; ``make sim SCHEDULER=tcp://HOST:PORT``); exit status 1
if a test failed."""

import argparse

from ndpdimm.cosim.arguments import output_folder, positive_float, positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("the RTL regression sharded over a Dask cluster (one task per sim bench and seed, one per "
        "other test file), merged into one pass/fail report")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", default=["tests"], help="test paths (default tests)")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="an existing Dask scheduler (default: a LocalCluster on this machine)")
    parser.add_argument("--workers", type=positive_int, default=None,
                        help="LocalCluster worker processes (default: one per core)")
    parser.add_argument("-m", dest="select", default=None, metavar="EXPR",
                        help="pytest -m expression restricting the tests")
    parser.add_argument("--timeout", type=positive_float, default=None,
                        help="seconds per shard before it counts as failed")
    parser.add_argument("--out-dir", default="build/regress", type=output_folder,
                        help="report.json and report.md (default build/regress)")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.sweep.regress import run_regression
    if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://")):
        raise ValueError(f"--scheduler must be an address like tcp://HOST:PORT, got {args.scheduler!r}")
    report = run_regression(paths=tuple(args.paths), select=args.select, scheduler=args.scheduler,
                            workers=args.workers, out_dir=args.out_dir, timeout=args.timeout)
    return 0 if report["passed"] else 1
