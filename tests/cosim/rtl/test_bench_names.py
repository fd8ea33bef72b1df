"""Every cocotb test that a caller of the cocotb runner names exists in the bench it names.

``ndpdimm.cosim.rtl.build.run(top, factory, params, bench, testcase=...)`` runs the cocotb
tests of the module ``bench`` that ``testcase`` selects; a name that matches no test makes
the run fail with "no cocotb test ran" -- but only when the simulation runs, which for most
entry points is ``make sim``. A renamed bench test therefore broke the RTL regression
silently once (``relayout_round_trip_cycles``, issue 43). This test reads the sources with
``ast`` (no simulator, no import of the benches), so it runs in ``make test``:

* every call of the runner under ``tests/``, ``bench/``, ``cosim/``, ``synth/`` and ``sw/``
  is found, its bench module and test names resolved: literals, module constants (also
  imported ones), local assignments, and parameters of the enclosing function followed to
  that function's callers in the same module (``run_bench("name")``), its defaults or its
  ``pytest.mark.parametrize`` values;
* each bench module exists and defines each named test as an ``@cocotb.test`` function (a
  ``@cocotb.parametrize``d test is selected by its full name, ``base/arg=value``: the
  runner anchors its filter at the end of the test's name).

An argument it cannot resolve fails the test, so a new way of calling the runner is taught
to the checker instead of escaping it.
"""

import ast
import functools
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
#: Folders whose Python may call the runner (``hw/`` may not import ``cosim``).
SCANNED = ("tests", "bench", "cosim", "synth", "sw")
#: The packaged folders: ``ndpdimm.<folder>...`` lives in ``<repo>/<folder>/...``.
PACKAGES = ("hw", "cosim", "sw", "synth", "bench")
RUNNER = "ndpdimm.cosim.rtl.build.run"
#: (file relative to the repository, test name): why it is meant not to exist
EXCEPTIONS = {
    ("tests/cosim/rtl/test_build.py", "no_such_test"):
        "checks that a filter selecting no test makes the run fail",
}


