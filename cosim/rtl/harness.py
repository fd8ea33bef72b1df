"""The RTL backend: the Verilated ``NdpCore`` in a shared library with a C++ harness, driven from Python.

What runs where. ``cosim/rtl/cpp/ndp_harness.cpp`` owns the simulation: both
clocks (NDP 1 GHz, DRAM tCK from the DRAM config), the DRAM behind the PHY
ports (the C++ ``TimingChecker`` and ``SparseStore`` of
``cosim/dram/cpp/dram_model.h``, the same rules as the cocotb ``DramDevice``:
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
``<cache>/harness/ndp_core-<hash16>/libndpcore.so`` (``<cache>``: the shared cache root of
``cosim/cache.py``, the same for every working folder). The hash covers the
Verilog (without source-location attributes), the generated header, the C++
sources, the flags and the Verilator version, so a second run with the same
design starts in the time it takes to elaborate (a few seconds; memoised per
process). Concurrent builders of one hash wait on a file lock. The build
reports its phases and the number of C++ objects compiled.

Several cores. :class:`RtlSystem` builds 2-4 cores of a ``CoreConfig(link=True)``
joined by their DIMM-Link ports (``cosim/rtl/system_top.py``'s top) into one
library (``<cache>/harness/link_system<n>-<hash16>/``): each core has its own DRAM
model and host driver, the links' lanes cross C++ channels (latency, bit-error
rate, random bit offsets), and ``system.cores[i]`` is core ``i``'s
:class:`RtlBackend`. ``harness_ports.h`` (generated) binds each core's and link
end's ports for the one C++ driver. Every C call names its core.

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
from collections.abc import Iterable, Sequence
from pathlib import Path

from ndpdimm.cosim.backend import COUNTER_REGISTERS, Backend, Completion, CoreConfig, check_word
from ndpdimm.cosim.cache import OVERRIDES, build_cache_dir
from ndpdimm.cosim.dram import native
from ndpdimm.cosim.rtl.build import (
    _SRC_ATTRIBUTE,
    VERILATOR_FLAGS,
    _file_lock,
    _tail,
    elaborate,
    hash_files,
    rtl_sources,
    verilator_env,
    verilator_version,
)
from ndpdimm.cosim.rtl.core_top import reset_register_wrapper
from ndpdimm.hw.memory.port import BURST_BYTES, Status
from ndpdimm.hw.registers import REGISTERS, register

__all__ = ["RtlBackend", "RtlSystem", "HarnessError", "HarnessMismatch", "build_harness", "HARNESS_SOURCES",
           "CXX_OPT", "VERILATOR_OPT", "BUILD_ROOT_ENV"]

#: the C++ sources of the harness library and the folder of each: its own (``cosim/rtl/cpp``)
#: and the DRAM model it links (``cosim/dram/cpp``)
HARNESS_SOURCES = {"ndp_harness.cpp": Path(__file__).resolve().parent / "cpp",
                   "dram_model.cpp": native.SOURCE_DIR, "dram_model.h": native.SOURCE_DIR}
LIB_NAME = "libndpcore.so"
#: Environment variable overriding the default build root (``<cache root>/harness``).
BUILD_ROOT_ENV = OVERRIDES["harness"]
#: g++ optimisation of the model's code (``OPT_FAST``) and Verilator's own optimisation,
#: chosen by measurement (``ndpdimm bench --suite cosim --build-options``, docs/cosim.md):
#: on the 16-unit core ``-Os`` with Verilator ``-O3`` simulated 2.0x faster than ``-O1``
#: alone for 1.3x the build time. ``extra_flags=()`` drops the ``-O3``.
CXX_OPT = "-Os"
VERILATOR_OPT = ("-O3",)
_DONE = "build.done.json"
_CQ_HEAD = register("CQ_HEAD")
_FACTORY = "ndpdimm.hw.core.ndp_core:ndp_core_verilog"
#: The top module Verilator builds (``harness_top_verilog``).
HARNESS_TOP = "ndp_harness_top"

_OK, _MAX_CYCLES, _VIOLATION, _PROTOCOL, _VALUE_ERROR, _DEAD = range(6)
#: Cycles a single register or host access may take before the harness gives up.
ACCESS_TIMEOUT_CYCLES = 1_000_000
#: Default delay of a DIMM-Link channel in NDP cycles, and the largest random bit offset of a
#: lane (one 66-bit block less a bit: the PHY must find block boundaries and deskew), as the
#: cocotb link_system bench has them.
LINK_LATENCY, LINK_MAX_BIT_OFFSET = 2, 65
#: Cycles the links get to train after reset before a system is handed out.
LINK_TRAINING_CYCLES = 20_000


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
    from ndpdimm.hw.core.ndp_core import ndp_core_from_config
    from ndpdimm.hw.memory.address_map import AddressMap
    from ndpdimm.hw.memory.rank_scheduler import DramCommand

    core = ndp_core_from_config(config.dram_config, **config.core_params())
    org, t = core.org, core.timing
    cmd = _layout_fields(core.memory.controller.cmd_layout)
    csr = _layout_fields(core.csr.payload.shape())
    hreq = _layout_fields(core.host.req[0].payload.shape())
    hresp = _layout_fields(core.host.resp[0].payload.shape())
    am = AddressMap(org)
    slices = am.field_slices()
    words = lambda bits: (bits + 31) // 32
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
    lines = ["// Generated by cosim/rtl/harness.py for one NdpCore build; do not edit.",
             "#pragma once", "#include <stdint.h>"]
    lines += [f"#define NDPH_{k} {v}" for k, v in d.items()]
    lines.append("#define NDPH_TIMING " + ", ".join(str(getattr(t, f)) for f in timing_fields))
    lines.append(f"#define NDPH_BUILD_INFO {_c_string(json.dumps(build_info, sort_keys=True))}")
    return "\n".join(lines) + "\n"


#: Core ports the harness binds: (C++ member, port name inside ``ndp_core``); ``{r}``: per rank.
_CORE_PORTS = (
    ("cmd", "cmd"), ("data_valid", "data_valid"), ("dq_wr", "dq_wr"), ("dq_wr_en", "dq_wr_en"),
    ("dq_rd", "dq_rd"), ("resp_overflow", "resp_overflow"), ("irq", "irq"),
    ("csr_valid", "csr__valid"), ("csr_ready", "csr__ready"), ("csr_payload", "csr__payload"),
    ("csr_resp_valid", "csr_resp__valid"), ("csr_resp_ready", "csr_resp__ready"),
    ("csr_resp_payload", "csr_resp__payload"),
    ("host_req_valid", "host__req__0__valid"), ("host_req_ready", "host__req__0__ready"),
    ("host_req_payload", "host__req__0__payload"),
    ("host_resp_valid", "host__resp__{r}__valid"), ("host_resp_payload", "host__resp__{r}__payload"),
    ("host_resp_ready", "host__resp__{r}__ready"),
)
#: Link-end ports the harness binds (link builds).
_LINK_END_PORTS = ("serial_tx", "serial_tx_valid", "serial_rx", "serial_rx_valid", "link_reset",
                   "link_up")


def link_counter_names() -> tuple[str, ...]:
    """Names of a link end's counters as the harness reports them (``LinkPort``'s ports)."""
    from ndpdimm.hw.link.port import LINK_COUNTERS, PHY_COUNTERS
    return tuple(LINK_COUNTERS) + tuple(f"phy_{n}" for n in PHY_COUNTERS)


def harness_ports_header(n_cores: int, ranks: int) -> str:
    """``harness_ports.h``: ``CorePorts`` / ``ndph_bind_core`` for every core of the top and, with
    several cores, ``LinkEndPorts`` / ``ndph_bind_link_end`` for both ends of every link (the
    port names of ``ndp_harness_top`` or of ``cosim/rtl/system_top.py``'s ``link_system``)."""
    from ndpdimm.cosim.rtl.system_top import core_prefix, port_prefix
    from ndpdimm.hw.link.formats import LinkConfig
    # Verilator spells a "__" in a port name "___05F"
    port = lambda name: name.replace("__", "___05F")
    prefix = (lambda i: "") if n_cores == 1 else core_prefix
    n_links = n_cores - 1
    counters = link_counter_names() if n_links else ()
    lines = ["// Generated by cosim/rtl/harness.py for one build; do not edit.", "#pragma once",
             "#include <type_traits>", f"#define NDPH_N_CORES {n_cores}",
             f"#define NDPH_N_LINKS {n_links}",
             "#define NDPH_PORT_T(name) std::remove_reference_t<decltype(Vtop::name)>", "",
             "struct CorePorts {"]
    for member, name in _CORE_PORTS:
        first = port(prefix(0) + name.format(r=0))
        lines.append(f"    NDPH_PORT_T({first})* {member}{'[NDPH_RANKS]' if '{r}' in name else ''};")
    lines += ["};", "", "inline CorePorts ndph_bind_core(Vtop* t, int core) {", "    CorePorts p{};",
              "    switch (core) {"]
    for i in range(n_cores):
        lines.append(f"    case {i}:")
        for member, name in _CORE_PORTS:
            if "{r}" in name:
                lines += [f"        p.{member}[{r}] = &t->{port(prefix(i) + name.format(r=r))};"
                          for r in range(ranks)]
            else:
                lines.append(f"        p.{member} = &t->{port(prefix(i) + name)};")
        lines.append("        break;")
    lines += ["    default: break;", "    }", "    return p;", "}"]
    if n_links:
        c = LinkConfig()
        lines += ["", f"#define NDPH_LINK_LANES {c.lanes}", f"#define NDPH_LINK_CHUNK_BITS {c.chunk_bits}",
                  f"#define NDPH_LINK_N_COUNTERS {len(counters)}", "", "struct LinkEndPorts {"]
        first = lambda name: port(port_prefix(0, "a") + name)
        lines += [f"    NDPH_PORT_T({first(name)})* {name};" for name in _LINK_END_PORTS]
        lines += [f"    const NDPH_PORT_T({first(counters[0])})* counters[NDPH_LINK_N_COUNTERS];", "};"]
        lines += [f"static_assert(std::is_same<NDPH_PORT_T({first(n)}), NDPH_PORT_T({first(counters[0])})>::value, "
                  f"\"link counters share one type\");" for n in counters[1:]]
        lines += ["", "inline LinkEndPorts ndph_bind_link_end(Vtop* t, int link, int end) {",
                  "    LinkEndPorts p{};", "    switch (2 * link + end) {"]
        for link in range(n_links):
            for e, end in enumerate("ab"):
                pre = port_prefix(link, end)
                lines.append(f"    case {2 * link + e}:")
                lines += [f"        p.{name} = &t->{port(pre + name)};" for name in _LINK_END_PORTS]
                lines += [f"        p.counters[{k}] = &t->{port(pre + n)};" for k, n in enumerate(counters)]
                lines.append("        break;")
        lines += ["    default: break;", "    }", "    return p;", "}"]
    return "\n".join(lines) + "\n"


# --- build ------------------------------------------------------------------------------------

def default_build_root() -> Path:
    """``$NDPDIMM_HARNESS_BUILD_ROOT``, else ``<cache root>/harness`` (``cosim/cache.py``)."""
    return build_cache_dir("harness")


def _log(msg):
    print(f"[rtl_harness] {msg}", file=sys.stderr, flush=True)


def harness_top_verilog(core_verilog: str) -> str:
    """The top Verilator builds: ``ndp_core`` with its resets registered (``cosim/rtl/core_top.py``)."""
    return reset_register_wrapper(core_verilog, HARNESS_TOP)


def _top_module(n_cores: int) -> str:
    from ndpdimm.cosim.rtl.system_top import LINK_SYSTEM_TOP
    return HARNESS_TOP if n_cores == 1 else LINK_SYSTEM_TOP


def _verilog_files(n_cores: int) -> tuple:
    """The Verilog files of a build directory: the core and its wrapper, or the whole system."""
    return ("ndp_core.v", "harness_top.v") if n_cores == 1 else ("link_system.v",)


def _verilator_cmd(out_dir: Path, waves: bool, cxx_opt: str, extra_flags=(), n_cores: int = 1) -> list:
    cflags = "-fPIC -std=c++17" + (" -DNDPH_TRACE" if waves else "")
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", str(min(2, os.cpu_count() or 1)),
           "--top-module", _top_module(n_cores), "--prefix", "Vtop", "--Mdir", str(out_dir / "obj"),
           *[f for f in VERILATOR_FLAGS if f != "--no-public-flat-rw"],
           *extra_flags, "-CFLAGS", cflags, "-LDFLAGS", "-shared", "-o", LIB_NAME]
    if waves:
        cmd.append("--trace")
    return cmd + [str(out_dir / f) for f in _verilog_files(n_cores)] + [
        str(out_dir / "ndp_harness.cpp"), str(out_dir / "dram_model.cpp")]


