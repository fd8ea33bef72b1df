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


def run_title(what: str, *, model: str, batch: str, hardware: str, backend: str,
              calibrated: bool | None = None, dimms: int | None = None,
              units: int | None = None) -> str:
    """A figure's title: ``what`` on its first line, then the run: ``model``, ``batch`` (e.g.
    ``"batch 16"`` or ``"768 tokens/step"``), ``hardware`` (with ``dimms`` NDP-DIMMs of
    ``units`` GEMV units when given) and where the NDP cycles came from (``backend`` and the
    result's ``ndp_calibrated``: :func:`backend_words`; ``backend`` None: no NDP tier)."""
    if dimms is not None:
        hardware += f" ({dimms} NDP-DIMMs" + (f" of {units} units)" if units else ")")
    cycles = "no NDP tier" if backend is None else backend_words(backend, calibrated)
    return f"{what}\n{model}, {batch}, {hardware}, NDP cycles: {cycles}"


def backend_words(backend: str, calibrated: bool | None) -> str:
    """Where the NDP cycles came from, short (a result's ``ndp_calibrated``: None on the RTL, or
    where runs of several cores are drawn together)."""
    if backend == "rtl":
        return "RTL (Verilated)"
    if calibrated is None:
        return f"{backend} backend"
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
