"""``ndpdimm calibrate``: the options and run of ``cosim/model/calibrate/command.py``, with its RTL
points and held-out streams on Dask (``sw/sweep/tasks.py``) when ``--scheduler`` or ``--jobs`` > 1
(``ndpdimm.cosim`` cannot import the Dask runner of ``ndpdimm.sw``)."""

import argparse

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("fit the performance model (model backend) to cycle counts of the RTL backend; writes "
        "cosim/model/calibration/<config>.json")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.cosim.model.calibrate import command
    command.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ndpdimm.cosim.model.calibrate import command
    from ndpdimm.sw.sweep.tasks import dask_runner
    sharded = args.scheduler or args.jobs > 1
    command.run(args, runner=dask_runner(args.scheduler, args.jobs) if sharded else None)
    return 0
