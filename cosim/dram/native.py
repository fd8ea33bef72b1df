"""The C++ DRAM model of the fast harness, behind the Python API of ``cosim/dram/model.py``.

What it is. ``cosim/dram/cpp/dram_model.{h,cpp}`` is a C++17 port (standard library
only) of ``SparseStore`` and ``TimingChecker`` from ``ndpdimm.cosim.dram.model``,
for the fast RTL harness, where a Verilated NdpCore runs "until idle" in C++ and
must not call into Python per DRAM command. It follows ``cosim/dram/model.py``
rule for rule: the same constraints, the same binding rule and tie-break order,
the same refresh deadline and credit rule, the same protocol errors, "a
rejected command changes no state", the same counters and the same message
text; the docstring of ``cosim/dram/model.py`` is its specification.
``cosim/dram/cpp/dram_model_capi.cpp`` gives it a C ABI (no C++ exception crosses
it: calls return a status, a violation is read back as a record).

This module wraps that ABI with ctypes in ``SparseStore`` and ``TimingChecker``
classes with the same constructor arguments, methods, return values and
exceptions as the Python ones: a violation raises the very same
``TimingViolation`` class, built from the C++ record (command, cycle,
constraint, rank / bank group / bank, earliest, detail, others), so its fields
and message are those Python would give; API misuse raises ``ValueError`` with
the C++ text, which is Python's. ``tests/cosim/dram/test_model.py`` runs the per-rule
tests on both implementations and feeds both one long random command stream,
comparing every decision, field, message (including the C++-formatted one,
``TimingChecker.last_error_message()``) and counter.

The only differences are limits (Python ints are unbounded): cycles below 2^61,
timing values at most 2^30, store capacity at most 2^62; beyond them the native
classes raise ``ValueError`` instead of computing.

Build and cache. :func:`build_library` compiles ``dram_model.cpp`` and
``dram_model_capi.cpp`` with ``$CXX`` (default ``g++``) and :data:`CXX_FLAGS`
(``-std=c++17 -O2 -shared -fPIC -Wall -Wextra``) into
``<cache>/native/<hash16>/libndpdram.so`` under the shared cache root of
``cosim/cache.py`` (``$NDPDIMM_NATIVE_BUILD_ROOT`` replaces ``<cache>/native``), where the hash covers the source texts, the flags and the
compiler's ``--version``. The sources compiled are copied into
``<hash16>/src/`` with the compiler's output in ``build.log``. A library that
exists is reused; a missing one is built by ``cosim.cache.cached_build`` under a per-hash
file lock, so concurrent pytest-xdist workers build it once; it appears by an atomic rename
and is itself the build's done marker, so a half-written library is never loaded.
The classes build (or find) and load the library on first use.
"""

import ctypes
import functools
import hashlib
import json
import os
import subprocess
import time
import weakref
from pathlib import Path

from ndpdimm.cosim.cache import OVERRIDES, build_cache_dir, cached_build
from ndpdimm.cosim.dram import model as _py
from ndpdimm.cosim.dram.model import (
    COMMANDS,
    TimingViolation,
    byte_view,
    check_org_timing,
    check_store_args,
    is_int,
)
from ndpdimm.hw.memory.dram import DramOrganization, DramTiming

__all__ = ["SOURCE_DIR", "SOURCES", "CXX_FLAGS", "LIB_NAME", "BUILD_ROOT_ENV",
           "default_build_root", "source_hash", "build_library", "load_library",
           "SparseStore", "TimingChecker", "TimingViolation"]

#: Where the C++ sources live.
SOURCE_DIR = Path(__file__).resolve().parent / "cpp"
#: Every file that decides the library (the header included); the .cpp files are compiled.
SOURCES = ("dram_model.h", "dram_model.cpp", "dram_model_capi.cpp")
CXX_FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-Wall", "-Wextra")
LIB_NAME = "libndpdram.so"
#: Environment variable overriding the default build root (``<cache root>/native``).
BUILD_ROOT_ENV = OVERRIDES["native"]
#: Must equal NDPDRAM_ABI_VERSION in dram_model.h.
ABI_VERSION = 1

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_NONE = _INT64_MIN                                   # NDPDRAM_NONE
_OK, _VIOLATION, _VALUE_ERROR, _INTERNAL_ERROR = 0, 1, 2, 3
_ARG_NONE, _ARG_INT, _ARG_OTHER, _ARG_BIGINT = 0, 1, 2, 3
_COMMAND_INDEX = {name: i for i, name in enumerate(COMMANDS)}
_CHECK_REFRESH = len(COMMANDS)


