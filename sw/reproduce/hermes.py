"""Reproduction of Hermes (HPCA 2025, arXiv 2502.16963): its published figures beside ours.

Runs the Hermes scenario (``sw/scenarios/hermes/``) on the set-up of
``sw/configs/reproduce/hermes.toml`` (every value with its source): LLaMA2-70B (ReLU variant,
synthetic activation traces with the published sparsity of ReLU LLaMA2 models) on one RTX 4090
with 8 NDP-DIMMs, batch 1 to 16, input = output length, the model backend for the NDP kernels.

**Iso-accuracy** (issue 29, part 3). Every system that skips neurons (Hermes, Deja Vu, Hermes-host)
computes only the neurons the predictor selects; a skipped activated neuron is computation the
paper's model does. The headline is therefore reported at a predictor *operating point* whose
recall on the activated cold neurons (those on the DIMMs) is at least ``recall_floor`` (0.9):
the predictor's scores are kept (:meth:`Workload.at_threshold`), its accuracy at every threshold
of the grid is measured on the Hermes placement (``run(recall_thresholds=...)``), and
:func:`choose_operating_point` takes the highest threshold (the most sparsity) that meets the
floor, separately for each batch. Where no threshold of the grid meets it, the run says so in
its notes and the headline figure has no value (no number is printed for it).

**Figures** (``PUBLISHED``): LLaMA2-70B tokens/s at batch 1; the speed-up over Deja Vu averaged
over batch 1-16; the speed-up over Hermes-host (a secondary source); the share of activations
carried by the 20 % most active neurons (the abstract's "20 % of weights, 80 % of compute").
The paper's baselines map onto the scenario's systems as :data:`BASELINES` says.

**Sensitivity**: one parameter at a time across its sourced range (``core.one_at_a_time``);
the traces, predictor fit and kernel costs are made once per (batch, activation sparsity) and
(batch, units, GPU bandwidth and PCIe efficiency) and reused, so a bar costs one decode run per batch.

May import: as ``ndpdimm.sw`` (the scenario, the catalogue, the reproduce core).
"""

from __future__ import annotations

import dataclasses
import math
import time
import warnings
from collections.abc import Callable

import numpy as np

from ndpdimm.sw.reproduce.core import Figure, Reproduction, ReproductionError, one_at_a_time
from ndpdimm.sw.reproduce.params import load_params, values
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.costs import measure_costs
from ndpdimm.sw.scenarios.hermes.scenario import HermesResult, operating_points, run
from ndpdimm.sw.scenarios.hermes.workload import make_workload

__all__ = ["reproduce", "choose_operating_point", "top_share", "PUBLISHED", "BASELINES"]

_ABSTRACT = "Hermes abstract (arXiv 2502.16963; ar5iv.labs.arxiv.org/html/2502.16963)"

#: the published figures: key -> (label, unit, value, where)
PUBLISHED = {
    "llama2_70b_b1_tokens_per_s": (
        "LLaMA2-70B decode on one RTX 4090 + NDP-DIMMs, batch 1 (tokens/s)", "tokens/s", 13.75,
        f"{_ABSTRACT}: 'deployment of LLaMA2-70B on consumer-grade hardware at 13.75 tokens/s' "
        "(batch not stated in the abstract; batch 1 assumed)"),
    "speedup_vs_dejavu_avg": (
        "Hermes / Deja Vu tokens/s, mean over batch 1-16 (LLaMA2-70B)", "x", 75.24,
        f"{_ABSTRACT}: 'an average 75.24x speedup over the state-of-the-art offloading-based "
        "inference system' (Deja Vu and batch 1-16 per issue 29; averaged over the paper's models, "
        "ours over LLaMA2-70B only)"),
    "speedup_vs_host_max": (
        "Hermes / Hermes-host tokens/s, best batch (LLaMA2-70B)", "x", 7.17,
        "secondary source: grokipedia.com/page/250216963 (a generated summary of the paper): "
        "'speedups, including up to 7.17x over host configurations'; not found in the stored "
        "paper text"),
    "hot20_activation_share": (
        "Share of activations on the 20 % most active neurons (batch 1 trace)", "fraction", 0.80,
        f"{_ABSTRACT}: 'Hot neurons, which consist of only approximately 20% of all weight "
        "parameters, account for 80% of the total computational load'"),
}

