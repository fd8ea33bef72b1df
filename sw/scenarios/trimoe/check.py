"""TriMoE with the NDP experts executed: a reduced MoE whose DIMM-side experts run on a backend.

The full-size scenario (``sw/scenarios/trimoe/scenario.py``) takes the NDP side's *time* from
the driver; this check runs the *data*. A reduced MoE (:data:`REDUCED`: 2 MoE
layers of 8 SwiGLU experts, hidden 64, expert width 48, top-2, one shared
expert; deterministic random FP16 weights and router from a seed) processes
``steps`` batches of ``tokens`` hidden states:

1. the router (``x W_r^T``, float32) picks each token's top-2 experts and
   their gate weights (softmax over the two logits);
2. the layer's experts become scheduler tasks with their costs measured on
   the chosen backend for these shapes (``measure_domain_costs``: the NDP
   expert chain through the driver, with the contention of background host
   reads), on one GPU, one AMX CPU and ``dimms`` NDP-DIMMs, expert ``e``
   localized on DIMM ``e mod dimms``; the scheduler (greedy + refinement)
   places them;
3. every expert placed on a DIMM runs there (:func:`~ndpdimm.sw.kernels.expert.ndp_expert`:
   up, gate, SiLU x up, down on the NDP core) and its output is compared
   **bit for bit** with the golden model's (:func:`golden_expert`) and with
   float64 torch within :func:`error_bound`; the GPU's and the CPU's
   experts (and the shared expert, on the GPU) are computed in float32 torch,
   the stand-in for those devices;
4. the layer's output ``sum_e gate_e x expert_e(x) + shared(x)`` (float32) is
   compared with the same layer computed entirely in float64 torch: relative
   L2 error at most :data:`LAYER_TOLERANCE` (the FP16 rounding of the
   activations entering the DIMM's down GEMV, ``u = 2**-11``, a few times);
   it feeds the next layer as FP16.

The NDP core is :data:`CHECK_CORE` (8 units, batch 4: an expert with more
than 4 tokens takes several weight passes). One RTL ``Dimm`` serves every
logical DIMM in turn (as ``sw/scenarios/hermes/decode.py``
does: each RTL DIMM is a full Verilated core); the NDP cycles are recorded per
logical DIMM. ``ok`` is true when every NDP expert was bit-exact and within
its bound, every layer within tolerance, and at least one expert per step ran
on the DIMMs (otherwise nothing was checked).
"""

import dataclasses
import math
from pathlib import Path

import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.expert import (
    error_bound,
    free_expert,
    golden_expert,
    ndp_expert,
    store_expert,
    torch_expert,
)
from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.scenarios.trimoe.catalog import MoeShape, load_trimoe_hardware
from ndpdimm.sw.scenarios.trimoe.costs import measure_domain_costs
from ndpdimm.sw.scenarios.trimoe.scheduler import Device, ExpertTask, schedule

__all__ = ["REDUCED", "CHECK_CORE", "run_trimoe_check", "trimoe_check_command", "LAYER_TOLERANCE"]

REDUCED = MoeShape(name="reduced-moe", source="synthetic (sw/scenarios/trimoe/check.py)", nominal_params_b=0.0,
                   hidden=64, layers=2, dense_layers=0, dense_ffn=0, experts=8, top_k=2,
                   shared_experts=1, expert_ffn=48, heads=4, kv_heads=4,
                   attention_params_per_layer=0, vocab=1, tied_embeddings=True)
#: the check's NDP core: small enough for the RTL (the configuration the driver tests build)
CHECK_CORE = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
#: relative L2 error of a layer's output against float64 torch (see the module docstring)
LAYER_TOLERANCE = 4 * 2.0 ** -11


def _weights(model: MoeShape, seed: int):
    gen = torch.Generator().manual_seed(seed)
    H, F = model.hidden, model.expert_ffn

    def expert():
        return ((torch.randn(F, H, generator=gen) / math.sqrt(H)).half(),
                (torch.randn(F, H, generator=gen) / math.sqrt(H)).half(),
                (torch.randn(H, F, generator=gen) / math.sqrt(F)).half())

    return [{"router": torch.randn(model.experts, H, generator=gen),
             "experts": [expert() for _ in range(model.experts)],
             "shared": [expert() for _ in range(model.shared_experts)]}
            for _ in range(model.moe_layers)]


def _route(x, router, top_k):
    logits = x.float() @ router.T
    vals, idx = logits.topk(top_k, dim=-1)
    return idx, torch.softmax(vals, dim=-1)


