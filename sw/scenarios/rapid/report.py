"""``ndpdimm rapid``: run the RAPID scenario, print its table, write JSON and plots.

:func:`rapid_command` runs :func:`~ndpdimm.sw.scenarios.rapid.scenario.run` (every configuration of the
:class:`~ndpdimm.sw.scenarios.rapid.scenario.RapidConfig` on one trace) and prints per system the goodput
(requests/s meeting both SLOs), SLO attainment (both, TTFT alone, TPOT alone), QPS per watt,
mean node power, p50/p99 TTFT and TPOT, and the controller's power moves and role switches;
above the table: model, node, trace, the SLOs and where each number came from (the GPU models,
the NDP attention's backend). It writes ``rapid.json`` (the whole result, time series included)
and three PNG plots into ``out_dir``:

* ``rapid_power_roles.png``: per controlled system (``dynamic-power``, ``dynamic`` and their
  ``+shift`` and ``+ndp`` variants; the static 4P4D layouts when none runs) the power cap of every GPU over
  time, coloured by the GPU's role, a strip of the roles, and the node's power (caps and draw)
  against the budget;
* ``rapid_queues.png``: per system the prefill queue, the KV ring backlog, the requests
  waiting for a decode hand-over and the sequences decoding over time;
* ``rapid_latency_cdf.png``: TTFT and TPOT CDFs of every system, SLOs marked.

With ``save_trace``, the trace the run replays is written first (CSV,
:func:`~ndpdimm.sw.scenarios.rapid.workload.save_trace`), so ``--trace`` can replay it later.
"""

from pathlib import Path
from typing import TYPE_CHECKING

from ndpdimm.sw.result_files import save_figure, write_json, write_results
from ndpdimm.sw.scenarios.figures import distinct_curves, run_title

if TYPE_CHECKING:                       # the scenario imports torch: only when a run is asked for
    from ndpdimm.sw.scenarios.rapid.scenario import RapidResult

__all__ = ["format_report", "write_report", "figures", "rapid_command", "ROLE_COLOURS", "HEADLINE"]

ROLE_COLOURS = {"prefill": "tab:blue", "decode": "tab:orange", "switching": "tab:gray",
                "coalesced": "tab:green"}
_STYLES = ("-", "--", ":", "-.")
#: What the headline figures measure, printed under every report's header.
HEADLINE = ("goodput and QPS/W are the whole serving run end to end: every request's prefill "
            "and decode on the node, requests per second of trace meeting both SLOs, and all "
            "requests per second per watt of mean node power")


def _ms(stats: dict, p: str) -> str:
    v = stats.get(p)
    return "-" if v is None else f"{1e3 * v:.1f}"


def _controlled(name: str) -> bool:
    return name.removesuffix("+ndp").startswith("dynamic")


