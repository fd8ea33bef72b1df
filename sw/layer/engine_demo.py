"""``ndpdimm demo``: a real transformer MLP layer computed by the NDP GEMV datapath RTL.

What it does (all GEMVs run cycle by cycle on the Verilated RTL and are
checked bit for bit against the golden model). By default the weights sit in
the DRAM model in the weight streamer's layout and reach the GEMV engine
through the real DRAM controller (every DRAM command timing-checked), index
lists go to the SRAM by DMA (``hw/gemv/datapath.py``); ``--engine-only`` runs
the engine alone with the bench feeding its weight stream.

1. up projection, dense:      ``z = W_up h``           (1536 x 384, FP16)
2. host: ``a = GELU(z + b)``; the neurons with ``|a| > threshold`` for any
   token of the batch are the *active* set (an oracle stand-in for a sparsity
   predictor). MiniLM uses GELU, so it is only weakly sparse: at the default
   threshold 0.02 nearly all neurons stay active (98.5 % for a batch of 4,
   with 0.76 % relative L2 error of the layer output); activation sparsity
   pays off on ReLU models (the Hermes scenario).
3. up projection, row gather: only the active rows of ``W_up``; must equal the
   dense result on those rows
4. down projection, column gather over the active neurons:
   ``y = sum_{j active} a_j W_down[:, j]``

It prints per-operation cycle counts, MACs/cycle against the engine's peak,
weight bytes per cycle against a DIMM's 102.4 B/cycle internal DRAM bandwidth,
and the numerical error against float64 math, and writes them as JSON.
"""

import math
import time

import torch

from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.rtl.gemv import run_jobs
from ndpdimm.hw.formats import Dtype, peak_macs_per_cycle
from ndpdimm.hw.memory.dram import DIMM_DRAM_BYTES_PER_CYCLE
from ndpdimm.sw.layer.model import DEFAULT_SENTENCE, load_mlp_layer
from ndpdimm.sw.result_files import write_json

__all__ = ["run_demo"]


