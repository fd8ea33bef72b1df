"""Request workloads for the RAPID scenario (power-aware disaggregated LLM serving): arrival
processes, prompt and output lengths, and the trace file a simulation replays.

Workload model
--------------
A workload (:class:`WorkloadSpec`) says how requests arrive and how long they are:

* **arrivals** are a Poisson process with a piecewise-constant rate, in one of three patterns
  (``PATTERNS``):

  - ``"steady"``: the constant rate ``steady_rate_rps`` (requests per second);
  - ``"bursty"``: a cycle of phases, phase ``i`` lasting ``bursty_phase_duration_s[i]``
    seconds at ``bursty_phase_rate_rps[i]``, repeated from ``t = 0`` over the whole run
    (a rate may be 0: an idle phase);
  - ``"diurnal"``: a day with a trough and a peak, compressed into ``diurnal_period_s`` and
    repeated: the rate ``trough + (peak - trough) * (1 - cos(2 pi t / period)) / 2`` (the
    trough at ``t = 0``, "midnight", the peak half a period later, "noon"), held constant over
    each of the day's ``DIURNAL_STEPS`` (24) "hours" at its exact mean over that hour, so the
    day's mean rate is ``(trough + peak) / 2``.

  :meth:`WorkloadSpec.rate_at` gives the rate at a time, :meth:`WorkloadSpec.mean_rate` its
  average over a cycle (a day for ``diurnal``).

  :func:`generate_trace` draws the arrivals by time rescaling: the number of requests in
  ``[0, duration_s)`` is Poisson with mean ``Lambda(duration_s)`` (``Lambda`` the integral of
  the rate), their images under ``Lambda`` are sorted uniforms on ``[0, Lambda(duration_s))``,
  and ``Lambda``'s inverse maps them back to times. That is exact for any piecewise-constant
  rate and needs no loop over requests (an hour at ~30 rps, ~100k requests, takes milliseconds).
  ``rate_scale`` multiplies every rate and keeps the phase durations (a busier day with the
  same burst rhythm); :meth:`Trace.scaled` instead divides the arrival times of an existing
  trace, which compresses the phases too (the only option for a recorded trace).
* **input (prompt) lengths** are integers in ``[input_tokens_min, input_tokens_max]``, either
  ``"uniform"`` or ``"log-uniform"`` (``exp(U(ln min, ln max))`` rounded to an integer and
  clipped: each octave equally likely, median near ``sqrt(min * max)``);
* **output lengths** are uniform integers in ``[output_tokens_min, output_tokens_max]``.

One ``np.random.default_rng(seed)`` drives a trace, so a seed gives the same trace every time.

Workload files
--------------
``sw/configs/rapid_workloads/<name>.toml`` (``WORKLOAD_DIR``; :func:`list_workloads`), or any
TOML file of the same form given by path to :func:`load_workload`::

    name = "mixed"
    description = "..."
    source = "..."                      # where the shape comes from, or "assumption: ..."
    input_distribution = "log-uniform"  # or "uniform"
    input_tokens_min = { value = 512, source = "..." }
    input_tokens_max = { value = 8192, source = "..." }
    output_tokens_min = { value = 64, source = "..." }
    output_tokens_max = { value = 512, source = "..." }
    [steady]
    rate_rps = { value = 10.0, source = "..." }
    [bursty]
    phase_duration_s = { value = [60.0, 30.0], source = "..." }
    phase_rate_rps = { value = [6.0, 20.0], source = "..." }
    [diurnal]
    period_s = { value = 1200.0, source = "..." }
    trough_rate_rps = { value = 5.0, source = "..." }
    peak_rate_rps = { value = 45.0, source = "..." }

The file is read by the project's configuration loader (``hw/config_file.py``): every key is
required and no other key is accepted, every number carries its source (an array one for the
whole array) and is finite. Token bounds are integers (not booleans) with ``1 <= min <= max``;
rates and durations are finite numbers, ``rate_rps > 0``, phase durations ``> 0``, phase rates
``>= 0`` with at least one ``> 0``, both phase lists non-empty and of equal length; the diurnal
``period_s > 0`` and ``0 <= trough_rate_rps <= peak_rate_rps``, ``peak_rate_rps > 0``.

Trace files
-----------
:class:`Trace` holds per-request ``arrival_s`` (float64, non-decreasing, seconds from the start),
``input_tokens`` and ``output_tokens`` (int64, ``>= 1``). :func:`save_trace` writes it as CSV, the
format a simulation replays (:func:`load_trace`)::

    # rapid trace mixed-steady
    arrival_s,input_tokens,output_tokens
    0.10734279417270355,1733,297
    ...

The first line, a comment naming the trace, is optional (without it the name is the file's
stem); other lines starting with ``#`` and blank lines are skipped. Arrival times are written
with ``repr``, the shortest text that reads back to the same float, so a save/load round trip
is exact.

Bad input
---------
A bad workload file raises the configuration loader's
:class:`~ndpdimm.hw.config_file.ConfigError`, everything else :class:`WorkloadError` (both
``ValueError``), with a message that names where and quotes the bad value:

* a workload file: unknown built-in name (the message lists the built-ins), missing file,
  invalid TOML, a missing or unknown key or table, a number without its source, NaN or
  infinity, a value of the wrong type or out of range - the message names the file and the key
  (``bursty.phase_rate_rps``);
* a trace file: missing file, a wrong or missing header, a row with the wrong number of
  columns, a non-numeric arrival, a token count that is not an integer ``>= 1``, a negative,
  non-finite or decreasing arrival, ``input + output > max_tokens`` (when given), no rows - the
  message names the file and the line number;
* a :class:`Trace` or :class:`WorkloadSpec` built directly with bad values, and bad arguments
  (duration, pattern, seed, ``rate_scale``, ``n``) to the functions here.
"""