#: the paper's baselines -> the scenario's systems (docs/hermes.md, sw/scenarios/hermes/simulate.py)
BASELINES = {
    "Accelerate": "accelerate",
    "FlexGen": "flexgen",
    "Deja Vu": "dejavu",
    "Hermes-host": "powerinfer",
    "Hermes-base": "ndp_dense",
    "Hermes": "hermes",
}
_BASELINE_NOTES = {
    "Accelerate": "accelerate: Hugging Face Accelerate big model inference, device_map=\"auto\" "
                  "(huggingface.co/docs/accelerate/concept_guides/big_model_inference): whole "
                  "decoder layers on the GPU in order while they fit ('first, we use the maximum "
                  "space available on the GPU(s)'; no_split_module_classes keeps a block on one "
                  "device), the rest in CPU RAM; 'for the weights offloaded on the CPU, they are "
                  "put on a GPU just before the forward pass and cleaned up just after', so each "
                  "offloaded layer's transfer precedes its compute (no overlap); dense. No "
                  "published figure of it was found, so it is a row of our systems only",
    "FlexGen": "flexgen: a uniform share of every layer resident, the rest streamed over PCIe "
               "each step, overlapped with compute",
    "Deja Vu": "dejavu: the most frequent neurons resident, the predicted-active others streamed "
               "over PCIe; attention streamed densely (same predictor operating point as Hermes)",
    "Hermes-host": "powerinfer: Hermes' ILP placement with the host CPU and its DRAM as the cold "
                   "side instead of NDP-DIMMs (same operating point)",
    "Hermes-base": "ndp_dense: GPU + NDP-DIMMs without activation sparsity (every neuron computed); "
                   "the paper's exact definition is not in the stored pages (assumption)",
    "Hermes": "hermes: ILP placement + predictor + online adjustment + DIMM remapping",
}

_B1 = "llama2_70b_b1_tokens_per_s"
_SPEEDUP = "speedup_vs_dejavu_avg"
#: the parameters each headline's tornado moves (full run / reduced run)
_TORNADO = {
    _B1: ["active_fraction", "recall_floor", "gpu_memory_bandwidth_gbs", "pcie_protocol_efficiency",
          "dimms", "units", "prompt_tokens"],
    _SPEEDUP: ["recall_floor", "pcie_protocol_efficiency"],
}
_TORNADO_REDUCED = {_B1: ["recall_floor", "gpu_memory_bandwidth_gbs"], _SPEEDUP: ["recall_floor"]}


def choose_operating_point(points: list[dict], floor: float) -> dict | None:
    """The operating point (``{"threshold", "recall", ...}`` of ``scenario.run``'s
    ``predictor.operating_points``) with the highest threshold - the fewest neurons computed -
    whose cold recall is at least ``floor``; None when no point meets it."""
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0.0 < floor <= 1.0:
        raise ReproductionError(f"recall floor must be a number in (0, 1], got {floor!r}")
    ok = [p for p in points if p.get("recall") is not None and p["recall"] >= floor]
    return max(ok, key=lambda p: p["threshold"]) if ok else None


def top_share(active: np.ndarray, share: float = 0.2) -> float:
    """Mean over layers of the share of activations carried by the ``share`` most active
    neurons of the layer (``active``: [tokens, layers, neurons] bool)."""
    counts = np.sort(active.sum(axis=0), axis=1)[:, ::-1]           # [layers, neurons] desc
    k = max(1, int(round(share * counts.shape[1])))
    total = counts.sum(axis=1)
    return float(np.mean(np.where(total > 0, counts[:, :k].sum(axis=1) / np.maximum(total, 1), 0)))


