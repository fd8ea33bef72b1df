"""``ndpdimm gpu-profile``: time one layer's operators of a model on a torch device
(``sw/scenarios/measured/profile_ops.py``, a plain torch script that also runs alone on a machine
with only PyTorch) and write the table in LLMServingSim's format with a ``meta.yaml``, for
``ndpdimm gpu-fit`` and ``gpu-check`` to read back.

``--model``: a built-in model of any scenario or a ``config.json``; ``--device`` (``cuda``,
``cuda:1``, ``cpu``: the CPU device is ``ndpdimm cpu-profile``'s); ``--dtype``; ``--tokens``;
``--iterations``; ``--out DIR``. The command adds the provenance fields (``git_commit``,
``git_dirty``, ``command``, ``date``: ``cosim/provenance.py``) to ``meta.yaml``.
"""

import argparse

from ndpdimm.cosim.arguments import output_folder, positive_int

__all__ = ["HELP", "add_arguments", "run", "add_profile_run_options"]

HELP = ("time one layer's operators of a model on a torch device (CUDA events) and write them as "
        "a profile table (LLMServingSim format + meta.yaml) for gpu-fit and gpu-check")


def add_profile_run_options(parser: argparse.ArgumentParser, device: str, tokens: str,
                            dtype: str) -> None:
    parser.add_argument("--model", default="llama2-7b",
                        help="a built-in model of any scenario or a config.json (default llama2-7b)")
    parser.add_argument("--device", default=device, help=f"torch device (default {device})")
    parser.add_argument("--dtype", choices=("bf16", "fp16"), default=dtype,
                        help=f"element type (default {dtype})")
    parser.add_argument("--tokens", default=tokens, help=f"comma-separated token counts (default {tokens})")
    parser.add_argument("--iterations", type=positive_int, default=10,
                        help="timed calls per op and count, the median written (default 10)")
    parser.add_argument("--out", required=True, type=output_folder, metavar="DIR",
                        help="folder for dense.csv and meta.yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_run_options(parser, "cuda", "1,2,4,8,16,32,64,128,256,512,1024,2048", "bf16")


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.commands.gpu_check import profiled_model
    from ndpdimm.sw.scenarios.measured.profile_ops import profile
    try:
        tokens = tuple(int(t) for t in args.tokens.split(","))
    except ValueError:
        raise ValueError(f"--tokens must be comma-separated integers, got {args.tokens!r}") from None
    d = profiled_model(args.model, args.out)
    dims = {"hidden": d.hidden, "heads": d.heads, "kv_heads": d.kv_heads, "ffn": d.ffn,
            "vocab": d.vocab, "experts": d.experts, "expert_ffn": d.expert_ffn,
            "source": f"{args.model} ({d.name})"}
    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: torch sees no CUDA device here (--device cpu "
                         "profiles the CPU)")
    profile(dims, args.device, args.dtype, tokens, iterations=args.iterations, out=args.out)
    import json
    from pathlib import Path

    from ndpdimm.cosim.provenance import command_line, stamp
    with (Path(args.out) / "meta.yaml").open("a") as f:     # which code measured it, and how
        for key, value in stamp(command_line()).items():
            f.write(f"{key}: {json.dumps(value)}\n")
    print(f"wrote {args.out}/dense.csv and meta.yaml (read them back with ndpdimm gpu-fit "
          f"--profile {args.out} --model {args.model})")
    return 0
