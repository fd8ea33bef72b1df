"""``ndpdimm gpu-check``: a GPU's models (the fitted one and the roofline) held against measured
operator tables, op by op (``sw/scenarios/measured/check.py``), as a table and JSON.

``--profile PATH`` (repeatable): a table or a folder of tables in either public format;
``--gpu NAME``: a GPU of ``sw/configs/gpus/`` (or a TOML file), whose roofline is compared and
whose committed fit (``sw/configs/gpus/fits/<name>.json``) unless ``--fit FILE`` names another;
``--model``: the model the tables were profiled on (default: the built-in one the folder's name
starts with; Vidur's tables carry their own dimensions); ``--out FILE``: the JSON.
"""

import argparse
import re
import sys
from pathlib import Path

from ndpdimm.cosim.arguments import output_file

__all__ = ["HELP", "add_arguments", "run", "profiled_model", "load_tables"]

HELP = ("compare a GPU's fitted model and its roofline with measured operator tables, op by op "
        "(median and max error per op kind and token range); JSON with --out")


def add_profile_options(parser: argparse.ArgumentParser) -> None:
    """``--profile`` (repeatable), ``--gpu`` and ``--model``: shared with ``ndpdimm gpu-fit``."""
    parser.add_argument("--profile", action="append", required=True, metavar="PATH",
                        help="a measured table (.csv) or a folder of them (LLMServingSim or Vidur "
                             "format); repeat for several")
    parser.add_argument("--gpu", required=True, metavar="NAME",
                        help="a GPU of the catalogue (rtx4090, h100-sxm, a100-80gb) or a TOML file")
    parser.add_argument("--model", default=None,
                        help="the model the tables were profiled on: a built-in name of any "
                             "scenario or a config.json (default: from the folder's name)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_profile_options(parser)
    parser.add_argument("--fit", default=None, metavar="FILE",
                        help="the fitted model to check (default: the GPU's committed fit)")
    parser.add_argument("--out", default=None, type=output_file, metavar="FILE",
                        help="also write the comparison as JSON")


def _key(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def profiled_model(name, table_path):
    """The :class:`~ndpdimm.sw.scenarios.measured.ops.ModelDims` of the model a table was
    profiled on: ``name`` (a built-in model of any scenario's catalogue or a ``config.json``),
    or the built-in one with the longest name the table's folder starts with (punctuation
    aside: ``llama-3.1-8b-bf16-tp1`` is ``llama3.1-8b``)."""
    from ndpdimm.sw.scenarios.catalog import available_names, is_hf_config, load_model
    from ndpdimm.sw.scenarios.measured.ops import ModelDims
    from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model
    kinds = ("models", "serving_models", "moe_models")
    if name is None:
        path = Path(table_path)
        folder = _key(path.name if path.is_dir() else path.parent.name)
        found = [(n, k) for k in kinds for n in available_names(k) if folder.startswith(_key(n))]
        if not found:
            raise ValueError(f"{table_path}: no built-in model matches the folder's name; give "
                             "--model (a built-in name or a config.json)")
        name, kind = max(found, key=lambda f: len(_key(f[0])))
    else:
        kind = next((k for k in kinds if name in available_names(k)), None)
        if kind is None and not is_hf_config(name) and not str(name).endswith(".toml"):
            names = sorted(n for k in kinds for n in available_names(k))
            raise ValueError(f"unknown model {name!r}: built in are {', '.join(names)} (or a "
                             "config.json or .toml file)")
    if kind == "moe_models":
        m = load_moe_model(name)
        return ModelDims(m.name, m.hidden, m.heads, m.kv_heads, m.dense_ffn or m.expert_ffn,
                         m.vocab, True, m.experts, m.expert_ffn)
    m = load_model(name, folder=kind or "models")
    return ModelDims(m.name, m.hidden, m.heads, m.kv_heads, m.ffn, m.vocab, m.mlp == "gated")


def load_tables(args) -> list:
    """``[(tables of one --profile, their model's dimensions or None), ...]``: every table read
    and every model found before any fitting."""
    from ndpdimm.sw.scenarios.measured.tables import read_profile
    out = []
    for path in args.profile:
        tables = read_profile(path)
        needs = any((t.ops or t.attention) and t.dims is None for t in tables)
        out.append((tables, profiled_model(args.model, path) if needs else None))
    return out


def _line(name, s) -> str:
    if not s or not s["points"]:
        return f"  {name:16s} {'-':>7s}"
    return (f"  {name:16s} {s['points']:7d} {s['median_abs_pct']:9.1f} {s['max_abs_pct']:8.1f} "
            f"{s['median_pct']:+9.1f}")


def format_comparison(gpu: str, result: dict) -> str:
    lines = [f"{gpu}: models against the measured tables (error = model / measured - 1)"]
    for model in ("fitted", "roofline"):
        s = result[model]
        if s is None:
            lines.append(f"{model}: no fit")
            continue
        lines += [f"{model}:", f"  {'':16s} {'ops':>7s} {'median|%|':>9s} {'max|%|':>8s} "
                               f"{'median %':>9s}", _line("all", s)]
        for kind, v in s["by_kind"].items():
            lines += [_line(kind, v)] + [_line(f"  tokens {k}", t)
                                         for k, t in v["by_tokens"].items()]
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from ndpdimm.sw.result_files import write_json
    from ndpdimm.sw.scenarios.gpu import GpuModel
    from ndpdimm.sw.scenarios.measured.check import compare
    from ndpdimm.sw.scenarios.measured.gpus import fit_path, load_fit, load_gpu
    gpu = load_gpu(args.gpu)
    fit_file = args.fit or (fit_path(args.gpu) if fit_path(args.gpu).exists() else None)
    fitted = load_fit(fit_file) if fit_file else None
    loaded = load_tables(args)
    tables = [t for ts, _ in loaded for t in ts]
    dims = next((d for _, d in loaded if d is not None), None)
    if len({d for _, d in loaded if d is not None}) > 1:
        raise ValueError("--profile tables of different models: check them one --profile at a time")
    result = compare(tables, dims, fitted, GpuModel.roofline(gpu))
    print(format_comparison(gpu.name, result))
    if fitted is None:
        print(f"note: no fit for {args.gpu} (ndpdimm gpu-fit makes one): the roofline only",
              file=sys.stderr)
    if args.out:
        doc = {"gpu": gpu.name, "profiles": [str(p) for p in args.profile],
               "model": None if dims is None else dims.name,
               "fit": None if fit_file is None else str(fit_file),
               "fitted": result["fitted"], "roofline": result["roofline"],
               "rows": result["rows"]}
        print(f"wrote {write_json(doc, args.out)}")
    return 0