import dataclasses
import math
from pathlib import Path

import numpy as np

from ndpdimm.hw import config_file

__all__ = ["make_trace", "WorkloadError", "WorkloadSpec", "Trace", "WORKLOAD_DIR", "PATTERNS",
           "DIURNAL_STEPS", "DISTRIBUTIONS",
           "TRACE_HEADER", "list_workloads", "load_workload", "generate_trace", "save_trace",
           "load_trace"]

#: The packaged workload files (``importlib.resources``).
WORKLOAD_DIR = config_file.package_folder("ndpdimm.sw", "configs", "rapid_workloads")
PATTERNS = ("steady", "bursty", "diurnal")
#: the "hours" of a diurnal day: steps of constant rate (module docstring)
DIURNAL_STEPS = 24
DISTRIBUTIONS = ("uniform", "log-uniform")
TRACE_HEADER = ("arrival_s", "input_tokens", "output_tokens")
_NAME_COMMENT = "# rapid trace "



@dataclasses.dataclass(frozen=True)
class _Steady:
    rate_rps: float


@dataclasses.dataclass(frozen=True)
class _Bursty:
    phase_duration_s: tuple[float, ...]
    phase_rate_rps: tuple[float, ...]


@dataclasses.dataclass(frozen=True)
class _Diurnal:
    period_s: float
    trough_rate_rps: float
    peak_rate_rps: float


@dataclasses.dataclass(frozen=True)
class _WorkloadFile:
    """The schema of a workload file (its tables become :class:`WorkloadSpec`'s fields)."""
    name: str
    description: str
    source: str
    input_distribution: str
    input_tokens_min: int
    input_tokens_max: int
    output_tokens_min: int
    output_tokens_max: int
    steady: _Steady
    bursty: _Bursty
    diurnal: _Diurnal


#: WorkloadSpec field -> the key of a workload file it comes from, as messages name it.
_FILE_KEYS = {"steady_rate_rps": "steady.rate_rps",
              "bursty_phase_duration_s": "bursty.phase_duration_s",
              "bursty_phase_rate_rps": "bursty.phase_rate_rps",
              "diurnal_period_s": "diurnal.period_s",
              "diurnal_trough_rate_rps": "diurnal.trough_rate_rps",
              "diurnal_peak_rate_rps": "diurnal.peak_rate_rps"}


class WorkloadError(ValueError):
    """A bad workload file, trace file, trace, or argument to the workload functions."""


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, (bool, np.bool_)) and math.isfinite(value))


