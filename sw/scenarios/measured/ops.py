"""What each op of a profile table computes, from the profiled model's dimensions.

The two profilers name the ops of one transformer layer (and the embedding and LM head)
differently; each name maps here to one kind:

* ``linear``: ``Y[tokens, n_out] = X[tokens, n_in] W^T`` with ``W`` of ``[n_out, n_in]``; with
  tensor parallelism of degree ``tp`` the column-parallel layers (QKV, gate/up, experts' w1/w3,
  the LM head) divide ``n_out`` by ``tp`` and the row-parallel ones (O, down, experts' w2)
  ``n_in``, as Megatron-style sharding does;
* ``elementwise``: an op reading and writing ``tokens x width`` elements (norms, activation,
  rotary embedding, residual add; the embedding gathers ``tokens`` rows of ``hidden``);
* ``other``: read, but neither fitted nor checked: LLMServingSim's MoE ``gate`` is the router
  (its ``[experts, hidden]`` GEMV with the softmax and top-k: 43 us at one token on the H100,
  where a 1,000 times larger ``k_proj`` takes 8 us).

LLaMA-family shapes (head dimension ``hidden / heads``): QKV ``[hidden + 2 kv_heads x head_dim,
hidden]``, O ``[hidden, hidden]``, gate/up ``[2 ffn, hidden]`` (``[ffn, hidden]`` for a plain
MLP), down ``[hidden, ffn]``, an expert's w1/w3 ``[expert_ffn, hidden]`` and w2 ``[hidden,
expert_ffn]``, the LM head ``[vocab, hidden]``. An op name
not listed is an error (the table's reader names the file and the line).
"""

import dataclasses

__all__ = ["ModelDims", "OpShape", "KINDS", "OPS", "CLASSES", "op_shape"]

KINDS = ("linear", "elementwise", "other")


@dataclasses.dataclass(frozen=True)
class ModelDims:
    """The dimensions of a profiled model that its ops' shapes need."""
    name: str
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    gated: bool = True
    experts: int = 0
    expert_ffn: int = 0

    def __post_init__(self):
        for f in ("hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "expert_ffn"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{self.name}: {f} must be an int >= 0, got {v!r}")
        if not self.heads or self.hidden % self.heads or self.heads % max(1, self.kv_heads):
            raise ValueError(f"{self.name}: hidden {self.hidden} must be a multiple of heads "
                             f"{self.heads}, and heads of kv_heads {self.kv_heads}")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


@dataclasses.dataclass(frozen=True)
class OpShape:
    """One op's work at ``tp``: ``kind`` and, for a linear op, ``n_out`` x ``n_in``; for an
    element-wise one, ``width`` elements per token."""
    kind: str
    n_out: int = 0
    n_in: int = 0
    width: int = 0


def _qkv(d):
    return d.hidden + 2 * d.kv_heads * d.head_dim


#: op name -> (kind, function of (dims) -> (n_out, n_in) or width, the dimension tp divides:
#: "out", "in" or None)
OPS = {
    # LLMServingSim (vLLM module names)
    "qkv_proj": ("linear", lambda d: (_qkv(d), d.hidden), "out"),
    "q_proj": ("linear", lambda d: (d.hidden, d.hidden), "out"),
    "k_proj": ("linear", lambda d: (d.kv_heads * d.head_dim, d.hidden), "out"),
    "v_proj": ("linear", lambda d: (d.kv_heads * d.head_dim, d.hidden), "out"),
    "o_proj": ("linear", lambda d: (d.hidden, d.hidden), "in"),
    "gate_up_proj": ("linear", lambda d: ((2 if d.gated else 1) * d.ffn, d.hidden), "out"),
    "down_proj": ("linear", lambda d: (d.hidden, d.ffn), "in"),
    "expert.w1": ("linear", lambda d: (d.expert_ffn, d.hidden), "out"),
    "expert.w3": ("linear", lambda d: (d.expert_ffn, d.hidden), "out"),
    "expert.w2": ("linear", lambda d: (d.hidden, d.expert_ffn), "in"),
    "gate": ("other", lambda d: (d.experts, d.hidden), None),
    "lm_head": ("linear", lambda d: (d.vocab, d.hidden), "out"),
    "embedding": ("elementwise", lambda d: d.hidden, None),
    "layernorm": ("elementwise", lambda d: d.hidden, None),
    "input_layernorm": ("elementwise", lambda d: d.hidden, None),
    "post_layernorm": ("elementwise", lambda d: d.hidden, None),
    "final_layernorm": ("elementwise", lambda d: d.hidden, None),
    "act_fn": ("elementwise", lambda d: (2 if d.gated else 1) * (d.expert_ffn or d.ffn), "out"),
    "rotary_emb": ("elementwise", lambda d: _qkv(d) - d.kv_heads * d.head_dim, "out"),
    "rope": ("elementwise", lambda d: _qkv(d) - d.kv_heads * d.head_dim, "out"),
    # Vidur (its own names for the same ops)
    "emb": ("elementwise", lambda d: d.hidden, None),
    "attn_pre_proj": ("linear", lambda d: (_qkv(d), d.hidden), "out"),
    "attn_post_proj": ("linear", lambda d: (d.hidden, d.hidden), "in"),
    "attn_rope": ("elementwise", lambda d: _qkv(d) - d.kv_heads * d.head_dim, "out"),
    "post_attention_layernorm": ("elementwise", lambda d: d.hidden, None),
    "mlp_up_proj": ("linear", lambda d: ((2 if d.gated else 1) * d.ffn, d.hidden), "out"),
    "mlp_act": ("elementwise", lambda d: (2 if d.gated else 1) * d.ffn, "out"),
    "mlp_down_proj": ("linear", lambda d: (d.hidden, d.ffn), "in"),
    "add": ("elementwise", lambda d: d.hidden, None),
}


#: element-wise op name -> its class: ops of one class cost alike whatever the profiler calls
#: them, so a fit per class carries over to another model's table
CLASSES = {**dict.fromkeys(("layernorm", "input_layernorm", "post_layernorm", "final_layernorm",
                            "post_attention_layernorm"), "norm"),
           **dict.fromkeys(("act_fn", "mlp_act"), "activation"),
           **dict.fromkeys(("rotary_emb", "rope", "attn_rope"), "rotary"),
           **dict.fromkeys(("embedding", "emb"), "embedding"),
           "add": "add"}


def op_shape(op: str, dims: ModelDims, tp: int = 1) -> OpShape:
    """What ``op`` computes for a model of ``dims`` at tensor-parallel degree ``tp``; a
    ``ValueError`` for an unknown op, a ``tp`` that does not divide the split dimension, or an
    MoE op on a dense model."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r} (known: {', '.join(sorted(OPS))})")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ValueError(f"tensor-parallel degree must be an int >= 1, got {tp!r}")
    kind, size, split = OPS[op]
    if op.startswith("expert.") or op == "gate":
        if not dims.experts:
            raise ValueError(f"op {op!r} is an MoE op, and {dims.name} has no experts")
    value = size(dims)
    if kind == "other":
        return OpShape(kind)
    if kind == "linear":
        n_out, n_in = value
        if split == "out":
            n_out = _split(n_out, tp, op)
        elif split == "in":
            n_in = _split(n_in, tp, op)
        return OpShape(kind, n_out=n_out, n_in=n_in)
    return OpShape(kind, width=_split(value, tp, op) if split else value)


def _split(n: int, tp: int, op: str) -> int:
    if n % tp:
        raise ValueError(f"op {op!r}: {n} does not divide by tensor-parallel degree {tp}")
    return n // tp
