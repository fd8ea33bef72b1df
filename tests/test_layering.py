"""The import graph of the installed package keeps the layering the docs promise.

Data flows one way (CONTRIBUTING.md, each package's ``__init__`` docstring):

* ``ndpdimm.hw`` (the RTL) imports nothing of ours but ``ndpdimm.hw``;
* ``ndpdimm.cosim`` (golden model, RTL harness, performance model, DRAM and link
  models) imports ``hw`` and itself; inside it the models the RTL is checked against sit
  below the RTL and the performance model: ``cosim.golden``, ``cosim.gemv``, ``cosim.dram``
  and ``cosim.link`` import ``hw``, each other and ``cosim``'s top-level modules
  (``backend``, ``cache``, ...), never ``cosim.rtl``, ``cosim.model`` or the rest;
* ``ndpdimm.synth`` imports ``hw`` and ``cosim`` (the Verilog elaboration helpers);
* ``ndpdimm.sw.driver`` (the host driver) imports ``hw`` and ``cosim`` (the backends);
* the rest of ``ndpdimm.sw`` (scenarios, sweeps, real-layer runs) reaches ``cosim``
  only through the driver, the backend interface ``cosim.backend`` (``CoreConfig``,
  ``Completion``), the golden model ``cosim.golden`` it checks results against and the
  timeline writer ``cosim.timeline`` (one Chrome-trace format for the scenarios' schedules
  and the driver's descriptor timelines) and the provenance writer ``cosim.provenance`` (the
  commit, dirty flag, command and date every result records): never a backend class (``cosim.model.backend``,
  ``cosim.rtl.harness``) or anything else below the driver;
* the entry points at the top, the command line ``ndpdimm.sw.cli`` with its commands
  ``ndpdimm.sw.commands`` (one module per ``ndpdimm`` command: it runs the benchmark suites,
  synthesis, the calibration, the RTL harness) and the benchmark suites ``ndpdimm.bench``, may
  import anything; nothing else in ``ndpdimm.sw`` imports the command line.

Inside ``ndpdimm.sw`` (``FORBIDDEN``): the NDP kernels (``sw/kernels``) sit below every
scenario, the sampled co-simulation and the calibration's streams (``sw/sampling``) reach the
kernels only through ``sw/kernels`` and import no scenario, no scenario package imports another,
and the modules the scenarios share (catalogue, GPU model, energy catalogue, run context)
import none of them. Across the whole of ``ndpdimm.sw`` no module imports an underscore
name of another module (the rule below), and nothing outside ``sw/driver`` reaches past the
driver into ``dimm.backend``.

Every import counts, including the lazy ones inside functions and those under
``TYPE_CHECKING``. The few deliberate exceptions are listed in ``EXCEPTIONS`` with their reason.

In ``ndpdimm.cosim``, ``ndpdimm.synth`` and ``ndpdimm.sw`` no module uses another module's private
(underscore) name: not by importing it (``from ..build import _file_lock``; a private module
is imported only inside its own package) nor through an imported module
(``model._is_int``). What two modules share is public, documented API.
"""

import ast
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

TOPS = ("ndpdimm.hw", "ndpdimm.cosim", "ndpdimm.synth", "ndpdimm.sw", "ndpdimm.bench")
ANY = ("ndpdimm",)
#: cosim's sub-packages below ``cosim.rtl`` and ``cosim.model``: the models the RTL is checked
#: against, which the RTL benches and the performance model build on
COSIM_LOWER = ("ndpdimm.cosim.golden", "ndpdimm.cosim.gemv", "ndpdimm.cosim.dram", "ndpdimm.cosim.link")
#: cosim's top-level modules (``backend``, ``cache``, ``timeline``, ...), usable from every part
COSIM_TOP_MODULES = tuple(
    f"ndpdimm.cosim.{p.stem}" for p in sorted((Path(__file__).resolve().parents[1] / "cosim").glob("*.py"))
    if p.stem != "__init__")
#: packages in which no module uses another module's private name
NO_PRIVATE_USE = ("ndpdimm.cosim", "ndpdimm.synth", "ndpdimm.sw")

