"""``ndpdimm hermes``: run the Hermes scenario, print its tables, write JSON and plots; sweeps.

:func:`hermes_command` runs :func:`~ndpdimm.sw.scenarios.hermes.scenario.run` once (or once per
point of a sweep over batch, DIMM count, multiplier units or hot-neuron
share), prints per system tokens/s, time per decode step and its breakdown,
TTFT, energy (tokens per joule), price and the three health figures (NDP
utilisation, share of time on PCIe, hot-neuron hit rate), then the
ablations, the predictor's accuracy and memory, the placement ILP and the
DIMM imbalance; it writes ``hermes.json`` (or ``hermes_sweep_<axis>.json``)
and PNG plots into ``out_dir``: tokens/s per system, the breakdown per
system, the imbalance over decode steps with and without remapping, and for
a sweep tokens/s against the swept value.

Workloads (traces + predictions) depend only on the model, batch and trace
parameters, and NDP kernel costs only on the model, batch and core: a sweep
reuses both where it can.
"""

import dataclasses
import time
from pathlib import Path

from ndpdimm.cosim.timeline import open_timeline
from ndpdimm.sw.result_files import save_figure, write_json
from ndpdimm.sw.sampling.replay import format_rtl_check
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.figures import distinct_curves, label_bars, run_title
from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
from ndpdimm.sw.scenarios.hermes.config import ABLATIONS, SYSTEMS, HermesConfig
from ndpdimm.sw.scenarios.hermes.scenario import HermesResult, run

__all__ = ["format_report", "write_report", "figures", "sweep_figure", "run_sweep",
           "hermes_command", "SWEEPS", "HEADLINE"]

#: The sweeps ``--sweep`` offers and their default values.
SWEEPS = {"batch": (1, 2, 4, 8, 16), "dimms": (4, 8, 16), "units": (32, 64, 128, 256, 512),
          "hot_share": (0.0, 0.05, 0.1, 0.17, 0.2, 0.23, 0.3)}
_LABEL = {"accelerate": "Accelerate-like (offload, no overlap)",
          "flexgen": "FlexGen-like (PCIe offload)", "dejavu": "Deja Vu-like (offload + predictor)",
          "powerinfer": "PowerInfer-like (hot GPU, cold CPU)", "ndp_dense": "NDP-DIMMs, no sparsity",
          "hermes": "Hermes (GPU + NDP-DIMMs)", "datacenter": "datacenter reference",
          "random": "random placement", "offline": "offline partition only",
          "online": "+ online adjustment"}


#: What the headline figure (tok/s) measures, printed under every report's header.
HEADLINE = ("tok/s is decode only: tokens generated per second of decode steps (batch x steps / "
            "decode time), the prefill's time is the TTFT column; e2e is the Hermes paper's "
            "metric, the generated tokens over prefill + decode")
#: The swept parameters' axis labels, with units.
_AXIS = {"batch": "batch (sequences)", "dimms": "NDP-DIMMs (count)",
         "units": "GEMV units per NDP core (count)",
         "hot_share": "hot-neuron share (fraction of neurons)"}


def _fmt(v, spec):
    """``v`` formatted with ``spec``; None as ``-`` in the same width."""
    return format(v, spec) if v is not None else "-".rjust(int(spec.split(".")[0] or 0))


