"""RAPID workloads (``sw/scenarios/rapid/workload.py``): the built-in workload files, the statistics of
generated traces against their spec, determinism, the CSV trace format's round trip, and every
kind of bad workload file, trace file, trace and argument."""

import dataclasses
import json
import math
import time

import numpy as np
import pytest

from ndpdimm.hw import config_file
from ndpdimm.hw.config_file import ConfigError
from ndpdimm.sw.scenarios.rapid.workload import (
    DIURNAL_STEPS,
    PATTERNS,
    WORKLOAD_DIR,
    Trace,
    WorkloadError,
    WorkloadSpec,
    generate_trace,
    list_workloads,
    load_trace,
    load_workload,
    save_trace,
)

GOOD = {
    "name": "test", "description": "a test workload", "source": "assumption",
    "input_distribution": "uniform", "input_tokens_min": 100, "input_tokens_max": 200,
    "output_tokens_min": 10, "output_tokens_max": 20,
    "steady": {"rate_rps": 5.0},
    "bursty": {"phase_duration_s": [10.0, 5.0], "phase_rate_rps": [1.0, 4.0]},
    "diurnal": {"period_s": 240.0, "trough_rate_rps": 1.0, "peak_rate_rps": 9.0},
}



def _assert_rejected(load, path, fragments, error=WorkloadError):
    """``load(path)`` raises ``error`` naming the file and containing every fragment."""
    with pytest.raises(error) as err:
        load(path)
    message = str(err.value)
    assert str(path) in message
    for fragment in fragments:
        assert fragment in message, message

def _toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return repr(v)


def _sourced(v):
    """``v`` as the file writes it: a number (or an array holding one) with a source."""
    numeric = (isinstance(v, (int, float)) and not isinstance(v, bool)
               or isinstance(v, list) and any(isinstance(x, (int, float)) for x in v))
    return f'{{ value = {_toml_value(v)}, source = "test" }}' if numeric else _toml_value(v)