def format_report(r: "RapidResult") -> str:
    """The run's header, provenance and one table row per system."""
    c, t, slo, prov = r.config, r.trace, r.slo, r.provenance
    systems = r.systems
    sampled = [s.timeline["roles"][0] for s in systems if s.timeline["roles"]]
    gpus = f"{len(sampled[0])} GPUs, " if sampled else ""
    base = slo["ttft_baseline"]
    ttft_src = (f"p{base['percentile']:g} TTFT of static-4p4d on {base['trace']}" if base
                else "given")
    lines = [
        f"RAPID: {r.model.name} on {r.node} ({gpus}node budget "
        f"{r.power_budget_w:.0f} W), mode {c.mode}, KV path {c.kv_path}",
        f"trace {t['name']}: {t['requests']} requests over {t['duration_s']:.0f} s, mean "
        f"{t['mean_input_tokens']:.0f} input / {t['mean_output_tokens']:.0f} output tokens"
        + (f" (replayed from {c.trace})" if c.trace else
           f" (workload {c.workload}, {c.pattern}, rate x{c.rate_scale:g}, "
           f"seed {c.seed})"),
        f"SLOs: TTFT {1e3 * slo['ttft_s']:.0f} ms ({ttft_src}), TPOT {1e3 * slo['tpot_s']:.0f} ms",
        f"GPU numbers: {prov['gpu']}",
    ]
    if prov.get("ndp_attention"):
        lines += [f"NDP attention: {prov['ndp_attention']}",
                  f"NDP power: {prov['ndp_power']}; the DIMMs reserve "
                  f"{prov['ndp_reserved_w']:.0f} W of the node budget (taken from the decode "
                  f"GPUs' caps first)"]
    lines += [HEADLINE, ""]
    head = (f"{'system':20s} {'goodput':>8s} {'SLO%':>6s} {'TTFT%':>6s} {'TPOT%':>6s} "
            f"{'QPS/W':>7s} {'power':>6s} | {'TTFT p50':>8s} {'p99':>8s} | {'TPOT p50':>8s} "
            f"{'p99':>7s} | {'moves':>5s} {'switch':>6s}")
    units = (f"{'':20s} {'req/s':>8s} {'%':>6s} {'%':>6s} {'%':>6s} {'req/s/W':>7s} {'W':>6s} | "
             f"{'ms':>8s} {'ms':>8s} | {'ms':>8s} {'ms':>7s} | {'count':>5s} {'count':>6s}")
    lines += [head, units, "-" * len(head)]
    for s in systems:
        lines.append(
            f"{s.system:20s} {s.goodput_rps:8.2f} {100 * s.slo_attainment:6.1f} "
            f"{100 * s.ttft_attainment:6.1f} {100 * s.tpot_attainment:6.1f} "
            f"{s.qps_per_w:7.4f} {s.mean_power_w:6.0f} | {_ms(s.ttft_s, 'p50'):>8s} "
            f"{_ms(s.ttft_s, 'p99'):>8s} | {_ms(s.tpot_s, 'p50'):>8s} "
            f"{_ms(s.tpot_s, 'p99'):>7s} | {s.power_moves:5d} {s.role_switches:6d}")
    over = [s.system for s in systems
            if s.checks["max_reserved_w"] > s.checks["budget_w"] + 1e-6]
    unfinished = [s.system for s in systems if not s.checks["finished_once"]]
    lines += ["",
              "columns: goodput = requests meeting both SLOs per second of trace; SLO% both, "
              "TTFT% and TPOT% each alone; QPS/W = requests per second per watt of mean node "
              "power (GPUs + NDP-DIMMs); moves = power moves, switch = role switches of the "
              "controller",
              "checks: " + ("caps within the budget" if not over else
                            f"OVER THE BUDGET: {', '.join(over)}") + "; "
              + ("every request finished exactly once" if not unfinished else
                 f"REQUESTS NOT FINISHED ONCE: {', '.join(unfinished)}"),
              f"wall time {r.wall_s:.1f} s"]
    return "\n".join(lines)


def _title(r: "RapidResult", what: str) -> str:
    prov = r.provenance
    return run_title(what, model=r.model.name, batch=f"trace {r.trace['name']}",
                     hardware=f"node {r.node}, {r.power_budget_w:.0f} W budget",
                     dimms=r.ndp_dimms if prov.get("ndp_attention") else None,
                     backend=r.config.backend if prov.get("ndp_attention") else None,
                     calibrated=prov.get("ndp_calibrated"))


