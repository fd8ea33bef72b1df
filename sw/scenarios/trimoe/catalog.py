"""The TriMoE scenario's catalogue: MoE model shapes and the GPU + AMX CPU + NDP-DIMM system.

Models (``sw/configs/moe_models/<name>.toml``): a decoder-only mixture-of-experts transformer
as its public configuration gives it: leading dense layers, routed experts per MoE layer and
per token, always-active shared experts, the SwiGLU width of one expert, the attention's
parameters per layer (stated with their derivation: DeepSeek-V2's MLA has no simple formula),
the source URL and the nominal parameter count, which :func:`load_moe_model` checks against the
count the shapes imply (within ``catalog.PARAM_TOLERANCE``: a typo in a width is caught).

Hardware (``sw/configs/trimoe_hardware/<name>.toml``): the GPU (its time per expert from the
measured fit its ``measured`` key names, ``sw/scenarios/gpu.py``), the PCIe link, the AMX CPU
with its DDR5 channels, and the NDP-DIMMs that populate those channels; every number with its
source or marked as an assumption in the file. The CPU reaches ``compute_efficiency x t / (t +
half_efficiency_tokens)`` of its peak on an expert with ``t`` tokens (:meth:`AmxCpu.efficiency_at`).

The file rules are those of :mod:`ndpdimm.sw.scenarios.catalog` (``hw/config_file.py``): every
key required, no other accepted, every number ``{ value = ..., source = "..." }``; a missing,
unknown or mistyped key, a number without its source, NaN or infinity, or an impossible value
raises :class:`~ndpdimm.sw.scenarios.catalog.CatalogError` naming the file and the key.

``load_moe_model`` also takes a Hugging Face ``config.json`` (the file or its folder), read
offline: :func:`moe_model_from_hf_config` maps the Mixtral, Qwen-MoE (``qwen2_moe``,
``qwen3_moe``) and DeepSeek-V2/V3 families the way the built-in files were written from those
configs (attention parameters from the projections' widths, MLA's low-rank ones for DeepSeek);
the nominal count is the one the shapes imply. Anything it cannot map raises ``CatalogError``
naming the file and the field.
"""

import dataclasses

from ndpdimm.sw.scenarios.catalog import (
    CatalogError,
    Gpu,
    Pcie,
    available_names,
    catalog_path,
    check_not_bare_folder,
    check_params,
    is_hf_config,
    load_catalog,
    read_hf_config,
    with_implied_params,
)

__all__ = ["MoeShape", "TriMoeGpu", "AmxCpu", "TriMoeNdp", "TriMoeHardware", "load_moe_model",
           "moe_model_from_hf_config", "list_moe_models", "load_trimoe_hardware", "list_trimoe_hardware", "CatalogError"]

_MODELS, _HARDWARE = "moe_models", "trimoe_hardware"


@dataclasses.dataclass(frozen=True)
class MoeShape:
    """A mixture-of-experts transformer's shapes (see ``sw/configs/moe_models``)."""
    name: str
    source: str
    nominal_params_b: float
    hidden: int
    layers: int
    dense_layers: int          # leading layers with a dense MLP instead of MoE
    dense_ffn: int             # their SwiGLU width (0 when dense_layers == 0)
    experts: int               # routed experts per MoE layer
    top_k: int                 # routed experts per token
    shared_experts: int        # always-active experts per MoE layer
    expert_ffn: int            # SwiGLU width of one expert
    heads: int
    kv_heads: int
    attention_params_per_layer: int
    vocab: int
    tied_embeddings: bool

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    @property
    def expert_params(self) -> int:
        """One expert: gate and up (``expert_ffn x hidden``) and down (``hidden x expert_ffn``)."""
        return 3 * self.hidden * self.expert_ffn

    def expert_bytes(self, elem_bytes: int = 2) -> int:
        """One expert's weights in bytes (BF16 by default)."""
        return self.expert_params * elem_bytes

    def _common_params(self) -> int:
        """Everything but the experts: embeddings, attention, dense MLPs, routers."""
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return (embed + self.layers * self.attention_params_per_layer
                + self.dense_layers * 3 * self.hidden * self.dense_ffn
                + self.moe_layers * self.hidden * self.experts)

    @property
    def params(self) -> int:
        """Weights the shapes imply, all experts included (norms and biases left out)."""
        return self._common_params() + (self.moe_layers * (self.experts + self.shared_experts)
                                        * self.expert_params)

    @property
    def active_params(self) -> int:
        """Weights one token uses: ``top_k`` routed and the shared experts per MoE layer, and the
        rest (the embeddings counted, as the published "activated" figures count them)."""
        return self._common_params() + (self.moe_layers * (self.top_k + self.shared_experts)
                                        * self.expert_params)