def _write_workload(tmp_path, doc, name="w.toml"):
    """``doc`` as a TOML file (top-level keys first, then the tables), numbers with a source."""
    lines = [f"{k} = {_sourced(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for table, body in doc.items():
        if isinstance(body, dict):
            lines += [f"[{table}]"] + [f"{k} = {_sourced(v)}" for k, v in body.items()]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def _changed(**changes):
    """A deep copy of ``GOOD`` with ``key=value`` set; ``table__key`` sets a key of a table;
    the value ``...`` deletes the key."""
    doc = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        table, _, sub = key.partition("__")
        target, k = (doc[table], sub) if sub else (doc, table)
        if value is ...:
            del target[k]
        else:
            target[k] = value
    return doc


def _spec(**changes):
    return dataclasses.replace(load_workload("mixed"), **changes)


#: Explicit rates for the arrival statistics, so the tests do not follow retuning of the
#: built-in files: steady 10 rps; bursty 60 s at 6 rps, then 30 s at 20 rps (a 90 s cycle).
RATES = {"steady_rate_rps": 10.0, "bursty_phase_duration_s": (60.0, 30.0),
         "bursty_phase_rate_rps": (6.0, 20.0)}


# --- built-in workloads ------------------------------------------------------------------------

def test_builtins_are_listed_and_load_with_the_documented_numbers():
    assert list_workloads() == ["long-context", "mixed", "sustained-decode", "synthetic-512-512",
                                "synthetic-8k-128"]
    for name in list_workloads():
        spec = load_workload(name)
        assert spec.name == name
        assert spec == load_workload(WORKLOAD_DIR / f"{name}.toml")     # by path too
        assert spec.description and spec.source
    lc = load_workload("long-context")
    assert (lc.input_distribution, lc.input_tokens_min, lc.input_tokens_max) == \
        ("uniform", 7680, 8192)
    assert (lc.output_tokens_min, lc.output_tokens_max, lc.steady_rate_rps) == (128, 512, 9.0)
    assert lc.bursty_phase_duration_s == (60.0, 30.0) and lc.bursty_phase_rate_rps == (6.0, 15.0)
    sd = load_workload("sustained-decode")   # the vLLM benchmark's generation-heavy case, 128 in / 2048 out
    assert (sd.input_tokens_min, sd.input_tokens_max, sd.output_tokens_min, sd.output_tokens_max) == \
        (128, 128, 2048, 2048)
    assert sd.mean_rate("bursty") == pytest.approx(sd.steady_rate_rps)
    mixed = load_workload("mixed")
    assert (mixed.input_distribution, mixed.input_tokens_min, mixed.input_tokens_max) == \
        ("log-uniform", 512, 8192)
    assert (mixed.output_tokens_min, mixed.output_tokens_max, mixed.steady_rate_rps) == \
        (64, 512, 25.0)
    assert mixed.bursty_phase_duration_s == (60.0, 30.0)
    assert mixed.bursty_phase_rate_rps == (18.0, 45.0)
    # a diurnal day: 20 minutes, 5 to 45 rps, its mean the steady rate (each file's)
    assert (mixed.diurnal_period_s, mixed.diurnal_trough_rate_rps, mixed.diurnal_peak_rate_rps) \
        == (1200.0, 5.0, 45.0)
    for spec in (mixed, lc, sd):
        assert spec.mean_rate("diurnal") == pytest.approx(spec.steady_rate_rps)
        assert spec.diurnal_peak_rate_rps == max(spec.bursty_phase_rate_rps)
    hash(mixed)     # frozen, tuples: usable as a key


@pytest.mark.parametrize("name, input_tokens, output_tokens, rate_rps", [
    ("synthetic-8k-128", 8192, 128, 9.0), ("synthetic-512-512", 512, 512, 84.0)])
def test_rapids_synthetic_workloads_have_the_stated_lengths(name, input_tokens, output_tokens,
                                                            rate_rps):
    """RAPID's synthetic prompts (8K/128 and 512/512 input/output tokens, review): every request
    of a generated trace has exactly the stated lengths, and the steady (Poisson) pattern arrives
    at the file's rate, every pattern averaging it; the lengths' sources cite the review."""
    spec = load_workload(name)
    assert (spec.input_tokens_min, spec.input_tokens_max) == (input_tokens, input_tokens)
    assert (spec.output_tokens_min, spec.output_tokens_max) == (output_tokens, output_tokens)
    assert spec.steady_rate_rps == rate_rps
    for pattern in PATTERNS:
        assert spec.mean_rate(pattern) == pytest.approx(rate_rps)
    trace = generate_trace(spec, 200.0, "steady", seed=3)
    assert np.all(trace.input_tokens == input_tokens) and np.all(trace.output_tokens == output_tokens)
    assert len(trace) / 200.0 == pytest.approx(rate_rps, rel=4 / math.sqrt(rate_rps * 200.0))
    doc = config_file.read(WORKLOAD_DIR / f"{name}.toml")
    for key in ("input_tokens_min", "input_tokens_max", "output_tokens_min", "output_tokens_max"):
        assert doc[key]["source"].startswith("RAPID (review)"), key


def test_the_long_context_workload_cites_longbench():
    """RAPID's LongBench case (contexts up to about 8K tokens): the narrow band at the 8K window
    and its answers cite LongBench's statistics and generation limits."""
    doc = config_file.read(WORKLOAD_DIR / "long-context.toml")
    assert (doc["input_tokens_min"]["value"], doc["input_tokens_max"]["value"]) == (7680, 8192)
    assert "LongBench" in doc["source"] and "../shared/papers/rapid.md" in doc["source"]
    assert "LongBench/task.md" in doc["input_tokens_min"]["source"]
    assert "dataset2maxlen.json" in doc["output_tokens_max"]["source"]


def test_rate_at_follows_the_phase_cycle_and_mean_rate_averages_it():
    spec = _spec(**RATES)
    assert spec.rate_at("steady", 123.4) == 10.0 and isinstance(spec.rate_at("steady", 0), float)
    t = np.array([0.0, 59.999, 60.0, 89.999, 90.0, 150.0, 3600.0 + 75.0])
    assert np.array_equal(spec.rate_at("bursty", t), [6, 6, 20, 20, 6, 20, 20])
    assert spec.rate_at("steady", t).shape == t.shape
    assert spec.mean_rate("steady") == 10.0
    assert spec.mean_rate("bursty") == pytest.approx((60 * 6 + 30 * 20) / 90)
    with pytest.raises(WorkloadError, match="pattern must be one of 'steady', 'bursty', "
                                            "'diurnal'.*'spiky'"):
        spec.rate_at("spiky", 1.0)
    with pytest.raises(WorkloadError, match="t must be finite and >= 0"):
        spec.rate_at("bursty", -1.0)


def test_diurnal_rate_is_the_days_sinusoid_held_hour_by_hour():
    """Trough at midnight, peak at noon, each of the 24 hours at the sinusoid's exact mean over
    it; the day repeats; its mean is (trough + peak) / 2."""
    spec = _spec(diurnal_period_s=240.0, diurnal_trough_rate_rps=2.0, diurnal_peak_rate_rps=20.0)
    hour = 240.0 / DIURNAL_STEPS
    starts = np.arange(DIURNAL_STEPS) * hour
    fine = (np.arange(10000) + 0.5) / 10000 * hour    # midpoints: the sinusoid averaged per hour
    expected = [np.mean(2.0 + 18.0 * (1 - np.cos(2 * np.pi * (h + fine) / 240.0)) / 2)
                for h in starts]
    assert spec.rate_at("diurnal", starts + hour / 2) == pytest.approx(expected, rel=1e-6)
    assert np.array_equal(spec.rate_at("diurnal", starts), spec.rate_at("diurnal", starts + 240.0))
    rates = spec.rate_at("diurnal", starts)
    assert rates[0] == pytest.approx(rates[-1]) and rates[11] == pytest.approx(rates[12])
    assert 2.0 < min(rates[0], rates[-1]) == rates.min() and max(rates[11], rates[12]) == rates.max() < 20.0
    assert spec.mean_rate("diurnal") == pytest.approx(11.0)


# --- generated traces --------------------------------------------------------------------------

def test_steady_arrivals_are_poisson_at_the_rate():
    spec = _spec(**RATES)
    trace = generate_trace(spec, 3600.0, "steady", seed=1)
    assert trace.name == "mixed-steady"
    assert trace.arrival_s.dtype == np.float64 and trace.input_tokens.dtype == np.int64
    assert trace.output_tokens.dtype == np.int64
    assert np.all(np.diff(trace.arrival_s) >= 0)
    assert trace.arrival_s[0] >= 0 and trace.duration_s < 3600.0
    assert len(trace) / 3600.0 == pytest.approx(10.0, rel=0.02)
    gaps = np.diff(trace.arrival_s)
    assert gaps.mean() == pytest.approx(0.1, rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)   # exponential gaps: CV 1
    # counts per 10 s window: Poisson, variance = mean
    per_window = np.bincount((trace.arrival_s // 10).astype(int), minlength=360)
    assert per_window.var() / per_window.mean() == pytest.approx(1.0, abs=0.2)


def test_bursty_arrivals_have_each_phases_rate():
    spec = _spec(**RATES)
    trace = generate_trace(spec, 3600.0, "bursty", seed=2)
    assert trace.name == "mixed-bursty"
    in_burst = (trace.arrival_s % 90.0) >= 60.0
    # 40 cycles: 2400 s at 6 rps, 1200 s at 20 rps
    assert np.count_nonzero(~in_burst) / 2400.0 == pytest.approx(6.0, rel=0.03)
    assert np.count_nonzero(in_burst) / 1200.0 == pytest.approx(20.0, rel=0.03)
    assert len(trace) / 3600.0 == pytest.approx(spec.mean_rate("bursty"), rel=0.02)
    # uniform within each phase: 10 s slices of the cycle, 40 cycles each
    per_slice = np.bincount(((trace.arrival_s % 90.0) // 10).astype(int), minlength=9) / 400.0
    assert per_slice == pytest.approx([6] * 6 + [20] * 3, rel=0.08)
    # a continuous-time process has no two requests at the same instant
    assert np.all(np.diff(trace.arrival_s) > 0)
    # a partial last cycle: 100 s = a full cycle + 10 s of the base phase
    short = [generate_trace(spec, 100.0, "bursty", seed=s) for s in range(40)]
    expected = 60 * 6 + 30 * 20 + 10 * 6
    assert np.mean([len(t) for t in short]) == pytest.approx(expected, rel=0.03)


def test_diurnal_arrivals_have_each_hours_rate():
    spec = _spec(diurnal_period_s=240.0, diurnal_trough_rate_rps=2.0, diurnal_peak_rate_rps=20.0)
    trace = generate_trace(spec, 40 * 240.0, "diurnal", seed=6)
    assert trace.name == "mixed-diurnal"
    hour = 240.0 / DIURNAL_STEPS
    # 40 days: each hour of the day seen for 400 s
    per_hour = np.bincount(((trace.arrival_s % 240.0) // hour).astype(int),
                           minlength=DIURNAL_STEPS) / (40 * hour)
    assert per_hour == pytest.approx(spec.rate_at("diurnal", np.arange(24) * hour), rel=0.12)
    assert len(trace) / (40 * 240.0) == pytest.approx(11.0, rel=0.02)
    assert per_hour[:3].mean() < per_hour[10:14].mean() / 4      # the night's trough


def test_idle_phases_get_no_arrivals():
    spec = _spec(bursty_phase_duration_s=(5.0, 10.0, 5.0), bursty_phase_rate_rps=(0.0, 30.0, 0.0))
    trace = generate_trace(spec, 400.0, "bursty", seed=3)
    within = trace.arrival_s % 20.0
    assert len(trace) == pytest.approx(400 / 20 * 10 * 30, rel=0.05)
    assert np.all((within >= 5.0) & (within <= 15.0))
    # a run that ends inside the first idle phase is empty, not an error
    empty = generate_trace(spec, 4.0, "bursty")
    assert len(empty) == 0 and empty.duration_s == 0.0


def test_lengths_are_within_bounds_and_follow_the_distribution():
    lc = generate_trace(load_workload("long-context"), 3000.0, "steady", seed=4)
    assert lc.input_tokens.min() >= 7680 and lc.input_tokens.max() <= 8192
    assert {7680, 8192} <= set(lc.input_tokens.tolist())     # the bounds are reachable
    assert lc.input_tokens.mean() == pytest.approx((7680 + 8192) / 2, abs=10)
    assert lc.output_tokens.min() >= 128 and lc.output_tokens.max() <= 512
    assert lc.output_tokens.mean() == pytest.approx((128 + 512) / 2, abs=8)

    mixed = generate_trace(load_workload("mixed"), 3000.0, "steady", seed=5)
    inputs = mixed.input_tokens
    assert inputs.min() >= 512 and inputs.max() <= 8192
    # log-uniform: median = geometric mean of the bounds, quartiles an octave either side
    assert np.median(inputs) == pytest.approx(math.sqrt(512 * 8192), rel=0.04)
    assert np.quantile(inputs, [0.25, 0.75]) == pytest.approx([1024, 4096], rel=0.05)
    # a uniform draw would put the median near the midpoint instead
    assert np.median(inputs) < 0.6 * (512 + 8192) / 2
    assert mixed.output_tokens.min() >= 64 and mixed.output_tokens.max() <= 512

    fixed = generate_trace(_spec(input_tokens_min=1000, input_tokens_max=1000), 10.0, seed=0)
    assert len(fixed) and np.all(fixed.input_tokens == 1000)


def test_same_seed_same_trace_other_seed_other_trace():
    spec = load_workload("mixed")
    for pattern in PATTERNS:
        a, b = (generate_trace(spec, 300.0, pattern, seed=7) for _ in range(2))
        assert a == b and np.array_equal(a.arrival_s, b.arrival_s)
        other = generate_trace(spec, 300.0, pattern, seed=8)
        assert other != a
        assert not np.array_equal(a.input_tokens[:50], other.input_tokens[:50])


def test_rate_scale_multiplies_the_rates_and_keeps_the_phases():
    spec = dataclasses.replace(load_workload("long-context"), bursty_phase_duration_s=(60.0, 30.0),
                               bursty_phase_rate_rps=(2.5, 8.0))
    base = generate_trace(spec, 1800.0, "bursty", seed=9)
    double = generate_trace(spec, 1800.0, "bursty", seed=9, rate_scale=2.0)
    assert len(double) / len(base) == pytest.approx(2.0, rel=0.05)
    in_burst = (double.arrival_s % 90.0) >= 60.0
    assert np.count_nonzero(~in_burst) / 1200.0 == pytest.approx(2 * 2.5, rel=0.06)
    assert np.count_nonzero(in_burst) / 600.0 == pytest.approx(2 * 8.0, rel=0.06)
    assert double.duration_s < 1800.0


def test_scaled_divides_arrival_times_and_halves_the_duration():
    trace = generate_trace(load_workload("mixed"), 600.0, "bursty", seed=10)
    fast = trace.scaled(2.0)
    assert np.array_equal(fast.arrival_s, trace.arrival_s / 2)
    assert fast.duration_s == trace.duration_s / 2
    assert np.array_equal(fast.input_tokens, trace.input_tokens)
    assert np.array_equal(fast.output_tokens, trace.output_tokens)
    assert fast.name == "mixed-bursty-x2" and len(fast) == len(trace)
    assert trace.scaled(0.5).duration_s == 2 * trace.duration_s
    for bad in (0, -1.0, float("inf"), True, "2"):
        with pytest.raises(WorkloadError, match="rate_scale must be a finite number > 0"):
            trace.scaled(bad)


def test_head_takes_the_first_requests():
    trace = generate_trace(load_workload("mixed"), 60.0, seed=11)
    first = trace.head(5)
    assert len(first) == 5 and first.name == trace.name
    assert np.array_equal(first.arrival_s, trace.arrival_s[:5])
    assert np.array_equal(first.output_tokens, trace.output_tokens[:5])
    assert len(trace.head(10 ** 6)) == len(trace) and len(trace.head(0)) == 0
    with pytest.raises(WorkloadError, match="n must be an integer >= 0, got -1"):
        trace.head(-1)


def test_an_hour_of_100k_requests_generates_in_well_under_a_second():
    spec = load_workload("mixed")
    generate_trace(spec, 10.0)      # warm up
    start = time.perf_counter()
    trace = generate_trace(spec, 3600.0, "bursty", seed=12, rate_scale=2.6)
    elapsed = time.perf_counter() - start
    assert len(trace) > 95_000
    assert elapsed < 0.5, f"{len(trace)} requests took {elapsed:.3f} s"


@pytest.mark.parametrize("kwargs, message", [
    ({"duration_s": 0.0}, "duration_s must be a finite number > 0, got 0.0"),
    ({"duration_s": -5}, "duration_s must be a finite number > 0, got -5"),
    ({"duration_s": float("nan")}, "duration_s must be a finite number > 0, got nan"),
    ({"duration_s": "60"}, "duration_s must be a finite number > 0, got '60'"),
    ({"pattern": "spiky"}, "pattern must be one of 'steady', 'bursty', 'diurnal', got 'spiky'"),
    ({"rate_scale": 0.0}, "rate_scale must be a finite number > 0, got 0.0"),
    ({"rate_scale": -2.0}, "rate_scale must be a finite number > 0, got -2.0"),
    ({"seed": -1}, "seed must be an integer >= 0, got -1"),
    ({"seed": 1.5}, "seed must be an integer >= 0, got 1.5"),
])
def test_bad_generate_arguments(kwargs, message):
    args = {"duration_s": 60.0, **kwargs}
    with pytest.raises(WorkloadError) as err:
        generate_trace(load_workload("mixed"), **args)
    assert message in str(err.value)


def test_generate_wants_a_spec():
    with pytest.raises(WorkloadError, match="spec must be a WorkloadSpec, got str"):
        generate_trace("mixed", 60.0)


# --- trace files -------------------------------------------------------------------------------

def test_save_load_round_trip_is_exact(tmp_path):
    spec = load_workload("mixed")
    for pattern in PATTERNS:
        trace = generate_trace(spec, 300.0, pattern, seed=13)
        path = save_trace(trace, tmp_path / "deeper" / "dir" / f"{pattern}.csv")
        assert path == tmp_path / "deeper" / "dir" / f"{pattern}.csv" and path.is_file()
        lines = path.read_text().splitlines()
        assert lines[0] == f"# rapid trace mixed-{pattern}"
        assert lines[1] == "arrival_s,input_tokens,output_tokens"
        assert len(lines) == 2 + len(trace)
        back = load_trace(path)
        assert back == trace
        assert np.array_equal(back.arrival_s, trace.arrival_s)     # bit for bit
        assert back.name == trace.name and back.input_tokens.dtype == np.int64
    # awkward floats survive too
    odd = Trace("odd", np.array([0.0, 1e-300, 0.1, 1 / 3, 2 ** 40 + 0.5, 7e15]),
                np.array([1, 2, 3, 4, 5, 6]), np.array([6, 5, 4, 3, 2, 1]))
    assert load_trace(save_trace(odd, tmp_path / "odd.csv")) == odd


def test_trace_file_without_name_comment_takes_the_stem(tmp_path):
    path = tmp_path / "recorded-day.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0,10,5\n\n# a note\n0.5, 20 ,6\r\n")
    trace = load_trace(path)
    assert trace.name == "recorded-day" and len(trace) == 2
    assert np.array_equal(trace.arrival_s, [0.0, 0.5])
    assert np.array_equal(trace.input_tokens, [10, 20])
    assert load_trace(path, max_tokens=26) == trace       # max_tokens is inclusive


HEADER = "arrival_s,input_tokens,output_tokens\n"


@pytest.mark.parametrize("text, fragments", [
    ("", ["no header line"]),
    ("# rapid trace t\n", ["no header line"]),
    ("arrival,input,output\n0,1,1\n", ["line 1", "expected the header", "'arrival,input,output'"]),
    ("0.0,10,5\n", ["line 1", "expected the header", "'0.0,10,5'"]),
    ("# rapid trace t\n" + HEADER, ["no requests"]),
    (HEADER + "0.0,10\n", ["line 2", "expected 3 columns", "got 2", "'0.0,10'"]),
    (HEADER + "0.0,10,5\n1.0,10,5,7\n", ["line 3", "expected 3 columns", "got 4"]),
    (HEADER + "soon,10,5\n", ["line 2", "arrival_s must be a number", "'soon'"]),
    (HEADER + "0.0,ten,5\n", ["line 2", "input_tokens must be an integer >= 1", "'ten'"]),
    (HEADER + "0.0,10,5.5\n", ["line 2", "output_tokens must be an integer >= 1", "'5.5'"]),
    (HEADER + "0.0,0,5\n", ["line 2", "input_tokens must be an integer >= 1", "'0'"]),
    (HEADER + "0.0,10,-3\n", ["line 2", "output_tokens must be an integer >= 1", "'-3'"]),
    (HEADER + "-0.5,10,5\n", ["line 2", "arrival_s must be finite and >= 0", "'-0.5'"]),
    (HEADER + "nan,10,5\n", ["line 2", "arrival_s must be finite and >= 0", "'nan'"]),
    (HEADER + "inf,10,5\n", ["line 2", "arrival_s must be finite and >= 0", "'inf'"]),
    (HEADER + "1.0,10,5\n2.0,10,5\n1.5,10,5\n",
     ["line 4", "'1.5' is before the previous request's 2.0", "non-decreasing"]),
    ("# rapid trace\n" + HEADER + "0,1,1\n", ["line 1", "names no trace"]),
])
def test_bad_trace_files(tmp_path, text, fragments):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    _assert_rejected(load_trace, path, fragments)


def test_trace_file_over_max_tokens_and_missing_file(tmp_path):
    path = tmp_path / "long.csv"
    path.write_text(HEADER + "0.0,100,28\n1.0,8000,200\n")
    with pytest.raises(WorkloadError) as err:
        load_trace(path, max_tokens=8192)
    assert str(path) in str(err.value) and "line 3" in str(err.value)
    assert "8000 + 200 = 8200 exceeds max_tokens = 8192" in str(err.value)
    assert len(load_trace(path, max_tokens=8200)) == 2
    with pytest.raises(WorkloadError, match="max_tokens must be None or an integer >= 1, got 0"):
        load_trace(path, max_tokens=0)
    with pytest.raises(WorkloadError, match="nowhere.csv: no such trace file"):
        load_trace(tmp_path / "nowhere.csv")


@pytest.mark.parametrize("fields, fragments", [
    ({"arrival_s": [0.0, 1.0], "input_tokens": [1], "output_tokens": [1]},
     ["equal lengths", "'arrival_s': 2", "'input_tokens': 1"]),
    ({"arrival_s": [[0.0]], "input_tokens": [[1]], "output_tokens": [[1]]},
     ["arrival_s must be 1-D", "(1, 1)"]),
    ({"arrival_s": [0.0, 2.0, 1.0]}, ["arrival_s must be non-decreasing", "arrival_s[2] = 1.0"]),
    ({"arrival_s": [-1.0, 0.0, 1.0]}, ["arrival_s[0] must be finite and >= 0", "-1.0"]),
    ({"arrival_s": [0.0, float("nan"), 1.0]}, ["arrival_s[1] must be finite and >= 0", "nan"]),
    ({"input_tokens": [5, 0, 5]}, ["input_tokens[1] must be >= 1", "got 0"]),
    ({"output_tokens": [5, 5, -2]}, ["output_tokens[2] must be >= 1", "got -2"]),
    ({"output_tokens": [5.0, 5.0, 5.0]}, ["output_tokens must hold integers", "float64"]),
    ({"name": ""}, ["trace name must be", "''"]),
    ({"name": "two\nlines"}, ["trace name must be", "'two\\nlines'"]),
])
def test_bad_traces(fields, fragments):
    args = {"name": "t", "arrival_s": [0.0, 1.0, 2.0], "input_tokens": [5, 5, 5],
            "output_tokens": [5, 5, 5], **fields}
    with pytest.raises(WorkloadError) as err:
        Trace(**{k: v if k == "name" else np.array(v) for k, v in args.items()})
    for fragment in fragments:
        assert fragment in str(err.value), str(err.value)


def test_trace_copies_and_freezes_its_arrays():
    arrival = np.array([0.0, 1.0])
    trace = Trace("t", arrival, np.array([1, 2], dtype=np.int32), np.array([3, 4]))
    arrival[0] = 5.0
    assert trace.arrival_s[0] == 0.0 and trace.input_tokens.dtype == np.int64
    with pytest.raises(ValueError):
        trace.arrival_s[0] = 1.0
    assert len(Trace("empty", np.array([]), np.array([]), np.array([]))) == 0


# --- bad workload files ------------------------------------------------------------------------

@pytest.mark.parametrize("changes, fragments", [
    ({"input_tokens_max": ...}, ["missing key input_tokens_max"]),
    ({"burstiness": 2.0}, ["unknown key burstiness"]),
    ({"steady": ...}, ["missing key steady"]),
    ({"steady__rate_rps": ...}, ["missing key steady.rate_rps"]),
    ({"bursty__phase_count": 2}, ["unknown key bursty.phase_count"]),
    ({"steady": 5.0}, ["steady must be a table", "5.0"]),
    ({"name": 3}, ["name must be a str", "got 3"]),
    ({"name": ""}, ["name must be a non-empty one-line string", "got ''"]),
    ({"input_distribution": "normal"},
     ["input_distribution must be one of 'uniform', 'log-uniform'", "got 'normal'"]),
    ({"input_tokens_min": 0}, ["input_tokens_min must be an integer >= 1", "got 0"]),
    ({"input_tokens_min": 100.0}, ["input_tokens_min must be an int", "got 100.0"]),
    ({"output_tokens_max": True}, ["output_tokens_max must be an int", "got True"]),
    ({"output_tokens_max": "20"}, ["output_tokens_max must be an int", "got '20'"]),
    ({"input_tokens_min": 300},
     ["input_tokens_min (300) must be <= input_tokens_max (200)"]),
    ({"output_tokens_min": 21},
     ["output_tokens_min (21) must be <= output_tokens_max (20)"]),
    ({"steady__rate_rps": 0.0}, ["steady.rate_rps must be a finite number > 0", "got 0.0"]),
    ({"steady__rate_rps": -1}, ["steady.rate_rps must be a finite number > 0", "got -1"]),
    ({"steady__rate_rps": float("inf")}, ["steady.rate_rps is inf: numbers must be finite"]),
    ({"steady__rate_rps": float("nan")}, ["steady.rate_rps is nan: numbers must be finite"]),
    ({"steady__rate_rps": "fast"}, ["steady.rate_rps must be a float", "'fast'"]),
    ({"bursty__phase_duration_s": []},
     ["bursty.phase_duration_s must be a non-empty list", "got ()"]),
    ({"bursty__phase_rate_rps": 4.0}, ["bursty.phase_rate_rps must be an array", "got 4.0"]),
    ({"bursty__phase_rate_rps": [1.0, 2.0, 3.0]},
     ["bursty.phase_duration_s (2 phases", "bursty.phase_rate_rps (3 phases",
      "same length"]),
    ({"bursty__phase_duration_s": [10.0, 0.0]},
     ["bursty.phase_duration_s[1] must be a finite number > 0", "got 0.0"]),
    ({"bursty__phase_duration_s": [10.0, "5"]},
     ["bursty.phase_duration_s[1] must be a float", "got '5'"]),
    ({"bursty__phase_duration_s": [10.0, float("nan")]},
     ["bursty.phase_duration_s[1] is nan: numbers must be finite"]),
    ({"bursty__phase_rate_rps": [-1.0, 4.0]},
     ["bursty.phase_rate_rps[0] must be a finite number >= 0", "got -1.0"]),
    ({"bursty__phase_rate_rps": [0.0, 0]},
     ["bursty.phase_rate_rps must be a list with at least one rate > 0", "[0.0, 0.0]"]),
    ({"diurnal": ...}, ["missing key diurnal"]),
    ({"diurnal__period_s": 0.0}, ["diurnal.period_s must be a finite number > 0", "got 0.0"]),
    ({"diurnal__peak_rate_rps": 0.0},
     ["diurnal.peak_rate_rps must be a finite number > 0", "got 0.0"]),
    ({"diurnal__trough_rate_rps": -1.0},
     ["diurnal.trough_rate_rps must be a finite number >= 0", "got -1.0"]),
    ({"diurnal__trough_rate_rps": 10.0},
     ["diurnal.trough_rate_rps (10.0) must be <= diurnal.peak_rate_rps (9.0)"]),
])
def test_bad_workload_files(tmp_path, changes, fragments):
    _assert_rejected(load_workload, _write_workload(tmp_path, _changed(**changes)), fragments,
                     error=ConfigError)


def test_a_workload_number_without_its_source_is_refused(tmp_path):
    path = _write_workload(tmp_path, GOOD)
    path.write_text(path.read_text().replace('rate_rps = { value = 5.0, source = "test" }',
                                             "rate_rps = 5.0"))
    _assert_rejected(load_workload, path, ["steady.rate_rps = 5.0 has no source"],
                     error=ConfigError)


def test_good_workload_file_by_path_and_int_rates(tmp_path):
    doc = _changed(steady__rate_rps=5, bursty__phase_rate_rps=[0, 3])
    spec = load_workload(_write_workload(tmp_path, doc))
    assert spec.steady_rate_rps == 5.0 and isinstance(spec.steady_rate_rps, float)
    assert spec.bursty_phase_rate_rps == (0.0, 3.0)
    assert spec.name == "test" and spec.input_tokens_max == 200


def test_unknown_name_missing_file_and_invalid_toml(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_workload("chatbot")
    assert "unknown workload 'chatbot'" in str(err.value)
    assert "long-context, mixed" in str(err.value)
    with pytest.raises(ConfigError, match="missing.toml: no such file"):
        load_workload(tmp_path / "missing.toml")
    broken = tmp_path / "broken.toml"
    broken.write_text('name = "unterminated\n')
    with pytest.raises(ConfigError, match="broken.toml: not valid TOML"):
        load_workload(broken)


def test_spec_built_directly_is_validated():
    with pytest.raises(WorkloadError, match=r"workload 'mixed': steady_rate_rps must be a finite "
                                            r"number > 0, got 0"):
        _spec(steady_rate_rps=0)
    with pytest.raises(WorkloadError, match=r"bursty_phase_rate_rps\[1\] must be a finite number "
                                            r">= 0, got -2"):
        _spec(bursty_phase_rate_rps=(1.0, -2))
    spec = _spec(bursty_phase_duration_s=[1, 2], bursty_phase_rate_rps=[3, 4])
    assert spec.bursty_phase_duration_s == (1.0, 2.0) and spec.bursty_phase_rate_rps == (3.0, 4.0)
    assert isinstance(spec, WorkloadSpec)