def format_report(r: HermesResult) -> str:
    """The run's tables as text."""
    c = r.config
    lines = [f"Hermes: {r.model.name} on {r.hardware} (batch {c.batch}, {r.dimms} "
             f"NDP-DIMMs of {c.units} units, prompt {c.prompt}, {c.tokens} decode steps)",
             f"NDP cycles: {r.provenance['ndp']}; GPU: {r.provenance['gpu']}", HEADLINE, ""]
    comps = sorted({k for s in list(r.systems.values()) + list(r.ablations.values())
                    for k in s.breakdown_ms_per_step})
    head = f"{'system':38s} {'tok/s':>8s} {'e2e':>7s} {'ms/step':>8s} " + \
        " ".join(f"{k[:9]:>9s}" for k in comps) + \
        f" {'TTFT':>7s} {'tok/J':>7s} {'price':>8s} {'NDP':>5s} {'PCIe':>6s} {'hit':>5s}"
    units = f"{'':38s} {'tok/s':>8s} {'tok/s':>7s} {'ms':>8s} " + " ".join(f"{'ms':>9s}" for _ in comps) + \
        f" {'s':>7s} {'tok/J':>7s} {'USD':>8s} {'%':>5s} {'%':>6s} {'%':>5s}"
    for title, group in (("systems", r.systems), ("ablations", r.ablations)):
        lines += [f"-- {title} " + "-" * (len(head) - 4 - len(title)), head, units]
        for name, s in group.items():
            b = s.breakdown_ms_per_step
            lines.append(
                f"{_LABEL.get(name, name)[:38]:38s} {s.tokens_per_s:8.2f} {s.e2e_tokens_per_s:7.2f} "
                f"{s.ms_per_step:8.2f} "
                + " ".join(f"{b.get(k, 0.0):9.2f}" for k in comps)
                + f" {s.ttft_s:7.2f} {s.tokens_per_joule:7.3f} {s.price_usd['total']:8.0f}"
                + f" {_fmt(s.ndp_utilisation and 100 * s.ndp_utilisation, '5.1f')}"
                + f" {100 * s.pcie_time_share:6.1f} {_fmt(s.hot_hit_rate and 100 * s.hot_hit_rate, '5.1f')}")
        lines.append("")
    p, pl, im = r.predictor, r.placement, r.imbalance
    lines += [
        "columns: tok/s = decode tokens/s (batch / step time); e2e = generated tokens over "
        "prefill + decode (the Hermes paper's metric); "
        "ms/step = decode step time on the critical path, then its parts (ms per step); "
        "TTFT = prefill time of the prompt (s); tok/J = decode tokens per joule; price = "
        "hardware price (USD); NDP = NDP-DIMM utilisation, PCIe = share of the step on PCIe, "
        "hit = hot-neuron hit rate (%)",
        _operating_line(p, c.recall_floor),
        f"predictor (cold neurons): precision {_fmt(p['precision'], '.3f')}, recall "
        f"{_fmt(p['recall'], '.3f')}; all neurons: precision {_fmt(p.get('precision_all'), '.3f')}, "
        f"recall {_fmt(p.get('recall_all'), '.3f')}, accuracy {_fmt(p.get('accuracy_all'), '.3f')}; state {p['memory_kb_per_layer']:.0f} KB per layer "
        f"({p['memory_mb_all_layers']:.1f} MB for all layers); table fitted in {p['fit_seconds']:.1f} s",
        f"placement ILP ({pl['solver']}, {pl['variables']} variables): {pl['status']} in "
        f"{pl['solve_seconds']:.2f} s, objective {pl['ilp_objective_ms']:.3f} ms/token "
        f"({pl['objective_ms']:.3f} with the real DIMM split; grouping costs <= "
        f"{pl['group_gap_bound_ms']:.3f}); hot share {100 * pl['hot_share']:.1f} % of neurons, "
        f"QKV on the GPU {100 * pl['qkv_gpu_share']:.0f} %, GPU budget {pl['gpu_budget_gb']:.1f} GB",
        f"DIMM imbalance (max/mean of activated cold neurons per step): {im['static']:.3f} "
        f"without remapping, {im['remapped']:.3f} with ({im['remap_migrations']} neurons moved)",
        f"wall time {r.wall_seconds:.1f} s"]
    if r.cold_int8 is not None:
        q = r.cold_int8
        lines.insert(-1, f"INT8 cold neurons: reduced-model decode error {q['relative_error_int8']:.2e} "
                         f"of the update (FP16: {q['relative_error_fp16']:.2e})")
    if r.rtl_samples is not None:
        lines.insert(-1, format_rtl_check(r.rtl_samples))
    return "\n".join(lines)


def _operating_line(p: dict, floor: float) -> str:
    """Which predictor ran and at which operating point, with the recall the headline has."""
    op = p.get("operating_point") or {}
    where = (f"at the sparsest point with cold recall >= {floor} (score >= "
             f"{op['threshold']:.4f})" if op.get("threshold") is not None else
             "at its own rule (no recall floor: skipped activated neurons are computation the "
             "model does, the figures are of a lossier model)")
    return (f"OPERATING POINT: {p.get('kind', 'window')} predictor {where}: cold recall "
            f"{_fmt(p['recall'], '.3f')}, {_fmt(p.get('recall_all'), '.3f')} over all neurons")


def _title(r: HermesResult, what: str) -> str:
    return run_title(what, model=r.model.name, batch=f"batch {r.config.batch}",
                     hardware=f"hardware {r.hardware!r}", dimms=r.dimms, units=r.config.units,
                     backend=r.config.backend, calibrated=r.provenance.get("ndp_calibrated"))


