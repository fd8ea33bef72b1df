"""The scenarios' shared catalogue: model shapes, GPU and PCIe records, the strict TOML readers.

Models (``sw/configs/models/<name>.toml``): the shapes of a decoder-only
transformer as its public configuration gives them (hidden size, layers,
query and K/V heads, MLP width and kind, vocabulary, positions), the source
URL and the nominal parameter count, which :func:`load_model` checks against
the count the shapes imply (within ``PARAM_TOLERANCE``: a typo in a width is
caught). :class:`Gpu` and :class:`Pcie` are the records every scenario's hardware file uses;
each scenario's own hardware catalogue (``hermes/catalog.py``, ``trimoe/catalog.py``,
``rapid/catalog.py``) builds on the readers here (:func:`read_config`, :func:`typed_fields`,
:func:`typed_tables`).

Every key of a file is required and no other key is accepted: a missing,
unknown or mistyped key raises :class:`CatalogError` naming the file and the
key, before anything runs. ``load_model`` takes a built-in name (``list_models()``) or a path
to a TOML file of the same form.

``load_model`` also takes a Hugging Face ``config.json`` (the file, or a folder holding
one), read offline with ``transformers.AutoConfig``: :func:`model_from_hf_config` maps the
OPT, LLaMA / Mistral and Falcon families onto :class:`ModelShape` the way the built-in files
were written from those configs (the source is the file, the nominal parameter count the one
the shapes imply, since a config states none). An architecture it cannot map, or a config
missing a field the mapping needs, raises :class:`CatalogError` naming the file and the
field.
"""

import dataclasses
import json
import os
import tomllib
from pathlib import Path

__all__ = ["CatalogError", "ModelShape", "Gpu", "Pcie",
           "load_model", "list_models", "PARAM_TOLERANCE",
           "CONFIG_DIR", "is_hf_config", "HfConfig", "read_hf_config", "with_implied_params",
           "model_from_hf_config", "available_names", "read_config", "typed_fields", "typed_tables",
           "check_params"]

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
#: Largest relative difference between a model file's nominal parameter count and its shapes'.
PARAM_TOLERANCE = 0.03


class CatalogError(ValueError):
    """A catalogue file is missing, malformed, or describes an impossible configuration."""


@dataclasses.dataclass(frozen=True)
class ModelShape:
    """A decoder-only transformer's shapes (see ``sw/configs/models``)."""
    name: str
    source: str
    nominal_params_b: float
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_positions: int
    learned_positions: bool
    mlp: str                  # "plain" (up, act, down) or "gated" (down(act(gate) * up))
    activation: str           # "relu", "gelu", "silu"
    tied_embeddings: bool

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) per token: K/V heads x head size."""
        return self.kv_heads * self.head_dim

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer."""
        return 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim

    @property
    def mlp_params(self) -> int:
        """The MLP of one layer: up and down (and gate when gated)."""
        return (3 if self.mlp == "gated" else 2) * self.hidden * self.ffn

    @property
    def params(self) -> int:
        """Weights the shapes imply (norms and biases left out: well under 0.1 %)."""
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        if self.learned_positions:
            embed += self.max_positions * self.hidden
        return embed + self.layers * (self.attention_params + self.mlp_params)

    def kv_bytes_per_token(self, elem_bytes: int = 2) -> int:
        """KV-cache bytes one token adds over all layers."""
        return 2 * self.layers * self.kv_dim * elem_bytes


@dataclasses.dataclass(frozen=True)
class Gpu:
    name: str
    memory_gb: float
    memory_bandwidth_gbs: float
    fp16_tflops: float
    board_power_w: float
    compute_efficiency: float
    memory_efficiency: float
    kernel_overhead_us: float


@dataclasses.dataclass(frozen=True)
class Pcie:
    name: str
    lanes: int
    gt_per_s: float
    encoding_efficiency: float
    protocol_efficiency: float
    latency_us: float          # one small transfer's latency (DMA set-up, flight, completion)

    @property
    def gbytes_per_s(self) -> float:
        """Achieved bandwidth per direction, GB/s."""
        return self.lanes * self.gt_per_s / 8 * self.encoding_efficiency * self.protocol_efficiency


