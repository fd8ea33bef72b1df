"""The RTL backend: the Verilated ``NdpCore`` in a shared library with a C++ harness, driven from Python.

What runs where. ``cosim/harness/ndp_harness.cpp`` owns the simulation: both
clocks (NDP 1 GHz, DRAM tCK from the DRAM config), the DRAM behind the PHY
ports (the C++ ``TimingChecker`` and ``SparseStore`` of
``cosim/harness/dram_model.h``, the same rules as the cocotb ``DramDevice``:
every command timing-checked, data tCL / CWL cycles after its command, data
marks checked) and a host driver on the CSR port (descriptors staged and
pushed while the queue has room, completions collected when ``irq`` rises) and
on the host pass-through port. Python makes one call per batch of work -
``submit`` then ``run`` ("until idle") - never one per cycle.

Build and cache. :func:`build_harness` elaborates ``NdpCore`` for a
:class:`~ndpdimm.cosim.backend.CoreConfig` to Verilog, generates
``harness_config.h`` (port field offsets from the Amaranth layouts, DRAM
organisation/timing, register offsets, address map, the build's identity),
and has Verilator compile the model, the harness and the C++ DRAM model into
``build/harness/ndp_core-<hash16>/libndpcore.so``. The hash covers the
Verilog (without source-location attributes), the generated header, the C++
sources, the flags and the Verilator version, so a second run with the same
design starts in the time it takes to elaborate (a few seconds; memoised per
process). Concurrent builders of one hash wait on a file lock. The build
reports its phases and the number of C++ objects compiled.

Waveforms. ``RtlBackend(config, waves=(path, first_cycle, last_cycle))``
uses a second build with Verilator's VCD tracing compiled in (tracing costs
speed even when idle, so the default library has none) and records the NDP
cycles ``first_cycle..last_cycle`` into ``path`` (open it with GTKWave or
Surfer). FST would need ``lz4.h``, which a fresh machine lacks.

Errors. A DRAM timing violation raises ``TimingViolation``-style
:class:`HarnessError` naming the command, cycle and rule; a broken pin
protocol (data marks, an ``irq`` without a completion, a host response with
an unknown tag, response overflow) raises :class:`HarnessError` too; after
either the instance refuses to run (its state is no longer meaningful). An
address outside the DIMM raises ``ValueError`` and changes nothing. A library
whose recorded parameters differ from the configuration asked for (e.g. a
path given explicitly) raises :class:`HarnessMismatch` before anything runs.
"""

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from ndpdimm.cosim.backend import Backend, Completion, CoreConfig, check_word
from ndpdimm.cosim.rtl_build import (VERILATOR_FLAGS, _SRC_ATTRIBUTE, _file_lock, _tail,
                                     build_cache_dir, elaborate, verilator_env, verilator_version)
from ndpdimm.cosim.sim_top import reset_register_wrapper
from ndpdimm.hw.memory_port import BURST_BYTES, Status
from ndpdimm.hw.ndp_registers import REGISTERS, register

__all__ = ["RtlBackend", "HarnessError", "HarnessMismatch", "build_harness", "HARNESS_SOURCES",
           "CXX_OPT", "BUILD_ROOT_ENV"]

HARNESS_DIR = Path(__file__).resolve().parent / "harness"
#: C++ sources compiled into the library (copied into the build directory).
HARNESS_SOURCES = ("ndp_harness.cpp", "dram_model.cpp", "dram_model.h")
LIB_NAME = "libndpcore.so"
#: Environment variable overriding the default build root (``<repo>/build/harness``).
BUILD_ROOT_ENV = "NDPDIMM_HARNESS_BUILD_ROOT"
#: g++ optimisation of the model's code (``OPT_FAST``); chosen by measurement, see
#: ``bench/results/cosim.json`` and docs/cosim.md.
CXX_OPT = "-O1"
_DONE = "build.done.json"
_FACTORY = "ndpdimm.hw.ndp_core:ndp_core_verilog"
#: The top module Verilator builds (``harness_top_verilog``).
HARNESS_TOP = "ndp_harness_top"