class _Runner:
    """Workloads and kernel costs made once and reused; one Hermes run per call of :meth:`run`."""

    def __init__(self, v: dict, reduced: bool, say: Callable[[str], None]):
        self.base, self.reduced, self.say = v, reduced, say
        self.model_name = v["reduced_model"] if reduced else v["model"]
        self.model = load_model(self.model_name)
        self._workloads, self._costs = {}, {}
        self.runs = 0
        self.run_seconds = 0.0

    def config(self, v: dict, batch: int) -> HermesConfig:
        r = self.reduced
        tokens = v["reduced_tokens"] if r else v["decode_tokens"]
        return HermesConfig(
            model=self.model_name, hardware=v["hardware"], batch=batch, dimms=int(v["dimms"]),
            units=int(v["units"]), act_lanes=int(v["units"]),
            prompt=tokens if r else int(v["prompt_tokens"]), tokens=tokens,
            profile_tokens=v["reduced_profile_tokens"] if r else v["profile_tokens"],
            sample_layers=2 if r else v["sample_layers"],
            active_fraction=float(v["active_fraction"]), skew=float(v["skew"]),
            token_similarity=float(v["token_similarity"]),
            layer_correlation=float(v["layer_correlation"]))

    def hardware(self, v: dict):
        hw = load_hardware(v["hardware"])
        return dataclasses.replace(
            hw, gpu=dataclasses.replace(hw.gpu, memory_bandwidth_gbs=float(v["gpu_memory_bandwidth_gbs"])),
            pcie=dataclasses.replace(hw.pcie, protocol_efficiency=float(v["pcie_protocol_efficiency"])))

    def workload(self, cfg: HermesConfig):
        key = (cfg.batch, cfg.active_fraction, cfg.skew, cfg.token_similarity,
               cfg.layer_correlation, cfg.tokens, cfg.profile_tokens, cfg.sample_layers)
        if key not in self._workloads:
            t0 = time.perf_counter()
            self._workloads[key] = make_workload(cfg, self.model)
            self.say(f"batch {cfg.batch}: traces ({cfg.active_fraction:.3f} of neurons firing) and "
                     f"predictor fitted in {time.perf_counter() - t0:.1f} s")
        return self._workloads[key]

    def costs(self, cfg: HermesConfig, v: dict):
        key = (cfg.batch, cfg.units, v["gpu_memory_bandwidth_gbs"], v["pcie_protocol_efficiency"])
        if key not in self._costs:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")      # the 256-unit core borrows a calibration
                self._costs[key] = measure_costs(cfg, self.model, self.hardware(v))
        return self._costs[key]

    def run(self, v: dict, batch: int, threshold: float | None) -> HermesResult:
        """One run at ``threshold`` (None: the predictor's configured point)."""
        cfg = self.config(v, batch)
        wl = self.workload(cfg)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = run(cfg, RunContext(log=None), ablations=False, costs=self.costs(cfg, v),
                    workload=wl if threshold is None else wl.at_threshold(threshold))
        self.runs += 1
        self.run_seconds += time.perf_counter() - t0
        return r

    def operating_points(self, v: dict, batch: int, thresholds) -> list:
        """The predictor's accuracy at ``thresholds`` on the placement (no decoding)."""
        cfg = self.config(v, batch)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            acc = operating_points(cfg, thresholds, workload=self.workload(cfg),
                                   costs=self.costs(cfg, v))
        self.run_seconds += time.perf_counter() - t0
        return acc["predictor"]["operating_points"]


def _tokens(r: HermesResult) -> dict:
    return {k: s.tokens_per_s for k, s in r.systems.items()}


def _variant(v: dict) -> tuple:
    """What a run depends on: every parameter but the recall floor (which only picks a point)."""
    return tuple(sorted((k, repr(x)) for k, x in v.items() if k != "recall_floor"))


def _at_floor(runner: _Runner, v: dict, batch: int, grid: list, cache: dict) -> dict:
    """The run of ``batch`` at its operating point for ``v["recall_floor"]``: the grid's
    operating points are measured once per (batch, set-up) (``cache``)
    (the placement only, no decoding), and the run at the chosen point once per set-up.
    ``{"point": None, "best": ...}`` when no point meets the floor."""
    key = (batch, _variant(v))
    if key not in cache:
        cache[key] = (runner.operating_points(v, batch, grid), {})
    pts, done = cache[key]
    op = choose_operating_point(pts, float(v["recall_floor"]))
    if op is None:
        return {"point": None, "best": max(pts, key=lambda p: p["recall"] or 0.0)}
    if op["threshold"] not in done:
        done[op["threshold"]] = runner.run(v, batch, op["threshold"])
    return {"point": op, "result": done[op["threshold"]]}


