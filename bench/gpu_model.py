"""``ndpdimm bench --suite gpu_model``: how well the fitted GPU model and the roofline reproduce
measured operator tables, on the tables they were fitted to and on what they were not.

Reads the public tables of ``--gpu-profiles DIR`` (default ``$NDPDIMM_GPU_PROFILES``, else
``../shared/gpu-profiles`` from the current folder; never copied into the project) and writes
``bench/results/gpu_model.json``, one section per GPU, each check a pair of ``fitted`` and
``roofline`` summaries (median and max absolute error in %, per op kind):

* ``rtx4090``: fitted to the Llama-3.1-8B table and checked on it; each linear op held out in
  turn (fitted to the three others, checked on it);
* ``h100_sxm``: fitted to the Mixtral-8x7B table (LLMServingSim, vLLM) and checked on it and on
  the Llama-2-70B table (Vidur, another profiler and model), and the other way round;
* ``a100_80gb``: fitted to the Llama-2-70B table at tensor-parallel degrees 1, 2, 4 and checked
  at 8 (one model only: no other table of an A100); the all-reduce table of one DGX A100
  (``collectives.py``) against its own fit, and 4 GPUs predicted from the fit of 2 and 8 alone
  (``all_reduce``: error per worker count, no roofline).

The roofline in each check is the GPU's catalogue entry (``sw/configs/gpus/``) without its fit:
datasheet peaks times the efficiencies measured as the fit's sustained rates (the best the card
reached: a ceiling, so the roofline runs fast where the fit does not). Takes about a minute.
"""

import dataclasses
import os
import time
from pathlib import Path

from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.provenance import dumps_finite
from ndpdimm.sw.commands.gpu_check import profiled_model
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.measured.check import compare, summary
from ndpdimm.sw.scenarios.measured.collectives import fit_all_reduce, read_all_reduce
from ndpdimm.sw.scenarios.measured.fit import fit_tables
from ndpdimm.sw.scenarios.measured.gpus import load_gpu
from ndpdimm.sw.scenarios.measured.tables import read_profile, select

__all__ = ["run_gpu_model_bench", "profiles_folder", "TABLES", "ALL_REDUCE"]

#: the tables of the shared folder the suite reads: key -> (path under it, GPU of the catalogue)
TABLES = {"rtx4090_llama31_8b": ("llmservingsim/rtx4090/llama-3.1-8b-bf16-tp1", "rtx4090"),
          "h100_mixtral": ("llmservingsim/h100/mixtral-8x7b-tp1", "h100-sxm"),
          "h100_llama2_70b": ("vidur/h100/llama-2-70b", "h100-sxm"),
          "a100_llama2_70b": ("vidur/a100/llama-2-70b", "a100-80gb")}


#: the all-reduce table of one DGX A100, under the same folder
ALL_REDUCE = "vidur/a100/network/all_reduce_dgx.csv"


def profiles_folder(path=None) -> Path:
    """The folder of the shared GPU profiles: ``path``, ``$NDPDIMM_GPU_PROFILES`` or
    ``../shared/gpu-profiles``; ``ValueError`` if it is not there."""
    folder = Path(path or os.environ.get("NDPDIMM_GPU_PROFILES") or "../shared/gpu-profiles")
    if not (folder / TABLES["rtx4090_llama31_8b"][0]).is_dir():
        raise ValueError(f"{folder}: not the shared GPU profiles folder (give --gpu-profiles DIR "
                         "or set $NDPDIMM_GPU_PROFILES)")
    return folder


def _load(folder: Path, key: str):
    path = folder / TABLES[key][0]
    tables = read_profile(path)
    dims = None if all(t.dims or not (t.ops or t.attention) for t in tables) \
        else profiled_model(None, path)
    return tables, dims


def _fit(name, tables, dims):
    return fit_tables(name, [(tables, dims)])


def _brief(section) -> dict:
    if section is None:
        return None
    return {"median_abs_pct": section["median_abs_pct"], "max_abs_pct": section["max_abs_pct"],
            "median_pct": section["median_pct"],
            **{kind: {k: v[k] for k in ("points", "median_abs_pct", "max_abs_pct", "median_pct")}
               | {k: v[k] for k in ("by_tokens", "by_op") if k in v}
               for kind, v in section["by_kind"].items()}}