_OK, _MAX_CYCLES, _VIOLATION, _PROTOCOL, _VALUE_ERROR, _DEAD = range(6)
#: Cycles a single register or host access may take before the harness gives up.
ACCESS_TIMEOUT_CYCLES = 1_000_000


class HarnessError(RuntimeError):
    """The simulation found the design misbehaving (timing violation, pin protocol)."""


class HarnessMismatch(RuntimeError):
    """A harness library built for other parameters than the ones asked for."""


# --- generated configuration header ---------------------------------------------------------

def _layout_fields(layout) -> dict:
    return {name: (f.offset, f.width) for name, f in layout}


def _c_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def harness_header(config: CoreConfig, build_info: dict) -> str:
    """``harness_config.h`` for ``config``: every number the C++ harness needs, from the RTL's
    own layouts and the DRAM config (nothing restated by hand)."""
    from ndpdimm.hw.address_map import AddressMap
    from ndpdimm.hw.ndp_core import ndp_core_from_config
    from ndpdimm.hw.rank_scheduler import DramCommand

    core = ndp_core_from_config(config.dram_config, **config.core_params())
    org, t = core.org, core.timing
    cmd = _layout_fields(core.memory.controller.cmd_layout)
    csr = _layout_fields(core.csr.payload.shape())
    hreq = _layout_fields(core.host.req[0].payload.shape())
    hresp = _layout_fields(core.host.resp[0].payload.shape())
    am = AddressMap(org)
    slices = am.field_slices()
    words = lambda bits: (bits + 31) // 32  # noqa: E731
    timing_fields = ("tRC", "tRCD", "tCL", "tRP", "tRAS", "tBL", "tCCD_S", "tCCD_L", "tRRD_S",
                     "tRRD_L", "tFAW", "tWR", "tWTR_S", "tWTR_L", "tRTP", "CWL", "tREFI", "tRFC",
                     "max_postponed_refs")
    d = {
        "RANKS": org.ranks, "BANK_GROUPS": org.bank_groups, "BANKS_PER_GROUP": org.banks_per_group,
        "ROWS_PER_BANK": org.rows_per_bank, "ROW_BYTES": org.row_bytes,
        "CAPACITY_BYTES": f"INT64_C({org.capacity_bytes})",
        "T_CL": t.tCL, "CWL": t.CWL,
        "NDP_PERIOD_PS": 1000, "DRAM_PERIOD_PS": round(t.tCK_ns * 1000),
        "CMD_BITS": core.memory.controller.cmd_layout.size,
        "CMD_KIND_LSB": cmd["kind"][0], "CMD_KIND_WIDTH": cmd["kind"][1],
        "CMD_BG_LSB": cmd["bank_group"][0], "CMD_BG_WIDTH": cmd["bank_group"][1],
        "CMD_BANK_LSB": cmd["bank"][0], "CMD_BANK_WIDTH": cmd["bank"][1],
        "CMD_ROW_LSB": cmd["row"][0], "CMD_ROW_WIDTH": cmd["row"][1],
        "CMD_COL_LSB": cmd["column"][0], "CMD_COL_WIDTH": cmd["column"][1],
        **{f"KIND_{k.name}": int(k) for k in DramCommand},
        "CSR_ADDR_LSB": csr["addr"][0], "CSR_ADDR_WIDTH": csr["addr"][1],
        "CSR_WRITE_LSB": csr["write"][0], "CSR_DATA_LSB": csr["data"][0],
        "HREQ_WRITE_LSB": hreq["write"][0], "HREQ_BURST_LSB": hreq["burst"][0],
        "HREQ_BURST_WIDTH": hreq["burst"][1], "HREQ_TAG_LSB": hreq["tag"][0],
        "HREQ_TAG_WIDTH": hreq["tag"][1], "HREQ_DATA_LSB": hreq["data"][0],
        "HRESP_TAG_LSB": hresp["tag"][0], "HRESP_TAG_WIDTH": hresp["tag"][1],
        "HRESP_DATA_LSB": hresp["data"][0],
        "HOST_TAG_MASK": (1 << hreq["tag"][1]) - 1,
        "HOST_REQ_WORDS": words(core.host.req[0].payload.shape().size),
        "HOST_RESP_WORDS": words(core.host.resp[0].payload.shape().size),
        "AM_COLUMN_LSB": slices["column"][0], "AM_BANK_GROUP_LSB": slices["bank_group"][0],
        "AM_BANK_LSB": slices["bank"][0], "AM_RANK_LSB": slices["rank"][0],
        "AM_ROW_LSB": slices["row"][0], "BANK_ROTATE": int(am.bank_rotate),
        "DESC_QUEUE": config.desc_queue,
        **{f"REG_{r.name}": r.offset for r in REGISTERS
           if r.name in ("DESC0", "DESC_PUSH", "CQ_HEAD", "CQ_CYCLES", "CQ_DRAM_BYTES", "CQ_POP")},
    }
    lines = ["// Generated by cosim/rtl_harness.py for one NdpCore build; do not edit.",
             "#pragma once", "#include <stdint.h>"]
    lines += [f"#define NDPH_{k} {v}" for k, v in d.items()]
    lines.append("#define NDPH_TIMING " + ", ".join(str(getattr(t, f)) for f in timing_fields))
    lines.append(f"#define NDPH_BUILD_INFO {_c_string(json.dumps(build_info, sort_keys=True))}")
    # Verilator spells a "__" in a port name "___05F"
    port = lambda name: name.replace("__", "___05F")  # noqa: E731
    for macro, name in (("CSR_VALID", "csr__valid"), ("CSR_READY", "csr__ready"),
                        ("CSR_PAYLOAD", "csr__payload"), ("CSR_RESP_VALID", "csr_resp__valid"),
                        ("CSR_RESP_READY", "csr_resp__ready"),
                        ("CSR_RESP_PAYLOAD", "csr_resp__payload"),
                        ("HOST_REQ_VALID", "host__req__0__valid"),
                        ("HOST_REQ_READY", "host__req__0__ready"),
                        ("HOST_REQ_PAYLOAD", "host__req__0__payload")):
        lines.append(f"#define NDPH_{macro} {port(name)}")
    r = range(org.ranks)
    lines.append("#define NDPH_HOST_RESP_VALID(t, r) (" +
                 " : ".join(f"(r) == {i} ? (t)->{port(f'host__resp__{i}__valid')}" for i in r) + " : 0)")
    lines.append("#define NDPH_HOST_RESP_PAYLOAD(t, r, w) do { switch (r) { " +
                 " ".join(f"case {i}: port_words((t)->{port(f'host__resp__{i}__payload')}, w); break;" for i in r) +
                 " default: break; } } while (0)")
    lines.append("#define NDPH_HOST_RESP_READY_ALL(t) do { " +
                 " ".join(f"(t)->{port(f'host__resp__{i}__ready')} = 1;" for i in r) + " } while (0)")
    return "\n".join(lines) + "\n"