class Unresolved(Exception):
    """An argument the checker cannot turn into string values."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["ndpdimm", *parts] if parts[0] in PACKAGES else parts)


def module_path(name: str) -> Path | None:
    """The source file of module ``name`` in this repository, or None."""
    parts = name.split(".")
    if parts[0] == "ndpdimm":
        parts = parts[1:]
    if not parts or parts[0] not in PACKAGES + ("tests",):
        return None
    base = REPO.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


class Source:
    """One parsed module: its imports, module constants, functions and enclosing scopes."""

    def __init__(self, name: str, text: str, is_package: bool = False):
        self.name, self.tree = name, ast.parse(text)
        package = name if is_package else name.rpartition(".")[0]
        self.aliases, self.constants, self.functions, self.scope = {}, {}, {}, {}
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    head = a.name.partition(".")[0]
                    self.aliases[a.asname or head] = a.name if a.asname else head
            elif isinstance(node, ast.ImportFrom):
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = (f"{base}." if node.level else "") + (node.module or "")
                target = target.strip(".")
                for a in node.names:
                    self.aliases[a.asname or a.name] = f"{target}.{a.name}"
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions.setdefault(node.name, node)
                for inner in ast.walk(node):    # outer functions come first: the innermost wins
                    if inner is not node:
                        self.scope[id(inner)] = node
        for node in self.tree.body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.constants[target.id] = node.value

    def dotted(self, expr) -> str | None:
        """``a.b.c`` of a name or attribute chain, its first name resolved through the imports."""
        if isinstance(expr, ast.Call):
            expr = expr.func
        if isinstance(expr, ast.Name):
            return self.aliases.get(expr.id, f"{self.name}.{expr.id}")
        if isinstance(expr, ast.Attribute):
            head = self.dotted(expr.value)
            return head and f"{head}.{expr.attr}"
        return None


_sources: dict = {}


def load(name: str) -> Source | None:
    if name not in _sources:
        path = module_path(name)
        _sources[name] = path and Source(name, path.read_text(), path.name == "__init__.py")
    return _sources[name]


def values(src: Source, expr, func, depth=0) -> set:
    """The strings ``expr`` may hold (empty for ``None``), or :class:`Unresolved`."""
    if depth > 12:
        raise Unresolved("too deep")
    if isinstance(expr, ast.Constant):
        if expr.value is None:
            return set()
        if isinstance(expr.value, str):
            return {expr.value}
    elif isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
        return set().union(*(values(src, e, func, depth + 1) for e in expr.elts))
    elif isinstance(expr, ast.Name):
        return _name_values(src, expr.id, func, depth)
    raise Unresolved(ast.unparse(expr))


def _name_values(src: Source, name: str, func, depth) -> set:
    if func is not None:
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if name in params or name in [a.arg for a in func.args.kwonlyargs]:
            return _parameter_values(src, func, name, depth)
        assigned = _local_assignments(func, name)
        if assigned:
            return set().union(*(values(src, e, func, depth + 1) for e in assigned))
        return _name_values(src, name, src.scope.get(id(func)), depth)
    if name in src.constants:
        return values(src, src.constants[name], None, depth + 1)
    module, _, attr = src.aliases.get(name, "").rpartition(".")
    other = module and load(module)
    if other and attr in other.constants:
        return values(other, other.constants[attr], None, depth + 1)
    raise Unresolved(name)


def _local_assignments(func, name) -> list:
    """The value expressions of every ``name = ...`` (also unpacked) inside ``func``."""
    found = []
    for node in ast.walk(func):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name) and target.id == name:
                found.append(node.value)
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                for t, v in zip(target.elts, node.value.elts):
                    if isinstance(t, ast.Name) and t.id == name:
                        found.append(v)
    return found


def _parameter_values(src: Source, func, name, depth) -> set:
    """Values of parameter ``name`` of ``func``: at its calls in the module, else from its
    ``pytest.mark.parametrize``; a test function's other parameters are fixtures (unresolved)."""
    positional = [a.arg for a in func.args.posonlyargs + func.args.args]
    defaults = dict(zip(positional[len(positional) - len(func.args.defaults):], func.args.defaults))
    defaults.update({a.arg: d for a, d in zip(func.args.kwonlyargs, func.args.kw_defaults) if d})
    calls = [c for c in ast.walk(src.tree) if isinstance(c, ast.Call)
             and isinstance(c.func, ast.Name) and c.func.id == func.name]
    found = set()
    for call in calls:
        caller = src.scope.get(id(call))
        given = [k.value for k in call.keywords if k.arg == name]
        if given:
            found |= values(src, given[0], caller, depth + 1)
        elif name in positional and positional.index(name) < len(call.args):
            found |= values(src, call.args[positional.index(name)], caller, depth + 1)
        elif name in defaults:
            found |= values(src, defaults[name], None, depth + 1)
        else:
            raise Unresolved(f"{name} at the call on line {call.lineno}")
    if calls:
        return found
    for deco in func.decorator_list:
        if isinstance(deco, ast.Call) and src.dotted(deco.func) == "pytest.mark.parametrize":
            names = [n.strip() for n in values(src, deco.args[0], None, depth + 1).pop().split(",")]
            if name in names:
                rows = deco.args[1]
                if not isinstance(rows, (ast.List, ast.Tuple)):
                    raise Unresolved(f"parametrize values of {name}")
                i = names.index(name)
                return set().union(*(values(src, r.elts[i] if len(names) > 1 else r, None, depth + 1)
                                     for r in rows.elts))
    if func.name.startswith("test"):
        raise Unresolved(f"{name}: a fixture of {func.name}")
    return set()                        # a helper nobody calls runs nothing


def runner_calls(src: Source, rel: str) -> list:
    """``[(where, bench modules, test names or None for all, problem)]`` of every runner call."""
    out = []
    for call in ast.walk(src.tree):
        if not (isinstance(call, ast.Call) and src.dotted(call.func) == RUNNER):
            continue
        where, func = f"{rel}:{call.lineno}", src.scope.get(id(call))
        bench = [k.value for k in call.keywords if k.arg == "test_module"] or call.args[3:4]
        testcase = [k.value for k in call.keywords if k.arg == "testcase"]
        try:
            if not bench:
                raise Unresolved("no bench module")
            benches = values(src, bench[0], func)
            names = values(src, testcase[0], func) if testcase else set()
            out.append((where, benches, names, None))
        except Unresolved as e:
            out.append((where, set(), set(), f"cannot resolve {e}"))
    return out


def cocotb_tests(src: Source) -> tuple:
    """(names of ``@cocotb.test`` functions, names of ``@cocotb.parametrize``d ones)."""
    plain, parametrized = set(), set()
    for node in src.tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        decorators = {src.dotted(d) for d in node.decorator_list}
        if "cocotb.test" in decorators:
            (parametrized if "cocotb.parametrize" in decorators else plain).add(node.name)
    return plain, parametrized