def reproduce(*, reduced: bool = False, progress: Callable[[str], None] = print,
              overrides: dict | None = None) -> Reproduction:
    """The Hermes reproduction (see the module docstring). ``reduced``: LLaMA2-7B, batch 1 and 2,
    8 tokens, a 3-point operating-point grid and two tornado bars (the tests); ``overrides``:
    parameter values to use instead of the file's (``{name: value}``)."""
    t_start = time.perf_counter()
    params = load_params("hermes")
    v = values(params, overrides)
    grid = [float(t) for t in (v["reduced_thresholds"] if reduced else v["thresholds"])]
    if not grid or any(not 0.0 <= t <= 1.0 for t in grid):
        raise ReproductionError(f"thresholds must be a non-empty list in [0, 1], got {grid!r}")
    batches = [int(b) for b in (v["reduced_batches"] if reduced else v["batches"])]
    floor = float(v["recall_floor"])
    runner = _Runner(v, reduced, progress)
    notes: list[str] = []
    cache: dict = {}

    # ---- batch 1: the tokens/s-against-recall curve over the whole grid --------------------
    progress(f"{runner.model_name}, batch 1: every operating point of the grid ({len(grid)})")
    _at_floor(runner, v, 1, grid, cache)
    pts1, b1 = cache[(1, _variant(v))]
    for th in grid:
        if th not in b1:
            b1[th] = runner.run(v, 1, th)
    curve_pts = sorted(((p["recall"], _tokens(b1[p["threshold"]]), p)
                        for p in pts1 if p["recall"] is not None), key=lambda x: x[0])

    # ---- every batch at its operating point -----------------------------------------------
    per_batch = {}
    for b in batches:
        progress(f"batch {b}: operating point for cold recall >= {floor}")
        per_batch[b] = _at_floor(runner, v, b, grid, cache)
    unmet = [b for b in batches if per_batch[b]["point"] is None]
    for b in unmet:
        best = per_batch[b]["best"]
        notes.append(f"ISO-ACCURACY FLOOR NOT MET at batch {b}: no operating point of the grid "
                     f"reaches cold recall {floor} (best {best['recall']:.3f} at threshold "
                     f"{best['threshold']:g}); no headline is reported for it")

    def speedups(pb, system):
        return {b: pb[b]["result"].systems["hermes"].tokens_per_s
                / pb[b]["result"].systems[system].tokens_per_s for b in batches}

    # ---- figures ---------------------------------------------------------------------------
    b1_tokens = None if 1 in unmet else per_batch[1]["result"].systems["hermes"].tokens_per_s
    sp_dejavu = None if unmet else speedups(per_batch, "dejavu")
    sp_host = None if unmet else speedups(per_batch, "powerinfer")
    hot20 = top_share(runner.workload(runner.config(v, 1)).run.active)
    figures = _figures(v, runner, per_batch, b1_tokens, sp_dejavu, sp_host, hot20, floor, unmet,
                       reduced)

    # ---- sensitivity -----------------------------------------------------------------------
    sensitivity = {}
    tornado = _TORNADO_REDUCED if reduced else _TORNADO

    def at_floor(o: dict, bs) -> dict:
        w = values(params, o)
        pb = {b: _at_floor(runner, w, b, grid, cache) for b in bs}
        if any(pb[b]["point"] is None for b in bs):
            raise ReproductionError(f"sensitivity point {o} does not meet the recall floor")
        return pb

    def headline_b1(o: dict) -> float:
        return at_floor(o, [1])[1]["result"].systems["hermes"].tokens_per_s

    def headline_speedup(o: dict) -> float:
        return float(np.mean(list(speedups(at_floor(o, batches), "dejavu").values())))

    for key, fn in ((_B1, headline_b1), (_SPEEDUP, headline_speedup)):
        if figures[key].ours is None:
            notes.append(f"no sensitivity for {key}: the headline has no value (recall floor)")
            continue
        try:
            sensitivity[key] = one_at_a_time(params, tornado[key], fn,
                                             progress=lambda m, k=key: progress(f"{k}: {m}"))
        except ReproductionError as e:
            notes.append(f"sensitivity of {key} incomplete: {e}")

    # ---- curves, notes, set-up ---------------------------------------------------------------
    op1 = per_batch[1]["point"]
    curves = {
        "tokens_per_s_vs_recall": {
            "title": f"{runner.model_name}, batch 1: tokens/s against the predictor's cold recall",
            "x_label": "recall on activated cold neurons", "y_label": "tokens/s",
            "series": {name: [[r, t[sys]] for r, t, _ in curve_pts]
                       for name, sys in (("Hermes", "hermes"), ("Deja Vu", "dejavu"),
                                         ("Hermes-host", "powerinfer"),
                                         ("Hermes-base (no sparsity)", "ndp_dense"))},
            "marks": {f"recall floor {floor}": {"x": floor},
                      **({"operating point": {"x": op1["recall"],
                                              "y": per_batch[1]["result"].systems["hermes"].tokens_per_s}}
                         if op1 else {}),
                      **({"published 13.75 tokens/s": {"y": 13.75}} if not reduced else {})},
        },
        "tokens_per_s_vs_batch": {
            "title": f"{runner.model_name}: tokens/s at each batch's operating point",
            "x_label": "batch", "y_label": "tokens/s", "log_x": True,
            "series": {name: [[b, per_batch[b]["result"].systems[sys].tokens_per_s]
                              for b in batches if per_batch[b]["point"] is not None]
                       for name, sys in BASELINES.items() if sys},
            "marks": {},
        },
    }
    notes += _notes(v, per_batch, batches, curve_pts, hot20, reduced)
    setup = {
        "model": runner.model_name, "batches": batches,
        "prompt_tokens": runner.config(v, 1).prompt, "decode_tokens": runner.config(v, 1).tokens,
        "metric": "tokens/s = batch x decode steps / decode time (generated tokens only; "
                  "prefill excluded)",
        "hardware": v["hardware"], "dimms": int(v["dimms"]), "units_per_dimm": int(v["units"]),
        "gpu_memory_bandwidth_gbs": v["gpu_memory_bandwidth_gbs"],
        "pcie_protocol_efficiency": v["pcie_protocol_efficiency"],
        "ndp_backend": "model (calibrated performance model of the NDP core)",
        "activation_statistics": {
            "what": "synthetic traces (sw/scenarios/hermes/traces.py) with the published sparsity "
                    "of ReLU LLaMA2 models (ProSparse, arXiv 2402.13516); skew, token similarity "
                    "and layer correlation are the scenario's assumptions (no published figure "
                    "found); not recorded from a real model",
            "active_fraction": v["active_fraction"], "skew": v["skew"],
            "token_similarity": v["token_similarity"], "layer_correlation": v["layer_correlation"],
            "measured_top20_share_b1": hot20},
        "recall_floor": floor, "threshold_grid": grid,
        "operating_points": {str(b): per_batch[b]["point"] for b in batches},
        "baselines": {k: {"system": s, "definition": _BASELINE_NOTES[k]} for k, s in BASELINES.items()},
        "tokens_per_s": {str(b): _tokens(per_batch[b]["result"]) for b in batches
                         if per_batch[b]["point"] is not None},
        "parameters": {n: {"value": p.value, "source": p.source} for n, p in params.items()},
        "overrides": dict(overrides or {}),
        "reduced": reduced, "runs": runner.runs,
        "decode_run_seconds": runner.run_seconds,
        "wall_seconds": time.perf_counter() - t_start,
    }
    return Reproduction(paper="hermes", title="Hermes: LLM inference on one GPU + NDP-DIMMs",
                        reference="Hermes, HPCA 2025, arXiv 2502.16963", setup=setup,
                        figures=list(figures.values()), sensitivity=sensitivity, curves=curves,
                        notes=notes)


