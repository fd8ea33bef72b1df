"""``ndpdimm rapid``: the RAPID scenario (``sw/scenarios/rapid/report.py``). Its run parameters are
options made from the fields of :class:`~ndpdimm.sw.scenarios.rapid.config.RapidConfig`
(:data:`FIELDS`: their choices are the scenario's own ``PATTERNS``, ``MODES`` and ``KV_PATHS``);
``--save-trace``, the output folder, the timeline and the RTL samples are the command's own."""

import argparse

from ndpdimm.cosim.arguments import output_folder
from ndpdimm.sw.commands.options import (
    add_config_options,
    add_rtl_samples,
    add_timeline,
    announce_rtl_build,
    config_from_args,
    rtl_sample_kwargs,
)

__all__ = ["HELP", "FIELDS", "add_arguments", "run"]

HELP = ("RAPID scenario: power-aware disaggregated prefill/decode LLM serving on an 8-GPU node "
        "under a power cap, with an NDP-DIMM decode tier, against static configurations")
#: the fields of RapidConfig that are options, in the order the help lists them (with
#: --save-trace and the RTL samples' options between them)
_HEAD = ("workload", "pattern", "mode", "time_shift", "duration_s", "rate_scale", "seed", "trace")
_MIDDLE = ("kv_path", "ndp", "backend")
_TAIL = ("units", "ndp_dimms", "ttft_slo_s", "tpot_slo_s", "model", "node")
FIELDS = (*_HEAD, *_MIDDLE, *_TAIL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.sw.scenarios.rapid.config import RapidConfig
    add_config_options(parser, RapidConfig, _HEAD)
    parser.add_argument("--save-trace", default=None, metavar="FILE",
                        help="write the trace the run replays as CSV, then run")
    add_config_options(parser, RapidConfig, _MIDDLE)
    add_rtl_samples(parser)
    add_config_options(parser, RapidConfig, _TAIL)
    parser.add_argument("--out-dir", default="build/rapid", type=output_folder, help="JSON and plots (default build/rapid)")
    add_timeline(parser, "one system's run (per GPU: batches, KV transfers, role switches; "
                         "counters: power caps, queue depths)")
    parser.add_argument("--timeline-system", default=None, metavar="NAME",
                        help="the system --timeline records (default: the mode's controlled "
                             "system, static-4p4d for --mode static)")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.scenarios.rapid.config import RapidConfig
    from ndpdimm.sw.scenarios.rapid.report import rapid_command
    if args.trace is not None and args.rate_scale is not None:
        raise ValueError("--rate-scale applies to generated traces, not to --trace "
                         f"{args.trace!r} (it is replayed as recorded)")
    cfg = config_from_args(RapidConfig, args, FIELDS)
    announce_rtl_build("rapid", cfg.core(), cfg.ndp and (cfg.backend == "rtl" or args.rtl_samples > 0))
    rapid_command(cfg, out_dir=args.out_dir, save_trace=args.save_trace,
                  timeline_file=args.timeline, timeline_system=args.timeline_system,
                  **rtl_sample_kwargs(args))
    return 0
