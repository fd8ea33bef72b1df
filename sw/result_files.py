"""Writing a run's results: a JSON file (numpy scalars as floats, typed results as their
``as_dict()``, the provenance fields of ``cosim/provenance.py`` in front: commit, dirty flag,
command line, date), PNG figures and the timeline, folders made."""

from pathlib import Path

from ndpdimm.cosim.provenance import dumps_finite, write_result

__all__ = ["write_json", "save_figure", "write_results"]


def _json_value(v):
    """What ``json`` cannot write itself: an object with ``as_dict()`` (a typed result), else a
    number (numpy scalars)."""
    as_dict = getattr(v, "as_dict", None)
    return as_dict() if callable(as_dict) else float(v)


def write_json(data, path) -> Path:
    """``data`` (JSON-ready, or a typed result with ``as_dict()``) as indented JSON at ``path``
    (parent folders created); returns the path. An object (a dict or a typed result) starts
    with the provenance fields (``cosim.provenance.write_result``; its own ``command``, if it
    has one, is kept as the command that reproduces it); a list is written as it is. NaN and
    infinity are refused naming the key (``allow_nan=False``): JSON has neither."""
    as_dict = getattr(data, "as_dict", None)
    if callable(as_dict):
        data = as_dict()
    if isinstance(data, dict):
        return write_result(data, path, default=_json_value)
    path = Path(path)
    text = dumps_finite(data, path, default=_json_value)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def save_figure(fig, path) -> Path:
    """A matplotlib figure laid out tightly and saved as ``path`` (120 dpi), then closed."""
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def write_results(r: dict, out_dir, write_report, log, timeline=None, timeline_file=None) -> list:
    """A scenario command's files: ``write_report(r, out_dir)`` and, with ``timeline``, the
    timeline at ``timeline_file``; each path logged as ``wrote PATH``; returns the paths."""
    files = write_report(r, out_dir)
    if timeline is not None:
        files.append(timeline.write(timeline_file))
    for f in files:
        log(f"wrote {f}")
    return files