# --- build ------------------------------------------------------------------------------------

def default_build_root() -> Path:
    if os.environ.get(BUILD_ROOT_ENV):
        return Path(os.environ[BUILD_ROOT_ENV]).resolve()
    return build_cache_dir("harness")


def _log(msg):
    print(f"[rtl_harness] {msg}", file=sys.stderr, flush=True)


def harness_top_verilog(core_verilog: str) -> str:
    """The top Verilator builds: ``ndp_core`` with its resets registered (``cosim/sim_top.py``)."""
    return reset_register_wrapper(core_verilog, HARNESS_TOP)


def _verilator_cmd(out_dir: Path, waves: bool, cxx_opt: str, extra_flags=()) -> list:
    cflags = "-fPIC -std=c++17" + (" -DNDPH_TRACE" if waves else "")
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", str(min(2, os.cpu_count() or 1)),
           "--top-module", HARNESS_TOP, "--prefix", "Vtop", "--Mdir", str(out_dir / "obj"),
           *[f for f in VERILATOR_FLAGS if f != "--no-public-flat-rw"],
           *extra_flags, "-CFLAGS", cflags, "-LDFLAGS", "-shared", "-o", LIB_NAME]
    if waves:
        cmd.append("--trace")
    return cmd + [str(out_dir / "ndp_core.v"), str(out_dir / "harness_top.v"),
                  str(out_dir / "ndp_harness.cpp"),
                  str(out_dir / "dram_model.cpp")]


