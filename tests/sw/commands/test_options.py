"""Options made from a configuration's fields (``sw/commands/options.py``): each has its field's
name, default, help and choices, a bad value is refused naming the option, and the parsed
values make the configuration (the defaults make the default configuration)."""

import argparse
import dataclasses

import pytest

from ndpdimm.sw.commands import command
from ndpdimm.sw.commands.options import add_config_options, config_from_args
from ndpdimm.sw.scenarios.catalog import available_names
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.rapid.config import RapidConfig
from ndpdimm.sw.scenarios.trimoe.config import TriMoeConfig

SCENARIOS = [("hermes", HermesConfig), ("trimoe", TriMoeConfig), ("rapid", RapidConfig)]


def _parser(name):
    parser = argparse.ArgumentParser(prog=f"ndpdimm {name}")
    command(name).add_arguments(parser)
    return parser


@pytest.mark.parametrize("name,cls", SCENARIOS)
def test_an_option_made_from_a_field_has_its_default_and_help(name, cls):
    fields = {f.name: f for f in dataclasses.fields(cls)}
    actions = {a.dest: a for a in _parser(name)._actions}
    for field_name in command(name).FIELDS:
        f, action = fields[field_name], actions[field_name]
        help_text = f.metadata.get("help")
        if "builtins" in f.metadata:              # the help ends with the catalogue's names
            help_text += f"; built in: {', '.join(available_names(f.metadata['builtins']))}"
        assert action.help == help_text, field_name
        assert action.choices == f.metadata.get("choices"), field_name
        expected = f.metadata.get("option_default", None if f.type is tuple else f.default)
        assert action.default == expected, field_name
        assert action.option_strings == [f.metadata.get("option") or "--" + (
            "no-" if action.default is True else "") + field_name.replace("_", "-")]


@pytest.mark.parametrize("name,cls", SCENARIOS)
def test_the_default_command_line_makes_the_default_configuration(name, cls):
    args = _parser(name).parse_args([])
    assert config_from_args(cls, args, command(name).FIELDS) == cls()


def test_values_reach_the_configuration():
    hermes = _parser("hermes").parse_args(["--batch", "4", "--cold-int8", "--hot-share", "0.1",
                                           "--units", "16", "--act-lanes", "16", "--backend", "rtl"])
    cfg = config_from_args(HermesConfig, hermes, command("hermes").FIELDS)
    assert (cfg.batch, cfg.cold_dtype, cfg.hot_share, cfg.units, cfg.act_lanes, cfg.backend) == \
        (4, "int8", 0.1, 16, 16, "rtl")
    trimoe = _parser("trimoe").parse_args(["--systems", "gpu_only,trimoe", "--link-ber", "1e-6"])
    cfg = config_from_args(TriMoeConfig, trimoe, command("trimoe").FIELDS)
    assert cfg.systems == ("gpu_only", "trimoe") and cfg.link_ber == 1e-6
    rapid = _parser("rapid").parse_args(["--no-ndp", "--duration", "30", "--ttft-slo", "2",
                                         "--tpot-slo", "0.1", "--rate-scale", "1.5"])
    cfg = config_from_args(RapidConfig, rapid, command("rapid").FIELDS)
    assert (cfg.ndp, cfg.duration_s, cfg.ttft_slo_s, cfg.tpot_slo_s, cfg.rate_scale) == \
        (False, 30.0, 2.0, 0.1, 1.5)


@dataclasses.dataclass(frozen=True)
class Example:
    count: int = dataclasses.field(default=3, metadata={"positive": True, "help": "how many"})
    ratio: float | None = dataclasses.field(default=None, metadata={"help": "a ratio"})
    colour: str = dataclasses.field(default="red", metadata={"choices": ("red", "blue")})
    seconds_s: float = dataclasses.field(default=1.0, metadata={
        "option": "--seconds", "positive": True, "option_default": None, "metavar": "S"})
    fast: bool = False
    checked: bool = True
    names: tuple = ("a", "b")
    precision: str = dataclasses.field(default="fp16", metadata={"option": "--int8", "const": "int8"})
    hidden: int = 7


def test_each_kind_of_field_gives_its_option(capsys):
    parser = argparse.ArgumentParser(prog="example")
    names = ("count", "ratio", "colour", "seconds_s", "fast", "checked", "names", "precision")
    add_config_options(parser, Example, names)
    assert [a.option_strings[0] for a in parser._actions[1:]] == [
        "--count", "--ratio", "--colour", "--seconds", "--fast", "--no-checked", "--names", "--int8"]
    assert " ".join(parser.format_usage().split()) == (
        "usage: example [-h] [--count COUNT] [--ratio RATIO] [--colour {red,blue}] [--seconds S] "
        "[--fast] [--no-checked] [--names NAMES] [--int8]")
    assert config_from_args(Example, parser.parse_args([]), names) == Example()
    args = parser.parse_args(["--count", "5", "--ratio", "0.5", "--colour", "blue", "--seconds",
                              "2", "--fast", "--no-checked", "--names", "x,y,z", "--int8"])
    assert config_from_args(Example, args, names, hidden=8) == Example(
        5, 0.5, "blue", 2.0, True, False, ("x", "y", "z"), "int8", 8)
    for bad, message in ((["--count", "0"], "argument --count: expected a positive integer, got 0"),
                         (["--seconds", "0"], "argument --seconds: expected a positive number, got '0'"),
                         (["--colour", "green"], "argument --colour: invalid choice: 'green'")):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(bad)
        assert e.value.code == 2 and message in capsys.readouterr().err.splitlines()[-1]
