"""The testplan (``testplan/``) against the tree, and ``docs/testplan.md`` rendered from it.

The plan answers "is X tested, and by what?" only while it is true, so this test reads the
sources with ``ast`` (no collection, no simulator) and fails when:

* a file lacks a required key or has an unknown one (the loader, ``testplan/render.py``);
* a pytest node id names a file under ``tests/`` or a test function (``test_*`` at module level,
  or in a ``Test*`` class) that does not exist; parameters in ``[...]`` may be left out, and
  when given the function must be parametrized;
* a cocotb test (``cosim/rtl/benches/<bench>.py::<name>``) is not an ``@cocotb.test`` function
  of that bench;
* a module path does not exist, a module of ``hw/``, ``cosim/``, ``sw/``, ``synth/`` or
  ``bench/`` (``__init__.py`` aside) is in no testpoint and not listed as untested, or one
  listed as untested is covered after all;
* a test function under ``tests/`` or a cocotb test of a bench is in no testpoint. This is a
  failure, not a count: a count grows unnoticed, while the fix is one line in the part's file
  (add the id to the testpoint whose behaviour the new test checks, or a new testpoint);
* ``docs/testplan.md`` differs from what the plan renders.

Modules that no test covers are listed in their part's ``[[untested]]`` table with a reason;
they are reported as a count (``test_untested_modules_are_counted``), not as a failure.
"""

import ast
import functools
import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("hw", "cosim", "sw", "synth", "bench")
BENCHES = "cosim/rtl/benches"


def _load_renderer():
    spec = importlib.util.spec_from_file_location("testplan_render", REPO / "testplan" / "render.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


render = _load_renderer()


def _decorated_parametrize(fn) -> bool:
    return any("parametrize" in ast.unparse(d) for d in fn.decorator_list)


@functools.cache
def pytest_tests(repo: Path = REPO) -> dict:
    """``tests/x.py::test_y`` (or ``::TestC::test_y``) -> whether it is parametrized, by ``ast``."""
    found = {}
    for path in sorted((repo / "tests").rglob("test_*.py")):
        rel = path.relative_to(repo).as_posix()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found[f"{rel}::{node.name}"] = _decorated_parametrize(node)
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                for m in node.body:
                    if isinstance(m, (ast.FunctionDef, ast.AsyncFunctionDef)) and m.name.startswith("test"):
                        found[f"{rel}::{node.name}::{m.name}"] = (_decorated_parametrize(m)
                                                                 or _decorated_parametrize(node))
    return found


@functools.cache
def cocotb_tests(repo: Path = REPO) -> frozenset:
    """``cosim/rtl/benches/<bench>.py::<name>`` of every ``@cocotb.test`` function."""
    found = set()
    for path in sorted((repo / BENCHES).glob("*.py")):
        rel = path.relative_to(repo).as_posix()
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    ast.unparse(d).startswith("cocotb.test") for d in node.decorator_list):
                found.add(f"{rel}::{node.name}")
    return frozenset(found)


@functools.cache
def package_modules(repo: Path = REPO) -> frozenset:
    """Every module of the packages, ``__init__.py`` aside, as a repository path."""
    return frozenset(p.relative_to(repo).as_posix() for d in PACKAGES for p in (repo / d).rglob("*.py")
                     if p.name != "__init__.py")


def missing_tests(parts, tests: dict, cocotb: frozenset) -> list:
    """Each test id of the plan that names nothing."""
    problems = []
    for part in parts:
        for tp in part.testpoints:
            for test in tp.tests:
                where = f"{part.part}: {tp.name}: {test}"
                if test.startswith(BENCHES + "/"):
                    if test not in cocotb:
                        problems.append(f"{where}: no such @cocotb.test in the bench")
                    continue
                base, _, params = test.partition("[")
                if not test.startswith("tests/"):
                    problems.append(f"{where}: neither a pytest node id under tests/ nor a cocotb test")
                elif base not in tests:
                    problems.append(f"{where}: no such test function")
                elif params and not tests[base]:
                    problems.append(f"{where}: parameters given but the test is not parametrized")
    return problems


