"""Every dotted name and repository path written in a docstring of ``cosim/``, ``hw/``, ``synth/`` and ``sw/``, or in a docs page, resolves.

A docstring that names ``cosim.gemv_job.GemvJob`` or ``hw/dram_controller.POLICIES`` after
the module moved sends its reader nowhere, and nothing else notices. This test reads the
docstrings (module, class, function) with ``ast``, and the ``#:`` comments that document
constants, and checks:

* dotted names starting with ``cosim.``, ``hw.`` or ``synth.`` (``ndpdimm.`` in front or not),
  ``ndpdimm.bench.`` or ``ndpdimm.sw.``
  (``:class:`~ndpdimm.cosim.link.channel.LinkChannel```, ``cosim.golden.core.CoreModel``):
  the longest prefix that is a module of the repository, then each further part an
  attribute the module or class defines (a function, class, assignment, import, or
  ``self.<name>`` set in a method); past a function or a value the chain is not followed;
* repository paths starting with ``cosim/``, ``hw/``, ``synth/``, ``sw/``, ``bench/``, ``tests/``
  or ``docs/`` (``cosim/rtl/benches/core.py``, ``cosim/dram/cpp/dram_model.{h,cpp}``): the file
  or folder exists; ``path/module.Name`` names an attribute of that module; a test id
  ``tests/x.py::test_y`` names a function of that file;
* Sphinx references by suffix (``:class:`~.formats.LinkConfig```): some module whose name
  ends with the prefix defines the name.

The Markdown pages (``README.md``, ``CONTRIBUTING.md``, ``docs/*.md``, ``wip/*.md``) are
checked whole the same way, and their relative links must reach a file or folder; the first
column of an old -> new table (header ``| old ...``) is skipped, as it names what moved.

Not checked (yet): ``sw.`` without ``ndpdimm.`` in front (it reads as a
variable too often); paths with wildcards or placeholders (``hw/configs/*``, ``<cache>/rtl``).
"""

import ast
import functools
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: The folders whose docstrings are checked.
CHECKED = ("cosim", "hw", "synth", "sw")
PACKAGES = ("hw", "cosim", "sw", "synth", "bench")

DOTTED = re.compile(r"(?<![\w./-])(?:(?:ndpdimm\.)?(?:cosim|hw|synth)|ndpdimm\.(?:bench|sw))(?:\.[A-Za-z_]\w*)+")
PATH = re.compile(r"(?<![\w./<>$-])(?:cosim|hw|synth|sw|bench|tests|docs)/[\w./{},:*<>-]*[\w}/*>]")
#: A Sphinx cross-reference by suffix (``:class:`~.formats.LinkConfig```): any module whose
#: name ends with the dotted prefix may hold it, as Sphinx searches
#: a file name that reads as a dotted name in a page (``cosim.md``, ``synth.py``)
FILE_SUFFIX = re.compile(r"\.(?:md|py|json|toml|png|txt|h|cpp|v|sv)$")
#: a Markdown link to a relative target (not a URL, not an anchor of the same page)
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")
RELATIVE = re.compile(r":(?:mod|class|func|data|meth|attr|exc|obj):`~?(\.[A-Za-z_][\w.]*)`")
#: (file, reference): why it is not ours to resolve
NOT_OURS = {
    ("synth/sram_macro.py", "docs/source/results.md"): "a path in OpenRAM's repository",
    ("docs/synth.md", "docs/source/results.md"): "a path in OpenRAM's repository",
    ("docs/memory_side.md", "bench/results/rank_queue_16/dram_gemv.json"):
        "a result of the history (removed in 42c29f3), named as the run it was",
    ("docs/perf_model.md", "bench/results/rank_queue_16/dram_gemv.json"):
        "a result of the history (removed in 42c29f3), named as the run it was",
    ("CONTRIBUTING.md", "hw/link/link_phy.py"): "the naming rule's counter-example",
    ("CONTRIBUTING.md", "sw/hermes_predictor.py"): "the naming rule's counter-example",
}