def _top_verilog(config: CoreConfig, n_cores: int) -> tuple:
    """``{file name: Verilog}`` of a build, and the text its identity hashes."""
    if n_cores == 1:
        verilog = elaborate("ndp_core", _FACTORY,
                            {"config_path": config.dram_config, **config.core_params()})
        return {"ndp_core.v": verilog, "harness_top.v": harness_top_verilog(verilog)}
    from ndpdimm.cosim.rtl.system_top import LINK_SYSTEM_FACTORY, LINK_SYSTEM_TOP
    verilog = elaborate(LINK_SYSTEM_TOP, LINK_SYSTEM_FACTORY,
                        {"n_cores": n_cores, "config_path": config.dram_config, **config.core_params()})
    return {"link_system.v": verilog}


def _build_identity(config: CoreConfig, files: dict, waves: bool, cxx_opt: str, extra_flags=(),
                    n_cores: int = 1):
    """(hash16, build_info dict) of a build."""
    sources = {name: (HARNESS_SOURCES[name] / name).read_text() for name in HARNESS_SOURCES}
    h = hashlib.sha256()
    for part in (*(_SRC_ATTRIBUTE.sub("", v) for v in files.values()), *sources.values(),
                 json.dumps(VERILATOR_FLAGS + tuple(extra_flags)),
                 cxx_opt, str(waves), verilator_version(), json.dumps(config.as_dict(), sort_keys=True),
                 str(n_cores)):
        h.update(part.encode())
        h.update(b"\0\0")
    main = next(iter(files.values()))
    verilog_hash = hashlib.sha256(_SRC_ATTRIBUTE.sub("", main).encode()).hexdigest()[:16]
    digest = h.hexdigest()[:16]
    info = {"config": config.as_dict(), "verilog_sha": verilog_hash, "waves": waves,
            "cxx_opt": cxx_opt, "verilator_flags": list(extra_flags), "build": digest}
    if n_cores > 1:
        info["n_cores"] = n_cores
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


