"""What every scenario figure carries, so a plot read on its own says what it shows.

The reports of the three scenarios (``hermes/report.py``, ``trimoe/report.py``,
``rapid/report.py``) make their figures with these rules (``tests/sw/scenarios/conftest.py``
checks them on every figure of a run):

* the title names the run: model, batch (or tokens per step), hardware and where the NDP cycles
  came from (:func:`run_title`);
* every numeric axis has a label with its unit in parentheses; an axis of categories (systems)
  has its tick labels instead;
* every bar carries its value (:func:`label_bars`);
* a legend entry never hides under another curve: curves with the same values are drawn once,
  under one label naming all of them (:func:`distinct_curves`);
* panels that compare runs share the ranges of their axes.

Imports: nothing of the project; matplotlib is imported by the callers.
"""

__all__ = ["run_title", "backend_words", "label_bars", "distinct_curves"]


def run_title(what: str, *, model: str, batch: str, hardware: str, backend: str) -> str:
    """A figure's title: ``what`` on its first line, then the run: ``model``, ``batch`` (e.g.
    ``"batch 16"`` or ``"768 tokens/step"``), ``hardware`` and ``backend`` (where the NDP cycles
    came from, e.g. ``"model backend"``)."""
    return f"{what}\n{model}, {batch}, {hardware}, NDP cycles: {backend}"


def backend_words(backend: str, calibrated: bool | None) -> str:
    """Where the NDP cycles came from, short (a result's ``ndp_calibrated``: None on the RTL)."""
    if backend == "rtl":
        return "RTL (Verilated)"
    return f"{backend} backend ({'calibrated' if calibrated else 'UNCALIBRATED'})"


def label_bars(ax, bars, fmt: str = "{:.3g}", fontsize: int = 7) -> None:
    """Each bar of ``bars`` (what ``ax.bar`` returned) labelled with its height (``fmt``), above
    the bar; a stacked segment's label inside it."""
    ax.bar_label(bars, labels=[fmt.format(b.get_height()) for b in bars], fontsize=fontsize,
                 padding=1)


def distinct_curves(curves) -> list:
    """``curves`` (``(label, values)`` pairs, in drawing order) with the curves whose values are
    equal merged into one, labelled ``"A = B"``: ``[(label, values), ...]`` in the order of
    their first appearance."""
    out = []
    for label, values in curves:
        values = list(values)
        same = next((i for i, (_, v) in enumerate(out) if v == values), None)
        if same is None:
            out.append((label, values))
        else:
            out[same] = (f"{out[same][0]} = {label}", values)
    return out