def _check_spec(values: dict, where: str, label: dict) -> None:
    """:class:`WorkloadError` unless ``values`` (WorkloadSpec field -> value) are a valid
    workload; messages start with ``where`` and name fields by ``label`` (field -> key shown)."""
    def fail(field, requirement, value):
        raise WorkloadError(f"{where}: {label[field]} must be {requirement}, got {value!r}")

    for field in ("name", "description", "source"):
        if not isinstance(values[field], str):
            fail(field, "a string", values[field])
    name = values["name"]
    # the name goes into trace names and the trace file's one-line comment
    if not name.strip() or name != name.strip() or "\n" in name or "\r" in name:
        fail("name", "a non-empty one-line string without surrounding spaces", name)
    if values["input_distribution"] not in DISTRIBUTIONS:
        fail("input_distribution", f"one of {', '.join(map(repr, DISTRIBUTIONS))}",
             values["input_distribution"])
    for kind in ("input", "output"):
        low_field, high_field = f"{kind}_tokens_min", f"{kind}_tokens_max"
        for field in (low_field, high_field):
            if not _is_int(values[field]) or values[field] < 1:
                fail(field, "an integer >= 1", values[field])
        if values[low_field] > values[high_field]:
            raise WorkloadError(f"{where}: {label[low_field]} ({values[low_field]!r}) must be <= "
                                f"{label[high_field]} ({values[high_field]!r})")
    if not _is_real(values["steady_rate_rps"]) or values["steady_rate_rps"] <= 0:
        fail("steady_rate_rps", "a finite number > 0", values["steady_rate_rps"])
    durations, rates = values["bursty_phase_duration_s"], values["bursty_phase_rate_rps"]
    for field, seq in (("bursty_phase_duration_s", durations), ("bursty_phase_rate_rps", rates)):
        if not isinstance(seq, (list, tuple)) or not seq:
            fail(field, "a non-empty list of numbers", seq)
    if len(durations) != len(rates):
        raise WorkloadError(f"{where}: {label['bursty_phase_duration_s']} ({len(durations)} "
                            f"phases: {list(durations)!r}) and {label['bursty_phase_rate_rps']} "
                            f"({len(rates)} phases: {list(rates)!r}) must have the same length")
    for i, d in enumerate(durations):
        if not _is_real(d) or d <= 0:
            raise WorkloadError(f"{where}: {label['bursty_phase_duration_s']}[{i}] must be a "
                                f"finite number > 0, got {d!r}")
    for i, r in enumerate(rates):
        if not _is_real(r) or r < 0:
            raise WorkloadError(f"{where}: {label['bursty_phase_rate_rps']}[{i}] must be a "
                                f"finite number >= 0, got {r!r}")
    if not any(r > 0 for r in rates):
        fail("bursty_phase_rate_rps", "a list with at least one rate > 0", list(rates))
    if not _is_real(values["diurnal_period_s"]) or values["diurnal_period_s"] <= 0:
        fail("diurnal_period_s", "a finite number > 0", values["diurnal_period_s"])
    trough, peak = values["diurnal_trough_rate_rps"], values["diurnal_peak_rate_rps"]
    if not _is_real(peak) or peak <= 0:
        fail("diurnal_peak_rate_rps", "a finite number > 0", peak)
    if not _is_real(trough) or trough < 0:
        fail("diurnal_trough_rate_rps", "a finite number >= 0", trough)
    if trough > peak:
        raise WorkloadError(f"{where}: {label['diurnal_trough_rate_rps']} ({trough!r}) must be "
                            f"<= {label['diurnal_peak_rate_rps']} ({peak!r})")


