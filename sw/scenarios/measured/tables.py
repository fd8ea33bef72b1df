"""Readers of measured GPU operator tables, in the two public formats.

The format is told by the header line:

* LLMServingSim, dense ops: ``layer,tokens,time_us`` (one row per op and token count);
* LLMServingSim, a layer's ops: ``layer_name,input,kv_cache,tp_size,latency(ns)``;
* LLMServingSim, attention: ``prefill_chunk,kv_prefill,n_decode,kv_decode,time_us``;
* Vidur: ``time_stats.<op>.{min,max,mean,median,std}`` columns (the median is read) with
  ``num_tokens`` and ``num_tensor_parallel_workers``, and the model's dimensions in columns of
  their own (``n_embd``, ``n_head``, ...: :attr:`ProfileTable.dims`).

A folder is read as every ``.csv`` in it; a ``meta.yaml`` beside them gives the GPU's name
(``gpu:``) where the profiler wrote one. Every row is checked: a missing column or field, a
count that is not a positive integer, a time that is not a positive finite number, or an op the
shape map does not know (``ops.OPS``) is a :class:`ProfileError` naming the file and the line,
and nothing of the file is returned.
"""

import csv
import dataclasses
import math
import re
from pathlib import Path

from ndpdimm.sw.scenarios.measured.ops import OPS, ModelDims

__all__ = ["ProfileError", "OpTime", "AttentionTime", "ProfileTable", "read_table", "read_profile",
           "select"]


class ProfileError(ValueError):
    """A profile table that cannot be read: the message names the file and the line."""


@dataclasses.dataclass(frozen=True)
class OpTime:
    """One measured op: ``op`` (the table's name) on ``tokens`` input rows at tensor-parallel
    degree ``tp`` took ``seconds`` (the median where the table has statistics)."""
    op: str
    tokens: int
    tp: int
    seconds: float
    line: int


@dataclasses.dataclass(frozen=True)
class AttentionTime:
    """One attention measurement: a prefill chunk of ``prefill_chunk`` tokens over
    ``kv_prefill`` cached ones, beside ``n_decode`` decoding sequences of ``kv_decode``
    context each, took ``seconds``."""
    prefill_chunk: int
    kv_prefill: int
    n_decode: int
    kv_decode: int
    seconds: float
    line: int


@dataclasses.dataclass(frozen=True)
class ProfileTable:
    """One file: its ``path``, ``format`` (``llmservingsim-dense``, ``llmservingsim-layer``,
    ``llmservingsim-attention`` or ``vidur``), its ``ops`` and ``attention`` rows, the GPU's
    name from a ``meta.yaml`` beside it (or None) and, for Vidur, the model's dimensions."""
    path: Path
    format: str
    ops: tuple = ()
    attention: tuple = ()
    gpu: str | None = None
    dims: ModelDims | None = None


def _count(path, line, name, text) -> int:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ProfileError(f"{path}:{line}: {name} must be a positive integer, got {text!r}") from None
    if not value.is_integer() or value < 0 or (value == 0 and name not in _MAY_BE_ZERO):
        raise ProfileError(f"{path}:{line}: {name} must be a positive integer, got {text!r}")
    return int(value)


