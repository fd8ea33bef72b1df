"""``ndpdimm sweep [FILE]``: a design-space sweep on Dask distributed (a LocalCluster or
``--scheduler tcp://HOST:PORT``), cached per point (``sw/sweep/run.py``, ``sw/sweep/jobs.py``);
exit status 1 if a point failed."""

import argparse

from ndpdimm.cosim.arguments import output_folder, positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("run a design-space sweep file (scenario or RTL job over a grid of parameters) on Dask "
        "distributed, cached per point")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", help="sweep file (.toml, .yaml); see docs/sweep.md")
    parser.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                        help="an existing Dask scheduler (default: a LocalCluster on this machine)")
    parser.add_argument("--workers", type=positive_int, default=2,
                        help="LocalCluster worker processes (default 2)")
    parser.add_argument("--in-process", action="store_true",
                        help="run the points one after another in this process (no Dask)")
    parser.add_argument("--no-cache", action="store_true",
                        help="recompute every point (results are still written to the cache)")
    parser.add_argument("--cache-dir", default="build/sweeps/cache",
                        help="point cache (default build/sweeps/cache)")
    parser.add_argument("--out-dir", default=None, type=output_folder,
                        help="results table, summary and plot (default build/sweeps/<name>)")
    parser.add_argument("--list-jobs", action="store_true", help="list the jobs and their parameters")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.sweep.jobs import JOBS, job_parameters
    from ndpdimm.sw.sweep.run import load_sweep, run_sweep
    if args.list_jobs:
        for name, job in JOBS.items():
            params = ", ".join(f"{k}={d!r}" for k, (_, d) in job_parameters(name).items())
            print(f"{name}: {job.summary}\n    {params}")
        return 0
    if args.file is None:
        raise ValueError("give a sweep file (or --list-jobs)")
    if args.scheduler and args.in_process:
        raise ValueError("--scheduler and --in-process exclude each other")
    if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://", "inproc://")):
        raise ValueError(f"--scheduler must be an address like tcp://HOST:PORT, got {args.scheduler!r}")
    sweep = load_sweep(args.file)
    result = run_sweep(sweep, scheduler=args.scheduler, workers=args.workers,
                       in_process=args.in_process, cache_dir=args.cache_dir,
                       use_cache=not args.no_cache, out_dir=args.out_dir or "default")
    print(f"wrote {result.out_dir}/results.csv, results.jsonl, summary.json, sweep.png")
    return 0 if result.count("ok") == len(result.records) else 1
