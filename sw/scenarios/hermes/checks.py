"""The checks and records of one Hermes decode step: golden comparison, tolerance, cycles.

Every NDP kernel of :meth:`~ndpdimm.sw.scenarios.hermes.decode.HermesNdp.decode_step`
runs through :class:`StepRun`, which compares its result bit for bit with
the golden model fed the same inputs (``cosim/golden/numerics.py`` for GEMVs
and the result writer's accumulate, :func:`golden_accumulate`;
``cosim/golden/activation.py`` for ACT / SOFTMAX) and keeps a
:class:`KernelRecord`; the step's output is compared with
:func:`~ndpdimm.sw.scenarios.hermes.reduced_model.reference_decode_step` in
float64 on the same FP16 weights. :class:`StepResult` holds it all (``ok``,
``relative_error``, ``ndp_cycles``, ``table()``, ``as_dict()``);
:func:`tolerance` is the error bound.

Numerics and tolerance. The GPU side works in float32 on FP16-valued weights.
Everything that enters a DIMM is rounded to FP16 (unit roundoff
``u = 2**-11``): the LN outputs feeding QKV and fc1, ``q``, ``K``, ``V``, the
softmax output, the ReLU outputs; GEMVs accumulate exactly-rounded FP32 (error
``<= K 2**-24`` relative to ``sum |w x|``, negligible against ``u``), and the
softmax's exp has a few FP16 ULP of approximation error. That is ``R = 6``
FP16 rounding points per layer, each a relative perturbation ``<= u`` of one
operand of a sublayer, so the error of each sublayer's update is at most about
``R u`` times its size when the roundings line up (more only where sums cancel
badly), and the layers add up. The check is on the step's *update* (``out -
x``, not diluted by the residual stream): ``||out - ref||_2 <= TOLERANCE_FACTOR
* R * L * u * ||ref - x||_2`` with ``TOLERANCE_FACTOR = 1``, i.e. 5.9e-3 for 2
layers (:func:`tolerance`). The default model measures 2e-4 .. 4e-4 (batch 1..4):
independent roundings mostly cancel, so the bound is a working worst case, not
a proof. With the oracle prediction (the neurons that actually fire, union over
the batch) the NDP path must meet it; a prediction that misses firing neurons
fails it once enough is dropped (one strongly firing neuron of the default
model already costs about 10x the oracle's error), and the error is reported
either way. INT8 cold neurons' error is reported, not held to it.

Cycle behaviour. Each NDP kernel records the backend's numbers from
``Dimm.last_run``: ``elapsed_cycles`` (first submit to last completion,
including the operand / result DMAs between the DIMM's DRAM and SRAM) and the
descriptor cycles by opcode (``GEMV``, ``ACT``, ``SOFTMAX``, ``DMA``), with the
backend's name ("rtl": the Verilated core's own cycles; "model": the
calibrated performance model). Per layer, the DIMMs work in parallel and one
DIMM runs its kernels in order, so :attr:`StepResult.ndp_cycles` sums each
logical DIMM's elapsed cycles and takes the max over DIMMs per layer phase
(QKV, attention, MLP). GPU time and host transfers are not modelled here
(``sw/scenarios/hermes/costs.py`` does that).
"""

from dataclasses import dataclass

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden

# bit comparison, shared with ``run-layer``
from ndpdimm.sw.layer.run import bit_identical, tensor_bits
from ndpdimm.sw.scenarios.hermes.reduced_model import KvCache, ReferenceStep

__all__ = ["KernelRecord", "StepResult", "tolerance", "FP16_UNIT_ROUNDOFF", "ROUNDINGS_PER_LAYER",
           "TOLERANCE_FACTOR", "golden_accumulate", "StepRun"]

FP16_UNIT_ROUNDOFF = 2.0 ** -11
#: FP16 roundings on the NDP path per layer: LN1 out, q, K/V, softmax out, LN2 out, ReLU out.
ROUNDINGS_PER_LAYER = 6
TOLERANCE_FACTOR = 1.0


def tolerance(layers: int) -> float:
    """Bound on ``||out - ref||_2 / ||ref - x||_2`` of one step of a ``layers``-layer model."""
    return TOLERANCE_FACTOR * ROUNDINGS_PER_LAYER * layers * FP16_UNIT_ROUNDOFF


# ---- records ---------------------------------------------------------------------------------

