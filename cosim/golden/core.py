"""Functional reference model of one NDP core (``hw/core/ndp_core.py``): completion codes and memory images.

:class:`CoreModel` is the single Python statement of what the core does with a
descriptor, used by the constrained-random full-chip bench
(``cosim/rtl/benches/random_traffic.py``) and by the model backend of the host
runtime (``cosim/model/backend.py``). It needs no simulator:

* ``expected_status(fields)`` predicts a descriptor's completion code from the
  documented check order (``hw/core/command_processor.py``: opcode, GEMV
  ``BAD_FIELD`` / ``MISALIGNED`` / window ``DRAM_RANGE`` / ``SRAM_RANGE``, then
  the weight streamer's index pre-scan ``BAD_INDEX`` on the index-list
  *contents*; DMA: window ``DRAM_RANGE``, then the DMA engine's
  ``MISALIGNED``, ``DRAM_RANGE``, ``SRAM_RANGE``; ACT / SOFTMAX / ELTWISE: the
  activation sequencer's checks, ``cosim/golden/act_program.py``), and
  ``completion_bytes`` the completion's DRAM bytes (the streamer's bursts x 64
  for a GEMV, ``n_bytes`` for a DMA, 0 for a rejected descriptor);
* it holds the whole SRAM (``sram``, a bytearray) and the DRAM (``dram``, a
  ``SparseStore``) and ``apply`` runs a valid descriptor on them: DMA copies,
  GEMV results computed *from the memory images* (weights read back from DRAM
  in the streamer layout, X and the index list from the SRAM, padding lanes
  included) with the golden model (``cosim/golden/numerics.py``), written in the
  engine's beat order (group, batch element, ascending output) with the result
  writer's accumulate rule (``old + new`` in float32 with the canonical NaN,
  or INT32 wrap-around, ``hw/gemv/result_writer.py``), and activation descriptors
  with ``cosim/golden/act_program.py``.

The protection window ``window = (WINDOW_BASE, WINDOW_LIMIT)`` is an attribute
the owner keeps equal to the registers (reset: the empty window ``(0, 0)``).
Descriptors are decoded with the layouts of ``hw/descriptors.py`` at the
widths the command processor uses (``log2`` of the DIMM capacity and of the
SRAM size).
"""

from types import SimpleNamespace

import numpy as np
import torch

from ndpdimm.cosim.dram.model import SparseStore
from ndpdimm.cosim.golden import act_program
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.hw.descriptors import (
    GemvOp,
    Opcode,
    act_descriptor_layout,
    dma_descriptor_layout,
    gemv_descriptor_layout,
    header_layout,
    link_descriptor_layout,
    relayout_descriptor_layout,
)
from ndpdimm.hw.formats import Dtype, slot_cycles
from ndpdimm.hw.gemv.engine import GemvEngine
from ndpdimm.hw.memory.port import Status

__all__ = ["CoreModel", "ACT_OPCODES", "LINK_OPCODES", "UNDEFINED_OPCODES", "descriptor_layouts",
           "engine_counter_bits"]

#: Activation-unit opcodes (``hw/activation/sequencer.py``), modelled by ``cosim/golden/act_program.py``.
ACT_OPCODES = (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE)
#: DIMM-Link opcodes: UNSUPPORTED in the model (one DIMM, no link; the RTL runs them with link=True).
LINK_OPCODES = (Opcode.LINK_SEND, Opcode.ATOMIC_ADD, Opcode.RELAYOUT)
#: Opcodes that are not defined at all: BAD_OPCODE.
UNDEFINED_OPCODES = (0, 10, 11, 12, 13, 14, 15)


