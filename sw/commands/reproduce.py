"""``ndpdimm reproduce PAPER``: each paper's evaluation set-up, our figures beside the published
ones with ratios, explanations and sensitivity (``sw/reproduce/``); PAPER is a key of
:data:`~ndpdimm.sw.reproduce.PAPERS` or ``all``."""

import argparse

from ndpdimm.cosim.arguments import output_folder

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("run a paper's evaluation set-up and print our figures beside the published ones (ratio, "
        "explanation, sensitivity); JSON, Markdown and plots")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ndpdimm.sw.reproduce import PAPERS
    parser.add_argument("paper", choices=(*PAPERS, "all"),
                        help="hermes, trimoe, rapid, or all three in turn")
    parser.add_argument("--out", "--out-dir", dest="out", default="build/reproduce", type=output_folder, metavar="DIR",
                        help="folder of <paper>.json, .md and the plots (default build/reproduce)")
    parser.add_argument("--reduced", action="store_true",
                        help="a small model and short run (for tests): still a complete table and plots")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.reproduce import PAPERS
    from ndpdimm.sw.reproduce import run as reproduce
    papers = tuple(PAPERS) if args.paper == "all" else (args.paper,)
    reproduce(papers, args.out, reduced=args.reduced)
    return 0
