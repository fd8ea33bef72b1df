"""The scenarios' shared catalogue: model shapes, GPU and PCIe records, the strict TOML readers.

Models (``sw/configs/models/<name>.toml``): the shapes of a decoder-only
transformer as its public configuration gives them (hidden size, layers,
query and K/V heads, MLP width and kind, vocabulary, positions), the source
URL and the nominal parameter count, which :func:`load_model` checks against
the count the shapes imply (within ``PARAM_TOLERANCE``: a typo in a width is
caught). :class:`Gpu` and :class:`Pcie` are the records every scenario's hardware file uses;
each scenario's own hardware catalogue (``hermes/catalog.py``, ``trimoe/catalog.py``,
``rapid/catalog.py``) and the energy file (``energy.py``) load theirs with
:func:`load_catalog` and check their numbers with :func:`check_numbers`.

Files are read by the project's configuration loader (``hw/config_file.py``): every key of a
file is required and no other key is accepted, every number is written
``{ value = ..., source = "..." }`` and is finite; a missing, unknown or mistyped key, a number
without its source, NaN or infinity raises :class:`CatalogError` (the loader's
:class:`~ndpdimm.hw.config_file.ConfigError`) naming the file and the key, before anything
runs. The built-in files are found in the installed package (``importlib.resources``:
``CONFIG_DIR``). ``load_model`` takes a built-in name (``list_models()``) or a path to a TOML
file of the same form.

``load_model`` also takes a Hugging Face ``config.json`` (the file, or a folder holding
one), read offline with ``transformers.AutoConfig``: :func:`model_from_hf_config` maps the
OPT, LLaMA / Mistral and Falcon families onto :class:`ModelShape` the way the built-in files
were written from those configs (the source is the file, the nominal parameter count the one
the shapes imply, since a config states none). An architecture it cannot map, or a config
missing a field the mapping needs, a number field that is not a number, or a NaN or infinity
anywhere in the file raises :class:`CatalogError` naming the file and the field.
"""

import dataclasses
import json
import os
from pathlib import Path

from ndpdimm.hw import config_file
from ndpdimm.hw.config_file import ConfigError

__all__ = ["CatalogError", "ModelShape", "Gpu", "Pcie",
           "load_model", "list_models", "PARAM_TOLERANCE",
           "CONFIG_DIR", "is_hf_config", "check_not_bare_folder", "HfConfig", "read_hf_config", "with_implied_params",
           "model_from_hf_config", "available_names", "catalog_path", "load_catalog",
           "check_numbers", "check_params"]

#: The packaged configuration folders (``sw/configs/``), found through ``importlib.resources``.
CONFIG_DIR = config_file.package_folder("ndpdimm.sw", "configs")
#: Largest relative difference between a model file's nominal parameter count and its shapes'.
PARAM_TOLERANCE = 0.03

#: A catalogue file is missing, malformed, or describes an impossible configuration: the
#: configuration loader's one error type (a ``ValueError``), under the catalogue's name.
CatalogError = ConfigError


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
    # "" (the roofline above), a GPU of sw/configs/gpus whose measured fit this card charges
    # (carried through the datasheet ratios), or a fit's .json: measured/gpus.py fit_for
    measured: str

    def __post_init__(self):
        if self.measured:                     # refused at load: an unknown name, a missing fit
            from ndpdimm.sw.scenarios.measured.gpus import check_measured
            check_measured(self.measured)


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
    return config_file.builtin_names(CONFIG_DIR / kind)


def list_models() -> list:
    """Names of the built-in model files."""
    return available_names("models")


def catalog_path(kind: str, name_or_path, what: str | None = None) -> Path:
    """The file of a built-in name under ``CONFIG_DIR / kind`` or a TOML path; ``what`` names
    the kind in the unknown-name message (default: from ``kind``)."""
    what = what or (kind[:-1] if kind == "models" else kind)
    return config_file.find(CONFIG_DIR / kind, name_or_path, what)


def load_catalog(kind: str, name_or_path, schema, *, what: str | None = None,
                 stem_as: str | None = None, path_as: str | None = None,
                 may_be_zero=()):
    """The dataclass ``schema`` loaded from a built-in name under ``CONFIG_DIR / kind`` or a
    TOML path (``hw/config_file.py``: keys exactly the fields, numbers with their sources),
    its numbers checked by :func:`check_numbers` (``may_be_zero`` passed on); the fields
    ``stem_as`` and ``path_as`` are the file's stem and path, not keys of the file."""
    path = catalog_path(kind, name_or_path, what)
    given = {**({stem_as: path.stem} if stem_as else {}), **({path_as: str(path)} if path_as else {})}
    obj = config_file.load(path, schema, given=given)
    check_numbers(path, obj, may_be_zero)
    return obj


