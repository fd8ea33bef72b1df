"""``ndpdimm run-layer``: one real all-MiniLM-L6-v2 MLP layer or attention step through the host
driver on the ``rtl`` or ``model`` backend (``sw/layer/run.py``), every step checked bit for bit
against the golden model; exit status 1 if a step is not bit-exact."""

import argparse

from ndpdimm.cosim.arguments import output_file, positive_int
from ndpdimm.sw.commands.options import add_timeline, announce_rtl_build

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("run one real all-MiniLM-L6-v2 MLP layer or attention step through the host driver on a "
        "chosen backend; prints the result check and cycles")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", choices=("rtl", "model"), default="model",
                        help="rtl: the Verilated core in the C++ harness; model: reference model + "
                             "calibrated performance model (default model)")
    parser.add_argument("--layer", choices=("mlp", "attention"), default="mlp",
                        help="what to run (default mlp)")
    parser.add_argument("--units", type=positive_int, default=16, help="GEMV units of the core (default 16)")
    parser.add_argument("--batch", type=positive_int, default=2,
                        help="tokens (mlp) or queries (attention) per batch (default 2)")
    parser.add_argument("--model-layer", type=int, default=3, help="transformer layer 0..5 (default 3)")
    parser.add_argument("--head", type=int, default=0, help="attention head 0..11 (default 0)")
    parser.add_argument("--sentence", default=None, help="input sentence")
    parser.add_argument("--json", default=None, metavar="FILE", type=output_file, help="also write the results as JSON")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_timeline(parser, "every descriptor's start and end cycle per engine")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.cosim.backend import CoreConfig
    from ndpdimm.sw.layer.model import DEFAULT_SENTENCE
    from ndpdimm.sw.layer.run import run_layer
    announce_rtl_build("run-layer", CoreConfig(n_units=args.units), args.backend == "rtl")
    result = run_layer(backend=args.backend, layer=args.layer, units=args.units, batch=args.batch,
                       model_layer=args.model_layer, head=args.head,
                       sentence=args.sentence or DEFAULT_SENTENCE, json_out=args.json,
                       progress=not args.no_progress, timeline=args.timeline)
    return 0 if result["bit_exact_vs_golden"] else 1
