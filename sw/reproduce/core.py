"""The shared core of ``ndpdimm reproduce``: a paper's figures beside ours, checked and written.

A :class:`Reproduction` holds what one paper's reproduction produced: the set-up actually run,
one :class:`Figure` per published number (published value, where in the paper, our value, the
ratio), the one-at-a-time sensitivity of each headline (:class:`SensitivityBar`, one bar per
parameter moved alone across its sourced range), extra curves and notes.

:func:`check_figures` enforces the rule of issue 29: a figure whose ratio lies outside
+-25 % (or that could not be produced) carries an explanation naming the modelling choice
responsible; :func:`write_outputs` checks first, then writes ``<paper>.json``, ``<paper>.md``
(the table, notes, sensitivity, set-up), ``<paper>.png`` (published beside ours), one tornado
PNG per headline and one PNG per curve. :func:`one_at_a_time` builds the bars of a tornado
from a parameter file's ranges (``params.py``) and a function that computes the headline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ndpdimm.sw.result_files import save_figure, write_json

__all__ = ["TOLERANCE", "Figure", "SensitivityBar", "Reproduction", "ReproductionError",
           "check_figures", "write_outputs", "format_table", "one_at_a_time"]

#: the band within which a figure counts as reproduced: ours / published in [0.75, 1.25]
TOLERANCE = 0.25


class ReproductionError(ValueError):
    """A reproduction that cannot be reported as it stands (bad parameter file, figure, curve)."""


def _finite(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class Figure:
    """One row of a paper's table: the published number, where it is, ours, and why they differ."""

    key: str
    label: str
    unit: str
    published: float | None            # None: held out (the paper's value is not revealed)
    published_source: str
    ours: float | None
    explanation: str = ""

    @property
    def ratio(self) -> float | None:
        """``ours / published`` (None when ours could not be produced or published is 0)."""
        if self.ours is None or not self.published:
            return None
        return self.ours / self.published

    def within(self, tol: float = TOLERANCE) -> bool:
        """True when ``ours / published`` lies in ``[1 - tol, 1 + tol]``."""
        r = self.ratio
        return r is not None and 1 - tol <= r <= 1 + tol

    @property
    def held_out(self) -> bool:
        """The published value is not revealed: ours is printed without a comparison."""
        return self.published is None

    def needs_explanation(self, tol: float = TOLERANCE) -> bool:
        """Ours could not be produced, or it lies outside ``tol`` of a revealed published value."""
        return self.ours is None or (not self.held_out and not self.within(tol))

    def to_json(self) -> dict:
        return {**asdict(self), "ratio": self.ratio,
                "within_25pct": None if self.held_out else self.within()}


@dataclass(frozen=True)
class SensitivityBar:
    """One bar of a tornado plot: ``parameter`` moved alone from ``low`` to ``high`` (the range
    from ``source``), everything else at its baseline; the headline figure at each end."""

    parameter: str
    low: float
    high: float
    baseline: float
    source: str
    headline_at_low: float
    headline_at_high: float

    @property
    def swing(self) -> float:
        return abs(self.headline_at_high - self.headline_at_low)


@dataclass
class Reproduction:
    """What one paper's reproduction produced (see the module docstring)."""

    paper: str
    title: str
    reference: str
    setup: dict
    figures: list[Figure]
    sensitivity: dict[str, list[SensitivityBar]] = field(default_factory=dict)
    curves: dict[str, dict] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def figure(self, key: str) -> Figure:
        for f in self.figures:
            if f.key == key:
                return f
        raise KeyError(f"{self.paper}: no figure {key!r} (figures: {', '.join(f.key for f in self.figures)})")

    def to_json(self) -> dict:
        return {
            "paper": self.paper, "title": self.title, "reference": self.reference,
            "tolerance": TOLERANCE,
            "figures": [f.to_json() for f in self.figures],
            "sensitivity": {k: [{**asdict(b), "swing": b.swing} for b in bars]
                            for k, bars in self.sensitivity.items()},
            "curves": self.curves, "notes": list(self.notes), "setup": self.setup,
        }


