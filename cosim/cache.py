"""One cache root for every build, shared by every working folder.

Everything that is expensive to make and keyed by a content hash lives under one root,
``$NDPDIMM_CACHE`` if set, else the user cache folder of the platform
(``platformdirs.user_cache_dir("ndpdimm")``: ``~/.cache/ndpdimm`` on Linux, following
``XDG_CACHE_HOME``), in a checkout and in an installed package alike, so a new experiment
folder reuses the Verilator builds of every other one. One sub-folder per kind (:data:`KINDS`):

- ``rtl``: cocotb Verilator builds (``cosim/rtl/build.py``; ``$NDPDIMM_RTL_BUILD_ROOT`` overrides);
- ``harness``: the fast harness libraries, the RTL backend (``cosim/rtl/harness_build.py``;
  ``$NDPDIMM_HARNESS_BUILD_ROOT`` overrides);
- ``native``: the C++ DRAM model library (``cosim/dram/native.py``; ``$NDPDIMM_NATIVE_BUILD_ROOT``
  overrides);
- ``synth``: Yosys runs and elaborated netlists (``synth/flow.py``, ``synth/blocks.py``);
- ``calibration``: the raw RTL runs of ``ndpdimm calibrate`` (``--refit`` reads them);
- ``verilog``: elaborated Verilog (``cosim/rtl/build.py``: ``elaborate``), keyed by the
  elaboration's arguments and a hash of the ``hw/`` sources and DRAM configurations and
  the ``cosim/rtl/`` sources.

Sharing is safe: every build directory is named by a hash of what decides it and is made
by :func:`cached_build` under a per-hash file lock (``fcntl.flock``) in the same folder, with a
done marker written last, so processes in different working folders build each thing once
and never use a half-made build. The four builders (cocotb Verilator builds, harness
libraries, the native DRAM model, Yosys runs) all go through it. Command *results* (``--out-dir build/hermes``, ...)
are not caches and stay where the command writes them.

A root that cannot be created or written raises :class:`CacheDirError` naming the folder and
the variable that chose it. ``ndpdimm cache`` shows the root and the size of each kind;
``ndpdimm cache --clear`` removes the kinds' folders, only in a root that ndpdimm created
(it holds a ``CACHEDIR.TAG``, which also keeps backup tools out of it).
"""

import contextlib
import fcntl
import json
import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path

__all__ = ["CACHE_ENV", "KINDS", "OVERRIDES", "CacheDirError", "cache_root", "writable_dir",
           "build_cache_dir", "kind_dirs", "tree_bytes", "format_bytes", "clear_cache", "cache_report",
           "DONE_MARKER", "file_lock", "cached_build"]

#: Environment variable choosing the cache root.
CACHE_ENV = "NDPDIMM_CACHE"
#: The kinds of cache under the root: sub-folder -> what it holds.
KINDS = {
    "rtl": "cocotb Verilator builds (cosim/rtl/build.py)",
    "harness": "fast harness libraries of the RTL backend (cosim/rtl/harness_build.py)",
    "native": "C++ DRAM model library (cosim/dram/native.py)",
    "synth": "Yosys runs and netlists (synth/)",
    "calibration": "raw RTL runs of ndpdimm calibrate (--refit)",
    "verilog": "elaborated Verilog, keyed by the hw/ and cosim/rtl/ sources (cosim/rtl/build.py)",
}
#: The more specific variables that move one kind elsewhere (kept from before the shared root).
OVERRIDES = {"rtl": "NDPDIMM_RTL_BUILD_ROOT", "harness": "NDPDIMM_HARNESS_BUILD_ROOT",
             "native": "NDPDIMM_NATIVE_BUILD_ROOT"}
#: Marks a root ndpdimm created (https://bford.info/cachedir/): backup tools skip it,
#: and ``--clear`` only clears such a root.
TAG_NAME = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This folder holds build caches of ndpdimm (`ndpdimm cache`); see cosim/cache.py.\n")


class CacheDirError(ValueError):
    """A cache folder cannot be created or written; the message names it and its variable."""


def cache_root() -> Path:
    """``$NDPDIMM_CACHE`` (made absolute), else the platform's user cache folder for ndpdimm."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser().resolve()
    import platformdirs
    return Path(platformdirs.user_cache_dir("ndpdimm", appauthor=False)).resolve()


def _root_variable() -> str:
    return (f"${CACHE_ENV}" if os.environ.get(CACHE_ENV)
            else f"the platform's user cache folder; set ${CACHE_ENV} to use another")


def writable_dir(path: Path, chosen_by: str) -> Path:
    """``path``, created if missing; :class:`CacheDirError` naming it and ``chosen_by`` when it
    cannot be created or written."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheDirError(f"cannot create the build cache folder {path} (chosen by {chosen_by}): "
                            f"{e.strerror or e}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheDirError(f"the build cache folder {path} (chosen by {chosen_by}) is not writable")
    return path


