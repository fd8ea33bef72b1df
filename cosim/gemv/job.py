"""One GEMV operation as the engine sees it: validation, stream traffic and expected results.

``GemvJob`` is the single reference for *what goes over the engine's streams*
for dense GEMV, row gather and column gather (see ``ndpdimm.hw.gemv.engine``
for the order): the cocotb bench drives it, the Amaranth tests drive it, the
weight streamer of the memory side must reproduce it from DRAM. Validation
happens in the constructor, so a bad dtype, shape or index list raises
``ValueError`` before any simulation starts.
"""

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ndpdimm.cosim.gemv.engine_model import beats_from_results
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import WORD_BITS, Dtype, GemvMode, slot_cycles

__all__ = ["GemvJob", "EngineShape", "OPS"]

OPS = ("dense", "row_gather", "col_gather")


@dataclass(frozen=True)
class EngineShape:
    """The engine parameters a job must fit (mirrors ``GemvEngine``'s constructor)."""
    n_units: int = 256
    max_batch: int = 16
    radix_bits: int = 1
    index_bits: int = 20
    step_bits: int = 16


def _raw(t: torch.Tensor, dtype: Dtype) -> np.ndarray:
    bits = golden.elem_bits(t, dtype).numpy()
    return bits.astype(np.uint16 if dtype.info.elem_bits == 16 else np.uint8)