def check_figures(rep: Reproduction) -> None:
    """Raise :class:`ReproductionError` naming the first thing that breaks the reporting rules.

    Every figure has a finite non-zero published value (or None: held out) and a published
    source (where a held-out value is, or why it is held out); ours is finite or None; a figure
    outside +-25 % of a revealed value, or without ours, has an explanation; keys are unique;
    every sensitivity headline names a figure and every bar has a range source and finite
    values; every curve has its labels and series of ``[x, y]`` points.
    """
    where = f"{rep.paper}"
    seen = set()
    if not rep.figures:
        raise ReproductionError(f"{where}: no figures")
    for f in rep.figures:
        if f.key in seen:
            raise ReproductionError(f"{where}: figure key {f.key!r} appears twice")
        seen.add(f.key)
        if not f.held_out and (not _finite(f.published) or f.published == 0):
            raise ReproductionError(f"{where}: figure {f.key!r}: published value {f.published!r} "
                                    "is not a finite non-zero number")
        if not str(f.published_source).strip():
            raise ReproductionError(f"{where}: figure {f.key!r} has no published_source")
        if f.ours is not None and not _finite(f.ours):
            raise ReproductionError(f"{where}: figure {f.key!r}: ours = {f.ours!r} is not a finite "
                                    "number (use None with an explanation)")
        if f.needs_explanation() and not f.explanation.strip():
            what = ("could not be produced" if f.ours is None
                    else f"ratio {f.ratio:.3g} is outside [{1 - TOLERANCE:g}, {1 + TOLERANCE:g}]")
            raise ReproductionError(f"{where}: figure {f.key!r} ({f.label}) {what} and has no "
                                    "explanation naming the modelling choice responsible")
    for key, bars in rep.sensitivity.items():
        if key not in seen:
            raise ReproductionError(f"{where}: sensitivity for {key!r}, which is not a figure")
        for b in bars:
            if not str(b.source).strip():
                raise ReproductionError(f"{where}: sensitivity bar {b.parameter!r} of {key!r} has "
                                        "no source for its range")
            for name in ("low", "high", "baseline", "headline_at_low", "headline_at_high"):
                if not _finite(getattr(b, name)):
                    raise ReproductionError(f"{where}: sensitivity bar {b.parameter!r} of {key!r}: "
                                            f"{name} = {getattr(b, name)!r} is not a finite number")
    for name, curve in rep.curves.items():
        for k in ("x_label", "y_label", "series"):
            if k not in curve:
                raise ReproductionError(f"{where}: curve {name!r} lacks {k!r}")
        for s, points in curve["series"].items():
            if not all(len(p) == 2 for p in points):
                raise ReproductionError(f"{where}: curve {name!r}, series {s!r}: points must be "
                                        "[x, y] pairs")


def _fmt(x) -> str:
    if x is None:
        return "-"
    if isinstance(x, float) and (abs(x) >= 1e5 or (x != 0 and abs(x) < 1e-3)):
        return f"{x:.3e}"
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_table(rep: Reproduction) -> str:
    """The figures as a Markdown table: figure, published (source), ours, ratio, explanation."""
    lines = ["| figure | unit | published | source | ours | ratio | explanation |",
             "|---|---|---|---|---|---|---|"]
    for f in rep.figures:
        ratio = "-" if f.ratio is None else f"{f.ratio:.2f}" + ("" if f.within() else " **!**")
        if f.held_out:
            ratio = "held out"
        lines.append(f"| {_cell(f.label)} | {_cell(f.unit)} | {_fmt(f.published)} | "
                     f"{_cell(f.published_source)} | {_fmt(f.ours)} | {ratio} | {_cell(f.explanation)} |")
    return "\n".join(lines)


