"""The NDP kernels the scenarios run, one module each: shape, descriptor stream, cost line.

Each module holds one kernel: a frozen ``Shape`` dataclass (``kind`` names it: what a
scenario logs of one invocation), the function that issues its descriptor stream on a
:class:`~ndpdimm.sw.driver.dimm.Dimm` of either backend (functional or timing-only), and the
cost line the scenarios fit from it through the driver:

* ``cold_mlp`` (``cold_mlp``): row gathers of activated neurons' up (and gate) rows, then the
  column gather of their down vectors (Hermes' cold neurons); ``ndp_neuron_cost``;
* ``dense`` (``qkv_dense``): a dense GEMV of QKV rows (Hermes); ``ndp_dense_cost``;
* ``attention`` (``attention``): one (sequence, K/V head) of decode attention (Hermes, RAPID's
  NDP tier); ``ndp_attention_cost``;
* ``expert`` (``expert``): one MoE expert's SwiGLU chain (TriMoE); ``ndp_expert_cost``;
* ``merge``: an FP32 ATOMIC_ADD into the neighbouring DIMM over DIMM-Link; ``link_merge_cost``
  (not logged: it runs on the link model only).

``base`` holds what they share (the shape base, :class:`~ndpdimm.sw.kernels.base.LinearCost`).
The scenarios' cost fits, the sampled co-simulation's replays and the calibration's held-out
streams all call these modules; :func:`replay` runs one logged invocation.

May import: ``ndpdimm.hw``, the driver ``ndpdimm.sw.driver``, ``ndpdimm.sw.layer`` (the golden
element-wise ops), ``cosim.backend`` and ``cosim.golden``; never a scenario
(``tests/test_layering.py``).
"""

from __future__ import annotations

import torch

from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels import attention, cold_mlp, dense, expert
from ndpdimm.sw.kernels.base import Shape

__all__ = ["KINDS", "Shape", "shape", "replay"]

#: kind -> the Shape class of every kernel a scenario logs
KINDS: dict[str, type[Shape]] = {m.Shape.kind: m.Shape for m in (cold_mlp, dense, attention, expert)}


def shape(kind: str, params: dict) -> Shape:
    """The shape of ``kind`` with ``params`` (``ValueError`` naming an unknown kind or field)."""
    if kind not in KINDS:
        raise ValueError(f"no kernel of kind {kind!r} (known: {', '.join(KINDS)})")
    try:
        return KINDS[kind](**params)
    except TypeError as e:
        raise ValueError(f"{kind} shape {params!r}: {e}") from None


def replay(dimm: Dimm, s: Shape, seed: int, groups=None, warmup=()) -> tuple[int, list[torch.Tensor]]:
    """``(NDP cycles, outputs)`` of one invocation of shape ``s`` on ``dimm``, on synthetic data
    drawn from ``seed``. ``groups``: only those of its groups (``Shape.groups``; all for
    ``None``); ``warmup``: groups issued first, neither timed nor read back (a sub-sampled
    replay's running start, ``sw/sampling/subsample.py``). The cycles are the DIMM's clock over
    the timed part; results are read back where the DIMM computes values."""
    if not isinstance(s, Shape) or type(s) is Shape:
        raise ValueError(f"expected a kernel shape ({', '.join(KINDS)}), got {s!r}")
    inv = s.prepare(dimm, seed)
    try:
        if warmup:
            inv.issue(warmup, fetch=False)
        with dimm.measure(s.kind) as m:
            outs = inv.issue(groups, fetch=dimm.functional)
    finally:
        inv.free()
    return m.cycles, outs