def figures(r: HermesResult) -> dict:
    """The run's figures by file stem (matplotlib ``Figure`` objects; :func:`write_report`
    saves them): decode throughput per system, the step's breakdown, the DIMM imbalance."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = {}
    names = list(r.systems) + [a for a in r.ablations if a != "hermes"]
    runs = {**r.systems, **r.ablations}
    fig, ax = plt.subplots(figsize=(9, 4.5))
    bars = ax.bar(range(len(names)), [runs[n].tokens_per_s for n in names],
                  color=["C0"] * len(r.systems) + ["C7"] * (len(names) - len(r.systems)))
    label_bars(ax, bars, "{:.1f}")
    ax.set_xticks(range(len(names)), [_LABEL.get(n, n) for n in names], rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_yscale("log")
    ax.set_title(_title(r, "decode throughput (prefill not included)"), fontsize=9)
    out["hermes_tokens_per_s"] = fig

    comps = sorted({k for n in names for k in runs[n].breakdown_ms_per_step})
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bottom = [0.0] * len(names)
    for i, k in enumerate(comps):
        vals = [100 * runs[n].breakdown_ms_per_step.get(k, 0.0) / runs[n].ms_per_step for n in names]
        ax.bar(range(len(names)), vals, bottom=bottom, label=k, color=f"C{i}")
        bottom = [a + b for a, b in zip(bottom, vals)]
    totals = ax.bar(range(len(names)), [0.0] * len(names), bottom=bottom, color="none")
    ax.bar_label(totals, labels=[f"{runs[n].ms_per_step:.2f} ms" for n in names], fontsize=7,
                 padding=1)
    ax.set_xticks(range(len(names)), [_LABEL.get(n, n) for n in names], rotation=30, ha="right",
                  fontsize=8)
    ax.set_ylabel("share of the decode step (%)")
    ax.set_ylim(0, 112)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_title(_title(r, "decode step time by part (critical path; bar: ms per step)"),
                 fontsize=9)
    out["hermes_breakdown"] = fig

    fig, ax = plt.subplots(figsize=(7, 4))
    curves = distinct_curves([("random placement", r.ablations["random"].imbalance_per_token),
                              ("ILP, without remapping", r.ablations["online"].imbalance_per_token),
                              ("ILP, with remapping", r.ablations["hermes"].imbalance_per_token)])
    for k, (label, values) in enumerate(curves):
        ax.plot(values, label=label, linestyle=("-", "--", ":")[k % 3])
    ax.set_xlabel("decode step (index)")
    ax.set_ylabel("max / mean DIMM load (ratio)")
    ax.legend(fontsize=8)
    ax.set_title(_title(r, "activated cold neurons per DIMM"), fontsize=9)
    out["hermes_imbalance"] = fig
    return out


def _plots(r: HermesResult, out: Path) -> list:
    return [save_figure(fig, out / f"{stem}.png") for stem, fig in figures(r).items()]


def write_report(r: HermesResult, out_dir, name="hermes") -> list:
    """``<name>.json`` and the plots into ``out_dir``; returns the files written."""
    out = Path(out_dir)
    return [write_json(r, out / f"{name}.json")] + _plots(r, out)


def run_sweep(cfg: HermesConfig, axis: str, values=None, log=print, workers: int = 2,
              in_process: bool = False) -> dict:
    """The ``hermes`` sweep job (``sw/sweep/jobs.py``) at each value of ``axis`` (one of
    :data:`SWEEPS`), every other field of ``cfg`` fixed, on the sweep runner (``workers`` Dask
    processes, or ``in_process``; points cached like every sweep's): tokens/s per system and
    ablation, tokens/J per system, the placed hot share and the Hermes system's hot-neuron hit
    rate and NDP utilisation per point. Every value is checked before anything runs; a point
    that cannot be built (e.g. a hot share the GPU cannot hold) is reported ``infeasible``."""
    from ndpdimm.sw.sweep.run import Sweep
    from ndpdimm.sw.sweep.run import run_sweep as run_points

    if axis not in SWEEPS:
        raise ValueError(f"sweep axis must be one of {', '.join(SWEEPS)}, got {axis!r}")
    values = tuple(SWEEPS[axis] if values is None else values)
    if not values:
        raise ValueError("a sweep needs at least one value")
    points = [dataclasses.replace(cfg, **{axis: v}) for v in values]     # validates every value
    load_model(cfg.model), load_hardware(cfg.hardware, cfg.gpu)                     # fail before any work
    sweep = Sweep(name=f"hermes-{axis}", job="hermes",
                  points=tuple(dataclasses.asdict(p) for p in points),
                  plot_x=axis, plot_y=tuple(f"{k}_tokens_per_s" for k in SYSTEMS))
    t0 = time.perf_counter()
    result = run_points(sweep, workers=workers, in_process=in_process, progress=False, log=log)
    rows = []
    for value, rec in zip(values, result.records):
        if rec["status"] != "ok":
            rows.append({axis: value, "infeasible": rec.get("error", rec["status"]).removeprefix(
                "ValueError: ")})
            continue
        row = rec["result"]
        rows.append({axis: value,
                     "tokens_per_s": {k: row[f"{k}_tokens_per_s"] for k in SYSTEMS + ABLATIONS},
                     "tokens_per_joule": {k: row[f"{k}_tokens_per_j"] for k in SYSTEMS},
                     "placed_hot_share": row["hot_share"],
                     "hot_hit_rate": row["hermes_hot_hit_rate"],
                     "ndp_utilisation": row["hermes_ndp_utilisation"]})
    return {"axis": axis, "config": dataclasses.asdict(cfg), "points": rows,
            "backend": cfg.backend, "wall_seconds": time.perf_counter() - t0}


def sweep_figure(sw: dict):
    """The sweep's figure: decode throughput of each system against the swept value."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axis = sw["axis"]
    points = [p for p in sw["points"] if "infeasible" not in p]
    xs = [p[axis] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4))
    for name in SYSTEMS:
        ax.plot(xs, [p["tokens_per_s"][name] for p in points], marker="o", label=_LABEL[name])
    ax.set_xlabel(_AXIS[axis])
    ax.set_ylabel("decode throughput (tokens/s)")
    ax.set_yscale("log")
    if axis in ("batch", "units", "dimms"):
        ax.set_xscale("log", base=2)
    ax.legend(fontsize=7)
    c = sw["config"]
    ax.set_title(run_title(f"decode throughput vs {axis}", model=c["model"],
                           batch="batch swept" if axis == "batch" else f"batch {c['batch']}",
                           hardware=f"hardware {c['hardware']!r}", backend=sw["backend"]),
                 fontsize=9)
    return fig