def docstrings(tree, source: str = "") -> list:
    """``(line, text)`` of the module's, every class's and every function's docstring, and of
    every ``#:`` comment line (the documentation of a constant)."""
    out = [(n, line.strip()[2:]) for n, line in enumerate(source.splitlines(), 1)
           if line.lstrip().startswith("#:")]
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    return list(dict.fromkeys(out))


@functools.cache
def parsed(path: Path):
    return ast.parse(path.read_text())


def module_file(parts) -> Path | None:
    """The file of module ``parts`` (``("cosim", "rtl", "build")``) in the repository."""
    if not parts or parts[0] not in PACKAGES + ("tests",):
        return None
    base = REPO.joinpath(*parts)
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


def defined_names(body) -> dict:
    """``{name: node}`` a module or class body defines (``None`` for plain values)."""
    names = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                names[a.asname or a.name.partition(".")[0]] = None
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With)):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [getattr(node, "target", None)] + [i.optional_vars for i in getattr(node, "items", [])]
            for t in targets:
                for n in ast.walk(t) if t is not None else ():
                    if isinstance(n, ast.Name):
                        names.setdefault(n.id, None)
        elif isinstance(node, (ast.If, ast.Try)):
            for inner in (node.body, node.orelse, *[h.body for h in getattr(node, "handlers", [])]):
                for k, v in defined_names(inner).items():
                    names.setdefault(k, v)
    return names


def class_names(cls: ast.ClassDef) -> dict:
    names = defined_names(cls.body)
    for node in ast.walk(cls):                           # self.x = ... in its methods
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id == "self" and isinstance(node.ctx, ast.Store):
            names.setdefault(node.attr, None)
    return names


def resolve_attributes(path: Path, attrs) -> str | None:
    """None if ``attrs`` resolve in module ``path``; else what is missing."""
    scope = defined_names(parsed(path).body)
    for i, attr in enumerate(attrs):
        if attr not in scope:
            return f"{path.relative_to(REPO)} defines no {'.'.join(attrs[:i + 1])}"
        node = scope[attr]
        if not isinstance(node, ast.ClassDef):
            return None                                  # a function or value: not followed
        scope = class_names(node)
    return None


@functools.cache
def all_modules() -> dict:
    """``{dotted module name without ndpdimm.: file}`` of every module of the packages."""
    out = {}
    for top in PACKAGES:
        for f in (REPO / top).rglob("*.py"):
            parts = f.relative_to(REPO).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def check_relative(ref: str) -> str | None:
    """``.a.b.C``: some module named ``...a.b`` (or ``...a``) defines ``C`` (``b.C``)."""
    parts = ref.lstrip(".").split(".")
    for n in range(len(parts), 0, -1):
        suffix = ".".join(parts[:n])
        files = [f for name, f in all_modules().items() if name == suffix or name.endswith("." + suffix)]
        if any(resolve_attributes(f, parts[n:]) is None for f in files):
            return None
    rest = '.'.join(parts[1:])
    return f"no module ending in .{parts[0]}" + (f" defines {rest}" if rest else "")


def check_dotted(name: str) -> str | None:
    parts = name.removeprefix("ndpdimm.").split(".")
    for n in range(len(parts), 0, -1):
        f = module_file(parts[:n])
        if f is not None:
            return resolve_attributes(f, parts[n:])
    return f"no module {'.'.join(parts[:2])}"


