"""Roofline time model of the GPU kernels the scenarios run (a documented model, not a measurement).

A kernel that does ``flops`` floating-point operations and moves ``bytes`` of
GPU memory takes

    t = kernel_overhead + max(flops / (peak_flops * compute_efficiency),
                              bytes / (memory_bandwidth * memory_efficiency))

with the peak figures and the two efficiency factors from the hardware file
(``sw/configs/hardware/*.toml``: the factors are explicit assumptions there,
and a user overrides them in the file). A linear layer ``Y[m, n] = X[m, k]
W[k, n]`` does ``2 m n k`` flops and moves its weights once (``n k``), its
inputs (``m k``) and outputs (``m n``): decode (m = batch, a few tokens) is
memory-bound, prefill (m = prompt tokens) compute-bound; :meth:`linear`
reports which bound applied so a reader can see why.
"""

import dataclasses

from ndpdimm.sw.scenarios.catalog import Gpu

__all__ = ["GpuModel", "KernelTime"]


@dataclasses.dataclass(frozen=True)
class KernelTime:
    seconds: float
    flops: float
    bytes: float
    bound: str            # "compute" or "memory"


class GpuModel:
    """Kernel times on ``gpu`` (see the module docstring)."""

    def __init__(self, gpu: Gpu):
        if not isinstance(gpu, Gpu):
            raise ValueError(f"gpu must be a catalog.Gpu, got {gpu!r}")
        self.gpu = gpu
        self.flops_per_s = gpu.fp16_tflops * 1e12 * gpu.compute_efficiency
        self.bytes_per_s = gpu.memory_bandwidth_gbs * 1e9 * gpu.memory_efficiency
        self.overhead_s = gpu.kernel_overhead_us * 1e-6

    def kernel(self, flops: float, n_bytes: float) -> KernelTime:
        """A kernel of ``flops`` operations moving ``n_bytes`` of GPU memory."""
        if flops < 0 or n_bytes < 0:
            raise ValueError(f"flops and bytes must be >= 0, got {flops!r}, {n_bytes!r}")
        compute, memory = flops / self.flops_per_s, n_bytes / self.bytes_per_s
        return KernelTime(self.overhead_s + max(compute, memory), flops, n_bytes,
                          "compute" if compute >= memory else "memory")

    def linear(self, tokens: int, n_out: int, n_in: int, elem_bytes: int = 2) -> KernelTime:
        """``Y[tokens, n_out] = X[tokens, n_in] W^T`` with ``elem_bytes`` per element."""
        for name, v in (("tokens", tokens), ("n_out", n_out), ("n_in", n_in),
                        ("elem_bytes", elem_bytes)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValueError(f"{name} must be an int >= 0, got {v!r}")
        flops = 2.0 * tokens * n_out * n_in
        n_bytes = float(n_out * n_in + tokens * n_in + tokens * n_out) * elem_bytes
        return self.kernel(flops, n_bytes)

    def attention(self, batch: int, queries: int, context: int, heads: int, kv_heads: int,
                  head_dim: int, elem_bytes: int = 2) -> KernelTime:
        """Scores and weighted sum of ``queries`` new tokens per sequence over ``context`` cached
        ones (``batch`` sequences): reads the K and V caches once."""
        flops = 4.0 * batch * queries * context * heads * head_dim
        n_bytes = float(2 * batch * context * kv_heads * head_dim +
                        2 * batch * queries * heads * head_dim) * elem_bytes
        return self.kernel(flops, n_bytes)