def _sweep_plot(sw: dict, out: Path) -> Path:
    return save_figure(sweep_figure(sw), out / f"hermes_sweep_{sw['axis']}.png")


def format_sweep(sw: dict) -> str:
    axis = sw["axis"]
    names = list(SYSTEMS) + [a for a in ABLATIONS if a != "hermes"]
    lines = [f"decode tokens/s vs {axis} ({sw['config']['model']}, {sw['backend']} backend; "
             "prefill not included)",
             f"{axis:>10s} " + " ".join(f"{n[:10]:>10s}" for n in names) + "  hot%  hit%"]
    for p in sw["points"]:
        if "infeasible" in p:
            lines.append(f"{p[axis]!s:>10s} infeasible: {p['infeasible']}")
            continue
        lines.append(f"{p[axis]!s:>10s} " + " ".join(f"{p['tokens_per_s'][n]:10.2f}" for n in names)
                     + f" {100 * p['placed_hot_share']:5.1f} {100 * p['hot_hit_rate']:5.1f}")
    return "\n".join(lines)


def hermes_command(cfg: HermesConfig, out_dir="build/hermes", sweep=None, sweep_values=None,
                   trace_file=None, log=print, timeline_file=None, rtl_samples: int = 0,
                   rtl_seed: int = 0, rtl_workers: int = 2, rtl_design=None) -> HermesResult | dict:
    """The ``ndpdimm hermes`` command (see the module docstring); ``timeline_file``: also
    write the Hermes system's decode steps as a Chrome-trace/Perfetto JSON file;
    ``rtl_samples`` (with ``rtl_seed``, ``rtl_workers``, ``rtl_design``: a
    :class:`~ndpdimm.sw.sampling.stats.Design`): sampled RTL co-simulation of the run
    (``sw/sampling/``)."""
    out = Path(out_dir)
    timeline = open_timeline(timeline_file)
    if sweep and rtl_samples:
        raise ValueError("--rtl-samples anchors one run; it does not combine with --sweep")
    if sweep:
        if trace_file:
            raise ValueError("--trace replays one run; it does not combine with --sweep")
        if timeline_file:
            raise ValueError("--timeline records one run; it does not combine with --sweep")
        sw = run_sweep(cfg, sweep, sweep_values, log)
        log(format_sweep(sw))
        files = [write_json(sw, out / f"hermes_sweep_{sweep}.json"), _sweep_plot(sw, out)]
        log("wrote " + ", ".join(str(f) for f in files))
        return sw
    trace = None
    if trace_file:
        from ndpdimm.sw.scenarios.hermes.traces import load_trace
        trace = load_trace(trace_file)
    ctx = RunContext(log=log, timeline=timeline, rtl_samples=rtl_samples, rtl_seed=rtl_seed,
                     rtl_workers=rtl_workers, rtl_design=rtl_design)
    r = run(cfg, ctx, trace=trace)
    log(format_report(r))
    files = write_report(r, out)
    if timeline is not None:
        files.append(timeline.write(timeline_file))
    log("wrote " + ", ".join(str(f) for f in files))
    return r