def figures(r: "RapidResult") -> dict:
    """The run's figures by suffix of their file stem (matplotlib ``Figure`` objects;
    :func:`write_report` saves them as ``<name>_<suffix>.png``)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, NullFormatter

    systems = r.systems
    roles = list(ROLE_COLOURS)
    out = {}

    # (a) caps and roles of the controlled systems
    shown = [s for s in systems if _controlled(s.system)] or \
        [s for s in systems if s.system.removesuffix("+ndp") == "static-4p4d"] or systems[:1]
    # the columns compare systems: every row shares its axes' ranges
    fig, axes = plt.subplots(3, len(shown), figsize=(4.6 * len(shown), 8), squeeze=False,
                             sharex=True, sharey="row", gridspec_kw={"height_ratios": [3, 1, 2]})
    all_caps = [float(c) for s in shown for c in np.ravel(s.timeline["caps_w"])]
    for k, s in enumerate(shown):
        tl = s.timeline
        t = np.asarray(tl["t"], dtype=float)
        caps = np.asarray(tl["caps_w"], dtype=float).reshape(len(t), -1)
        draw = np.asarray(tl["draw_w"], dtype=float).reshape(len(t), -1)
        code = np.array([[roles.index(x) for x in row] for row in tl["roles"]]).reshape(len(t), -1)
        ax = axes[0, k]
        for g in range(caps.shape[1]):
            for i, role in enumerate(roles):
                y = np.where(code[:, g] == i, caps[:, g], np.nan)
                if np.isfinite(y).any():
                    ax.step(t, y, where="post", color=ROLE_COLOURS[role],
                            linestyle=_STYLES[g % len(_STYLES)], linewidth=1.2)
        if all_caps:      # identical caps would otherwise give a 1 W wide axis
            ax.set_ylim(min(all_caps) - 60, max(all_caps) + 60)
        ax.set_title(s.system)
        ax.set_ylabel("GPU power cap (W)" if k == 0 else "")
        seen = [x for i, x in enumerate(roles) if (code == i).any()]
        ax.legend(handles=[Patch(color=ROLE_COLOURS[x], label=x) for x in seen],
                  fontsize=7, loc="lower right")
        ax = axes[1, k]
        if len(t):
            ax.imshow(code.T, aspect="auto", interpolation="nearest",
                      cmap=ListedColormap([ROLE_COLOURS[x] for x in roles]), vmin=-0.5,
                      vmax=len(roles) - 0.5,
                      extent=(t[0], t[-1] if t[-1] > t[0] else t[0] + 1, caps.shape[1] - 0.5, -0.5))
        ax.set_ylabel("GPU (index)" if k == 0 else "")
        ax = axes[2, k]
        reserved = s.checks["ndp_reserved_w"]
        ax.step(t, caps.sum(axis=1) + reserved, where="post", label="caps + NDP reserve")
        ax.step(t, draw.sum(axis=1), where="post", label="GPU draw")
        ax.axhline(s.checks["budget_w"], color="black", linestyle="--", linewidth=1,
                   label="node budget")
        ax.set_ylim(0, 1.1 * s.checks["budget_w"])
        ax.set_xlabel("time (s)")
        ax.set_ylabel("node power (W)" if k == 0 else "")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(_title(r, "RAPID: GPU power caps and roles over time"), fontsize=10)
    out["power_roles"] = fig

    # (b) queue depths
    cols = min(3, len(systems))
    rows = -(-len(systems) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.0 * rows + 0.6), squeeze=False,
                             sharex=True, sharey=True)
    decoding_top = max((max(s.timeline["decoding"], default=0) for s in systems), default=0)
    for k, s in enumerate(systems):
        tl = s.timeline
        ax = axes[k // cols, k % cols]
        for label, values in distinct_curves([("prefill queue", tl["prefill_queue"]),
                                              ("KV ring", tl["kv_ring"]),
                                              ("hand-over wait", tl["handover_wait"])]):
            ax.step(tl["t"], values, where="post", label=label)
        right = ax.twinx()
        right.step(tl["t"], tl["decoding"], where="post", color="tab:gray", linewidth=0.8,
                   label="decoding (right)")
        right.set_ylabel("sequences decoding (count)", fontsize=8)
        right.set_ylim(0, 1.05 * decoding_top + 1)
        ax.set_title(s.system, fontsize=10)
        ax.set_xlabel("time (s)")
        ax.set_ylabel("requests (count)")
        h1, l1 = ax.get_legend_handles_labels()          # each panel its own: merged curves
        h2, l2 = right.get_legend_handles_labels()       # differ from panel to panel
        ax.legend(h1 + h2, l1 + l2, fontsize=6, loc="upper left")
    for k in range(len(systems), rows * cols):
        axes[k // cols, k % cols].set_visible(False)
    fig.suptitle(_title(r, "RAPID: queues over time"), fontsize=10)
    out["queues"] = fig

    # (c) latency CDFs
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    q = np.linspace(0, 100, 101)
    for ax, key, slo, label in ((axes[0], "ttft_cdf_s", r.slo["ttft_s"], "TTFT"),
                                (axes[1], "tpot_cdf_s", r.slo["tpot_s"], "TPOT")):
        ndp = {s.system: s.ndp_tier for s in systems}
        # systems with the same distribution are one curve, labelled with all their names
        for label, x in distinct_curves([(s.system, [1e3 * float(v) for v in getattr(s, key)])
                                         for s in systems]):
            if len(x):
                ax.plot(x, np.linspace(0, 100, len(x)) if len(x) != len(q) else q, label=label,
                        linestyle="--" if ndp[label.split(" = ")[0]] else "-")
        ax.axvline(slo * 1e3, color="black", linestyle=":", label=f"SLO {slo * 1e3:.0f} ms")
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"{label} (ms)")
        ax.set_ylabel("requests (%)")
        ax.set_ylim(0, 100)
        ax.grid(True, which="both", alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle(_title(r, "RAPID: latency CDFs"), fontsize=10)
    out["latency_cdf"] = fig
    return out


def _plots(r: "RapidResult", out: Path, name: str) -> list:
    return [save_figure(fig, out / f"{name}_{suffix}.png") for suffix, fig in figures(r).items()]


def write_report(r: "RapidResult", out_dir, name="rapid") -> list:
    """``<name>.json`` and the plots into ``out_dir``; returns the files written."""
    out = Path(out_dir)
    return [write_json(r, out / f"{name}.json")] + _plots(r, out, name)


def rapid_command(cfg, out_dir="build/rapid", log=print, save_trace=None, timeline_file=None,
                  timeline_system=None, rtl_samples: int = 0, rtl_seed: int = 0,
                  rtl_workers: int = 2, rtl_design=None) -> "RapidResult":
    """Run, print, write (see the module docstring); returns the result. The model, node and
    trace (workload or trace file) are loaded first, so a bad one fails before any simulation.
    ``timeline_file``: also write one system's run (``timeline_system``) as a
    Chrome-trace/Perfetto JSON file. ``rtl_samples`` (with ``rtl_seed``, ``rtl_workers``, ``rtl_design``: a
    :class:`~ndpdimm.sw.sampling.stats.Design`):
    sampled RTL co-simulation of the NDP tier's attention (``sw/sampling/``)."""
    from ndpdimm.cosim.timeline import open_timeline
    from ndpdimm.sw.scenarios.base import RunContext
    from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
    from ndpdimm.sw.scenarios.rapid.scenario import run
    from ndpdimm.sw.scenarios.rapid.workload import make_trace
    from ndpdimm.sw.scenarios.rapid.workload import save_trace as write_trace

    load_serving_model(cfg.model)
    load_node(cfg.node)
    trace = make_trace(cfg, cfg.pattern)
    if save_trace is not None:
        log(f"wrote {write_trace(trace, save_trace)} ({len(trace)} requests of {trace.name})")
    if timeline_file is None and timeline_system is not None:
        raise ValueError("--timeline-system needs --timeline")
    timeline = open_timeline(timeline_file)
    ctx = RunContext(log=log, timeline=timeline, rtl_samples=rtl_samples, rtl_seed=rtl_seed,
                     rtl_workers=rtl_workers, rtl_design=rtl_design)
    r = run(cfg, ctx, timeline_system=timeline_system)
    log(format_report(r))
    if r.rtl_samples is not None:
        from ndpdimm.sw.sampling.replay import format_rtl_check
        log(format_rtl_check(r.rtl_samples))
    write_results(r, out_dir, write_report, log, timeline, timeline_file)
    return r