@dataclasses.dataclass(frozen=True)
class WorkloadSpec:
    """A request workload (see the module docstring); construction validates."""
    name: str
    description: str
    source: str
    input_distribution: str           # "uniform" or "log-uniform"
    input_tokens_min: int
    input_tokens_max: int
    output_tokens_min: int
    output_tokens_max: int
    steady_rate_rps: float
    bursty_phase_duration_s: tuple    # seconds per phase of the bursty cycle
    bursty_phase_rate_rps: tuple      # requests per second in each phase
    diurnal_period_s: float           # one compressed day
    diurnal_trough_rate_rps: float    # the rate at "midnight"
    diurnal_peak_rate_rps: float      # the rate at "noon"

    def __post_init__(self):
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        _check_spec(values, f"workload {self.name!r}", {k: k for k in values})
        for field in ("input_tokens_min", "input_tokens_max", "output_tokens_min",
                      "output_tokens_max"):
            object.__setattr__(self, field, int(values[field]))
        for field in ("steady_rate_rps", "diurnal_period_s", "diurnal_trough_rate_rps",
                      "diurnal_peak_rate_rps"):
            object.__setattr__(self, field, float(values[field]))
        for field in ("bursty_phase_duration_s", "bursty_phase_rate_rps"):
            object.__setattr__(self, field, tuple(float(v) for v in values[field]))

    def _phases(self, pattern: str) -> tuple:
        """``(durations, rates)`` of the pattern's repeating cycle (steady: one phase; diurnal:
        the day's hours, each at the sinusoid's exact mean over it)."""
        _check_pattern(pattern)
        if pattern == "steady":
            return (1.0,), (self.steady_rate_rps,)
        if pattern == "bursty":
            return self.bursty_phase_duration_s, self.bursty_phase_rate_rps
        trough, swing = self.diurnal_trough_rate_rps, self.diurnal_peak_rate_rps - self.diurnal_trough_rate_rps
        # the mean of (1 - cos(2 pi t / P)) / 2 over hour h: 1/2 - (sin(2 pi (h+1)/N) - sin(2 pi h/N)) N / (4 pi)
        edges = np.sin(2 * np.pi * np.arange(DIURNAL_STEPS + 1) / DIURNAL_STEPS)
        shape = 0.5 - np.diff(edges) * DIURNAL_STEPS / (4 * np.pi)
        rates = tuple(float(trough + swing * x) for x in np.clip(shape, 0.0, 1.0))
        return (self.diurnal_period_s / DIURNAL_STEPS,) * DIURNAL_STEPS, rates

    def rate_at(self, pattern: str, t):
        """Arrival rate (requests/s) of ``pattern`` at time ``t`` (s, ``>= 0``): a float, or an
        array of the shape of ``t`` when ``t`` is an array. A phase starts at its boundary."""
        durations, rates = self._phases(pattern)
        times = np.asarray(t, dtype=np.float64)
        if times.size and not (np.all(np.isfinite(times)) and np.all(times >= 0)):
            raise WorkloadError(f"t must be finite and >= 0 seconds, got {t!r}")
        ends = np.cumsum(durations)
        within = np.mod(times, ends[-1])
        phase = np.minimum(np.searchsorted(ends, within, side="right"), len(rates) - 1)
        out = np.asarray(rates, dtype=np.float64)[phase]
        return float(out) if out.ndim == 0 else out

    def mean_rate(self, pattern: str) -> float:
        """Average arrival rate (requests/s) of ``pattern`` over its cycle."""
        durations, rates = self._phases(pattern)
        return sum(d * r for d, r in zip(durations, rates)) / sum(durations)


def _check_pattern(pattern) -> None:
    if pattern not in PATTERNS:
        raise WorkloadError(f"pattern must be one of {', '.join(map(repr, PATTERNS))}, "
                            f"got {pattern!r}")


def list_workloads() -> list:
    """Names of the built-in workload files, sorted."""
    return config_file.builtin_names(WORKLOAD_DIR)


def load_workload(name_or_path) -> WorkloadSpec:
    """A workload from a built-in name (:func:`list_workloads`) or a path ending ``.toml``;
    :class:`~ndpdimm.hw.config_file.ConfigError` naming the file and key on a bad file."""
    path = config_file.find(WORKLOAD_DIR, name_or_path, "workload")
    f = config_file.load(path, _WorkloadFile)
    values = {k.name: getattr(f, k.name) for k in dataclasses.fields(f)
              if k.name not in ("steady", "bursty", "diurnal")}
    values.update(steady_rate_rps=f.steady.rate_rps,
                  bursty_phase_duration_s=f.bursty.phase_duration_s,
                  bursty_phase_rate_rps=f.bursty.phase_rate_rps,
                  diurnal_period_s=f.diurnal.period_s,
                  diurnal_trough_rate_rps=f.diurnal.trough_rate_rps,
                  diurnal_peak_rate_rps=f.diurnal.peak_rate_rps)
    try:
        _check_spec(values, str(path), {k: _FILE_KEYS.get(k, k) for k in values})
    except WorkloadError as e:
        raise config_file.ConfigError(str(e)) from None
    return WorkloadSpec(**values)


