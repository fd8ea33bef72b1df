"""Design-space sweeps on Dask distributed: ``ndpdimm sweep FILE``.

**Sweep file** (TOML, or YAML with the same keys)::

    name = "hermes-dimms"              # required: names the output folder
    job = "hermes"                     # required: a job of sw/sweep/jobs.py
    retries = { value = 2, source = "..." }   # optional: resubmissions of a point whose worker died
    [fixed]                            # optional: parameters of every point
    backend = "model"
    [grid]                             # optional: the cartesian product of these lists
    model = ["llama2-7b", "llama2-13b"]
    dimms = { value = [4, 8, 16], source = "SPEC section 1: 8 DIMMs; half and double" }
    [[points]]                         # optional: extra points (each merged over [fixed])
    model = "opt-13b"
    dimms = { value = 8, source = "..." }
    [plot]                             # optional: x, y (list of metrics), group (list of params)
    x = "dimms"
    y = ["hermes_tokens_per_s"]
    group = ["model"]

Like every configuration file (``hw/config_file.py``), a number carries its source:
``{ value = ..., source = "..." }`` (YAML: ``{value: ..., source: ...}``), a grid's array one for
the whole array; strings and booleans need none; NaN and infinity are refused. Every point is
checked before anything is submitted (:func:`load_sweep`): unknown keys or parameters, a number
without its source, an empty grid list, no points at all, a value of the wrong type or one the
job's configuration rejects raise :class:`SweepError` (a
:class:`~ndpdimm.hw.config_file.ConfigError`) naming the file and the key or the point.

**Running** (:func:`run_sweep`): each point is one task ``run_job(job, params)``, a pure
function of its parameters, submitted to a ``dask.distributed`` client: a ``LocalCluster`` of
``workers`` processes on this machine by default, or an existing scheduler
(``--scheduler tcp://HOST:PORT``, whose workers were started with ``dask scheduler`` and
``dask worker tcp://HOST:PORT`` in an environment with this package installed: see
docs/sweep.md), or in this process one point after another (``in_process``, for debugging and
as the reference the distributed run must equal).

**Cache**: a finished point's record is written at once to
``<cache>/<job>/<key>.json``, ``key`` = SHA-256 of the job, its full parameters (defaults
filled in) and the code version (a hash of every source and config file of the package), so a
rerun computes only what is new or changed, and an interrupted sweep resumes where it stopped.
Failed points are not cached: a rerun tries them again. RTL jobs share the Verilator build
cache (``cosim/cache.py``: ``$NDPDIMM_CACHE`` or the user cache folder): one build per
parameter set, made by the first worker that needs it (a file lock makes the others wait for
it), reused by every later task.

**Failures**: a job that raises is reported for its point (``status`` ``error`` with the
message) and the sweep goes on; so is a result holding NaN or infinity (named by its key: JSON
holds neither, and the files written here have none). A point whose worker died (the scheduler reports
``KilledWorker`` once its own rescheduling gave up) is resubmitted up to ``retries`` times,
then reported as lost. The summary counts ok, cached, failed and lost points.

**Output** (``out_dir``, default ``build/sweeps/<name>``): ``results.jsonl`` (one record per
point: parameters, status, result or error, task seconds, whether cached), ``results.csv`` (one
flat row per point), ``summary.json`` and ``sweep.png`` (the plot: ``y`` against ``x`` per
``group``). Every point appears exactly once.
"""

import contextlib
import csv
import dataclasses
import hashlib
import importlib
import itertools
import json
import math
import time
from pathlib import Path

from ndpdimm.hw import config_file
from ndpdimm.sw.result_files import save_figure, write_json
from ndpdimm.sw.sweep.jobs import JOBS, check_point, run_job
from ndpdimm.sw.sweep.tasks import WORKER_LOST, cluster_client, run_tasks

__all__ = ["Sweep", "SweepError", "load_sweep", "run_sweep", "code_version", "point_key",
           "SweepResult"]

_TOP = {"name", "job", "retries", "fixed", "grid", "points", "plot"}


class SweepError(config_file.ConfigError):
    """A bad sweep file or sweep request; nothing was submitted."""


@dataclasses.dataclass(frozen=True)
class Sweep:
    name: str
    job: str
    points: tuple              # full parameter dicts (defaults filled in), in file order
    retries: int = 2
    plot_x: str | None = None
    plot_y: tuple = ()
    plot_group: tuple = ()
    source: str = ""