def missing_modules(parts, repo: Path = REPO) -> list:
    """Each module path (of a testpoint or an untested entry) that is not a file of the tree."""
    problems = []
    for part in parts:
        for tp in part.testpoints:
            problems += [f"{part.part}: {tp.name}: no file {m}" for m in tp.modules if not (repo / m).is_file()]
        problems += [f"{part.part}: untested: no file {m}" for m in part.untested if not (repo / m).is_file()]
    return problems


def uncovered_modules(parts, modules: frozenset) -> list:
    """Modules in no testpoint and not listed as untested; untested ones that are covered."""
    covered = {m for p in parts for tp in p.testpoints for m in tp.modules}
    untested = {m: p.part for p in parts for m in p.untested}
    problems = [f"{m}: in no testpoint and not listed as untested" for m in sorted(modules - covered - set(untested))]
    problems += [f"{untested[m]}: {m} is listed as untested but a testpoint covers it"
                 for m in sorted(covered & set(untested))]
    return problems


def unplanned_tests(parts, tests: dict, cocotb: frozenset) -> list:
    """Test functions and cocotb tests that no testpoint names."""
    named = {t.partition("[")[0] for p in parts for tp in p.testpoints for t in tp.tests}
    left = sorted(set(tests) - named) + sorted(cocotb - named)
    return [f"{t}: in no testpoint" for t in left]


@pytest.fixture(scope="module")
def plan():
    return render.load_plan()


def test_every_file_loads_with_its_keys(plan):
    assert plan, "no testplan files under testplan/"
    assert all(p.testpoints for p in plan), [p.part for p in plan if not p.testpoints]


def test_every_named_test_exists(plan):
    assert missing_tests(plan, pytest_tests(), cocotb_tests()) == []


def test_every_module_exists(plan):
    assert missing_modules(plan) == []


def test_every_module_is_covered_or_listed_as_untested(plan):
    assert uncovered_modules(plan, package_modules()) == []


def test_every_test_is_in_a_testpoint(plan):
    problems = unplanned_tests(plan, pytest_tests(), cocotb_tests())
    assert problems == [], (f"{len(problems)} tests are in no testpoint: add each to the testpoint of "
                            f"its part (testplan/...) whose behaviour it checks:\n" + "\n".join(problems))


def test_untested_modules_are_counted(plan, capsys):
    untested = {m: r for p in plan for m, r in p.untested.items()}
    with capsys.disabled():
        print(f"\ntestplan: {len(untested)} of {len(package_modules())} modules untested"
              + "".join(f"\n  {m}: {r}" for m, r in sorted(untested.items())))
    assert all(r.strip() for r in untested.values())


def test_doc_is_rendered_from_the_plan(plan):
    assert render.DOC.read_text() == render.render(plan), (
        "docs/testplan.md is stale: run .venv/bin/python testplan/render.py")


def test_the_scans_see_the_tree():
    """A scan that finds nothing would let every check pass."""
    tests, cocotb = pytest_tests(), cocotb_tests()
    assert "tests/test_testplan.py::test_the_scans_see_the_tree" in tests
    assert tests["tests/hw/memory/test_dma.py::test_transfer"] is True
    assert f"{BENCHES}/sram.py::bank_conflicts" in cocotb
    assert "hw/memory/dma.py" in package_modules() and "hw/__init__.py" not in package_modules()


# --- the checks can fail: each on one deliberately wrong entry ---------------------------------

def _part(tests=("tests/hw/memory/test_dma.py::test_transfer",), modules=("hw/memory/dma.py",), untested=None):
    tp = render.Testpoint("wrong", "a deliberately wrong entry", tuple(modules), tuple(tests))
    return render.Part("hw/memory", REPO / "testplan/hw/memory.toml", "d", (tp,), untested or {})


