"""The MoE expert: one expert (a SwiGLU MLP) as a chain of NDP kernels on one DIMM, and its cost (TriMoE).

An expert is ``y = W_down (silu(W_gate x) * (W_up x))`` with ``W_gate``, ``W_up``
[F, H] and ``W_down`` [H, F] in FP16 (default) or BF16 - the element types both
the GEMV engine and the activation unit take (INT8 has no activation-unit
format, so it is refused). It is applied to the ``t`` tokens routed to it
(``x`` [t, H] in the weights' dtype). Every step runs on the DIMM through the
driver API (``sw/driver/``), for each *pass* of at most ``max_batch`` tokens
(the GEMV engine shares one weight stream among ``max_batch`` vectors, so ``t >
max_batch`` is ``ceil(t / max_batch)`` passes; the driver's ``gemv`` would
split a larger batch itself, but running the whole chain per pass keeps a
pass's intermediates at ``max_batch`` rows and makes :class:`ExpertCost`'s
passes exactly what runs):

====  =================================================  ===============================
step  kernel                                              formats
====  =================================================  ===============================
1     ``up = W_up x``: dense GEMV                          FP16/BF16 in, FP32 out
2     ``g = W_gate x``: dense GEMV                         FP16/BF16 in, FP32 out
3     ``s = silu(g)``: ACT SILU                            FP32 -> FP32
4     ``a = s * up``: ELTWISE MUL, converting on output    FP32 x FP32 -> FP16/BF16
5     ``y = W_down a``: dense GEMV                         FP16/BF16 in, FP32 out
====  =================================================  ===============================

Why SiLU stays in FP32 and the multiply converts: the activation unit computes
in binary32 whatever the lane format, so this chain rounds to FP16 once (the
down GEMV's input ``a``) with two ACT kernels, where SiLU -> FP16, a PASS
converting ``up`` and an FP16 multiply would round three times in three
kernels. ``y`` is returned as the chip writes it: FP32 [t, H].

The activation unit keeps a whole vector in the SRAM, so steps 3 and 4 run
over the pass's ``[b, F]`` elements flattened, in chunks that fit the largest
free SRAM block (element-wise ops: the chunking changes no bit). Intermediate
results go back to the DIMM's DRAM between kernels (each driver operation
DMAs its operands in and its result out, and those DMA cycles are counted);
the host reading them back and writing them again is the driver's zero-time
backdoor (``load`` / ``dump``), standing in for data that would stay on the
DIMM.

Bit-exactness. :func:`golden_expert` computes the same chain with the golden
model (``cosim/golden/numerics.py`` for the GEMVs, ``cosim/golden/activation.py`` for
SiLU and the multiply); :func:`ndp_expert` must equal it bit for bit on both
backends, including zeros, Inf from FP16 overflow and NaN.
:func:`torch_expert` is the plain float64 reference, :func:`error_bound` a
componentwise bound on ``|ndp - torch|`` for finite inputs (see there).

Cycles. :func:`ndp_expert` returns the NDP cycles of the whole expert: the sum
over its driver operations of first submit to last completion (the
completions' ``done_cycle``). The DIMM runs them back to back (the host's
work between them takes no NDP time), so this is the elapsed time on the
DIMM; it is taken from the completions rather than the backend clock because
under background host reads (``Dimm.host_reads``) the model backend's clock
may run up to one read spacing past an operation's last completion (see
``HostReads``). Without host reads and on the model backend, both agree.

Cost model (:func:`ndp_expert_cost`, :class:`ExpertCost`): the whole chain of
one pass measured at a few batch sizes on random weights of the expert's
shapes, optionally under background host reads every ``host_spacing`` cycles
(TriMoE's striped host traffic contending with the NDP core); see
:meth:`ExpertCost.cycles` for how other token counts are derived.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.formats import NDP_CLOCK_HZ, Dtype
from ndpdimm.hw.memory.port import BURST_BYTES
from ndpdimm.sw.driver.buffers import WeightBuffer
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.kernels.base import Invocation, group_slices
from ndpdimm.sw.kernels.base import Shape as _Base
from ndpdimm.sw.layer.run import golden_elementwise

__all__ = ["Shape", "GROUP_NEURONS", "ExpertWeights", "store_expert", "free_expert", "ndp_expert", "golden_expert",
           "torch_expert", "error_bound", "ExpertCost", "ndp_expert_cost", "EXPERT_DTYPES",
           "HOST_READ_BUFFER_BYTES"]

F32, F64 = torch.float32, torch.float64
#: Weight / token dtypes an expert takes (GEMV engine and activation unit both have them).
EXPERT_DTYPES = {torch.float16: (Dtype.FP16, ActFmt.FP16), torch.bfloat16: (Dtype.BF16, ActFmt.BF16)}
#: Size of the region :func:`ndp_expert_cost` reads in the background (another expert's
#: weights, as far as the DRAM is concerned; the reads cycle through it).
HOST_READ_BUFFER_BYTES = 256 * 1024
_SRAM_GRANULE = 64
_CHUNK_ELEMS = 32          # FP16 and FP32 chunks of a multiple of 32 elements are whole granules


# ---- the shape of one invocation ------------------------------------------------------------

#: Neurons per group of a sub-sampled replay (``Shape.groups``)
GROUP_NEURONS = 64
#: A shape's ``dtype`` names the torch dtype of the weights and tokens.
DTYPE_NAMES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclasses.dataclass(frozen=True)
class Shape(_Base):
    """One expert (``hidden`` x ``ffn``, weights ``dtype`` "float16"/"bfloat16") applied to
    ``tokens`` tokens. Its replay runs without background host reads (the contention factor
    TriMoE applies on top is not replayed)."""
    kind = "expert"
    hidden: int
    ffn: int
    tokens: int
    dtype: str

    def __post_init__(self):
        super().__post_init__()
        if self.dtype not in DTYPE_NAMES:
            raise ValueError(f"dtype must be one of {', '.join(DTYPE_NAMES)}, got {self.dtype!r}")

    def groups(self, max_batch: int) -> int:
        """Groups of :data:`GROUP_NEURONS` of the expert's ``ffn`` neurons (rows of ``W_gate`` and
        ``W_up``, columns of ``W_down``): every pass's time grows with them."""
        return -(-self.ffn // GROUP_NEURONS)

    def prepare(self, dimm: Dimm, seed: int) -> Invocation:
        """The expert's weights and tokens drawn from ``seed``; a subset of groups is the expert
        of those neurons only (its ``W_down`` columns: a partial sum of the output), applied to
        every token."""
        gen = torch.Generator().manual_seed(seed)
        rand = _Random(gen, DTYPE_NAMES[self.dtype])
        w_gate, w_up, w_down = rand.expert_weights(self.hidden, self.ffn)
        x = rand(self.tokens, self.hidden)

        def run(groups, fetch):
            sel = group_slices(self.ffn, GROUP_NEURONS, groups)
            e = store_expert(dimm, w_gate[sel], w_up[sel], w_down[:, sel].contiguous())
            try:
                return [_run(e, x, fetch)[0]]
            finally:
                free_expert(e)
        return Invocation(self.groups(dimm.config.max_batch), run, lambda: None)


# ---- weights ---------------------------------------------------------------------------------

@dataclasses.dataclass
class ExpertWeights:
    """One expert's matrices on a DIMM: ``gate``, ``up`` (DOT [ffn, hidden]) and ``down`` (DOT
    [hidden, ffn]) as :class:`~ndpdimm.sw.driver.buffers.WeightBuffer`."""
    gate: WeightBuffer
    up: WeightBuffer
    down: WeightBuffer
    hidden: int
    ffn: int
    dimm: Dimm

    @property
    def dtype(self) -> torch.dtype:
        return self.up.torch_dtype


def _check_weights(w_gate, w_up, w_down) -> tuple:
    """``(ffn, hidden, dtype)`` of three matching expert matrices, or ``ValueError``."""
    for name, w in (("w_gate", w_gate), ("w_up", w_up), ("w_down", w_down)):
        if not isinstance(w, torch.Tensor):
            raise ValueError(f"{name} must be a torch.Tensor, got {type(w).__name__}")
        if w.dtype not in EXPERT_DTYPES:
            raise ValueError(f"{name} has dtype {w.dtype}; an expert's weights are one of "
                             f"{', '.join(str(d) for d in EXPERT_DTYPES)} (the activation unit "
                             f"has no INT8 format)")
        if w.dim() != 2 or 0 in w.shape:
            raise ValueError(f"{name} must be a non-empty 2-D tensor, got shape {tuple(w.shape)}")
    if not w_gate.dtype == w_up.dtype == w_down.dtype:
        raise ValueError(f"w_gate, w_up, w_down must share one dtype, got {w_gate.dtype}, "
                         f"{w_up.dtype}, {w_down.dtype}")
    F, H = w_gate.shape
    if tuple(w_up.shape) != (F, H) or tuple(w_down.shape) != (H, F):
        raise ValueError(f"expected w_gate, w_up [F, H] and w_down [H, F]; got {tuple(w_gate.shape)}, "
                         f"{tuple(w_up.shape)}, {tuple(w_down.shape)}")
    return F, H, w_gate.dtype


def _check_x(x, hidden, dtype) -> torch.Tensor:
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"x must be a torch.Tensor [t, {hidden}], got {type(x).__name__}")
    if x.dtype != dtype:
        raise ValueError(f"x has dtype {x.dtype}; the expert's weights are {dtype}")
    if x.dim() != 2 or x.shape[1] != hidden:
        raise ValueError(f"x must be [t, {hidden}], got shape {tuple(x.shape)}")
    return x