def _read(path: Path) -> dict:
    """The sweep file's document, every value-with-source replaced by its value."""
    try:
        if path.suffix == ".toml":
            return config_file.unwrap(config_file.read(path), path)
        if path.suffix in (".yaml", ".yml"):
            import yaml
            try:
                doc = yaml.safe_load(path.read_bytes())
            except FileNotFoundError:
                raise SweepError(f"{path}: no such file") from None
            except yaml.YAMLError as e:
                raise SweepError(f"{path}: not valid YAML: {e}") from None
            if not isinstance(doc, dict):
                raise SweepError(f"{path}: the file must be a mapping of keys")
            return config_file.unwrap(doc, path)
    except SweepError:
        raise
    except config_file.ConfigError as e:
        raise SweepError(str(e)) from None
    raise SweepError(f"{path}: a sweep file ends in .toml, .yaml or .yml")


def load_sweep(path) -> Sweep:
    """The sweep described by ``path``, every point checked (see the module docstring)."""
    path = Path(path)
    doc = _read(path)
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise SweepError(f"{path}: unknown key{'s' if len(unknown) > 1 else ''} "
                         f"{', '.join(unknown)}; a sweep file has {', '.join(sorted(_TOP))}")
    for key in ("name", "job"):
        if not isinstance(doc.get(key), str) or not doc[key]:
            raise SweepError(f"{path}: {key} must be a non-empty string, got {doc.get(key)!r}")
    job = doc["job"]
    if job not in JOBS:
        raise SweepError(f"{path}: unknown job {job!r}; jobs are {', '.join(JOBS)}")
    retries = doc.get("retries", 2)
    if isinstance(retries, bool) or not isinstance(retries, int) or not 0 <= retries <= 100:
        raise SweepError(f"{path}: retries must be an int in [0, 100], got {retries!r}")
    fixed = doc.get("fixed", {})
    grid = doc.get("grid", {})
    extra = doc.get("points", [])
    if not isinstance(fixed, dict) or not isinstance(grid, dict):
        raise SweepError(f"{path}: [fixed] and [grid] must be tables")
    if not isinstance(extra, list) or not all(isinstance(p, dict) for p in extra):
        raise SweepError(f"{path}: points must be a list of tables ([[points]])")
    for key, values in grid.items():
        if not isinstance(values, list):
            raise SweepError(f"{path}: grid.{key} must be a list of values, got {values!r}")
        if not values:
            raise SweepError(f"{path}: grid.{key} is empty: the grid would have no points")
        if key in fixed:
            raise SweepError(f"{path}: {key} is both in [fixed] and in [grid]")
    raw = []
    if grid:
        keys = list(grid)
        raw += [dict(fixed, **dict(zip(keys, combo)))
                for combo in itertools.product(*(grid[k] for k in keys))]
    raw += [dict(fixed, **p) for p in extra]
    if not raw:
        raise SweepError(f"{path}: no points: give a [grid] or [[points]]")
    points, seen = [], set()
    for i, params in enumerate(raw):
        try:
            full = check_point(job, params)
        except ValueError as e:
            raise SweepError(f"{path}: point {i + 1} {_short(params)}: {e}") from None
        key = json.dumps(full, sort_keys=True)
        if key not in seen:
            seen.add(key)
            points.append(full)
    plot = doc.get("plot", {})
    if not isinstance(plot, dict) or set(plot) - {"x", "y", "group"}:
        raise SweepError(f"{path}: [plot] takes x, y and group, got {plot!r}")
    y = plot.get("y", [])
    y = [y] if isinstance(y, str) else y
    group = plot.get("group", [])
    group = [group] if isinstance(group, str) else group
    for name in [plot.get("x")] + list(group):
        if name is not None and name not in points[0]:
            raise SweepError(f"{path}: [plot] names {name!r}, not a parameter of {job!r}")
    return Sweep(doc["name"], job, tuple(points), retries, plot.get("x"), tuple(y), tuple(group),
                 str(path))


def _short(params: dict) -> str:
    return "{" + ", ".join(f"{k}={v!r}" for k, v in params.items()) + "}"


