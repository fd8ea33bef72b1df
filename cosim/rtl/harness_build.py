"""The library of the RTL backend: ``NdpCore`` Verilated together with the C++ harness.

:func:`build_harness` elaborates ``NdpCore`` for a :class:`~ndpdimm.cosim.backend.CoreConfig`
to Verilog, generates ``harness_config.h`` (port field offsets from the Amaranth layouts, DRAM
organisation/timing, register offsets, address map, the build's identity) and
``harness_ports.h`` (the ports of every core and link end the one C++ driver binds), and has
Verilator compile the model, the harness (``cosim/rtl/cpp/ndp_harness.cpp``) and the C++ DRAM
model (``cosim/dram/cpp``) into ``<cache>/harness/ndp_core-<hash16>/obj/libndpcore.so``
(``<cache>``: the shared cache root of ``cosim/cache.py``, the same for every working folder;
several cores joined by DIMM-Link: ``link_system<n>-<hash16>/``). The hash covers the Verilog
(without source-location attributes), the C++ sources, the flags, the configuration and the
Verilator version; the folder is made by ``cosim.cache.cached_build`` (per-hash file lock,
``build.done.json`` written last). A second, source-keyed index (``<root>/index/``: the RTL's
Python sources, the harness sources, configuration, flags and tool versions) maps to a
finished build, so a second run with the same design skips the elaboration too. The build
reports its phases and the number of C++ objects compiled. ``cosim/rtl/harness.py`` loads the
library with ctypes (the runtime).

The default build is profile-guided (:data:`PGO`, docs/cosim.md "Build options"): Verilator and
g++ build an instrumented library, a subprocess runs the training workload on it
(``cosim/rtl/pgo_train.py``), and ``make`` compiles every object again with the profile at
:data:`PGO_CXX_OPT`, all in the one build folder, whose hash covers the toolchain (compiler and
its version, flags, the training workload). ``$NDPDIMM_HARNESS_PLAIN=1`` (or ``pgo=False``)
builds the plain way (g++ ``-Os``, one compile); ``build.done.json`` records how a library was
built (``toolchain``, and ``pgo``: the seconds of each step).
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.cache import DONE_MARKER, OVERRIDES, build_cache_dir, cached_build
from ndpdimm.cosim.dram import native
from ndpdimm.cosim.rtl.build import (
    SRC_ATTRIBUTE,
    VERILATOR_FLAGS,
    elaborate,
    hash_files,
    rtl_sources,
    tail,
    verilator_env,
    verilator_version,
)
from ndpdimm.cosim.rtl.core_top import reset_register_wrapper
from ndpdimm.hw.registers import REGISTERS

__all__ = ["build_harness", "harness_built", "build_record", "check_n_cores", "default_build_root", "harness_header",
           "harness_ports_header", "link_counter_names", "HARNESS_SOURCES", "HARNESS_TOP", "LIB_NAME",
           "CXX_OPT", "PGO_CXX_OPT", "VERILATOR_OPT", "BUILD_ROOT_ENV", "PGO", "CXX_FLAGS", "COMPILER", "PLAIN_ENV",
           "build_options", "default_cxx_opt", "host_target"]

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
#: alone for 1.3x the build time. ``extra_flags=()`` drops the ``-O3``. ``CXX_OPT`` is the
#: optimisation of a build without a profile (the plain build, the cocotb replay of the speed
#: benchmark); a profile-guided build uses :data:`PGO_CXX_OPT`.
CXX_OPT = "-Os"
VERILATOR_OPT = ("-O3",)
#: The optimisation of a profile-guided build: with a profile g++ optimises the code the
#: training ran for speed and the rest for size, so ``-O2`` beats ``-Os`` (which keeps hot code
#: small too): 1.29x the plain build on the 16-unit core, where ``-Os`` with a profile gained nothing.
PGO_CXX_OPT = "-O2"
#: Compiler profile-guided optimisation of the library (``pgo=``): an instrumented build runs a
#: short training workload (``cosim/rtl/pgo_train.py``: the cycle-identity points within a cycle
#: budget) in a subprocess, then every object is compiled again with the profile
#: (``-fprofile-use -fprofile-partial-training``), in the same folder under the same hash.
#: The simulation is the same, bit for bit and cycle for cycle (``tests/cosim/rtl/test_pgo.py``).
PGO = True
#: Extra C++ flags of every object of the library (``cxx_flags=``), e.g. ``("-march=native",)``:
#: a build with ``-march=native`` records the host's resolved target (:func:`host_target`) in
#: its identity, so a cached library is never loaded on another kind of CPU.
CXX_FLAGS: tuple = ()
#: The C++ compiler (``compiler=``): ``"g++"`` (verilated.mk's ``c++``) or ``"clang++"``.
COMPILER = "g++"
#: Set (to anything but ``0``) to build the plain way whatever the defaults above say: g++,
#: no profile, no extra flags (``cxx_opt`` / ``extra_flags`` still apply).
PLAIN_ENV = "NDPDIMM_HARNESS_PLAIN"
_FACTORY = "ndpdimm.hw.core.ndp_core:ndp_core_verilog"
#: The top module Verilator builds (``harness_top_verilog``).
HARNESS_TOP = "ndp_harness_top"


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


def build_options(pgo: bool | None = None, cxx_flags: Sequence[str] | None = None,
                  compiler: str | None = None) -> dict:
    """The toolchain options of a build, ``None`` taking the defaults (:data:`PGO`,
    :data:`CXX_FLAGS`, :data:`COMPILER`, or the plain build under ``$NDPDIMM_HARNESS_PLAIN``).
    :func:`default_cxx_opt` gives the optimisation that goes with them."""
    plain = os.environ.get(PLAIN_ENV, "") not in ("", "0")
    opts = {"pgo": bool((not plain and PGO) if pgo is None else pgo),
            "cxx_flags": tuple(() if plain else CXX_FLAGS) if cxx_flags is None else tuple(cxx_flags),
            "compiler": ("g++" if plain else COMPILER) if compiler is None else compiler}
    if opts["compiler"] not in ("g++", "clang++"):
        raise ValueError(f"compiler must be 'g++' or 'clang++', got {opts['compiler']!r}")
    return opts


def default_cxx_opt(opts: dict) -> str:
    """The C++ optimisation of a build whose ``cxx_opt`` is not given: :data:`PGO_CXX_OPT` with
    a profile, else :data:`CXX_OPT`."""
    return PGO_CXX_OPT if opts["pgo"] else CXX_OPT


def _cxx(compiler: str) -> str:
    return "c++" if compiler == "g++" else compiler


def host_target(compiler: str = "g++") -> str:
    """What ``-march=native`` means on this machine to ``compiler``: the CPU model and the
    target options the compiler resolves it to (one line, for a build's identity)."""
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    out = subprocess.run([_cxx(compiler), "-march=native", "-###", "-E", "-x", "c++", "-"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True).stderr
    # the compiler's own command line (the longest that names a CPU): -march=<cpu> or -target-cpu <cpu>
    # and the target features it implies
    cc1 = [ln for ln in out.splitlines() if "-march=" in ln or "-target-cpu" in ln]
    line = max(cc1, key=len) if cc1 else out
    resolved = hashlib.sha256(line.encode()).hexdigest()[:16]
    words = [w.strip('"') for w in line.split()]
    cpus = [w[len("-march="):] for w in words if w.startswith("-march=") and w != "-march=native"]
    if "-target-cpu" in words:
        cpus.append(words[words.index("-target-cpu") + 1])
    march = cpus[-1] if cpus else "?"
    return f"{model} / {march} / {resolved}"


def _toolchain(opts: dict) -> dict:
    """The identity of a build's toolchain options: empty for the plain g++ build (whose hash is
    then what it was before these options existed)."""
    if not opts["pgo"] and not opts["cxx_flags"] and opts["compiler"] == "g++":
        return {}
    version = subprocess.run([_cxx(opts["compiler"]), "--version"], capture_output=True,
                             text=True).stdout.splitlines()
    out = {"compiler": opts["compiler"], "compiler_version": version[0] if version else "",
           "cxx_flags": list(opts["cxx_flags"]), "pgo": opts["pgo"]}
    if "-march=native" in opts["cxx_flags"]:
        out["host_target"] = host_target(opts["compiler"])
    if opts["pgo"]:
        from ndpdimm.cosim.rtl import pgo_train
        out["pgo_training"] = pgo_train.describe()
        out["pgo_training_sha"] = hashlib.sha256(Path(pgo_train.__file__).read_bytes()).hexdigest()[:16]
    return out


def _pgo_flags(compiler: str, phase: str, profile_dir: Path) -> tuple:
    """(C++ flags, link flags) of a PGO phase: ``generate`` (instrumented) or ``use``."""
    if compiler == "clang++":
        if phase == "generate":
            f = f"-fprofile-generate={profile_dir}"
            return f, f
        return (f"-fprofile-use={profile_dir / 'merged.profdata'} -Wno-profile-instr-unprofiled "
                "-Wno-profile-instr-out-of-date", "")
    if phase == "generate":
        # single-threaded model: no atomic counter updates
        return "-fprofile-generate -fprofile-update=single", "-fprofile-generate"
    # -fprofile-partial-training: code the training did not run is optimised as without a profile
    return "-fprofile-use -fprofile-partial-training -Wno-missing-profile", ""


def _verilator_cmd(out_dir: Path, waves: bool, cxx_opt: str, extra_flags=(), n_cores: int = 1,
                   cxx_flags: str = "", ld_flags: str = "") -> list:
    cflags = "-fPIC -std=c++17" + (" -DNDPH_TRACE" if waves else "") + (f" {cxx_flags}" if cxx_flags else "")
    cmd = ["verilator", "--cc", "--exe", "--build", "-j", str(min(2, os.cpu_count() or 1)),
           "--top-module", _top_module(n_cores), "--prefix", "Vtop", "--Mdir", str(out_dir / "obj"),
           *[f for f in VERILATOR_FLAGS if f != "--no-public-flat-rw"],
           *extra_flags, "-CFLAGS", cflags, "-LDFLAGS", "-shared" + (f" {ld_flags}" if ld_flags else ""),
           "-o", LIB_NAME]
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
                    n_cores: int = 1, toolchain: dict | None = None):
    """(hash16, build_info dict) of a build (``toolchain``: :func:`_toolchain`)."""
    sources = {name: (HARNESS_SOURCES[name] / name).read_text() for name in HARNESS_SOURCES}
    h = hashlib.sha256()
    for part in (*(SRC_ATTRIBUTE.sub("", v) for v in files.values()), *sources.values(),
                 json.dumps(VERILATOR_FLAGS + tuple(extra_flags)),
                 cxx_opt, str(waves), verilator_version(), json.dumps(config.as_dict(), sort_keys=True),
                 str(n_cores), *((json.dumps(toolchain, sort_keys=True),) if toolchain else ())):
        h.update(part.encode())
        h.update(b"\0\0")
    main = next(iter(files.values()))
    verilog_hash = hashlib.sha256(SRC_ATTRIBUTE.sub("", main).encode()).hexdigest()[:16]
    digest = h.hexdigest()[:16]
    info = {"config": config.as_dict(), "verilog_sha": verilog_hash, "waves": waves,
            "cxx_opt": cxx_opt, "verilator_flags": list(extra_flags), "build": digest}
    if toolchain:
        info["toolchain"] = toolchain
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


def check_n_cores(config: CoreConfig, n_cores) -> int:
    from ndpdimm.cosim.rtl.system_top import MAX_CORES
    if not isinstance(n_cores, int) or isinstance(n_cores, bool) or not 1 <= n_cores <= MAX_CORES:
        raise ValueError(f"n_cores must be 1..{MAX_CORES} (cores joined by DIMM-Link in one "
                         f"harness), got {n_cores!r}")
    if n_cores > 1 and not config.link:
        raise ValueError(f"{n_cores} cores in one harness are a DIMM-Link chain: build them with "
                         "CoreConfig(link=True)")
    return n_cores


def _source_key(config: CoreConfig, waves: bool, cxx_opt: str, extra_flags=(), n_cores: int = 1,
                toolchain: dict | None = None) -> str:
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
                 importlib.metadata.version("amaranth")) + ((f"n_cores={n_cores}",) if n_cores > 1 else ()) \
            + ((json.dumps(toolchain, sort_keys=True),) if toolchain else ()):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:24]


