"""``ndpdimm bench --suite NAME``: the benchmark suites, each writing ``<out-dir>/<NAME>.json``.

:data:`SUITES` maps a suite's name, which is also the name of the JSON file it writes
(``bench/results/<name>.json``), to its runner, ``runner(args, out)`` with ``out`` that file;
``fuzz`` is the one exception: it writes the ``fuzz`` section of the ``cosim`` suite's file
(:data:`RESULTS`). ``--suite all`` runs them in the order of :data:`ALL` (``gpu_model`` only
where the shared GPU tables are found: it says so and goes on without them). The suites:
``gemv_engine`` (``bench/gemv.py``), ``dram_gemv`` (``bench/dram_gemv.py``), ``dram_trace``
(``bench/dram_trace.py``), ``cosim`` and ``fuzz`` (``bench/speed.py``), ``dimm_link``
(``bench/link.py``), ``gpu_model`` (``bench/gpu_model.py``), ``hermes``, ``trimoe``, ``rapid``
(``sw/scenarios/<name>/bench.py``), ``sweep`` (``sw/sweep/bench.py``) and ``sampling``
(``sw/scenarios/sampling_bench.py``: sampled RTL co-simulation, its goal runs, coverage and
warm-up bias).
"""

import argparse
import sys

from ndpdimm.cosim.arguments import output_folder, positive_int

__all__ = ["HELP", "SUITES", "ALL", "RESULTS", "results_file", "add_arguments", "run"]

HELP = ("performance figures from the RTL as JSON: GEMV engine MACs/cycle (gemv_engine) and GEMV "
        "streaming from DRAM vs the DIMM's peak bandwidth (dram_gemv)")


def _gemv_engine(args, out):
    from ndpdimm.bench.gemv import run_bench
    kw = {k: v for k, v in (("units", args.units), ("k", args.k)) if v is not None}
    run_bench(out=out, **kw)


def _dram_gemv(args, out):
    from ndpdimm.bench.dram_gemv import run_dram_bench
    kw = {k: v for k, v in (("units", args.units), ("rows", args.rows), ("cols", args.cols),
                            ("ring_beats", args.ring_beats), ("jobs", args.jobs),
                            ("points_file", args.points_file)) if v is not None}
    run_dram_bench(out=out, **kw)


def _dram_trace(args, out):
    from ndpdimm.bench.dram_trace import load_trace, run_trace_bench
    if args.trace:
        load_trace(args.trace)          # a bad file fails before any simulation
    run_trace_bench(bursts=args.bursts, trace_file=args.trace, policy=args.policy, out=out)


def _cosim(args, out):
    from ndpdimm.bench.speed import rerun_model, run_bench
    if args.model_only:
        rerun_model(out)
    else:
        run_bench(units=(args.units,) if args.units else (256, 16),
                  build_options=args.build_options, out=out)


def _fuzz(args, out):
    from ndpdimm.bench.speed import run_fuzz_bench
    run_fuzz_bench(args.fuzz_count, out=out)


def _dimm_link(args, out):
    from ndpdimm.bench.link import run_link_bench
    run_link_bench(out=out, jobs=args.jobs or 2)


def _hermes(args, out):
    from ndpdimm.sw.scenarios.hermes.bench import run_hermes_bench
    run_hermes_bench(out=out)


def _trimoe(args, out):
    from ndpdimm.sw.scenarios.trimoe.bench import run_trimoe_bench
    run_trimoe_bench(out=out)


def _rapid(args, out):
    from ndpdimm.sw.scenarios.rapid.bench import run_rapid_bench
    run_rapid_bench(out=out)


def _sampling(args, out):
    from ndpdimm.sw.scenarios.sampling_bench import CASES, SECTIONS, run_sampling_bench
    sections = tuple(args.section.split(",")) if args.section else SECTIONS
    cases = tuple(args.case.split(",")) if args.case else tuple(CASES)
    for what, names, known in (("section", sections, SECTIONS), ("case", cases, tuple(CASES))):
        bad = [x for x in names if x not in known]
        if bad:
            raise ValueError(f"unknown sampling {what} {', '.join(bad)} (known: {', '.join(known)})")
    run_sampling_bench(out=out, sections=sections, cases=cases)


def _gpu_model(args, out):
    from ndpdimm.bench.gpu_model import profiles_folder, run_gpu_model_bench
    if args.suite == "all":                    # the other suites need no outside data
        try:
            profiles_folder(args.gpu_profiles)
        except ValueError as e:
            print(f"ndpdimm bench: note: gpu_model not run: {e}", file=sys.stderr)
            return
    run_gpu_model_bench(out=out, profiles=args.gpu_profiles)


def _sweep(args, out):
    from ndpdimm.sw.sweep.bench import run_sweep_bench
    run_sweep_bench(out=out)


#: suite name (= the name of its JSON file) -> runner(args, out), in the order --suite lists them
SUITES = {"gemv_engine": _gemv_engine, "dram_gemv": _dram_gemv, "dram_trace": _dram_trace,
          "cosim": _cosim, "fuzz": _fuzz, "dimm_link": _dimm_link, "hermes": _hermes,
          "trimoe": _trimoe, "rapid": _rapid, "sweep": _sweep, "gpu_model": _gpu_model,
          "sampling": _sampling}
