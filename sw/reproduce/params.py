"""Parameter files of the reproductions: every value with its source, ranges with theirs.

``sw/configs/reproduce/<paper>.toml`` holds the set-up of one paper's reproduction. Every
parameter is a TOML table with a ``value`` and a non-empty ``source`` (paper section, table or
figure; datasheet; URL; a measurement of ours), and optionally the range a sensitivity sweep
moves it across, with the source of that range::

    [pcie_gbps]
    value = 25.0
    source = "RTX 4090 datasheet: PCIe 4.0 x16, 32 GB/s raw; 25 GB/s measured by ..."
    range = { low = 20.0, high = 28.0, source = "..." }

Tables without ``value`` group parameters (``[gpu.memory_gb]`` is the parameter
``gpu.memory_gb``); a ``[meta]`` table (free text about the file) is not a parameter.
A parameter is read by the project's configuration loader (``hw/config_file.py``:
:func:`~ndpdimm.hw.config_file.sourced`), which rejects, naming the parameter and the file
(:class:`~ndpdimm.hw.config_file.ConfigError`, a ``ValueError``): a bare value without a table
(here a string or a boolean needs its source too), a missing or empty ``source``, an unknown key,
NaN or infinity, a range without ``low``, ``high`` or a source, ``low > high``, or a numeric value
outside its range. Published figures are for comparison, never for fitting: nothing here reads
them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ndpdimm.hw import config_file
from ndpdimm.hw.config_file import ConfigError
from ndpdimm.sw.reproduce.core import ReproductionError

__all__ = ["Param", "load_params", "values", "config_path", "CONFIG_DIR"]

#: the packaged parameter files, one per paper (``importlib.resources``)
CONFIG_DIR = config_file.package_folder("ndpdimm.sw", "configs", "reproduce")


@dataclass(frozen=True)
class Param:
    """One parameter: its value and source; ``low``/``high``/``range_source`` when it has a
    sensitivity range; ``note``: optional free text (why this value, what it stands for)."""

    name: str
    value: Any
    source: str
    low: float | None = None
    high: float | None = None
    range_source: str = ""
    note: str = ""


def _walk(prefix: str, table: dict, where: str, out: dict) -> None:
    for key, item in table.items():
        name = f"{prefix}{key}"
        if not isinstance(item, dict):
            shown = config_file.dumps({"v": item})[4:].strip()
            raise ConfigError(f"{where}: {name} = {shown} has no source: write it as "
                              f"{{ value = {shown}, source = \"...\" }}")
        if config_file.is_sourced(item):
            s = config_file.sourced(item, where, name)
            out[name] = Param(name, s.value, s.source, s.low, s.high, s.range_source, s.note)
        elif not item:
            raise ConfigError(f"{where}: {name} is an empty table (no value)")
        else:
            _walk(name + ".", item, where, out)


def load_params(path) -> dict[str, Param]:
    """The parameters of a file (a path, or a paper name for ``sw/configs/reproduce/<name>.toml``),
    by dotted name; raises :class:`~ndpdimm.hw.config_file.ConfigError` naming the parameter and
    the file on any parameter without a source or with a bad range (see the module docstring)."""
    path = config_path(path)
    data = config_file.read(path)
    data.pop("meta", None)
    out: dict[str, Param] = {}
    _walk("", data, str(path), out)
    return out


def config_path(name_or_path) -> Path:
    """``sw/configs/reproduce/<name>.toml`` for a bare name, else the path itself."""
    text = str(name_or_path)
    if "/" not in text and not text.endswith(".toml"):
        return config_file.find(CONFIG_DIR, text, "reproduction parameter file")
    return Path(text)


def values(params: dict[str, Param], overrides: dict | None = None) -> dict[str, Any]:
    """``{name: value}`` of ``params``, with ``overrides`` (a sensitivity point) applied; an
    override naming no parameter is an error (a typo would otherwise change nothing)."""
    overrides = overrides or {}
    unknown = set(overrides) - set(params)
    if unknown:
        raise ReproductionError(f"override of unknown parameter(s) {', '.join(sorted(unknown))}")
    return {name: overrides.get(name, p.value) for name, p in params.items()}
