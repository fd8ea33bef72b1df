"""Configuration files: the one TOML loader of the project, every number with its source.

Every configuration file (the DRAM configurations of ``hw/configs/``, the catalogues, workloads,
reproduction set-ups and sweeps of ``sw/configs/``, and any file a user gives in their place) is
read here. The rules, checked mechanically on every load:

* **A number carries its source.** An int or a float, alone or in an array, is written as a
  table ``{ value = ..., source = "..." }`` (:class:`Sourced`): ``source`` a non-empty string (a
  datasheet, a paper, a public model config, a measurement; an assumption says
  ``assumption: ...`` with its reason). An array of numbers has one source for the whole array
  (``{ value = [60.0, 30.0], source = "..." }``). Strings and booleans (names, paths, choices,
  flags) need none, and may be written either way. A sourced value may also carry
  ``range = { low = ..., high = ..., source = "..." }`` (the span a sensitivity sweep moves it
  across, with the source of that span; ``low <= value <= high``) and a free-text ``note``.
* **Numbers are finite.** ``nan`` and ``inf`` (which TOML allows) are refused wherever they
  stand: a value, an array element, a range end.
* **A schema decides the keys** (:func:`load`): a dataclass whose fields are the file's keys;
  a field whose type is a dataclass is a table. Every field is required, no other key is
  accepted, and each value must have its field's type (``int`` not ``bool`` nor ``5.0``;
  ``float`` takes an int and gives a float; ``tuple[float, ...]`` an array). The dataclass is
  then built, and a ``ValueError`` its ``__post_init__`` raises is reported for its table.
  Files without a fixed schema (the reproduction parameters, sweeps) are read by
  :func:`unwrap`, which applies the first two rules to every key.

Everything that goes wrong raises :class:`ConfigError` (a ``ValueError``): one line that names
the file and the key (dotted, ``gpu.memory_bandwidth_gbs``), e.g.::

    hermes.toml: gpu.memory_bandwidth_gbs = 1008.0 has no source: write it as { value = 1008.0, source = "..." }
    hermes.toml: gpu.memory_bandwidth_gbs is nan: numbers must be finite
    hermes.toml: unknown key gpu.memory_bw (the keys of [gpu] are name, memory_gb, ...)
    hermes.toml: missing key gpu.memory_gb
    hermes.toml: gpu.memory_gb must be a float, got '24'

The packaged configuration folders are found through ``importlib.resources``
(:func:`package_folder`), a built-in name or a path by :func:`find`; :func:`dumps` writes a
document back as TOML (a copy of a node file with one value changed, a test's edited file).

This module uses only the standard library: it sits at the bottom of the layering (``hw/``), so
every package may import it.
"""

import dataclasses
import importlib.resources
import json
import math
import tomllib
import types
import typing
from pathlib import Path

__all__ = ["ConfigError", "Sourced", "SOURCED_KEYS", "RANGE_KEYS", "read", "load", "unwrap",
           "sourced", "is_sourced", "non_finite", "package_folder", "builtin_names", "find",
           "dumps"]

#: The keys a value-with-source table may have (``value`` and ``source`` required).
SOURCED_KEYS = ("value", "source", "range", "note")
#: The keys of its ``range`` (all required).
RANGE_KEYS = ("low", "high", "source")


class ConfigError(ValueError):
    """A configuration file that cannot be read, or whose content breaks a rule of this module
    or of its schema. The message is one line naming the file and the key."""

    def __init__(self, message):
        super().__init__(" ".join(str(message).splitlines()))


