"""Every shipped configuration file, through its own loader (``hw/config_file.py`` underneath):
each loads; with any one number's source removed, or any one number set to NaN, it is refused
with an error naming the file and the key; the command line turns such a file, a bad
``config.json`` or a NaN option into exit status 2 and one line."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from ndpdimm.hw import config_file
from ndpdimm.hw.config_file import ConfigError
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.sw.cli import main
from ndpdimm.sw.reproduce.params import load_params
from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, load_model
from ndpdimm.sw.scenarios.energy import load_energy
from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
from ndpdimm.sw.scenarios.rapid.catalog import load_node, load_serving_model
from ndpdimm.sw.scenarios.rapid.workload import load_workload
from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model, load_trimoe_hardware
from ndpdimm.sw.sweep.run import load_sweep

DRAM_DIR = config_file.package_folder("ndpdimm.hw", "configs")
#: each kind of configuration file: its folder and its loader
KINDS = {
    "dram": (DRAM_DIR, load_dram_config),
    "model": (CONFIG_DIR / "models", load_model),
    "moe_model": (CONFIG_DIR / "moe_models", load_moe_model),
    "serving_model": (CONFIG_DIR / "serving_models", load_serving_model),
    "hardware": (CONFIG_DIR / "hardware", load_hardware),
    "trimoe_hardware": (CONFIG_DIR / "trimoe_hardware", load_trimoe_hardware),
    "energy": (CONFIG_DIR / "energy", load_energy),
    "rapid_node": (CONFIG_DIR / "rapid", load_node),
    "rapid_workload": (CONFIG_DIR / "rapid_workloads", load_workload),
    "reproduce": (CONFIG_DIR / "reproduce", load_params),
    "sweep": (CONFIG_DIR / "sweeps", load_sweep),
}
FILES = [(kind, path) for kind, (folder, _) in KINDS.items() for path in sorted(folder.glob("*.toml"))]


def _numbers(path) -> list:
    """The dotted keys of every number (or array holding one) of a file, with their sources."""
    sources = {}
    config_file.unwrap(config_file.read(path), path, sources=sources)
    return [k for k, s in sources.items()
            if isinstance(s.value, (int, float)) and not isinstance(s.value, bool)
            or isinstance(s.value, list) and any(isinstance(x, (int, float)) for x in s.value)]


def _table(doc, key: str) -> dict:
    """The value-with-source table at the dotted key ``key`` (``a.b``, ``points[0].c``)."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", key):
        doc = doc[int(part[1:-1])] if part.startswith("[") else doc[part]
    return doc


def _edited(tmp_path, path, key, edit) -> Path:
    """A copy of ``path`` (same name) with ``edit`` applied to the table of ``key``."""
    doc = config_file.read(path)
    edit(_table(doc, key))
    out = tmp_path / path.name
    out.write_text(config_file.dumps(doc))
    return out


def _to_nan(table):
    if isinstance(table["value"], list):
        table["value"] = [math.nan] + table["value"][1:]
    else:
        table["value"] = math.nan


def test_there_is_a_file_of_every_kind_and_every_number_has_its_source():
    assert {kind for kind, _ in FILES} == set(KINDS)
    assert all(_numbers(path) for _, path in FILES)          # each file has numbers ...
    for _, path in FILES:                                     # ... and everything loads
        KINDS[_kind(path)][1](path)


def _kind(path) -> str:
    return next(kind for kind, p in FILES if p == path)


@pytest.mark.parametrize("kind, path", FILES, ids=[f"{k}-{p.stem}" for k, p in FILES])
def test_one_number_without_its_source_or_nan_is_refused_naming_file_and_key(tmp_path, kind, path):
    load = KINDS[kind][1]
    load(path)
    keys = _numbers(path)
    for key in keys:
        for what, edit in (("no source", lambda t: t.pop("source")), ("nan", _to_nan)):
            bad = _edited(tmp_path, path, key, edit)
            with pytest.raises(ConfigError) as e:
                load(bad)
            message = str(e.value)
            assert f"{bad}: {key}" in message and "\n" not in message, (what, key, message)
            assert ("has no source" if what == "no source" else "is nan") in message, message


def test_a_bare_number_is_refused_with_how_to_write_it(tmp_path):
    path = CONFIG_DIR / "hardware" / "hermes.toml"
    bad = tmp_path / "hermes.toml"
    bad.write_text(re.sub(r"(?m)^lanes = .*$", "lanes = 16", path.read_text()))
    with pytest.raises(ConfigError, match=re.escape(f"{bad}: pcie.lanes = 16 has no source: "
                                                    'write it as { value = 16, source = "..." }')):
        load_hardware(bad)


# ---- the command line: exit status 2 and one line --------------------------------------------

def _one_error_line(capsys, command) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith(f"ndpdimm {command}: error: "), err
    return err


def test_cli_refuses_a_hardware_file_with_a_nan(tmp_path, capsys):
    path = tmp_path / "nan.toml"
    path.write_text(re.sub(r"(?m)^memory_bandwidth_gbs = .*$", "memory_bandwidth_gbs = nan",
                           (CONFIG_DIR / "hardware" / "hermes.toml").read_text(), count=1))
    assert main(["hermes", "--hardware", str(path)]) == 2
    err = _one_error_line(capsys, "hermes")
    assert f"{path}: gpu.memory_bandwidth_gbs is nan: numbers must be finite" in err


def test_cli_refuses_a_hardware_file_with_a_number_without_source(tmp_path, capsys):
    path = tmp_path / "h100.toml"
    shutil.copy(CONFIG_DIR / "trimoe_hardware" / "h100-amx.toml", path)
    path.write_text(re.sub(r'(?m)^(cores = \{ value = 56), source = "[^"]*"', r"\1",
                           path.read_text()))
    assert main(["trimoe", "--hardware", str(path)]) == 2
    assert f"{path}: cpu.cores has no source" in _one_error_line(capsys, "trimoe")


@pytest.mark.parametrize("field, value, message", [
    ("hidden_size", "8192", "hidden_size must be an integer, got '8192'"),
    ("num_hidden_layers", 80.0, "num_hidden_layers must be an integer, got 80.0"),
    ("vocab_size", math.nan, "vocab_size is nan: numbers must be finite"),
    ("rope_theta", math.inf, "rope_theta is inf: numbers must be finite"),
])
def test_cli_refuses_a_config_json_with_a_bad_number(tmp_path, capsys, field, value, message):
    fields = {"model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
              "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
              "vocab_size": 32000, "max_position_embeddings": 4096, "hidden_act": "silu",
              "tie_word_embeddings": False, field: value}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields))                     # NaN / Infinity as json writes them
    assert main(["hermes", "--model", str(path)]) == 2
    assert f"{path}: {message}" in _one_error_line(capsys, "hermes")


@pytest.mark.parametrize("argv", [
    ["trimoe", "--link-ber", "nan"],
    ["trimoe", "--hot-mass", "inf"],
    ["rapid", "--duration", "nan"],
    ["hermes", "--hot-share", "nan"],
])
def test_cli_float_options_refuse_nan_and_infinity(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "expected a" in err and ("nan" in err or "inf" in err), err