# --- build ------------------------------------------------------------------

def default_build_root() -> Path:
    """``$NDPDIMM_NATIVE_BUILD_ROOT``, else ``<cache root>/native`` (``cosim/cache.py``)."""
    return build_cache_dir("native")


def _compiler() -> str:
    return os.environ.get("CXX") or "g++"


@functools.cache
def _compiler_id(cxx: str) -> str:
    try:
        proc = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RuntimeError(f"C++ compiler {cxx!r} not usable for the native DRAM model: {e}") from None
    if proc.returncode:
        raise RuntimeError(f"`{cxx} --version` failed: {proc.stderr.strip()}")
    return proc.stdout


def _read_sources(sources_dir: Path) -> dict:
    return {name: (Path(sources_dir) / name).read_bytes() for name in SOURCES}


def _hash(sources: dict, flags, cxx: str) -> str:
    h = hashlib.sha256()
    for name in SOURCES:
        for part in (name.encode(), sources[name]):
            h.update(part)
            h.update(b"\0\0")
    for part in ("\0".join(flags), cxx, _compiler_id(cxx)):
        h.update(part.encode())
        h.update(b"\0\0")
    return h.hexdigest()[:16]


def source_hash(sources_dir=SOURCE_DIR, flags=CXX_FLAGS) -> str:
    """The 16-hex-digit cache key of the library: sources, flags and compiler."""
    return _hash(_read_sources(sources_dir), tuple(flags), _compiler())


def build_library(*, build_root=None, sources_dir=SOURCE_DIR, flags=CXX_FLAGS) -> Path:
    """Path of ``libndpdram.so`` built from ``sources_dir`` with ``flags``; compiles it if needed.

    See the module docstring for the cache layout and the locking.
    """
    flags, cxx = tuple(flags), _compiler()
    sources = _read_sources(sources_dir)           # hashed and compiled: the same bytes
    digest = _hash(sources, flags, cxx)
    root = Path(build_root).resolve() if build_root is not None else default_build_root()

    def make(out_dir: Path) -> None:
        src = out_dir / "src"
        src.mkdir()
        for name, text in sources.items():
            (src / name).write_bytes(text)
        tmp = out_dir / f"{LIB_NAME}.tmp{os.getpid()}"
        cmd = [cxx, *flags, "-o", str(tmp)] + [str(src / n) for n in SOURCES if n.endswith(".cpp")]
        start = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        seconds = time.monotonic() - start
        (out_dir / "build.log").write_text(" ".join(cmd) + "\n" + proc.stdout + proc.stderr)
        if proc.returncode:
            tmp.unlink(missing_ok=True)
            raise RuntimeError(f"building {LIB_NAME} failed ({' '.join(cmd)}):\n"
                               f"{(proc.stdout + proc.stderr)[-4000:]}")
        (out_dir / "build.json").write_text(json.dumps({
            "flags": list(flags), "compiler": cxx, "compiler_version": _compiler_id(cxx).splitlines()[0],
            "sources": list(SOURCES), "seconds": round(seconds, 1), "pid": os.getpid(),
        }, indent=1) + "\n")
        os.replace(tmp, out_dir / LIB_NAME)        # atomic: the library is the done marker

    return cached_build("native", digest, make, root=root, marker=LIB_NAME) / LIB_NAME


# --- ctypes binding ---------------------------------------------------------

class _Arg(ctypes.Structure):
    _fields_ = [("value", ctypes.c_int64), ("kind", ctypes.c_int32),
                ("repr", ctypes.c_char_p), ("str", ctypes.c_char_p)]


_ORG_FIELDS = ("ranks", "bank_groups", "banks_per_group", "rows_per_bank", "row_bytes", "burst_bytes")
_TIMING_FIELDS = ("tRC", "tRCD", "tCL", "tRP", "tRAS", "tBL", "tCCD_S", "tCCD_L", "tRRD_S", "tRRD_L",
                  "tFAW", "tWR", "tWTR_S", "tWTR_L", "tRTP", "CWL", "tREFI", "tRFC",
                  "max_postponed_refs")


class _Org(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in _ORG_FIELDS]


class _Timing(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64) for name in _TIMING_FIELDS]