def _markdown(rep: Reproduction, images: list[Path]) -> str:
    out = [f"# {rep.title}", "", f"Reference: {rep.reference}", "",
           f"Ratio = ours / published; **!** marks a figure outside +-{TOLERANCE:.0%} "
           "(each has its explanation); \"held out\": the paper's value is not revealed to this "
           "project (a held-out check of the model), ours is printed alone.", "",
           format_table(rep), ""]
    if rep.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in rep.notes] + [""]
    for key, bars in rep.sensitivity.items():
        fig = rep.figure(key)
        out += [f"## Sensitivity of {fig.label}", "",
                f"Published {_fmt(fig.published)}; ours {_fmt(fig.ours)}. One parameter at a "
                "time across its sourced range, the others at their baseline.", "",
                "| parameter | baseline | low | high | headline at low | headline at high | "
                "range source |", "|---|---|---|---|---|---|---|"]
        for b in sorted(bars, key=lambda b: -b.swing):
            out.append(f"| {_cell(b.parameter)} | {_fmt(b.baseline)} | {_fmt(b.low)} | {_fmt(b.high)} | "
                       f"{_fmt(b.headline_at_low)} | {_fmt(b.headline_at_high)} | {_cell(b.source)} |")
        out.append("")
    if images:
        out += ["## Plots", ""] + [f"- [{p.name}]({p.name})" for p in images] + [""]
    out += ["## Set-up run", "", "```json", json.dumps(rep.setup, indent=1, default=str), "```", ""]
    return "\n".join(out)


def _wrap(text: str, width: int) -> str:
    import textwrap
    return "\n".join(textwrap.wrap(text, width)) or text


def _bar_plot(rep: Reproduction, path: Path) -> Path:
    import matplotlib.pyplot as plt
    import numpy as np

    figs = [f for f in rep.figures if not f.held_out]     # held-out ones: the table only
    if not figs:
        return None
    y = np.arange(len(figs))
    pub = [f.published for f in figs]
    ours = [f.ours if f.ours is not None else 0.0 for f in figs]
    values = [abs(v) for v in pub + ours if v]
    log = all(v > 0 for v in pub) and all(v >= 0 for v in ours) and max(values) / min(values) > 50
    fig, ax = plt.subplots(figsize=(10, 0.8 * len(figs) + 1.5))
    ax.barh(y - 0.2, pub, height=0.4, label="published", color="#888888")
    ax.barh(y + 0.2, ours, height=0.4, label="ours", color="#1f77b4")
    for i, f in enumerate(figs):
        text = "not produced" if f.ours is None else f"x{f.ratio:.2f}"
        ax.text(ours[i] if f.ours else (min(values) if log else 0), y[i] + 0.2, " " + text,
                va="center", fontsize=8, color="black" if f.within() else "#c00000")
    ax.set_yticks(y, [_wrap(f"{f.label} [{f.unit}]", 45) for f in figs], fontsize=8)
    ax.invert_yaxis()
    if log:
        ax.set_xscale("log")
        ax.set_xlim(right=max(values) * 3)
    else:
        ax.set_xlim(right=max(values) * 1.2)
    ax.set_title(_wrap(f"{rep.title}: published vs ours (red: outside +-{TOLERANCE:.0%})", 80),
                 fontsize=10)
    ax.legend(fontsize=8)
    return save_figure(fig, path)


def _tornado_plot(rep: Reproduction, key: str, bars: list[SensitivityBar], path: Path) -> Path:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    f = rep.figure(key)
    bars = sorted(bars, key=lambda b: b.swing)
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(bars) + 1.8))
    base = f.ours if f.ours is not None else 0.0
    for i, b in enumerate(bars):
        lo, hi = b.headline_at_low, b.headline_at_high
        ax.barh(i, lo - base, left=base, color="#6baed6", height=0.6)
        ax.barh(i, hi - base, left=base, color="#fd8d3c", height=0.6)
    ax.set_yticks(range(len(bars)), [f"{b.parameter}\n{_fmt(b.low)} .. {_fmt(b.high)} "
                                     f"(base {_fmt(b.baseline)})" for b in bars], fontsize=7)
    ends = [x for b in bars for x in (b.headline_at_low, b.headline_at_high)] + [base] + \
        ([] if f.held_out else [f.published])
    pad = 0.08 * ((max(ends) - min(ends)) or abs(base) or 1.0)
    ax.set_xlim(min(ends) - pad, max(ends) + pad)
    ax.axvline(base, color="black", lw=1, label=f"ours {_fmt(base)}")
    if not f.held_out:
        ax.axvline(f.published, color="#c00000", ls="--", lw=1.5,
                   label=f"published {_fmt(f.published)}")
    handles = ax.get_legend_handles_labels()[0] + [Patch(color="#6baed6", label="parameter at low"),
                                                   Patch(color="#fd8d3c", label="parameter at high")]
    ax.set_xlabel(_wrap(f"{f.label} [{f.unit}]", 90), fontsize=9)
    ax.set_title(_wrap(f"Sensitivity of {f.label}", 80), fontsize=10)
    ax.legend(handles=handles, fontsize=7, loc="best")
    return save_figure(fig, path)