def _check_n_cores(config: CoreConfig, n_cores) -> int:
    from ndpdimm.cosim.rtl.system_top import MAX_CORES
    if not isinstance(n_cores, int) or isinstance(n_cores, bool) or not 1 <= n_cores <= MAX_CORES:
        raise ValueError(f"n_cores must be 1..{MAX_CORES} (cores joined by DIMM-Link in one "
                         f"harness), got {n_cores!r}")
    if n_cores > 1 and not config.link:
        raise ValueError(f"{n_cores} cores in one harness are a DIMM-Link chain: build them with "
                         "CoreConfig(link=True)")
    return n_cores


def _source_key(config: CoreConfig, waves: bool, cxx_opt: str, extra_flags=(), n_cores: int = 1) -> str:
    """Hash of everything the Verilog and the library derive from, known without elaborating:
    the RTL's Python sources and DRAM configs, the harness sources, the configuration, flags
    and tool versions. It maps to a finished build in ``<root>/index/`` so a second run skips
    elaboration (which takes about a minute for a small core) as well as the build."""
    import importlib.metadata
    here = Path(__file__).resolve()
    h = hashlib.sha256()
    files = rtl_sources() + [d / n for n, d in HARNESS_SOURCES.items()] + \
        [here, here.with_name("core_top.py")]
    if n_cores > 1:
        files.append(here.with_name("system_top.py"))
    if config.dram_config:
        files.append(Path(config.dram_config))
    hash_files(h, files)
    for part in (json.dumps(config.as_dict(), sort_keys=True), str(waves), cxx_opt,
                 json.dumps(VERILATOR_FLAGS + tuple(extra_flags)), verilator_version(),
                 importlib.metadata.version("amaranth")) + ((f"n_cores={n_cores}",) if n_cores > 1 else ()):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:24]


