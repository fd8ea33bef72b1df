"""``ndpdimm trimoe``: the TriMoE scenario (``sw/scenarios/trimoe/report.py``), or with ``--check``
the reduced MoE with every NDP expert run on a backend and checked
(``sw/scenarios/trimoe/check.py``; exit status 1 if a check fails). Its run parameters are
options made from the fields of :class:`~ndpdimm.sw.scenarios.trimoe.config.TriMoeConfig`
(:data:`FIELDS`)."""

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

HELP = ("TriMoE scenario: MoE layers over a GPU, an AMX CPU and NDP-DIMMs (hot/warm/cold "
        "experts), against GPU only, GPU+CPU and GPU+NDP")
#: the fields of TriMoeConfig that are options, in the order the help lists them (the RTL
#: samples' options after the core's)
_HEAD = ("model", "hardware", "batch", "steps", "profile_steps", "sample_layers", "units",
         "act_lanes", "backend")
_TAIL = ("trace", "skew", "hot_mass", "temporal_correlation", "alpha", "theta_hot", "link_ber",
         "systems", "seed")
FIELDS = (*_HEAD, *_TAIL)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.sw.scenarios.trimoe.config import TriMoeConfig
    add_config_options(parser, TriMoeConfig, _HEAD)
    add_rtl_samples(parser)
    add_config_options(parser, TriMoeConfig, _TAIL)
    parser.add_argument("--check", action="store_true",
                        help="run the reduced MoE with every NDP expert executed on --backend and "
                             "checked against the golden model and torch")
    parser.add_argument("--out-dir", default="build/trimoe", type=output_folder,
                        help="JSON and plots (default build/trimoe)")
    add_timeline(parser, "every system's schedule per step and MoE layer (GPU, CPU, each DIMM, "
                         "PCIe, DIMM-Link)")


def run(args: argparse.Namespace) -> int:
    if args.check:
        if args.timeline:
            raise ValueError("--timeline records the scenario run, not --check")
        from ndpdimm.sw.scenarios.trimoe.check import trimoe_check_command
        result = trimoe_check_command(backend=args.backend, out_dir=args.out_dir, seed=args.seed)
        return 0 if result["ok"] else 1
    from ndpdimm.sw.scenarios.trimoe.config import TriMoeConfig
    from ndpdimm.sw.scenarios.trimoe.report import trimoe_command
    cfg = config_from_args(TriMoeConfig, args, FIELDS)
    announce_rtl_build("trimoe", cfg.core(), cfg.backend == "rtl" or args.rtl_samples > 0)
    trimoe_command(cfg, out_dir=args.out_dir, timeline_file=args.timeline, **rtl_sample_kwargs(args))
    return 0
