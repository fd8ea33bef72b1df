"""Reference for ACT / SOFTMAX / ELTWISE descriptors: expected status and the SRAM image afterwards.

``expected_status`` mirrors the checks of ``hw/activation/sequencer.py`` in their
order; ``apply`` runs a descriptor on a ``bytearray`` SRAM image with the
bit-exact golden model (``cosim/golden/activation.py``), beat partition
``lanes`` included. Benches and the host runtime use both, so an expectation
is never written twice.
"""

import numpy as np

from ndpdimm.cosim.golden import activation as G
from ndpdimm.hw.activation.sequencer import ACT_UNARY_OPS, SRAM_WORD_BYTES
from ndpdimm.hw.activation.unit import REDUCTION_OPS, ActFmt, ActOp
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

__all__ = ["expected_status", "apply", "elem_bytes", "read_vector", "write_vector"]


def elem_bytes(fmt) -> int:
    return 4 if int(fmt) == ActFmt.FP32 else 2


def _sizes(f):
    n = f["n"]
    red = f["opcode"] == Opcode.ACT and f["op"] in [int(o) for o in REDUCTION_OPS]
    ei = elem_bytes(f["in_fmt"]) if f["in_fmt"] != 3 else 2
    eo = elem_bytes(f["out_fmt"]) if f["out_fmt"] != 3 else 2
    return n * ei, (eo if red else n * eo), ei, eo


def expected_status(f: dict, sram_size: int) -> Status:
    """The status the sequencer gives descriptor fields ``f`` (opcode, op, in_fmt, out_fmt, n,
    src_a, src_b, dst; missing fields count as 0)."""
    f = {k: int(f.get(k, 0)) for k in ("opcode", "op", "in_fmt", "out_fmt", "n", "src_a",
                                         "src_b", "dst")}
    elt = f["opcode"] == Opcode.ELTWISE
    act = f["opcode"] == Opcode.ACT
    if (f["in_fmt"] == 3 or f["out_fmt"] == 3 or
            (act and f["op"] not in [int(o) for o in ACT_UNARY_OPS]) or
            (elt and f["op"] not in (ActOp.ADD, ActOp.MUL))):
        return Status.BAD_FIELD
    srcs = ["src_a"] + (["src_b"] if elt else [])
    if any(f[k] % SRAM_WORD_BYTES for k in srcs + ["dst"]):
        return Status.MISALIGNED
    in_b, out_b, ei, eo = _sizes(f)
    if any(f[k] + in_b > sram_size for k in srcs) or f["dst"] + out_b > sram_size:
        return Status.SRAM_RANGE
    if f["n"]:
        for k in srcs:
            meet = f["dst"] < f[k] + in_b and f[k] < f["dst"] + out_b
            if meet and not (f["dst"] == f[k] and eo <= ei):
                return Status.BAD_FIELD
    return Status.OK


def read_vector(sram, addr, n, fmt) -> np.ndarray:
    """``n`` lane words (FP16/BF16 in the low 16 bits, or FP32) at ``addr``."""
    e = elem_bytes(fmt)
    raw = bytes(sram[addr:addr + n * e])
    return np.frombuffer(raw, dtype="<u4" if e == 4 else "<u2").astype(np.int64)


def write_vector(sram, addr, words, fmt):
    e = elem_bytes(fmt)
    arr = np.asarray(words, dtype=np.int64).astype("<u4" if e == 4 else "<u2")
    sram[addr:addr + arr.size * e] = arr.tobytes()


def apply(f: dict, sram: bytearray, lanes: int) -> Status:
    """Run descriptor ``f`` on ``sram`` (modified in place when it is valid); returns its status."""
    code = expected_status(f, len(sram))
    if code != Status.OK or not f["n"]:
        return code
    op, n = f.get("op", 0), f["n"]
    in_fmt, out_fmt = ActFmt(f["in_fmt"]), ActFmt(f["out_fmt"])
    x = read_vector(sram, f["src_a"], n, in_fmt)
    if f["opcode"] == Opcode.SOFTMAX:
        y = G.softmax(x, lanes, in_fmt, out_fmt)["y"]
    elif f["opcode"] == Opcode.ELTWISE:
        y = G.elementwise(op, x, read_vector(sram, f["src_b"], n, in_fmt), in_fmt, out_fmt)
    elif op in [int(o) for o in REDUCTION_OPS]:
        y = [G.reduce_beats(op, G.split_beats(x, lanes), lanes, in_fmt, out_fmt,
                            c=f.get("c", 0))]
    else:
        y = G.elementwise(op, x, None, in_fmt, out_fmt, c=f.get("c", 0), k=f.get("k", 0))
    write_vector(sram, f["dst"], y, out_fmt)
    return code
