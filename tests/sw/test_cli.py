"""The ndpdimm command line: bad arguments fail early with a clear message; verilog works."""

import subprocess
import sys

import pytest

from ndpdimm.sw.cli import main


@pytest.mark.parametrize("argv,message", [
    (["demo", "--units", "0"], "positive integer"),
    (["demo", "--batch", "x"], "positive integer"),
    (["bench", "--k", "-3"], "positive integer"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_bad_demo_value_is_reported_before_any_work(capsys):
    assert main(["demo", "--threshold", "-1"]) == 2
    assert "threshold must be >= 0" in capsys.readouterr().err


def test_bad_demo_model_is_reported_before_any_work(capsys):
    assert main(["demo", "--model", "gpt-5"]) == 2
    assert "unknown model 'gpt-5'" in capsys.readouterr().err


def test_verilog_subcommand(tmp_path):
    out = tmp_path / "engine.v"
    assert main(["verilog", "--units", "2", "--max-batch", "2", "-o", str(out)]) == 0
    text = out.read_text()
    assert "module gemv_engine(" in text and "module gemv_unit(" in text
    assert text.count("\n  gemv_unit unit") == 2          # one shared module, two instances


def test_console_script_installed():
    proc = subprocess.run([sys.executable, "-m", "ndpdimm.sw.cli", "--help"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and "demo" in proc.stdout


@pytest.mark.parametrize("command", [["hermes"], ["trimoe"], ["rapid"], ["run-layer"]])
@pytest.mark.parametrize("bad", ["missing_folder/timeline.json", "."])
def test_bad_timeline_path_fails_before_the_run(command, bad, tmp_path, capsys):
    """--timeline into a folder that does not exist, or onto a folder: exit 2 naming the path,
    before any work (no output folder made, nothing written)."""
    path = tmp_path / bad
    out_dir = tmp_path / "out"
    argv = command + ["--timeline", str(path)] + (["--out-dir", str(out_dir)]
                                                   if command != ["run-layer"] else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"--timeline {path}" in err
    assert ("does not exist" if bad != "." else "is a directory") in err
    assert not out_dir.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


def test_timeline_options_that_do_not_combine(tmp_path, capsys):
    t = str(tmp_path / "t.json")
    assert main(["trimoe", "--check", "--timeline", t]) == 2
    assert "--timeline records the scenario run, not --check" in capsys.readouterr().err
    assert main(["hermes", "--sweep", "batch", "--timeline", t, "--out-dir", str(tmp_path)]) == 2
    assert "does not combine with --sweep" in capsys.readouterr().err
    assert main(["rapid", "--timeline-system", "dynamic", "--duration", "5",
                 "--out-dir", str(tmp_path / "r")]) == 2
    assert "--timeline-system needs --timeline" in capsys.readouterr().err
    assert not (tmp_path / "t.json").exists()


def test_run_layer_timeline_on_the_model_backend(tmp_path, capsys):
    from ndpdimm.cosim.timeline import read_timeline
    out = tmp_path / "layer.json"
    assert main(["run-layer", "--layer", "attention", "--units", "16", "--no-progress",
                 "--timeline", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    f = read_timeline(out)
    proc = "DIMM (model backend)"
    assert {"GEMV engine", "activation unit", "DMA"} <= {t for t in f.track_names(proc)
                                                        if f.tracks[(proc, t)]}
    assert "SOFTMAX" in {s[3]["opcode"] for s in f.tracks[(proc, "activation unit")]}