def _build_identity(config: CoreConfig, verilog: str, waves: bool, cxx_opt: str, extra_flags=()):
    """(hash16, build_info dict) of a build."""
    sources = {name: (HARNESS_DIR / name).read_text() for name in HARNESS_SOURCES}
    h = hashlib.sha256()
    for part in (_SRC_ATTRIBUTE.sub("", verilog), harness_top_verilog(verilog), *sources.values(),
                 json.dumps(VERILATOR_FLAGS + tuple(extra_flags)),
                 cxx_opt, str(waves), verilator_version(), json.dumps(config.as_dict(), sort_keys=True)):
        h.update(part.encode())
        h.update(b"\0\0")
    verilog_hash = hashlib.sha256(_SRC_ATTRIBUTE.sub("", verilog).encode()).hexdigest()[:16]
    digest = h.hexdigest()[:16]
    info = {"config": config.as_dict(), "verilog_sha": verilog_hash, "waves": waves,
            "cxx_opt": cxx_opt, "verilator_flags": list(extra_flags), "build": digest}
    return digest, info


class _Progress:
    """Prints the build's phase and how many of the model's C++ objects are compiled."""

    def __init__(self, obj_dir: Path, enabled: bool):
        self.obj_dir, self.enabled = obj_dir, enabled
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self):
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.enabled:
            self._thread.join()

    def _watch(self):
        start, last = time.monotonic(), None
        while not self._stop.wait(10):
            cpp = list(self.obj_dir.glob("*.cpp")) if self.obj_dir.exists() else []
            if not cpp:
                msg = "verilating"
            else:
                done = len(list(self.obj_dir.glob("*.o")))
                msg = f"compiling: {done} of about {len(cpp) + 4} objects"
            if msg != last:
                _log(f"{msg} ({time.monotonic() - start:.0f} s)")
                last = msg


def _source_key(config: CoreConfig, waves: bool, cxx_opt: str, extra_flags=()) -> str:
    """Hash of everything the Verilog and the library derive from, known without elaborating:
    the RTL's Python sources and DRAM configs, the harness sources, the configuration, flags
    and tool versions. It maps to a finished build in ``<root>/index/`` so a second run skips
    elaboration (which takes about a minute for a small core) as well as the build."""
    import importlib.metadata
    hw = Path(__file__).resolve().parent.parent / "hw"
    h = hashlib.sha256()
    files = sorted(hw.glob("*.py")) + sorted(hw.glob("configs/*")) + \
        [HARNESS_DIR / n for n in HARNESS_SOURCES] + [Path(__file__), Path(__file__).with_name("sim_top.py")]
    if config.dram_config:
        files.append(Path(config.dram_config))
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    for part in (json.dumps(config.as_dict(), sort_keys=True), str(waves), cxx_opt,
                 json.dumps(VERILATOR_FLAGS + tuple(extra_flags)), verilator_version(),
                 importlib.metadata.version("amaranth")):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:24]