@dataclasses.dataclass(frozen=True)
class Sourced:
    """A value and where it comes from; ``low``/``high``/``range_source`` when it has a range
    (the span a sensitivity sweep moves it across); ``note``: free text."""
    value: object
    source: str
    low: float | None = None
    high: float | None = None
    range_source: str = ""
    note: str = ""


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def non_finite(obj, key: str = ""):
    """``(key, value)`` of the first number in ``obj`` (nested dicts and lists) that is not
    finite (NaN, +-infinity), keys dotted and list items as ``key[i]``; None if all are."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return key, obj
    items = (((_join(key, str(k)), v) for k, v in obj.items()) if isinstance(obj, dict)
             else ((f"{key}[{i}]", v) for i, v in enumerate(obj)) if isinstance(obj, (list, tuple))
             else ())
    for sub, v in items:
        found = non_finite(v, sub)
        if found is not None:
            return found
    return None


def _has_number(obj) -> bool:
    if isinstance(obj, (list, tuple)):
        return any(_has_number(v) for v in obj)
    return _is_number(obj)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def _check_finite(path, key: str, value) -> None:
    bad = non_finite(value, key)
    if bad is not None:
        raise ConfigError(f"{path}: {bad[0]} is {bad[1]!r}: numbers must be finite")


def is_sourced(item) -> bool:
    """Whether ``item`` is a value-with-source table: a table with a ``value`` that is not a
    table itself and a ``source``. Anything else is an ordinary table (one holding parameters
    named ``value``, say), whose numbers then need their own sources."""
    return (isinstance(item, dict) and "value" in item and "source" in item
            and not isinstance(item["value"], dict))


def sourced(item: dict, path, key: str) -> Sourced:
    """The :class:`Sourced` of a value-with-source table ``item`` at ``key`` of ``path``:
    ``value`` and a non-empty ``source``, optionally ``range`` and ``note``, nothing else;
    every number finite; a range's ends numbers with ``low <= high`` around a numeric value."""
    unknown = [k for k in item if k not in SOURCED_KEYS]
    if unknown:
        raise ConfigError(f"{path}: {key} has unknown key{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(unknown)} (a value with its source takes "
                          f"{', '.join(SOURCED_KEYS)})")
    _check_finite(path, key, item["value"])
    source = item.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ConfigError(f"{path}: {key} has no source (write source = \"datasheet / paper / "
                          f"URL / measurement\", or \"assumption: why\")")
    note = item.get("note", "")
    if not isinstance(note, str):
        raise ConfigError(f"{path}: {key}.note must be a string, got {note!r}")
    if "range" not in item:
        return Sourced(item["value"], source, note=note)
    rng = item["range"]
    if not isinstance(rng, dict):
        raise ConfigError(f"{path}: {key}.range must be a table "
                          f"{{ low = ..., high = ..., source = \"...\" }}, got {rng!r}")
    missing = [k for k in RANGE_KEYS if k not in rng]
    unknown = [k for k in rng if k not in RANGE_KEYS]
    if missing or unknown:
        raise ConfigError(f"{path}: {key}.range needs exactly low, high, source (missing: "
                          f"{', '.join(missing) or '-'}; unknown: {', '.join(unknown) or '-'})")
    _check_finite(path, f"{key}.range", rng)
    if not isinstance(rng["source"], str) or not rng["source"].strip():
        raise ConfigError(f"{path}: {key}.range has no source")
    low, high, value = rng["low"], rng["high"], item["value"]
    if not (_is_number(low) and _is_number(high)) or low > high:
        raise ConfigError(f"{path}: {key}.range low={low!r} high={high!r} must be numbers with "
                          f"low <= high")
    if _is_number(value) and not low <= value <= high:
        raise ConfigError(f"{path}: {key} = {value!r} lies outside its range [{low}, {high}]")
    return Sourced(value, source, low, high, rng["source"], note)


def _bare_number(path, key: str, value):
    """The error for a number written without its source (a non-finite one named as such)."""
    _check_finite(path, key, value)
    shown = _toml_value(value)
    return ConfigError(f"{path}: {key} = {shown} has no source: write it as "
                       f"{{ value = {shown}, source = \"...\" }}")


