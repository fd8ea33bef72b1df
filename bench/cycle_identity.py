"""Per-descriptor RTL cycles of the calibration points, to show that an RTL change keeps (or
changes) them: ``python -m ndpdimm.bench.cycle_identity``.

Runs every calibration and held-out point of ``ndpdimm calibrate``
(``cosim/model/calibrate/points.py``: GEMVs of every operation and dtype, DMAs,
activations, rejected descriptors) for one core configuration on the C++
harness, **in one process from reset, in a fixed order**, so that two RTL
builds see the same DRAM refresh phases and the same state at every point;
the calibration itself shards its points over workers, and which shard a
point falls in depends on what its store already held, so its per-point
records cannot be compared across builds. Writes each point's completion
status and cycles (descriptor accepted to completion, as the calibration
records them) as JSON, and the simulation speed (cycles per CPU second of
the process, which holds the harness) on this fixed workload.

``--against FILE`` compares with an earlier run (for instance of the
previous RTL, made by running this file with that commit's package:
``<old venv>/bin/python bench/cycle_identity.py ...``): it lists every point
whose status or cycles differ and exits non-zero if any does, so a change
meant to keep the cycle behaviour can be checked on the full-size core.

At 256 units the 142 points are about 620,000 simulated cycles: 2 minutes of
simulation at about 6,000 cycles/s, after the harness build (about 10
minutes of elaboration the first time per RTL).
"""

import argparse
import json
import sys
import time

from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model import calibrate

__all__ = ["run", "compare", "workload_parser", "workload_config", "command_line", "main"]

PROG = "python -m ndpdimm.bench.cycle_identity"


def run(config: CoreConfig, command: str, progress: bool = True) -> dict:
    """Every calibration and held-out point of ``config`` in one harness process; the result."""
    from ndpdimm.cosim.rtl.harness_build import build_harness
    sets = calibrate.point_sets(config)
    points = sets["calibration"] + sets["held_out"]
    build = build_harness(config, progress=progress)
    t0, c0 = time.perf_counter(), time.process_time()
    records, _ = calibrate.measure_on_rtl(config, points)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    cycles = sum(r["rtl_sim_cycles"] for r in records)
    return {
        **bench_header("cycle_identity", command),
        "config": config.as_dict(),
        # the build directory (named by its source hash), not its obj/ folder
        "harness_build": build.parent.parent.name,
        "wall_seconds": round(wall, 1),
        "cpu_seconds": round(cpu, 1),
        "simulated_cycles": cycles,
        # the harness runs in this process: its CPU time is the simulation's, whatever else
        # the machine is doing (the point staging and checks are included)
        "cycles_per_cpu_second": round(cycles / cpu),
        "points": {r["name"]: {"status": r["status"], "cycles": r["rtl_cycles"],
                               "start_cycle": r["start_cycle"]} for r in records},
    }


def compare(new: dict, old: dict) -> list:
    """``[(name, old entry, new entry)]`` of the points whose status or cycles differ (a point in
    only one of the two counts as differing)."""
    out = []
    for name in sorted(set(new["points"]) | set(old["points"])):
        a, b = old["points"].get(name), new["points"].get(name)
        if a is None or b is None or (a["status"], a["cycles"]) != (b["status"], b["cycles"]):
            out.append((name, a, b))
    return out


def workload_parser(prog: str, doc: str) -> argparse.ArgumentParser:
    """The arguments of a benchmark of this workload (``--units``, ``--act-lanes``, ``--out``);
    also :mod:`ndpdimm.bench.profile`'s."""
    p = argparse.ArgumentParser(prog=prog, description=doc.split("\n\n")[0])
    p.add_argument("--units", type=int, default=256)
    p.add_argument("--act-lanes", type=int, default=256)
    p.add_argument("--out", required=True, help="JSON file to write")
    return p


def workload_config(parser: argparse.ArgumentParser, args) -> CoreConfig:
    """The core of ``--units`` / ``--act-lanes``; a bad value is a usage error (exit 2)."""
    try:
        return CoreConfig(n_units=args.units, act_lanes=args.act_lanes)
    except ValueError as e:
        parser.error(str(e))


def command_line(prog: str, argv) -> str:
    """The command a result records: ``prog`` and the arguments it ran with."""
    return prog + " " + " ".join(argv if argv is not None else sys.argv[1:])


def main(argv=None) -> int:
    p = workload_parser(PROG, __doc__)
    p.add_argument("--against", help="an earlier run's JSON: list the points that differ")
    args = p.parse_args(argv)
    old = None
    if args.against:
        # read first: a bad file fails before the long run
        try:
            with open(args.against) as f:
                old = json.load(f)
            old["config"], old["points"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            p.error(f"--against {args.against}: not a cycle_identity result ({e})")
    config = workload_config(p, args)
    if old is not None and old["config"] != config.as_dict():
        p.error(f"{args.against} is of another configuration: {old['config']}")
    res = run(config, command_line(PROG, argv))
    if old is not None:
        diff = compare(res, old)
        res["against"] = {"file": args.against, "git_commit": old.get("git_commit"),
                          "points": len(old["points"]), "differing": len(diff),
                          "differences": [{"name": n, "old": a, "new": b} for n, a, b in diff]}
    with open(args.out, "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    print(f"{len(res['points'])} points, {res['simulated_cycles']:,} cycles in "
          f"{res['cpu_seconds']} CPU s ({res['cycles_per_cpu_second']:,}/s) -> {args.out}")
    if old is not None:
        print(f"against {args.against}: {res['against']['differing']} of "
              f"{len(res['points'])} points differ")
        for n, a, b in diff[:20]:
            print(f"  {n}: {a} -> {b}")
        return 1 if diff else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