def _ensure_root() -> Path:
    root = cache_root()
    fresh = not root.exists() or (root.is_dir() and not any(root.iterdir()))
    writable_dir(root, _root_variable())
    if fresh:
        (root / TAG_NAME).write_text(TAG_TEXT)
    return root


def build_cache_dir(kind: str) -> Path:
    """The folder of one kind of cache (created): ``$<override>`` of the kind if set, else
    ``<cache root>/<kind>``."""
    if kind not in KINDS:
        raise ValueError(f"unknown cache kind {kind!r}; one of {', '.join(KINDS)}")
    override = OVERRIDES.get(kind)
    if override and os.environ.get(override):
        return writable_dir(Path(os.environ[override]).expanduser().resolve(), f"${override}")
    return writable_dir(_ensure_root() / kind, _root_variable())


#: The file a finished build folder holds, written last (a JSON record of the build).
DONE_MARKER = "build.done.json"


@contextlib.contextmanager
def file_lock(path: Path):
    """Hold an exclusive ``fcntl.flock`` on ``path`` (created, with its folder) for the block:
    processes, also in other working folders, that lock the same path wait in turn."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def cached_build(kind: str, key: str, build: Callable[[Path], dict | None], *, root=None,
                 marker: str = DONE_MARKER) -> Path:
    """The folder ``<root>/<key>`` holding a finished build; ``build`` makes it if it is missing.

    ``root`` is the folder of cache ``kind`` (:func:`build_cache_dir`) unless given (a builder's
    ``build_root=`` argument); ``key`` names what decides the build (``<name>-<hash>``, may have
    a sub-folder). A folder holding ``marker`` is finished and is returned at once. Otherwise,
    under the file lock ``.<last part of key>.lock`` beside the folder (so parallel builders of
    one key build once): if another process finished it meanwhile it is returned; a folder left
    by an interrupted or failed build is removed; the folder is made and ``build(folder)``
    fills it. Its return value, a JSON-able record, is written as ``marker`` last (atomically);
    ``None`` means ``build`` made ``marker`` itself (e.g. a library renamed into place). An
    exception from ``build`` leaves the folder, without its marker, for inspection.
    """
    root = Path(root).resolve() if root is not None else build_cache_dir(kind)
    folder = root / key
    done = folder / marker
    if done.exists():
        return folder
    with file_lock(folder.parent / f".{folder.name}.lock"):
        if done.exists():                   # another process finished it while we waited
            return folder
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        record = build(folder)
        if record is not None:
            tmp = folder / f".{marker}.{uuid.uuid4().hex}.tmp"
            tmp.write_text(json.dumps(record, indent=1, default=str) + "\n")
            os.replace(tmp, done)
        elif not done.exists():
            raise RuntimeError(f"the {kind} build of {key} in {folder} finished without its {marker}")
    return folder


def kind_dirs() -> dict:
    """``{kind: (folder, variable overriding it or None)}`` without creating anything."""
    root, out = cache_root(), {}
    for kind in KINDS:
        override = OVERRIDES.get(kind)
        if override and os.environ.get(override):
            out[kind] = (Path(os.environ[override]).expanduser().resolve(), override)
        else:
            out[kind] = (root / kind, None)
    return out


def tree_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (0 if it does not exist); links are not followed."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:                     # removed by a concurrent build meanwhile
                pass
    return total


def format_bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def cache_report() -> str:
    """The root, then one line per kind: folder, size, what it holds."""
    root = cache_root()
    lines = [f"cache root: {root} (chosen by {_root_variable()})"]
    total = 0
    for kind, (path, override) in kind_dirs().items():
        n = tree_bytes(path)
        total += n
        where = f"{path} (${override})" if override else str(path)
        lines.append(f"  {kind:<12} {format_bytes(n):>10}  {where}: {KINDS[kind]}")
    lines.append(f"  {'total':<12} {format_bytes(total):>10}")
    return "\n".join(lines)


def clear_cache(log=print) -> int:
    """Remove every kind's folder under the root; returns the bytes freed.

    Only a root that holds ``CACHEDIR.TAG`` (made by ndpdimm) is cleared, so a mistaken
    ``$NDPDIMM_CACHE`` (a home folder) loses nothing; kinds moved elsewhere by their own
    variable are left alone. Do not clear while a build runs: its folder would vanish under it.
    """
    root = cache_root()
    if not root.exists():
        log(f"nothing to clear: {root} does not exist")
        return 0
    if not (root / TAG_NAME).exists():
        raise CacheDirError(f"{root} (chosen by {_root_variable()}) has no {TAG_NAME}: ndpdimm did "
                            "not create it, so it is not cleared; remove its build folders yourself")
    log(f"clearing the build cache in {root}")
    freed = 0
    for kind, (path, override) in kind_dirs().items():
        if override:
            log(f"  {kind}: not cleared, it lives in {path} (${override})")
            continue
        if not path.exists():
            continue
        n = tree_bytes(path)
        shutil.rmtree(path, ignore_errors=True)
        freed += n
        log(f"  {kind}: removed {path} ({format_bytes(n)})")
    return freed
