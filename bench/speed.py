"""Co-simulation speed and model accuracy, measured in one run: ``bench/results/cosim.json``.

For each core configuration (default: the SPEC's 256 GEMV units and a reduced
16-unit one) the same workload - a real descriptor stream built by the driver
(``sw/driver/``): dense FP16 GEMVs, a row gather and a column gather, SiLU,
an element-wise multiply, a softmax, with the DMAs that move their operands -
runs on:

(a) ``bare``:   the Verilated core alone, clocked by a C++ loop with the same
    two clocks and edges as the harness, no DRAM model, no driver. The core sits
    idle, and an idle core is cheaper to evaluate than a busy one since blocks
    such as the activation unit run on gated clocks; so the harness's overhead
    on the real workload is measured inside (b) instead: the harness times every
    ``eval()`` of the model (``RtlBackend.profile``), and ``harness_vs_model_eval``
    is the share of the backend's calls spent in it;
(b) ``harness``: the fast RTL backend (``cosim/rtl/harness.py``) with the
    DRAM model checking every command, driven through the Python driver; every
    GEMV / activation result is checked bit for bit against the golden model;
    speed is simulated NDP cycles per wall second, both of the C++ run calls
    alone and end to end (Python driver included);
(c) ``cocotb``:  the same session (DRAM loads, register writes, descriptor
    words) replayed by a cocotb bench (``cosim/rtl/benches/replay.py``) on the same
    Verilog (the core with its resets registered, ``cosim/rtl/core_top.py``) compiled
    with the same options, with the cocotb ``DramDevice`` and a host driver that
    behaves like the C++ one;
    its completions are compared with (b). For the reduced configuration also
    on the bare ``ndp_core``, to show what registering the resets buys;
(d) ``model``:   the calibrated model backend on the same workload (timing
    only), its speed and its per-descriptor cycle error against (b). Speeds of
    (b) and (d) are the backend's own calls (``submit``/``run``/registers) and,
    separately, end to end with the Python driver's work (staging tensors,
    building descriptors), which both backends share.

Ratios are taken between figures of the same run. ``--build-options`` also
builds the reduced configuration with other C++ / Verilator options and toolchains
(:data:`BUILD_OPTIONS`: profile-guided builds, ``-march=native``, clang++) and
measures (a) and (b) for each, with the build time and the cycles of every descriptor
(the same in every build).

``--model-only`` (after a recalibration or a change to the performance model, with the RTL
unchanged) reruns (d) alone against the harness's per-descriptor cycles already in the file,
keeping (a)-(c); each config's ``model`` section then records its own command, date and commit,
and ``model_vs_harness`` is recomputed from the new model speed and the recorded harness speed.
"""

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.backend import Backend, CoreConfig
from ndpdimm.cosim.provenance import dumps_finite
from ndpdimm.hw.descriptors import Opcode

__all__ = ["RecordingBackend", "workload", "run_bench", "rerun_model", "main"]

