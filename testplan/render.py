"""The testplan: load its TOML files and render ``docs/testplan.md`` from them.

One file per part, mirroring the packages (``testplan/hw/memory.toml`` for ``hw/memory/``,
``testplan/hw.toml`` for ``hw/``'s own top-level modules, ``testplan/repository.toml`` for
the checks of the whole tree). A file holds::

    description = "what the part is, one line"

    [[testpoint]]
    name = "dma_errors"                       # unique in the whole plan
    desc = "the behaviour, corner or error it checks"
    modules = ["hw/memory/dma.py"]            # repository paths of the modules it covers
    tests = ["tests/hw/memory/test_dma.py::test_errors_change_nothing",   # pytest node ids
             "cosim/rtl/benches/datapath.py::bad_descriptors_change_nothing"]  # cocotb tests

    [[untested]]                              # a module no test covers, said openly
    module = "hw/x.py"
    reason = "why"

A pytest node id may leave out its parameters; a cocotb test is ``<bench file>::<name>``.
``tests/test_testplan.py`` checks the plan against the tree (every id, module and cocotb test
exists; every module and every test is in the plan) and that ``docs/testplan.md`` is what
this script renders. Run from the repository root::

    .venv/bin/python testplan/render.py          # rewrites docs/testplan.md
"""

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLAN = REPO / "testplan"
DOC = REPO / "docs" / "testplan.md"
#: The keys of a file, of a testpoint and of an untested entry, with their types.
FILE_KEYS = {"description": str, "testpoint": list, "untested": list}
TESTPOINT_KEYS = {"name": str, "desc": str, "modules": list, "tests": list}
UNTESTED_KEYS = {"module": str, "reason": str}


class PlanError(ValueError):
    """A testplan file that does not have the shape the module docstring describes."""


@dataclass(frozen=True)
class Testpoint:
    name: str
    desc: str
    modules: tuple
    tests: tuple


@dataclass(frozen=True)
class Part:
    """One file of the plan: ``part`` is its path below ``testplan/`` without ``.toml``."""
    part: str
    path: Path
    description: str
    testpoints: tuple
    untested: dict  # module path -> reason


def _check_keys(where: str, table: dict, keys: dict, required: tuple):
    for key in table:
        if key not in keys:
            raise PlanError(f"{where}: unknown key {key!r} (known: {', '.join(keys)})")
    for key in required:
        if key not in table:
            raise PlanError(f"{where}: missing key {key!r}")
    for key, value in table.items():
        if not isinstance(value, keys[key]):
            raise PlanError(f"{where}: {key!r} must be a {keys[key].__name__}, not {value!r}")
        if isinstance(value, str) and not value.strip():
            raise PlanError(f"{where}: {key!r} is empty")


def load_part(path: Path, root: Path = PLAN) -> Part:
    """One plan file, its shape checked; raises :class:`PlanError` naming file and key."""
    where = str(path.relative_to(root.parent)) if path.is_relative_to(root.parent) else str(path)
    try:
        doc = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise PlanError(f"{where}: not TOML: {e}") from None
    _check_keys(where, doc, FILE_KEYS, ("description", "testpoint"))
    points = []
    for i, tp in enumerate(doc["testpoint"]):
        at = f"{where}: testpoint {i} ({tp.get('name', '?')})"
        if not isinstance(tp, dict):
            raise PlanError(f"{at}: not a table")
        _check_keys(at, tp, TESTPOINT_KEYS, tuple(TESTPOINT_KEYS))
        for key in ("modules", "tests"):
            if not tp[key] and key == "tests":
                raise PlanError(f"{at}: 'tests' is empty")
            if not all(isinstance(x, str) and x for x in tp[key]):
                raise PlanError(f"{at}: {key!r} must hold non-empty strings")
            if len(set(tp[key])) != len(tp[key]):
                raise PlanError(f"{at}: {key!r} names an entry twice")
        points.append(Testpoint(tp["name"], tp["desc"], tuple(tp["modules"]), tuple(tp["tests"])))
    untested = {}
    for i, u in enumerate(doc.get("untested", [])):
        at = f"{where}: untested {i}"
        _check_keys(at, u, UNTESTED_KEYS, tuple(UNTESTED_KEYS))
        if u["module"] in untested:
            raise PlanError(f"{at}: {u['module']} listed twice")
        untested[u["module"]] = u["reason"]
    part = path.relative_to(root).with_suffix("").as_posix()
    return Part(part, path, doc["description"], tuple(points), untested)


