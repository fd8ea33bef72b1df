"""``ndpdimm trimoe``: run the TriMoE scenario, print its table, write JSON and plots.

:func:`trimoe_command` runs :func:`~ndpdimm.sw.scenarios.trimoe.scenario.run` (or, with
``check=True``, :func:`~ndpdimm.sw.scenarios.trimoe.check.run_trimoe_check`: a reduced
MoE with the RTL backend in the loop, every NDP expert checked against the
golden model and torch), prints per system the MoE-layer latency,
throughput, per-domain utilisation, the share of expert executions per
domain, GPU hit rate, migration share and the scheduler's iterations and
time per layer, then the EMA predictor's accuracy and where the numbers came
from; it writes ``trimoe.json`` and three PNG plots into ``out_dir``:
latency per system, utilisation per domain and system, and the expert
placement over the steps of the first sampled layer (TriMoE).
"""

from pathlib import Path

from ndpdimm.cosim.timeline import open_timeline
from ndpdimm.sw.result_files import save_figure, write_json, write_results
from ndpdimm.sw.sampling.replay import format_rtl_check
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.figures import label_bars, run_title
from ndpdimm.sw.scenarios.trimoe.scenario import TriMoeConfig, TriMoeResult, run

__all__ = ["format_report", "write_report", "figures", "trimoe_command", "LABELS", "HEADLINE"]

LABELS = {"gpu_only": "GPU only", "gpu_cpu": "GPU + AMX CPU", "cpu_routed": "routed experts on CPU",
          "gpu_ndp": "GPU + NDP-DIMMs", "trimoe": "TriMoE (GPU + CPU + NDP)"}
_PLACE = ("inactive", "GPU hit", "GPU miss", "CPU", "NDP")
#: What the headline figures measure, printed under every report's header.
HEADLINE = ("MoE layers only: layer ms = the scheduled makespan of one MoE layer's experts (NDP "
            "contention included); tok/s = tokens per step / (MoE layers x layer time + data "
            "movement outside the layers); attention, dense layers and the LM head are not in "
            "either")


def _pct(v):
    return "    -" if v is None else f"{100 * v:5.1f}"


