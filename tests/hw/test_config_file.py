"""The configuration loader (``hw/config_file.py``): its rules on a small schema of its own.

Each rejection is one line naming the file and the (dotted) key; a valid file gives exactly
the values it holds (ints become floats only where the schema says float), and a value's
source and range are kept when asked for."""

import dataclasses
import math

import pytest

from ndpdimm.hw import config_file
from ndpdimm.hw.config_file import ConfigError, Sourced


@dataclasses.dataclass(frozen=True)
class Link:
    name: str
    lanes: int
    gbs: float


@dataclasses.dataclass(frozen=True)
class Box:
    name: str                       # given, not in the file
    label: str
    fast: bool
    watts: float
    phases: tuple[float, ...]
    link: Link

    def __post_init__(self):
        if self.watts > 1000:
            raise ValueError(f"watts must be at most 1000, got {self.watts!r}")


GOOD = '''\
label = "a box"
fast = true
watts = { value = 60, source = "datasheet, table 2", note = "board power" }
phases = { value = [1, 2.5], source = "assumption: two phases" }

[link]
name = "PCIe"
lanes = { value = 16, source = "spec", range = { low = 8, high = 16, source = "x8 to x16" } }
gbs = { value = 25.0, source = "measured" }
'''


def _load(tmp_path, text, **kw):
    path = tmp_path / "box.toml"
    path.write_text(text)
    return config_file.load(path, Box, given={"name": "b"}, **kw)


def test_a_valid_file_gives_its_values_and_sources(tmp_path):
    sources = {}
    box = _load(tmp_path, GOOD, sources=sources)
    assert box == Box("b", "a box", True, 60.0, (1.0, 2.5), Link("PCIe", 16, 25.0))
    assert isinstance(box.watts, float) and isinstance(box.link.lanes, int)
    assert set(sources) == {"watts", "phases", "link.lanes", "link.gbs"}
    assert sources["watts"] == Sourced(60, "datasheet, table 2", note="board power")
    assert sources["link.lanes"] == Sourced(16, "spec", 8, 16, "x8 to x16")
    # strings and booleans may carry a source too
    assert _load(tmp_path, GOOD.replace('label = "a box"',
                                        'label = { value = "a box", source = "s" }')) == box


@pytest.mark.parametrize("old, new, message", [
    # a number without its source, written three ways
    ('watts = { value = 60, source = "datasheet, table 2", note = "board power" }', "watts = 60",
     'watts = 60 has no source: write it as { value = 60, source = "..." }'),
    ('gbs = { value = 25.0, source = "measured" }', "gbs = { value = 25.0 }",
     "link.gbs has no source"),
    ('source = "measured"', 'source = "  "', "link.gbs has no source"),
    ('phases = { value = [1, 2.5], source = "assumption: two phases" }', "phases = [1, 2.5]",
     "phases = [1, 2.5] has no source"),
    # not finite, wherever it stands
    ("value = 25.0", "value = nan", "link.gbs is nan: numbers must be finite"),
    ("value = 60", "value = inf", "watts is inf: numbers must be finite"),
    ("value = [1, 2.5]", "value = [1, -inf]", "phases[1] is -inf: numbers must be finite"),
    ('watts = { value = 60, source = "datasheet, table 2", note = "board power" }', "watts = nan",
     "watts is nan: numbers must be finite"),
    ("low = 8", "low = nan", "link.lanes.range.low is nan"),
    # keys
    ('fast = true\n', "", "missing key fast"),
    ('gbs = { value = 25.0, source = "measured" }\n', "", "missing key link.gbs"),
    ('fast = true\n', "fast = true\ncolour = \"red\"\n", "unknown key colour (the keys of the file "
                                                          "are label, fast, watts, phases, link)"),
    ('name = "PCIe"', 'name = "PCIe"\nspeed = "x"', "unknown key link.speed (the keys of [link]"),
    ('[link]', '[links]', "missing key link; unknown key links"),
    ('label = "a box"', 'label = "a box"\nname = "c"', "unknown key name"),   # given, not a key
    ("note = ", "nite = ", "watts has unknown key nite"),
    # types
    ("value = 16,", "value = 16.0,", "link.lanes must be an int, got 16.0"),
    ("value = 16,", "value = true,", "link.lanes must be an int, got True"),
    ('fast = true', 'fast = "yes"', "fast must be a bool, got 'yes'"),
    ('fast = true', 'fast = 1', "fast must be a bool, got 1"),
    ('label = "a box"', 'label = 3', "label must be a str, got 3"),
    ("value = [1, 2.5]", 'value = [1, "2"]', "phases[1] must be a float, got '2'"),
    ("value = [1, 2.5]", "value = 1", "phases must be an array, got 1"),
    (GOOD[GOOD.index("[link]"):], 'link = { value = 1, source = "s" }\n', "link must be a table"),
    ("gbs = { value = 25.0,", 'gbs = { valeu = 25.0,', "link.gbs must be a float or"),
    # ranges
    ("low = 8, high = 16", "low = 20, high = 30", "link.lanes = 16 lies outside its range [20, 30]"),
    ("low = 8, high = 16", "low = 16, high = 8", "link.lanes.range low=16 high=8"),
    ('high = 16, source = "x8 to x16"', "high = 16", "link.lanes.range needs exactly low, high, "
                                                     "source (missing: source"),
    ('source = "x8 to x16"', 'source = ""', "link.lanes.range has no source"),
    # the schema's own check, reported for its table
    ("value = 60,", "value = 6000,", "the file: watts must be at most 1000, got 6000.0"),
    # not TOML
    ("fast = true", "fast = = true", "not valid TOML"),
])
def test_each_rejection_names_the_file_and_the_key(tmp_path, old, new, message):
    assert old in GOOD
    with pytest.raises(ConfigError) as e:
        _load(tmp_path, GOOD.replace(old, new, 1))
    text = str(e.value)
    assert text.startswith(str(tmp_path / "box.toml")) and message in text, text
    assert "\n" not in text and isinstance(e.value, ValueError)