def load_plan(root: Path = PLAN) -> list:
    """Every file of the plan, a folder's own file before its sub-packages' (``hw`` before
    ``hw/gemv``); testpoint names unique over the whole plan."""
    parts = sorted((load_part(p, root) for p in root.rglob("*.toml")), key=lambda p: p.part.split("/"))
    seen = {}
    for part in parts:
        for tp in part.testpoints:
            if tp.name in seen:
                raise PlanError(f"testpoint {tp.name!r} is in {seen[tp.name]} and {part.part}")
            seen[tp.name] = part.part
    return parts


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _code_list(items) -> str:
    return "<br>".join(f"`{_cell(x)}`" for x in items)


def render(parts: list) -> str:
    """``docs/testplan.md``: a summary, one table per part, the untested modules."""
    n_points = sum(len(p.testpoints) for p in parts)
    n_tests = len({t for p in parts for tp in p.testpoints for t in tp.tests})
    n_modules = len({m for p in parts for tp in p.testpoints for m in tp.modules})
    untested = [(m, r, p.part) for p in parts for m, r in p.untested.items()]
    out = [
        "# Testplan",
        "",
        "Generated from [`testplan/`](../testplan) by `testplan/render.py` "
        "(`.venv/bin/python testplan/render.py`): do not edit by hand. Each part lists its",
        "testpoints (a behaviour, a corner or an error), the modules each covers and the tests that",
        "check it: pytest node ids (parameters left out: every parameter set runs) and cocotb tests",
        "(`<bench>::<test>`, run through the pytest entry point beside them). `tests/test_testplan.py`",
        "fails when an id, module or cocotb test named here does not exist, when a module or a test",
        "is in no testpoint, or when this page is stale.",
        "",
        f"{len(parts)} parts, {n_points} testpoints, {n_modules} modules covered, "
        f"{len(untested)} modules untested, {n_tests} tests named.",
        "",
        "| part | description | testpoints |",
        "|---|---|---|",
    ]
    for p in parts:
        out.append(f"| [{p.part}](#{_anchor(p.part)}) | {_cell(p.description)} | {len(p.testpoints)} |")
    for p in parts:
        out += ["", f"## {p.part}", "", _cell(p.description), "",
                "| testpoint | behaviour | modules | tests |", "|---|---|---|---|"]
        for tp in p.testpoints:
            out.append(f"| {tp.name} | {_cell(tp.desc)} | {_code_list(tp.modules)} | {_code_list(tp.tests)} |")
        if p.untested:
            out += ["", "Untested here:", ""]
            out += [f"- `{m}`: {_cell(r)}" for m, r in p.untested.items()]
    out += ["", "## Untested modules", ""]
    if untested:
        out += [f"{len(untested)} modules no test covers, each with its reason:", "",
                "| module | reason | part |", "|---|---|---|"]
        out += [f"| `{m}` | {_cell(r)} | {part} |" for m, r, part in sorted(untested)]
    else:
        out.append("None.")
    return "\n".join(out) + "\n"


def _anchor(title: str) -> str:
    """GitHub's heading anchor: lower case, punctuation but ``-``/``_`` dropped, spaces to ``-``."""
    return "".join(c for c in title.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def main(argv=None) -> int:
    DOC.write_text(render(load_plan()))
    print(f"wrote {DOC.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