def _efficiency(peak: float, half_tokens: float, tokens) -> float:
    if tokens < 0:
        raise ValueError(f"tokens must be >= 0, got {tokens!r}")
    return peak * tokens / (tokens + half_tokens)


@dataclasses.dataclass(frozen=True)
class TriMoeGpu(Gpu):
    """A :class:`~ndpdimm.sw.scenarios.catalog.Gpu` (``fp16_tflops`` holds the BF16 dense peak here) with
    the memory experts cannot use."""
    reserved_gb: float              # attention weights, KV cache, activations, workspace


@dataclasses.dataclass(frozen=True)
class AmxCpu:
    """A CPU with AMX, reading expert weights from its DDR5 channels (the NDP-DIMMs)."""
    name: str
    sockets: int
    cores: int
    amx_bf16_tflops: float          # peak over all sockets
    compute_efficiency: float
    half_efficiency_tokens: float
    kernel_overhead_us: float       # per expert: dispatching the GEMMs over the cores and joining
    memory_channels: int            # over all sockets
    channel_bandwidth_gbs: float
    memory_efficiency: float
    memory_gb: float
    power_w: float

    @property
    def memory_bandwidth_gbs(self) -> float:
        """Peak read bandwidth of all channels, GB/s."""
        return self.memory_channels * self.channel_bandwidth_gbs

    def efficiency_at(self, tokens) -> float:
        """Achieved fraction of AMX peak on one expert's GEMMs with ``tokens`` tokens."""
        return _efficiency(self.compute_efficiency, self.half_efficiency_tokens, tokens)


@dataclasses.dataclass(frozen=True)
class TriMoeNdp:
    dimms: int
    dimms_per_channel: int          # the DIMMs populate the CPU's channels
    capacity_gb: float
    link_gbs: float                 # DIMM-Link, per direction
    power_w: float                  # per DIMM while its NDP core computes


@dataclasses.dataclass(frozen=True)
class TriMoeHardware:
    name: str
    gpu: TriMoeGpu
    pcie: Pcie
    cpu: AmxCpu
    ndp: TriMoeNdp


def list_moe_models() -> list:
    """Names of the built-in MoE model files."""
    return available_names(_MODELS)


def list_trimoe_hardware() -> list:
    """Names of the built-in TriMoE hardware files."""
    return available_names(_HARDWARE)


def load_moe_model(name_or_path) -> MoeShape:
    """An MoE model's shapes (built-in name or TOML path); :class:`CatalogError` on a bad file."""
    if is_hf_config(name_or_path):
        return moe_model_from_hf_config(name_or_path)
    check_not_bare_folder(name_or_path, _MODELS, "MoE model")
    m = load_catalog(_MODELS, name_or_path, MoeShape, what="MoE model",
                     may_be_zero=("dense_layers", "dense_ffn", "shared_experts"))
    path = catalog_path(_MODELS, name_or_path, what="MoE model")
    _check_moe(path, m)
    check_params(path, m.params, m.nominal_params_b)
    return m


_MOE_FAMILIES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v2", "deepseek_v3")