_MLP_KINDS = ("plain", "gated")
_ACTIVATIONS = ("relu", "gelu", "silu")
_EFFICIENCIES = ("compute_efficiency", "memory_efficiency", "encoding_efficiency",
                 "protocol_efficiency")


def available_names(kind: str) -> list:
    return sorted(p.stem for p in (CONFIG_DIR / kind).glob("*.toml"))


def list_models() -> list:
    """Names of the built-in model files."""
    return available_names("models")


def read_config(kind: str, name_or_path, what: str | None = None) -> tuple:
    """``(path, document)`` of a built-in name under ``CONFIG_DIR / kind`` or of a TOML path;
    ``what`` names the kind in the unknown-name message (default: from ``kind``)."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = CONFIG_DIR / kind / f"{name_or_path}.toml"
        if not path.is_file():
            what = what or (kind[:-1] if kind == "models" else kind)
            raise CatalogError(f"unknown {what} "
                               f"{name_or_path!r}: built in are {', '.join(available_names(kind))} "
                               f"(or give a path to a .toml file)")
    try:
        with open(path, "rb") as f:
            return path, tomllib.load(f)
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such file") from None
    except tomllib.TOMLDecodeError as e:
        raise CatalogError(f"{path}: not valid TOML: {e}") from None


def typed_fields(cls, table: dict, where: str, may_be_zero=()) -> dict:
    """``table`` checked against ``cls``'s fields: every one present with the right type, nothing
    else; numbers positive, those named in ``may_be_zero`` non-negative."""
    names = [f.name for f in dataclasses.fields(cls)]
    missing = [n for n in names if n not in table]
    unknown = [k for k in table if k not in names]
    if missing or unknown:
        raise CatalogError(f"{where}: " + "; ".join(
            ([f"missing {', '.join(missing)}"] if missing else []) +
            ([f"unknown {', '.join(unknown)}"] if unknown else [])))
    out = {}
    for f in dataclasses.fields(cls):
        v, tname = table[f.name], f.type.__name__
        kind = {"str": str, "int": int, "float": (int, float), "bool": bool}[tname]
        if isinstance(v, bool) and kind is not bool or not isinstance(v, kind):
            raise CatalogError(f"{where}: {f.name} must be a {tname}, got {v!r}")
        if tname in ("int", "float") and f.name in may_be_zero and v < 0:
            raise CatalogError(f"{where}: {f.name} must be zero or positive, got {v!r}")
        if tname in ("int", "float") and f.name not in may_be_zero and v <= 0:
            raise CatalogError(f"{where}: {f.name} must be positive, got {v!r}")
        if f.name in _EFFICIENCIES and not v <= 1:
            raise CatalogError(f"{where}: {f.name} must be in (0, 1], got {v!r}")
        out[f.name] = float(v) if tname == "float" else v
    return out


def load_model(name_or_path, folder: str = "models") -> ModelShape:
    """A model's shapes (built-in name under ``CONFIG_DIR / folder`` or TOML path);
    :class:`CatalogError` on a bad file. ``folder`` keeps each scenario's model list its own
    (``models``: Hermes; ``serving_models``: RAPID)."""
    if is_hf_config(name_or_path):
        return model_from_hf_config(name_or_path)
    path, doc = read_config(folder, name_or_path, what="model")
    m = ModelShape(**typed_fields(ModelShape, doc, str(path)))
    if m.mlp not in _MLP_KINDS:
        raise CatalogError(f"{path}: mlp must be one of {_MLP_KINDS}, got {m.mlp!r}")
    if m.activation not in _ACTIVATIONS:
        raise CatalogError(f"{path}: activation must be one of {_ACTIVATIONS}, got {m.activation!r}")
    if m.hidden % m.heads or m.heads % m.kv_heads:
        raise CatalogError(f"{path}: hidden ({m.hidden}) must be a multiple of heads ({m.heads}) "
                           f"and heads of kv_heads ({m.kv_heads})")
    check_params(path, m.params, m.nominal_params_b)
    return m


def is_hf_config(name_or_path) -> bool:
    """Whether a model argument names a Hugging Face config: a ``.json`` file or a folder with
    a ``config.json``."""
    path = Path(name_or_path)
    return path.suffix == ".json" or (path.is_dir() and (path / "config.json").is_file())


@dataclasses.dataclass(frozen=True)
class HfConfig:
    """A Hugging Face ``config.json`` as transformers reads it, with the keys the file itself
    sets (aliases resolved): transformers fills a missing field with its library default,
    which is not the model's, so :meth:`field` reads only what the file sets."""
    path: Path
    config: object
    keys: frozenset

    @property
    def model_type(self) -> str:
        return self.config.model_type

    @property
    def name(self) -> str:
        """The model's name: its folder's for ``.../NAME/config.json``, else the file's stem."""
        return self.path.parent.name if self.path.name == "config.json" else self.path.stem

    def require_family(self, families, kind: str, elsewhere: str) -> str:
        """The ``model_type`` if it is one of ``families`` (the ``kind`` of model a catalogue
        maps), else :class:`CatalogError` listing them and where other models go."""
        if self.model_type not in families:
            raise CatalogError(f"{self.path}: model_type {self.model_type!r} is not {kind} family "
                               f"this catalogue maps (it maps {', '.join(sorted(families))}; "
                               f"{elsewhere})")
        return self.model_type

    def field(self, *names: str, default=None, required: bool = True):
        """The value of the first of ``names`` the file sets; else ``default``;
        :class:`CatalogError` naming the file and the field when the file sets none of them
        and there is no default."""
        for n in names:
            if n in self.keys and getattr(self.config, n, None) is not None:
                return getattr(self.config, n)
        if default is not None or not required:
            return default
        raise CatalogError(f"{self.path}: {self.model_type} config has no {' / '.join(names)}, "
                           f"which the shapes need")


