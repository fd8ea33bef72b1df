"""How long a serving GPU takes for a prefill batch or a decode iteration, and what the NDP-DIMM
decode tier adds: the RAPID scenario's performance and power model (documented formulas).

**Prefill** of prompts of lengths ``L_i`` (``T = sum L_i`` tokens) on one GPU at cap ``P``::

    flops   = 2 (N - 2 V h) T + 2 V h n  +  2 layers h sum L_i^2
    seconds = prefill_overhead + flops / (peak x prefill_mfu x speed_prefill(P))

``N`` the parameters, ``V h`` the embedding (looked up, not multiplied) and the LM head (one
row of logits per prompt, ``n`` prompts); the last term is causal attention (``L^2 / 2`` scores
and as many weighted sums per layer, each ``h`` MACs).

**Decode** iteration of ``B`` requests holding ``C = sum c_i`` cached tokens, GPU only::

    bytes   = 2 (N - V h) + kv_bytes_per_token x C          (weights once, then every KV)
    seconds = decode_overhead + max(bytes / (hbm x decode_bw_efficiency),
                                    2 (N - V h) B / (peak x decode_mfu)) / speed_decode(P)

**Decode with the NDP-DIMM tier**: the KV cache lives on ``D`` NDP-DIMMs (the decode GPUs
share the pool equally) and each layer's attention runs there; the GPU reads only weights::

    gpu       = max(2 (N - V h) / (hbm x eff), compute) / speed_decode(P)
    attention = layers x kv_heads x (B x fixed + slope x C) / (D x f_ndp)
              + layers x (per_layer_overhead + B x 2 x h x 2 B / gpu_link)
    seconds   = decode_overhead + gpu + attention

``fixed`` and ``slope`` (cycles, one sequence, one K/V head, one layer: ``K q`` for the
query heads sharing it, scale, softmax, ``V^T p``) are measured through the driver API on the
RTL or the calibrated model (:func:`ndpdimm.sw.kernels.attention.ndp_attention_cost`). The GPU and
the DIMMs take turns layer by layer (layer ``l + 1`` needs layer ``l``'s attention output), so
the two add; overlapping two micro-batches is not modelled.

**NDP-DIMM power** (figures of ``sw/configs/energy/hermes_energy.toml``): each DIMM draws its
background and idle-core power always; attention adds the core's busy power while it runs,
``dimm_pj_per_bit`` per bit of KV read and ``mac_pj`` per MAC. The node budget reserves each
DIMM's peak (:attr:`ServingPerf.ndp_reserved_w`: every DIMM streaming at its peak internal
bandwidth with the core busy), so the cap holds whatever the DIMMs do.

**KV capacity** of a decode worker: ``hbm x (1 - kv_reserve) - weights`` on a GPU; its
``D / decode GPUs`` share of the DIMMs' capacity in the NDP tier.
"""

import dataclasses
import functools
import warnings

from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.kernels.attention import ndp_attention_cost
from ndpdimm.sw.scenarios.base import cost_dimm
from ndpdimm.sw.scenarios.catalog import ModelShape
from ndpdimm.sw.scenarios.rapid.catalog import ServingNode

__all__ = ["ServingPerf", "NdpAttention", "measure_ndp_attention"]

_ELEM = 2   # BF16/FP16 bytes


@dataclasses.dataclass(frozen=True)
class NdpAttention:
    """The measured attention line and where it came from."""
    fixed_cycles: float       # per sequence, K/V head and layer
    slope_cycles: float       # per cached token
    backend: str              # "rtl" or "model"
    units: int                # GEMV units of the measured core
    samples: tuple            # (context, cycles) measured