def code_version() -> str:
    """SHA-256 over the package's sources and configuration files (not build outputs)."""
    h = hashlib.sha256()
    for pkg in ("ndpdimm.hw", "ndpdimm.cosim", "ndpdimm.sw", "ndpdimm.synth"):
        try:
            roots = importlib.import_module(pkg).__path__
        except ImportError:
            continue
        for root in roots:
            root = Path(root)
            for f in sorted(root.rglob("*")):
                if f.is_file() and f.suffix in (".py", ".toml", ".json", ".cpp", ".h") \
                        and "__pycache__" not in f.parts:
                    h.update(str(f.relative_to(root)).encode())
                    h.update(f.read_bytes())
    return h.hexdigest()[:16]


def point_key(job: str, params: dict, version: str) -> str:
    blob = json.dumps({"job": job, "params": params, "code": version}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


@dataclasses.dataclass
class SweepResult:
    sweep: Sweep
    records: list              # one per point, in the sweep's order
    wall_s: float
    where: str
    out_dir: Path | None = None

    def count(self, status) -> int:
        return sum(1 for r in self.records if r["status"] == status)

    @property
    def summary(self) -> dict:
        return {"name": self.sweep.name, "job": self.sweep.job, "points": len(self.records),
                "ok": self.count("ok"), "failed": self.count("error"), "lost": self.count("lost"),
                "cached": sum(1 for r in self.records if r.get("cached")),
                "computed": sum(1 for r in self.records if r["status"] == "ok"
                                and not r.get("cached")),
                "wall_s": self.wall_s, "where": self.where,
                "failures": [{"params": r["params"], "error": r.get("error")}
                             for r in self.records if r["status"] != "ok"]}


def _progress(total, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="point", desc="sweep", leave=True)


def run_sweep(sweep: Sweep, scheduler: str | None = None, workers: int = 2,
              in_process: bool = False, cache_dir="build/sweeps/cache", use_cache: bool = True,
              out_dir=None, progress: bool = True, log=print, client=None) -> SweepResult:
    """Run ``sweep`` (module docstring); writes the outputs when ``out_dir`` is given (``None``
    and ``out_dir="default"``: ``build/sweeps/<name>``). ``client``: an existing
    ``dask.distributed.Client`` to use instead of making one."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise SweepError(f"workers must be an int >= 1, got {workers!r}")
    t0 = time.perf_counter()
    version = code_version()
    cache = Path(cache_dir) / sweep.job
    keys = [point_key(sweep.job, p, version) for p in sweep.points]
    records = [None] * len(sweep.points)
    for i, key in enumerate(keys):
        f = cache / f"{key}.json"
        if use_cache and f.is_file():
            rec = json.loads(f.read_text())
            records[i] = dict(rec, cached=True)
    todo = [i for i, r in enumerate(records) if r is None]
    log(f"[sweep] {sweep.name}: {len(sweep.points)} point(s) of {sweep.job}, "
        f"{len(sweep.points) - len(todo)} cached, {len(todo)} to run (code {version})")

    def done(i, rec):
        rec = {"params": sweep.points[i], "key": keys[i], **rec, "cached": False}
        bad = (config_file.non_finite(json.loads(json.dumps(rec.get("result"), default=float)))
               if rec["status"] == "ok" else None)
        if bad is not None:            # JSON holds no NaN: the point failed, and says where
            rec.update(status="error", result=None,
                       error=f"the result's {bad[0]} is {bad[1]!r}, not a number JSON can hold")
        records[i] = rec
        if rec["status"] == "ok":
            cache.mkdir(parents=True, exist_ok=True)
            tmp = cache / f".{keys[i]}.tmp"
            tmp.write_text(json.dumps({k: v for k, v in rec.items() if k != "cached"},
                                      default=float, allow_nan=False))
            tmp.replace(cache / f"{keys[i]}.json")
        if bar:
            bar.update(1)
            if rec["status"] != "ok":
                bar.write(f"[sweep] point {_short(sweep.points[i])}: {rec['status']}: "
                          f"{rec.get('error')}")

    bar = _progress(len(todo), progress and bool(todo))
    where = "in process" if todo else "cache"
    try:
        if todo and in_process:
            for i in todo:
                done(i, run_job(sweep.job, sweep.points[i]))
        elif todo:
            with contextlib.ExitStack() as stack:
                if client is None:
                    client, where = stack.enter_context(cluster_client(scheduler, workers))
                else:
                    where = "given client"
                _run_distributed(client, sweep, todo, keys, done, log)
    finally:
        if bar:
            bar.close()
    result = SweepResult(sweep, records, time.perf_counter() - t0, where)
    if out_dir is not None:
        result.out_dir = write_outputs(result, sweep_dir(sweep) if out_dir == "default"
                                       else Path(out_dir))
    s = result.summary
    log(f"[sweep] {sweep.name}: {s['ok']} ok ({s['cached']} cached, {s['computed']} computed), "
        f"{s['failed']} failed, {s['lost']} lost, {s['wall_s']:.1f} s on {where}")
    for f in s["failures"]:
        log(f"[sweep]   failed {_short(f['params'])}: {f['error']}")
    return result


def sweep_dir(sweep: Sweep) -> Path:
    return Path("build/sweeps") / sweep.name


def _run_distributed(client, sweep, todo, keys, done, log):
    def finished(n, record, err):
        if err is not None:
            name = type(err).__name__
            record = {"status": "lost" if name in WORKER_LOST else "error",
                      "error": f"{name}: {err}", "task_seconds": None}
        done(todo[n], record)

    def retry(n, name, attempt):
        log(f"[sweep] point {_short(sweep.points[todo[n]])}: worker lost ({name}), "
            f"resubmitting ({attempt}/{sweep.retries})")

    run_tasks(client, run_job, [(sweep.job, sweep.points[i]) for i in todo],
              retries=sweep.retries, on_done=finished, on_retry=retry,
              key=lambda n, attempt: f"{sweep.job}-{keys[todo[n]]}-{attempt}")


def write_outputs(result: SweepResult, out: Path) -> Path:
    """``results.jsonl``, ``results.csv``, ``summary.json`` and ``sweep.png`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "results.jsonl", "w") as f:
        for r in result.records:
            f.write(json.dumps(r, default=float, allow_nan=False) + "\n")
    rows = [dict(r["params"], status=r["status"], cached=r.get("cached", False),
                 task_seconds=r.get("task_seconds"), **(r.get("result") or {}),
                 error=r.get("error") or "") for r in result.records]
    fields = list(dict.fromkeys(k for row in rows for k in row))
    with open(out / "results.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for row in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, list) else v for k, v in row.items()})
    write_json(result.summary, out / "summary.json")
    _plot(result, out / "sweep.png")
    return out


def _plot(result: SweepResult, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sweep = result.sweep
    job = JOBS[sweep.job]
    ok = [r for r in result.records if r["status"] == "ok"]
    varying = [k for k in sweep.points[0] if len({json.dumps(p[k]) for p in sweep.points}) > 1]
    x = sweep.plot_x or (job.default_x if job.default_x in varying else
                         next((k for k in varying if all(isinstance(p[k], (int, float))
                                                         and not isinstance(p[k], bool)
                                                         for p in sweep.points)), None))
    ys = list(sweep.plot_y) or [y for y in job.default_y if ok and y in ok[0]["result"]] or \
        ([k for k, v in ok[0]["result"].items() if isinstance(v, (int, float))][:1] if ok else [])
    group = list(sweep.plot_group) or [k for k in varying if k != x]
    # without groups every metric shares one axes (one line each); else one axes per metric
    panels = [None] if not group else (ys or [None])
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4), squeeze=False)
    if not group and x is not None and ok:
        ax = axes[0][0]
        for y in ys:
            pts = sorted((r["params"][x], r["result"][y]) for r in ok
                         if isinstance(r["result"].get(y), (int, float)))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=y)
        ax.set_xlabel(x)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        panels = []
    for ax, y in zip(axes[0], panels):
        if x is None or y is None or not ok:
            ax.text(0.5, 0.5, "nothing to plot", ha="center", va="center")
            continue
        series = {}
        for r in ok:
            label = ", ".join(f"{g}={r['params'][g]}" for g in group) or sweep.job
            v = r["result"].get(y)
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                series.setdefault(label, []).append((r["params"][x], v))
        for label, pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.grid(alpha=0.3)
        if len(series) > 1:
            ax.legend(fontsize=7)
    fig.suptitle(f"sweep {sweep.name} ({sweep.job})")
    save_figure(fig, path)