def read_hf_config(name_or_path) -> HfConfig:
    """The config of a ``config.json`` file or of the folder holding one, read offline."""
    path = Path(name_or_path)
    path = path / "config.json" if path.is_dir() else path
    if not path.is_file():
        raise CatalogError(f"{path}: no such file")
    try:
        raw = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise CatalogError(f"{path}: not a valid JSON config: {e}") from None
    if not isinstance(raw, dict):
        raise CatalogError(f"{path}: not a valid JSON config: the top level is not an object")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")           # never reach for the hub
    from transformers import AutoConfig
    try:
        config = AutoConfig.from_pretrained(str(path), local_files_only=True)
    except (ValueError, KeyError, OSError) as e:
        raise CatalogError(f"{path}: transformers cannot read it: {e}") from None
    aliases = getattr(config, "attribute_map", {})
    return HfConfig(path, config, frozenset(raw) | {aliases.get(k, k) for k in raw})


def with_implied_params(shape):
    """``shape`` (a model dataclass with ``params``) with its nominal count the one its shapes
    imply: a config states none."""
    return dataclasses.replace(shape, nominal_params_b=round(shape.params / 1e9, 3))


#: model_type -> (MLP kind, learned positions) of the dense families :func:`model_from_hf_config` maps
_DENSE_FAMILIES = {"opt": ("plain", True), "llama": ("gated", False), "mistral": ("gated", False),
                   "falcon": ("plain", False)}
_HF_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "gelu_new": "gelu", "gelu_pytorch_tanh": "gelu",
                   "silu": "silu", "swish": "silu"}


