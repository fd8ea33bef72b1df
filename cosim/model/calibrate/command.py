"""``ndpdimm calibrate``'s options and their run; ``python -m ndpdimm.cosim.model.calibrate`` too.

:func:`add_arguments` declares the options (the core's build parameters, jobs, output, refit,
held-out streams), :func:`config_from_args` makes the core's configuration of them and
:func:`run` does what they ask: the options checked before any work, then the calibration
(``record.calibrate``) or, with ``--streams-only``, the configuration's existing record
(``record.load_record``), then the held-out scenario streams (``--streams``) added to it.
:func:`main` is the stand-alone command.

The held-out streams are drawn from a Hermes and a TriMoE run, which live in ``ndpdimm.sw``,
and ``ndpdimm.cosim`` imports nothing of ``ndpdimm.sw``: the function that makes them
(``provider(config, per_kind, seed, runner)``, returning the ``held_out_streams`` block) is
found through the entry point group :data:`STREAMS_GROUP`, which ``pyproject.toml`` declares
(``ndpdimm.sw.scenarios.kernel_logs:calibration_streams``; :func:`streams_provider`). The RTL
points and the streams go to the ``runner`` the caller gives (the ``ndpdimm`` CLI gives its
Dask runner with ``--scheduler`` or ``--jobs`` > 1), else to local processes.
"""

import argparse
import importlib.metadata
import os

from ndpdimm.cosim.arguments import positive_int
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.calibrate.measure import local_runner
from ndpdimm.cosim.model.calibrate.record import add_held_out_streams, calibrate, load_record, report
from ndpdimm.cosim.model.perf import calibration_path

__all__ = ["STREAMS_GROUP", "add_arguments", "config_from_args", "check_options",
           "streams_provider", "run", "main"]

#: The entry point group of the held-out streams' provider (module docstring).
STREAMS_GROUP = "ndpdimm.calibration_streams"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ndpdimm calibrate`` (the core's build parameters, jobs, output)."""
    d = CoreConfig()
    parser.add_argument("--units", type=positive_int, default=d.n_units,
                        help=f"GEMV units (default {d.n_units})")
    parser.add_argument("--max-batch", type=positive_int, default=d.max_batch)
    parser.add_argument("--radix-bits", type=positive_int, default=d.radix_bits)
    parser.add_argument("--ring-beats", type=positive_int, default=d.ring_beats)
    parser.add_argument("--sram-size", type=positive_int, default=d.sram_size, help="SRAM bytes")
    parser.add_argument("--sram-banks", type=positive_int, default=d.sram_banks)
    parser.add_argument("--act-lanes", type=positive_int, default=d.act_lanes)
    parser.add_argument("--dram-config", default=None, help="DRAM TOML (default DDR4-3200)")
    parser.add_argument("--jobs", type=positive_int, default=min(2, os.cpu_count() or 1),
                        help="RTL simulator processes in parallel, as a Dask LocalCluster of that "
                             "many workers when more than 1 (default: min(2, CPUs))")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="shard the RTL points over this Dask scheduler's workers instead")
    parser.add_argument("--streams", type=int, default=0, metavar="PER_KIND",
                        help="after the fit, check the model on held-out back-to-back descriptor "
                             "streams drawn from a Hermes and a TriMoE run's own kernels, this "
                             "many per kernel kind (sw/sampling/streams.py; default 0: none)")
    parser.add_argument("--stream-seed", type=int, default=0,
                        help="seed of the streams' draw and data (default 0)")
    parser.add_argument("--streams-only", action="store_true",
                        help="no RTL points, no fit: run --streams against the existing "
                             "calibration file (--out or the configuration's) and add them to it")
    parser.add_argument("--fresh", action="store_true",
                        help="measure every point again instead of resuming from the points an "
                             "earlier run of the same configuration and RTL build saved")
    parser.add_argument("--out", default=None,
                        help="parameter file (default cosim/model/calibration/<config key>.json)")
    parser.add_argument("--refit", default=None, metavar="FILE",
                        help="refit from the RTL points stored in FILE instead of running the RTL")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")



def config_from_args(args) -> CoreConfig:
    """The core's configuration the options of :func:`add_arguments` give."""
    return CoreConfig(n_units=args.units, max_batch=args.max_batch, radix_bits=args.radix_bits,
                      ring_beats=args.ring_beats, sram_size=args.sram_size,
                      sram_banks=args.sram_banks, act_lanes=args.act_lanes,
                      dram_config=args.dram_config)


