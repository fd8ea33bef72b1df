"""Replay recipes of sampled RTL co-simulation: one function per kernel kind.

A recipe ``fn(dimm, params, seed) -> list of tensors`` rebuilds one logged invocation on a
:class:`~ndpdimm.sw.driver.dimm.Dimm` of any backend: the same shapes and the same
descriptor stream the scenario's cost line was measured with (the scenarios' own kernel
code), on synthetic data drawn from ``seed``; it returns every result the kernels wrote,
read back, for the bit-exact check. Kinds:

* ``cold_mlp``, ``qkv_dense``, ``attention``: Hermes (``sw/scenarios/hermes/costs.py``);
  RAPID's NDP decode tier logs ``attention`` too (the same kernel);
* ``expert``: one TriMoE expert's SwiGLU chain (``sw/scenarios/trimoe/expert.py``).
"""

import torch

from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.scenarios.hermes.costs import replay_attention, replay_cold_mlp, replay_qkv_dense
from ndpdimm.sw.scenarios.trimoe.expert import replay_expert

__all__ = ["REPLAYS", "replay"]

REPLAYS = {
    "cold_mlp": replay_cold_mlp,
    "qkv_dense": replay_qkv_dense,
    "attention": replay_attention,
    "expert": replay_expert,
}


def replay(dimm: Dimm, kind: str, params: dict, seed: int) -> tuple[int, list[torch.Tensor]]:
    """``(NDP cycles, outputs)`` of one invocation of ``kind`` on ``dimm``."""
    if kind not in REPLAYS:
        raise ValueError(f"no replay recipe for kernel kind {kind!r} (known: {', '.join(REPLAYS)})")
    start = dimm.backend.cycle
    outs = REPLAYS[kind](dimm, params, seed)
    return dimm.backend.cycle - start, outs