def model_from_hf_config(name_or_path) -> ModelShape:
    """A dense model's shapes from its Hugging Face ``config.json`` (file or folder)."""
    hf = read_hf_config(name_or_path)
    path, c, f = hf.path, hf.config, hf.field
    kind = hf.require_family(_DENSE_FAMILIES, "a dense", "MoE models go to TriMoE")
    mlp, learned = _DENSE_FAMILIES[kind]
    hidden, heads = f("hidden_size"), f("num_attention_heads", "n_head")
    if kind == "falcon":
        if f("alibi", default=False):
            raise CatalogError(f"{path}: falcon with alibi positions is not mapped")
        new = f("new_decoder_architecture", default=False)
        kv = f("num_kv_heads", "n_head_kv") if new else (1 if f("multi_query", default=True) else heads)
        ffn = f("ffn_hidden_size", default=4 * hidden)
        act = f("activation", default="gelu")
    elif kind == "opt":
        if f("word_embed_proj_dim", default=hidden) != hidden:
            raise CatalogError(f"{path}: word_embed_proj_dim ({c.word_embed_proj_dim}) differs from "
                               f"hidden_size ({hidden}): projected embeddings are not mapped")
        kv, ffn, act = heads, f("ffn_dim"), f("activation_function")
    else:
        kv, ffn, act = f("num_key_value_heads", default=heads), f("intermediate_size"), f("hidden_act")
    head_dim = f("head_dim", required=False)
    if head_dim is not None and head_dim * heads != hidden:
        raise CatalogError(f"{path}: head_dim ({head_dim}) x num_attention_heads ({heads}) is not "
                           f"hidden_size ({hidden}): such attention is not mapped")
    if act not in _HF_ACTIVATIONS:
        raise CatalogError(f"{path}: activation {act!r} is not one of {', '.join(_HF_ACTIVATIONS)}")
    shape = dict(name=hf.name, source=str(path),
                 nominal_params_b=0.0, hidden=hidden, layers=f("num_hidden_layers", "n_layer"), heads=heads,
                 kv_heads=kv, ffn=ffn, vocab=f("vocab_size"),
                 max_positions=f("max_position_embeddings", default=2048), learned_positions=learned,
                 mlp=mlp, activation=_HF_ACTIVATIONS[act],
                 # a flag, not a shape: unset, the model ties as its transformers class does
                 tied_embeddings=bool(c.tie_word_embeddings))
    for k in ("hidden", "layers", "heads", "kv_heads", "ffn", "vocab"):
        if not isinstance(shape[k], int) or shape[k] <= 0:
            raise CatalogError(f"{path}: {k} must be a positive integer, got {shape[k]!r}")
    if hidden % heads or heads % kv:
        raise CatalogError(f"{path}: hidden ({hidden}) must be a multiple of heads ({heads}) "
                           f"and heads of kv_heads ({kv})")
    return with_implied_params(ModelShape(**shape))


def check_params(path, params: int, nominal_b: float) -> None:
    """:class:`CatalogError` unless the ``params`` a model file's shapes imply are within
    ``PARAM_TOLERANCE`` of its nominal count (billions): a typo in a width is caught."""
    implied = params / 1e9
    if abs(implied - nominal_b) > PARAM_TOLERANCE * nominal_b:
        raise CatalogError(f"{path}: the shapes imply {implied:.2f} B parameters, the file says "
                           f"{nominal_b} B: a width or count is wrong")


def typed_tables(path, doc: dict, sections: dict, may_be_zero=()) -> dict:
    """``doc``'s sections, exactly those of ``sections`` (name -> dataclass), each a table with
    its class's fields checked by :func:`typed_fields` (``may_be_zero`` passed on): name -> field
    values."""
    unknown = [k for k in doc if k not in sections]
    missing = [k for k in sections if k not in doc]
    if unknown or missing:
        raise CatalogError(f"{path}: sections must be exactly {', '.join(sections)}" +
                           (f"; missing {', '.join(missing)}" if missing else "") +
                           (f"; unknown {', '.join(unknown)}" if unknown else ""))
    parts = {}
    for key, cls in sections.items():
        if not isinstance(doc[key], dict):
            raise CatalogError(f"{path}: [{key}] must be a table")
        parts[key] = typed_fields(cls, doc[key], f"{path} [{key}]", may_be_zero)
    return parts