@dataclasses.dataclass(frozen=True, eq=False)   # arrays: == is defined below, element-wise exact
class Trace:
    """Requests in arrival order: ``arrival_s`` (float64 seconds, non-decreasing, finite,
    ``>= 0``), ``input_tokens`` and ``output_tokens`` (int64, ``>= 1``), read-only copies.
    Construction validates and raises :class:`WorkloadError` naming the first bad request."""
    name: str
    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip() or \
                self.name != self.name.strip() or "\n" in self.name or "\r" in self.name:
            raise WorkloadError("trace name must be a non-empty one-line string without "
                                f"surrounding spaces, got {self.name!r}")
        arrays = {}
        for field in ("arrival_s", "input_tokens", "output_tokens"):
            a = np.asarray(getattr(self, field))
            if a.ndim != 1:
                raise WorkloadError(f"trace {self.name!r}: {field} must be 1-D, got shape "
                                    f"{a.shape}")
            if a.size and field != "arrival_s" and a.dtype.kind not in "iu":
                raise WorkloadError(f"trace {self.name!r}: {field} must hold integers, got "
                                    f"dtype {a.dtype}")
            if a.size and field == "arrival_s" and a.dtype.kind not in "iuf":
                raise WorkloadError(f"trace {self.name!r}: arrival_s must hold numbers, got "
                                    f"dtype {a.dtype}")
            arrays[field] = a
        lengths = {f: len(a) for f, a in arrays.items()}
        if len(set(lengths.values())) != 1:
            raise WorkloadError(f"trace {self.name!r}: arrays must have equal lengths, got "
                                f"{lengths}")
        arrival = arrays["arrival_s"].astype(np.float64)    # always a copy: the caller keeps theirs
        bad = ~np.isfinite(arrival) | (arrival < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise WorkloadError(f"trace {self.name!r}: arrival_s[{i}] must be finite and >= 0, "
                                f"got {arrival[i].item()!r}")
        earlier = arrival[1:] < arrival[:-1]
        if earlier.any():
            i = int(np.argmax(earlier)) + 1
            raise WorkloadError(f"trace {self.name!r}: arrival_s must be non-decreasing, but "
                                f"arrival_s[{i}] = {arrival[i].item()!r} < arrival_s[{i - 1}] = "
                                f"{arrival[i - 1].item()!r}")
        object.__setattr__(self, "arrival_s", arrival)
        for field in ("input_tokens", "output_tokens"):
            tokens = arrays[field].astype(np.int64)
            # the original values too: a uint64 above int64's range would wrap negative
            bad = (arrays[field] < 1) | (tokens < 1)
            if bad.any():
                i = int(np.argmax(bad))
                raise WorkloadError(f"trace {self.name!r}: {field}[{i}] must be >= 1, got "
                                    f"{arrays[field][i].item()!r}")
            object.__setattr__(self, field, tokens)
        for field in ("arrival_s", "input_tokens", "output_tokens"):
            getattr(self, field).setflags(write=False)

    def __len__(self) -> int:
        return len(self.arrival_s)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return self.name == other.name and all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("arrival_s", "input_tokens", "output_tokens"))

    __hash__ = None      # equal traces compare by content, which is not hashed

    @property
    def duration_s(self) -> float:
        """The last arrival time (s); 0.0 for an empty trace."""
        return float(self.arrival_s[-1]) if len(self) else 0.0

    def scaled(self, rate_scale: float) -> "Trace":
        """The same requests with arrival times divided by ``rate_scale`` (``> 0``): ``rate_scale``
        times the load, phases compressed too. Named ``<name>-x<rate_scale>``."""
        _check_rate_scale(rate_scale)
        return Trace(f"{self.name}-x{rate_scale:g}", self.arrival_s / rate_scale,
                     self.input_tokens, self.output_tokens)

    def head(self, n: int) -> "Trace":
        """The first ``n`` (``>= 0``) requests (all of them when there are fewer)."""
        if not _is_int(n) or n < 0:
            raise WorkloadError(f"n must be an integer >= 0, got {n!r}")
        return Trace(self.name, self.arrival_s[:n], self.input_tokens[:n],
                     self.output_tokens[:n])