#: (module prefix, import prefixes it may use); the longest matching prefix applies
RULES = (
    ("ndpdimm.hw", ("ndpdimm.hw",)),
    ("ndpdimm.cosim", ("ndpdimm.hw", "ndpdimm.cosim")),
    *((lower, ("ndpdimm.hw",) + COSIM_LOWER + COSIM_TOP_MODULES) for lower in COSIM_LOWER),
    ("ndpdimm.synth", ("ndpdimm.hw", "ndpdimm.cosim", "ndpdimm.synth")),
    ("ndpdimm.sw.driver", ("ndpdimm.hw", "ndpdimm.cosim", "ndpdimm.sw.driver")),
    # cosim.timeline: the one Chrome-trace/Perfetto writer, shared by the scenarios' timelines
    # and the driver's descriptor timelines; cosim.provenance: the one writer of a result's
    # commit, dirty flag, command and date (both import nothing of ours)
    ("ndpdimm.sw", ("ndpdimm.hw", "ndpdimm.sw", "ndpdimm.cosim.backend", "ndpdimm.cosim.golden",
                    "ndpdimm.cosim.timeline", "ndpdimm.cosim.provenance")),
    ("ndpdimm.sw.cli", ANY),
    # the commands of the CLI, one module each (sw/commands/): at the top like sw/cli.py, as
    # `ndpdimm bench`, `synth`, `calibrate` and `fuzz` run what sits below sw (their heavy
    # imports are inside their run(), so `ndpdimm --help` imports none of it)
    ("ndpdimm.sw.commands", ANY),
    ("ndpdimm.bench", ANY),
)

SCENARIOS = ("ndpdimm.sw.scenarios.hermes", "ndpdimm.sw.scenarios.trimoe", "ndpdimm.sw.scenarios.rapid")
#: the command line, which nothing below it in ``ndpdimm.sw`` imports
CLI = ("ndpdimm.sw.cli", "ndpdimm.sw.commands")
#: (module prefix, import prefixes it may not use), on top of ``RULES``; every matching entry applies
FORBIDDEN = (
    ("ndpdimm.sw.kernels", ("ndpdimm.sw.scenarios", "ndpdimm.sw.sampling", "ndpdimm.sw.sweep",
                            "ndpdimm.sw.reproduce") + CLI),
    ("ndpdimm.sw.sampling", ("ndpdimm.sw.scenarios", "ndpdimm.sw.reproduce") + CLI),
    *((f"ndpdimm.sw.{below}", CLI) for below in ("driver", "layer", "scenarios", "reproduce",
                                                  "sweep", "result_files")),
    *((own, tuple(s for s in SCENARIOS if s != own)) for own in SCENARIOS),
    *((f"ndpdimm.sw.scenarios.{shared}", SCENARIOS)
      for shared in ("catalog", "gpu", "measured", "energy", "base")),
)

#: (importing module, imported prefix): why the rule does not apply
EXCEPTIONS = {
    ("ndpdimm.sw.layer.engine_demo", "ndpdimm.cosim.gemv"):
        "the engine-level demo (`ndpdimm demo --real-layer`) drives the GEMV datapath RTL "
        "under cocotb, below the driver: it describes its jobs as GEMV stream traffic",
    ("ndpdimm.sw.layer.engine_demo", "ndpdimm.cosim.rtl.gemv"):
        "the engine-level demo runs its jobs on the GEMV datapath RTL under cocotb",
    ("ndpdimm.sw.sweep.regress", "ndpdimm.cosim.rtl.build"):
        "the sharded RTL regression gives its pytest workers the Verilator environment",
}


def rule_for(module: str) -> tuple:
    best = max((p for p, _ in RULES if module == p or module.startswith(p + ".")), key=len)
    return dict(RULES)[best]