class _Error(ctypes.Structure):
    _fields_ = [("command", ctypes.c_int32), ("constraint", ctypes.c_int32),
                ("cycle", ctypes.c_int64),
                ("rank_kind", ctypes.c_int32), ("bank_group_kind", ctypes.c_int32),
                ("bank_kind", ctypes.c_int32),
                ("rank", ctypes.c_int64), ("bank_group", ctypes.c_int64), ("bank", ctypes.c_int64),
                ("has_earliest", ctypes.c_int32), ("earliest", ctypes.c_int64),
                ("n_others", ctypes.c_int32)]


def _bind(lib):
    P, I32, I64, S = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_char_p
    A = ctypes.POINTER(_Arg)
    sigs = {
        "ndpdram_abi_version": (I32, []),
        "ndpdram_constraint_name": (S, [I32]),
        "ndpdram_num_constraints": (I32, []),
        "ndpdram_checker_create": (P, [ctypes.POINTER(_Org), ctypes.POINTER(_Timing), S, ctypes.c_size_t]),
        "ndpdram_checker_destroy": (None, [P]),
        "ndpdram_checker_issue": (I32, [P, I32, I64, I64, I64, I64, I64, I64]),
        "ndpdram_checker_issue_args": (I32, [P, I32, S, A, A]),
        "ndpdram_checker_earliest": (I32, [P, I32, I64, I64, I64, I64, I64, ctypes.POINTER(I64)]),
        "ndpdram_checker_earliest_args": (I32, [P, I32, S, A, ctypes.POINTER(I64)]),
        "ndpdram_checker_check_refresh": (I32, [P, I64, I64]),
        "ndpdram_checker_check_refresh_args": (I32, [P, A, A]),
        "ndpdram_checker_error": (I32, [P, ctypes.POINTER(_Error)]),
        "ndpdram_checker_error_other": (I32, [P, I32, ctypes.POINTER(I32), ctypes.POINTER(I64)]),
        "ndpdram_checker_error_field_text": (S, [P, I32]),
        "ndpdram_checker_error_detail": (S, [P]),
        "ndpdram_checker_error_message": (S, [P]),
        "ndpdram_checker_stats": (None, [P, ctypes.POINTER(I64)]),
        "ndpdram_checker_cycle": (I64, [P]),
        "ndpdram_checker_open_row": (I32, [P, I64, I64, I64, ctypes.POINTER(I64)]),
        "ndpdram_store_create": (P, [I64, I64, S, ctypes.c_size_t]),
        "ndpdram_store_destroy": (None, [P]),
        "ndpdram_store_read": (I32, [P, I64, I64, S]),
        "ndpdram_store_write": (I32, [P, I64, S, I64]),
        "ndpdram_store_touched_bytes": (I64, [P]),
        "ndpdram_store_error_message": (S, [P]),
    }
    for name, (restype, argtypes) in sigs.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    if lib.ndpdram_abi_version() != ABI_VERSION:
        raise RuntimeError(f"{lib._name}: ABI version {lib.ndpdram_abi_version()}, "
                           f"this wrapper needs {ABI_VERSION}")
    return lib


@functools.cache
def _load(path: str):
    return _bind(ctypes.CDLL(path))


def load_library(**build_kwargs):
    """The ctypes library (built if needed, loaded once per process and path)."""
    return _load(str(build_library(**build_kwargs)))


@functools.cache
def _constraint_names(lib) -> tuple:
    return tuple(lib.ndpdram_constraint_name(i).decode() for i in range(lib.ndpdram_num_constraints()))


def _text(value) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _arg(value) -> _Arg:
    """A Python value as the C++ model sees it: None, an int64, or text for anything else."""
    if value is None:
        return _Arg(0, _ARG_NONE, None, None)
    if is_int(value):
        if _INT64_MIN <= value <= _INT64_MAX:
            return _Arg(value, _ARG_INT, None, None)
        return _Arg(0, _ARG_BIGINT, _text(repr(value)), _text(str(value)))
    return _Arg(0, _ARG_OTHER, _text(repr(value)), _text(str(value)))


def _simple(value) -> bool:
    """Passable to the plain int64 entry points (NDPDRAM_NONE stands for None)."""
    return value is None or (is_int(value) and _INT64_MIN < value <= _INT64_MAX)


def _int64_fields(obj, names, what):
    values = {}
    for name in names:
        v = getattr(obj, name)
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise ValueError(f"{what}.{name} = {v} is beyond the native DRAM model's 64-bit range")
        values[name] = v
    return values


# --- the classes ------------------------------------------------------------

