"""``ndpdimm hermes``: the Hermes scenario (``sw/scenarios/hermes/report.py``), or a sweep of one
of its parameters. Its run parameters are options made from the fields of
:class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig` (:data:`FIELDS`); the trace to replay,
the sweep, the output folder, the timeline and the RTL samples are the command's own."""

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

HELP = ("Hermes scenario: dense LLM decode on one GPU + NDP-DIMMs with activation sparsity, "
        "against its baselines")
#: the fields of HermesConfig that are options, in the order the help lists them (three runs,
#: with the RTL samples' options and --trace between them)
_HEAD = ("model", "hardware", "gpu", "batch", "dimms", "units", "act_lanes", "backend")
_TAIL = ("prompt", "tokens", "sample_layers", "active_fraction", "skew", "token_similarity",
         "layer_correlation", "predictor", "recall_floor", "coefficient", "hot_share",
         "cold_dtype")
FIELDS = (*_HEAD, *_TAIL, "seed")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    add_config_options(parser, HermesConfig, _HEAD)
    add_rtl_samples(parser)
    add_config_options(parser, HermesConfig, _TAIL)
    parser.add_argument("--trace", default=None, help="replay a recorded activation trace (.npz)")
    add_config_options(parser, HermesConfig, ("seed",))
    parser.add_argument("--sweep", choices=("batch", "dimms", "units", "hot_share"), default=None,
                        help="run once per value of this parameter")
    parser.add_argument("--values", default=None,
                        help="comma-separated sweep values (default: batch 1..16, dimms 4,8,16, "
                             "units 32..512, hot_share 0..0.3)")
    parser.add_argument("--out-dir", default="build/hermes", type=output_folder,
                        help="JSON and plots (default build/hermes)")
    add_timeline(parser, "the Hermes system's decode steps (GPU, PCIe, each DIMM, DIMM-Link)")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.scenarios.hermes.config import HermesConfig
    from ndpdimm.sw.scenarios.hermes.report import hermes_command
    values = None
    if args.values is not None:
        conv = float if args.sweep == "hot_share" else int
        try:
            values = tuple(conv(v) for v in args.values.split(","))
        except ValueError:
            raise ValueError(f"--values must be comma-separated numbers, got {args.values!r}") from None
        if args.sweep is None:
            raise ValueError("--values needs --sweep")
    cfg = config_from_args(HermesConfig, args, FIELDS)
    announce_rtl_build("hermes", cfg.core(), cfg.backend == "rtl" or args.rtl_samples > 0)
    hermes_command(cfg, out_dir=args.out_dir, sweep=args.sweep, sweep_values=values,
                   trace_file=args.trace, timeline_file=args.timeline, **rtl_sample_kwargs(args))
    return 0