def check_options(args, runner=None) -> None:
    """``ValueError`` for options that contradict each other, before any work: ``--streams``
    below 0, or 0 with ``--streams-only``; ``--streams-only`` with ``--refit``; ``--scheduler``
    with no ``runner`` to reach it (the ``ndpdimm`` CLI gives its Dask runner)."""
    if args.streams < 0 or (args.streams_only and not args.streams):
        raise ValueError(f"--streams must be >= 1 with --streams-only, and >= 0 (got {args.streams})")
    if args.streams_only and args.refit:
        raise ValueError("--streams-only adds streams to an existing calibration; it takes no --refit")
    if args.scheduler and runner is None:
        raise ValueError(f"--scheduler {args.scheduler}: sharding over a Dask scheduler takes the "
                         "runner `ndpdimm calibrate` gives; run it as `ndpdimm calibrate`")


def streams_provider(provider=None):
    """The function that makes the held-out streams block: ``provider`` if given, else the one
    the entry point group :data:`STREAMS_GROUP` names; ``ValueError`` naming the group if none
    (or more than one) is installed."""
    if provider is not None:
        return provider
    found = {ep.value: ep for ep in importlib.metadata.entry_points(group=STREAMS_GROUP)}
    if not found:
        raise ValueError(f"--streams: no provider of held-out calibration streams is installed "
                         f"(entry point group {STREAMS_GROUP!r}, declared in pyproject.toml; "
                         "reinstall the package: pip install -e .)")
    if len(found) > 1:
        raise ValueError(f"--streams: {len(found)} providers in entry point group "
                         f"{STREAMS_GROUP!r}: {', '.join(sorted(found))}")
    return next(iter(found.values())).load()


def _command(args, config: CoreConfig) -> str:
    """The ``ndpdimm calibrate`` line a record names: the options that differ from the default."""
    d = CoreConfig()
    opts = [f"--{flag} {getattr(config, name)}" for flag, name in (
        ("units", "n_units"), ("max-batch", "max_batch"), ("radix-bits", "radix_bits"),
        ("ring-beats", "ring_beats"), ("sram-size", "sram_size"), ("sram-banks", "sram_banks"),
        ("act-lanes", "act_lanes")) if getattr(config, name) != getattr(d, name)]
    if config.dram_config:
        opts.append(f"--dram-config {config.dram_config}")
    opts.append(f"--refit {args.refit}" if args.refit else f"--jobs {args.jobs}")
    if args.scheduler and not args.refit:
        opts.append(f"--scheduler {args.scheduler}")
    return " ".join(["ndpdimm calibrate", *opts])


def run(args, runner=None, *, streams=None) -> dict:
    """Run ``ndpdimm calibrate`` with parsed ``args`` (from :func:`add_arguments`); returns the
    record. ``runner`` (see ``measure.run_points``) shards the RTL points and runs the streams
    (the CLI's runs on Dask); without one, local processes (``--jobs``). ``streams``: the
    streams' provider (default: :func:`streams_provider`'s, looked up only with ``--streams``)."""
    check_options(args, runner)
    config = config_from_args(args)
    if args.streams_only:
        record, path = load_record(config, args.out)
    provider = streams_provider(streams) if args.streams else None     # before the long part
    if not args.streams_only:
        record = calibrate(config, jobs=args.jobs, out=args.out, refit=args.refit,
                           progress=not args.quiet, command=_command(args, config),
                           runner=runner, resume=not args.fresh)
        path = args.out or calibration_path(config)
    if provider is not None:
        block = provider(config, args.streams, args.stream_seed, runner or local_runner(args.jobs))
        add_held_out_streams(record, block, path)
        print(report(record))
        print(f"wrote {path}")
    return record


def main(argv=None) -> int:
    """``python -m ndpdimm.cosim.model.calibrate [options]``: 0, or 2 on an option error."""
    p = argparse.ArgumentParser(prog="python -m ndpdimm.cosim.model.calibrate",
                                description="calibrate the performance model against the RTL")
    add_arguments(p)
    args = p.parse_args(argv)
    try:
        run(args)
    except ValueError as e:
        p.exit(2, f"{p.prog}: error: {e}\n")
    return 0