def test_missing_file_and_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="nope.toml: no such file"):
        config_file.load(tmp_path / "nope.toml", Box)
    with pytest.raises(ConfigError, match="cannot read it"):
        config_file.read(tmp_path)


def test_unwrap_applies_the_rules_to_every_key(tmp_path):
    doc = {"name": "s", "flag": False, "grid": {"value": {"value": [1, 2], "source": "s"},
                                                "mode": ["a", "b"]},
           "points": [{"dimms": {"value": 8, "source": "t", "range": {"low": 4, "high": 16,
                                                                     "source": "r"}}}]}
    sources = {}
    assert config_file.unwrap(doc, "f.toml", sources=sources) == {
        "name": "s", "flag": False, "grid": {"value": [1, 2], "mode": ["a", "b"]},
        "points": [{"dimms": 8}]}
    assert sources["points[0].dimms"] == Sourced(8, "t", 4, 16, "r")
    for bad, message in (({"a": {"b": 3}}, "f.toml: a.b = 3 has no source"),
                         ({"a": [1.5]}, "f.toml: a = [1.5] has no source"),
                         ({"a": {"value": math.nan, "source": "s"}}, "f.toml: a is nan"),
                         ({"p": [{"x": math.inf}]}, "f.toml: p[0].x is inf"),
                         ({3: 1}, "f.toml: 3 = 1 has no source")):          # YAML: any key
        with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")):
            config_file.unwrap(bad, "f.toml")


def test_dumps_writes_what_read_gives_back(tmp_path):
    doc = {"name": "n", "x": {"value": 1.5, "source": "s \"quoted\""},
           "t": {"a": {"value": [1, 2], "source": "s"}, "b": True, "c": "text",
                 "d": {"value": 0.1, "source": "s", "range": {"low": 0.0, "high": 1.0,
                                                                "source": "r"}}}}
    path = tmp_path / "d.toml"
    path.write_text(config_file.dumps(doc))
    assert config_file.read(path) == doc
    path.write_text(config_file.dumps({"t": {"v": {"value": math.nan, "source": "s"}}}))
    with pytest.raises(ConfigError, match="t.v is nan"):
        config_file.unwrap(config_file.read(path), path)


def test_packaged_folders_and_built_in_names(tmp_path):
    hw_configs = config_file.package_folder("ndpdimm.hw", "configs")
    assert (hw_configs / "ddr4-3200.toml").is_file()
    sw_models = config_file.package_folder("ndpdimm.sw", "configs", "models")
    assert "llama2-70b" in config_file.builtin_names(sw_models)
    assert config_file.find(sw_models, "llama2-70b", "model") == sw_models / "llama2-70b.toml"
    assert config_file.find(sw_models, tmp_path / "x.toml", "model") == tmp_path / "x.toml"
    with pytest.raises(ConfigError, match="unknown model 'gpt-5': built in are .*llama2-70b.* "
                                          r"\(or give a path to a .toml file\)"):
        config_file.find(sw_models, "gpt-5", "model")


def test_non_finite_names_the_first_bad_number():
    assert config_file.non_finite({"a": [1.0, {"b": 2}], "c": "nan"}) is None
    key, value = config_file.non_finite({"a": [1.0, {"b": math.inf}]})
    assert key == "a[1].b" and value == math.inf
    assert config_file.non_finite(math.nan, "x")[0] == "x"
