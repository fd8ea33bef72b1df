"""The RTL regression sharded over a Dask cluster, merged into one pass/fail report.

``make sim SCHEDULER=tcp://HOST:PORT`` (or ``ndpdimm regress --scheduler ...``) collects the
test suite with pytest (``--collect-only``), then makes one task per shard:

* every test marked ``sim`` (the long RTL benches, one node id per bench and seed) is its own
  task;
* the other tests of a file run together as one task (``-m "not sim"``), since their pytest
  start-up would otherwise cost more than they do.

A task runs ``python -m pytest`` in a subprocess on the worker, in the project checkout
``root`` (the same path on every worker: workers share the checkout here, and on other
machines must have the same commit checked out there), with the Verilator tools on ``PATH``
(:func:`ndpdimm.cosim.rtl.build.verilator_env`) and a JUnit XML file it parses into one outcome
per test. RTL builds are cached in the build cache (``cosim/cache.py``) per parameter set and
shared by the tasks (a file lock serialises builders of one hash). A shard whose worker died is resubmitted (at
most ``retries`` times); a shard that cannot run at all (pytest crashed) counts as an error of
every test it held.

The report (``build/regress/report.json`` and ``report.md``) lists every collected test once
with its outcome (passed, failed, error, skipped) and time, and the totals; the command exits
non-zero when anything failed, errored or was lost. Without a scheduler ``make sim`` stays
``pytest -n auto tests``.
"""

import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.sweep.tasks import cluster_client, run_tasks

__all__ = ["collect_shards", "run_shard", "run_regression", "RegressionError"]


class RegressionError(ValueError):
    """The suite could not be collected (a bad path or ``-m`` expression, a broken test file)."""


def _pytest(root: Path, args, timeout=None) -> subprocess.CompletedProcess:
    from ndpdimm.cosim.rtl.build import verilator_env
    env = dict(os.environ, **verilator_env())
    env.pop("VERILATOR_ROOT", None)
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _collect(root: Path, paths, marker: str | None) -> list:
    args = ["--collect-only", "-q", "-p", "no:cacheprovider", *paths]
    if marker:
        args += ["-m", marker]
    p = _pytest(root, args)
    if p.returncode not in (0, 5):                 # 5: nothing collected
        raise RegressionError(f"pytest --collect-only failed ({p.returncode}):\n"
                              f"{(p.stdout + p.stderr)[-3000:]}")
    return [line.strip() for line in p.stdout.splitlines() if "::" in line and
            not line.startswith(" ")]


def collect_shards(root=".", paths=("tests",), select: str | None = None) -> list:
    """The shards (lists of pytest arguments with a label) of the suite under ``root``;
    ``select`` a pytest ``-m`` expression restricting what is collected."""
    root = Path(root).resolve()
    everything = _collect(root, paths, select)
    sim = set(_collect(root, paths, f"sim and ({select})" if select else "sim"))
    shards, by_file = [], collections.OrderedDict()
    for node in everything:
        if node in sim:
            shards.append({"label": node, "tests": [node], "args": [node]})
        else:
            by_file.setdefault(node.split("::")[0], []).append(node)
    for path, nodes in by_file.items():
        marker = f"not sim and ({select})" if select else "not sim"
        shards.append({"label": path, "tests": nodes, "args": [path, "-m", marker]})
    return shards