def build_harness(config: CoreConfig, *, waves: bool = False, cxx_opt: str = CXX_OPT,
                  extra_flags: Sequence[str] = VERILATOR_OPT, build_root: str | os.PathLike | None = None,
                  progress: bool = True, n_cores: int = 1) -> Path:
    """Path of ``libndpcore.so`` for ``config`` (built if missing); see the module docstring.

    ``cxx_opt`` is the g++ optimisation of the model's code, ``extra_flags`` Verilator's options
    (default :data:`VERILATOR_OPT`; e.g. ``()``, ``("--flatten",)``, ``("--threads", "2")``):
    build options ``bench_cosim`` compares.
    ``n_cores`` > 1 builds that many cores joined by DIMM-Link (``cosim/rtl/system_top.py``; the
    configuration needs ``link=True``).
    """
    extra_flags = tuple(extra_flags)
    n_cores = _check_n_cores(config, n_cores)
    root = Path(build_root).resolve() if build_root is not None else default_build_root()
    index = root / "index" / f"{_source_key(config, waves, cxx_opt, extra_flags, n_cores)}.json"
    if index.exists():
        out_dir = root / json.loads(index.read_text())["dir"]
        if (out_dir / _DONE).exists():
            return out_dir / "obj" / LIB_NAME
    what = "NdpCore" if n_cores == 1 else f"{n_cores} NdpCores joined by DIMM-Link"
    if progress:
        _log(f"elaborating {what} {json.dumps(config.core_params())}")
    files = _top_verilog(config, n_cores)
    digest, info = _build_identity(config, files, waves, cxx_opt, extra_flags, n_cores)
    name = "ndp_core" if n_cores == 1 else f"link_system{n_cores}"
    out_dir = root / f"{name}-{digest}"
    lib = out_dir / "obj" / LIB_NAME
    if (out_dir / _DONE).exists():
        _write_index(index, out_dir)
        return lib
    lines = sum(v.count("\n") for v in files.values())
    with _file_lock(root / f".{name}-{digest}.lock"):
        if (out_dir / _DONE).exists():
            return lib
        if out_dir.exists():
            shutil.rmtree(out_dir)
        out_dir.mkdir(parents=True)
        for fname, text in files.items():
            (out_dir / fname).write_text(text)
        (out_dir / "harness_config.h").write_text(harness_header(config, info))
        (out_dir / "harness_ports.h").write_text(harness_ports_header(n_cores, config.dram()[0].ranks))
        for src in HARNESS_SOURCES:
            shutil.copyfile(HARNESS_SOURCES[src] / src, out_dir / src)
        if progress:
            _log(f"building the harness of {what} {json.dumps(config.core_params())} "
                 f"({lines} lines of Verilog{', waves' if waves else ''}) -> {out_dir}")
        env = {**os.environ, **verilator_env(cxx_opt)}
        env.pop("VERILATOR_ROOT", None)
        start = time.monotonic()
        log = out_dir / "build.log"
        with open(log, "w") as f, _Progress(out_dir / "obj", progress):
            proc = subprocess.run(_verilator_cmd(out_dir, waves, cxx_opt, extra_flags, n_cores),
                                  stdout=f, stderr=subprocess.STDOUT, env=env, cwd=out_dir)
        if proc.returncode or not lib.exists():
            raise RuntimeError(f"building the harness failed (exit {proc.returncode}); "
                               f"last lines of {log}:\n{_tail(log)}")
        seconds = time.monotonic() - start
        (out_dir / _DONE).write_text(json.dumps({**info, "seconds": round(seconds, 1),
                                                 "verilog_lines": lines}, indent=1) + "\n")
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
            "ndph_n_cores": (I32, []),
            "ndph_create": (P, [ctypes.c_char_p, ctypes.c_size_t]),
            "ndph_destroy": (None, [P]),
            "ndph_error": (B, [P]),
            "ndph_link_configure": (I32, [P, I64, ctypes.c_double, U64, I32]),
            "ndph_link_counters": (I32, [P, I32, I32, ctypes.POINTER(I64)]),
            "ndph_run_until_links_up": (I32, [P, I64]),
            "ndph_submit": (I32, [P, I32, ctypes.POINTER(U64), I64]),
            "ndph_run": (I32, [P, I32, I64]),
            "ndph_run_cycles": (I32, [P, I64]),
            "ndph_csr": (I32, [P, I32, ctypes.c_uint32, I32, U64, ctypes.POINTER(U64), I64]),
            "ndph_csr_reads": (I32, [P, I32, ctypes.POINTER(ctypes.c_uint32), I32, ctypes.POINTER(U64), I64]),
            "ndph_completions": (I64, [P, I32, ctypes.POINTER(I64), I64]),
            "ndph_pending": (I64, [P, I32]),
            "ndph_host_access": (I32, [P, I32, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_host_stream": (I32, [P, I32, I64, I64, I64]),
            "ndph_host_stream_stats": (I32, [P, I32, ctypes.POINTER(I64)]),
            "ndph_load": (I32, [P, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_dump": (I32, [P, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_stats": (I32, [P, I32, ctypes.POINTER(I64)]),
            "ndph_trace_open": (I32, [P, ctypes.c_char_p, I64, I64]),
            "ndph_trace_close": (None, [P]),
            "ndph_bare_clock": (I64, [P, I64]),
            "ndph_profile": (I32, [P, I32, ctypes.POINTER(I64)]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _LIBS[key] = lib
    return _LIBS[key]


def _bytes_arg(data: bytes):
    return (ctypes.c_uint8 * len(data)).from_buffer_copy(data)


class _Simulation:
    """One instance of a harness library: the Verilated top (one core, or a DIMM-Link chain),
    its clocks, and per core its DRAM and host driver. Shared by the backends of its cores;
    destroyed when the last of them closes."""

    def __init__(self, config: CoreConfig, n_cores: int, *, waves, progress, library, cxx_opt,
                 extra_flags, build_root):
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        n_cores = _check_n_cores(config, n_cores)
        if waves is not None:
            if not (isinstance(waves, (tuple, list)) and len(waves) == 3):
                raise ValueError(f"waves must be (path, first_cycle, last_cycle), got {waves!r}")
        path = Path(library) if library is not None else build_harness(
            config, waves=waves is not None, cxx_opt=cxx_opt, extra_flags=extra_flags,
            build_root=build_root, progress=progress, n_cores=n_cores)
        self.library = path
        self.lib = lib = _load(path.resolve())
        info = json.loads(lib.ndph_build_info().decode())
        built_cores = lib.ndph_n_cores()
        if info.get("config") != config.as_dict() or built_cores != n_cores:
            raise HarnessMismatch(
                f"harness library {path} was built for {built_cores} core(s) of "
                f"{info.get('config')}, not for {n_cores} of {config.as_dict()}: build one for "
                "this configuration (omit library=)")
        if waves is not None and not info.get("waves"):
            raise HarnessMismatch(f"harness library {path} was built without waveform support")
        self.build_info, self.n_cores, self.config = info, n_cores, config
        err = ctypes.create_string_buffer(512)
        self.h = lib.ndph_create(err, len(err))
        if not self.h:
            raise RuntimeError(f"cannot create the harness: {err.value.decode()}")
        self.users = 0
        if waves is not None:
            wpath, first, last = waves
            self.check(lib.ndph_trace_open(self.h, str(wpath).encode(), int(first), int(last)))

    def start(self) -> None:
        self.check(self.lib.ndph_run_cycles(self.h, 8))   # out of reset

    def check(self, status: int) -> int:
        if status in (_OK, _MAX_CYCLES):
            return status
        msg = self.lib.ndph_error(self.h).decode()
        if status == _VALUE_ERROR:
            raise ValueError(msg)
        raise HarnessError(msg)

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0 and self.h:
            self.lib.ndph_destroy(self.h)
            self.h = None


class RtlBackend(Backend):
    """One NDP-DIMM simulated from its RTL (see the module docstring).

    ``waves``: ``None`` or ``(path, first_cycle, last_cycle)`` to record a VCD window.
    ``library``: use this harness library instead of building one; it must have been built
    for ``config`` (else :class:`HarnessMismatch`).

    The cores of an :class:`RtlSystem` are ``RtlBackend`` s too (``system.cores[i]``); each
    call names its core, and running one core clocks them all (they are one simulation).
    """
    name = "rtl"

    def __init__(self, config: CoreConfig = CoreConfig(), *, waves: tuple[str | os.PathLike, int, int] | None = None,
                 progress: bool = True, library: str | os.PathLike | None = None, cxx_opt: str = CXX_OPT,
                 extra_flags: Sequence[str] = VERILATOR_OPT, build_root: str | os.PathLike | None = None) -> None:
        sim = _Simulation(config, 1, waves=waves, progress=progress, library=library,
                          cxx_opt=cxx_opt, extra_flags=extra_flags, build_root=build_root)
        self._attach(sim, 0)
        sim.start()

    @classmethod
    def _core(cls, sim: _Simulation, core: int) -> "RtlBackend":
        b = cls.__new__(cls)
        b._attach(sim, core)
        return b

    def _attach(self, sim: _Simulation, core: int):
        self._sim, self._core_index = sim, core
        sim.users += 1
        self.config = sim.config
        self.org, self.timing = self.config.dram()
        self.library, self.build_info = sim.library, sim.build_info
        self._lib = sim.lib

    @property
    def _h(self):
        return self._sim.h

    # --- plumbing -------------------------------------------------------------------------
    def _check(self, status):
        return self._sim.check(status)

    def close(self) -> None:
        if getattr(self, "_sim", None) is not None:
            self._sim.release()
            self._sim = None

    def __del__(self):
        self.close()

    def _range(self, addr, n):
        cap = self.org.capacity_bytes
        if not isinstance(addr, int) or not isinstance(n, int) or addr < 0 or n < 0 or addr + n > cap:
            raise ValueError(f"DRAM range {addr!r} + {n!r} bytes is outside the DIMM (0..{cap:#x})")

    # --- Backend --------------------------------------------------------------------------
    def load(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        self._range(addr, len(data))
        if data:
            self._check(self._lib.ndph_load(self._h, self._core_index, addr, _bytes_arg(data), len(data)))

    def dump(self, addr: int, n: int) -> bytes:
        self._range(addr, n)
        buf = (ctypes.c_uint8 * max(n, 1))()
        if n:
            self._check(self._lib.ndph_dump(self._h, self._core_index, addr, buf, n))
        return bytes(buf)[:n]

    def _burst_address(self, addr, what="host access address"):
        if not isinstance(addr, int) or isinstance(addr, bool) or addr % BURST_BYTES or \
                not 0 <= addr <= self.org.capacity_bytes - BURST_BYTES:
            raise ValueError(f"{what} {addr!r} is not a 64 B aligned burst in the DIMM")

    def host_access(self, addr: int, write: bool, data: bytes = b"") -> bytes:
        self._burst_address(addr)
        if write and len(bytes(data)) != BURST_BYTES:
            raise ValueError(f"a host write is {BURST_BYTES} bytes, got {len(bytes(data))}")
        buf = _bytes_arg(bytes(data) if write else bytes(BURST_BYTES))
        self._check(self._lib.ndph_host_access(self._h, self._core_index, int(bool(write)), addr, buf,
                                               ACCESS_TIMEOUT_CYCLES))
        return b"" if write else bytes(buf)

    def host_stream(self, addr: int, nbytes: int, spacing_cycles: int) -> None:
        """Background host reads: one 64 B pass-through read every ``spacing_cycles`` NDP cycles,
        cycling over ``[addr, addr + nbytes)``, issued by the harness while the simulation runs
        (no Python call per read). ``nbytes`` 0 stops the stream. Reads in flight do not keep
        :meth:`run` going. See :meth:`host_stream_stats`."""
        if not isinstance(spacing_cycles, int) or isinstance(spacing_cycles, bool) or spacing_cycles < 1:
            raise ValueError(f"spacing_cycles must be a positive integer, got {spacing_cycles!r}")
        if nbytes != 0:
            self._burst_address(addr, "host stream address")
            if not isinstance(nbytes, int) or nbytes < 0 or nbytes % BURST_BYTES:
                raise ValueError(f"host stream size must be whole 64 B bursts, got {nbytes!r}")
            self._range(addr, nbytes)
        self._check(self._lib.ndph_host_stream(self._h, self._core_index, int(addr), int(nbytes),
                                               int(spacing_cycles)))

    def host_stream_stats(self) -> dict[str, int | float]:
        """The background stream since it was started: reads issued and completed, mean and
        max latency of the completed ones (NDP cycles from issue to response)."""
        out = (ctypes.c_int64 * 4)()
        self._check(self._lib.ndph_host_stream_stats(self._h, self._core_index, out))
        issued, completed, total, worst = list(out)
        return {"issued": issued, "completed": completed,
                "mean_latency": total / completed if completed else 0.0, "max_latency": worst}

    def csr_write(self, name: str, value: int) -> None:
        r = register(name)
        if not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise ValueError(f"register {name}: value must be a 64-bit unsigned int, got {value!r}")
        self._check(self._lib.ndph_csr(self._h, self._core_index, r.offset, 1, value, None,
                                       ACCESS_TIMEOUT_CYCLES))

    def csr_read(self, name: str) -> int:
        r = register(name)
        out = ctypes.c_uint64()
        self._check(self._lib.ndph_csr(self._h, self._core_index, r.offset, 0, 0, ctypes.byref(out),
                                       ACCESS_TIMEOUT_CYCLES))
        return out.value

    def counters(self) -> dict[str, int]:
        """The :data:`COUNTER_REGISTERS` by name, read in one harness call (the reads queue back
        to back on the CSR port, as a host would issue them)."""
        n = len(COUNTER_REGISTERS)
        addrs = (ctypes.c_uint32 * n)(*(register(name).offset for name in COUNTER_REGISTERS))
        out = (ctypes.c_uint64 * n)()
        self._check(self._lib.ndph_csr_reads(self._h, self._core_index, addrs, n, out,
                                             n * ACCESS_TIMEOUT_CYCLES))
        return dict(zip(COUNTER_REGISTERS, list(out)))

    def submit(self, words: Iterable[int]) -> None:
        words = [check_word(w) for w in words]
        if not words:
            return
        arr = (ctypes.c_uint64 * (4 * len(words)))()
        for i, w in enumerate(words):
            for k in range(4):
                arr[4 * i + k] = (w >> (64 * k)) & (2 ** 64 - 1)
        self._check(self._lib.ndph_submit(self._h, self._core_index, arr, len(words)))

    def run(self, max_cycles: int | None = None) -> list[Completion]:
        limit = (1 << 62) if max_cycles is None else int(max_cycles)
        if limit < 0:
            raise ValueError(f"max_cycles must be >= 0, got {max_cycles!r}")
        self._check(self._lib.ndph_run(self._h, self._core_index, limit))
        return self._take_completions()

    def run_cycles(self, n: int) -> list[Completion]:
        """Clock ``n`` NDP cycles (the driver keeps pushing and collecting); completions so far."""
        self._check(self._lib.ndph_run_cycles(self._h, int(n)))
        return self._take_completions()

    def _take_completions(self):
        out = []
        while True:
            buf = (ctypes.c_int64 * (4 * 64))()
            k = self._lib.ndph_completions(self._h, self._core_index, buf, 64)
            for i in range(k):
                head, cycles, nbytes, done = buf[4 * i:4 * i + 4]
                f = _CQ_HEAD.unpack(head)
                out.append(Completion(id=f["ID"], opcode=f["OPCODE"], status=Status(f["STATUS"]),
                                      cycles=cycles, dram_bytes=nbytes, done_cycle=done))
            if k < 64:
                return out

    @property
    def pending(self) -> int:
        return self._lib.ndph_pending(self._h, self._core_index)

    @property
    def cycle(self) -> int:
        return self.stats()["ndp_cycle"]

    def stats(self) -> dict[str, int]:
        """Harness-side counts: cycles of both clocks, DRAM commands by kind, bursts, row
        hits/misses (the timing checker's), bytes the sparse store holds (this core's DRAM)."""
        out = (ctypes.c_int64 * 12)()
        self._check(self._lib.ndph_stats(self._h, self._core_index, out))
        keys = ("ndp_cycle", "dram_cycle", "ACT", "RD", "WR", "PRE", "REF", "bursts_read",
                "bursts_written", "row_hits", "row_misses", "touched_bytes")
        return dict(zip(keys, list(out)))

    def close_waves(self) -> None:
        self._lib.ndph_trace_close(self._h)

    def profile(self, enable: bool | None = None) -> dict[str, float | int | None]:
        """Where the clocking loop's time goes, by the steady clock. ``enable`` True / False
        starts / stops timing every ``eval()`` of the Verilated model and every run loop
        (two clock reads per ``eval()``: at most a few per cent of a 16-unit core's cycle, less
        for larger cores); None only reads. Returns the totals since the instance was
        created: ``eval_seconds`` (the model's own evaluation), ``loop_seconds`` (the run
        loops: evaluation plus DRAM model, drivers and channels), ``evals`` and
        ``harness_share`` (the part of the loops spent outside the model)."""
        out = (ctypes.c_int64 * 3)()
        on = -1 if enable is None else int(bool(enable))
        self._check(self._lib.ndph_profile(self._h, on, out))
        eval_s, loop_s = out[0] * 1e-9, out[1] * 1e-9
        return {"eval_seconds": eval_s, "loop_seconds": loop_s, "evals": out[2],
                "harness_share": (loop_s - eval_s) / loop_s if loop_s else None}

    def bare_clock(self, n: int) -> int:
        """Measurement baseline: clock the model alone for ``n`` cycles (no DRAM, no driver).
        The instance is unusable afterwards."""
        return self._lib.ndph_bare_clock(self._h, int(n))


class RtlSystem:
    """``n_cores`` RTL NDP cores joined in a DIMM-Link chain (core ``i`` = DIMM ``i``), in one
    harness library (``cosim/rtl/system_top.py``'s top): each core has its own DRAM and host
    driver, and each direction of each link is a behavioural channel in C++ (``latency``
    cycles, bit errors at ``ber``, per lane a random bit offset of up to ``max_bit_offset``
    bits, all from a generator seeded with ``seed``) between the link ports' serial lanes.
    ``cores[i]`` is core ``i``'s :class:`RtlBackend`.
    """

    def __init__(self, config: CoreConfig, n_cores: int, *, latency: int = LINK_LATENCY,
                 ber: float = 0.0, seed: int = 0, max_bit_offset: int = LINK_MAX_BIT_OFFSET,
                 progress: bool = True, library: str | os.PathLike | None = None,
                 cxx_opt: str = CXX_OPT, extra_flags: Sequence[str] = VERILATOR_OPT,
                 build_root: str | os.PathLike | None = None) -> None:
        if not isinstance(n_cores, int) or isinstance(n_cores, bool) or n_cores < 2:
            raise ValueError(f"an RTL DIMM-Link system has 2 or more cores, got {n_cores!r}")
        if not isinstance(latency, int) or isinstance(latency, bool) or not 0 <= latency <= 1 << 20:
            raise ValueError(f"link latency must be an integer number of cycles in 0..2^20, got {latency!r}")
        if not isinstance(ber, (int, float)) or isinstance(ber, bool) or not 0 <= ber < 1:
            raise ValueError(f"link ber must be a number in [0, 1), got {ber!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"link seed must be a non-negative integer, got {seed!r}")
        if not isinstance(max_bit_offset, int) or isinstance(max_bit_offset, bool) or \
                not 0 <= max_bit_offset <= 90:
            raise ValueError(f"max_bit_offset must be an integer in 0..90, got {max_bit_offset!r}")
        sim = _Simulation(config, n_cores, waves=None, progress=progress, library=library,
                          cxx_opt=cxx_opt, extra_flags=extra_flags, build_root=build_root)
        sim.check(sim.lib.ndph_link_configure(sim.h, latency, float(ber), seed, max_bit_offset))
        self.cores = [RtlBackend._core(sim, i) for i in range(n_cores)]
        self.latency, self.ber, self.seed = latency, float(ber), seed
        self._sim = sim
        sim.start()
        # as the cocotb bench: nothing is sent before every link end has trained
        if sim.check(sim.lib.ndph_run_until_links_up(sim.h, LINK_TRAINING_CYCLES)) == _MAX_CYCLES:
            raise HarnessError(f"the DIMM-Links did not come up within {LINK_TRAINING_CYCLES} cycles")

    def __len__(self) -> int:
        return len(self.cores)

    def run(self, max_cycles: int | None = None) -> list[list[Completion]]:
        """Run until every core is idle; each core's completions (a list per core)."""
        limit = (1 << 62) if max_cycles is None else int(max_cycles)
        self._sim.check(self._sim.lib.ndph_run(self._sim.h, -1, limit))
        return [c._take_completions() for c in self.cores]

    def link_counters(self) -> dict[str, dict[str, int]]:
        """Per direction ``"i->j"`` of every link: the sending end's and the receiving end's
        counters as the RTL link ports count them (``tx_*``: the sender's, e.g. frames sent,
        replays, timeouts, NAKs received; ``rx_*``: the receiver's, e.g. CRC errors, NAKs sent,
        duplicates; ``phy_*`` of the receiver), plus the channel's ``chunks`` carried and
        ``injected_bit_errors``."""
        from ndpdimm.hw.link.port import RX_COUNTERS, TX_COUNTERS
        names = link_counter_names()
        out = {}
        for link in range(len(self.cores) - 1):
            ends = []
            for end in (0, 1):
                buf = (ctypes.c_int64 * (len(names) + 2))()
                self._sim.check(self._sim.lib.ndph_link_counters(self._sim.h, link, end, buf))
                ends.append(list(buf))
            for send, recv, key in ((0, 1, f"{link}->{link + 1}"), (1, 0, f"{link + 1}->{link}")):
                tx, rx = dict(zip(names, ends[send])), dict(zip(names, ends[recv]))
                row = {f"tx_{n}": tx[n] for n in TX_COUNTERS}
                row.update({f"rx_{n}": rx[n] for n in RX_COUNTERS})
                row.update({n: rx[n] for n in names if n.startswith("phy_")})
                row["chunks"], row["injected_bit_errors"] = ends[send][len(names):]
                out[key] = row
        return out

    def close(self) -> None:
        for c in self.cores:
            c.close()