def run_trimoe_check(backend="rtl", steps: int = 2, tokens: int = 24, dimms: int = 4, seed: int = 0,
                     config: CoreConfig | None = None, log=None) -> dict:
    """Run the reduced MoE (see the module docstring); returns the JSON-able record."""
    for name, v in (("steps", steps), ("tokens", tokens), ("dimms", dimms)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    model = REDUCED
    hw = load_trimoe_hardware()
    hw = dataclasses.replace(hw, ndp=dataclasses.replace(hw.ndp, dimms=dimms))
    config = config or CHECK_CORE
    layers = _weights(model, seed)
    gen = torch.Generator().manual_seed(seed + 1)
    records, ok_all = [], True
    with Dimm(backend, config) as dimm:
        costs = measure_domain_costs(model, hw, dimm, seed=seed, spacings=(64,), link=False)
        stored = [[store_expert(dimm, *w) for w in layer["experts"]] for layer in layers]
        try:
            devices = [Device("gpu", "gpu"), Device("cpu", "cpu")] + \
                [Device(f"ndp{j}", "ndp") for j in range(dimms)]
            for s in range(steps):
                x = torch.randn(tokens, model.hidden, generator=gen).half()
                ndp_checked = 0
                for li, layer in enumerate(layers):
                    idx, gate = _route(x, layer["router"], model.top_k)
                    counts = torch.bincount(idx.flatten(), minlength=model.experts)
                    tasks = [ExpertTask(-1 - k, tokens, {"gpu": costs.gpu(tokens, True)})
                             for k in range(model.shared_experts)]
                    for e in torch.nonzero(counts).flatten().tolist():
                        t = int(counts[e])
                        tasks.append(ExpertTask(e, t, {"gpu": costs.gpu(t, e < 2),
                                                       "cpu": costs.cpu(t, False),
                                                       f"ndp{e % dimms}": costs.ndp(t)}))
                    sched = schedule(tasks, devices)
                    out = torch.zeros(tokens, model.hidden, dtype=torch.float64)
                    ref = torch.zeros_like(out)
                    for w in layer["shared"]:
                        out += torch_expert(*w, x).float().double()
                        ref += torch_expert(*w, x)
                    experts, ndp_cycles = [], {}
                    for e, dev in sorted(sched.assignment.items()):
                        if e < 0:
                            continue
                        rows, slot = torch.nonzero(idx == e, as_tuple=True)
                        xe, g = x[rows], gate[rows, slot].double().unsqueeze(1)
                        w = layer["experts"][e]
                        exact = torch_expert(*w, xe)
                        rec = {"expert": e, "tokens": len(rows), "device": dev}
                        if dev.startswith("ndp"):
                            y, cycles = ndp_expert(stored[li][e], xe)
                            gold = golden_expert(*w, xe)
                            rec.update(cycles=cycles, bit_exact=bool(torch.equal(
                                y.view(torch.int32), gold.view(torch.int32))),
                                within_bound=bool(((y.double() - exact).abs() <=
                                                   error_bound(*w, xe)).all()))
                            ndp_cycles[dev] = ndp_cycles.get(dev, 0) + cycles
                            ndp_checked += 1
                            ok_all &= rec["bit_exact"] and rec["within_bound"]
                            y = y.double()
                        else:
                            y = exact.float().double()      # the GPU / CPU stand-in (float32)
                        out.index_add_(0, rows, g * y)
                        ref.index_add_(0, rows, g * exact)
                        experts.append(rec)
                    err = float((out - ref).norm() / ref.norm())
                    ok_layer = err <= LAYER_TOLERANCE
                    ok_all &= ok_layer
                    records.append({"step": s, "layer": li, "experts": experts,
                                    "scheduled_makespan_us": sched.makespan * 1e6,
                                    "ndp_cycles_per_dimm": ndp_cycles,
                                    "relative_error": err, "within_tolerance": ok_layer})
                    if log:
                        log(f"step {s} layer {li}: "
                            + ", ".join(f"e{r['expert']}({r['tokens']})->{r['device']}" for r in experts)
                            + f"; rel. error {err:.2e}")
                    x = out.half()
                ok_all &= ndp_checked > 0
        finally:
            for layer in stored:
                for e in layer:
                    free_expert(e)
    ndp = [r for rec in records for r in rec["experts"] if "bit_exact" in r]
    return {"backend": backend, "core": dataclasses.asdict(config), "model": dataclasses.asdict(model),
            "steps": steps, "tokens": tokens, "dimms": dimms, "seed": seed,
            "layer_tolerance": LAYER_TOLERANCE, "records": records,
            "ndp_experts_checked": len(ndp),
            "ndp_bit_exact": sum(r["bit_exact"] for r in ndp),
            "max_relative_error": max(r["relative_error"] for r in records),
            "costs": costs.as_dict(), "ok": bool(ok_all)}


def trimoe_check_command(backend="rtl", out_dir="build/trimoe", seed=0, log=print) -> dict:
    """Run the check, print a summary, write ``trimoe_check.json``."""
    log(f"TriMoE check: reduced MoE, NDP experts on the {backend} backend, checked against the "
        f"golden model (bit for bit) and float64 torch")
    r = run_trimoe_check(backend=backend, seed=seed, log=log)
    log(f"{r['ndp_experts_checked']} NDP expert executions, {r['ndp_bit_exact']} bit-exact; largest "
        f"layer error {r['max_relative_error']:.2e} (tolerance {r['layer_tolerance']:.2e}): "
        f"{'PASS' if r['ok'] else 'FAIL'}")
    path = write_json(r, Path(out_dir) / "trimoe_check.json")
    log(f"wrote {path}")
    return r
