"""Time model of the GPU kernels the scenarios run: a roofline, or a fit to measured tables.

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

Given a ``fitted`` model (``sw/scenarios/measured/fit.py``: a GPU's achieved bandwidth and
FLOP/s fitted to its measured operator table, ``sw/configs/gpus/fits/``), a 16-bit linear layer
and an attention call take the fit's time instead (``bound`` is then ``"measured"``), and an
all-reduce (:meth:`GpuModel.all_reduce`) the fit's measured all-reduce table where it has one;
other kernels (:meth:`GpuModel.kernel`) stay on the roofline. The fit is the hardware file's
choice: its GPU's ``measured`` key (``""``: the roofline; a GPU of ``sw/configs/gpus``: that
card's fit, carried through the datasheet ratios: ``measured/gpus.py`` ``fit_for``), which
``GpuModel(gpu)`` follows unless a ``fitted`` model is passed.
"""

import dataclasses

from ndpdimm.sw.scenarios.catalog import Gpu

__all__ = ["GpuModel", "KernelTime"]

ELEM_FITTED = 2          # the fitted models count 16-bit elements


@dataclasses.dataclass(frozen=True)
class KernelTime:
    seconds: float
    flops: float
    bytes: float
    bound: str            # "compute", "memory" or "measured" (the fitted model's time)


class GpuModel:
    """Kernel times on ``gpu``, on its ``fitted`` model where given (see the module docstring)."""

    def __init__(self, gpu: Gpu, fitted=None):
        if not isinstance(gpu, Gpu):
            raise ValueError(f"gpu must be a catalog.Gpu, got {gpu!r}")
        if fitted is not None and not callable(getattr(fitted, "linear_seconds", None)):
            raise ValueError(f"fitted must be a fitted GPU model (FittedGpu), got {fitted!r}")
        if fitted is None and gpu.measured:
            from ndpdimm.sw.scenarios.measured.gpus import fit_for
            fitted = fit_for(gpu)
        self.gpu, self.fitted = gpu, fitted
        self.flops_per_s = gpu.fp16_tflops * 1e12 * gpu.compute_efficiency
        self.bytes_per_s = gpu.memory_bandwidth_gbs * 1e9 * gpu.memory_efficiency
        self.overhead_s = gpu.kernel_overhead_us * 1e-6

    @classmethod
    def roofline(cls, gpu: Gpu) -> "GpuModel":
        """The roofline of ``gpu`` alone, whatever fit its ``measured`` key names."""
        return cls(dataclasses.replace(gpu, measured=""))

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
        if self.fitted is not None and elem_bytes == ELEM_FITTED and tokens:
            return KernelTime(float(self.fitted.linear_seconds(tokens, n_out, n_in)), flops,
                              n_bytes, "measured")
        return self.kernel(flops, n_bytes)

    def attention(self, batch: int, queries: int, context: int, heads: int, kv_heads: int,
                  head_dim: int, elem_bytes: int = 2) -> KernelTime:
        """Scores and weighted sum of ``queries`` new tokens per sequence over ``context`` cached
        ones (``batch`` sequences): reads the K and V caches once."""
        flops = 4.0 * batch * queries * context * heads * head_dim
        n_bytes = float(2 * batch * context * kv_heads * head_dim +
                        2 * batch * queries * heads * head_dim) * elem_bytes
        if (self.fitted is not None and self.fitted.attention and elem_bytes == ELEM_FITTED
                and batch and queries):
            return KernelTime(self._fitted_attention(batch, queries, context, heads, kv_heads,
                                                     head_dim), flops, n_bytes, "measured")
        return self.kernel(flops, n_bytes)

    def all_reduce(self, n_bytes: float, workers: int, link_gbs: float) -> float:
        """Seconds of one all-reduce of ``n_bytes`` over ``workers`` GPUs of one node: the fit's
        measured table where it has one, else a ring over links of ``link_gbs`` (GB/s per GPU):
        two kernel overheads plus ``2 (n - 1) / n`` of the bytes at the link's rate."""
        if n_bytes < 0 or workers < 1:
            raise ValueError(f"n_bytes must be >= 0 and workers >= 1, got {n_bytes!r}, {workers!r}")
        if workers == 1:
            return 0.0
        if self.fitted is not None and self.fitted.all_reduce:
            return self.fitted.all_reduce_seconds(n_bytes, workers)
        return 2 * self.overhead_s + 2 * (workers - 1) / workers * n_bytes / (link_gbs * 1e9)

    @property
    def source(self) -> str:
        """What the linear and attention times come from, in words (for reports)."""
        if self.fitted is None:
            return (f"roofline ({self.gpu.compute_efficiency:g} of {self.gpu.fp16_tflops:g} "
                    f"TFLOPS, {self.gpu.memory_efficiency:g} of {self.gpu.memory_bandwidth_gbs:g} GB/s)")
        return f"measured fit of the {self.fitted.gpu}: {self.fitted.source}"

    def _fitted_attention(self, batch, queries, context, heads, kv_heads, head_dim) -> float:
        """One decode call of ``batch`` sequences (one query each), or ``batch`` prefill calls
        of ``queries`` tokens over ``context - queries`` cached ones, on the fit's grid."""
        from ndpdimm.sw.scenarios.measured.ops import ModelDims
        from ndpdimm.sw.scenarios.measured.tables import AttentionTime
        dims = ModelDims("attention", heads * head_dim, heads, kv_heads, 1, 1)
        if queries == 1:
            return float(self.fitted.attention_seconds(AttentionTime(0, 0, batch, context, 0.0, 0),
                                                       dims))
        call = AttentionTime(queries, max(0, context - queries), 0, 0, 0.0, 0)
        return batch * float(self.fitted.attention_seconds(call, dims))
