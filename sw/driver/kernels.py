"""The compute operations of a DIMM: :class:`Kernels`, the mixin :class:`~ndpdimm.sw.driver.dimm.Dimm` inherits.

* ``store_weights`` (the weight streamer's layouts, ``cosim/gemv/weight_layout.py``), ``gemv``
  (DMA X / index list in, GEMV, DMA Y out, tiled to fit the SRAM), ``activation``,
  ``softmax``, ``eltwise``. Each returns its result and leaves a :class:`RunStats` in
  ``last_run``: every descriptor's completion (cycles, DRAM bytes), the elapsed cycles and the
  counter increments, with the backend's name.

GEMV tiling (bit-exact: every output is computed by one descriptor, with the
whole reduction in hardware order):

* DOT weights (dense, row gather) are stored as one image. When ``X``, the
  index list and ``Y`` do not fit the free SRAM together, the outputs are
  split into groups (multiples of the engine's units where possible); a
  dense GEMV then runs as row gathers over ``arange`` index chunks.
* AXPY weights (column gather) are stored as column tiles of at most
  :meth:`Dimm.axpy_tile` outputs each (the AXPY layout's row pitch follows
  the stored width, so a column range of one image is not addressable); one
  descriptor per tile.
* Batches above ``max_batch`` (or too large for the SRAM) are split into
  batch groups.

The mixin holds no state: it works through the DIMM's memory (``alloc``, ``alloc_sram``,
``free``, ``check``, ``sram``), descriptor builders, ``submit`` / ``wait`` and statistics
scope (``_stats``), ``config`` and ``backend`` (``dimm.py``), which it does not import.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import torch

from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.golden.numerics import result_values
from ndpdimm.hw.activation.sequencer import ACT_UNARY_OPS
from ndpdimm.hw.activation.unit import BINARY_OPS, REDUCTION_OPS, ActOp
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.buffers import (
    ACT_FORMATS,
    GEMV_DTYPES,
    GEMV_OPS,
    SRAM_ALIGN,
    SRAM_GRANULE,
    WeightBuffer,
    bytes_tensor,
    check_tensor,
    round_up,
    tensor_bytes,
)

__all__ = ["Kernels"]


def _f32_bits(v) -> int:
    """A Python number -> its binary32 bit pattern (descriptor constants ``c`` and ``k``)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"an activation constant must be a number, got {v!r}")
    return struct.unpack("<I", struct.pack("<f", float(v)))[0]



