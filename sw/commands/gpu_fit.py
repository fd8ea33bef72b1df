"""``ndpdimm gpu-fit``: fit a GPU's model of achieved throughput to measured operator tables
(``sw/scenarios/measured/fit.py``) and write it as JSON: the fit, the tables it came from (named
as its source), its error on them, and the run's provenance.

The fits the project uses are committed as ``sw/configs/gpus/fits/<gpu>.json`` (``--out``
there); ``ndpdimm gpu-check`` reads them. Options as ``gpu-check``'s (``--profile``, ``--gpu``,
``--model``), ``--exclude-op OP`` and ``--tp N`` to fit a part of the tables (a held-out check:
``gpu-check`` of the whole tables then shows the error on the rest), and ``--out FILE`` (default
``build/gpu/<gpu>.json``). ``--all-reduce FILE`` adds a measured all-reduce table of the card
(Vidur's network form: ``sw/scenarios/measured/collectives.py``), which the scenarios charge for
tensor parallelism instead of a ring at the link's datasheet rate.
"""

import argparse
import dataclasses
from pathlib import Path

from ndpdimm.cosim.arguments import output_file, positive_int
from ndpdimm.sw.commands.gpu_check import add_profile_options

__all__ = ["HELP", "add_arguments", "run", "sustained"]

HELP = ("fit a GPU's model of achieved bandwidth and FLOP/s to measured operator tables and "
        "write it as JSON (what gpu-check and the scenarios read)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_options(parser)
    parser.add_argument("--exclude-op", action="append", default=[], metavar="OP",
                        help="leave this op out of the fit (repeatable): a held-out check")
    parser.add_argument("--tp", action="append", type=positive_int, default=None, metavar="N",
                        help="fit only the rows of this tensor-parallel degree (repeatable; "
                             "default all)")
    parser.add_argument("--all-reduce", default=None, metavar="FILE",
                        help="a measured all-reduce table of this card (Vidur's all_reduce.csv), "
                             "fitted into the same JSON")
    parser.add_argument("--out", default=None, type=output_file, metavar="FILE",
                        help="the fit's JSON (default build/gpu/<gpu>.json)")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.commands.gpu_check import format_comparison, load_tables
    from ndpdimm.sw.result_files import write_json
    from ndpdimm.sw.scenarios.gpu import GpuModel
    from ndpdimm.sw.scenarios.measured.check import compare
    from ndpdimm.sw.scenarios.measured.collectives import fit_all_reduce
    from ndpdimm.sw.scenarios.measured.fit import fit_tables
    from ndpdimm.sw.scenarios.measured.gpus import load_gpu
    from ndpdimm.sw.scenarios.measured.tables import select
    gpu = load_gpu(args.gpu)
    loaded = load_tables(args)
    known = {o.op for ts, _ in loaded for t in ts for o in t.ops}
    unknown = sorted(set(args.exclude_op) - known)
    if unknown:
        raise ValueError(f"--exclude-op {', '.join(unknown)}: not an op of the tables "
                         f"({', '.join(sorted(known))})")
    part = [(select(ts, exclude_ops=args.exclude_op, tp=args.tp), d) for ts, d in loaded]
    fitted = fit_tables(gpu.name, part)
    if args.all_reduce:
        fitted = dataclasses.replace(fitted, all_reduce=fit_all_reduce(args.all_reduce).as_dict())
    tables = [t for ts, _ in loaded for t in ts]
    dims = next((d for _, d in loaded if d is not None), None)
    result = compare(tables, dims, fitted, GpuModel.roofline(gpu))
    print(f"{gpu.name}: fitted to {fitted.source} (tile {fitted.tile} tokens)")
    if fitted.all_reduce:
        print(f"all-reduce: {args.all_reduce}, {', '.join(map(str, fitted.all_reduce['workers']))} "
              f"GPUs in one node")
    print(format_comparison(gpu.name, result))
    out = args.out or f"build/gpu/{Path(args.gpu).stem}.json"
    doc = {"gpu": gpu.name, "source": fitted.source, "model": None if dims is None else dims.name,
           "excluded_ops": args.exclude_op, "tp": args.tp, "all_reduce": args.all_reduce,
           "sustained": sustained(fitted, gpu),
           "fit": fitted.as_dict(),
           "error_on_its_tables": {"fitted": result["fitted"], "roofline": result["roofline"]}}
    print(f"wrote {write_json(doc, out)}")
    return 0


def sustained(fitted, gpu) -> dict:
    """What a roofline of this card takes from the fit: the sustained (largest) achieved
    bandwidth and FLOP/s of its linear ops as fractions of the datasheet's, and its fastest op
    (the launch-and-tail floor) in microseconds; the GPU file's efficiencies cite these."""
    return {"memory_efficiency": round(max(fitted.bw) / (gpu.memory_bandwidth_gbs * 1e9), 3),
            "compute_efficiency": round(max(fitted.fl) / (gpu.fp16_tflops * 1e12), 3),
            "kernel_overhead_us": round(fitted.t_min * 1e6, 2)}
