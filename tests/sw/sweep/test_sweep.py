"""Design-space sweeps on Dask distributed and the sharded regression (sw/sweep/run.py,
sw/sweep/jobs.py, sw/sweep/regress.py).

The distributed tests start a real ``dask scheduler`` and ``dask worker`` processes on
127.0.0.1 (the commands users run), send sweeps through them, compare with the in-process run,
kill a worker mid-sweep, and check the cache.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ndpdimm.sw.cli import main
from ndpdimm.sw.sweep.jobs import check_point, job_parameters
from ndpdimm.sw.sweep.regress import run_regression
from ndpdimm.sw.sweep.run import SweepError, load_sweep, run_sweep

DASK = str(Path(sys.executable).parent / "dask")


def _write(tmp_path, text, name="s.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Cluster:
    """``dask scheduler`` + ``dask worker`` processes, as a user would start them."""

    def __init__(self, workers=2, env=None, nanny=True):
        self.port = _free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"
        self.env = dict(os.environ, **(env or {}))
        self.procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port",
                                        str(self.port), "--no-dashboard"], env=self.env,
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
        self.workers = []
        for i in range(workers):
            cmd = [DASK, "worker", self.address, "--nthreads", "1", "--no-dashboard",
                   "--name", f"w{i}"] + ([] if nanny else ["--no-nanny"])
            p = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
            self.workers.append(p)
            self.procs.append(p)
        from dask.distributed import Client
        deadline = time.time() + 60
        while True:
            try:
                with Client(self.address, timeout="5s") as c:
                    c.wait_for_workers(workers, timeout=max(1, deadline - time.time()))
                break
            except Exception:                      # any error: still starting
                if time.time() > deadline:
                    self.close()
                    raise
                time.sleep(0.5)

    def close(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


# ---- sweep files ----------------------------------------------------------------------------

def test_grid_points_and_fixed_expand_in_file_order(tmp_path):
    s = load_sweep(_write(tmp_path, """