def problems(sources: dict) -> list:
    """``[(where, message)]`` for ``{relative path: Source}``: unresolved arguments, missing
    bench modules, names that are no test of their bench."""
    bad = []
    for rel, src in sorted(sources.items()):
        for where, benches, names, problem in runner_calls(src, rel):
            if problem:
                bad.append((where, problem))
            for bench in sorted(benches):
                module = load(bench)
                if module is None:
                    bad.append((where, f"bench module {bench} does not exist"))
                    continue
                plain, parametrized = cocotb_tests(module)
                for name in sorted(names):
                    if (rel, name) in EXCEPTIONS or name in plain or \
                            name.partition("/")[0] in parametrized and "/" in name:
                        continue
                    hint = " (parametrized: name it base/arg=value)" if name in parametrized else ""
                    bad.append((where, f"{bench} has no cocotb test {name!r}{hint}; "
                                       f"its tests: {', '.join(sorted(plain | parametrized))}"))
    return bad


@functools.cache
def repository_sources() -> dict:
    sources = {}
    for top in SCANNED:
        for path in sorted((REPO / top).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            sources[rel] = Source(module_name(path), path.read_text(), path.name == "__init__.py")
    return sources


def test_every_named_cocotb_test_exists():
    bad = problems(repository_sources())
    assert not bad, "cocotb runner calls naming what their bench does not define:\n" + "\n".join(
        f"  {where}: {message}" for where, message in bad)


def test_the_runner_calls_are_found():
    """The scan sees the entry points (a checker that finds no call would pass on anything)."""
    found = {}
    for rel, src in repository_sources().items():
        for _, benches, names, _ in runner_calls(src, rel):
            for bench in benches:
                found.setdefault(rel, set()).update((bench.rpartition(".")[2], n) for n in names)
    assert ("system", "relayout_round_trip") in found["tests/cosim/rtl/test_system_top.py"]
    assert ("sram", "random_traffic_test") in found["tests/hw/memory/test_sram_cocotb.py"]
    assert ("engine", "run_job_file") in found["cosim/rtl/gemv.py"]
    assert ("datapath", "run_job_file") in found["cosim/rtl/gemv.py"]
    callers = {rel for rel in found if rel.startswith("tests/")}
    assert len(callers) >= 9, sorted(callers)


def test_exceptions_are_still_needed():
    sources = repository_sources()
    for rel, name in EXCEPTIONS:
        assert any(name in names for _, _, names, _ in runner_calls(sources[rel], rel)), (rel, name)


WRAPPER = """
from ndpdimm.cosim.rtl import build as rtl_build
BENCH = "ndpdimm.cosim.rtl.benches.system"

def run_bench(testcase, seed=1):
    return rtl_build.run("top", "m:f", dict(), BENCH, testcase=testcase, seed=seed)

def test_it():
    run_bench({name!r})
"""


@pytest.mark.parametrize("source", [
    WRAPPER.format(name="relayout_round_trip_cycles"),
    "from ndpdimm.cosim.rtl.build import run\n"
    "run('t', 'm:f', {}, 'ndpdimm.cosim.rtl.benches.system', testcase=['relayout_round_trip', 'x'])",
    "from ndpdimm.cosim.rtl import build\n"
    "build.run('t', 'm:f', {}, test_module='ndpdimm.cosim.rtl.benches.no_such_bench')",
    "import pytest\nfrom ndpdimm.cosim.rtl import build\n"
    "@pytest.mark.parametrize('case', ['traffic_test', 'trafic_test'])\n"
    "def test_it(case):\n"
    "    build.run('t', 'm:f', {}, 'ndpdimm.cosim.rtl.benches.link_pair', testcase=case)",
    "from ndpdimm.cosim.rtl import build\n"
    "def test_it(name_from_a_fixture):\n"
    "    build.run('t', 'm:f', {}, 'ndpdimm.cosim.rtl.benches.system', testcase=name_from_a_fixture)",
], ids=["through-a-wrapper", "in-a-list", "missing-bench", "parametrized", "unresolvable"])
def test_checker_catches_a_wrong_name(source):
    assert problems({"tests/wrong.py": Source("tests.wrong", source)}), source


def test_checker_accepts_right_names():
    good = WRAPPER.format(name="relayout_round_trip")
    assert not problems({"tests/right.py": Source("tests.right", good)})
