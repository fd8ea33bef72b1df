"""The Chrome-trace/Perfetto writer (``cosim/timeline.py``): the format Perfetto opens, exclusive
tracks refusing overlaps, shared tracks spread over lanes, counters, read back, bad input."""

import json

import pytest

from ndpdimm.cosim.timeline import Timeline, TimelineOverlap, check_timeline_path, read_timeline


def test_format_and_units(tmp_path):
    tl = Timeline(unit_s=1e-9, metadata={"what": "test"})      # times in ns (cycles at 1 GHz)
    tl.slice("DIMM 0", "GEMV engine", "GEMV", 1000, 2500, {"rows": 64})
    tl.slice("DIMM 0", "DMA", "DMA", 0, 1000)
    tl.slice("DIMM 0", "DMA", "nothing", 3500, 0)                # zero: the device did nothing
    tl.counter("DIMM 0", "queue", 500, {"depth": 3})
    path = tl.write(tmp_path / "t.json")
    doc = json.loads(path.read_text())
    assert doc["displayTimeUnit"] == "ns" and doc["metadata"] == {"what": "test"}
    ev = doc["traceEvents"]
    assert all({"ph", "pid", "tid", "ts", "name"} <= set(e) for e in ev)
    names = {(e["name"], e["args"]["name"]) for e in ev if e["ph"] == "M" and "name" in e["args"]}
    assert names == {("process_name", "DIMM 0"), ("thread_name", "GEMV engine"),
                     ("thread_name", "DMA")}
    gemv = next(e for e in ev if e["ph"] == "X" and e["name"] == "GEMV")
    assert (gemv["ts"], gemv["dur"], gemv["args"]) == (pytest.approx(1.0), pytest.approx(2.5),
                                                       {"rows": 64})
    assert [e["name"] for e in ev if e["ph"] == "X"] == ["GEMV", "DMA"]
    assert next(e for e in ev if e["ph"] == "C")["args"] == {"depth": 3.0}
    f = read_timeline(path)
    assert f.tracks[("DIMM 0", "DMA")] == [(0.0, 1.0, "DMA", {})]
    assert f.counters[("DIMM 0", "queue")] == [(0.5, {"depth": 3.0})]


def test_exclusive_tracks_refuse_overlaps_shared_ones_use_lanes(tmp_path):
    tl = Timeline()
    tl.slice("GPU", "compute", "a", 0.0, 2.0)
    tl.slice("GPU", "compute", "b", 1.0, 2.0)
    with pytest.raises(TimelineOverlap, match="track GPU/compute: slice 'b' .* overlaps 'a'"):
        tl.write(tmp_path / "t.json")
    assert not (tmp_path / "t.json").exists()
    tl = Timeline()
    for i, (s, d) in enumerate([(0.0, 2.0), (1.0, 2.0), (2.0, 1.0), (1.5, 0.1)]):
        tl.slice("node", "PCIe", f"copy {i}", s, d, exclusive=False)
    tl.slice("node", "compute", "end to end", 0.0, 1.0)
    tl.slice("node", "compute", "next", 1.0, 1.0)                # touching is not overlapping
    f = read_timeline(tl.write(tmp_path / "t.json"))
    lanes = {t: [s[2] for s in f.tracks[("node", t)]] for t in f.track_names("node")}
    assert lanes == {"PCIe": ["copy 0", "copy 2"], "PCIe #2": ["copy 1"], "PCIe #3": ["copy 3"],
                     "compute": ["end to end", "next"]}
    assert all(not f.overlaps("node", t) for t in lanes)


@pytest.mark.parametrize("start,dur", [(0.0, -1.0), (float("nan"), 1.0), (0.0, float("inf"))])
def test_bad_slices_are_refused(start, dur):
    tl = Timeline()
    with pytest.raises(ValueError, match="must be finite, the duration >= 0"):
        tl.slice("p", "t", "x", start, dur)
    assert tl.events() == []


def test_bad_paths_and_units(tmp_path):
    with pytest.raises(ValueError, match="is a directory"):
        check_timeline_path(tmp_path)
    with pytest.raises(ValueError, match="folder .*nowhere does not exist"):
        Timeline().write(tmp_path / "nowhere" / "t.json")
    with pytest.raises(ValueError, match="unit_s must be a positive number"):
        Timeline(unit_s=0)
    tl = Timeline()
    tl.track("p", "t")
    with pytest.raises(ValueError, match="made with exclusive=True"):
        tl.slice("p", "t", "x", 0.0, 1.0, exclusive=False)


def test_reader_names_a_broken_event(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"traceEvents": [
        {"ph": "M", "pid": 1, "tid": 0, "ts": 0, "name": "process_name", "args": {"name": "p"}},
        {"ph": "X", "pid": 1, "tid": 1, "ts": 0, "name": "x", "dur": 1}]}))
    with pytest.raises(ValueError, match="slice 1 \\('x'\\) on track \\(1, 1\\), which no thread_name"):
        read_timeline(path)
    path.write_text(json.dumps({"traceEvents": [{"ph": "X", "pid": 1, "ts": 0, "name": "x"}]}))
    with pytest.raises(ValueError, match="event 0 has no tid"):
        read_timeline(path)