def _curve_plot(name: str, curve: dict, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for s, points in curve["series"].items():
        if points:
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, marker="o", ms=3, label=s)
    for label, mark in curve.get("marks", {}).items():
        if "x" in mark and "y" in mark:
            ax.plot([mark["x"]], [mark["y"]], marker="*", ms=12, ls="none", label=label)
        elif "x" in mark:
            ax.axvline(mark["x"], ls="--", lw=1, color="grey", label=label)
        elif "y" in mark:
            ax.axhline(mark["y"], ls=":", lw=1, color="grey", label=label)
    ax.set_xlabel(curve["x_label"])
    ax.set_ylabel(curve["y_label"])
    if curve.get("log_x"):
        ax.set_xscale("log")
    ax.set_title(_wrap(curve.get("title", name), 80), fontsize=10)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return save_figure(fig, path)


def write_outputs(rep: Reproduction, out_dir) -> list[Path]:
    """Check ``rep`` (:func:`check_figures`; nothing is written if it fails), then write
    ``<paper>.json``, ``<paper>.md``, ``<paper>.png``, ``<paper>_tornado_<key>.png`` per headline
    and ``<paper>_<curve>.png`` per curve into ``out_dir``; returns the paths written."""
    check_figures(rep)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReproductionError(f"output folder {str(out)!r} is a file")
    out.mkdir(parents=True, exist_ok=True)
    images = [p for p in [_bar_plot(rep, out / f"{rep.paper}.png")] if p is not None]
    for key, bars in rep.sensitivity.items():
        if bars:
            images.append(_tornado_plot(rep, key, bars, out / f"{rep.paper}_tornado_{key}.png"))
    for name, curve in rep.curves.items():
        images.append(_curve_plot(name, curve, out / f"{rep.paper}_{name}.png"))
    md = out / f"{rep.paper}.md"
    md.write_text(_markdown(rep, images))
    return [write_json(rep.to_json(), out / f"{rep.paper}.json"), md, *images]


def one_at_a_time(params: Mapping, names, evaluate: Callable[[dict], float],
                  progress: Callable[[str], None] | None = None) -> list[SensitivityBar]:
    """Tornado bars: for each name in ``names`` (a parameter of ``params`` from
    :func:`~ndpdimm.sw.reproduce.params.load_params` with a sensitivity range), the headline
    ``evaluate(overrides)`` with that one parameter at its low and at its high end, every other
    at its value (``overrides`` maps the parameter's name to the value to use)."""
    bars = []
    for name in names:
        if name not in params:
            raise ReproductionError(f"sensitivity parameter {name!r} is not in the parameter file")
        p = params[name]
        if p.low is None or p.high is None:
            raise ReproductionError(f"sensitivity parameter {name!r} has no range (low, high, source)")
        if progress:
            progress(f"sensitivity: {name} at {p.low} and {p.high}")
        at_low = evaluate({name: p.low})
        at_high = evaluate({name: p.high})
        bars.append(SensitivityBar(parameter=name, low=p.low, high=p.high, baseline=p.value,
                                   source=p.range_source, headline_at_low=at_low,
                                   headline_at_high=at_high))
    return bars