def _built(root: Path, index: Path) -> Path | None:
    """The library an index entry names, if its build finished; else None."""
    if index.exists():
        out_dir = root / json.loads(index.read_text())["dir"]
        if (out_dir / DONE_MARKER).exists():
            return out_dir / "obj" / LIB_NAME
    return None


def harness_built(config: CoreConfig, *, build_root: str | os.PathLike | None = None) -> bool:
    """Whether :func:`build_harness` with its default options would find ``config``'s library
    in the cache (no elaboration, no build): the source hash and the index only."""
    root = Path(build_root).resolve() if build_root is not None else default_build_root()
    opts = build_options()
    key = _source_key(config, False, default_cxx_opt(opts), tuple(VERILATOR_OPT), 1, _toolchain(opts))
    index = root / "index" / f"{key}.json"
    return _built(root, index) is not None


def build_harness(config: CoreConfig, *, waves: bool = False, cxx_opt: str | None = None,
                  extra_flags: Sequence[str] = VERILATOR_OPT, build_root: str | os.PathLike | None = None,
                  progress: bool = True, n_cores: int = 1, pgo: bool | None = None,
                  cxx_flags: Sequence[str] | None = None, compiler: str | None = None) -> Path:
    """Path of ``libndpcore.so`` for ``config`` (built if missing); see the module docstring.

    ``cxx_opt`` is the C++ optimisation of the model's code (default :func:`default_cxx_opt`:
    ``-O2`` with a profile, ``-Os`` without), ``extra_flags`` Verilator's options
    (default :data:`VERILATOR_OPT`; e.g. ``()``, ``("--flatten",)``, ``("--threads", "2")``):
    build options ``bench/speed.py`` compares.
    ``n_cores`` > 1 builds that many cores joined by DIMM-Link (``cosim/rtl/system_top.py``; the
    configuration needs ``link=True``).
    ``pgo``, ``cxx_flags``, ``compiler``: the toolchain (:func:`build_options`; ``None``: the
    defaults :data:`PGO`, :data:`CXX_FLAGS`, :data:`COMPILER`, or the plain build under
    ``$NDPDIMM_HARNESS_PLAIN``). A waveform build is never profiled (tracing is not the hot path).
    """
    extra_flags = tuple(extra_flags)
    n_cores = check_n_cores(config, n_cores)
    opts = build_options(pgo, cxx_flags, compiler)
    if waves:
        opts["pgo"] = False
    cxx_opt = default_cxx_opt(opts) if cxx_opt is None else cxx_opt
    toolchain = _toolchain(opts)
    root = Path(build_root).resolve() if build_root is not None else default_build_root()
    index = root / "index" / f"{_source_key(config, waves, cxx_opt, extra_flags, n_cores, toolchain)}.json"
    built = _built(root, index)
    if built is not None:
        return built
    what = "NdpCore" if n_cores == 1 else f"{n_cores} NdpCores joined by DIMM-Link"
    if progress:
        _log(f"elaborating {what} {json.dumps(config.core_params())}")
    files = _top_verilog(config, n_cores)
    digest, info = _build_identity(config, files, waves, cxx_opt, extra_flags, n_cores, toolchain)
    name = "ndp_core" if n_cores == 1 else f"link_system{n_cores}"
    lines = sum(v.count("\n") for v in files.values())

    def make(out_dir: Path) -> dict:
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
        if opts["compiler"] != "g++":
            env["MAKEFLAGS"] += f" CXX={opts['compiler']} LINK={opts['compiler']}"
        extra_cxx = " ".join(opts["cxx_flags"])
        start = time.monotonic()
        log = out_dir / "build.log"
        record = {}
        ld_flags = ""
        if opts["pgo"]:
            profile_dir = out_dir / "pgo"
            gen_c, ld_flags = _pgo_flags(opts["compiler"], "generate", profile_dir)
            extra_cxx = f"{extra_cxx} {gen_c}".strip()
        with open(log, "w") as f, _Progress(out_dir / "obj", progress):
            proc = subprocess.run(_verilator_cmd(out_dir, waves, cxx_opt, extra_flags, n_cores, extra_cxx, ld_flags),
                                  stdout=f, stderr=subprocess.STDOUT, env=env, cwd=out_dir)
        if proc.returncode or not (out_dir / "obj" / LIB_NAME).exists():
            raise RuntimeError(f"building the harness failed (exit {proc.returncode}); "
                               f"last lines of {log}:\n{tail(log)}")
        if opts["pgo"]:
            record["pgo"] = _profile_and_rebuild(out_dir, config, n_cores, opts, env, log, start, progress)
        seconds = time.monotonic() - start
        if progress:
            _log(f"built in {seconds:.0f} s")
        return {**info, "seconds": round(seconds, 1), "verilog_lines": lines, **record}

    out_dir = cached_build("harness", f"{name}-{digest}", make, root=root)
    _write_index(index, out_dir)
    return out_dir / "obj" / LIB_NAME


