"""``ndpdimm demo``: the Hermes scenario end to end (``sw/scenarios/hermes/demo.py``), or with
``--real-layer`` a real MLP layer of all-MiniLM-L6-v2 on the GEMV datapath RTL
(``sw/layer/engine_demo.py``)."""

import argparse

from ndpdimm.cosim.arguments import finite_float, non_negative_int, output_file, output_folder, positive_int

__all__ = ["HELP", "add_arguments", "run"]

HELP = ("the Hermes scenario end to end: a reduced model's decode with its NDP kernels on the "
        "Verilated core, then LLaMA2-70B on the calibrated model against the baselines "
        "(--real-layer: a real MLP layer of all-MiniLM-L6-v2 on the GEMV datapath RTL)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--real-layer", action="store_true",
                        help="run the real-layer demo instead (the options below apply to it)")
    from ndpdimm.sw.scenarios.catalog import available_names
    parser.add_argument("--model", default="llama2-70b",
                        help="full-size model of the Hermes demo: a built-in model or a TOML file "
                             f"(default llama2-70b); built in: {', '.join(available_names('models'))}")
    parser.add_argument("--out-dir", default="build/demo", type=output_folder, help="Hermes demo output folder")
    parser.add_argument("--rtl-samples", type=non_negative_int, default=6, metavar="N",
                        help="Hermes demo step 3: replay N of a 16-unit run's NDP kernels on the "
                             "RTL (default 6; 0 skips the step)")
    parser.add_argument("--units", type=positive_int, default=16,
                        help="GEMV units of the simulated engine (default 16)")
    parser.add_argument("--batch", type=positive_int, default=2,
                        help="tokens per GEMV batch (default 2)")
    parser.add_argument("--layer", type=int, default=3, help="transformer layer 0..5 (default 3)")
    parser.add_argument("--sentence", default=None, help="input sentence")
    parser.add_argument("--threshold", type=finite_float, default=0.02,
                        help="a neuron is active if |GELU output| exceeds this for any token "
                             "(default 0.02)")
    parser.add_argument("--out", default="build/demo/real_layer.json", type=output_file, help="JSON output file")
    parser.add_argument("--engine-only", action="store_true",
                        help="run the GEMV engine alone (weights fed by the bench) instead of the "
                             "datapath that streams them from the DRAM model")


def run(args: argparse.Namespace) -> int:
    if not args.real_layer:
        if args.threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {args.threshold}")
        from ndpdimm.sw.scenarios.hermes.demo import run_hermes_demo
        return run_hermes_demo(out_dir=args.out_dir, model=args.model, rtl_samples=args.rtl_samples)
    from ndpdimm.sw.layer.engine_demo import DEFAULT_SENTENCE, run_demo
    run_demo(units=args.units, batch=args.batch, layer=args.layer,
             sentence=args.sentence or DEFAULT_SENTENCE, threshold=args.threshold, out=args.out,
             from_dram=not args.engine_only)
    return 0