#: the order ``--suite all`` runs them: the long RTL streaming suites last
ALL = ("gemv_engine", "cosim", "fuzz", "dimm_link", "gpu_model", "hermes", "trimoe", "rapid",
       "sweep", "dram_gemv", "dram_trace", "sampling")
#: the suites whose results go into another suite's file (``fuzz``: a section of the cosim suite's)
RESULTS = {"fuzz": "cosim"}


def results_file(suite: str, out_dir: str) -> str:
    """The JSON file ``suite`` writes in ``out_dir``: ``<out_dir>/<suite>.json`` (see :data:`RESULTS`)."""
    return f"{out_dir}/{RESULTS.get(suite, suite)}.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--suite", choices=(*SUITES, "all"), default="all",
                        help="which benchmark (default all); cosim: simulation speed of the backends "
                             "(bare Verilated loop, harness, cocotb, calibrated model) and model error "
                             "(bench/speed.py); dram_trace: 64 B address streams (weight stream, random, "
                             "stream + host reads, row gathers, a trace file) replayed through the "
                             "memory-system RTL (bench/dram_trace.py); fuzz: the descriptor fuzzer on "
                             "the harness, descriptors/s, into cosim.json's fuzz section; dimm_link: "
                             "link goodput, latency and goodput under bit errors (bench/link.py); "
                             "hermes: tokens/s of every system for every model "
                             "(sw/scenarios/hermes/bench.py); trimoe: MoE layer latency of every "
                             "system per model and batch, scheduler time (sw/scenarios/trimoe/bench.py); "
                             "rapid: simulator speed on an hour at peak load and the serving results "
                             "table per workload and pattern (sw/scenarios/rapid/bench.py); sweep: Dask "
                             "sweep scaling from 1 to 2 workers and per-task overhead (sw/sweep/bench.py); "
                             "gpu_model: the fitted GPU model and the roofline against measured "
                             "operator tables, fitted and held out (bench/gpu_model.py); sampling: "
                             "sampled RTL co-simulation's goal runs, sub-sample coverage and "
                             "warm-up bias on the 256-unit RTL (sw/scenarios/sampling_bench.py)")
    parser.add_argument("--section", default=None,
                        help="sampling: comma-separated sections to (re)run: runs, coverage, "
                             "warmup (default all; the file keeps the others)")
    parser.add_argument("--case", default=None,
                        help="sampling: comma-separated runs of the runs section (hermes_b1, "
                             "hermes_b16, trimoe_768, hermes_b1_n24, hermes_b1_workers1, "
                             "hermes_b1_neyman; default all; the file keeps the others)")
    parser.add_argument("--build-options", action="store_true",
                        help="cosim: also compare C++/Verilator build options on the reduced configuration")
    parser.add_argument("--model-only", action="store_true",
                        help="cosim: rerun only the model sections against the harness runs already "
                             "in cosim.json (after a recalibration; the RTL figures are kept)")
    parser.add_argument("--units", type=positive_int, default=None,
                        help="GEMV units (default: the SPEC's 256)")
    parser.add_argument("--k", type=positive_int, default=None, help="gemv_engine: columns of the GEMVs")
    parser.add_argument("--rows", type=positive_int, default=None, help="dram_gemv: matrix rows (4096)")
    parser.add_argument("--cols", type=positive_int, default=None, help="dram_gemv: matrix columns (4096)")
    parser.add_argument("--ring-beats", type=positive_int, default=None,
                        help="dram_gemv: weight streamer ring depth in beats (8)")
    parser.add_argument("--jobs", type=positive_int, default=None,
                        help="dram_gemv, dimm_link: simulator processes run in parallel (default: "
                             "CPU count, max 4; dimm_link 2)")
    parser.add_argument("--points-file", default=None,
                        help="dram_gemv: JSON list of points to run instead of the default set "
                             "(see bench/dram_gemv.py; e.g. bench/dram_gemv_points.json)")
    parser.add_argument("--bursts", type=positive_int, default=40000,
                        help="dram_trace: NDP bursts per generated stream (default 40000; random: half)")
    parser.add_argument("--trace", default=None,
                        help="dram_trace: also replay this trace file (lines cycle,address,R|W,host|ndp)")
    parser.add_argument("--policy", choices=("fair", "host_first", "ndp_first"), default="fair",
                        help="dram_trace: host/NDP arbitration policy (default fair)")
    parser.add_argument("--fuzz-count", type=positive_int, default=100_000,
                        help="fuzz: descriptors fuzzed (default 100000)")
    parser.add_argument("--gpu-profiles", default=None, metavar="DIR",
                        help="gpu_model: the shared measured GPU tables (default "
                             "$NDPDIMM_GPU_PROFILES, else ../shared/gpu-profiles)")
    parser.add_argument("--out-dir", default="bench/results", type=output_folder, help="directory of the JSON files")


def run(args: argparse.Namespace) -> int:
    for suite in ALL if args.suite == "all" else (args.suite,):
        SUITES[suite](args, results_file(suite, args.out_dir))
    return 0