def _check_rate_scale(rate_scale) -> None:
    if not _is_real(rate_scale) or rate_scale <= 0:
        raise WorkloadError(f"rate_scale must be a finite number > 0, got {rate_scale!r}")


def generate_trace(spec: WorkloadSpec, duration_s: float, pattern: str = "steady", seed: int = 0,
                   rate_scale: float = 1.0) -> Trace:
    """A synthetic trace of ``spec`` over ``[0, duration_s)``: Poisson arrivals of ``pattern``
    with every rate multiplied by ``rate_scale`` (phase durations kept), lengths drawn per the
    spec (module docstring). The same arguments give the same trace. Named
    ``<spec.name>-<pattern>``."""
    if not isinstance(spec, WorkloadSpec):
        raise WorkloadError(f"spec must be a WorkloadSpec, got {type(spec).__name__}")
    if not _is_real(duration_s) or duration_s <= 0:
        raise WorkloadError(f"duration_s must be a finite number > 0, got {duration_s!r}")
    _check_pattern(pattern)
    if not _is_int(seed) or seed < 0:
        raise WorkloadError(f"seed must be an integer >= 0, got {seed!r}")
    _check_rate_scale(rate_scale)
    rng = np.random.default_rng(seed)
    arrival = _poisson_arrivals(rng, *spec._phases(pattern), float(duration_s), float(rate_scale))
    n = len(arrival)
    low, high = spec.input_tokens_min, spec.input_tokens_max
    if spec.input_distribution == "uniform":
        inputs = rng.integers(low, high, size=n, endpoint=True, dtype=np.int64)
    else:
        drawn = np.exp(rng.uniform(math.log(low), math.log(high), size=n))
        inputs = np.clip(np.rint(drawn), low, high).astype(np.int64)
    outputs = rng.integers(spec.output_tokens_min, spec.output_tokens_max, size=n, endpoint=True,
                           dtype=np.int64)
    return Trace(f"{spec.name}-{pattern}", arrival, inputs, outputs)


def _poisson_arrivals(rng, durations, rates, duration_s: float, rate_scale: float) -> np.ndarray:
    """Sorted arrival times in ``[0, duration_s)`` of a Poisson process whose rate cycles through
    ``rates`` (times ``rate_scale``) for ``durations``, by time rescaling (module docstring)."""
    durations = np.asarray(durations, dtype=np.float64)
    rates = np.asarray(rates, dtype=np.float64) * rate_scale
    bounds = np.concatenate(([0.0], np.cumsum(durations)))       # phase starts, then cycle end
    mass = np.concatenate(([0.0], np.cumsum(durations * rates)))  # expected arrivals to each bound
    cycle_s, cycle_mass = bounds[-1], mass[-1]
    full_cycles = math.floor(duration_s / cycle_s)
    total = full_cycles * cycle_mass + np.interp(duration_s - full_cycles * cycle_s, bounds, mass)
    count = rng.poisson(total)
    u = np.sort(rng.uniform(0.0, total, size=count))
    # invert: which cycle, then which phase of positive rate (idle phases hold no arrivals)
    cycle = np.floor(u / cycle_mass)
    within = u - cycle * cycle_mass
    live = rates > 0
    starts, live_rates, mass_before = bounds[:-1][live], rates[live], mass[:-1][live]
    phase = np.maximum(np.searchsorted(mass_before, within, side="right") - 1, 0)
    t = cycle * cycle_s + starts[phase] + (within - mass_before[phase]) / live_rates[phase]
    # rounding at phase and cycle boundaries can move a time by an ulp: keep the order and range
    t = np.maximum.accumulate(t) if count else t
    return np.minimum(t, np.nextafter(duration_s, 0.0))