_MAY_BE_ZERO = ("prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "kv_cache")


def _time(path, line, name, text, scale) -> float:
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ProfileError(f"{path}:{line}: {name} must be a time, got {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise ProfileError(f"{path}:{line}: {name} must be a positive finite time, got {text!r}")
    return value * scale


def _op(path, line, name) -> str:
    if name not in OPS:
        raise ProfileError(f"{path}:{line}: unknown op {name!r} (known: {', '.join(sorted(OPS))})")
    return name


def _rows(path, header, reader):
    for line, row in enumerate(reader, start=2):
        if len(row) != len(header):
            raise ProfileError(f"{path}:{line}: {len(row)} fields, the header has {len(header)}")
        yield line, dict(zip(header, row))


def _gpu_name(folder: Path) -> str | None:
    meta = folder / "meta.yaml"
    if not meta.is_file():
        return None
    m = re.search(r"^gpu:\s*(.+?)\s*$", meta.read_text(), re.M)
    return m.group(1).strip("'\"") if m else None


def read_table(path) -> ProfileTable:
    """One profile file (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ProfileError(f"{path}: no such profile table")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ProfileError(f"{path}:1: empty file, no header")
        header = [h.strip() for h in header]
        cols = set(header)
        gpu = _gpu_name(path.parent)
        if header[:3] == ["layer", "tokens", "time_us"]:
            ops = tuple(OpTime(_op(path, n, r["layer"]), _count(path, n, "tokens", r["tokens"]), 1,
                               _time(path, n, "time_us", r["time_us"], 1e-6), n)
                        for n, r in _rows(path, header, reader))
            return ProfileTable(path, "llmservingsim-dense", ops=ops, gpu=gpu)
        if header[:5] == ["layer_name", "input", "kv_cache", "tp_size", "latency(ns)"]:
            ops = tuple(OpTime(_op(path, n, r["layer_name"]), _count(path, n, "input", r["input"]),
                               _count(path, n, "tp_size", r["tp_size"]),
                               _time(path, n, "latency(ns)", r["latency(ns)"], 1e-9), n)
                        for n, r in _rows(path, header, reader)
                        if _count(path, n, "kv_cache", r["kv_cache"]) >= 0)    # checked, not used
            return ProfileTable(path, "llmservingsim-layer", ops=ops, gpu=gpu)
        if header[:5] == ["prefill_chunk", "kv_prefill", "n_decode", "kv_decode", "time_us"]:
            att = tuple(AttentionTime(*(_count(path, n, k, r[k]) for k in header[:4]),
                                      _time(path, n, "time_us", r["time_us"], 1e-6), n)
                        for n, r in _rows(path, header, reader))
            return ProfileTable(path, "llmservingsim-attention", attention=att, gpu=gpu)
        medians = [h for h in header if h.startswith("time_stats.") and h.endswith(".median")]
        if medians:
            need = {"num_tokens", "num_tensor_parallel_workers", "n_head", "n_kv_head", "n_embd",
                    "n_expanded_embd", "vocab_size", "use_gated_mlp"}
            if need - cols:
                raise ProfileError(f"{path}:1: missing column(s) {', '.join(sorted(need - cols))}")
            ops, dims = [], None
            for n, r in _rows(path, header, reader):
                tokens = _count(path, n, "num_tokens", r["num_tokens"])
                tp = _count(path, n, "num_tensor_parallel_workers", r["num_tensor_parallel_workers"])
                row_dims = _vidur_dims(path, n, r)
                if dims is not None and row_dims != dims:
                    raise ProfileError(f"{path}:{n}: the model's dimensions differ from line 2's")
                dims = row_dims
                for col in medians:
                    op = _op(path, n, col[len("time_stats."):-len(".median")])
                    if r[col] != "":                 # an op the profiler did not time here
                        ops.append(OpTime(op, tokens, tp,
                                          _time(path, n, col, r[col], 1e-3), n))
            return ProfileTable(path, "vidur", ops=tuple(ops), gpu=gpu, dims=dims)
    raise ProfileError(f"{path}:1: not a profile table this reader knows (header {','.join(header)})")


def _vidur_dims(path, n, r) -> ModelDims:
    gated = r["use_gated_mlp"].strip().lower()
    if gated not in ("true", "false"):
        raise ProfileError(f"{path}:{n}: use_gated_mlp must be True or False, got {gated!r}")
    try:
        return ModelDims(name=path.parent.name, hidden=_count(path, n, "n_embd", r["n_embd"]),
                         heads=_count(path, n, "n_head", r["n_head"]),
                         kv_heads=_count(path, n, "n_kv_head", r["n_kv_head"]),
                         ffn=_count(path, n, "n_expanded_embd", r["n_expanded_embd"]),
                         vocab=_count(path, n, "vocab_size", r["vocab_size"]),
                         gated=gated == "true")
    except ValueError as e:
        if isinstance(e, ProfileError):
            raise
        raise ProfileError(f"{path}:{n}: {e}") from None


def read_profile(path) -> list:
    """A file, or every ``.csv`` of a folder (sorted by name): one :class:`ProfileTable` each."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.glob("*.csv"))
        if not files:
            raise ProfileError(f"{path}: a folder without a .csv profile table")
        return [read_table(p) for p in files]
    return [read_table(path)]


def select(tables, *, exclude_ops=(), only_ops=None, tp=None) -> list:
    """``tables`` with only some of their op rows: not in ``exclude_ops``, in ``only_ops`` when
    given, of a tensor-parallel degree in ``tp`` when given (a held-out fit or check)."""
    def keep(o):
        return (o.op not in exclude_ops and (only_ops is None or o.op in only_ops)
                and (tp is None or o.tp in tp))
    return [dataclasses.replace(t, ops=tuple(o for o in t.ops if keep(o))) for t in tables]
