"""Reproductions of the papers the scenarios model (``ndpdimm reproduce``, issue 29).

Each paper's evaluation set-up, run as closely as the paper documents it, our figure beside the
published one with the ratio, an explanation for every figure outside +-25 %, and a
one-at-a-time sensitivity of each headline over parameters whose ranges come from sources.

``core`` (:class:`~ndpdimm.sw.reproduce.core.Figure`, ``Reproduction``, the checks and the
outputs), ``params`` (the parameter files ``sw/configs/reproduce/<paper>.toml``: every value
with its source), one module per paper exposing ``reproduce(*, reduced=False, progress=print)``:
``hermes``, ``trimoe``, ``rapid``. :data:`PAPERS` names them; :func:`load_paper` imports one
lazily, so a paper whose module is not in this checkout gives a clear error; :func:`run` is
``ndpdimm reproduce`` (each paper's table printed and its files written).

May import: as ``ndpdimm.sw`` (``hw``, ``sw``, ``cosim.backend``, ``cosim.golden``,
``cosim.timeline``); never a backend class.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from ndpdimm.sw.reproduce.core import Reproduction, ReproductionError

__all__ = ["PAPERS", "load_paper", "check_papers", "run"]

#: paper name -> module that reproduces it (imported on demand)
PAPERS = {
    "hermes": "ndpdimm.sw.reproduce.hermes",
    "trimoe": "ndpdimm.sw.reproduce.trimoe",
    "rapid": "ndpdimm.sw.reproduce.rapid",
}


def _import(paper: str, module: str) -> Callable[..., Reproduction]:
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module:
            raise
        raise ReproductionError(f"the {paper} reproduction ({module}) is not in this checkout") from None
    fn = getattr(mod, "reproduce", None)
    if not callable(fn):
        raise ReproductionError(f"{module} has no reproduce() function")
    return fn


def load_paper(paper: str) -> Callable[..., Reproduction]:
    """The ``reproduce`` function of ``paper`` (a key of :data:`PAPERS`)."""
    if paper not in PAPERS:
        raise ReproductionError(f"unknown paper {paper!r} (papers: {', '.join(PAPERS)})")
    return _import(paper, PAPERS[paper])


def check_papers(papers) -> list[Callable[..., Reproduction]]:
    """The ``reproduce`` functions of all ``papers``, every one imported before any runs: a
    missing one is an error naming it before anything is computed."""
    return [load_paper(p) for p in papers]


def run(papers, out_dir="build/reproduce", *, reduced: bool = False,
        progress: Callable[[str], None] = print) -> list[Reproduction]:
    """``ndpdimm reproduce``: each paper in turn, its table printed and its files written into
    ``out_dir``; progress lines carry the elapsed time. Every paper's module is imported and
    the output folder checked before the first one runs."""
    import time
    from pathlib import Path

    from ndpdimm.sw.reproduce.core import format_table, write_outputs

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ReproductionError(f"--out {str(out)!r} is a file, not a folder")
    functions = check_papers(papers)
    start = time.perf_counter()
    results = []
    for paper, fn in zip(papers, functions, strict=True):
        t0 = time.perf_counter()

        def log(msg: str, paper=paper) -> None:
            progress(f"[{time.perf_counter() - start:7.1f} s] {paper}: {msg}")

        log("start" + (" (reduced set-up)" if reduced else ""))
        rep = fn(reduced=reduced, progress=log)
        files = write_outputs(rep, out)
        progress(f"\n{rep.title} ({rep.reference})\n\n{format_table(rep)}\n")
        for n in rep.notes:
            progress(f"  note: {n}")
        for f in files:
            log(f"wrote {f}")
        log(f"done in {time.perf_counter() - t0:.1f} s")
        results.append(rep)
    return results