def read(path) -> dict:
    """The TOML document at ``path``, unchecked; :class:`ConfigError` if it cannot be read or
    is not TOML."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read it: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{path}: not valid TOML: {e}") from None


def unwrap(doc, path, key: str = "", sources: dict | None = None):
    """``doc`` (a document read by :func:`read`, or a part of one at ``key``) with every
    value-with-source table replaced by its value, its :class:`Sourced` recorded in
    ``sources`` (dotted key -> Sourced) when given. :class:`ConfigError` on a number without a
    source, a non-finite number, or a malformed value-with-source table."""
    if is_sourced(doc):
        s = sourced(doc, path, key)
        if sources is not None:
            sources[key] = s
        return s.value
    if isinstance(doc, dict):
        return {k: unwrap(v, path, _join(key, str(k)), sources) for k, v in doc.items()}
    if isinstance(doc, list):
        if any(isinstance(v, dict) for v in doc):        # an array of tables
            return [unwrap(v, path, f"{key}[{i}]", sources) for i, v in enumerate(doc)]
        if _has_number(doc):
            raise _bare_number(path, key, doc)
        return doc
    if _is_number(doc):
        raise _bare_number(path, key, doc)
    return doc


def _type_name(hint) -> str:
    origin = typing.get_origin(hint)
    if origin in (tuple, list):
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        return f"an array{' of ' + _type_name(args[0]) + 's' if args else ''}"
    name = getattr(hint, "__name__", str(hint))
    return f"an {name}" if name[0] in "aeiou" else f"a {name}"


def _typed(hint, value, path, key: str):
    """``value`` (already unwrapped) checked against the type ``hint``; ints become floats
    where a float is wanted, arrays tuples."""
    origin = typing.get_origin(hint)
    if isinstance(hint, types.UnionType) or origin is typing.Union:
        for arg in typing.get_args(hint):
            try:
                return _typed(arg, value, path, key)
            except ConfigError:
                pass
        raise ConfigError(f"{path}: {key} must be one of "
                          f"{', '.join(_type_name(a) for a in typing.get_args(hint))}, "
                          f"got {value!r}")
    if hint is type(None):
        if value is not None:
            raise ConfigError(f"{path}: {key} must be absent")
        return None
    if origin in (tuple, list) or hint in (tuple, list):
        if not isinstance(value, list):
            raise ConfigError(f"{path}: {key} must be an array, got {value!r}")
        args = [a for a in typing.get_args(hint) if a is not Ellipsis]
        if args:
            return tuple(_typed(args[0], v, path, f"{key}[{i}]") for i, v in enumerate(value))
        return tuple(value)
    if hint is float:
        if not _is_number(value):
            raise ConfigError(f"{path}: {key} must be a float, got {value!r}")
        return float(value)
    if hint is int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{path}: {key} must be an int, got {value!r}")
        return value
    if hint in (str, bool):
        if not isinstance(value, hint) or (hint is not bool and isinstance(value, bool)):
            raise ConfigError(f"{path}: {key} must be {_type_name(hint)}, got {value!r}")
        return value
    if hint is typing.Any or hint is object:
        return value
    raise TypeError(f"schema field {key} has a type the loader does not read: {hint!r}")


def _needs_source(hint) -> bool:
    """Whether a field of type ``hint`` holds numbers (and so must carry a source)."""
    origin = typing.get_origin(hint)
    if isinstance(hint, types.UnionType) or origin is typing.Union:
        return any(_needs_source(a) for a in typing.get_args(hint) if a is not type(None))
    if origin in (tuple, list):
        return any(_needs_source(a) for a in typing.get_args(hint) if a is not Ellipsis)
    return hint in (int, float)


def _build(schema, table, path, prefix: str, given: dict, sources: dict | None):
    where = f"[{prefix}]" if prefix else "the file"
    if not isinstance(table, dict) or is_sourced(table):
        raise ConfigError(f"{path}: {prefix} must be a table, got {table!r}")
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema) if f.init and f.name not in given]
    missing = [_join(prefix, n) for n in names if n not in table]
    unknown = [_join(prefix, k) for k in table if k not in names]
    if missing or unknown:
        raise ConfigError(f"{path}: " + "; ".join(
            ([f"missing key{'s' if len(missing) > 1 else ''} {', '.join(missing)}"]
             if missing else []) +
            ([f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (the keys of "
              f"{where} are {', '.join(names)})"] if unknown else [])))
    values = dict(given)
    for name in names:
        hint, item, key = hints[name], table[name], _join(prefix, name)
        if dataclasses.is_dataclass(hint):
            values[name] = _build(hint, item, path, key, {}, sources)
            continue
        if isinstance(item, dict):                    # a value (not a table) with its source
            if "value" not in item:
                raise ConfigError(f"{path}: {key} must be {_type_name(hint)} or "
                                  f"{{ value = ..., source = \"...\" }}, got {item!r}")
            s = sourced(item, path, key)
            if sources is not None:
                sources[key] = s
            item = s.value
        elif _needs_source(hint) and _has_number(item):
            raise _bare_number(path, key, item)
        else:
            _check_finite(path, key, item)
        values[name] = _typed(hints[name], item, path, key)
    try:
        return schema(**values)
    except ConfigError:
        raise
    except ValueError as e:
        raise ConfigError(f"{path}: {where}: {e}") from None


def load(path, schema, *, given: dict | None = None, doc: dict | None = None,
         sources: dict | None = None):
    """The dataclass ``schema`` made from the TOML file at ``path`` (see the module docstring);
    the fields in ``given`` are not read from the file but passed as they are (a name taken from
    the file's stem). ``doc``: the document when already read. ``sources``, when given, receives
    every value-with-source of the file (dotted key -> :class:`Sourced`)."""
    doc = read(path) if doc is None else doc
    return _build(schema, doc, path, "", dict(given or {}), sources)


def package_folder(package: str, *parts: str) -> Path:
    """The folder ``parts`` inside the installed package ``package`` (``importlib.resources``),
    e.g. ``package_folder("ndpdimm.sw", "configs", "models")``."""
    folder = importlib.resources.files(package).joinpath(*parts)
    if not isinstance(folder, Path):
        raise ConfigError(f"{package}/{'/'.join(parts)}: the package's data is not on the file "
                          f"system ({type(folder).__name__})")
    return folder.resolve()


def builtin_names(folder: Path) -> list:
    """Names (stems) of the ``.toml`` files in ``folder``, sorted."""
    return sorted(p.stem for p in Path(folder).glob("*.toml"))


def find(folder: Path, name_or_path, what: str) -> Path:
    """The file of a built-in name (``folder / NAME.toml``) or a path ending ``.toml``;
    :class:`ConfigError` listing the built-in names of ``what`` for an unknown name."""
    path = Path(name_or_path)
    if path.suffix == ".toml":
        return path
    path = Path(folder) / f"{name_or_path}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown {what} {str(name_or_path)!r}: built in are "
                          f"{', '.join(builtin_names(folder))} (or give a path to a .toml file)")
    return path


def _toml_value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf") if math.isinf(v) else repr(v)
    if isinstance(v, int):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} as TOML")


def _toml_key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "-_" for c in k) else json.dumps(k)


def dumps(doc: dict) -> str:
    """``doc`` as TOML that :func:`read` gives back: top-level values first, then one
    ``[table]`` per table that is not a value-with-source (its own tables inline)."""
    lines = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in doc.items()
             if not isinstance(v, dict) or is_sourced(v)]
    for k, v in doc.items():
        if isinstance(v, dict) and not is_sourced(v):
            lines += ["", f"[{_toml_key(k)}]"]
            lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
    return "\n".join(lines) + "\n"
