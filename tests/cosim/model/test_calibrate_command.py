"""The ``ndpdimm calibrate`` command (``cosim/model/calibrate/command.py``, ``__main__.py``).

The held-out streams' provider lives in ``ndpdimm.sw``, which ``ndpdimm.cosim`` may not import:
the command finds it through the entry point group ``command.STREAMS_GROUP``. The installed
metadata holds that entry point only once ``pip install -e .`` has read ``pyproject.toml``, so
these tests check the declaration itself (it names the real provider, with the arguments the
command passes), the loader on an entry point of that declaration, the loader's error without
one, and ``run`` adding a provider's block to a copy of the committed small calibration.
"""

import argparse
import importlib
import importlib.metadata
import inspect
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.model.calibrate import command
from ndpdimm.cosim.model.perf import calibration_path

REPO = Path(__file__).resolve().parents[3]
SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
SMALL_ARGS = ["--units", "8", "--max-batch", "4", "--sram-size", "16384", "--sram-banks", "4"]


def _declared() -> dict:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project.get("entry-points", {}).get(command.STREAMS_GROUP, {})


def _args(argv):
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    return p.parse_args(argv)


def test_the_streams_entry_point_names_the_scenarios_provider():
    from ndpdimm.sw.scenarios.kernel_logs import calibration_streams
    declared = _declared()
    assert list(declared) == ["scenarios"], declared
    module, _, attr = declared["scenarios"].partition(":")
    provider = getattr(importlib.import_module(module), attr)
    assert provider is calibration_streams
    # the command calls provider(config, per_kind, seed, runner)
    assert list(inspect.signature(provider).parameters) == ["core", "per_kind", "seed", "runner"]


def test_streams_provider_loads_the_group_or_names_it(monkeypatch):
    from ndpdimm.sw.scenarios.kernel_logs import calibration_streams
    value = _declared()["scenarios"]
    eps = [importlib.metadata.EntryPoint("scenarios", value, command.STREAMS_GROUP)]
    asked = []

    def entry_points(group):
        asked.append(group)
        return eps

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)
    assert command.streams_provider() is calibration_streams
    eps.append(eps[0])                                  # the same one twice (two installs)
    assert command.streams_provider() is calibration_streams
    assert asked == [command.STREAMS_GROUP] * 2
    eps.append(importlib.metadata.EntryPoint("other", "os:getcwd", command.STREAMS_GROUP))
    with pytest.raises(ValueError, match="2 providers in entry point group 'ndpdimm.calibration_streams'"):
        command.streams_provider()
    eps.clear()
    with pytest.raises(ValueError, match="entry point group 'ndpdimm.calibration_streams'"):
        command.streams_provider()

    def given(*a):
        raise AssertionError("not called")

    assert command.streams_provider(given) is given     # an explicit provider needs no lookup


def test_run_adds_the_providers_streams_to_the_record(tmp_path, capsys):
    out = tmp_path / "small.json"
    shutil.copy(calibration_path(SMALL), out)
    before = json.loads(out.read_text())
    calls = []
    block = {"what": "streams", "per_kind": 2, "seed": 7, "streams": [],
             "summary": {"streams": 0, "failed": 0}}

    def provider(config, per_kind, seed, runner):
        calls.append((config, per_kind, seed, runner))
        return block

    def runner(fn, tasks, on_done):
        raise AssertionError("the provider was given the runner, not asked to run it")

    args = _args([*SMALL_ARGS, "--streams-only", "--streams", "2", "--stream-seed", "7",
                  "--out", str(out)])
    record = command.run(args, runner, streams=provider)
    assert calls == [(SMALL, 2, 7, runner)]
    after = json.loads(out.read_text())
    assert after == record and after["held_out_streams"] == block
    assert after["summary"].pop("held_out_streams") == block["summary"]
    del after["held_out_streams"]
    assert after == before                               # nothing else changed
    assert f"wrote {out}" in capsys.readouterr().out
    # without a runner the streams run on local processes, as many as --jobs
    command.run(_args([*SMALL_ARGS, "--streams-only", "--streams", "1", "--jobs", "1",
                       "--out", str(out)]), streams=provider)
    assert calls[-1][3].description == "1 local process(es)"


def test_options_are_checked_before_any_work(tmp_path):
    def provider(*a):
        raise AssertionError("no work expected")

    for argv, match in ((["--streams-only"], "--streams must be >= 1 with --streams-only"),
                        (["--streams", "-1"], "--streams must be"),
                        (["--streams-only", "--streams", "1", "--refit", "x.json"], "takes no --refit"),
                        (["--scheduler", "tcp://nowhere:1"], "run it as `ndpdimm calibrate`")):
        with pytest.raises(ValueError, match=match):
            command.run(_args(argv), streams=provider)
    missing = tmp_path / "none.json"
    with pytest.raises(ValueError, match="no calibration of"):
        command.run(_args(["--streams-only", "--streams", "1", "--out", str(missing)]),
                    streams=provider)
    assert list(tmp_path.iterdir()) == []


def test_python_m_runs_the_command_and_reports_option_errors():
    done = subprocess.run([sys.executable, "-m", "ndpdimm.cosim.model.calibrate", "--streams-only"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done
    assert "python -m ndpdimm.cosim.model.calibrate: error: --streams must be >= 1" in done.stderr