def save_trace(trace: Trace, path) -> Path:
    """Write ``trace`` as a CSV trace file (module docstring) at ``path``, creating parent
    folders; returns the path. Arrival times round-trip exactly."""
    if not isinstance(trace, Trace):
        raise WorkloadError(f"trace must be a Trace, got {type(trace).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # tolist() gives Python floats, whose repr is the shortest exact text
    rows = [f"{a!r},{i},{o}\n" for a, i, o in zip(trace.arrival_s.tolist(),
                                                   trace.input_tokens.tolist(),
                                                   trace.output_tokens.tolist())]
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(f"{_NAME_COMMENT}{trace.name}\n{','.join(TRACE_HEADER)}\n")
        f.writelines(rows)
    return path


def load_trace(path, max_tokens: int | None = None) -> Trace:
    """Read a CSV trace file (module docstring). With ``max_tokens``, a request whose input plus
    output exceeds it is an error. :class:`WorkloadError` naming the file and line on bad input."""
    if max_tokens is not None and (not _is_int(max_tokens) or max_tokens < 1):
        raise WorkloadError(f"max_tokens must be None or an integer >= 1, got {max_tokens!r}")
    path = Path(path)
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        raise WorkloadError(f"{path}: no such trace file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise WorkloadError(f"{path}: unreadable trace file ({err})") from None
    name = path.stem
    first = lines[0].rstrip() if lines else ""
    if first == _NAME_COMMENT.rstrip() or first.startswith(_NAME_COMMENT):
        name = first[len(_NAME_COMMENT):].strip()
        if not name:
            raise WorkloadError(f"{path}, line 1: the comment {lines[0]!r} names no trace")
    arrival, inputs, outputs = [], [], []
    header_seen, previous = False, 0.0
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        fields = [v.strip() for v in text.split(",")]
        if not header_seen:
            if tuple(fields) != TRACE_HEADER:
                raise WorkloadError(f"{path}, line {number}: expected the header "
                                    f"{','.join(TRACE_HEADER)!r}, got {line!r}")
            header_seen = True
            continue
        where = f"{path}, line {number}"
        if len(fields) != len(TRACE_HEADER):
            raise WorkloadError(f"{where}: expected {len(TRACE_HEADER)} columns "
                                f"({','.join(TRACE_HEADER)}), got {len(fields)}: {line!r}")
        try:
            t = float(fields[0])
        except ValueError:
            raise WorkloadError(f"{where}: arrival_s must be a number, got {fields[0]!r}") from None
        if not math.isfinite(t) or t < 0:
            raise WorkloadError(f"{where}: arrival_s must be finite and >= 0, got {fields[0]!r}")
        if t < previous:
            raise WorkloadError(f"{where}: arrival_s {fields[0]!r} is before the previous "
                                f"request's {previous!r} (arrivals must be non-decreasing)")
        previous = t
        counts = []
        for column, text_value in zip(TRACE_HEADER[1:], fields[1:]):
            try:
                value = int(text_value)
            except ValueError:
                value = None
            if value is None or value < 1:
                raise WorkloadError(f"{where}: {column} must be an integer >= 1, got "
                                    f"{text_value!r}")
            counts.append(value)
        if max_tokens is not None and counts[0] + counts[1] > max_tokens:
            raise WorkloadError(f"{where}: input_tokens + output_tokens = {counts[0]} + "
                                f"{counts[1]} = {counts[0] + counts[1]} exceeds max_tokens = "
                                f"{max_tokens}")
        arrival.append(t)
        inputs.append(counts[0])
        outputs.append(counts[1])
    if not header_seen:
        raise WorkloadError(f"{path}: no header line {','.join(TRACE_HEADER)!r} (empty file?)")
    if not arrival:
        raise WorkloadError(f"{path}: the trace has no requests (only a header)")
    try:
        return Trace(name, np.array(arrival, dtype=np.float64), np.array(inputs, dtype=np.int64),
                     np.array(outputs, dtype=np.int64))
    except OverflowError:
        raise WorkloadError(f"{path}: a token count does not fit in 64 bits") from None
    except WorkloadError as err:
        raise WorkloadError(f"{path}: {err}") from None


def make_trace(cfg, pattern: str) -> "Trace":
    """The run's trace (``cfg`` a :class:`~ndpdimm.sw.scenarios.rapid.config.RapidConfig`): its
    recorded file, or the workload generated with ``pattern`` over ``cfg.duration_s``."""
    if cfg.trace is not None:
        return load_trace(cfg.trace)
    spec = load_workload(cfg.workload)
    return generate_trace(spec, cfg.duration_s, pattern=pattern, seed=cfg.seed,
                          rate_scale=cfg.rate_scale)
