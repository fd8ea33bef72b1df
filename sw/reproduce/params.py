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
:func:`load_params` rejects, naming the parameter and the file: a bare value without a table,
a missing or empty ``source``, an unknown key, a range without ``low``, ``high`` or a source,
``low > high``, or a numeric value outside its range. Published figures are for comparison,
never for fitting: nothing here reads them.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ndpdimm.sw.reproduce.core import ReproductionError

__all__ = ["Param", "load_params", "values", "config_path", "CONFIG_DIR"]

#: the packaged parameter files, one per paper
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "reproduce"

_PARAM_KEYS = {"value", "source", "range", "note"}
_RANGE_KEYS = {"low", "high", "source"}


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


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _param(name: str, table: dict, where: str) -> Param:
    unknown = set(table) - _PARAM_KEYS
    if unknown:
        raise ReproductionError(f"{where}: parameter {name!r} has unknown key(s) "
                                f"{', '.join(sorted(unknown))} (allowed: {', '.join(sorted(_PARAM_KEYS))})")
    source = table.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ReproductionError(f"{where}: parameter {name!r} has no source (every value needs "
                                "source = \"paper section / datasheet / URL / measurement\")")
    low = high = None
    range_source = ""
    if "range" in table:
        rng = table["range"]
        if not isinstance(rng, dict):
            raise ReproductionError(f"{where}: parameter {name!r}: range must be a table "
                                    "{ low = ..., high = ..., source = \"...\" }")
        unknown = set(rng) - _RANGE_KEYS
        missing = _RANGE_KEYS - set(rng)
        if unknown or missing:
            raise ReproductionError(f"{where}: parameter {name!r}: range needs exactly low, high, "
                                    f"source (missing: {', '.join(sorted(missing)) or '-'}; "
                                    f"unknown: {', '.join(sorted(unknown)) or '-'})")
        if not isinstance(rng["source"], str) or not rng["source"].strip():
            raise ReproductionError(f"{where}: parameter {name!r}: its range has no source")
        low, high, range_source = rng["low"], rng["high"], rng["source"]
        if not (_is_number(low) and _is_number(high)) or low > high:
            raise ReproductionError(f"{where}: parameter {name!r}: range low={low!r} high={high!r} "
                                    "must be numbers with low <= high")
        value = table["value"]
        if _is_number(value) and not low <= value <= high:
            raise ReproductionError(f"{where}: parameter {name!r}: value {value!r} lies outside its "
                                    f"range [{low}, {high}]")
    return Param(name=name, value=table["value"], source=source, low=low, high=high,
                 range_source=range_source, note=str(table.get("note", "")))


def _walk(prefix: str, table: dict, where: str, out: dict) -> None:
    for key, item in table.items():
        name = f"{prefix}{key}"
        if not isinstance(item, dict):
            raise ReproductionError(f"{where}: parameter {name!r} = {item!r} has no source (write it "
                                    f"as {{ value = {item!r}, source = \"...\" }})")
        if "value" in item:
            out[name] = _param(name, item, where)
        elif not item:
            raise ReproductionError(f"{where}: parameter {name!r} is an empty table (no value)")
        else:
            _walk(name + ".", item, where, out)


def load_params(path) -> dict[str, Param]:
    """The parameters of a file (a path, or a paper name for ``sw/configs/reproduce/<name>.toml``),
    by dotted name; raises :class:`ReproductionError` naming the parameter and the file on any
    parameter without a source or with a bad range (see the module docstring)."""
    path = config_path(path)
    try:
        data = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ReproductionError(f"parameter file {str(path)!r} does not exist") from None
    except tomllib.TOMLDecodeError as e:
        raise ReproductionError(f"parameter file {str(path)!r} is not valid TOML: {e}") from None
    data.pop("meta", None)
    out: dict[str, Param] = {}
    _walk("", data, str(path), out)
    return out


def config_path(name_or_path) -> Path:
    """``sw/configs/reproduce/<name>.toml`` for a bare name, else the path itself."""
    text = str(name_or_path)
    if "/" not in text and not text.endswith(".toml"):
        return CONFIG_DIR / f"{text}.toml"
    return Path(text)


def values(params: dict[str, Param], overrides: dict | None = None) -> dict[str, Any]:
    """``{name: value}`` of ``params``, with ``overrides`` (a sensitivity point) applied; an
    override naming no parameter is an error (a typo would otherwise change nothing)."""
    overrides = overrides or {}
    unknown = set(overrides) - set(params)
    if unknown:
        raise ReproductionError(f"override of unknown parameter(s) {', '.join(sorted(unknown))}")
    return {name: overrides.get(name, p.value) for name, p in params.items()}