class SparseStore:
    """``cosim.dram.model.SparseStore`` in C++ (same constructor, methods and errors)."""

    def __init__(self, capacity_bytes: int, page_bytes: int = 4096):
        check_store_args(capacity_bytes, page_bytes)
        for name, v in (("capacity_bytes", capacity_bytes), ("page_bytes", page_bytes)):
            if v > _INT64_MAX:
                raise ValueError(f"{name} {v} is beyond the native store's 64-bit range")
        self._lib = lib = load_library()
        err = ctypes.create_string_buffer(512)
        h = lib.ndpdram_store_create(capacity_bytes, page_bytes, err, len(err))
        if not h:
            raise ValueError(_decode(err.value))
        self._h = h
        self._finalizer = weakref.finalize(self, lib.ndpdram_store_destroy, h)
        self.capacity_bytes = capacity_bytes
        self.page_bytes = page_bytes

    def _fail(self, status):
        msg = _decode(self._lib.ndpdram_store_error_message(self._h))
        if status == _VALUE_ERROR:
            raise ValueError(msg)
        raise (MemoryError if "out of memory" in msg else RuntimeError)(msg)

    def _reference_range_error(self, addr, n):
        # Values C cannot take (not an int, beyond int64) never fit the store: the
        # reference implementation's check words the ValueError.
        _py.SparseStore._check_range(self, addr, n)
        raise AssertionError(f"native SparseStore: range check accepted {addr!r}, {n!r}")

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes from ``addr``; untouched bytes are zero (nothing is allocated)."""
        if not (_simple(addr) and _simple(n)) or addr is None or n is None:
            self._reference_range_error(addr, n)
        buf = ctypes.create_string_buffer(n) if 0 <= n <= self.capacity_bytes else None
        status = self._lib.ndpdram_store_read(self._h, addr, n, buf)
        if status:
            self._fail(status)
        return buf.raw

    def write(self, addr: int, data) -> None:
        """Write a bytes-like object at ``addr``; the whole range is checked before any byte is written."""
        view = byte_view(data)
        n = len(view)
        if not _simple(addr) or addr is None:
            self._reference_range_error(addr, n)
        payload = data if type(data) is bytes else view.tobytes()
        status = self._lib.ndpdram_store_write(self._h, addr, payload, n)
        if status:
            self._fail(status)

    @property
    def touched_bytes(self) -> int:
        """Bytes allocated so far (whole pages)."""
        return self._lib.ndpdram_store_touched_bytes(self._h)


class TimingChecker:
    """``cosim.dram.model.TimingChecker`` in C++ (same constructor, methods and errors)."""

    def __init__(self, org: DramOrganization, timing: DramTiming):
        self.org, self.timing = check_org_timing(org, timing)
        self._lib = lib = load_library()
        self._names = _constraint_names(lib)
        c_org = _Org(**_int64_fields(org, _ORG_FIELDS, "org"))
        c_timing = _Timing(**_int64_fields(timing, _TIMING_FIELDS, "timing"))
        err = ctypes.create_string_buffer(512)
        h = lib.ndpdram_checker_create(ctypes.byref(c_org), ctypes.byref(c_timing), err, len(err))
        if not h:
            raise ValueError(_decode(err.value))
        self._h = h
        self._finalizer = weakref.finalize(self, lib.ndpdram_checker_destroy, h)
        self._error = _Error()
        self._out = ctypes.c_int64()

    # ---- helpers (as in cosim.dram_model) ----------------------------------------------
    def read_data_cycle(self, cmd_cycle: int) -> int:
        """First cycle of a RD's data on the rank's bus."""
        return cmd_cycle + self.timing.tCL

    def write_data_cycle(self, cmd_cycle: int) -> int:
        """First cycle of a WR's data on the rank's bus."""
        return cmd_cycle + self.timing.CWL

    def open_row(self, rank: int, bank_group: int, bank: int):
        """Open row of a bank, or ``None`` (indices as Python list indices)."""
        rank = range(self.org.ranks)[rank]
        bank_group = range(self.org.bank_groups)[bank_group]
        bank = range(self.org.banks_per_group)[bank]
        row = ctypes.c_int64()
        state = self._lib.ndpdram_checker_open_row(self._h, rank, bank_group, bank, ctypes.byref(row))
        if state < 0:
            raise IndexError(f"no bank ({rank}, {bank_group}, {bank})")
        return row.value if state else None

    @property
    def cycle(self) -> int:
        """Cycle of the last command (or check)."""
        return self._lib.ndpdram_checker_cycle(self._h)

    def stats(self) -> dict:
        """Counters: ``commands`` per type, ``row_hits``, ``row_misses``, ``refreshes``."""
        out = (ctypes.c_int64 * 9)()
        self._lib.ndpdram_checker_stats(self._h, out)
        return {"commands": dict(zip(COMMANDS, out[:6])), "row_hits": out[6],
                "row_misses": out[7], "refreshes": out[8]}

    def last_error_message(self) -> str:
        """The C++ model's own text of the last error (equal to ``str()`` of the exception raised)."""
        return _decode(self._lib.ndpdram_checker_error_message(self._h))

    # ---- errors --------------------------------------------------------------------------
    def _raise(self, status, given):
        """Raise the exception of a failed call; ``given`` = the caller's (rank, bank_group, bank)."""
        lib = self._lib
        if status != _VIOLATION:
            msg = self.last_error_message()
            if status == _VALUE_ERROR:
                raise ValueError(msg)
            raise (MemoryError if "out of memory" in msg else RuntimeError)(msg)
        e = self._error
        lib.ndpdram_checker_error(self._h, ctypes.byref(e))
        fields = []
        for which, (kind, value) in enumerate(((e.rank_kind, e.rank), (e.bank_group_kind, e.bank_group),
                                               (e.bank_kind, e.bank))):
            if kind == _ARG_NONE:
                fields.append(None)
            elif kind == _ARG_INT:
                fields.append(value)
            else:                           # the caller's non-int64 argument, as Python keeps it
                fields.append(given[which])
        others = []
        c, ear = ctypes.c_int32(), ctypes.c_int64()
        for i in range(e.n_others):
            lib.ndpdram_checker_error_other(self._h, i, ctypes.byref(c), ctypes.byref(ear))
            others.append((self._names[c.value], ear.value))
        command = COMMANDS[e.command] if e.command < len(COMMANDS) else "check_refresh"
        raise TimingViolation(command, e.cycle, self._names[e.constraint], *fields,
                              e.earliest if e.has_earliest else None,
                              _decode(lib.ndpdram_checker_error_detail(self._h)), others)

    # ---- public API (as in cosim.dram_model) ---------------------------------------------
    def earliest_cycle(self, command, rank, bank_group=None, bank=None, row=None, column=None) -> int:
        """Earliest cycle >= the current one at which ``command`` meets every lower-bound rule.

        Raises ``TimingViolation`` (protocol) if no cycle would make it legal; the
        refresh deadline is not considered (it is an upper bound).
        """
        kind = _COMMAND_INDEX.get(command) if isinstance(command, str) else None
        out = self._out
        if kind is not None and all(map(_simple, (rank, bank_group, bank, row, column))):
            status = self._lib.ndpdram_checker_earliest(
                self._h, kind, *(_NONE if v is None else v for v in (rank, bank_group, bank, row, column)),
                ctypes.byref(out))
        else:
            args = (_Arg * 5)(*map(_arg, (rank, bank_group, bank, row, column)))
            status = self._lib.ndpdram_checker_earliest_args(
                self._h, -1 if kind is None else kind, _text(repr(command)), args, ctypes.byref(out))
        if status:
            self._raise(status, (rank, bank_group, bank))
        return out.value

    def check_refresh(self, cycle: int, rank=None) -> None:
        """Raise ``TimingViolation("tREFI")`` if a rank (or ``rank``) has missed its refresh deadline at ``cycle``."""
        if _simple(cycle) and cycle is not None and _simple(rank):
            status = self._lib.ndpdram_checker_check_refresh(self._h, cycle, _NONE if rank is None else rank)
        else:
            status = self._lib.ndpdram_checker_check_refresh_args(
                self._h, ctypes.byref(_arg(cycle)), ctypes.byref(_arg(rank)))
        if status:
            self._raise(status, (rank, None, None))

    def issue(self, cycle, command, rank, bank_group=None, bank=None, row=None, column=None) -> None:
        """Check one command and, if legal, apply it; raise ``TimingViolation`` otherwise."""
        kind = _COMMAND_INDEX.get(command) if isinstance(command, str) else None
        if (kind is not None and cycle is not None and _simple(cycle)
                and all(map(_simple, (rank, bank_group, bank, row, column)))):
            status = self._lib.ndpdram_checker_issue(
                self._h, kind, cycle,
                *(_NONE if v is None else v for v in (rank, bank_group, bank, row, column)))
        else:
            args = (_Arg * 5)(*map(_arg, (rank, bank_group, bank, row, column)))
            status = self._lib.ndpdram_checker_issue_args(
                self._h, -1 if kind is None else kind, _text(repr(command)),
                ctypes.byref(_arg(cycle)), args)
        if status:
            self._raise(status, (rank, bank_group, bank))
