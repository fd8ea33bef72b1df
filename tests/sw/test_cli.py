"""The ndpdimm command line (``sw/cli.py`` over the registry ``sw/commands/``): every command is
registered; bad arguments fail early with a clear message; verilog works."""

import argparse
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


def test_the_registry_lists_every_command():
    """Every command of the registry is a sub-command with its help, a module with
    ``add_arguments`` and ``run``, and a line of docs/commands.md; nothing else is one."""
    from pathlib import Path

    from ndpdimm.sw.cli import build_parser
    from ndpdimm.sw.commands import COMMANDS, command
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert list(sub.choices) == list(COMMANDS)
    helps = {a.dest: a.help for a in sub._choices_actions}
    docs = (Path(__file__).resolve().parents[2] / "docs" / "commands.md").read_text()
    for name in COMMANDS:
        module = command(name)
        assert module.__name__ == COMMANDS[name]
        assert helps[name] == module.HELP and module.HELP
        assert callable(module.add_arguments) and callable(module.run)
        assert f"| `ndpdimm {name}" in docs, f"docs/commands.md has no line for ndpdimm {name}"


@pytest.mark.parametrize("argv", [["--help"], ["cache", "--help"], ["hermes", "--help"],
                                  ["trimoe", "--help"], ["rapid", "--help"]])
def test_parsing_imports_no_torch_and_only_the_command_run(argv):
    """Only the command run declares its options (a scenario's from its configuration, which
    imports no torch): ``ndpdimm --help`` imports no configuration at all."""
    code = ("import sys\nfrom ndpdimm.sw.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit as e:\n    assert e.code == 0, e.code\n"
            "print(sorted(m for m in sys.modules if m == 'torch' or m.endswith('.config')))")
    proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    loaded = proc.stdout.strip().splitlines()[-1]
    name = argv[0] if argv[0] in ("hermes", "trimoe", "rapid") else None
    assert loaded == (f"['ndpdimm.sw.scenarios.{name}.config']" if name else "[]")


@pytest.mark.parametrize("argv,message", [
    (["hermes", "--batch", "17"], "batch must be an int in [1, 16], got 17"),
    (["hermes", "--values", "1,2"], "--values needs --sweep"),
    (["trimoe", "--systems", "gpu_only,tpu"], "systems must be a non-empty subset"),
    (["trimoe", "--alpha", "1.5"], "alpha must be in (0, 1], got 1.5"),
    (["rapid", "--trace", "t.csv", "--rate-scale", "2"], "--rate-scale applies to generated traces"),
    (["regress", "--scheduler", "localhost:8786"], "--scheduler must be an address like tcp://"),
    (["sweep"], "give a sweep file (or --list-jobs)"),
    (["sweep", "x.toml", "--scheduler", "tcp://h:1", "--in-process"], "exclude each other"),
])
def test_a_bad_value_a_command_refuses_exits_2_with_one_line(argv, message, capsys):
    """A ``ValueError`` of a command (or of the configuration its options make): exit status 2
    and one line, ``ndpdimm <command>: error: <reason>``, before any work."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith(f"ndpdimm {argv[0]}: error: ")
    assert message in captured.err


@pytest.mark.parametrize("argv,message", [
    (["hermes", "--units", "0"], "argument --units: expected a positive integer, got 0"),
    (["trimoe", "--backend", "fpga"], "argument --backend: invalid choice: 'fpga' (choose from 'model', 'rtl')"),
    (["rapid", "--duration", "-5"], "argument --duration: expected a positive number, got '-5'"),
    (["rapid", "--mode", "fast"], "argument --mode: invalid choice: 'fast' (choose from 'static', "
     "'dynamic-power', 'dynamic', 'all')"),
    (["rapid", "--tpot-slo", "inf"], "argument --tpot-slo: expected a positive number, got 'inf'"),
    (["hermes", "--skew", "high"], "argument --skew: expected a number, got 'high'"),
    (["hermes", "--skew", "nan"], "argument --skew: expected a finite number, got 'nan'"),
])
def test_a_bad_option_value_exits_2_naming_the_option(argv, message, capsys):
    """argparse refuses a bad value of an option made from a configuration field: exit status 2
    and one line naming the option (no usage lines: ``--help`` has them)."""
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == f"ndpdimm {argv[0]}: error: {message} (see ndpdimm {argv[0]} --help)\n"


@pytest.mark.parametrize("command, option, kind", [
    ("hermes", "--model", "models"), ("hermes", "--hardware", "hardware"),
    ("trimoe", "--model", "moe_models"), ("trimoe", "--hardware", "trimoe_hardware"),
    ("rapid", "--model", "serving_models"), ("rapid", "--node", "rapid"),
    ("rapid", "--workload", "rapid_workloads"), ("demo", "--model", "models")])
def test_help_lists_the_built_in_names_not_a_source_path(command, option, kind, capsys):
    """An installed user has no ``sw/configs/`` to look in: ``--help`` names every built-in
    file of the catalogue an option reads."""
    from ndpdimm.sw.scenarios.catalog import available_names
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())           # argparse wraps the help
    assert "sw/configs" not in text
    start = text.index(f"{option} {option[2:].upper()} ")
    entry = text[start:text.index(" --", start + len(option))]
    names = available_names(kind)
    assert names and f"built in: {', '.join(names)}" in entry