def format_report(r: TriMoeResult) -> str:
    c, m, prov = r.config, r.model, r.provenance
    lines = [f"TriMoE: {m.name} ({m.experts} experts, top-{m.top_k}, {m.shared_experts} "
             f"shared, {r.moe_layers} MoE layers) on {r.hardware.name}, {c.batch} "
             f"tokens/step, {c.steps} steps x {c.sample_layers} sampled layers",
             f"NDP expert: {prov['ndp_expert']}; DIMM-Link: {prov['dimm_link']}",
             f"GPU: {prov['gpu']}; CPU: {prov['cpu']}"] + \
        [f"note: {w}" for w in prov["warnings"]] + [HEADLINE, ""]
    head = (f"{'system':26s} {'layer ms':>9s} {'p99 ms':>8s} {'tok/s':>9s} {'x GPU':>6s} "
            f"{'GPU%':>5s} {'CPU%':>5s} {'NDP%':>5s} | {'hit':>5s} {'miss':>5s} {'cpu':>5s} "
            f"{'ndp':>5s} | {'GPUhit':>6s} {'stall%':>6s} {'relay%':>6s} {'iter':>5s} {'sched ms':>8s}")
    units = (f"{'':26s} {'ms':>9s} {'ms':>8s} {'tok/s':>9s} {'ratio':>6s} {'%':>5s} {'%':>5s} "
             f"{'%':>5s} | {'%':>5s} {'%':>5s} {'%':>5s} {'%':>5s} | {'%':>6s} {'%':>6s} "
             f"{'%':>6s} {'count':>5s} {'ms':>8s}")
    lines += [head, units, "-" * len(head)]
    for name, s in r.systems.items():
        u, sh = s.utilisation, s.execution_share
        lines.append(
            f"{LABELS.get(name, name):26s} {s.moe_layer_latency_ms:9.3f} "
            f"{s.moe_layer_latency_p99_ms:8.3f} {s.throughput_tokens_per_s:9.0f} "
            f"{s.speedup_vs_gpu_only or 0:6.2f} {_pct(u['gpu'])} {_pct(u['cpu'])} {_pct(u['ndp'])} | "
            f"{_pct(sh.get('gpu_hit'))} {_pct(sh.get('gpu_miss'))} {_pct(sh.get('cpu'))} "
            f"{_pct(sh.get('ndp'))} | {_pct(s.gpu_hit_rate):>6s} {100 * s.migration_stall_share:6.2f} "
            f"{100 * s.migration_ndp_share:6.2f} "
            f"{s.scheduler['iterations_mean']:5.1f} {1e3 * s.scheduler['seconds_per_layer_mean']:8.2f}")
    p = next(iter(r.systems.values())).predictor
    lines += ["", "columns: utilisation = busy / (devices x layer time) per domain; hit/miss/cpu/ndp = "
                  "share of routed expert executions; GPUhit = hits / GPU executions; stall% = "
                  "background relayouts, rebalancing and prefetch beyond idle PCIe / wall time; "
                  "relay% = relayouts into a DIMM / NDP busy time; iter, sched ms = refinement "
                  "moves and scheduling wall time per layer",
              f"EMA predictor (alpha {p['alpha']}, {p['state_bytes_full_model'] / 1000:.1f} KB of "
              f"state for the model's MoE layers): load accuracy {_pct(p['load_accuracy'])} % (1 - WAPE), hot-set "
              f"precision {_pct(p['hot_precision'])} %, recall {_pct(p['hot_recall'])} %"]
    t = r.systems.get("trimoe")
    if t:
        mc, ms = t.migration_counts, t.migration_seconds
        lines.append(f"TriMoE data movement: {mc['relayouts_in_task']} relayouts to a DIMM "
                     f"({1e3 * ms['relayout_in_task']:.2f} ms), {mc['relayouts_back']} back to "
                     f"striped ({1e3 * ms['relayout_back']:.2f} ms), {mc['rebalance_moves']} "
                     f"rebalancing moves ({1e3 * ms['rebalance']:.2f} ms), {mc['prefetches']} "
                     f"prefetches (stall {1e3 * ms['prefetch_stall']:.2f} ms); NDP contention "
                     f"slowdown {t.ndp_contention_slowdown_mean:.3f}x")
    link = r.costs.link
    if link:
        c = link.counters
        wire = c.get("wire_cycles", 0) + c.get("replay_cycles", 0)
        lines.append(f"DIMM-Link counters (relayout / move measurements, BER {link.ber:g}): "
                     f"{c.get('frames_sent', 0)} frames, {c.get('crc_errors', 0)} CRC errors, "
                     f"{c.get('replays', 0)} replays, {c.get('timeouts', 0)} timeouts, "
                     f"{100 * c.get('replay_cycles', 0) / wire if wire else 0:.1f} % of link time "
                     f"replaying -> " + ("a bad link (errors cost time)" if c.get("crc_errors")
                                          else "no errors: link time is the wire's"))
    lines.append(f"wall time: costs {r.wall_seconds['costs']:.1f} s, total "
                 f"{r.wall_seconds['total']:.1f} s")
    return "\n".join(lines)


def _title(r: TriMoeResult, what: str) -> str:
    return run_title(what, model=r.model.name, batch=f"{r.config.batch} tokens/step",
                     hardware=r.hardware.name, dimms=r.hardware.ndp.dimms,
                     units=r.config.core().n_units, backend=r.config.backend,
                     calibrated=r.provenance.get("ndp_calibrated"))


