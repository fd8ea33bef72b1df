"""Timelines in the Chrome trace / Perfetto JSON format: one writer for every producer.

A :class:`Timeline` collects *slices* (a device busy from a start for a duration, with
arguments) on named tracks and *counters* (values over time: a queue depth, a power cap), and writes them as the JSON object format that https://ui.perfetto.dev and
``chrome://tracing`` open::

    {"traceEvents": [...], "displayTimeUnit": "ns", "metadata": {...}}

Events: ``"M"`` metadata events name every process (``process_name``) and track
(``thread_name``, ordered by ``thread_sort_index``); ``"X"`` complete events are the slices
(``ts`` and ``dur`` in microseconds, floats); ``"C"`` counter events.

Producers give times in their own unit (``unit_s``: seconds per unit; 1.0 for the scenarios'
seconds, 1e-9 for NDP cycles at 1 GHz) and the writer converts. A track is *exclusive*
(default) when the hardware it stands for cannot overlap work (a GPU's compute stream, a
DIMM's NDP core): :meth:`Timeline.write` refuses a timeline in which two slices of an
exclusive track overlap (that is a bug in the producer, never something to draw). A track
made with ``exclusive=False`` (a copy engine, a link the model lets carry concurrent
transfers) spreads overlapping slices over numbered lanes (``PCIe``, ``PCIe #2``, ...), each
of which then holds non-overlapping slices, as Perfetto needs.

Used by the scenarios (``sw/scenarios/*/``, which may import this module: see
``tests/test_layering.py``) and by the host driver's descriptor timelines
(``sw/driver/timeline.py``). Imports nothing of ours.
"""

import json
import math
from pathlib import Path

__all__ = ["Timeline", "TimelineOverlap", "TimelineFile", "read_timeline", "check_timeline_path", "open_timeline",
           "TIME_EPS_US"]

#: slices closer than this (microseconds) do not count as overlapping (float rounding of sums)
TIME_EPS_US = 1e-6


class TimelineOverlap(ValueError):
    """Two slices of an exclusive track overlap."""


