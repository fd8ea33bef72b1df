"""The shared build cache (``cosim/cache.py``): one root for every kind, from any working folder.

Each test points ``$NDPDIMM_CACHE`` (or ``$XDG_CACHE_HOME``) at its own temporary folder.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from ndpdimm.cosim import cache
from ndpdimm.cosim.dram import native
from ndpdimm.cosim.rtl import build
from ndpdimm.cosim.rtl import harness_build as harness
from ndpdimm.sw.cli import main
from ndpdimm.synth.flow import synth_root


@pytest.fixture
def root(tmp_path, monkeypatch):
    """An empty cache root in ``$NDPDIMM_CACHE``, no per-kind override set."""
    for var in cache.OVERRIDES.values():
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "cache"
    monkeypatch.setenv(cache.CACHE_ENV, str(path))
    return path


def test_every_kind_lives_under_the_root_whatever_the_working_folder(root, tmp_path, monkeypatch):
    for cwd in (tmp_path / "a", tmp_path / "b" / "deeper"):
        cwd.mkdir(parents=True)
        monkeypatch.chdir(cwd)
        assert build.default_build_root() == root / "rtl"
        assert harness.default_build_root() == root / "harness"
        assert native.default_build_root() == root / "native"
        assert synth_root() == root / "synth"
        assert cache.build_cache_dir("calibration") == root / "calibration"
        assert cache.build_cache_dir("verilog") == root / "verilog"
        assert not (cwd / "build").exists()
    assert sorted(p.name for p in root.iterdir()) == sorted([*cache.KINDS, cache.TAG_NAME])
    assert (root / cache.TAG_NAME).read_text().startswith("Signature: 8a477f597d28d172789f06886806bc55")


def test_relative_variable_is_made_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(cache.CACHE_ENV, "rel/cache")
    assert cache.cache_root() == tmp_path / "rel" / "cache"


def test_default_root_is_the_platform_user_cache(tmp_path, monkeypatch):
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache.cache_root() == tmp_path / "xdg" / "ndpdimm"
    monkeypatch.setenv(cache.CACHE_ENV, "")           # empty counts as unset
    assert cache.cache_root() == tmp_path / "xdg" / "ndpdimm"


def test_a_kind_override_wins_over_the_root(root, tmp_path, monkeypatch):
    monkeypatch.setenv(build.BUILD_ROOT_ENV, str(tmp_path / "my_rtl"))
    monkeypatch.setenv(native.BUILD_ROOT_ENV, str(tmp_path / "my_native"))
    assert build.default_build_root() == tmp_path / "my_rtl"
    assert native.default_build_root() == tmp_path / "my_native"
    assert harness.default_build_root() == root / "harness"
    assert not (root / "rtl").exists()


def test_unusable_root_names_the_folder_and_the_variable(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv(cache.CACHE_ENV, str(blocker / "cache"))
    with pytest.raises(cache.CacheDirError, match=rf"{blocker / 'cache'}.*\$NDPDIMM_CACHE"):
        native.build_library()
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv(build.BUILD_ROOT_ENV, str(blocker / "rtl"))
    with pytest.raises(cache.CacheDirError, match=r"\$NDPDIMM_RTL_BUILD_ROOT"):
        build.default_build_root()
    assert blocker.read_text() == "not a folder\n"
    with pytest.raises(ValueError, match="unknown cache kind 'rtll'"):
        cache.build_cache_dir("rtll")


def test_cache_command_shows_sizes_and_clears_only_the_kinds(root, tmp_path, monkeypatch, capsys):
    lib = native.build_library()                        # a real build: the native DRAM model
    lib_bytes = cache.tree_bytes(root / "native")
    assert lib_bytes >= lib.stat().st_size > 0
    (cache.build_cache_dir("calibration") / "x.rtl.json").write_text("{}\n")
    (root / "keep.txt").write_text("not ours\n")
    monkeypatch.setenv(harness.BUILD_ROOT_ENV, str(tmp_path / "elsewhere"))
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "lib.so").write_text("x")

    assert main(["cache", "--path"]) == 0
    assert capsys.readouterr().out.strip() == str(root)
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    assert f"cache root: {root} (chosen by $NDPDIMM_CACHE)" in out
    native_line = next(line for line in out.splitlines() if line.strip().startswith("native"))
    assert cache.format_bytes(lib_bytes) in native_line and str(root / "native") in native_line
    assert f"{tmp_path / 'elsewhere'} ($NDPDIMM_HARNESS_BUILD_ROOT)" in out

    assert main(["cache", "--clear"]) == 0
    out = capsys.readouterr().out
    assert "harness: not cleared" in out
    assert not any((root / kind).exists() for kind in cache.KINDS)
    assert (root / "keep.txt").exists() and (root / cache.TAG_NAME).exists()
    assert (tmp_path / "elsewhere" / "lib.so").exists()
    assert native.build_library() == lib                # and it builds again afterwards


def test_clear_refuses_a_root_ndpdimm_did_not_create(tmp_path, monkeypatch, capsys):
    (tmp_path / "rtl").mkdir()
    (tmp_path / "rtl" / "precious.txt").write_text("mine\n")
    monkeypatch.setenv(cache.CACHE_ENV, str(tmp_path))
    assert main(["cache", "--clear"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path} (chosen by $NDPDIMM_CACHE) has no CACHEDIR.TAG" in err
    assert (tmp_path / "rtl" / "precious.txt").read_text() == "mine\n"
    assert not (tmp_path / cache.TAG_NAME).exists()


#: A process in its own working folder that builds the native library and reports how many
#: times it ran the compiler (the real subprocess.run, counted).
_BUILDER = textwrap.dedent("""
    import subprocess, sys
    from ndpdimm.cosim.dram import native
    real_run, compiles = subprocess.run, []
    def counting_run(cmd, *args, **kwargs):
        if "-shared" in cmd:
            compiles.append(cmd)
        return real_run(cmd, *args, **kwargs)
    subprocess.run = counting_run
    print("started", flush=True)
    lib = native.build_library()
    print(lib, len(compiles), flush=True)