def figures(r: TriMoeResult) -> dict:
    """The run's figures by file stem (matplotlib ``Figure`` objects; :func:`write_report`
    saves them): MoE-layer latency per system, utilisation per domain, the expert placement."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    names = list(r.systems)
    out = {}
    fig, ax = plt.subplots(figsize=(7, 4))
    lat = [r.systems[n].moe_layer_latency_ms for n in names]
    label_bars(ax, ax.bar(range(len(names)), lat, color="tab:blue"), "{:.2f}", fontsize=8)
    ax.set_xticks(range(len(names)), [LABELS.get(n, n) for n in names], fontsize=8)
    ax.set_ylabel("MoE layer latency (ms)")
    ax.set_title(_title(r, "MoE layer latency (MoE layers only)"), fontsize=9)
    out["trimoe_latency"] = fig

    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.25
    for k, dom in enumerate(("gpu", "cpu", "ndp")):
        vals = [100 * (r.systems[n].utilisation[dom] or 0) for n in names]
        label_bars(ax, ax.bar(np.arange(len(names)) + (k - 1) * width, vals, width,
                              label=dom.upper()), "{:.0f}", fontsize=6)
    ax.set_xticks(np.arange(len(names)), [LABELS.get(n, n) for n in names], fontsize=8)
    ax.set_ylabel("utilisation (%)")
    ax.set_ylim(0, 118)
    ax.legend(ncol=3, loc="upper center")
    ax.set_title(_title(r, "utilisation per domain (busy / devices x layer time)"), fontsize=9)
    out["trimoe_utilisation"] = fig

    system = "trimoe" if "trimoe" in r.systems else names[-1]
    place = np.array(r.systems[system].placement)
    if place.size:
        from matplotlib.colors import ListedColormap
        fig, ax = plt.subplots(figsize=(8, 4))
        cmap = ListedColormap(["white", "tab:green", "tab:olive", "tab:orange", "tab:purple"])
        im = ax.imshow(place.T, aspect="auto", interpolation="nearest", cmap=cmap, vmin=-0.5,
                       vmax=4.5)
        cb = fig.colorbar(im, ticks=range(5))
        cb.ax.set_yticklabels(_PLACE)
        ax.set_xlabel("decode step (index)")
        ax.set_ylabel("routed expert (index)")
        ax.set_title(_title(r, f"{LABELS.get(system, system)}: where each expert ran (first "
                               "sampled layer)"), fontsize=9)
        out["trimoe_placement"] = fig
    return out


def _plots(r: TriMoeResult, out: Path) -> list:
    return [save_figure(fig, out / f"{stem}.png") for stem, fig in figures(r).items()]


def write_report(r: TriMoeResult, out_dir, name="trimoe") -> list:
    """``<name>.json`` and the plots into ``out_dir``; returns the files written."""
    out = Path(out_dir)
    return [write_json(r, out / f"{name}.json")] + _plots(r, out)


def trimoe_command(cfg: TriMoeConfig, out_dir="build/trimoe", log=print, timeline_file=None,
                   rtl_samples: int = 0, rtl_seed: int = 0, rtl_workers: int = 2, rtl_design=None) -> TriMoeResult:
    """Run, print, write (see the module docstring); returns the result. ``timeline_file``:
    also write every system's schedule as a Chrome-trace/Perfetto JSON file. ``rtl_samples``
    (with ``rtl_seed``, ``rtl_workers``, ``rtl_design``: a
    :class:`~ndpdimm.sw.sampling.stats.Design`): sampled RTL co-simulation of the run
    (``sw/sampling/``)."""
    timeline = open_timeline(timeline_file)
    done = {}

    def progress(system, step, steps):
        if step == steps or step - done.get(system, 0) >= max(1, steps // 4):
            done[system] = step
            log(f"  {system}: step {step}/{steps}")

    ctx = RunContext(log=log, timeline=timeline, rtl_samples=rtl_samples, rtl_seed=rtl_seed,
                     rtl_workers=rtl_workers, rtl_design=rtl_design)
    r = run(cfg, ctx, progress=progress)
    log(format_report(r))
    if r.rtl_samples is not None:
        log(format_rtl_check(r.rtl_samples))
    write_results(r, out_dir, write_report, log, timeline, timeline_file)
    return r

