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