def bindings_of(source: str, module: str, is_package: bool) -> list:
    """``(line, local name, full name)`` of every import in ``source``, relative imports resolved."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                target = base + ("." + node.module if node.module else "")
            else:
                target = node.module or ""
            found += [(node.lineno, a.asname or a.name, f"{target}.{a.name}") for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.asname or a.name.partition(".")[0],
                       a.name if a.asname else a.name.partition(".")[0]) for a in node.names
                      if a.asname or "." not in a.name] + \
                     [(node.lineno, None, a.name) for a in node.names if not a.asname and "." in a.name]
    return found


def imports_of(source: str, module: str, is_package: bool) -> list:
    """Every ``ndpdimm`` module or name a source imports, relative imports resolved."""
    return [(line, name) for line, _, name in bindings_of(source, module, is_package)
            if name.startswith("ndpdimm.")]


def _allowed(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def forbidden_for(module: str) -> tuple:
    return tuple(p for m, ps in FORBIDDEN if module == m or module.startswith(m + ".") for p in ps)


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def private_uses(source: str, module: str, is_package: bool) -> list:
    """``[(line, name)]``: another module's private name that ``source`` imports (a private
    module outside its own package included) or reaches through a name it imported
    (``alias._name``)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for line, name in imports_of(source, module, is_package):
        parts = name.split(".")
        for i, part in enumerate(parts):
            owner = ".".join(parts[:i])
            if _private(part) and not (package == owner or package.startswith(owner + ".")):
                found.append((line, name))
                break
    imported = {local: name for _, local, name in bindings_of(source, module, is_package)
                if local and name.startswith("ndpdimm.")}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in imported and _private(node.attr):
            found.append((node.lineno, f"{imported[node.value.id]}.{node.attr}"))
    return found


def violations(sources: dict) -> list:
    """``[(module, line, imported name)]`` breaking the rules, for ``{module: (source, is_package)}``."""
    bad = []
    for module, (source, is_package) in sorted(sources.items()):
        allowed = rule_for(module)
        forbidden = forbidden_for(module)
        for line, name in imports_of(source, module, is_package):
            if _allowed(name, allowed) and not _allowed(name, forbidden):
                continue
            if any(m == module and _allowed(name, (p,)) for m, p in EXCEPTIONS):
                continue
            bad.append((module, line, name))
        if _allowed(module, NO_PRIVATE_USE):
            bad += [(module, line, name) for line, name in private_uses(source, module, is_package)]
    return bad


def backend_reaches(sources: dict) -> list:
    """``[(module, line)]`` of ``ndpdimm.sw`` modules outside the driver that reach past the driver:
    an attribute of ``<x>.backend`` (``dimm.backend.cycle``) or ``getattr(<x>.backend, ...)``."""
    bad = []
    for module, (source, _) in sorted(sources.items()):
        if not module.startswith("ndpdimm.sw.") or module.startswith("ndpdimm.sw.driver"):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                    and node.value.attr == "backend":
                bad.append((module, node.lineno))
            elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr" \
                    and node.args and isinstance(node.args[0], ast.Attribute) \
                    and node.args[0].attr == "backend":
                bad.append((module, node.lineno))
    return bad


def installed_sources() -> dict:
    """``{module: (source, is_package)}`` of every module of the installed package."""
    sources = {}
    for top in TOPS:
        pkg = importlib.import_module(top)
        spec = importlib.util.find_spec(top)
        sources[top] = (open(spec.origin).read(), True)
        for info in pkgutil.walk_packages(pkg.__path__, top + "."):
            spec = importlib.util.find_spec(info.name)
            sources[info.name] = (open(spec.origin).read(), info.ispkg)
    return sources


def test_package_keeps_its_layers():
    sources = installed_sources()
    assert len(sources) > 100, f"only {len(sources)} modules found: is the package installed?"
    bad = violations(sources)
    assert not bad, "imports that break the layering or use a private name:\n" + "\n".join(
        f"  {m}:{line} imports {name} (allowed: {', '.join(rule_for(m))}; no private names "
        f"in {', '.join(NO_PRIVATE_USE)})" for m, line, name in bad)


def test_nothing_outside_the_driver_reaches_into_its_backend():
    bad = backend_reaches(installed_sources())
    assert not bad, "reaches past the driver (use Dimm.measure / Dimm.functional / ...):\n" + \
        "\n".join(f"  {m}:{line}" for m, line in bad)