def run_demo(units=16, batch=2, layer=3, sentence=DEFAULT_SENTENCE, first_token=1,
             threshold=0.02, out="build/demo/real_layer.json", from_dram=True, log=print):
    # one engine (max batch 16, the SPEC default) serves every batch size: one cached build
    shape = EngineShape(n_units=units)
    if not 1 <= batch <= shape.max_batch:
        raise ValueError(f"batch must be in 1..{shape.max_batch}, got {batch}")
    if not threshold >= 0:
        raise ValueError(f"threshold must be >= 0, got {threshold}")
    t_start = time.monotonic()
    log(f"[demo] loading {layer=} of all-MiniLM-L6-v2 and capturing its MLP input ...")
    mlp = load_mlp_layer(layer, sentence)
    n_tokens = mlp.h.shape[0]
    if first_token + batch > n_tokens:
        raise ValueError(f"the sentence has {n_tokens} tokens; tokens {first_token}.."
                         f"{first_token + batch - 1} do not exist")
    tokens = mlp.tokens[first_token:first_token + batch]
    fp16 = torch.float16
    W_up = mlp.W_up.to(fp16)
    W_down_t = mlp.W_down_t.to(fp16)
    X = mlp.h[first_token:first_token + batch].to(fp16)

    # 1 + 2 + 3 + 4 need the activation between the projections: host side, in golden math
    z = golden.gemv_dot(W_up, X, Dtype.FP16)
    a = torch.nn.functional.gelu(z + mlp.b_up)
    active = torch.nonzero((a.abs() > threshold).any(0)).flatten()
    H = a.to(fp16)
    jobs = [
        GemvJob("dense", Dtype.FP16, W_up, X, None, shape),
        GemvJob("row_gather", Dtype.FP16, W_up, X, active, shape),
        GemvJob("col_gather", Dtype.FP16, W_down_t, H, active, shape),
    ]
    labels = ["up proj, dense", "up proj, row gather (active)", "down proj, column gather (active)"]
    est = sum(j.estimated_cycles for j in jobs)
    log(f"[demo] {mlp.name}: tokens {tokens}, batch {batch}; {len(active)} of "
        f"{W_up.shape[0]} neurons active ({100 * len(active) / W_up.shape[0]:.1f} %)")
    where = "weights streamed from DRAM" if from_dram else "engine only"
    log(f"[demo] running 3 GEMVs on the RTL ({units} units, {where}, ~{est:,} engine cycles; the "
        f"first run builds the Verilator model, later runs reuse it) ...")
    outputs, stats = run_jobs(jobs, labels, from_dram=from_dram)

    # the RTL outputs were checked bit for bit inside the bench; check the story adds up
    y_up = outputs[0].values(jobs[0])
    y_rows = outputs[1].values(jobs[1])
    y_down = outputs[2].values(jobs[2])
    assert torch.equal(golden.f32_bits(y_rows), golden.f32_bits(y_up[:, active])), \
        "row gather differs from the dense rows"
    up64 = golden.reference_f64_dense(W_up, X)
    down_dense64 = torch.matmul(a.to(torch.float64), mlp.W_down_t.to(torch.float64))
    up_err = (y_up.double() - up64).abs().max().item()
    sparse_rel = ((y_down.double() - down_dense64).norm() / down_dense64.norm()).item()

    rows = []
    peak = peak_macs_per_cycle(shape.n_units, Dtype.FP16, shape.radix_bits)
    for job, res in zip(jobs, outputs):
        bpc = job.weight_bytes / res.cycles
        rows.append({
            "operation": res.label, "op": job.op, "dtype": job.dtype.name.lower(),
            "weights_shape": list(job.W.shape), "batch": job.batch,
            "index_list": None if job.idx is None else len(job.idx),
            "outputs": job.n_out, "cycles": res.cycles, "macs": job.macs,
            "macs_per_cycle": job.macs / res.cycles, "peak_macs_per_cycle": peak,
            "weight_bytes": job.weight_bytes, "weight_bytes_per_cycle": bpc,
            "share_of_dimm_dram_bandwidth": bpc / DIMM_DRAM_BYTES_PER_CYCLE,
            "dram_bound_cycles": math.ceil(job.weight_bytes / DIMM_DRAM_BYTES_PER_CYCLE),
            "sim_wall_seconds": res.wall_seconds,
        })
        if res.dram:
            rows[-1].update({k: res.dram[k] for k in ("dram_bytes", "stream_cycles", "row_hits",
                                                       "row_misses", "refreshes")})
    result = {
        "what": f"{mlp.name} on the " + ("GEMV datapath RTL, weights from the DRAM model"
                                         if from_dram else "GEMV engine RTL")
                + " (Verilator via cocotb)",
        "source_of_numbers": "cycles: RTL simulation" + (" with every DRAM command checked "
                                                          "against the DDR4 timing model"
                                                          if from_dram else "")
                             + "; errors: golden model vs float64",
        "engine": {"n_units": units, "max_batch": shape.max_batch, "radix_bits": shape.radix_bits,
                   "clock_ghz": 1.0},
        "tokens": tokens, "active_threshold": threshold,
        "active_neurons": len(active), "neurons": W_up.shape[0],
        "bit_exact_vs_golden": True,
        "up_proj_max_abs_error_vs_float64": up_err,
        "mlp_output_sparse_vs_dense_relative_l2_error": sparse_rel,
        "operations": rows,
        "simulated_cycles": stats["cycles_simulated"],
        "cocotb_cycles_per_second": stats["cycles_simulated"] / max(stats["wall_seconds"], 1e-9),
        "wall_seconds_total": time.monotonic() - t_start,
    }
    log("")
    log(f"{'operation':36} {'cycles':>9} {'MACs':>10} {'MAC/cyc':>8} {'peak':>6} "
        f"{'W B/cyc':>8} {'of DRAM':>8}")
    for r in rows:
        log(f"{r['operation']:36} {r['cycles']:>9,} {r['macs']:>10,} {r['macs_per_cycle']:>8.1f} "
            f"{r['peak_macs_per_cycle']:>6.1f} {r['weight_bytes_per_cycle']:>8.1f} "
            f"{100 * r['share_of_dimm_dram_bandwidth']:>7.1f}%")
    log("")
    log("every result beat matched the golden model bit for bit (FP32 accumulation, sequential order)")
    log(f"up projection max |error| vs float64: {up_err:.3g}")
    log(f"MLP output with {len(active)}/{W_up.shape[0]} active neurons (|a| > {threshold}) vs "
        f"dense float64: relative L2 error {100 * sparse_rel:.2f} %")
    log(f"simulated {stats['cycles_simulated']:,} cycles at "
        f"{result['cocotb_cycles_per_second']:,.0f} cycles/s (cocotb + Verilator)")
    if out:
        path = write_json(result, out)
        log(f"wrote {path}")
    return result