def _profile_and_rebuild(out_dir: Path, config: CoreConfig, n_cores: int, opts: dict, env: dict,
                         log: Path, start: float, progress: bool) -> dict:
    """The PGO steps after the instrumented build in ``out_dir/obj``: the training run (in a
    subprocess, which writes the profile when it exits), then every object compiled again with
    the profile by ``make`` in the same folder (the Verilated C++ is unchanged, so Verilator
    does not run again). Returns the record of the steps (their seconds)."""
    obj = out_dir / "obj"
    instrumented = time.monotonic() - start
    if progress:
        from ndpdimm.cosim.rtl import pgo_train
        _log(f"instrumented build in {instrumented:.0f} s; training run ({pgo_train.describe()})")
    t = time.monotonic()
    with open(log, "a") as f:
        f.write("\n# PGO training run\n")
        f.flush()
        proc = subprocess.run([sys.executable, "-m", "ndpdimm.cosim.rtl.pgo_train", str(obj / LIB_NAME),
                               json.dumps(config.as_dict()), str(n_cores)],
                              stdout=f, stderr=subprocess.STDOUT, cwd=out_dir,
                              env={**os.environ, "LLVM_PROFILE_FILE": str(out_dir / "pgo" / "train-%p.profraw")})
    if proc.returncode:
        raise RuntimeError(f"the PGO training run failed (exit {proc.returncode}); last lines of "
                           f"{log}:\n{tail(log)}")
    training = time.monotonic() - t
    profile_dir = out_dir / "pgo"
    if opts["compiler"] == "clang++":
        raws = sorted(str(p) for p in profile_dir.glob("*.profraw"))
        merge = subprocess.run(["llvm-profdata", "merge", "-o", str(profile_dir / "merged.profdata"), *raws],
                               capture_output=True, text=True)
        if merge.returncode or not raws:
            raise RuntimeError(f"llvm-profdata merge failed ({len(raws)} profiles): {merge.stderr}")
    elif not list(obj.glob("*.gcda")):
        raise RuntimeError(f"the PGO training run wrote no profile (*.gcda) in {obj}")
    # the objects, precompiled headers and library of the instrumented build go; the profile stays
    for pattern in ("*.o", "*.gch", "*.a", LIB_NAME):
        for p in obj.glob(pattern):
            p.unlink()
    use_c, use_ld = _pgo_flags(opts["compiler"], "use", profile_dir)
    make_vars = _make_vars(obj)
    cflags = make_vars["VM_USER_CFLAGS"]
    gen_c, gen_ld = _pgo_flags(opts["compiler"], "generate", profile_dir)
    cflags = cflags.replace(gen_c, use_c)
    ldlibs = make_vars["VM_USER_LDLIBS"].replace(gen_ld, use_ld).strip()
    t = time.monotonic()
    with open(log, "a") as f, _Progress(obj, progress):
        f.write("\n# PGO build with the profile\n")
        f.flush()
        proc = subprocess.run(["make", "-C", str(obj), "-f", "Vtop.mk", "-j", str(min(2, os.cpu_count() or 1)),
                               f"VM_USER_CFLAGS={cflags}", f"VM_USER_LDLIBS={ldlibs}"],
                              stdout=f, stderr=subprocess.STDOUT, env=env, cwd=obj)
    if proc.returncode or not (obj / LIB_NAME).exists():
        raise RuntimeError(f"the PGO build with the profile failed (exit {proc.returncode}); "
                           f"last lines of {log}:\n{tail(log)}")
    return {"instrumented_build_seconds": round(instrumented, 1), "training_seconds": round(training, 1),
            "profiled_build_seconds": round(time.monotonic() - t, 1), "use_flags": use_c}


def _make_vars(obj: Path) -> dict:
    """``VM_USER_CFLAGS`` / ``VM_USER_LDLIBS`` (its ``-LDFLAGS``) as Verilator wrote them in ``Vtop.mk`` (one value a
    line, continued with backslashes), each as one string."""
    text = (obj / "Vtop.mk").read_text().replace("\\\n", " ")
    out = {"VM_USER_CFLAGS": "", "VM_USER_LDLIBS": ""}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.strip() in out:
            out[name.strip()] = " ".join(value.split())
    return out


def _write_index(index: Path, out_dir: Path):
    index.parent.mkdir(parents=True, exist_ok=True)
    tmp = index.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"dir": out_dir.name}) + "\n")
    os.replace(tmp, index)


def build_record(lib: Path) -> dict:
    """The ``build.done.json`` of a library (build time, parameters)."""
    return json.loads((Path(lib).parent.parent / DONE_MARKER).read_text())
