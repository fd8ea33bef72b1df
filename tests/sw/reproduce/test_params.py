"""Parameter files: every value has a source, every range has one, nothing else gets through."""

import pytest

from ndpdimm.hw.config_file import ConfigError
from ndpdimm.sw.reproduce.core import ReproductionError
from ndpdimm.sw.reproduce.params import CONFIG_DIR, load_params, values

GOOD = """
[gpu.memory_gb]
value = 24
source = "RTX 4090 datasheet"

[gpu.pcie_gbps]
value = 25.0
source = "PCIe 4.0 x16"
range = { low = 20.0, high = 28.0, source = "measured copies" }
"""


def _load(tmp_path, text):
    path = tmp_path / "p.toml"
    path.write_text(text)
    return load_params(path)


def test_good_file_loads_with_dotted_names(tmp_path):
    params = _load(tmp_path, GOOD)
    assert set(params) == {"gpu.memory_gb", "gpu.pcie_gbps"}
    p = params["gpu.pcie_gbps"]
    assert (p.value, p.low, p.high, p.range_source) == (25.0, 20.0, 28.0, "measured copies")
    assert params["gpu.memory_gb"].low is None
    assert values(params, {"gpu.pcie_gbps": 20.0}) == {"gpu.memory_gb": 24, "gpu.pcie_gbps": 20.0}
    with pytest.raises(ReproductionError, match="gpu.pcie"):
        values(params, {"gpu.pcie": 1.0})


@pytest.mark.parametrize("text, name, message", [
    ('[tokens]\nvalue = 128\n', "tokens", "has no source"),
    ('[tokens]\nvalue = 128\nsource = "  "\n', "tokens", "has no source"),
    ('[run]\ntokens = 128\n', "run.tokens", "has no source"),
    ('[gpu.tflops]\nvalue = 82.6\n', "gpu.tflops", "has no source"),
    ('[a]\nvalue = 1\nsource = "s"\nsorce = "t"\n', "a", "unknown key"),
    ('[a]\nvalue = nan\nsource = "s"\n', "a", "is nan: numbers must be finite"),
    ('[a]\nvalue = [1.0, inf]\nsource = "s"\n', "a", r"a\[1\] is inf"),
    ('[a]\nvalue = 1\nsource = "s"\nrange = { low = -inf, high = 2, source = "r" }\n', "a",
     "a.range.low is -inf"),
    ('[run]\nname = "x"\n', "run.name", "has no source"),
    ('[a]\nvalue = 1\nsource = "s"\nrange = { low = 0, high = 2 }\n', "a", "missing: source"),
    ('[a]\nvalue = 1\nsource = "s"\nrange = { low = 0, high = 2, source = "" }\n', "a", "range has no source"),
    ('[a]\nvalue = 1\nsource = "s"\nrange = { low = 3, high = 2, source = "r" }\n', "a", "low <= high"),
    ('[a]\nvalue = 5\nsource = "s"\nrange = { low = 0, high = 2, source = "r" }\n', "a", "outside its range"),
    ('[a]\n', "a", "empty table"),
])
def test_parameter_without_source_or_with_bad_range_is_rejected(tmp_path, text, name, message):
    with pytest.raises(ConfigError, match=message) as e:
        _load(tmp_path, GOOD + text)
    assert f"p.toml: {name}" in str(e.value) and "\n" not in str(e.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_params(tmp_path / "none.toml")
    with pytest.raises(ConfigError, match="unknown reproduction parameter file 'nope'"):
        load_params("nope")
    with pytest.raises(ConfigError, match="not valid TOML"):
        _load(tmp_path, "[a\n")


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_shipped_parameter_files_load(path):
    """Every packaged parameter file has a source for each value and range."""
    assert load_params(path)