def _round(n, k):
    return -(-n // k) * k


def _elems(raw: bytes, dtype: Dtype, shape) -> torch.Tensor:
    """Raw little-endian element bytes -> tensor of ``dtype`` with ``shape``."""
    if dtype == Dtype.INT8:
        a = np.frombuffer(raw, dtype=np.uint8)
    else:
        a = np.frombuffer(raw, dtype="<u2")
    return golden.bits_elem(torch.from_numpy(a.astype(np.int64)), dtype).reshape(shape)


def descriptor_layouts(capacity_bytes: int, sram_size: int) -> dict:
    """``{Opcode: StructLayout}`` for GEMV, DMA, the activation and the DIMM-Link opcodes, at the
    field widths the command processor and the blocks it drives use for this DIMM and SRAM."""
    dram_bits = capacity_bytes.bit_length() - 1
    sram_bits = sram_size.bit_length() - 1
    act = act_descriptor_layout(sram_bits)
    link = link_descriptor_layout(sram_bits)
    return {Opcode.GEMV: gemv_descriptor_layout(dram_bits, sram_bits),
            Opcode.DMA: dma_descriptor_layout(dram_bits, sram_bits),
            Opcode.LINK_SEND: link, Opcode.ATOMIC_ADD: link,
            Opcode.RELAYOUT: relayout_descriptor_layout(dram_bits, sram_bits),
            **{op: act for op in ACT_OPCODES}}


def engine_counter_bits(n_units: int, max_batch: int, radix_bits: int) -> tuple:
    """``(index_bits, step_bits)`` of the GEMV engine ``NdpCore`` builds for these parameters
    (it takes ``GemvEngine``'s defaults): read from the engine itself, never restated."""
    engine = GemvEngine(n_units=n_units, max_batch=max_batch, radix_bits=radix_bits)
    engine._MustUse__silence = True           # built for its widths only, never elaborated
    return engine.index_bits, engine.step_bits


class CoreModel:
    """Reference model: completion codes by the documented check order, and the SRAM and DRAM
    images the core must hold after each valid descriptor (see the module docstring).

    ``index_bits`` / ``step_bits`` default to those of the engine ``NdpCore`` builds.
    """

    def __init__(self, *, n_units: int, max_batch: int, radix_bits: int, sram_size: int,
                 capacity: int, act_lanes: int, window=(0, 0), index_bits: int | None = None,
                 step_bits: int | None = None):
        if index_bits is None or step_bits is None:
            ib, sb = engine_counter_bits(n_units, max_batch, radix_bits)
            index_bits = ib if index_bits is None else index_bits
            step_bits = sb if step_bits is None else step_bits
        self.S = sram_size
        self.capacity = capacity
        self.window = tuple(window)
        self.U, self.max_batch = n_units, max_batch
        self.index_bits, self.step_bits, self.radix_bits = index_bits, step_bits, radix_bits
        self.layouts = descriptor_layouts(capacity, sram_size)
        self.codecs = {op: LayoutCodec(layout) for op, layout in self.layouts.items()}
        self.lanes = act_lanes
        self.header = LayoutCodec(header_layout())
        self.sram = bytearray(self.S)
        self.dram = SparseStore(self.capacity)

    @classmethod
    def from_config(cls, config, window=(0, 0)) -> "CoreModel":
        """The model of the core built from a ``cosim.backend.CoreConfig``."""
        org, _ = config.dram()
        return cls(n_units=config.n_units, max_batch=config.max_batch, radix_bits=config.radix_bits,
                   sram_size=config.sram_size, capacity=org.capacity_bytes,
                   act_lanes=config.act_lanes, window=window)

    # ---- descriptors ---------------------------------------------------------------------
    def encode(self, layout_op, fields) -> int:
        return self.codecs[layout_op].encode(fields)

    def decode(self, word) -> dict:
        return self.codecs.get(word & 0xF, self.header).decode(word)

    def width(self, layout_op, name) -> int:
        return self.codecs[layout_op].fields[name][1]

    def geometry(self, f):
        """The derived quantities the command processor computes for a GEMV."""
        int8 = f["dtype"] == Dtype.INT8
        e, lanes = (1, 16) if int8 else (2, 8)
        axpy = f["op"] == GemvOp.COL_GATHER
        gather = f["op"] != GemvOp.DENSE
        N, K, B = f["n_rows"], f["n_cols"], f["batch_minus_one"] + 1
        bpr = _round(K * e, 64) // 64
        n_out = K if axpy else (f["n_idx"] if gather else N)
        n_steps = f["n_idx"] if axpy else -(-K // lanes)
        x_len = N * e if axpy else 16 * n_steps
        return SimpleNamespace(int8=int8, e=e, lanes=lanes, axpy=axpy, gather=gather, N=N, K=K, B=B,
                               bpr=bpr, w_bytes=N * bpr * 64, n_out=n_out, n_steps=n_steps,
                               x_len=x_len, n_idx=f["n_idx"])

    def index_list(self, addr, n) -> np.ndarray:
        return np.frombuffer(bytes(self.sram[addr:addr + 4 * n]), dtype="<u4").astype(np.int64)

    def expected_status(self, f) -> Status:
        """Completion code of the descriptor ``f`` (decoded fields), given the current SRAM."""
        op = f["opcode"]
        if op == Opcode.GEMV:
            return self._gemv_status(f)
        if op == Opcode.DMA:
            return self._dma_status(f)
        if op == Opcode.FENCE:
            return Status.OK
        if op in ACT_OPCODES:
            return act_program.expected_status(f, self.S)
        if op in LINK_OPCODES:
            return Status.UNSUPPORTED
        return Status.BAD_OPCODE

    def window_passed(self, f) -> bool:
        """Whether a GEMV / DMA passes the command processor's window check."""
        if f["opcode"] == Opcode.GEMV:
            return self._in_window(f["w_base"], self.geometry(f).w_bytes)
        return f["opcode"] == Opcode.DMA and self._in_window(f["dram"], f["n_bytes"])

    def _in_window(self, lo, n):
        return self.window[0] <= lo and lo + n <= self.window[1]

    def _gemv_status(self, f) -> Status:
        g, S = self.geometry(f), self.S
        # command processor
        if f["op"] > 2 or f["dtype"] == 3 or f["batch_minus_one"] >= self.max_batch or \
                g.n_out >= 2 ** self.index_bits or g.n_steps >= 2 ** self.step_bits:
            return Status.BAD_FIELD
        if f["w_base"] % 64 or f["x_addr"] % 16 or f["x_pitch"] % 16 or f["y_addr"] % 32 or \
                f["y_pitch"] % 32 or (g.gather and f["idx_addr"] % 4):
            return Status.MISALIGNED
        if not self._in_window(f["w_base"], g.w_bytes):
            return Status.DRAM_RANGE
        bm1 = g.B - 1
        if f["x_addr"] + bm1 * f["x_pitch"] + g.x_len > S or \
                f["y_addr"] + bm1 * f["y_pitch"] + 4 * g.n_out > S or \
                (g.gather and f["idx_addr"] + 4 * g.n_idx > S):
            return Status.SRAM_RANGE
        # weight streamer (its other checks are implied by the ones above): index pre-scan
        if f["w_base"] + g.w_bytes > self.capacity:
            return Status.DRAM_RANGE
        if g.gather and g.n_idx and (self.index_list(f["idx_addr"], g.n_idx) >= g.N).any():
            return Status.BAD_INDEX
        # feeder and writer checks repeat the command processor's
        return Status.OK

    def _dma_status(self, f) -> Status:
        d, s, n = f["dram"], f["sram"], f["n_bytes"]
        if not self._in_window(d, n):                  # command processor
            return Status.DRAM_RANGE
        if d % 64 or n % 64 or s % 32:                 # DMA engine, in its order
            return Status.MISALIGNED
        if d + n > self.capacity:
            return Status.DRAM_RANGE
        if s + n > self.S:
            return Status.SRAM_RANGE
        return Status.OK

    def completion_bytes(self, f, code) -> int:
        """``CQ_DRAM_BYTES``: the streamer's bursts x 64 (a GEMV), ``n_bytes`` (a DMA)."""
        if code != Status.OK:
            return 0
        if f["opcode"] == Opcode.DMA:
            return f["n_bytes"]
        if f["opcode"] == Opcode.GEMV:
            g = self.geometry(f)
            if g.n_out == 0 or g.n_steps == 0:
                return 0
            # DOT: each output row's bpr chunks; AXPY: each step's neuron, bpr bursts of its pitch
            return 64 * g.bpr * (g.n_idx if g.axpy else g.n_out)
        return 0

    # ---- effects ---------------------------------------------------------------------------
    def gemv_cycles(self, f) -> int:
        """Rough run time of a valid GEMV (to keep fuzzed ones short)."""
        g = self.geometry(f)
        per_group = self.U * (g.lanes if g.axpy else 1)
        groups = -(-g.n_out // per_group)
        return groups * g.n_steps * g.B * slot_cycles(Dtype(f["dtype"]), self.radix_bits) + \
            2 * self.completion_bytes(f, Status.OK) // 64 + groups * g.B * (per_group // 8 + 4) + 100

    def gemv_spans(self, f):
        """(read byte ranges: X rows and index list, written byte ranges: Y rows) in the SRAM."""
        g = self.geometry(f)
        reads = [(f["x_addr"] + b * f["x_pitch"], f["x_addr"] + b * f["x_pitch"] + g.x_len)
                 for b in range(g.B)]
        if g.gather:
            reads.append((f["idx_addr"], f["idx_addr"] + 4 * g.n_idx))
        writes = [(f["y_addr"] + b * f["y_pitch"], f["y_addr"] + b * f["y_pitch"] + 4 * g.n_out)
                  for b in range(g.B)] if g.n_out else []
        return reads, writes

    def gemv_features(self, f) -> list:
        """Coverage labels of a valid GEMV (logged by the fuzzer)."""
        g = self.geometry(f)
        out = [("dense", "row_gather", "col_gather")[f["op"]], Dtype(f["dtype"]).name, f"batch {g.B}"]
        if f["accumulate"]:
            out.append("accumulate")
        if g.n_out == 0:
            out.append("no outputs")
        elif g.n_steps == 0:
            out.append("no steps (zeros)")
        if g.B > 1 and f["y_pitch"] < 4 * g.n_out:
            out.append("aliased Y rows")
        if g.B > 1 and f["x_pitch"] < g.x_len:
            out.append("overlapping X rows")
        per_group = self.U * (g.lanes if g.axpy else 1)
        if g.n_out > per_group:
            out.append("several groups")
        if f["w_base"] + g.w_bytes == self.window[1]:
            out.append("weights end at WINDOW_LIMIT")
        if f["w_base"] + g.w_bytes == self.capacity:
            out.append("weights end at the DIMM's end")
        if g.n_out and f["y_addr"] + (g.B - 1) * f["y_pitch"] + 4 * g.n_out == self.S:
            out.append("Y ends at SRAM end")
        if f["x_addr"] + (g.B - 1) * f["x_pitch"] + g.x_len == self.S:
            out.append("X ends at SRAM end")
        if g.gather and g.n_idx and f["idx_addr"] + 4 * g.n_idx == self.S:
            out.append("index list ends at SRAM end")
        return out

    def gemv_results(self, f) -> np.ndarray:
        """Golden results [B, n_out] (uint32) of a valid GEMV, operands read from the images."""
        g = self.geometry(f)
        dtype = Dtype(f["dtype"])
        if g.n_out == 0 or g.n_steps == 0:
            return np.zeros((g.B, g.n_out), dtype=np.uint32)
        if g.axpy:
            idx = self.index_list(f["idx_addr"], g.n_idx)
            pitch = g.bpr * 64
            W = b"".join(self.dram.read(f["w_base"] + int(i) * pitch, g.K * g.e) for i in idx)
            H = bytearray()
            for b in range(g.B):
                row = f["x_addr"] + b * f["x_pitch"]
                for i in idx:
                    a = row + int(i) * g.e
                    H += self.sram[a:a + g.e]
            Wt = _elems(W, dtype, (g.n_idx, g.K))
            Hs = _elems(bytes(H), dtype, (g.B, g.n_idx))
            y = golden.gemv_col_gather(Wt, Hs, torch.arange(g.n_idx), dtype)
            return golden.result_bits(y).reshape(g.B, g.n_out)
        L = g.n_steps * g.lanes                   # lanes the engine multiplies (padding included)
        if g.gather:
            rows = self.index_list(f["idx_addr"], g.n_idx).tolist()
            W = b"".join(b"".join(self.dram.read(f["w_base"] + (j * g.N + n) * 64, 64)
                                  for j in range(g.bpr))[:L * g.e] for n in rows)
        else:
            block = np.frombuffer(self.dram.read(f["w_base"], g.w_bytes), dtype=np.uint8)
            block = block.reshape(g.bpr, g.N, 64).transpose(1, 0, 2).reshape(g.N, g.bpr * 64)
            W = np.ascontiguousarray(block[:, :L * g.e]).tobytes()
        X = bytearray()
        for b in range(g.B):
            a = f["x_addr"] + b * f["x_pitch"]
            row = bytearray(self.sram[a:a + L * g.e])
            row[g.K * g.e:] = bytes(len(row) - g.K * g.e)    # the feeder zeroes lanes past K
            X += row
        Wd = _elems(W, dtype, (g.n_out, L))
        Xd = _elems(bytes(X), dtype, (g.B, L))
        return golden.result_bits(golden.gemv_dot(Wd, Xd, dtype)).reshape(g.B, g.n_out)

    def write_results(self, f, y: np.ndarray) -> None:
        """Write (or add) ``y`` into the SRAM image in the engine's beat order."""
        g = self.geometry(f)
        per_group = self.U * (g.lanes if g.axpy else 1)
        for grp in range(-(-g.n_out // per_group)):
            lo, hi = grp * per_group, min(g.n_out, (grp + 1) * per_group)
            for b in range(g.B):
                a = f["y_addr"] + b * f["y_pitch"] + 4 * lo
                vals = y[b, lo:hi]
                if f["accumulate"]:
                    old = np.frombuffer(bytes(self.sram[a:a + 4 * (hi - lo)]), dtype="<u4")
                    vals = golden.accumulate_bits(old, vals, g.int8)
                self.sram[a:a + 4 * (hi - lo)] = vals.astype("<u4").tobytes()

    def apply(self, f):
        """Apply a descriptor predicted OK; returns a GEMV's computed results."""
        if f["opcode"] == Opcode.DMA:
            d, s, n = f["dram"], f["sram"], f["n_bytes"]
            if n:
                if f["to_dram"]:
                    self.dram.write(d, bytes(self.sram[s:s + n]))
                else:
                    self.sram[s:s + n] = self.dram.read(d, n)
        elif f["opcode"] == Opcode.GEMV:
            y = self.gemv_results(f)
            self.write_results(f, y)
            return y
        elif f["opcode"] in ACT_OPCODES:
            act_program.apply(f, self.sram, self.lanes)
        return None