#: The plain toolchain: g++, no profile, no extra C++ flags (``cosim/rtl/harness_build.py``).
PLAIN = {"pgo": False, "cxx_flags": (), "compiler": "g++"}
#: (name, OPT_FAST, Verilator flags, toolchain) compared by --build-options; the first is the
#: default (``cosim.rtl.harness_build``: ``CXX_OPT``, ``VERILATOR_OPT``, ``PGO``, ``CXX_FLAGS``,
#: ``COMPILER``); toolchain: ``build_harness``'s ``pgo`` / ``cxx_flags`` / ``compiler``.
BUILD_OPTIONS = (
    ("g++ PGO, cxx -O2, verilator -O3 (default)", "-O2", ("-O3",), {**PLAIN, "pgo": True}),
    ("cxx -Os, verilator -O3 (the plain build)", "-Os", ("-O3",), PLAIN),
    ("cxx -O2, verilator -O3", "-O2", ("-O3",), PLAIN),
    ("cxx -Os -march=native, verilator -O3", "-Os", ("-O3",), {**PLAIN, "cxx_flags": ("-march=native",)}),
    ("g++ PGO, cxx -Os, verilator -O3", "-Os", ("-O3",), {**PLAIN, "pgo": True}),
    ("g++ PGO, cxx -O3, verilator -O3", "-O3", ("-O3",), {**PLAIN, "pgo": True}),
    ("g++ PGO, cxx -O2 -march=native, verilator -O3", "-O2", ("-O3",),
     {**PLAIN, "pgo": True, "cxx_flags": ("-march=native",)}),
    ("clang++ -Os, verilator -O3", "-Os", ("-O3",), {**PLAIN, "compiler": "clang++"}),
    ("clang++ -O2, verilator -O3", "-O2", ("-O3",), {**PLAIN, "compiler": "clang++"}),
    ("clang++ PGO, -O2, verilator -O3", "-O2", ("-O3",), {**PLAIN, "compiler": "clang++", "pgo": True}),
    ("cxx -O1 (the earlier default)", "-O1", (), PLAIN),
    ("cxx -Os (verilated.mk default)", "-Os", (), PLAIN),
    ("cxx -O1, verilator -O3", "-O1", ("-O3",), PLAIN),
    ("cxx -O1, verilator --flatten", "-O1", ("--flatten",), PLAIN),
    ("cxx -Os, verilator --flatten", "-Os", ("--flatten",), PLAIN),
    ("cxx -O1, verilator -O3 --flatten", "-O1", ("-O3", "--flatten"), PLAIN),
    ("cxx -Os, verilator -O3 --flatten", "-Os", ("-O3", "--flatten"), PLAIN),
    ("cxx -Os, verilator -O3 --threads 2", "-Os", ("-O3", "--threads", "2"), PLAIN),
)


class RecordingBackend(Backend):
    """A backend that passes everything to ``inner`` and records the session (DRAM loads,
    register writes, descriptor words, runs) for replay, and the wall time spent inside
    the backend's simulating calls."""

    def __init__(self, inner: Backend, clock=time.process_time):
        self.inner, self.clock = inner, clock
        self.calls = 0
        self.name, self.config, self.org, self.timing = inner.name, inner.config, inner.org, inner.timing
        self.events, self.blob = [], bytearray()
        self.sim_seconds = 0.0

    def _timed(self, fn, *args):
        self.calls += 1
        t = self.clock()
        try:
            return fn(*args)
        finally:
            self.sim_seconds += self.clock() - t

    def backend_seconds(self) -> float:
        """``sim_seconds`` less the timer's own cost (``process_time`` is a system call of
        microseconds, as long as a model call), measured on empty calls."""
        n, t0 = 2000, self.sim_seconds
        for _ in range(n):
            self._timed(int)
        per_call = (self.sim_seconds - t0) / n
        self.sim_seconds, self.calls = t0, self.calls - n
        return max(self.sim_seconds - self.calls * per_call, 0.0)

    def load(self, addr, data):
        data = bytes(data)
        self.inner.load(addr, data)
        self.events.append(["load", addr, len(self.blob), len(data)])
        self.blob += data

    def dump(self, addr, n):
        return self.inner.dump(addr, n)

    def host_access(self, addr, write, data=b""):
        raise NotImplementedError("the replay format has no host accesses")

    def csr_write(self, name, value):
        self._timed(self.inner.csr_write, name, value)
        self.events.append(["csr_write", name, value])

    def csr_read(self, name):
        return self._timed(self.inner.csr_read, name)

    def counters(self):
        return self._timed(self.inner.counters)

    def submit(self, words):
        words = list(words)
        self.inner.submit(words)
        self.events.append(["submit", [hex(w) for w in words]])

    def run(self, max_cycles=None):
        if max_cycles is not None:
            raise NotImplementedError("the replay format records only runs until idle")
        self.events.append(["run"])
        return self._timed(self.inner.run)

    @property
    def pending(self):
        return self.inner.pending

    @property
    def cycle(self):
        return self.inner.cycle

    def close(self):
        self.inner.close()