""")


def test_builders_in_different_folders_share_one_build(root, tmp_path):
    """Two processes in two working folders want the same library while its lock is held:
    exactly one compiles it, both get the same file."""
    digest = native.source_hash()
    lock = cache.build_cache_dir("native") / f".{digest}.lock"
    env = {**os.environ, cache.CACHE_ENV: str(root)}
    procs = []
    with cache.file_lock(lock):
        for name in ("exp1", "exp2"):
            (tmp_path / name).mkdir()
            procs.append(subprocess.Popen([sys.executable, "-c", _BUILDER], cwd=tmp_path / name, env=env,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        for p in procs:                                  # both started before the lock is released
            assert p.stdout.readline().strip() == "started"
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        path, compiles = out.split()
        results.append((path, int(compiles)))
    assert {path for path, _ in results} == {str(root / "native" / digest / native.LIB_NAME)}
    assert sorted(c for _, c in results) == [0, 1]
    assert not (tmp_path / "exp1" / "build").exists() and not (tmp_path / "exp2" / "build").exists()


def test_cached_build_builds_once_and_marks_it_done(root):
    calls = []

    def make(folder):
        calls.append(folder)
        (folder / "out.txt").write_text("built\n")
        return {"seconds": 1.5}

    first = cache.cached_build("native", "thing-0123", make)
    assert first == root / "native" / "thing-0123"
    assert (first / "out.txt").read_text() == "built\n"
    assert json.loads((first / cache.DONE_MARKER).read_text()) == {"seconds": 1.5}
    assert (root / "native" / ".thing-0123.lock").exists()      # the lock beside the folder
    assert cache.cached_build("native", "thing-0123", make) == first
    assert calls == [first]                                     # the second call found it done


def test_cached_build_redoes_an_unfinished_folder(root, tmp_path):
    """A folder without its marker (an interrupted or failed build) is removed and rebuilt; a
    failing build leaves its folder, unmarked, for inspection."""
    folder = tmp_path / "elsewhere" / "runs" / "x-1"
    folder.mkdir(parents=True)
    (folder / "stale.txt").write_text("half done\n")

    def fail(folder):
        (folder / "build.log").write_text("error: it broke\n")
        raise RuntimeError("it broke")

    with pytest.raises(RuntimeError, match="it broke"):
        cache.cached_build("synth", "runs/x-1", fail, root=tmp_path / "elsewhere", marker="result.json")
    assert not (folder / "stale.txt").exists() and (folder / "build.log").exists()
    assert not (folder / "result.json").exists()
    done = cache.cached_build("synth", "runs/x-1", lambda f: {"ok": True}, root=tmp_path / "elsewhere",
                              marker="result.json")
    assert done == folder and not (folder / "build.log").exists()
    assert json.loads((folder / "result.json").read_text()) == {"ok": True}
    assert not (root / "synth").exists()                        # an explicit root is used as is


def test_cached_build_whose_product_is_its_marker(root):
    """``build`` returning None made the marker itself (a library renamed into place); if it
    did not, the build is an error, not a finished folder."""
    def library(folder):
        (folder / "lib.so").write_bytes(b"\x7fELF")

    assert (cache.cached_build("native", "lib-1", library, marker="lib.so") / "lib.so").exists()
    with pytest.raises(RuntimeError, match="finished without its lib.so"):
        cache.cached_build("native", "lib-2", lambda folder: None, marker="lib.so")