def build_harness(config: CoreConfig, *, waves: bool = False, cxx_opt: str = CXX_OPT,
                  extra_flags=(), build_root=None, progress: bool = True) -> Path:
    """Path of ``libndpcore.so`` for ``config`` (built if missing); see the module docstring.

    ``cxx_opt`` is the g++ optimisation of the model's code, ``extra_flags`` more Verilator
    options (e.g. ``("-O3",)``, ``("--threads", "2")``): build options ``bench_cosim`` compares.
    """
    extra_flags = tuple(extra_flags)
    root = Path(build_root).resolve() if build_root is not None else default_build_root()
    index = root / "index" / f"{_source_key(config, waves, cxx_opt, extra_flags)}.json"
    if index.exists():
        out_dir = root / json.loads(index.read_text())["dir"]
        if (out_dir / _DONE).exists():
            return out_dir / "obj" / LIB_NAME
    if progress:
        _log(f"elaborating NdpCore {json.dumps(config.core_params())}")
    verilog = elaborate("ndp_core", _FACTORY,
                        {"config_path": config.dram_config, **config.core_params()})
    digest, info = _build_identity(config, verilog, waves, cxx_opt, extra_flags)
    out_dir = root / f"ndp_core-{digest}"
    lib = out_dir / "obj" / LIB_NAME
    if (out_dir / _DONE).exists():
        _write_index(index, out_dir)
        return lib
    with _file_lock(root / f".ndp_core-{digest}.lock"):
        if (out_dir / _DONE).exists():
            return lib
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        (out_dir / "ndp_core.v").write_text(verilog)
        (out_dir / "harness_top.v").write_text(harness_top_verilog(verilog))
        (out_dir / "harness_config.h").write_text(harness_header(config, info))
        for name in HARNESS_SOURCES:
            shutil.copyfile(HARNESS_DIR / name, out_dir / name)
        if progress:
            _log(f"building the NdpCore harness for {json.dumps(config.core_params())} "
                 f"({verilog.count(chr(10))} lines of Verilog{', waves' if waves else ''}) "
                 f"-> {out_dir}")
        env = {**os.environ, **verilator_env()}
        env.pop("VERILATOR_ROOT", None)
        env["MAKEFLAGS"] = f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={cxx_opt}"
        start = time.monotonic()
        log = out_dir / "build.log"
        with open(log, "w") as f, _Progress(out_dir / "obj", progress):
            proc = subprocess.run(_verilator_cmd(out_dir, waves, cxx_opt, extra_flags), stdout=f,
                                  stderr=subprocess.STDOUT, env=env, cwd=out_dir)
        if proc.returncode or not lib.exists():
            raise RuntimeError(f"building the NdpCore harness failed (exit {proc.returncode}); "
                               f"last lines of {log}:\n{_tail(log)}")
        seconds = time.monotonic() - start
        (out_dir / _DONE).write_text(json.dumps({**info, "seconds": round(seconds, 1),
                                                 "verilog_lines": verilog.count("\n")}, indent=1) + "\n")
        if progress:
            _log(f"built in {seconds:.0f} s")
    _write_index(index, out_dir)
    return lib


def _write_index(index: Path, out_dir: Path):
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"dir": out_dir.name}) + "\n")
    os.replace(tmp, index)


def build_record(lib: Path) -> dict:
    """The ``build.done.json`` of a library (build time, parameters)."""
    return json.loads((Path(lib).parent.parent / _DONE).read_text())


# --- ctypes -----------------------------------------------------------------------------------

_LIBS: dict = {}