@dataclass
class GemvJob:
    """A GEMV operation with its operands.

    op = "dense":      ``W`` [N, K], ``X`` [B, K]            -> Y [B, N]
    op = "row_gather": ``W`` [N, K], ``X`` [B, K], ``idx``   -> Y [B, len(idx)]
    op = "col_gather": ``W`` = Wt [J, N], ``X`` = H [B, J], ``idx`` -> Y [B, N]
    """
    op: str
    dtype: Dtype
    W: torch.Tensor
    X: torch.Tensor
    idx: torch.Tensor | None = None
    shape: EngineShape = field(default_factory=EngineShape)

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"unknown GEMV op {self.op!r}: expected one of {', '.join(OPS)}")
        self.dtype = Dtype.parse(self.dtype)
        golden.check_operand("W", self.W, self.dtype, 2)
        golden.check_operand("X", self.X, self.dtype, 2)
        batch = self.X.shape[0]
        if not 1 <= batch <= self.shape.max_batch:
            raise ValueError(f"batch {batch} outside 1..{self.shape.max_batch}")
        if self.op == "dense":
            if self.idx is not None:
                raise ValueError("dense GEMV takes no index list (use row_gather)")
            if self.W.shape[1] != self.X.shape[1]:
                raise ValueError(f"W has {self.W.shape[1]} columns but X has {self.X.shape[1]}")
        else:
            if self.idx is None:
                raise ValueError(f"{self.op} needs an index list")
            limit = self.W.shape[0]
            self.idx = golden.check_index("idx", self.idx, limit)
            if self.op == "row_gather" and self.W.shape[1] != self.X.shape[1]:
                raise ValueError(f"W has {self.W.shape[1]} columns but X has {self.X.shape[1]}")
            if self.op == "col_gather" and self.W.shape[0] != self.X.shape[1]:
                raise ValueError(f"Wt has {self.W.shape[0]} neurons but H has {self.X.shape[1]}")
        if self.n_out >= 2 ** self.shape.index_bits:
            raise ValueError(f"{self.n_out} outputs exceed the engine's "
                             f"{self.shape.index_bits}-bit output index")
        if self.n_steps >= 2 ** self.shape.step_bits:
            raise ValueError(f"{self.n_steps} steps exceed the engine's "
                             f"{self.shape.step_bits}-bit step count")

    # ---- command fields -------------------------------------------------------------
    @property
    def batch(self) -> int:
        return self.X.shape[0]

    @property
    def lanes(self) -> int:
        return self.dtype.info.lanes

    @property
    def mode(self) -> GemvMode:
        return GemvMode.AXPY if self.op == "col_gather" else GemvMode.DOT

    @property
    def n_out(self) -> int:
        if self.op == "dense":
            return self.W.shape[0]
        if self.op == "row_gather":
            return len(self.idx)
        return self.W.shape[1]

    @property
    def n_steps(self) -> int:
        if self.mode == GemvMode.DOT:
            return math.ceil(self.W.shape[1] / self.lanes)
        return len(self.idx)

    @property
    def outs_per_group(self) -> int:
        return self.shape.n_units * (self.lanes if self.mode == GemvMode.AXPY else 1)

    @property
    def n_groups(self) -> int:
        return math.ceil(self.n_out / self.outs_per_group)

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates (excludes padding)."""
        if self.mode == GemvMode.DOT:
            return self.batch * self.n_out * self.W.shape[1]
        return self.batch * self.n_out * len(self.idx)

    @property
    def estimated_cycles(self) -> int:
        """Steady-state cycles of the multiply/reduce pipeline (no fill, no drain)."""
        return self.n_groups * self.n_steps * self.batch * slot_cycles(self.dtype, self.shape.radix_bits)

    @property
    def weight_bytes(self) -> int:
        """Weight bytes the engine consumes (what the DRAM must deliver)."""
        return self.n_groups * self.n_steps * self.shape.n_units * WORD_BITS // 8

    def command(self) -> dict:
        return {"mode": self.mode, "dtype": int(self.dtype), "batch_minus_one": self.batch - 1,
                "n_out": self.n_out, "n_steps": self.n_steps}

    def command_bits(self, layout) -> int:
        """The command packed with the engine's ``gemv_command_layout``."""
        return layout.const(self.command()).as_bits()

    # ---- stream traffic -------------------------------------------------------------
    def _dot_rows(self) -> torch.Tensor:
        return self.W if self.op == "dense" else self.W[self.idx]

    def weight_beats(self) -> list:
        """One int of ``n_units * 128`` bits per beat (word of unit u at bits [128u, 128u+128))."""
        U, L, G, S = self.shape.n_units, self.lanes, self.n_groups, self.n_steps
        if S == 0 or self.n_out == 0:
            return []
        if self.mode == GemvMode.DOT:
            rows = _raw(self._dot_rows(), self.dtype)                 # [n_out, K]
            padded = np.zeros((G * U, S * L), dtype=rows.dtype)
            padded[:rows.shape[0], :rows.shape[1]] = rows
            beats = padded.reshape(G, U, S, L).transpose(0, 2, 1, 3)  # [G, S, U, L]
        else:
            vecs = _raw(self.W[self.idx], self.dtype)                 # [S, N]
            padded = np.zeros((S, G * U * L), dtype=vecs.dtype)
            padded[:, :vecs.shape[1]] = vecs
            beats = padded.reshape(S, G, U, L).transpose(1, 0, 2, 3)  # [G, S, U, L]
        raw = np.ascontiguousarray(beats).view(np.uint8).reshape(G * S, -1)
        return [int.from_bytes(b.tobytes(), "little") for b in raw]

    def act_words(self) -> list:
        """One 128-bit int per (group, step, batch element)."""
        L, G, S, B = self.lanes, self.n_groups, self.n_steps, self.batch
        if S == 0 or self.n_out == 0:
            return []
        x = _raw(self.X, self.dtype)                                  # [B, K] or [B, J]
        if self.mode == GemvMode.DOT:
            padded = np.zeros((B, S * L), dtype=x.dtype)
            padded[:, :x.shape[1]] = x
            words = padded.reshape(B, S, L).transpose(1, 0, 2)        # [S, B, L]
        else:
            words = np.zeros((S, B, L), dtype=x.dtype)
            words[:, :, 0] = x[:, self.idx.numpy()].T                 # scalar in element 0
        per_group = [int.from_bytes(w.tobytes(), "little")
                     for w in np.ascontiguousarray(words).view(np.uint8).reshape(S * B, -1)]
        return per_group * G

    # ---- expected results ---------------------------------------------------------
    def expected(self) -> torch.Tensor:
        """Golden result [B, n_out] (float32 or int32), bit-exact hardware order."""
        if self.op == "dense":
            return golden.gemv_dot(self.W, self.X, self.dtype)
        if self.op == "row_gather":
            return golden.gemv_row_gather(self.W, self.X, self.idx, self.dtype)
        return golden.gemv_col_gather(self.W, self.X, self.idx, self.dtype)

    def result_bits(self, y: torch.Tensor | None = None) -> np.ndarray:
        """Result bit patterns [B, n_out] as uint32."""
        return golden.result_bits(self.expected() if y is None else y)

    def expected_beats(self, y: torch.Tensor | None = None) -> list:
        """Result-stream beats in emission order: dicts(index, batch, count, data, last)."""
        return beats_from_results(self.result_bits(y), self.outs_per_group)

    def assemble(self, beats: list) -> np.ndarray:
        """Observed result beats -> [B, n_out] uint32 bit patterns (checks coverage)."""
        out = np.zeros((self.batch, self.n_out), dtype=np.uint32)
        seen = np.zeros((self.batch, self.n_out), dtype=bool)
        for beat in beats:
            b, i, c = beat["batch"], beat["index"], beat["count"]
            if b >= self.batch or i + c > self.n_out or c < 1:
                raise AssertionError(f"result beat outside the output: {beat}")
            if seen[b, i:i + c].any():
                raise AssertionError(f"result written twice: {beat}")
            out[b, i:i + c] = beat["data"][:c]
            seen[b, i:i + c] = True
        if not seen.all():
            missing = np.argwhere(~seen)[0]
            raise AssertionError(f"no result for batch {missing[0]} output {missing[1]}")
        return out