def store_expert(dimm: Dimm, w_gate: torch.Tensor, w_up: torch.Tensor,
                 w_down: torch.Tensor) -> ExpertWeights:
    """The three matrices into ``dimm``'s DRAM (DOT layout). ``ValueError`` for mismatched shapes
    or dtypes (nothing stored); ``MemoryError`` if they do not fit (nothing left stored)."""
    if not isinstance(dimm, Dimm):
        raise ValueError(f"dimm must be a Dimm, got {type(dimm).__name__}")
    F, H, _ = _check_weights(w_gate, w_up, w_down)
    stored = []
    try:
        for w in (w_gate, w_up, w_down):
            stored.append(dimm.store_weights(w.contiguous()))
    except BaseException:
        for wb in stored:
            dimm.free(wb)
        raise
    return ExpertWeights(*stored, hidden=H, ffn=F, dimm=dimm)


def free_expert(e: ExpertWeights) -> None:
    """Free the expert's matrices (a second free raises ``FreedBufferError``)."""
    if not isinstance(e, ExpertWeights):
        raise ValueError(f"expected ExpertWeights, got {type(e).__name__}")
    for wb in (e.gate, e.up, e.down):
        e.dimm.free(wb)


# ---- the chain on the DIMM -------------------------------------------------------------------