def _load(path: Path):
    key = str(path)
    if key not in _LIBS:
        lib = ctypes.CDLL(key)
        P, I32, I64, U64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
        B = ctypes.c_char_p
        sigs = {
            "ndph_build_info": (B, []),
            "ndph_create": (P, [ctypes.c_char_p, ctypes.c_size_t]),
            "ndph_destroy": (None, [P]),
            "ndph_error": (B, [P]),
            "ndph_submit": (I32, [P, ctypes.POINTER(U64), I64]),
            "ndph_run": (I32, [P, I64]),
            "ndph_run_cycles": (I32, [P, I64]),
            "ndph_csr": (I32, [P, ctypes.c_uint32, I32, U64, ctypes.POINTER(U64), I64]),
            "ndph_completions": (I64, [P, ctypes.POINTER(I64), I64]),
            "ndph_pending": (I64, [P]),
            "ndph_host_access": (I32, [P, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_load": (I32, [P, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_dump": (I32, [P, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_stats": (None, [P, ctypes.POINTER(I64)]),
            "ndph_trace_open": (I32, [P, ctypes.c_char_p, I64, I64]),
            "ndph_trace_close": (None, [P]),
            "ndph_bare_clock": (I64, [P, I64]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _LIBS[key] = lib
    return _LIBS[key]


def _bytes_arg(data: bytes):
    return (ctypes.c_uint8 * len(data)).from_buffer_copy(data)


class RtlBackend(Backend):
    """One NDP-DIMM simulated from its RTL (see the module docstring).

    ``waves``: ``None`` or ``(path, first_cycle, last_cycle)`` to record a VCD window.
    ``library``: use this harness library instead of building one; it must have been built
    for ``config`` (else :class:`HarnessMismatch`).
    """
    name = "rtl"

    def __init__(self, config: CoreConfig = CoreConfig(), *, waves=None, progress: bool = True,
                 library=None, cxx_opt: str = CXX_OPT, extra_flags=(), build_root=None):
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        self.config = config
        self.org, self.timing = config.dram()
        if waves is not None:
            if not (isinstance(waves, (tuple, list)) and len(waves) == 3):
                raise ValueError(f"waves must be (path, first_cycle, last_cycle), got {waves!r}")
        path = Path(library) if library is not None else build_harness(
            config, waves=waves is not None, cxx_opt=cxx_opt, extra_flags=extra_flags,
            build_root=build_root, progress=progress)
        self.library = path
        self._lib = lib = _load(path.resolve())
        info = json.loads(lib.ndph_build_info().decode())
        if info.get("config") != config.as_dict():
            raise HarnessMismatch(
                f"harness library {path} was built for {info.get('config')}, not for "
                f"{config.as_dict()}: build one for this configuration (omit library=)")
        if waves is not None and not info.get("waves"):
            raise HarnessMismatch(f"harness library {path} was built without waveform support")
        self.build_info = info
        err = ctypes.create_string_buffer(512)
        self._h = lib.ndph_create(err, len(err))
        if not self._h:
            raise RuntimeError(f"cannot create the harness: {err.value.decode()}")
        self._pending = 0
        if waves is not None:
            wpath, first, last = waves
            self._check(lib.ndph_trace_open(self._h, str(wpath).encode(), int(first), int(last)))
        self._check(lib.ndph_run_cycles(self._h, 8))   # out of reset

    # --- plumbing -------------------------------------------------------------------------
    def _check(self, status):
        if status in (_OK, _MAX_CYCLES):
            return status
        msg = self._lib.ndph_error(self._h).decode()
        if status == _VALUE_ERROR:
            raise ValueError(msg)
        raise HarnessError(msg)

    def close(self):
        if getattr(self, "_h", None):
            self._lib.ndph_destroy(self._h)
            self._h = None

    def __del__(self):
        self.close()

    def _range(self, addr, n):
        cap = self.org.capacity_bytes
        if not isinstance(addr, int) or not isinstance(n, int) or addr < 0 or n < 0 or addr + n > cap:
            raise ValueError(f"DRAM range {addr!r} + {n!r} bytes is outside the DIMM (0..{cap:#x})")

    # --- Backend --------------------------------------------------------------------------
    def load(self, addr, data):
        data = bytes(data)
        self._range(addr, len(data))
        if data:
            self._check(self._lib.ndph_load(self._h, addr, _bytes_arg(data), len(data)))

    def dump(self, addr, n):
        self._range(addr, n)
        buf = (ctypes.c_uint8 * max(n, 1))()
        if n:
            self._check(self._lib.ndph_dump(self._h, addr, buf, n))
        return bytes(buf)[:n]

    def host_access(self, addr, write, data=b""):
        if not isinstance(addr, int) or addr % BURST_BYTES or not 0 <= addr <= self.org.capacity_bytes - BURST_BYTES:
            raise ValueError(f"host access address {addr!r} is not a 64 B aligned burst in the DIMM")
        if write and len(bytes(data)) != BURST_BYTES:
            raise ValueError(f"a host write is {BURST_BYTES} bytes, got {len(bytes(data))}")
        buf = _bytes_arg(bytes(data) if write else bytes(BURST_BYTES))
        self._check(self._lib.ndph_host_access(self._h, int(bool(write)), addr, buf,
                                               ACCESS_TIMEOUT_CYCLES))
        return b"" if write else bytes(buf)

    def csr_write(self, name, value):
        r = register(name)
        if not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise ValueError(f"register {name}: value must be a 64-bit unsigned int, got {value!r}")
        self._check(self._lib.ndph_csr(self._h, r.offset, 1, value, None, ACCESS_TIMEOUT_CYCLES))

    def csr_read(self, name):
        r = register(name)
        out = ctypes.c_uint64()
        self._check(self._lib.ndph_csr(self._h, r.offset, 0, 0, ctypes.byref(out),
                                       ACCESS_TIMEOUT_CYCLES))
        return out.value

    def submit(self, words):
        words = [check_word(w) for w in words]
        if not words:
            return
        arr = (ctypes.c_uint64 * (4 * len(words)))()
        for i, w in enumerate(words):
            for k in range(4):
                arr[4 * i + k] = (w >> (64 * k)) & (2 ** 64 - 1)
        self._check(self._lib.ndph_submit(self._h, arr, len(words)))

    def run(self, max_cycles=None):
        limit = (1 << 62) if max_cycles is None else int(max_cycles)
        if limit < 0:
            raise ValueError(f"max_cycles must be >= 0, got {max_cycles!r}")
        self._check(self._lib.ndph_run(self._h, limit))
        return self._take_completions()

    def run_cycles(self, n: int) -> list[Completion]:
        """Clock ``n`` NDP cycles (the driver keeps pushing and collecting); completions so far."""
        self._check(self._lib.ndph_run_cycles(self._h, int(n)))
        return self._take_completions()

    def _take_completions(self):
        out = []
        while True:
            buf = (ctypes.c_int64 * (4 * 64))()
            k = self._lib.ndph_completions(self._h, buf, 64)
            for i in range(k):
                head, cycles, nbytes, done = buf[4 * i:4 * i + 4]
                out.append(Completion(id=(head >> 4) & 0xFFF, opcode=(head >> 24) & 0xF,
                                      status=Status((head >> 16) & 0xFF), cycles=cycles,
                                      dram_bytes=nbytes, done_cycle=done))
            if k < 64:
                return out

    @property
    def pending(self):
        return self._lib.ndph_pending(self._h)

    @property
    def cycle(self):
        return self.stats()["ndp_cycle"]

    def stats(self) -> dict:
        """Harness-side counts: cycles of both clocks, DRAM commands by kind, bursts, row
        hits/misses (the timing checker's), bytes the sparse store holds."""
        out = (ctypes.c_int64 * 12)()
        self._lib.ndph_stats(self._h, out)
        keys = ("ndp_cycle", "dram_cycle", "ACT", "RD", "WR", "PRE", "REF", "bursts_read",
                "bursts_written", "row_hits", "row_misses", "touched_bytes")
        return dict(zip(keys, list(out)))

    def close_waves(self):
        self._lib.ndph_trace_close(self._h)

    def bare_clock(self, n: int) -> int:
        """Measurement baseline: clock the model alone for ``n`` cycles (no DRAM, no driver).
        The instance is unusable afterwards."""
        return self._lib.ndph_bare_clock(self._h, int(n))