def run_shard(root: str, shard: dict, timeout: float | None = None) -> dict:
    """Run one shard in a pytest subprocess; per-test outcomes from its JUnit XML."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "junit.xml"
        try:
            p = _pytest(Path(root), [*shard["args"], "-q", "-p", "no:cacheprovider",
                                     f"--junitxml={xml}"], timeout=timeout)
            output = (p.stdout + p.stderr)[-4000:]
            code = p.returncode
        except subprocess.TimeoutExpired:
            output, code = f"timed out after {timeout} s", -1
        outcomes = _parse_junit(xml) if xml.exists() else {}
    return {"label": shard["label"], "returncode": code, "outcomes": outcomes,
            "output": output, "seconds": time.perf_counter() - t0, "worker_pid": os.getpid()}


def _parse_junit(path: Path) -> dict:
    out = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        key = f"{case.get('classname', '')}::{case.get('name', '')}"
        if case.find("failure") is not None:
            outcome = "failed"
        elif case.find("error") is not None:
            outcome = "error"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        out[key] = {"outcome": outcome, "seconds": float(case.get("time", 0.0))}
    return out


def _junit_key(node: str) -> str:
    """A pytest node id as JUnit names it: ``<folder>/<file>.py::<Class>::<test>[x]`` -> ``<folder>.<file>.<Class>::<test>[x]``."""
    parts = node.split("::")
    return ".".join([parts[0].removesuffix(".py").replace("/", ".")] + parts[1:-1]) + \
        "::" + parts[-1]


def _merge(shards, results) -> dict:
    """One row per collected test; a test missing from its shard's XML is an error."""
    tests = {}
    for shard, res in zip(shards, results):
        got = res.get("outcomes", {}) if res else {}
        for node in shard["tests"]:
            if _junit_key(node) in got:
                tests[node] = dict(got[_junit_key(node)], shard=shard["label"])
            else:
                why = ("worker lost" if res is None or res.get("lost") else
                       f"not reported by pytest (exit {res.get('returncode')})")
                tests[node] = {"outcome": "error", "seconds": 0.0, "shard": shard["label"],
                               "why": why}
    totals = collections.Counter(t["outcome"] for t in tests.values())
    return {"tests": tests, "totals": dict(totals),
            "passed": totals.get("failed", 0) + totals.get("error", 0) == 0}


def run_regression(root=".", paths=("tests",), select=None, scheduler=None, workers=None,
                   retries=2, out_dir="build/regress", timeout=None, log=print) -> dict:
    """Collect, shard, run on the cluster, merge (module docstring); returns the report."""
    from tqdm import tqdm
    root = str(Path(root).resolve())
    t0 = time.perf_counter()
    shards = collect_shards(root, paths, select)
    n_tests = sum(len(s["tests"]) for s in shards)
    log(f"[regress] {n_tests} tests in {len(shards)} shards")
    results = [None] * len(shards)
    bar = tqdm(total=len(shards), unit="shard", desc="regress")

    def finished(i, res, err):
        if err is not None:
            res = {"label": shards[i]["label"], "lost": True, "error": repr(err)}
        else:
            bad = [n.split("::")[-1] for n, o in res["outcomes"].items()
                   if o["outcome"] in ("failed", "error")]
            if bad or res["returncode"] not in (0, 5):
                bar.write(f"[regress] {shards[i]['label']}: "
                          f"{', '.join(bad) or 'exit ' + str(res['returncode'])}")
        results[i] = res
        bar.update(1)

    # longest first: the sim benches start before the many short files
    order = sorted(range(len(shards)), key=lambda i: "::" not in shards[i]["label"])
    try:
        with cluster_client(scheduler, workers or os.cpu_count() or 1) as (client, where):
            run_tasks(client, run_shard, [(root, s, timeout) for s in shards], order=order,
                      retries=retries, on_done=finished)
    finally:
        bar.close()
    report = _merge(shards, results)
    report.update(shards=len(shards), wall_s=time.perf_counter() - t0,
                  where=where,
                  failures={n: t for n, t in report["tests"].items()
                            if t["outcome"] in ("failed", "error")},
                  shard_output={r["label"]: r["output"] for r in results
                                if r and r.get("returncode") not in (0, 5, None)})
    out = Path(out_dir)
    write_json(report, out / "report.json")
    lines = [f"# RTL regression: {'PASS' if report['passed'] else 'FAIL'}", "",
             f"{n_tests} tests in {len(shards)} shards on {report['where']}, "
             f"{report['wall_s']:.0f} s", "",
             "| outcome | tests |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in sorted(report["totals"].items())]
    if report["failures"]:
        lines += ["", "## Failures", ""]
        lines += [f"- `{n}` ({t['outcome']}{', ' + t['why'] if 'why' in t else ''})"
                  for n, t in report["failures"].items()]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    log(f"[regress] {'PASS' if report['passed'] else 'FAIL'}: "
        + ", ".join(f"{v} {k}" for k, v in sorted(report["totals"].items()))
        + f" in {report['wall_s']:.0f} s; report {out / 'report.md'}")
    return report