def check_numbers(path, obj, may_be_zero=(), prefix: str = "") -> None:
    """:class:`CatalogError` naming the file and the key unless every number of the dataclass
    ``obj`` (its tables' included) is positive (those named in ``may_be_zero`` non-negative),
    and the efficiencies in (0, 1]."""
    for f in dataclasses.fields(obj):
        v, key = getattr(obj, f.name), f"{prefix}{f.name}"
        if dataclasses.is_dataclass(v):
            check_numbers(path, v, may_be_zero, f"{key}.")
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            if f.name in may_be_zero and v < 0:
                raise CatalogError(f"{path}: {key} must be zero or positive, got {v!r}")
            if f.name not in may_be_zero and v <= 0:
                raise CatalogError(f"{path}: {key} must be positive, got {v!r}")
            if f.name in _EFFICIENCIES and not v <= 1:
                raise CatalogError(f"{path}: {key} must be in (0, 1], got {v!r}")


def load_model(name_or_path, folder: str = "models") -> ModelShape:
    """A model's shapes (built-in name under ``CONFIG_DIR / folder`` or TOML path);
    :class:`CatalogError` on a bad file. ``folder`` keeps each scenario's model list its own
    (``models``: Hermes; ``serving_models``: RAPID)."""
    if is_hf_config(name_or_path):
        return model_from_hf_config(name_or_path)
    check_not_bare_folder(name_or_path, folder, "model")
    m = load_catalog(folder, name_or_path, ModelShape, what="model")
    path = catalog_path(folder, name_or_path, what="model")
    if m.mlp not in _MLP_KINDS:
        raise CatalogError(f"{path}: mlp must be one of {_MLP_KINDS}, got {m.mlp!r}")
    if m.activation not in _ACTIVATIONS:
        raise CatalogError(f"{path}: activation must be one of {_ACTIVATIONS}, got {m.activation!r}")
    if m.hidden % m.heads or m.heads % m.kv_heads:
        raise CatalogError(f"{path}: hidden ({m.hidden}) must be a multiple of heads ({m.heads}) "
                           f"and heads of kv_heads ({m.kv_heads})")
    check_params(path, m.params, m.nominal_params_b)
    return m


def check_not_bare_folder(name_or_path, kind: str, what: str) -> None:
    """:class:`CatalogError` for a folder given as a model without the ``config.json`` that
    would make it a Hugging Face model folder (call after :func:`is_hf_config` said no)."""
    path = Path(name_or_path)
    if path.is_dir():
        raise CatalogError(f"{what} {str(name_or_path)!r} is a folder without a config.json: give "
                           f"a Hugging Face model folder (holding its config.json), a config.json, "
                           f"a .toml file or a built-in name "
                           f"({', '.join(available_names(kind))})")


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


#: The fields of a ``config.json`` the mappings read as integers (dense and MoE families).
_HF_INT_FIELDS = (
    "hidden_size", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head",
    "num_key_value_heads", "num_kv_heads", "n_head_kv", "intermediate_size", "ffn_dim",
    "ffn_hidden_size", "vocab_size", "max_position_embeddings", "head_dim", "word_embed_proj_dim",
    "moe_layer_freq", "first_k_dense_replace", "n_routed_experts", "n_shared_experts",
    "moe_intermediate_size", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim", "kv_lora_rank",
    "q_lora_rank", "num_local_experts", "num_experts", "decoder_sparse_step",
    "shared_expert_intermediate_size", "num_experts_per_tok")


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
    bad = config_file.non_finite(raw)            # json reads NaN, Infinity and 1e999
    if bad is not None:
        raise CatalogError(f"{path}: {bad[0]} is {bad[1]!r}: numbers must be finite")
    for key in _HF_INT_FIELDS:                   # before transformers computes with them
        v = raw.get(key)
        if v is not None and (not isinstance(v, int) or isinstance(v, bool)):
            raise CatalogError(f"{path}: {key} must be an integer, got {v!r}")
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