def moe_model_from_hf_config(name_or_path) -> MoeShape:
    """An MoE model's shapes from its Hugging Face ``config.json`` (file or folder)."""
    hf = read_hf_config(name_or_path)
    path, c, f = hf.path, hf.config, hf.field
    kind = hf.require_family(_MOE_FAMILIES, "an MoE", "dense models go to Hermes")
    hidden, layers, heads = f("hidden_size"), f("num_hidden_layers"), f("num_attention_heads")
    kv = f("num_key_value_heads", default=heads)
    if kind.startswith("deepseek"):
        if f("moe_layer_freq", default=1) != 1:
            raise CatalogError(f"{path}: moe_layer_freq {c.moe_layer_freq} is not mapped (only 1)")
        dense_layers = f("first_k_dense_replace", default=0)
        dense_ffn = f("intermediate_size") if dense_layers else 0
        experts, shared = f("n_routed_experts"), f("n_shared_experts", default=0)
        expert_ffn = f("moe_intermediate_size")
        nope, rope, v_dim = f("qk_nope_head_dim"), f("qk_rope_head_dim"), f("v_head_dim")
        kv_rank, q_rank = f("kv_lora_rank"), f("q_lora_rank", required=False)
        q = hidden * q_rank + q_rank * heads * (nope + rope) if q_rank else hidden * heads * (nope + rope)
        attention = (q + hidden * (kv_rank + rope) + kv_rank * heads * (nope + v_dim)
                     + heads * v_dim * hidden)
    else:
        if kind == "mixtral":
            experts, expert_ffn, shared = f("num_local_experts"), f("intermediate_size"), 0
        else:
            experts, expert_ffn = f("num_experts"), f("moe_intermediate_size")
            if f("decoder_sparse_step", default=1) != 1 or list(f("mlp_only_layers", default=[])):
                raise CatalogError(f"{path}: decoder_sparse_step / mlp_only_layers other than every "
                                   f"layer MoE are not mapped")
            # Qwen2-MoE's one shared expert is k routed experts wide: as weights and FLOPs it is
            # k shared experts of the routed width (their outputs add)
            width = f("shared_expert_intermediate_size", default=0) if kind == "qwen2_moe" else 0
            if width % expert_ffn:
                raise CatalogError(f"{path}: shared_expert_intermediate_size ({width}) is not a "
                                   f"multiple of moe_intermediate_size ({expert_ffn})")
            shared = width // expert_ffn
        dense_layers, dense_ffn = 0, 0
        head_dim = f("head_dim", default=hidden // heads)
        attention = 2 * hidden * heads * head_dim + 2 * hidden * kv * head_dim
    m = MoeShape(name=hf.name, source=str(path), nominal_params_b=0.0, hidden=hidden, layers=layers,
                 dense_layers=dense_layers, dense_ffn=dense_ffn, experts=experts,
                 top_k=f("num_experts_per_tok"), shared_experts=shared, expert_ffn=expert_ffn,
                 heads=heads, kv_heads=kv, attention_params_per_layer=attention,
                 vocab=f("vocab_size"),
                 tied_embeddings=bool(c.tie_word_embeddings))   # unset: its class's default
    _check_moe(path, m)
    return with_implied_params(m)


def _check_moe(path, m: MoeShape) -> None:
    """:class:`CatalogError` for shapes no MoE model can have."""
    if m.top_k > m.experts:
        raise CatalogError(f"{path}: top_k ({m.top_k}) must not exceed experts ({m.experts})")
    if m.dense_layers >= m.layers:
        raise CatalogError(f"{path}: dense_layers ({m.dense_layers}) must be fewer than layers "
                           f"({m.layers}): an MoE model needs an MoE layer")
    if (m.dense_ffn == 0) != (m.dense_layers == 0):
        raise CatalogError(f"{path}: dense_ffn ({m.dense_ffn}) must be 0 exactly when "
                           f"dense_layers ({m.dense_layers}) is 0")
    if m.heads % m.kv_heads:
        raise CatalogError(f"{path}: heads ({m.heads}) must be a multiple of kv_heads "
                           f"({m.kv_heads})")


def load_trimoe_hardware(name_or_path="h100-amx") -> TriMoeHardware:
    """The TriMoE system (built-in name or TOML path); :class:`CatalogError` on a bad file."""
    hw = load_catalog(_HARDWARE, name_or_path, TriMoeHardware, what="TriMoE hardware",
                      stem_as="name")
    path = catalog_path(_HARDWARE, name_or_path, what="TriMoE hardware")
    gpu, cpu, ndp = hw.gpu, hw.cpu, hw.ndp
    if gpu.reserved_gb >= gpu.memory_gb:
        raise CatalogError(f"{path}: gpu.reserved_gb ({gpu.reserved_gb}) leaves no room for "
                           f"experts in memory_gb ({gpu.memory_gb})")
    if ndp.dimms != cpu.memory_channels * ndp.dimms_per_channel:
        raise CatalogError(f"{path}: ndp.dimms ({ndp.dimms}) must fill the CPU's channels: "
                           f"memory_channels ({cpu.memory_channels}) x dimms_per_channel "
                           f"({ndp.dimms_per_channel})")
    if abs(cpu.memory_gb - ndp.dimms * ndp.capacity_gb) > 1e-9 * cpu.memory_gb:
        raise CatalogError(f"{path}: cpu.memory_gb ({cpu.memory_gb}) must be the NDP-DIMMs' "
                           f"dimms x capacity_gb ({ndp.dimms * ndp.capacity_gb}): they are the "
                           f"host memory")
    return hw