def _chunk(dimm: Dimm, total: int, bytes_per_elem: int) -> int:
    """Elements per activation-unit descriptor so that operands and result (``bytes_per_elem``
    together per element, each a whole number of granules) fit the largest free SRAM block."""
    n = dimm.sram.largest_free // (bytes_per_elem * _CHUNK_ELEMS) * _CHUNK_ELEMS
    if n < 1:
        raise MemoryError(f"the activation unit needs {bytes_per_elem * _CHUNK_ELEMS} bytes of SRAM "
                          f"for a chunk of {_CHUNK_ELEMS} elements, {dimm.sram.largest_free} free")
    pieces = -(-total // n)                       # as few descriptors as fit, evenly sized
    per = -(-total // pieces)
    return min(n, -(-per // _CHUNK_ELEMS) * _CHUNK_ELEMS)


class _Chain:
    """Runs driver operations back to back on one DIMM and adds up their spans (first submit to
    last completion, see the module docstring)."""

    def __init__(self, dimm: Dimm):
        self.dimm, self.cycles, self.host_reads = dimm, 0, 0

    def __call__(self, operation):
        with self.dimm.measure("expert") as m:
            out = operation()
        run = self.dimm.last_run
        done = max((c.done_cycle for _, c in run.descriptors), default=m.start)
        self.cycles += max(0, done - m.start)
        self.host_reads += run.host_reads
        return out


def _pass(e: ExpertWeights, xb: torch.Tensor, chain: _Chain, fetch: bool):
    """One pass (``xb`` [b <= max_batch, H]) of the chain; its ``y`` [b, H] (None if not fetched)."""
    d, dtype = e.dimm, e.dtype
    b, F = xb.shape[0], e.ffn
    up = chain(lambda: d.gemv(e.up, xb, fetch=fetch))
    gate = chain(lambda: d.gemv(e.gate, xb, fetch=fetch))
    if not fetch:       # a timing-only backend: values do not change the activation unit's time
        up = gate = torch.zeros(b, F, dtype=F32)
    g, u = gate.reshape(-1), up.reshape(-1)
    n = g.numel()
    s_parts, a_parts = [], []
    step = _chunk(d, n, 4 + 4)                                    # SiLU: FP32 in, FP32 out
    for i in range(0, n, step):
        s = chain(lambda i=i: d.activation("silu", g[i:i + step], out_dtype=F32, fetch=fetch))
        s_parts.append(torch.zeros(min(step, n - i), dtype=F32) if s is None else s)
    s = torch.cat(s_parts)
    step = _chunk(d, n, 4 + 4 + 2)                                # MUL: 2 x FP32 in, FP16 out
    for i in range(0, n, step):
        a = chain(lambda i=i: d.eltwise("mul", s[i:i + step], u[i:i + step], out_dtype=dtype,
                                    fetch=fetch))
        a_parts.append(torch.zeros(min(step, n - i), dtype=dtype) if a is None else a)
    a = torch.cat(a_parts).reshape(b, F)
    return chain(lambda: d.gemv(e.down, a, fetch=fetch))


def _run(e: ExpertWeights, x: torch.Tensor, fetch: bool):
    chain = _Chain(e.dimm)
    mb = e.dimm.config.max_batch
    ys = [_pass(e, x[b0:b0 + mb], chain, fetch) for b0 in range(0, x.shape[0], mb)]
    y = torch.cat(ys) if fetch and ys else (torch.empty(0, e.hidden, dtype=F32) if fetch else None)
    return y, chain


def ndp_expert(e: ExpertWeights, x: torch.Tensor) -> tuple:
    """The expert on its DIMM for the tokens ``x`` [t, H] (the weights' dtype): ``(y, cycles)``,
    ``y`` FP32 [t, H] as the chip returns it, ``cycles`` the NDP cycles of the whole chain
    (all passes; see the module docstring). ``t == 0`` runs nothing: ``(empty, 0)``. Needs a
    backend that computes values (RTL, or the model with ``functional=True``); for timing alone
    see :func:`ndp_expert_cost`."""
    if not isinstance(e, ExpertWeights):
        raise ValueError(f"e must be ExpertWeights (store_expert), got {type(e).__name__}")
    _check_x(x, e.hidden, e.dtype)
    y, chain = _run(e, x.contiguous(), fetch=True)
    return y, chain.cycles


# ---- references ------------------------------------------------------------------------------

def golden_expert(w_gate, w_up, w_down, x) -> torch.Tensor:
    """The chain of :func:`ndp_expert` with the bit-exact golden model (no driver): FP32 [t, H]."""
    F, H, dtype = _check_weights(w_gate, w_up, w_down)
    _check_x(x, H, dtype)
    gemv_dt = EXPERT_DTYPES[dtype][0]
    up = golden.gemv_dot(w_up, x, gemv_dt)
    gate = golden.gemv_dot(w_gate, x, gemv_dt)
    s = golden_elementwise(ActOp.SILU, gate, out=F32)
    a = golden_elementwise(ActOp.MUL, s, up, out=dtype)
    return golden.gemv_dot(w_down, a, gemv_dt)


def torch_expert(w_gate, w_up, w_down, x) -> torch.Tensor:
    """Plain float64 SwiGLU on the same (FP16/BF16-valued) weights and tokens: [t, H] float64."""
    _, H, dtype = _check_weights(w_gate, w_up, w_down)
    _check_x(x, H, dtype)
    xd = x.to(F64)
    g, u = xd @ w_gate.to(F64).T, xd @ w_up.to(F64).T
    return (torch.nn.functional.silu(g) * u) @ w_down.to(F64).T


#: Relative error of the activation unit's SiLU in binary32 before the output rounding (exp
#: 7.1e-8 and reciprocal 2.1e-7 relative, docs/activation.md, plus three binary32 roundings),
#: rounded up to a power of two.
SILU_REL_ERROR = 2.0 ** -20
#: Largest |silu'(x)| (about 1.0998, at x = 2.40).
SILU_SLOPE = 1.1


def error_bound(w_gate, w_up, w_down, x) -> torch.Tensor:
    """A componentwise bound [t, H] (float64) on ``|ndp_expert - torch_expert|`` for finite
    inputs whose chain stays finite, first order in the roundings:

    * GEMVs accumulate in binary32 in a fixed order: ``|err| <= K 2**-24 (|W| |x|)`` for ``K``
      terms (``gamma_K``), on ``g`` and ``up``;
    * SiLU: ``SILU_SLOPE * e_g`` from its input's error plus ``SILU_REL_ERROR |s|``;
    * ``a = s * up`` rounded once to FP16 / BF16 (unit roundoff ``u`` = 2**-11 / 2**-8, plus
      half the smallest subnormal);
    * the down GEMV: ``|W_down| e_a + F 2**-24 |W_down| |a|``.

    The FP16 rounding of ``a`` dominates for normal inputs. Measured on unit-variance tokens
    and variance-preserving random weights (tests/sw/kernels/test_expert.py): the chain's error
    reaches 0.26 .. 0.41 of the bound, and ``y`` off by 2**-7 relative exceeds it."""
    F, H, dtype = _check_weights(w_gate, w_up, w_down)
    _check_x(x, H, dtype)
    u16 = 2.0 ** -11 if dtype == torch.float16 else 2.0 ** -8
    tiny = 2.0 ** -25 if dtype == torch.float16 else 2.0 ** -134
    xd = x.to(F64)
    Wg, Wu, Wd = (w.to(F64) for w in (w_gate, w_up, w_down))
    g, up = xd @ Wg.T, xd @ Wu.T
    s = torch.nn.functional.silu(g)
    a = s * up
    e_g = H * 2.0 ** -24 * (xd.abs() @ Wg.abs().T)
    e_u = H * 2.0 ** -24 * (xd.abs() @ Wu.abs().T)
    e_s = SILU_SLOPE * e_g + SILU_REL_ERROR * s.abs()
    e_prod = s.abs() * e_u + up.abs() * e_s + e_s * e_u
    e_a = e_prod + u16 * (a.abs() + e_prod) + tiny
    return e_a @ Wd.abs().T + F * 2.0 ** -24 * ((a.abs() + e_a) @ Wd.abs().T)


# ---- cost ------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class ExpertCost:
    """The NDP cycles of one expert (``hidden`` x ``ffn``) on one DIMM, measured per pass.

    ``samples``: ((tokens, cycles), ...) of the whole chain of one pass, ascending;
    ``host_spacing``: the background host-read spacing they were measured under (None: no host
    traffic); ``host_reads``: ((tokens, reads issued), ...) under it."""
    hidden: int
    ffn: int
    max_batch: int
    backend: str
    samples: tuple
    host_spacing: int | None = None
    host_reads: tuple = ()

    def _one_pass(self, b: int) -> float:
        pts = self.samples
        if len(pts) == 1:               # one measurement: the weight stream dominates a pass
            return float(pts[0][1])
        i = 0
        while i < len(pts) - 2 and b > pts[i + 1][0]:
            i += 1
        (b0, c0), (b1, c1) = pts[i], pts[i + 1]
        return max(0.0, c0 + (c1 - c0) * (b - b0) / (b1 - b0))

    def cycles(self, tokens: int) -> float:
        """NDP cycles for ``tokens`` tokens: ``tokens // max_batch`` full passes plus one pass of
        the remainder (0 tokens: 0). A pass of ``b`` tokens is interpolated linearly between
        the measured batch sizes around ``b`` (the weight stream is shared, so a pass grows
        slowly and close to linearly with its batch); outside the measured range the nearest
        segment is extrapolated (floored at 0), and a single sample counts for every batch."""
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)) or tokens < 0:
            raise ValueError(f"tokens must be an int >= 0, got {tokens!r}")
        full, rest = divmod(int(tokens), self.max_batch)
        return full * self._one_pass(self.max_batch) + (self._one_pass(rest) if rest else 0.0)

    def seconds(self, tokens: int) -> float:
        """:meth:`cycles` at the NDP clock (``hw.formats.NDP_CLOCK_HZ``)."""
        return self.cycles(tokens) / NDP_CLOCK_HZ

    @property
    def host_read_gbs(self) -> float | None:
        """Background host-read bandwidth actually achieved over the samples (GB/s at the NDP
        clock; None without host traffic). One read is in flight at a time, so a spacing below
        the read's latency under load (tens of cycles) gives back-to-back reads, not more."""
        if self.host_spacing is None:
            return None
        cycles = sum(c for _, c in self.samples)
        reads = sum(n for _, n in self.host_reads)
        return reads * BURST_BYTES / cycles * NDP_CLOCK_HZ / 1e9 if cycles else 0.0

    def as_dict(self) -> dict:
        return {"hidden": self.hidden, "ffn": self.ffn, "max_batch": self.max_batch,
                "backend": self.backend, "samples": [list(p) for p in self.samples],
                "host_spacing": self.host_spacing, "host_reads": [list(p) for p in self.host_reads],
                "host_read_gbs": self.host_read_gbs}


def _positive_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int, got {v!r}")
    return v


class _Random:
    """Random tensors of ``dtype`` from one generator: ``rand(*shape, s=scale)``; ``expert_weights``:
    weights of an expert's shapes scaled so activations stay O(1)."""

    def __init__(self, gen, dtype):
        self.gen, self.dtype = gen, dtype

    def __call__(self, *shape, s=1.0):
        return (torch.randn(*shape, generator=self.gen) * s).to(self.dtype)

    def expert_weights(self, hidden, ffn) -> tuple:
        """``(w_gate, w_up, w_down)``."""
        return (self(ffn, hidden, s=1 / math.sqrt(hidden)), self(ffn, hidden, s=1 / math.sqrt(hidden)),
                self(hidden, ffn, s=1 / math.sqrt(ffn)))


class _RandomExpert(_Random):
    """Random weights of an expert's shapes stored on ``dimm`` (``expert``), and ``rand(*shape)``
    for tokens, from one generator."""

    def __init__(self, dimm, gen, hidden, ffn, dtype):
        super().__init__(gen, dtype)
        self.expert = store_expert(dimm, *self.expert_weights(hidden, ffn))


def ndp_expert_cost(hidden: int, ffn: int, dimm: Dimm, batches=(1, 4, 16), seed: int = 0,
                    host_spacing: int | None = None, dtype=torch.float16) -> ExpertCost:
    """Measure one pass of the expert chain (:func:`ndp_expert`) on ``dimm`` for each batch size
    in ``batches`` (each 1..``max_batch``, distinct), on random ``dtype`` weights of the shapes
    (stored for the measurement and freed after). On a timing-only model
    (``Dimm("model", functional=False)``) results are not read back and zeros stand in for the
    activation unit's inputs (its time does not depend on values). With ``host_spacing`` (NDP
    cycles) each measurement runs under ``dimm.host_reads`` over a
    :data:`HOST_READ_BUFFER_BYTES` region of other data: the contended time."""
    _positive_int("hidden", hidden)
    _positive_int("ffn", ffn)
    if not isinstance(dimm, Dimm):
        raise ValueError(f"dimm must be a Dimm, got {type(dimm).__name__}")
    if dtype not in EXPERT_DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(str(d) for d in EXPERT_DTYPES)}, "
                         f"got {dtype!r}")
    mb = dimm.config.max_batch
    try:
        batches = tuple(batches)
    except TypeError:
        raise ValueError(f"batches must be a sequence of batch sizes, got {batches!r}") from None
    if not batches or len(set(batches)) != len(batches) or any(
            isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= mb for b in batches):
        raise ValueError(f"batches must be distinct ints in 1..{mb} (max_batch), at least one, "
                         f"got {batches!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed must be an int, got {seed!r}")
    if host_spacing is not None:
        _positive_int("host_spacing", host_spacing)
    gen = torch.Generator().manual_seed(seed)
    rand = _RandomExpert(dimm, gen, hidden, ffn, dtype)
    e = rand.expert
    other = None
    fetch = dimm.functional
    points, reads = [], []
    try:
        if host_spacing is not None:
            n = min(HOST_READ_BUFFER_BYTES, -(-3 * hidden * ffn * 2 // BURST_BYTES) * BURST_BYTES)
            other = dimm.alloc(n)
            dimm.write(other, torch.zeros(other.nbytes, dtype=torch.uint8))
        for b in sorted(batches):
            x = rand(b, hidden)
            if other is None:
                _, chain = _run(e, x, fetch)
            else:
                with dimm.host_reads(other, host_spacing):
                    _, chain = _run(e, x, fetch)
                reads.append((b, chain.host_reads))
            points.append((b, chain.cycles))
    finally:
        free_expert(e)
        if other is not None:
            dimm.free(other)
    return ExpertCost(hidden=hidden, ffn=ffn, max_batch=mb, backend=dimm.name,
                      samples=tuple(points), host_spacing=host_spacing, host_reads=tuple(reads))