def expand(path: str) -> list:
    """``a.{h,cpp}`` -> ``a.h``, ``a.cpp``."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    return [p for alt in m.group(1).split(",") for p in expand(path[:m.start()] + alt + path[m.end():])]


def check_path(text: str) -> str | None:
    text = text.rstrip(".,:")
    for path in expand(text):
        path, _, test_id = path.partition("::")
        target = REPO / path
        if target.exists():
            if test_id and test_id.split("[")[0] not in defined_names(parsed(target).body):
                return f"{path} has no {test_id}"
            continue
        head, dot, attrs = path.partition(".")
        if attrs.startswith("py:"):                    # synth/flow.py:compose
            attrs = attrs[3:]
        module = REPO / f"{head}.py"
        if dot and module.is_file() and not attrs.startswith("py"):
            missing = resolve_attributes(module, attrs.split("."))
            if missing:
                return missing
            continue
        return f"{path} does not exist"
    return None


def old_columns_blanked(text: str) -> str:
    """``text`` with the first cell of every row of an old -> new table (header ``| old ...``)
    blanked: those cells name what no longer exists, on purpose."""
    lines, in_old_table = text.split("\n"), False
    for i, line in enumerate(lines):
        if not line.startswith("|"):
            in_old_table = False
        elif re.match(r"\|\s*old\b", line):
            in_old_table = True
        elif in_old_table:
            first_end = line.index("|", 1) if "|" in line[1:] else len(line)
            lines[i] = "|" + " " * (first_end - 1) + line[first_end:]
    return "\n".join(lines)


def page_texts(path: Path) -> list:
    """``(1, text)``: a Markdown page is checked whole (prose, tables and code blocks), its
    link targets resolved from its folder (``../cosim/timeline.py`` in ``docs/x.md``) and
    written as repository paths."""
    text = old_columns_blanked(path.read_text())
    links = []
    for m in LINK.finditer(text):
        target = (path.parent / m.group(1)).resolve()
        if target.is_relative_to(REPO):
            links.append((text[:m.start()].count("\n") + 1, target.relative_to(REPO).as_posix()))
    return [(1, text)], links


def check_link(target: str) -> str | None:
    """A relative link of a page: the file or folder exists."""
    return None if (REPO / target).exists() else f"{target} does not exist"


def references(path: Path) -> list:
    """``(line, kind, text)`` of every dotted name and repository path in ``path``'s docstrings
    (a Markdown page: in the whole page, and its relative links as paths)."""
    found = []
    if path.suffix == ".md":
        texts, links = page_texts(path)
        found += [(line, "link", target) for line, target in links]
    else:
        texts = docstrings(parsed(path), path.read_text())
    for line, doc in texts:
        for m in DOTTED.finditer(doc):
            if path.suffix == ".md" and FILE_SUFFIX.search(m.group(0)):
                continue                                 # ``cosim.md``: a page's name
            found.append((line + doc[:m.start()].count("\n"), "name", m.group(0)))
        for m in RELATIVE.finditer(doc):
            found.append((line + doc[:m.start()].count("\n"), "relative", m.group(1)))
        for m in PATH.finditer(doc):
            if not any(c in m.group(0) for c in "*<$"):
                found.append((line + doc[:m.start()].count("\n"), "path", m.group(0)))
    return found


def problems(files) -> list:
    bad = []
    for path in files:
        for line, kind, text in references(path):
            if path.is_relative_to(REPO) and (path.relative_to(REPO).as_posix(), text) in NOT_OURS:
                continue
            missing = {"name": check_dotted, "path": check_path, "relative": check_relative,
                       "link": check_link}[kind](text)
            if missing:
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                bad.append(f"{where}:{line}: {text}: {missing}")
    return bad


#: The Markdown pages checked: the docs and the repository's own pages.
PAGES = ("README.md", "CONTRIBUTING.md", "docs/*.md", "wip/*.md")


def checked_files() -> list:
    return [p for top in CHECKED for p in sorted((REPO / top).rglob("*.py"))]


def checked_pages() -> list:
    return [p for pattern in PAGES for p in sorted(REPO.glob(pattern))]


def test_docstring_references_resolve():
    files = checked_files()
    assert len(files) > 100, files
    bad = problems(files)
    assert not bad, "docstrings naming what does not exist:\n" + "\n".join(bad)


def test_docs_page_references_resolve():
    pages = checked_pages()
    assert len(pages) > 20, pages
    bad = problems(pages)
    assert not bad, "docs pages naming what does not exist:\n" + "\n".join(bad)


def test_references_are_found():
    """The scan sees the references it checks (a checker that finds none would pass on anything)."""
    refs = {text for f in checked_files() for _, _, text in references(f)}
    assert "ndpdimm.cosim.link.channel.LinkChannel" in refs      # :class:`~...` in benches/system.py
    assert "cosim/rtl/benches/core.py" in refs
    assert len(refs) > 100, len(refs)


STALE = [
    "Uses ``cosim.gemv_job.GemvJob``.",
    "See :class:`~ndpdimm.hw.ndp_core.NdpCore`.",
    "See ``cosim.golden.core.CoreModel.no_such_method``.",
    "The policies of ``hw/dram_controller.POLICIES``.",
    "Specified in ``cosim/harness/dram_model.h``.",
    "Both ``cosim/dram/cpp/dram_model.{h,hpp}``.",
    "Tested by ``tests/cosim/rtl/test_system_top.py::test_no_such_test``.",
    "Composed by ``synth/flow.py:no_such_function``.",
    "The ``hw/memory/port.NoSuchName`` constant.",
    "Run ``ndpdimm.bench.link._no_such_helper``.",
    "Frames of :class:`~.link_layer.LinkLayer`.",
    "Formats in :mod:`.link_formats`.",
]
RIGHT = [
    "Uses ``cosim.gemv.job.GemvJob`` and :class:`~ndpdimm.hw.core.ndp_core.NdpCore`.",
    "``cosim.golden.core.CoreModel.from_config`` and ``hw.memory.port.Status.OK``.",
    "Specified in ``cosim/dram/cpp/dram_model.{h,cpp}`` and ``docs/numerics.md``.",
    "Composed by ``synth/flow.py:compose``; ``hw/memory/port.Status.OK``; ``cosim/rtl/``.",
    "Tested by ``tests/cosim/rtl/test_system_top.py::test_relayout_round_trip_and_model[64-20]``.",
    ":class:`~.layer.LinkLayer`, :func:`~.descriptors.relayout_descriptor_layout`, :mod:`.formats`.",
]


@pytest.mark.parametrize("doc, stale", [(d, True) for d in STALE] + [(d, False) for d in RIGHT])
def test_checker_judges_a_reference(doc, stale, tmp_path):
    """A stale reference is caught, a right one is not, in a docstring and in a ``#:`` comment."""
    for form, text in (("docstring", f'"""{doc}"""\n'), ("comment", f"#: {doc}\nX = 1\n")):
        module = tmp_path / f"{form}.py"
        module.write_text(text)
        assert references(module), (form, doc)
        assert bool(problems([module])) == stale, (form, doc, problems([module]))


def test_checker_judges_a_page(tmp_path):
    """In a page: a stale path or name is caught, the old column of an old -> new table is
    not, a page's name is not a dotted name, and a relative link must reach a file."""
    page = tmp_path / "page.md"
    page.write_text("See `hw/gemv_engine.py` and `cosim.md`.\n")
    assert [p.split(": ", 2)[1] for p in problems([page])] == ["hw/gemv_engine.py"]
    page.write_text("| old | new |\n|---|---|\n| `hw/gemv_engine.py` | `hw/gemv/engine.py` |\n\n"
                    "Then `ndpdimm.cosim.gemv.job.GemvJob`.\n")
    assert references(page) and not problems([page])
    page.write_text("| old | new |\n|---|---|\n| `hw/gemv_engine.py` | `hw/gemv_unit.py` |\n")
    assert len(problems([page])) == 1                    # the new column is checked
    assert [m.group(1) for m in LINK.finditer("[a](../cosim/timeline.py#x) [b](https://x.org) [c](#y)")] \
        == ["../cosim/timeline.py"]
    assert check_link("cosim/timeline.py") is None and check_link("cosim/no_such.py")
