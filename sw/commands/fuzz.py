"""``ndpdimm fuzz``: fuzz descriptors on the RTL harness (``cosim/fuzz/harness.py``); every
completion code, result and memory image checked against the core's reference. Exit status 0
when every check passed, 1 with the failing check (and its seed)."""

import argparse
import sys

from ndpdimm.cosim.arguments import output_file, positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("fuzz descriptors on the RTL harness: every completion code, result and memory image "
        "checked against the core's reference")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--count", type=positive_int, default=10_000, help="descriptors (default 10000)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    parser.add_argument("--units", type=positive_int, default=8, help="GEMV units (default 8)")
    parser.add_argument("--max-batch", type=positive_int, default=4, help="largest batch (default 4)")
    parser.add_argument("--sram-size", type=positive_int, default=16384, help="SRAM bytes (default 16384)")
    parser.add_argument("--sram-banks", type=positive_int, default=4, help="SRAM banks (default 4)")
    parser.add_argument("--json", default=None, metavar="FILE", type=output_file, help="also write the counts as JSON")


def run(args: argparse.Namespace) -> int:

    from tqdm import tqdm

    from ndpdimm.cosim.backend import CoreConfig
    from ndpdimm.cosim.fuzz.harness import run_fuzz
    from ndpdimm.cosim.rtl.harness import RtlBackend
    config = CoreConfig(n_units=args.units, max_batch=args.max_batch, sram_size=args.sram_size,
                        sram_banks=args.sram_banks)
    with RtlBackend(config) as backend:
        bar = tqdm(total=args.count, unit="desc", desc=f"fuzz seed {args.seed}")
        try:
            result = run_fuzz(backend, config, args.count, args.seed,
                              progress=lambda done, total: bar.update(done - bar.n))
        except AssertionError as e:
            bar.close()
            print(f"ndpdimm fuzz: FAILED: {e}", file=sys.stderr)
            return 1
        bar.close()
    print(f"{result['descriptors']} fuzzed descriptors (seed {args.seed}): every check passed; "
          f"{result['per_second']:.0f} descriptors/s, {result['ndp_cycles']} NDP cycles")
    print("codes: " + ", ".join(f"{k} {v}" for k, v in sorted(result["codes"].items())))
    if args.json:
        from ndpdimm.sw.result_files import write_json
        write_json({"config": config.as_dict(), **result}, args.json)
        print(f"wrote {args.json}")
    return 0
