"""``ndpdimm reproduce``: its choices, and the errors it gives before anything runs."""

import pytest

from ndpdimm.sw import cli
from ndpdimm.sw.reproduce import PAPERS, ReproductionError, _import, load_paper


def test_cli_choices_are_the_papers():
    parser = cli.build_parser(declare=("reproduce",))
    for paper in (*PAPERS, "all"):
        assert parser.parse_args(["reproduce", paper]).paper == paper


def test_unknown_paper_is_an_error(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["reproduce", "powerinfer"])
    assert e.value.code == 2
    assert "invalid choice: 'powerinfer'" in capsys.readouterr().err
    with pytest.raises(ReproductionError, match="unknown paper 'powerinfer'"):
        load_paper("powerinfer")


def test_paper_module_not_in_the_checkout_is_named():
    with pytest.raises(ReproductionError, match="the future reproduction .* is not in this checkout"):
        _import("future", "ndpdimm.sw.reproduce.no_such_paper")


def test_out_that_is_a_file_fails_before_any_run(tmp_path, capsys):
    target = tmp_path / "taken"
    target.write_text("keep")
    with pytest.raises(SystemExit) as e:        # refused when the options are parsed
        cli.main(["reproduce", "all", "--out", str(target)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err == (f"ndpdimm reproduce: error: argument --out/--out-dir: {str(target)!r} is a file, "
                   "not a folder (see ndpdimm reproduce --help)\n")
    assert target.read_text() == "keep"