@pytest.mark.parametrize("source", ["start = dimm.backend.cycle",
                                    "f = getattr(dimm.backend, 'functional', True)",
                                    "dimm.backend.load(0, b'')"])
def test_backend_reach_check_catches_one(source):
    assert backend_reaches({"ndpdimm.sw.scenarios.trimoe.costs": (source, False)})
    assert not backend_reaches({"ndpdimm.sw.driver.dimm": (source, False)})
    assert not backend_reaches({"ndpdimm.sw.scenarios.trimoe.costs": ("b = cfg.backend", False)})


def test_exceptions_are_still_needed():
    """An exception nobody uses any more is removed, so the list stays the truth."""
    sources = installed_sources()
    for module, prefix in EXCEPTIONS:
        assert module in sources, f"exception for a module that does not exist: {module}"
        source, is_package = sources[module]
        names = [n for _, n in imports_of(source, module, is_package)]
        assert any(_allowed(n, (prefix,)) for n in names), f"{module} no longer imports {prefix}"


@pytest.mark.parametrize("module, source", [
    ("ndpdimm.hw.gemv.engine", "from ndpdimm.cosim.golden import numerics"),
    ("ndpdimm.hw.gemv.engine", "def f():\n    from ndpdimm.sw.driver.dimm import Dimm"),
    ("ndpdimm.cosim.rtl.harness", "import ndpdimm.sw.cli"),
    ("ndpdimm.cosim.golden.core", "from ...sw.driver import dimm"),
    ("ndpdimm.synth.flow", "from ndpdimm.sw.scenarios import catalog"),
    ("ndpdimm.sw.scenarios.hermes.costs", "from ndpdimm.cosim.model.backend import ModelBackend"),
    ("ndpdimm.sw.scenarios.trimoe.costs", "from ndpdimm.cosim.rtl.harness import RtlBackend"),
    ("ndpdimm.sw.scenarios.rapid.costs", "from ndpdimm.bench import speed"),
    ("ndpdimm.sw.driver.dimm", "from ndpdimm.sw.scenarios.catalog import load_model"),
    # inside sw/: kernels below the scenarios, sampling imports no scenario, no scenario another
    ("ndpdimm.sw.kernels.cold_mlp", "from ndpdimm.sw.scenarios.hermes.config import HermesConfig"),
    ("ndpdimm.sw.kernels.expert", "from ndpdimm.sw.sampling.record import KernelLog"),
    ("ndpdimm.sw.sampling.streams", "def f():\n    from ndpdimm.sw.scenarios.hermes import scenario"),
    ("ndpdimm.sw.sampling.replay", "from ..scenarios.trimoe.costs import DomainCosts"),
    ("ndpdimm.sw.scenarios.rapid.scenario", "from ndpdimm.sw.scenarios.hermes.costs import Costs"),
    ("ndpdimm.sw.scenarios.hermes.costs", "from ..trimoe import costs"),
    ("ndpdimm.sw.scenarios.trimoe.scenario", "import ndpdimm.sw.scenarios.rapid.simulate"),
    ("ndpdimm.sw.scenarios.energy", "from ndpdimm.sw.scenarios.hermes.catalog import Hardware"),
    # the command line sits above the rest of sw/
    ("ndpdimm.sw.scenarios.hermes.config", "def f():\n    from ndpdimm.sw.commands.options import add_config_options"),
    ("ndpdimm.sw.sweep.run", "from ndpdimm.sw.cli import main"),
    # cosim's models below the RTL and the performance model
    ("ndpdimm.cosim.golden.core", "from ndpdimm.cosim.rtl.benches.streams import LayoutCodec"),
    ("ndpdimm.cosim.golden.core", "from ..rtl import build"),
    ("ndpdimm.cosim.gemv.job", "import ndpdimm.cosim.model.perf"),
    ("ndpdimm.cosim.dram.native", "from ndpdimm.cosim.rtl.build import verilator_env"),
    ("ndpdimm.cosim.link.model", "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                 "    from ndpdimm.cosim.model.backend import ModelBackend"),
    ("ndpdimm.cosim.link.model", "def f():\n    from ndpdimm.cosim.fuzz.plan import WINDOW"),
    # private names of another module
    ("ndpdimm.cosim.dram.native", "from ndpdimm.cosim.dram.model import _NEVER"),
    ("ndpdimm.cosim.rtl.harness", "from ndpdimm.cosim.rtl.build import SRC_ATTRIBUTE, _log"),
    ("ndpdimm.cosim.rtl.harness", "from .build import _environ_lock"),
    ("ndpdimm.cosim.dram.native", "from ndpdimm.cosim.dram import model as _py\nx = _py._NEVER"),
    ("ndpdimm.cosim.model.calibrate.measure", "from ndpdimm.cosim.rtl.benches import _smoke_counter"),
    ("ndpdimm.synth.flow", "from ndpdimm.cosim.rtl import build\nbuild._tool_environ()"),
    ("ndpdimm.sw.scenarios.hermes.scenario", "from ndpdimm.sw.scenarios.hermes.simulate import _run"),
    ("ndpdimm.sw.sampling.replay", "from ..kernels.base import _check"),
    ("ndpdimm.sw.driver.dimm", "def f():\n    from ndpdimm.sw.driver.buffers import _Allocator"),
])
def test_checker_catches_a_wrong_import(module, source):
    assert violations({module: (source, False)}), f"{source!r} in {module} was not caught"


@pytest.mark.parametrize("module, source", [
    ("ndpdimm.hw.gemv.engine", "from ..formats import Dtype"),
    ("ndpdimm.cosim.golden.core", "from ndpdimm.hw.formats import Dtype"),
    ("ndpdimm.sw.scenarios.hermes.costs", "from ndpdimm.cosim.backend import CoreConfig"),
    ("ndpdimm.sw.scenarios.hermes.costs", "from ndpdimm.sw.driver.dimm import Dimm"),
    ("ndpdimm.sw.scenarios.rapid.simulate", "from ndpdimm.cosim.timeline import Timeline"),
    ("ndpdimm.sw.driver.dimm", "from ndpdimm.cosim.model.backend import ModelBackend"),
    ("ndpdimm.sw.cli", "from ndpdimm.synth import command"),
    ("ndpdimm.sw.commands.bench", "from ndpdimm.bench.gemv import run_bench"),
    ("ndpdimm.sw.commands.fuzz", "from ndpdimm.cosim.rtl.harness import RtlBackend"),
    ("ndpdimm.sw.sampling.replay", "from ndpdimm.sw.kernels import replay"),
    ("ndpdimm.sw.scenarios.rapid.costs", "from ndpdimm.sw.kernels.attention import ndp_attention_cost"),
    ("ndpdimm.sw.scenarios.rapid.scenario", "from ndpdimm.sw.scenarios.energy import load_energy"),
    ("ndpdimm.sw.scenarios.hermes.scenario", "from ndpdimm.sw.sampling.record import KernelLog"),
    ("ndpdimm.cosim.golden.core", "from ndpdimm.cosim.dram.model import SparseStore"),
    ("ndpdimm.cosim.link.model", "from ndpdimm.cosim.golden.core import CoreModel"),
    ("ndpdimm.cosim.dram.native", "from ndpdimm.cosim.cache import cached_build"),
    ("ndpdimm.cosim.model.calibrate.measure", "from ndpdimm.cosim.rtl.harness import RtlBackend"),
    ("ndpdimm.cosim.rtl.benches.sram", "from ndpdimm.cosim.golden.codec import LayoutCodec"),
    ("ndpdimm.cosim.rtl.benches.core", "from ._smoke_counter import make_counter"),
    ("ndpdimm.synth.flow", "from ndpdimm.cosim.rtl.build import SRC_ATTRIBUTE"),
    ("ndpdimm.cosim.rtl.harness", "import os\nos._exit(0)"),
    ("ndpdimm.sw.kernels.dense", "from ndpdimm.sw.kernels.base import Shape as _Base"),
])
def test_checker_accepts_a_right_import(module, source):
    assert not violations({module: (source, False)})