def _check(fitted, tables, dims, gpu) -> dict:
    result = compare(tables, dims, fitted, GpuModel.roofline(load_gpu(gpu)))
    return {"fitted": _brief(result["fitted"]), "roofline": _brief(result["roofline"]),
            "by_op_fitted": result["fitted"]["by_op"]}


def _all_reduce_errors(fit, rows, workers) -> dict:
    return summary([100 * (fit.time(s, workers) / t - 1) for s, t in rows])


def _all_reduce_checks(path) -> dict:
    table, fit = read_all_reduce(path), fit_all_reduce(path)
    keep = [i for i, n in enumerate(fit.workers) if n != 4]
    held = dataclasses.replace(fit, workers=tuple(fit.workers[i] for i in keep),
                               sizes=tuple(fit.sizes[i] for i in keep),
                               seconds=tuple(fit.seconds[i] for i in keep))
    return {"self": {str(n): _all_reduce_errors(fit, rows, n) for n, rows in table.items()},
            "fit_2_8_check_4": _all_reduce_errors(held, table[4], 4)}


def run_gpu_model_bench(out="bench/results/gpu_model.json", profiles=None, log=print) -> dict:
    folder = profiles_folder(profiles)
    t0 = time.perf_counter()
    doc = bench_header("gpu_model", "ndpdimm bench --suite gpu_model")
    doc["profiles"] = {k: f"{v[0]} (../shared/gpu-profiles; {v[1]})" for k, v in TABLES.items()}

    rtx, rtx_dims = _load(folder, "rtx4090_llama31_8b")
    log("[gpu_model] RTX 4090: fit and held-out ops ...")
    fitted = _fit("RTX 4090", rtx, rtx_dims)
    section = {"fit": {"tile": fitted.tile, "t_min_us": fitted.t_min * 1e6,
                       "peak_bandwidth_gbs": max(fitted.bw) / 1e9,
                       "peak_tflops": max(fitted.fl) / 1e12},
               "self": _check(fitted, rtx, rtx_dims, "rtx4090"), "held_out_ops": {}}
    for op in ("qkv_proj", "o_proj", "gate_up_proj", "down_proj"):
        part = _fit("RTX 4090", select(rtx, exclude_ops=(op,)), rtx_dims)
        held = _check(part, select(rtx, only_ops=(op,)), rtx_dims, "rtx4090")
        section["held_out_ops"][op] = held["fitted"]["linear"]
    doc["rtx4090"] = section

    log("[gpu_model] H100: Mixtral (LLMServingSim) and Llama-2-70B (Vidur), each on the other ...")
    mix, mix_dims = _load(folder, "h100_mixtral")
    l70, _ = _load(folder, "h100_llama2_70b")
    on_mix, on_l70 = _fit("H100", mix, mix_dims), _fit("H100", l70, None)
    doc["h100_sxm"] = {"fit_mixtral_check_mixtral": _check(on_mix, mix, mix_dims, "h100-sxm"),
                       "fit_mixtral_check_llama2_70b": _check(on_mix, l70, None, "h100-sxm"),
                       "fit_llama2_70b_check_llama2_70b": _check(on_l70, l70, None, "h100-sxm"),
                       "fit_llama2_70b_check_mixtral": _check(on_l70, mix, mix_dims, "h100-sxm")}

    log("[gpu_model] A100: tensor-parallel degrees 1, 2, 4 fitted, 8 held out ...")
    a100, _ = _load(folder, "a100_llama2_70b")
    part = _fit("A100", select(a100, tp=(1, 2, 4)), None)
    doc["a100_80gb"] = {"fit_tp124_check_tp8": _check(part, select(a100, tp=(8,)), None, "a100-80gb"),
                        "fit_all_check_all": _check(_fit("A100", a100, None), a100, None,
                                                    "a100-80gb"),
                        "all_reduce": _all_reduce_checks(folder / ALL_REDUCE)}
    doc["wall_seconds"] = round(time.perf_counter() - t0, 1)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(dumps_finite(doc, out))
    log(f"wrote {out}")
    return doc
