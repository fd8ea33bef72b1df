"""``ndpdimm export``: the ``NdpCore`` top's Verilog with its register map as a C header, SystemRDL
and a FuseSoC core file (``hw/export.py``); prints the paths written."""

import argparse

from ndpdimm.cosim.arguments import positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("the NdpCore top's Verilog with its register map as a C header (ndp_regs.h), SystemRDL "
        "(ndp_regs.rdl) and a FuseSoC core file (ndpdimm.core), for SoC integration")


def _parts(text):
    """A comma-separated list of ``ndpdimm export`` parts."""
    from ndpdimm.hw.export import PARTS
    parts = [t.strip() for t in text.split(",")]
    bad = [t for t in parts if t not in PARTS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(map(repr, bad))}; parts: "
                                         f"{', '.join(PARTS)}")
    return tuple(dict.fromkeys(parts))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out-dir", default="build/export", help="output folder (default build/export)")
    parser.add_argument("--units", type=positive_int, default=256, help="GEMV units (default 256)")
    parser.add_argument("--max-batch", type=positive_int, default=16, help="max batch (default 16)")
    parser.add_argument("--act-lanes", type=positive_int, default=16, help="activation lanes (default 16)")
    parser.add_argument("--link", action="store_true", help="build DIMM-Link in")
    parser.add_argument("--dram-config", default=None, metavar="TOML",
                        help="DRAM organisation and timing (default DDR4-3200)")
    parser.add_argument("--what", type=_parts, default=None, metavar="PART,...",
                        help="which files: verilog, header, rdl, core (default all; the Verilog of "
                             "the 256-unit core takes minutes)")
    parser.add_argument("--force", action="store_true", help="overwrite files that exist")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.hw.export import PARTS, export
    params = {"n_units": args.units, "max_batch": args.max_batch, "act_lanes": args.act_lanes,
              "link": args.link}
    for path in export(args.out_dir, what=args.what or PARTS, overwrite=args.force,
                       config_path=args.dram_config, **params):
        print(path)
    return 0