@pytest.mark.parametrize("test, reason", [
    ("tests/hw/memory/test_dma.py::test_no_such_thing", "no such test function"),
    ("tests/hw/memory/test_no_such_file.py::test_transfer", "no such test function"),
    ("tests/hw/memory/test_dma.py::test_default_configuration[x]", "not parametrized"),
    (f"{BENCHES}/sram.py::no_such_cocotb_test", "no such @cocotb.test"),
    (f"{BENCHES}/streams.py::LayoutCodec", "no such @cocotb.test"),
    ("hw/memory/dma.py::transfer", "neither a pytest node id"),
])
def test_a_test_that_does_not_exist_is_caught(test, reason):
    problems = missing_tests([_part(tests=(test,))], pytest_tests(), cocotb_tests())
    assert len(problems) == 1 and reason in problems[0], problems
    assert missing_tests([_part(tests=("tests/hw/memory/test_dma.py::test_transfer[1-2]",
                                       f"{BENCHES}/sram.py::bank_conflicts"))], pytest_tests(), cocotb_tests()) == []


def test_a_module_that_does_not_exist_is_caught():
    problems = missing_modules([_part(modules=("hw/memory/no_such_block.py",),
                                      untested={"hw/memory/gone.py": "r"})])
    assert problems == ["hw/memory: wrong: no file hw/memory/no_such_block.py",
                        "hw/memory: untested: no file hw/memory/gone.py"]


def test_an_uncovered_module_is_caught():
    modules = frozenset({"hw/memory/dma.py", "hw/memory/sram.py"})
    assert uncovered_modules([_part()], modules) == ["hw/memory/sram.py: in no testpoint and not listed as untested"]
    assert uncovered_modules([_part(untested={"hw/memory/sram.py": "r"})], modules) == []
    problems = uncovered_modules([_part(untested={"hw/memory/dma.py": "r", "hw/memory/sram.py": "r"})], modules)
    assert problems == ["hw/memory: hw/memory/dma.py is listed as untested but a testpoint covers it"]


def test_a_test_in_no_testpoint_is_caught():
    tests = {"tests/a/test_b.py::test_c": False, "tests/a/test_b.py::test_d": True}
    cocotb = frozenset({f"{BENCHES}/x.py::t"})
    problems = unplanned_tests([_part(tests=("tests/a/test_b.py::test_d[1]",))], tests, cocotb)
    assert problems == ["tests/a/test_b.py::test_c: in no testpoint", f"{BENCHES}/x.py::t: in no testpoint"]


@pytest.mark.parametrize("text, reason", [
    ('description = "d"\n', "missing key 'testpoint'"),
    ('description = "d"\n[[testpoint]]\nname = "a"\ndesc = "b"\nmodules = []\n', "missing key 'tests'"),
    ('description = "d"\n[[testpoint]]\nname = "a"\ndesc = "b"\nmodules = []\ntests = []\n', "'tests' is empty"),
    ('description = "d"\n[[testpoint]]\nname = "a"\ndesc = "b"\nmodules = "m"\ntests = ["t"]\n',
     "'modules' must be a list"),
    ('description = "d"\n[[testpoint]]\nname = "a"\ndesc = ""\nmodules = []\ntests = ["t"]\n', "'desc' is empty"),
    ('description = "d"\ntestpoints = []\n', "unknown key 'testpoints'"),
    ('description = "d"\n[[testpoint]]\nname = "a"\ndesc = "b"\nmodules = []\ntests = ["t"]\n'
     '[[untested]]\nmodule = "m"\n', "missing key 'reason'"),
    ('description = \n', "not TOML"),
])
def test_a_malformed_file_is_refused_naming_file_and_key(tmp_path, text, reason):
    (tmp_path / "part.toml").write_text(text)
    with pytest.raises(render.PlanError, match=reason) as e:
        render.load_plan(tmp_path)
    assert "part.toml" in str(e.value)


def test_a_testpoint_name_used_twice_is_refused(tmp_path):
    text = 'description = "d"\n[[testpoint]]\nname = "a"\ndesc = "b"\nmodules = []\ntests = ["t"]\n'
    (tmp_path / "one.toml").write_text(text)
    (tmp_path / "two.toml").write_text(text)
    with pytest.raises(render.PlanError, match="'a' is in one and two"):
        render.load_plan(tmp_path)