@dataclass
class KernelRecord:
    """One NDP kernel of a step: what ran where, its cycles and its golden check."""
    layer: int
    phase: str            # "qkv", "attention", "mlp"
    op: str               # e.g. "GEMV dense", "ACT RELU", "SOFTMAX"
    dimm: int             # logical DIMM
    rows: int             # output rows / neurons / elements
    batch: int
    backend: str
    elapsed_cycles: int
    cycles_by_opcode: dict
    bit_exact: bool
    note: str = ""

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class StepResult:
    """:meth:`HermesNdp.decode_step`'s result (see the module docstring)."""
    out: torch.Tensor                 # float32 [B, hidden]
    cache: KvCache                    # with this token appended (float32, as the GPU holds it)
    kernels: list                     # KernelRecord
    reference: ReferenceStep          # float64
    predicted: torch.Tensor           # [layers, ffn] bool, as given
    relative_error: float             # ||out - ref|| / ||ref - x||
    max_abs_error: float
    tolerance: float
    missed: list                      # per layer: neurons that fired but were not computed
    extra: list                       # per layer: cold neurons computed that did not fire
    cold_computed: list               # per layer: cold neurons computed on the DIMMs
    n_dimms: int = 1

    @property
    def all_bit_exact(self) -> bool:
        return all(k.bit_exact for k in self.kernels)

    @property
    def within_tolerance(self) -> bool:
        return self.relative_error <= self.tolerance

    @property
    def ok(self) -> bool:
        return self.all_bit_exact and self.within_tolerance

    def cycles_by_dimm(self) -> dict:
        """Sum of elapsed cycles per (layer, phase, logical DIMM)."""
        out = {}
        for k in self.kernels:
            key = (k.layer, k.phase, k.dimm)
            out[key] = out.get(key, 0) + k.elapsed_cycles
        return out

    @property
    def ndp_cycles(self) -> int:
        """Critical path of the step's NDP work: per (layer, phase) the busiest DIMM, summed."""
        per_phase = {}
        for (layer, phase, _), c in self.cycles_by_dimm().items():
            per_phase[layer, phase] = max(per_phase.get((layer, phase), 0), c)
        return sum(per_phase.values())

    def as_dict(self) -> dict:
        return {"batch": self.out.shape[0], "n_dimms": self.n_dimms,
                "backend": self.kernels[0].backend if self.kernels else None,
                "all_bit_exact": self.all_bit_exact, "relative_error": self.relative_error,
                "max_abs_error": self.max_abs_error, "tolerance": self.tolerance,
                "within_tolerance": self.within_tolerance, "missed": self.missed,
                "extra": self.extra, "cold_computed": self.cold_computed,
                "ndp_cycles": self.ndp_cycles,
                "kernels": [k.as_dict() for k in self.kernels]}

    def summary(self) -> list:
        """Kernels grouped by (layer, phase, op, DIMM): count, rows, cycles, all bit-exact."""
        groups = {}
        for k in self.kernels:
            g = groups.setdefault((k.layer, k.phase, k.op, k.dimm), {
                "layer": k.layer, "phase": k.phase, "op": k.op, "dimm": k.dimm, "kernels": 0,
                "rows": 0, "elapsed_cycles": 0, "gemv_cycles": 0, "bit_exact": True})
            g["kernels"] += 1
            g["rows"] += k.rows
            g["elapsed_cycles"] += k.elapsed_cycles
            g["gemv_cycles"] += k.cycles_by_opcode.get("GEMV", 0)
            g["bit_exact"] &= k.bit_exact
        return list(groups.values())

    def table(self) -> str:
        """The :meth:`summary` as text, with the critical path and the error."""
        lines = [f"{'layer':>5} {'phase':9} {'op':16} {'dimm':>4} {'kernels':>7} {'rows':>5} "
                 f"{'cycles':>8} {'GEMV':>7} {'golden':>9}"]
        for g in self.summary():
            lines.append(f"{g['layer']:>5} {g['phase']:9} {g['op']:16} {g['dimm']:>4} "
                         f"{g['kernels']:>7} {g['rows']:>5} {g['elapsed_cycles']:>8,} "
                         f"{g['gemv_cycles']:>7,} {'bit-exact' if g['bit_exact'] else 'DIFFERS':>9}")
        backend = self.kernels[0].backend if self.kernels else "-"
        lines.append(f"NDP critical path {self.ndp_cycles:,} cycles ({backend} backend); error vs "
                     f"float64 {self.relative_error:.3g} (bound {self.tolerance:.3g}); missed "
                     f"{self.missed}, computed cold {self.cold_computed}")
        return "\n".join(lines)

    def kernel_table(self) -> str:
        """Every kernel, one line each."""
        lines = [f"{'layer':>5} {'phase':9} {'op':16} {'dimm':>4} {'rows':>5} {'batch':>5} "
                 f"{'cycles':>8} {'GEMV':>7} {'golden':>9}"]
        for k in self.kernels:
            lines.append(f"{k.layer:>5} {k.phase:9} {k.op:16} {k.dimm:>4} {k.rows:>5} {k.batch:>5} "
                         f"{k.elapsed_cycles:>8,} {k.cycles_by_opcode.get('GEMV', 0):>7,} "
                         f"{'bit-exact' if k.bit_exact else 'DIFFERS':>9}")
        return "\n".join(lines)


# ---- golden helpers and the kernel runner -------------------------------------------------------

def golden_accumulate(prior, y):
    """The result writer's ``accumulate``: FP32 ``prior + y`` bit for bit."""
    return golden.bits_f32(golden.accumulate_bits(tensor_bits(prior), tensor_bits(y), False).astype(np.int64))


class StepRun:
    """Runs one step's kernels on their DIMMs, checks them, keeps the records."""

    def __init__(self, ndp, batch):
        self.ndp, self.batch, self.layer, self.records = ndp, batch, 0, []

    def kernel(self, phase, op, d, rows, fn, want, note=""):
        dimm = self.ndp.dimms[d]
        got = fn(dimm)
        st = dimm.last_run
        self.records.append(KernelRecord(
            layer=self.layer, phase=phase, op=op, dimm=d, rows=rows, batch=got.shape[0] if
            got.dim() > 1 else 1, backend=st.backend, elapsed_cycles=st.elapsed_cycles,
            cycles_by_opcode=st.cycles_by_opcode(), bit_exact=bit_identical(got, want), note=note))
        return got