name = "t"
job = "probe"
[fixed]
seconds = { value = 0.0, source = "test" }
[grid]
value = { value = [3, 1], source = "test" }
[[points]]
value = { value = 7, source = "test" }
[[points]]
value = { value = 3, source = "test" }
"""))
    assert [p["value"] for p in s.points] == [3, 1, 7]          # the duplicate point once
    assert all(p == {"seconds": 0.0, "value": p["value"]} for p in s.points)


def test_yaml_sweep_files_work_like_toml(tmp_path):
    s = load_sweep(_write(tmp_path, "name: y\njob: probe\ngrid:\n  value: {value: [1, 2], source: t}\n",
                          "s.yaml"))
    assert [p["value"] for p in s.points] == [1, 2]


@pytest.mark.parametrize("text, message", [
    ('name = "t"\njob = "probe"\n[grid]\nvalue = []\n', "grid.value is empty"),
    ('name = "t"\njob = "probe"\n[grid]\nspeed = { value = [1], source = "t" }\n',
     "unknown parameter speed"),
    ('name = "t"\njob = "probe"\n[grid]\nvalue = ["x"]\n', "value = 'x': job 'probe' wants int"),
    ('name = "t"\njob = "probe"\n[grid]\nvalue = { value = 3, source = "t" }\n',
     "grid.value must be a list"),
    ('name = "t"\njob = "probe"\n', "no points"),
    ('name = "t"\njob = "warp"\n[grid]\nvalue = { value = [1], source = "t" }\n', "unknown job 'warp'"),
    ('name = "t"\njob = "probe"\ncolour = "red"\n[grid]\nvalue = { value = [1], source = "t" }\n',
     "unknown key colour"),
    ('name = "t"\njob = "probe"\n[grid]\nvalue = [1, 2]\n', "grid.value = [1, 2] has no source"),
    ('name = "t"\njob = "probe"\nretries = 2\n[grid]\nvalue = ["x"]\n', "retries = 2 has no source"),
    ('name = "t"\njob = "probe"\n[[points]]\nvalue = 1\n', "points[0].value = 1 has no source"),
    ('name = "t"\njob = "probe"\n[grid]\nvalue = { value = [1, nan], source = "t" }\n',
     "grid.value[1] is nan: numbers must be finite"),
    ('name = "t"\njob = "rapid"\n[fixed]\nduration_s = { value = inf, source = "t" }\n'
     '[grid]\nmode = ["static"]\n', "fixed.duration_s is inf"),
    ('name = "t"\njob = "rapid"\n[grid]\nduration_s = { value = [10.0, -5.0], source = "t" }\n',
     "point 2 {duration_s=-5.0}: duration_s must be a positive number"),
    ('name = "t"\njob = "rapid"\n[grid]\nmode = ["turbo"]\n', "mode must be one of"),
    ('name = "t"\njob = "hermes"\n[grid]\nbatch = { value = [1, 99], source = "t" }\n',
     "batch must be an int in [1, 16]"),
    ('name = "t"\njob = "rtl-gemv"\n[grid]\ndtype = ["fp8"]\n', "wants one of fp16, bf16, int8"),
    ('name = "t"\njob = "probe"\n[fixed]\nvalue = { value = 1, source = "t" }\n'
     '[grid]\nvalue = { value = [2], source = "t" }\n',
     "both in [fixed] and in [grid]"),
    ('name = "t"\njob = "probe"\n[grid]\nvalue = { value = [1], source = "t" }\n[plot]\nx = "nope"\n',
     "[plot] names"),
    ('name = "t"\njob = "probe"\nretries = { value = -1, source = "t" }\n'
     '[grid]\nvalue = { value = [1], source = "t" }\n', "retries must be"),
    ('name = "t"\njob = "probe"\n[grid\n', "not valid TOML"),
])
def test_bad_sweep_files_are_rejected_before_anything_runs(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(SweepError) as err:
        load_sweep(path)
    assert message in str(err.value) and str(path) in str(err.value)


def test_job_parameters_are_the_scenario_configs_fields():
    assert "dimms" in job_parameters("hermes") and "batch" in job_parameters("trimoe")
    assert job_parameters("rapid")["duration_s"][1] == 600.0
    assert check_point("probe", {"value": 2}) == {"seconds": 0.0, "value": 2}


def test_cli_rejects_a_bad_sweep_file_with_status_2(tmp_path, capsys):
    path = _write(tmp_path, 'name = "t"\njob = "probe"\n[grid]\nvalue = []\n')
    assert main(["sweep", str(path), "--in-process"]) == 2
    assert "grid.value is empty" in capsys.readouterr().err
    assert main(["sweep", str(path), "--scheduler", "localhost:1"]) == 2
    assert main(["sweep", "--list-jobs"]) == 0
    assert "rtl-gemv" in capsys.readouterr().out


# ---- running --------------------------------------------------------------------------------

_RAPID = """
name = "rapid-small"
job = "rapid"
[fixed]
duration_s = { value = 20.0, source = "test" }
mode = "static"
ndp = false
ttft_slo_s = { value = 0.5, source = "test" }
[grid]
rate_scale = { value = [0.5, 1.0], source = "test" }
kv_path = ["host", "direct"]
"""


def _table(result):
    return [(r["params"], r["status"], r.get("result")) for r in result.records]


def test_distributed_sweep_equals_the_in_process_run_and_caches(tmp_path):
    sweep = load_sweep(_write(tmp_path, _RAPID))
    local = run_sweep(sweep, in_process=True, cache_dir=tmp_path / "c1", progress=False,
                      log=lambda *a: None)
    cluster = _Cluster(workers=2)
    try:
        remote = run_sweep(sweep, scheduler=cluster.address, cache_dir=tmp_path / "c2",
                           out_dir=tmp_path / "out", progress=False, log=lambda *a: None)
    finally:
        cluster.close()
    assert remote.summary["ok"] == 4 and remote.summary["computed"] == 4
    assert _table(remote) == _table(local)
    assert len({r["worker_pid"] for r in remote.records}) == 2      # both workers took points
    assert all(r["worker_pid"] != os.getpid() for r in remote.records)
    rows = (tmp_path / "out" / "results.csv").read_text().splitlines()
    assert len(rows) == 5 and "static-4p4d_goodput_rps" in rows[0]
    assert (tmp_path / "out" / "sweep.png").stat().st_size > 0
    # rerun: everything from the cache, nothing computed
    again = run_sweep(sweep, in_process=True, cache_dir=tmp_path / "c2", progress=False,
                      log=lambda *a: None)
    assert again.summary["cached"] == 4 and again.summary["computed"] == 0
    assert _table(again) == _table(local)
    # one new point: only it is computed
    more = load_sweep(_write(tmp_path, _RAPID.replace("[0.5, 1.0]", "[0.5, 1.0, 0.75]")))
    third = run_sweep(more, in_process=True, cache_dir=tmp_path / "c2", progress=False,
                      log=lambda *a: None)
    assert third.summary["cached"] == 4 and third.summary["computed"] == 2


def test_a_worker_killed_mid_sweep_loses_no_point(tmp_path):
    sweep = load_sweep(_write(tmp_path, """