def check_timeline_path(path) -> Path:
    """``path`` as a ``Path`` a timeline can be written to, or ``ValueError`` naming it: its
    folder must exist and it must not be a folder itself. Call it before a run starts."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--timeline {path}: is a directory, give a file name (e.g. "
                         f"{p / 'timeline.json'})")
    if not p.parent.is_dir():
        raise ValueError(f"--timeline {path}: folder {p.parent} does not exist")
    return p



def open_timeline(path) -> "Timeline | None":
    """A fresh :class:`Timeline` for a command's ``--timeline path`` after
    :func:`check_timeline_path` (so a bad path fails before the run), or ``None`` without one."""
    if path is None:
        return None
    check_timeline_path(path)
    return Timeline()

class _Track:
    def __init__(self, process: str, name: str, exclusive: bool, order: int):
        self.process, self.name, self.exclusive, self.order = process, name, exclusive, order
        self.slices = []           # (start_us, dur_us, name, args)


class Timeline:
    """Slices and counters on named tracks; see the module docstring.

    ``unit_s``: seconds per time unit of every ``start`` / ``dur`` / ``ts`` given;
    ``metadata``: JSON-able facts about the run (written under ``"metadata"``).
    """

    def __init__(self, unit_s: float = 1.0, metadata: dict | None = None):
        if not isinstance(unit_s, (int, float)) or not unit_s > 0:
            raise ValueError(f"unit_s must be a positive number of seconds, got {unit_s!r}")
        self.unit_us = float(unit_s) * 1e6
        self.metadata = dict(metadata or {})
        self._tracks = {}          # (process, name) -> _Track
        self._processes = []       # process names in order of first use
        self._counters = []        # (process, name, ts_us, {series: value})

    # ---- recording -------------------------------------------------------------------------
    def track(self, process: str, name: str, *, exclusive: bool = True) -> "_Track":
        """The track ``name`` of ``process``, made on first use (tracks are shown in this order)."""
        key = (process, name)
        t = self._tracks.get(key)
        if t is None:
            if process not in self._processes:
                self._processes.append(process)
            t = self._tracks[key] = _Track(process, name, exclusive, len(self._tracks))
        elif t.exclusive != exclusive:
            raise ValueError(f"track {process}/{name} was made with exclusive={t.exclusive}")
        return t

    def slice(self, process: str, track: str, name: str, start: float, dur: float,
              args: dict | None = None, *, exclusive: bool = True) -> float:
        """Record ``name`` busy on ``track`` from ``start`` for ``dur``; returns the end.
        A zero duration records nothing (the device did no such work)."""
        if not (math.isfinite(start) and math.isfinite(dur)) or dur < 0:
            raise ValueError(f"slice {name!r} on {process}/{track}: start {start!r} and "
                             f"duration {dur!r} must be finite, the duration >= 0")
        t = self.track(process, track, exclusive=exclusive)
        if dur > 0:
            t.slices.append((start * self.unit_us, dur * self.unit_us, name, dict(args or {})))
        return start + dur

    def counter(self, process: str, name: str, ts: float, values: dict) -> None:
        """Counter ``name`` of ``process`` takes ``values`` (series -> number) at ``ts``."""
        if process not in self._processes:
            self._processes.append(process)
        self._counters.append((process, name, ts * self.unit_us,
                               {k: float(v) for k, v in values.items()}))

    # ---- output ----------------------------------------------------------------------------
    def events(self) -> list[dict]:
        """The ``traceEvents`` list; raises :class:`TimelineOverlap` if an exclusive track's
        slices overlap."""
        pid = {p: i + 1 for i, p in enumerate(self._processes)}
        out = [{"ph": "M", "pid": pid[p], "tid": 0, "ts": 0, "name": "process_name",
                "args": {"name": p}} for p in self._processes]
        out += [{"ph": "M", "pid": pid[p], "tid": 0, "ts": 0, "name": "process_sort_index",
                 "args": {"sort_index": pid[p]}} for p in self._processes]
        tid = {p: 1 for p in self._processes}
        for t in sorted(self._tracks.values(), key=lambda t: t.order):
            lanes = self._lanes(t)
            for k, lane in enumerate(lanes):
                name = t.name if k == 0 else f"{t.name} #{k + 1}"
                n = tid[t.process]
                tid[t.process] += 1
                out.append({"ph": "M", "pid": pid[t.process], "tid": n, "ts": 0,
                            "name": "thread_name", "args": {"name": name}})
                out.append({"ph": "M", "pid": pid[t.process], "tid": n, "ts": 0,
                            "name": "thread_sort_index", "args": {"sort_index": n}})
                out += [{"ph": "X", "pid": pid[t.process], "tid": n, "ts": s, "dur": d,
                         "name": nm, "args": a} for s, d, nm, a in lane]
        out += [{"ph": "C", "pid": pid[p], "tid": 0, "ts": ts, "name": name, "args": v}
                for p, name, ts, v in self._counters]
        return out

    @staticmethod
    def _lanes(t: _Track) -> list[list]:
        slices = sorted(t.slices, key=lambda s: (s[0], s[1]))
        lanes, ends = [[]], [-math.inf]
        for s in slices:
            for k, end in enumerate(ends):
                if s[0] >= end - TIME_EPS_US:
                    break
            else:
                if t.exclusive:
                    prev = lanes[0][-1]
                    raise TimelineOverlap(
                        f"track {t.process}/{t.name}: slice {s[2]!r} at {s[0]:.6f} us overlaps "
                        f"{prev[2]!r} ({prev[0]:.6f} us + {prev[1]:.6f} us) on a device that "
                        "cannot overlap work")
                lanes.append([])
                ends.append(-math.inf)
                k = len(lanes) - 1
            lanes[k].append(s)
            ends[k] = s[0] + s[1]
        return lanes

    def as_dict(self) -> dict:
        return {"traceEvents": self.events(), "displayTimeUnit": "ns", "metadata": self.metadata}

    def write(self, path) -> Path:
        """Write the JSON file (``path``'s folder must exist); returns its path."""
        p = check_timeline_path(path)
        doc = self.as_dict()
        with open(p, "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        return p


class TimelineFile:
    """A timeline read back from its JSON (:func:`read_timeline`): ``tracks`` maps
    ``(process, track)`` to its slices ``(ts_us, dur_us, name, args)`` in time order,
    ``counters`` maps ``(process, counter)`` to ``(ts_us, {series: value})`` in time order,
    ``metadata`` is the file's metadata."""

    def __init__(self, tracks: dict, counters: dict, metadata: dict):
        self.tracks, self.counters, self.metadata = tracks, counters, metadata

    def track_names(self, process: str | None = None) -> list[str]:
        return [t for p, t in self.tracks if process is None or p == process]

    def overlaps(self, process: str, track: str) -> list[tuple]:
        """Pairs of consecutive slices of the track that overlap (by more than float rounding)."""
        s = self.tracks[(process, track)]
        return [(a, b) for a, b in zip(s, s[1:]) if b[0] < a[0] + a[1] - TIME_EPS_US]


def read_timeline(path) -> TimelineFile:
    """Read a timeline written by :meth:`Timeline.write` (or any trace of the same format),
    checking its structure: ``ValueError`` naming the first event without ``ph``/``pid``/
    ``tid``/``ts``, a slice with a negative or missing ``dur``, or an event on a track or
    process no ``"M"`` event names."""
    with open(path) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise ValueError(f"{path}: not a JSON object with a traceEvents list")
    events = doc["traceEvents"]
    for i, e in enumerate(events):
        missing = [k for k in ("ph", "pid", "tid", "ts", "name") if k not in e]
        if missing:
            raise ValueError(f"{path}: event {i} has no {', '.join(missing)}: {e}")
        if e["ph"] == "X" and not (isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0):
            raise ValueError(f"{path}: slice {i} ({e['name']!r}) has duration {e.get('dur')!r}")
    procs = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
               if e["ph"] == "M" and e["name"] == "thread_name"}
    tracks, counters = {}, {}
    for i, e in enumerate(events):
        if e["ph"] == "M":
            continue
        if e["pid"] not in procs:
            raise ValueError(f"{path}: event {i} ({e['name']!r}) in process {e['pid']}, "
                             "which no process_name event names")
        if e["ph"] == "X":
            key = (e["pid"], e["tid"])
            if key not in threads:
                raise ValueError(f"{path}: slice {i} ({e['name']!r}) on track {key}, which no "
                                 "thread_name event names")
            tracks.setdefault((procs[e["pid"]], threads[key]), []).append(
                (e["ts"], e["dur"], e["name"], e.get("args", {})))
        elif e["ph"] == "C":
            counters.setdefault((procs[e["pid"]], e["name"]), []).append((e["ts"], e["args"]))
    for key in threads:
        tracks.setdefault((procs[key[0]], threads[key]), [])
    for v in tracks.values():
        v.sort(key=lambda s: (s[0], s[1]))
    for v in counters.values():
        v.sort(key=lambda c: c[0])
    return TimelineFile(tracks, counters, doc.get("metadata", {}))