def workload(dimm, scale: int, seed: int = 1, check: bool = True) -> dict:
    """The benchmark's descriptor stream on ``dimm`` (a ``sw.driver.Dimm``), sized by ``scale``
    (the GEMV outputs are ``scale`` x the engine's units). Returns the descriptor records; with
    ``check`` every result is compared bit for bit with the golden model."""
    from ndpdimm.cosim.golden import numerics as golden
    from ndpdimm.hw.formats import Dtype

    g = torch.Generator().manual_seed(seed)
    U = dimm.config.n_units
    N, K = scale * U, 2048
    W = (torch.randn(N, K, generator=g) / 16).half()
    x = torch.randn(2, K, generator=g).half()
    records = []
    fetch = check

    def step(name, fn):
        out = fn()
        records.extend({**r, "step": name} for r in dimm.last_run.as_dict()["descriptors"])
        return out

    w = dimm.store_weights(W, Dtype.FP16)
    y = step("dense fp16 batch 2", lambda: dimm.gemv(w, x, fetch=fetch))
    if check:
        want = golden.gemv_dot(W, x, Dtype.FP16)
        assert (golden.result_bits(y) == golden.result_bits(want)).all(), "dense GEMV differs"
    idx = torch.randperm(N, generator=g)[:N // 4]
    y = step("row gather 25 %", lambda: dimm.gemv(w, x[:1], op="row_gather", idx=idx, fetch=fetch))
    if check:
        want = golden.gemv_dot(W[idx], x[:1], Dtype.FP16)
        assert (golden.result_bits(y) == golden.result_bits(want)).all(), "row gather differs"
    Wt = (torch.randn(N, 256, generator=g) / 16).half()
    wt = dimm.store_weights(Wt, Dtype.FP16, layout="axpy")
    h = torch.randn(1, N, generator=g).half()
    sel = torch.randperm(N, generator=g)[:N // 4]
    y = step("col gather 25 %", lambda: dimm.gemv(wt, h, op="col_gather", idx=sel, fetch=fetch))
    if check:
        want = golden.gemv_col_gather(Wt, h, sel, Dtype.FP16)
        assert (golden.result_bits(y) == golden.result_bits(want)).all(), "col gather differs"
    v = torch.randn(8192, generator=g).half()
    step("SiLU 8192", lambda: dimm.activation("silu", v, fetch=fetch))
    step("multiply 8192", lambda: dimm.eltwise("mul", v, v, fetch=fetch))
    step("softmax 4096", lambda: dimm.softmax(v[:4096], fetch=fetch))
    return {"descriptors": records}


def _speed(cycles, seconds):
    return cycles / seconds if seconds > 0 else None


def measure_harness(config: CoreConfig, scale: int, **backend_kwargs) -> dict:
    from ndpdimm.cosim.rtl.harness import RtlBackend
    from ndpdimm.cosim.rtl.harness_build import build_record
    from ndpdimm.sw.driver.dimm import Dimm
    rec = RecordingBackend(RtlBackend(config, **backend_kwargs))
    dimm = Dimm(rec)
    c0, t0, w0 = rec.cycle, time.process_time(), time.perf_counter()
    rec.inner.profile(True)
    out = workload(dimm, scale, check=True)
    profile = rec.inner.profile(False)
    total, wall = time.process_time() - t0, time.perf_counter() - w0
    cycles = rec.cycle - c0
    lib = rec.inner.library
    # the same run split by the harness's own timers (wall clock, read around every eval()):
    # the model's evaluation of this workload vs everything the harness adds per cycle
    profile.update({"model_eval_cycles_per_second": _speed(cycles, profile["eval_seconds"]),
                    "eval_share_of_run_calls": profile["eval_seconds"] / rec.sim_seconds
                    if rec.sim_seconds else None})
    result = {"cycles": cycles, "run_cpu_seconds": rec.sim_seconds,
              "end_to_end_cpu_seconds": total, "end_to_end_wall_seconds": wall,
              "cycles_per_second": _speed(cycles, rec.sim_seconds),
              "end_to_end_cycles_per_second": _speed(cycles, total),
              "results_bit_exact": True, "profile": profile, "build": build_record(lib),
              "descriptors": out["descriptors"]}
    dimm.close()
    return result, rec


def measure_bare(config: CoreConfig, cycles: int, **backend_kwargs) -> dict:
    from ndpdimm.cosim.rtl.harness import RtlBackend
    b = RtlBackend(config, progress=False, **backend_kwargs)
    t, w = time.process_time(), time.perf_counter()
    b.bare_clock(cycles)
    seconds, wall = time.process_time() - t, time.perf_counter() - w
    b.close()
    return {"cycles": cycles, "cpu_seconds": seconds, "wall_seconds": wall,
            "cycles_per_second": _speed(cycles, seconds)}


def measure_cocotb(config: CoreConfig, rec: RecordingBackend, out_dir: Path, wrapped=True,
                   cxx_opt=None, extra_flags=None) -> dict:
    """The recorded session replayed by cocotb on the core with its resets registered (the
    Verilog the harness runs, ``cosim/rtl/core_top.py``), or on the bare ``ndp_core``; the model
    compiled with the harness's plain options (``cxx_opt`` / ``extra_flags``, default
    ``CXX_OPT`` / ``VERILATOR_OPT``: a cocotb build has no profile-guided step), so both run the
    same C++ model of the same Verilog, the harness's with a profile."""
    from ndpdimm.cosim.rtl import build as rtl_build
    from ndpdimm.cosim.rtl.harness_build import CXX_OPT, VERILATOR_OPT
    out_dir.mkdir(parents=True, exist_ok=True)
    blob = out_dir / "replay.bin"
    blob.write_bytes(bytes(rec.blob))
    spec = out_dir / "replay.json"
    spec.write_text(json.dumps({"events": rec.events, "blob": str(blob)}))
    result = out_dir / "replay_out.json"
    from ndpdimm.cosim.rtl.core_top import SIM_TOP
    params = {"config_path": config.dram_config, **config.core_params()}
    top, factory = ((SIM_TOP, "ndpdimm.cosim.rtl.core_top:ndp_core_sim_verilog") if wrapped else
                    ("ndp_core", "ndpdimm.hw.core.ndp_core:ndp_core_verilog"))
    cxx_opt = CXX_OPT if cxx_opt is None else cxx_opt
    extra_flags = VERILATOR_OPT if extra_flags is None else tuple(extra_flags)
    r = rtl_build.run(top, factory, params, "ndpdimm.cosim.rtl.benches.replay", echo_log=False,
                      extra_env={"NDPDIMM_REPLAY": spec, "NDPDIMM_REPLAY_OUT": result},
                      cxx_opt=cxx_opt, extra_flags=extra_flags)
    r.check()
    got = json.loads(result.read_text())
    got["build"] = {"cxx_opt": cxx_opt, "verilator_flags": list(extra_flags),
                    **{k: v for k, v in json.loads((r.build_dir / "build.done.json").read_text()).items()
                       if k in ("seconds", "verilog_lines")}}
    got["cycles_per_second"] = _speed(got["cycles"], got["cpu_seconds"])
    return got


#: The model's calls take microseconds: ``process_time`` (a system call of about that cost)
#: would blur them, so the model is timed by the wall clock, best of this many fresh runs.
MODEL_REPEATS = 5


def _model_run(config: CoreConfig, scale: int):
    from ndpdimm.cosim.model.backend import ModelBackend
    from ndpdimm.sw.driver.dimm import Dimm
    rec = RecordingBackend(ModelBackend(config, functional=False), clock=time.perf_counter)
    dimm = Dimm(rec)
    c0, t0 = rec.cycle, time.perf_counter()
    out = workload(dimm, scale, check=False)
    wall = time.perf_counter() - t0
    return rec, dimm, out, rec.cycle - c0, wall


def measure_model(config: CoreConfig, scale: int, rtl_records, repeats: int = MODEL_REPEATS) -> dict:
    runs = []
    for _ in range(repeats):
        rec, dimm, out, cycles, wall = _model_run(config, scale)
        runs.append((rec.backend_seconds(), wall, rec, dimm, out, cycles))
        if len(runs) > 1:
            runs[-1][3].close()
    best_backend, best_wall = min(r[0] for r in runs), min(r[1] for r in runs)
    _, _, rec, dimm, out, cycles = runs[0]
    assert all(r[5] == cycles for r in runs), "the model is deterministic: same cycles every run"
    errors = []
    for m, r in zip(out["descriptors"], rtl_records):
        if m["opcode"] != r["opcode"] or r["cycles"] <= 0:
            continue
        errors.append({"step": r["step"], "opcode": Opcode(r["opcode"]).name, "rtl": r["cycles"],
                       "model": m["cycles"], "error": (m["cycles"] - r["cycles"]) / r["cycles"]})
    dimm.close()
    rel = [abs(e["error"]) for e in errors]
    calib = getattr(rec.inner, "perf", None)
    backend = best_backend
    return {"cycles": cycles, "timing": f"wall clock (perf_counter), best of {repeats} fresh runs",
            "wall_seconds": best_wall, "backend_seconds": backend,
            "backend_seconds_each_run": [r[0] for r in runs],
            "backend_calls": rec.calls,
            "cycles_per_second": _speed(cycles, backend),
            "end_to_end_cycles_per_second": _speed(cycles, best_wall),
            "descriptors_per_second": _speed(len(out["descriptors"]), backend),
            "calibration": _repo_relative(getattr(calib, "source", None)),
            "per_descriptor": errors,
            "mean_abs_error": sum(rel) / len(rel) if rel else None,
            "max_abs_error": max(rel) if rel else None}


def _command(otherwise: str) -> str:
    """The command line that ran this benchmark: the ``ndpdimm`` one as typed, else
    ``otherwise`` (a call from Python, which has no command line of its own)."""
    if Path(sys.argv[0]).name == "ndpdimm":
        return " ".join(["ndpdimm"] + sys.argv[1:])
    return otherwise


def _repo_relative(path):
    """A calibration file's path relative to the checkout (the JSON is committed)."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path(__file__).resolve().parents[1]))
    except ValueError:
        return str(path)


def _previous_report(path) -> dict:
    """The cosim.json at ``path`` that a run is about to replace ({} if there is none)."""
    path = Path(path) if path else None
    return json.loads(path.read_text()) if path is not None and path.exists() else {}


def _speeds(old: dict) -> dict:
    out = {}
    for entry in old.get("configs", []):
        speeds = {name: entry[name]["cycles_per_second"] for name in ("harness", "bare", "cocotb")
                  if name in entry}
        out[entry["config"]["n_units"]] = {"git_commit": old.get("git_commit"),
                                           "date": old.get("date"),
                                           "config": entry["config"],
                                           "cycles_per_second": speeds}
    return out


def previous_speeds(path) -> dict:
    """``{n_units: {...}}``: the simulation speeds a cosim.json at ``path`` recorded per
    configuration, with its commit and date (empty if there is no such file), so that a rerun
    on a new RTL reports the old figures beside the new ones."""
    return _speeds(_previous_report(path))


def run_bench(units=(256, 16), scale=4, cocotb=True, build_options=False, out=None,
              work_dir=None) -> dict:
    work_dir = Path(work_dir or tempfile.mkdtemp(prefix="bench_cosim_"))
    old = _previous_report(out)
    previous = _speeds(old)
    # the fuzz section is a measurement of its own (``run_fuzz_bench``, its own header): keep it
    fuzz = old.get("fuzz")
    command = _command(" ".join(["python -m ndpdimm.bench.speed"] + sys.argv[1:]))
    report = {**bench_header("cosim", command),
              "workload": f"driver-built stream: dense FP16 GEMV batch 2 ({scale} x units rows, 2048 "
                          "columns), row gather 25 % batch 1, column gather 25 % (256 outputs), "
                          "SiLU / multiply over 8192 FP16, softmax over 4096, with their DMAs",
              "timing": "CPU seconds of the simulating process (time.process_time), so other jobs "
                        "on the machine do not distort the figures; wall seconds are recorded too. "
                        "The model's calls take microseconds: it is timed by the wall clock, best "
                        f"of {MODEL_REPEATS} fresh runs",
              "goals": {"harness_vs_bare": ">= 0.90", "harness_vs_model_eval": ">= 0.90", "harness_vs_cocotb": ">= 10x",
                        "model_vs_harness": ">= 1000x", "model_error": "<= 3 % mean abs (held-out, "
                        "see cosim/calibration and docs/perf_model.md)"},
              "configs": []}
    if fuzz is not None:
        report["fuzz"] = fuzz
    for n in units:
        config = CoreConfig(n_units=n)
        print(f"[bench_cosim] {n} units: harness", file=sys.stderr, flush=True)
        harness, rec = measure_harness(config, scale)
        entry = {"config": config.as_dict(), "harness": harness}
        print(f"[bench_cosim] {n} units: bare clock loop", file=sys.stderr, flush=True)
        entry["bare"] = measure_bare(config, max(2000, min(harness["cycles"], 50000)))
        entry["harness_vs_bare"] = harness["cycles_per_second"] / entry["bare"]["cycles_per_second"]
        entry["harness_vs_model_eval"] = harness["profile"]["eval_share_of_run_calls"]
        if cocotb:
            print(f"[bench_cosim] {n} units: cocotb replay", file=sys.stderr, flush=True)
            coco = measure_cocotb(config, rec, work_dir / f"u{n}")
            rtl = [(d["id"], d["status"]) for d in harness["descriptors"]]
            got = [(c["id"], c["status"]) for c in coco.pop("completions")]
            coco["same_ids_and_statuses_as_harness"] = got == rtl
            # CQ_CYCLES may differ by where refreshes and the host's register accesses fall
            diffs = [abs(a["cycles"] - b) / max(a["cycles"], 1) for a, b in
                     zip(harness["descriptors"], [c["cycles"] for c in
                                                  json.loads((work_dir / f"u{n}" / "replay_out.json")
                                                             .read_text())["completions"]])]
            coco["descriptor_cycles_mean_abs_difference"] = sum(diffs) / len(diffs) if diffs else None
            coco["descriptor_cycles_max_abs_difference"] = max(diffs, default=None)
            entry["cocotb"] = coco
            entry["harness_vs_cocotb"] = harness["cycles_per_second"] / coco["cycles_per_second"]
            if n <= 64:   # what the registered resets buy cocotb too (the benches use them)
                print(f"[bench_cosim] {n} units: cocotb replay on the bare ndp_core", file=sys.stderr,
                      flush=True)
                bare = measure_cocotb(config, rec, work_dir / f"u{n}-bare", wrapped=False)
                bare.pop("completions")
                entry["cocotb_without_registered_resets"] = bare
        print(f"[bench_cosim] {n} units: model", file=sys.stderr, flush=True)
        entry["model"] = measure_model(config, scale, harness["descriptors"])
        entry["model_vs_harness"] = entry["model"]["cycles_per_second"] / harness["cycles_per_second"]
        prev = previous.get(n)
        if prev is not None and prev["config"] == entry["config"]:
            entry["previous_run"] = prev
            entry["harness_vs_previous_run"] = (harness["cycles_per_second"] /
                                                prev["cycles_per_second"]["harness"])
        report["configs"].append(entry)
        if out:
            _write(report, out)
    if build_options:
        config = CoreConfig(n_units=min(units))
        rows = []
        for name, cxx, flags, toolchain in BUILD_OPTIONS:
            print(f"[bench_cosim] build option {name}", file=sys.stderr, flush=True)
            kw = {"cxx_opt": cxx, "extra_flags": flags, **toolchain}
            h, _ = measure_harness(config, scale, **kw)
            b = measure_bare(config, max(2000, min(h["cycles"], 50000)), **kw)
            rows.append({"option": name, "cxx_opt": cxx, "verilator_flags": list(flags),
                         "toolchain": {k: list(v) if isinstance(v, tuple) else v for k, v in toolchain.items()},
                         "build_seconds": h["build"]["seconds"], "build": h["build"],
                         "cycles": h["cycles"], "descriptor_cycles": [d["cycles"] for d in h["descriptors"]],
                         "bare_cycles_per_second": b["cycles_per_second"],
                         "harness_cycles_per_second": h["cycles_per_second"],
                         "model_eval_cycles_per_second": h["profile"]["model_eval_cycles_per_second"],
                         "harness_share_of_loop": h["profile"]["harness_share"]})
            report["build_options"] = {"config": config.as_dict(), "options": rows}
            if out:
                _write(report, out)
    return report


#: The fuzzer's configuration in ``make test`` / ``make sim`` (the harness tests' small core).
FUZZ_CONFIG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


def measure_fuzz(count: int, seed: int, config: CoreConfig = FUZZ_CONFIG) -> dict:
    """The descriptor fuzzer on the harness (``cosim/fuzz/harness.py``): ``count`` descriptors,
    every check on; descriptors/s by the wall clock (build excluded), the codes drawn."""
    from ndpdimm.cosim.fuzz.harness import run_fuzz
    from ndpdimm.cosim.rtl.harness import RtlBackend

    def progress(done, total):
        print(f"\r[bench_fuzz] {done}/{total} descriptors", end="", file=sys.stderr, flush=True)

    with RtlBackend(config) as backend:
        r = run_fuzz(backend, config, count, seed, progress=progress)
    print(file=sys.stderr)
    return {"config": config.as_dict(), "seed": seed, "fuzz_descriptors": r["descriptors"],
            "descriptors_run_incl_checks": r["descriptors_run"], "mismatches": 0,
            "wall_seconds": r["seconds"], "descriptors_per_second": r["per_second"],
            "ndp_cycles": r["ndp_cycles"], "codes": r["codes"], "stats": r["stats"]}


def rerun_model(out, scale: int = 4) -> dict:
    """Rerun the ``model`` section of every config in the cosim JSON ``out`` against the
    harness descriptors recorded there (``--model-only``; the RTL sections are kept)."""
    out = Path(out)
    if not out.exists():
        raise ValueError(f"{out}: no cosim bench results to rerun the model against "
                         "(run `ndpdimm bench --suite cosim` first)")
    report = json.loads(out.read_text())
    command = _command(f"python -c 'from ndpdimm.bench.speed import rerun_model; "
                       f"rerun_model({str(out)!r})'")
    for entry in report["configs"]:
        config = CoreConfig(**entry["config"])
        harness = entry["harness"]
        print(f"[bench_cosim] {config.n_units} units: model (against the recorded harness run)",
              file=sys.stderr, flush=True)
        entry["model"] = {**bench_header("cosim model", command),
                          **measure_model(config, scale, harness["descriptors"])}
        entry["model_vs_harness"] = (entry["model"]["cycles_per_second"]
                                     / harness["cycles_per_second"])
    _write(report, out)
    return report


def run_fuzz_bench(count: int = 100_000, seed: int = 1, out=None) -> dict:
    """Measure the fuzzer and record it as the ``fuzz`` section of the cosim JSON ``out``
    (the rest of that file is kept: it has its own provenance, this section has its own)."""
    command = _command(f"python -c 'from ndpdimm.bench.speed import run_fuzz_bench; "
                       f"run_fuzz_bench({count}, {seed})'")
    section = {**bench_header("fuzz", command), **measure_fuzz(count, seed)}
    if out:
        out = Path(out)
        report = json.loads(out.read_text()) if out.exists() else {**bench_header("cosim", command)}
        report["fuzz"] = section
        _write(report, out)
    return section


def _write(report, out):
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_text(dumps_finite(report, tmp) + "\n")
    os.replace(tmp, out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--units", type=int, nargs="+", default=[256, 16])
    p.add_argument("--scale", type=int, default=4)
    p.add_argument("--no-cocotb", action="store_true")
    p.add_argument("--build-options", action="store_true")
    p.add_argument("--model-only", action="store_true",
                   help="rerun only the model sections against the harness runs in --out")
    p.add_argument("--out", default="bench/results/cosim.json")
    a = p.parse_args(argv)
    if a.model_only:
        rerun_model(a.out, a.scale)
        return
    run_bench(tuple(a.units), a.scale, not a.no_cocotb, a.build_options, a.out)


if __name__ == "__main__":
    main()