name = "kill"
job = "probe"
retries = { value = 3, source = "test" }
[fixed]
seconds = { value = 1.0, source = "test" }
[grid]
value = { value = [1, 2, 3, 4, 5, 6, 7, 8], source = "test" }
"""))
    # the scheduler gives up on a task at its first lost worker: the sweep's own
    # resubmission is what saves it
    cluster = _Cluster(workers=2, nanny=False,
                       env={"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"})
    lines = []
    try:
        victim = cluster.workers[0]
        threading.Timer(2.5, lambda: os.kill(victim.pid, signal.SIGKILL)).start()
        result = run_sweep(sweep, scheduler=cluster.address, cache_dir=tmp_path / "c",
                           out_dir=tmp_path / "out", progress=False, log=lines.append)
    finally:
        cluster.close()
    assert victim.poll() is not None                    # it really died
    assert [r["params"]["value"] for r in result.records] == list(range(1, 9))
    assert all(r["status"] == "ok" and r["result"]["square"] == r["params"]["value"] ** 2
               for r in result.records)
    assert any("resubmitting" in line for line in lines), lines
    assert {r["worker_pid"] for r in result.records} - {victim.pid}
    csv_rows = (tmp_path / "out" / "results.csv").read_text().splitlines()[1:]
    assert len(csv_rows) == 8


def test_a_failing_point_is_reported_and_the_sweep_goes_on(tmp_path, capsys):
    path = _write(tmp_path, """
name = "fail"
job = "rapid"
[fixed]
duration_s = { value = 10.0, source = "test" }
mode = "static"
ndp = false
ttft_slo_s = { value = 0.5, source = "test" }
[[points]]
rate_scale = { value = 1.0, source = "test" }
[[points]]
trace = "no-such-trace.csv"
""")
    code = main(["sweep", str(path), "--in-process", "--cache-dir", str(tmp_path / "c"),
                 "--out-dir", str(tmp_path / "out")])
    assert code == 1
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    assert len(lines) == 2 and '"status": "ok"' in lines[0] and '"status": "error"' in lines[1]
    assert "no-such-trace.csv" in lines[1]
    assert not list((tmp_path / "c" / "rapid").glob("*.json"))[1:]   # only the good one cached


def test_sharded_regression_merges_one_report(tmp_path):
    root = tmp_path / "proj"
    (root / "tests").mkdir(parents=True)
    (root / "pytest.ini").write_text("[pytest]\nmarkers =\n    sim: long\n")
    (root / "tests" / "test_a.py").write_text(
        "import pytest\n"
        "def test_ok():\n    assert 1\n"
        "def test_bad():\n    assert 0, 'broken'\n"
        "@pytest.mark.sim\n@pytest.mark.parametrize('seed', [1, 2])\n"
        "def test_bench(seed):\n    assert seed\n")
    (root / "tests" / "test_b.py").write_text("def test_b():\n    pass\n")
    report = run_regression(root=root, paths=("tests",), workers=2,
                            out_dir=tmp_path / "report", log=lambda *a: None)
    assert report["shards"] == 4                        # 2 sim seeds + one per file
    assert report["totals"] == {"passed": 4, "failed": 1}
    assert not report["passed"]
    assert list(report["failures"]) == ["tests/test_a.py::test_bad"]
    assert report["tests"]["tests/test_a.py::test_bench[2]"]["shard"] == \
        "tests/test_a.py::test_bench[2]"
    md = (tmp_path / "report" / "report.md").read_text()
    assert "FAIL" in md and "test_bad" in md


def test_rtl_gemv_points_are_checked_bit_for_bit(tmp_path, monkeypatch):
    sweep = load_sweep(_write(tmp_path, """
name = "rtl"
job = "rtl-gemv"
[fixed]
rows = { value = 32, source = "test" }
cols = { value = 64, source = "test" }
[grid]
dtype = ["fp16", "int8"]
"""))
    good = run_sweep(sweep, in_process=True, cache_dir=tmp_path / "c", use_cache=False,
                     progress=False, log=lambda *a: None)
    assert [r["status"] for r in good.records] == ["ok", "ok"]
    assert all(r["result"]["bit_exact"] and r["result"]["cycles"] > 0 for r in good.records)
    # a golden model that disagrees makes every point fail: the check is real
    from ndpdimm.cosim.golden import numerics as golden
    real = golden.gemv_dot
    monkeypatch.setattr(golden, "gemv_dot", lambda w, x, d: real(w, x, d) + 1)
    bad = run_sweep(sweep, in_process=True, cache_dir=tmp_path / "c", use_cache=False,
                    progress=False, log=lambda *a: None)
    assert [r["status"] for r in bad.records] == ["error", "error"]
    assert "differs from the golden model" in bad.records[0]["error"]