@dataclasses.dataclass(frozen=True)
class ServingPerf:
    model: ModelShape
    node: ServingNode
    ndp: NdpAttention | None = None
    dimm_background_w: float = 0.0     # per DIMM, from the energy file
    dimm_idle_core_w: float = 0.0
    dimm_busy_core_w: float = 0.0
    dimm_pj_per_bit: float = 0.0
    mac_pj: float = 0.0

    # ---- shapes ----
    @functools.cached_property
    def kv_bytes_per_token(self) -> int:
        m = self.model
        return 2 * m.layers * m.kv_dim * _ELEM

    @functools.cached_property
    def matmul_params(self) -> int:
        """Parameters multiplied per token (the input embedding is looked up)."""
        return self.model.params - self.model.vocab * self.model.hidden

    @functools.cached_property
    def weight_bytes(self) -> int:
        return self.model.params * _ELEM

    # ---- prefill ----
    def prefill_parts(self, tokens: int, prompts: int, square_sum: float) -> tuple:
        """``(fixed_s, scalable_s)`` of a prefill batch: its time at cap ``P`` is
        ``fixed_s + scalable_s / speed_prefill(P)``."""
        m, g = self.model, self.node.gpu
        vh = m.vocab * m.hidden
        flops = (2 * (m.params - 2 * vh) * tokens + 2 * vh * prompts
                 + 2 * m.layers * m.hidden * square_sum)
        return g.prefill_overhead_s, flops / (g.peak_tflops * 1e12 * g.prefill_mfu)

    def prefill_seconds(self, tokens: int, prompts: int, square_sum: float, cap_w: float) -> float:
        fixed, scalable = self.prefill_parts(tokens, prompts, square_sum)
        return fixed + scalable / self.node.prefill_power.speed(cap_w)

    # ---- decode ----
    def _gpu_decode(self, batch: int, kv_bytes: float) -> float:
        g = self.node.gpu
        mem = (self.matmul_params * _ELEM + kv_bytes) / (g.hbm_tb_s * 1e12 * g.decode_bw_efficiency)
        compute = 2 * self.matmul_params * batch / (g.peak_tflops * 1e12 * g.decode_mfu)
        return max(mem, compute)

    def decode_parts(self, batch: int, context_sum: float, decode_gpus: int = 1) -> tuple:
        """``(fixed_s, scalable_s)`` of one iteration of ``batch`` requests holding
        ``context_sum`` cached tokens (time at cap ``P``: ``fixed_s + scalable_s /
        speed_decode(P)``); with the NDP tier the DIMM pool is shared by ``decode_gpus``
        workers and its attention time is in ``fixed_s`` (the DIMMs do not follow the GPU's
        cap)."""
        if batch == 0:
            return 0.0, 0.0
        overhead = self.node.gpu.decode_overhead_s
        if self.ndp is None:
            return overhead, self._gpu_decode(batch, self.kv_bytes_per_token * context_sum)
        return (overhead + self.ndp_attention_seconds(batch, context_sum, decode_gpus),
                self._gpu_decode(batch, 0.0))

    def decode_seconds(self, batch: int, context_sum: float, cap_w: float,
                       decode_gpus: int = 1) -> float:
        fixed, scalable = self.decode_parts(batch, context_sum, decode_gpus)
        return fixed + scalable / self.node.decode_power.speed(cap_w)

    def ndp_attention_seconds(self, batch: int, context_sum: float, decode_gpus: int) -> float:
        m, t, a = self.model, self.node.ndp, self.ndp
        dimms = t.dimms / decode_gpus
        cycles = m.layers * m.kv_heads * (batch * a.fixed_cycles + a.slope_cycles * context_sum)
        io = batch * 2 * m.hidden * _ELEM / (t.gpu_link_gb_s * 1e9)
        return cycles / (dimms * NDP_CLOCK_HZ) + m.layers * (t.per_layer_overhead_s + io)

    def check_fits(self) -> None:
        """``ValueError`` with the sizes if the model's weights do not fit one GPU (every worker
        holds the whole model in its HBM, less the ``kv_reserve`` share kept for activations)."""
        g = self.node.gpu
        room = g.hbm_gb * 1e9 * (1 - g.kv_reserve)
        if self.weight_bytes >= room:
            raise ValueError(f"{self.model.name}: {self.weight_bytes / 1e9:.1f} GB of weights do "
                             f"not fit one GPU of {self.node.name} ({g.hbm_gb:g} GB HBM, "
                             f"{room / 1e9:.1f} GB of it for weights and KV cache): every worker "
                             "holds the whole model")

    def kv_capacity_bytes(self, decode_gpus: int = 1) -> float:
        g = self.node.gpu
        if self.ndp is None:
            return g.hbm_gb * 1e9 * (1 - g.kv_reserve) - self.weight_bytes
        return self.node.ndp.dimms / decode_gpus * self.node.ndp.capacity_gb * 2 ** 30

    # ---- NDP-DIMM power ----
    @property
    def ndp_idle_w(self) -> float:
        """The whole tier's draw with no attention running."""
        return self.node.ndp.dimms * (self.dimm_background_w + self.dimm_idle_core_w)

    @functools.cached_property
    def ndp_reserved_w(self) -> float:
        """The tier's peak draw, reserved out of the node budget (see the module docstring)."""
        if self.ndp is None:
            return 0.0
        t, m = self.node.ndp, self.model
        bytes_s = t.peak_bandwidth_gb_s * 1e9
        macs_s = bytes_s / (2 * _ELEM) * (m.heads // m.kv_heads)   # per K or V element: group MACs
        return t.dimms * (self.dimm_background_w + self.dimm_busy_core_w
                          + bytes_s * 8 * self.dimm_pj_per_bit * 1e-12 + macs_s * self.mac_pj * 1e-12)

    def ndp_attention_joules(self, batch: int, context_sum: float, seconds: float,
                             decode_gpus: int) -> float:
        """Energy above idle of one iteration's attention on its share of the DIMMs."""
        m, t = self.model, self.node.ndp
        kv = self.kv_bytes_per_token * context_sum
        macs = kv / _ELEM * (m.heads // m.kv_heads)
        busy = t.dimms / decode_gpus * (self.dimm_busy_core_w - self.dimm_idle_core_w) * seconds
        return kv * 8 * self.dimm_pj_per_bit * 1e-12 + macs * self.mac_pj * 1e-12 + busy


def measure_ndp_attention(cfg, model, log=None) -> NdpAttention:
    """The attention line through the driver API on ``cfg.backend`` of ``cfg``'s core (a
    :class:`~ndpdimm.sw.scenarios.rapid.config.RapidConfig`): one sequence, one K/V head, one
    layer, at context lengths 128 and 512 on the model (32 and 96 on the RTL)."""
    core = cfg.core()
    contexts = (128, 512) if cfg.backend == "model" else (32, 96)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with cost_dimm(cfg.backend, core) as dimm:
            line = ndp_attention_cost(model.head_dim, model.heads // model.kv_heads, dimm,
                                          samples=contexts)
    if log:
        for w in {str(w.message) for w in caught}:
            log(f"[rapid] note: {w}")
    return NdpAttention(line.fixed, line.slope, cfg.backend, cfg.core_units, line.samples)