def _figures(v, runner, per_batch, b1_tokens, sp_dejavu, sp_host, hot20, floor, unmet,
             reduced) -> dict[str, Figure]:
    model = runner.model_name
    r1 = per_batch[1]
    why_floor = (f"no operating point meets the recall floor {floor} (see notes): a figure at a "
                 "lower recall would compute a different model")
    out = {}

    def fig(key, ours, explanation):
        label, unit, published, where = PUBLISHED[key]
        if reduced:
            label = f"{label} [reduced: {model}]"
        f = Figure(key=key, label=label, unit=unit, published=published, published_source=where,
                   ours=ours, explanation="")
        out[key] = dataclasses.replace(f, explanation="" if f.within() else explanation)

    if b1_tokens is None:
        fig(_B1, None, why_floor)
    else:
        s = r1["result"].systems["hermes"]
        bd = s.breakdown_ms_per_step
        top = max(bd, key=bd.get)
        op = r1["point"]
        fig(_B1, b1_tokens,
            f"{'higher' if b1_tokens > 13.75 else 'lower'}: at cold recall {op['recall']:.2f} "
            f"(threshold {op['threshold']:g}) the predictor selects {op['predicted_share']:.0%} of "
            f"the neurons; the step ({s.ms_per_step:.1f} ms) is set by {top} "
            f"({bd[top]:.1f} ms): the output projections stay on the GPU "
            f"({runner.model.layers * runner.model.hidden ** 2 * 2 / 1e9:.1f} GB, a modelling "
            "choice of the scenario), GPU times from the fit of a measured RTX 4090 table, NDP "
            "kernels from the calibrated "
            f"model of the {int(v['units'])}-unit core; the paper's DIMM count, lengths and ReLU "
            f"variant are not in the stored pages ({int(v['dimms'])} DIMMs, "
            f"{r1['result'].config.prompt}/{r1['result'].config.tokens} tokens, "
            "ProSparse sparsity used)")
    if sp_dejavu is None:
        fig(_SPEEDUP, None, why_floor)
    else:
        mean = float(np.mean(list(sp_dejavu.values())))
        per = ", ".join(f"b{b} {x:.1f}x" for b, x in sp_dejavu.items())
        first, last = min(sp_dejavu), max(sp_dejavu)
        sys_f = _tokens(per_batch[first]["result"])
        sys_l = _tokens(per_batch[last]["result"])
        fig(_SPEEDUP, mean,
            f"per batch {per}. Two modelling choices set it: (1) a batch activates the union of "
            f"its sequences' neurons, so at iso-accuracy Hermes computes "
            f"{per_batch[first]['point']['predicted_share']:.0%} of the neurons at batch {first} "
            f"and {per_batch[last]['point']['predicted_share']:.0%} at batch {last}, and its "
            f"tokens/s only grows from {sys_f['hermes']:.1f} to "
            f"{sys_l['hermes']:.1f} (DIMMs saturated); (2) our Deja Vu-like "
            "baseline keeps the most frequent neurons resident and streams only the "
            "predicted-active others (and the attention weights) over PCIe once per step for the "
            f"whole batch, so it grows from {sys_f['dejavu']:.2f} to "
            f"{sys_l['dejavu']:.2f} tokens/s. The paper's 75x implies a Deja Vu "
            f"near {13.75 / 75.24:.2f} tokens/s at batch 1, dense-offloading speed (our FlexGen-like: "
            f"{sys_f['flexgen']:.2f}, Accelerate-like: "
            f"{sys_f['accelerate']:.2f}); its Deja Vu set-up is not in the stored "
            "pages, and its average covers all its models (ours LLaMA2-70B only). PCIe bandwidth "
            "across its sourced range: see the tornado")
    if sp_host is None:
        fig("speedup_vs_host_max", None, why_floor)
    else:
        best = max(sp_host, key=sp_host.get)
        host = load_hardware(v["hardware"]).host
        fig("speedup_vs_host_max", sp_host[best],
            f"best at batch {best}; Hermes-host is modelled as the scenario's PowerInfer-like system "
            f"({host.name} reading at {host.memory_efficiency:g} of its "
            f"{host.memory_bandwidth_gbs:g} GB/s as the cold side): its definition in "
            "the paper and the published figure's context are not in the stored pages "
            "(secondary source)")
    fig("hot20_activation_share", hot20,
        f"the synthetic trace's power law (skew {v['skew']}, {v['active_fraction']:.3f} of neurons "
        "firing per token) is the scenario's assumption, not fitted to this statistic; the paper "
        "counts compute (weights x activations) over its traces of real ReLU models")
    return out