class Kernels:
    """The operations of :class:`~ndpdimm.sw.driver.dimm.Dimm` (see the module docstring)."""

    # ---- weights -----------------------------------------------------------------------------
    def axpy_tile(self, dtype: Dtype | str | int = Dtype.FP16) -> int:
        """Outputs per stored AXPY column tile: ``max_batch`` result rows of the tile take at most
        half the SRAM (a multiple of 64 elements, so every tile's pitch is whole bursts)."""
        t = self.config.sram_size // 2 // self.config.max_batch // 4
        return max(64, t // 64 * 64)

    def store_weights(self, W: torch.Tensor, dtype: Dtype | str | int | None = None,
                      layout: str = "dot") -> WeightBuffer:
        """``W`` into DRAM in the weight streamer's layout: "dot" for ``W`` [N, K] (dense / row
        gather), "axpy" for ``Wt`` [J, N] (column gather). ``dtype`` defaults to ``W``'s
        (float16 -> FP16, bfloat16 -> BF16, int8 -> INT8); a different one is an error."""
        check_tensor("W", W, tuple(GEMV_DTYPES))
        if W.dim() != 2 or 0 in W.shape:
            raise ValueError(f"W must be a non-empty 2-D tensor, got shape {tuple(W.shape)}")
        dt = GEMV_DTYPES[W.dtype]
        if dtype is not None and Dtype.parse(dtype) != dt:
            raise ValueError(f"W has dtype {W.dtype} but dtype {Dtype.parse(dtype).name} was asked for")
        if layout not in ("dot", "axpy"):
            raise ValueError(f"layout must be 'dot' or 'axpy', got {layout!r}")
        rows, cols = W.shape
        if layout == "dot":
            tiles = [(0, cols)]
        else:
            t = self.axpy_tile(dt)
            tiles = [(c0, min(cols, c0 + t)) for c0 in range(0, cols, t)]
        sizes = [weight_layout.image_bytes(rows, c1 - c0, dt) for c0, c1 in tiles]
        buf = self.alloc(sum(sizes))
        addr, placed = buf.addr, []
        try:
            for (c0, c1), size in zip(tiles, sizes):
                if layout == "dot":
                    image = weight_layout.dot_image(W, dt)
                else:
                    image = weight_layout.axpy_image(W[:, c0:c1].contiguous(), dt)
                self.backend.load(addr, image)
                placed.append((c0, c1, addr))
                addr += size
        except BaseException:
            self.free(buf)
            raise
        return WeightBuffer(buf, dt, layout, (rows, cols), placed)

    # ---- GEMV --------------------------------------------------------------------------------
    def gemv(self, weights: WeightBuffer, x: torch.Tensor, op: str | None = None,
             idx: torch.Tensor | Sequence[int] | None = None,
             accumulate: torch.Tensor | None = None, fetch: bool = True) -> torch.Tensor | None:
        """``Y = W x`` on the NDP; returns float32 (FP16/BF16) or int32 (INT8) ``[B, n_out]`` (or
        ``[n_out]`` for a 1-D ``x``).

        ``op``: "dense" (DOT weights, ``x`` [B, K]), "row_gather" (DOT weights, outputs
        ``idx``), "col_gather" (AXPY weights ``Wt`` [J, N], ``x`` = H [B, J], sums over the
        neurons ``idx`` in list order); default from the weights' layout and ``idx``.
        ``accumulate``: prior values ``[B, n_out]`` the results are added to in hardware (the
        result writer's rule). Index entries past the matrix are the hardware's to report
        (``NdpError`` with ``BAD_INDEX``; nothing is written). ``fetch=False`` runs everything
        but does not read the results back (returns None): for a timing-only model backend.
        """
        if not isinstance(weights, WeightBuffer):
            raise ValueError(f"weights must be a WeightBuffer (store_weights), got {type(weights).__name__}")
        self.check(weights.buffer, "GEMV")
        if op is None:
            op = "col_gather" if weights.layout == "axpy" else ("dense" if idx is None else "row_gather")
        if op not in GEMV_OPS:
            raise ValueError(f"op must be one of {', '.join(GEMV_OPS)}, got {op!r}")
        if (op == "col_gather") != (weights.layout == "axpy"):
            raise ValueError(f"{op} needs weights stored with layout "
                             f"{'axpy' if op == 'col_gather' else 'dot'}, these are {weights.layout}")
        check_tensor("x", x, (weights.torch_dtype,))
        squeeze = x.dim() == 1
        X = x[None] if squeeze else x
        rows, cols = weights.shape
        width = rows if op == "col_gather" else cols
        if X.dim() != 2 or X.shape[1] != width or X.shape[0] < 1:
            raise ValueError(f"x must be [{width}] or [B, {width}] for these {rows}x{cols} weights "
                             f"({op}), got shape {tuple(x.shape)}")
        if op == "dense":
            if idx is not None:
                raise ValueError("a dense GEMV takes no index list (use op='row_gather')")
            index = None
        else:
            if idx is None:
                raise ValueError(f"{op} needs an index list idx")
            index = torch.as_tensor(idx)
            if index.dim() != 1 or index.dtype.is_floating_point or index.dtype == torch.bool:
                raise ValueError(f"idx must be a 1-D integer list, got {index.dtype} shape "
                                 f"{tuple(index.shape)}")
            index = index.to(torch.int64)
            if index.numel() and (int(index.min()) < 0 or int(index.max()) >= 1 << 32):
                raise ValueError("idx entries must be uint32 (0 .. 2**32-1); entries past the "
                                 "matrix are reported by the hardware as BAD_INDEX")
            if index.numel() >= 1 << 20:
                raise ValueError(f"an index list holds at most {(1 << 20) - 1} entries, got {index.numel()}")
        B = X.shape[0]
        n_out = cols if op == "col_gather" else (rows if op == "dense" else index.numel())
        is_int = weights.dtype == Dtype.INT8
        prior = None
        if accumulate is not None:
            want = torch.int32 if is_int else torch.float32
            check_tensor("accumulate", accumulate, (want,))
            prior = accumulate[None] if accumulate.dim() == 1 else accumulate
            if tuple(prior.shape) != (B, n_out):
                raise ValueError(f"accumulate must be [{B}, {n_out}], got {tuple(accumulate.shape)}")
        with self._stats(f"gemv {op}"):
            y = self._gemv(weights, X, op, index, prior, n_out, fetch)
        if not fetch:
            return None
        out = result_values(torch.from_numpy(y.astype(np.int64)), not is_int)
        return out[0] if squeeze else out

    def _gemv(self, wb, X, op, index, prior, n_out, fetch=True) -> np.ndarray:
        """Plan and run: batch groups x output chunks (see the module docstring)."""
        cfg, dt = self.config, wb.dtype
        e = dt.info.elem_bits // 8
        lanes = dt.info.lanes
        B = X.shape[0]
        rows, cols = wb.shape
        axpy = op == "col_gather"
        x_len = rows * e if axpy else 16 * -(-cols // lanes)
        x_pitch = round_up(x_len, 16)
        y = np.zeros((B, n_out), np.uint32)
        if axpy:
            chunks = [(c0, c1, addr, None) for c0, c1, addr in wb.tiles]
            n_idx = index.numel()
        elif op == "dense":
            chunks = [(0, n_out, wb.buffer.addr, None)]
            n_idx = 0
        else:
            chunks = None
            n_idx = 0
        avail = self.sram.largest_free
        per_group = cfg.n_units

        def cost(b, c, gather_idx):
            return (round_up(b * x_pitch, SRAM_GRANULE) + round_up(4 * gather_idx, SRAM_GRANULE) +
                    round_up(b * round_up(4 * c, 32), SRAM_GRANULE))

        b = min(B, cfg.max_batch)
        while True:
            if axpy:
                widest = max(c1 - c0 for c0, c1, _, _ in chunks)
                if cost(b, widest, n_idx) <= avail:
                    break
            elif op == "dense" and cost(b, n_out, 0) <= avail:
                break
            else:
                if cost(b, min(1, n_out), min(1, n_out)) <= avail:
                    lo, hi = 1, max(n_out, 1)                 # largest c that fits, as row gathers
                    while lo < hi:
                        mid = (lo + hi + 1) // 2
                        if cost(b, mid, mid) <= avail:
                            lo = mid
                        else:
                            hi = mid - 1
                    c = lo if lo < per_group else lo // per_group * per_group
                    source = torch.arange(n_out) if op == "dense" else index
                    chunks = [(c0, min(n_out, c0 + c), wb.buffer.addr, source[c0:c0 + c])
                              for c0 in range(0, n_out, c)] or [(0, 0, wb.buffer.addr, source)]
                    break
            if b == 1:
                raise MemoryError(f"GEMV does not fit the SRAM: one {x_len} B activation row, its "
                                  f"index list and one result row need more than the "
                                  f"{avail} bytes free")
            b = max(1, b // 2)
        for b0 in range(0, B, b):
            b1 = min(B, b0 + b)
            self._gemv_batch(wb, X[b0:b1], op, index, None if prior is None else prior[b0:b1],
                             chunks, x_len, x_pitch, y[b0:b1], fetch)
        return y

    def _gemv_batch(self, wb, X, op, index, prior, chunks, x_len, x_pitch, y_out, fetch):
        dt, B = wb.dtype, X.shape[0]
        rows, cols = wb.shape
        axpy = op == "col_gather"
        n_idx_all = index.numel() if axpy else 0
        # SRAM: X rows, one index list, one Y block (the widest chunk), reused chunk by chunk
        widest = max(c1 - c0 for c0, c1, _, _ in chunks)
        max_idx = n_idx_all if axpy else max((0 if s is None else s.numel()) for *_, s in chunks)
        x_bytes = round_up(B * x_pitch, SRAM_GRANULE)
        i_bytes = round_up(4 * max_idx, SRAM_GRANULE)
        y_bytes = round_up(B * round_up(4 * widest, 32), SRAM_GRANULE)
        scratch = self.alloc_sram(x_bytes + i_bytes + y_bytes)
        x_sram, i_sram, y_sram = scratch.addr, scratch.addr + x_bytes, scratch.addr + x_bytes + i_bytes
        staging = []
        try:
            def stage(raw):
                buf = self.alloc(max(len(raw), 1))
                staging.append(buf)
                if raw:
                    self.backend.load(buf.addr, raw)
                return buf
            xb = np.zeros((B, x_pitch), np.uint8)
            raw_x = X.detach().contiguous().view(torch.uint8).numpy().reshape(B, -1)
            xb[:, :raw_x.shape[1]] = raw_x
            x_img = xb.tobytes() + bytes(x_bytes - B * x_pitch)
            descs = [self.dma_descriptor(0, stage(x_img).addr, x_sram, x_bytes, "DMA X in")]
            if axpy and n_idx_all:
                img = weight_layout.index_bytes(index)
                img += bytes(round_up(len(img), SRAM_GRANULE) - len(img))
                descs.append(self.dma_descriptor(0, stage(img).addr, i_sram, len(img),
                                                 "DMA index list in"))
            outs = []
            for c0, c1, w_addr, sub_idx in chunks:
                n = c1 - c0
                y_pitch = round_up(4 * n, 32)
                y_len = round_up(B * y_pitch, SRAM_GRANULE)
                tag = "" if len(chunks) == 1 else f" [{c0}:{c1}]"
                if sub_idx is not None and sub_idx.numel():
                    img = weight_layout.index_bytes(sub_idx)
                    img += bytes(round_up(len(img), SRAM_GRANULE) - len(img))
                    descs.append(self.dma_descriptor(0, stage(img).addr, i_sram, len(img),
                                                     "DMA index list in" + tag))
                if prior is not None:
                    pb = np.zeros((B, y_pitch // 4), np.uint32)
                    pb[:, :n] = prior[:, c0:c1].contiguous().view(torch.int32).numpy().view(np.uint32)
                    img = pb.astype("<u4").tobytes() + bytes(y_len - B * y_pitch)
                    descs.append(self.dma_descriptor(0, stage(img).addr, y_sram, y_len,
                                                     "DMA prior Y in" + tag))
                if axpy:
                    sub_op, n_rows, n_cols, n_idx = "col_gather", rows, n, n_idx_all
                elif sub_idx is None:
                    sub_op, n_rows, n_cols, n_idx = "dense", rows, cols, 0
                else:
                    sub_op, n_rows, n_cols, n_idx = "row_gather", rows, cols, sub_idx.numel()
                descs.append(self.gemv_descriptor(
                    sub_op, dt, B, w_addr, n_rows, n_cols, x_sram, x_pitch, y_sram, y_pitch,
                    idx_addr=i_sram if sub_op != "dense" else 0, n_idx=n_idx,
                    accumulate=prior is not None,
                    label=f"GEMV {sub_op} {dt.name} {n_rows}x{n_cols} batch {B}" + tag))
                out = stage(bytes(y_len)) if y_len else None
                if y_len:
                    descs.append(self.dma_descriptor(1, out.addr, y_sram, y_len, "DMA Y out" + tag))
                outs.append((c0, c1, y_pitch, out))
            self.submit(descs)
            self.wait(descs)
            for c0, c1, y_pitch, out in outs:
                if out is None or c1 == c0 or not fetch:
                    continue
                raw = self.backend.dump(out.addr, B * y_pitch)
                vals = np.frombuffer(raw, dtype="<u4").reshape(B, y_pitch // 4)
                y_out[:, c0:c1] = vals[:, :c1 - c0]
        finally:
            for buf in staging:
                self.free(buf)
            self.free(scratch)

    # ---- activation unit -----------------------------------------------------------------------
    def _act_io(self, operation, inputs, out_bytes, build, fetch=True):
        """DMA ``inputs`` (raw bytes) into fresh SRAM areas, run ``build(addrs, dst)``'s
        descriptors, DMA ``out_bytes`` back; returns the raw output."""
        sizes = [round_up(max(len(r), 1), SRAM_GRANULE) for r in inputs] + \
            [round_up(max(out_bytes, 1), SRAM_GRANULE)]
        if sum(sizes) > self.sram.largest_free:
            raise MemoryError(f"{operation}: operands and result need {sum(sizes)} bytes of SRAM, "
                              f"{self.sram.largest_free} free (the activation unit works on whole "
                              f"vectors in the SRAM)")
        bufs, staging = [], []
        try:
            descs = []
            for raw, size in zip(inputs, sizes):
                buf = self.alloc_sram(size)
                bufs.append(buf)
                tmp = self.alloc(size)
                staging.append(tmp)
                self.backend.load(tmp.addr, raw + bytes(size - len(raw)))
                descs.append(self.dma_descriptor(0, tmp.addr, buf.addr, size, "DMA operand in"))
            dst = self.alloc_sram(sizes[-1])
            bufs.append(dst)
            descs += build([b.addr for b in bufs[:-1]], dst.addr)
            out = self.alloc(sizes[-1])
            staging.append(out)
            descs.append(self.dma_descriptor(1, out.addr, dst.addr, sizes[-1], "DMA result out"))
            with self._stats(operation):
                self.submit(descs)
                self.wait(descs)
            return self.backend.dump(out.addr, out_bytes) if fetch else None
        finally:
            for b in bufs + staging:
                self.free(b)

    @staticmethod
    def _act_format(name, t):
        check_tensor(name, t, tuple(ACT_FORMATS))
        return ACT_FORMATS[t.dtype]

    @staticmethod
    def _out_format(out_dtype, default):
        if out_dtype is None:
            return default
        if out_dtype not in ACT_FORMATS:
            raise ValueError(f"out_dtype must be one of {', '.join(str(d) for d in ACT_FORMATS)}, "
                             f"got {out_dtype!r}")
        return ACT_FORMATS[out_dtype]

    @staticmethod
    def _act_dtype(fmt):
        return {v: k for k, v in ACT_FORMATS.items()}[fmt]

    def activation(self, op: str | int | ActOp, x: torch.Tensor, out_dtype: torch.dtype | None = None,
                   c: float = 0.0, k: float = 1.0, fetch: bool = True) -> torch.Tensor | None:
        """One ACT descriptor over all elements of ``x`` (float16 / bfloat16 / float32): PASS,
        RELU, SILU, GELU, SCALE (``x * k``), EXP (``exp(x - c) * k``), RECIP; the reductions MAX
        and SUMEXP (``sum exp(x - c)``) return a 0-d tensor. ``out_dtype`` defaults to ``x``'s."""
        act = self._act_op(op, ACT_UNARY_OPS, "an ACT")
        fin = self._act_format("x", x)
        fout = self._out_format(out_dtype, fin)
        n = x.numel()
        red = act in REDUCTION_OPS
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        out_n = 1 if red else n
        raw = self._act_io(f"activation {act.name}", [tensor_bytes(x)], out_n * eo,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.ACT, act, fin, fout, n, src[0], dst, c=_f32_bits(c),
                               k=_f32_bits(k), label=f"ACT {act.name} n={n}")], fetch)
        if not fetch:
            return None
        y = bytes_tensor(raw, self._act_dtype(fout), (out_n,))
        return y.reshape(()) if red else y.reshape(x.shape)

    def eltwise(self, op: str | int | ActOp, a: torch.Tensor, b: torch.Tensor,
                out_dtype: torch.dtype | None = None, fetch: bool = True) -> torch.Tensor | None:
        """ELTWISE ``a (+|*) b`` element by element (same dtype and shape)."""
        act = self._act_op(op, BINARY_OPS, "an ELTWISE")
        fin = self._act_format("a", a)
        self._act_format("b", b)
        if b.dtype != a.dtype or b.shape != a.shape:
            raise ValueError(f"a ({a.dtype}, {tuple(a.shape)}) and b ({b.dtype}, {tuple(b.shape)}) "
                             "must have the same dtype and shape")
        fout = self._out_format(out_dtype, fin)
        n = a.numel()
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        raw = self._act_io(f"eltwise {act.name}", [tensor_bytes(a), tensor_bytes(b)], n * eo,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.ELTWISE, act, fin, fout, n, src[0], dst, src_b=src[1],
                               label=f"ELTWISE {act.name} n={n}")], fetch)
        if not fetch:
            return None
        return bytes_tensor(raw, self._act_dtype(fout), a.shape)

    def softmax(self, x: torch.Tensor, out_dtype: torch.dtype | None = None,
                fetch: bool = True) -> torch.Tensor | None:
        """SOFTMAX over the last dimension of ``x`` (1-D, or 2-D: one descriptor per row)."""
        fin = self._act_format("x", x)
        if x.dim() not in (1, 2) or x.shape[-1] < 1:
            raise ValueError(f"softmax takes a 1-D or 2-D tensor with rows of >= 1 element, "
                             f"got shape {tuple(x.shape)}")
        fout = self._out_format(out_dtype, fin)
        X = x[None] if x.dim() == 1 else x
        R, n = X.shape
        ei = x.element_size()
        eo = torch.empty((), dtype=self._act_dtype(fout)).element_size()
        in_pitch, out_pitch = round_up(n * ei, SRAM_ALIGN), round_up(n * eo, SRAM_ALIGN)
        rows = np.zeros((R, in_pitch), np.uint8)
        rows[:, :n * ei] = np.frombuffer(tensor_bytes(X), np.uint8).reshape(R, n * ei)
        raw = self._act_io("softmax", [rows.tobytes()], R * out_pitch,
                           lambda src, dst: [self.act_descriptor(
                               Opcode.SOFTMAX, 0, fin, fout, n, src[0] + r * in_pitch,
                               dst + r * out_pitch, label=f"SOFTMAX row {r} n={n}")
                               for r in range(R)], fetch)
        if not fetch:
            return None
        out = np.frombuffer(raw, np.uint8).reshape(R, out_pitch)[:, :n * eo]
        y = bytes_tensor(np.ascontiguousarray(out).tobytes(), self._act_dtype(fout), (R, n))
        return y[0] if x.dim() == 1 else y

    @staticmethod
    def _act_op(op, allowed, what) -> ActOp:
        try:
            a = ActOp[op.upper()] if isinstance(op, str) else ActOp(op)
        except (KeyError, ValueError):
            a = None
        if a is None or a not in allowed:
            raise ValueError(f"{what} op must be one of {', '.join(o.name for o in allowed)}, "
                             f"got {op!r}")
        return a
