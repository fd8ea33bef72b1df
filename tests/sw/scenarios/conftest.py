"""The rules every scenario figure follows (``sw/scenarios/figures.py``), checked on the
figures of a run: ``check_figures(figures, needles)`` fails naming the figure and the rule."""

import re

import pytest


def _numeric(labels) -> bool:
    """Whether tick labels are numbers (a numeric axis) rather than category names."""
    texts = [t.get_text() for t in labels if t.get_text()]
    return not texts or all(re.fullmatch(r"[−\-+0-9.,eE$^{}\\mathdefault ]+", t) for t in texts)


def _labelled(ax, axis: str) -> str:
    """The axis label of ``ax`` or of an axes sharing that axis with it (a shared axis is
    labelled once)."""
    get = (lambda a: a.get_xlabel()) if axis == "x" else (lambda a: a.get_ylabel())
    shared = ax.get_shared_x_axes() if axis == "x" else ax.get_shared_y_axes()
    return next((get(a) for a in [ax, *shared.get_siblings(ax)] if get(a)), "")


def check_figures(figures: dict, needles) -> None:
    """Every figure: a title naming each of ``needles`` (model, batch, hardware, backend); every
    numeric axis labelled with a unit in parentheses; every bar's value written on it; no two
    legend entries with the same curve."""
    import matplotlib.pyplot as plt
    from matplotlib.container import BarContainer

    assert figures
    for name, fig in figures.items():
        fig.canvas.draw()                      # tick labels exist once drawn
        axes = [a for a in fig.axes if a.get_label() != "<colorbar>" and a.get_visible()]
        titles = " ".join([fig._suptitle.get_text() if fig._suptitle else ""]
                          + [a.get_title() for a in axes])
        for needle in needles:
            assert needle in titles, f"{name}: the title does not name {needle!r}: {titles!r}"
        for ax in axes:
            for axis, ticks in (("x", ax.get_xticklabels()), ("y", ax.get_yticklabels())):
                if not _numeric(ticks):
                    continue                   # categories: the tick labels say what they are
                label = _labelled(ax, axis)
                assert re.search(r"\(.+\)", label), f"{name}: {axis} axis without a unit: {label!r}"
            bars = [b for c in ax.containers if isinstance(c, BarContainer) for b in c]
            xs = {round(b.get_x() + b.get_width() / 2, 6) for b in bars if b.get_height()}
            assert len(ax.texts) >= len(xs), f"{name}: {len(xs)} bars, {len(ax.texts)} values"
            curves = [tuple(map(tuple, line.get_xydata())) for line in ax.get_lines()
                      if not line.get_label().startswith("_")]
            assert len(curves) == len(set(curves)), f"{name}: two legend entries, one curve"
        plt.close(fig)


@pytest.fixture
def figure_rules():
    return check_figures