def _notes(v, per_batch, batches, curve_pts, hot20, reduced) -> list[str]:
    out = []
    for b in batches:
        p = per_batch[b]["point"]
        if p is not None:
            out.append(f"batch {b}: operating point threshold {p['threshold']:g}, cold recall "
                       f"{p['recall']:.3f} (all neurons {p['recall_all']:.3f}), precision "
                       f"{p['precision']:.3f}, {p['predicted_share']:.1%} of neurons computed")
    if curve_pts:
        lo, hi = curve_pts[0], curve_pts[-1]
        out.append(f"batch 1, tokens/s against recall: Hermes {lo[1]['hermes']:.2f} at cold recall "
                   f"{lo[0]:.2f} (the scenario's default operating point) down to "
                   f"{hi[1]['hermes']:.2f} at recall {hi[0]:.2f}; the project's earlier headline "
                   "(bench/results/hermes.json) was at the low-recall end")
    out.append("activation statistics: synthetic traces with ProSparse-LLaMA2 sparsity (published); "
               "skew, token similarity and layer correlation are the scenario's assumptions, not "
               "measured on a real ReLU LLaMA2 (no such model can be loaded on this machine)")
    out.append("Accelerate is modelled from its own documentation (see setup.baselines), with no "
               "published figure to compare; Hermes-base is taken as NDP without sparsity - the "
               "stored pages of the paper do not define it")
    if math.isfinite(hot20) and hot20 < 0.5:
        out.append(f"the synthetic traces' top 20 % of neurons carry {hot20:.0%} of activations, "
                   "well below the paper's 80 %: the cold side does more work than in the paper")
    return out
