"""Activation timing: ACT, SOFTMAX and ELTWISE descriptors on the activation unit (``hw/activation/sequencer.py``).

A descriptor runs passes over its ``n`` elements, SRAM to SRAM; a pass moves SRAM words,
one a cycle per port (``SRAM_WORD_BYTES`` each): all reads and the last beat's writes, or
the first beat's reads and all writes, whichever is longer (a partial last beat moves only
the words its elements fill), plus the pass's pipeline latency (a reduction adds the tree
depth, ``log2(lanes)``). SOFTMAX is MAX, SUMEXP, a one-beat RECIP pass and EXP; ELTWISE
reads two sources. No DRAM traffic: the ranks go on paying owed refreshes meanwhile.
"""

from ndpdimm.cosim.model.perf.cost import Cost
from ndpdimm.cosim.model.perf.params import PerfParams
from ndpdimm.cosim.model.perf.structure import SRAM_WORD_BYTES, CoreStructure
from ndpdimm.hw.activation.unit import BINARY_OPS, REDUCTION_OPS, ActFmt
from ndpdimm.hw.descriptors import Opcode

__all__ = ["act_cost", "pass_cycles", "act_op_codes", "REDUCTION_OP_CODES", "BINARY_OP_CODES",
           "ACT_OPCODES"]

#: ``ActOp`` codes of the reductions (MAX, SUMEXP) and of the binary ops (ADD, MUL)
REDUCTION_OP_CODES = tuple(int(o) for o in REDUCTION_OPS)
BINARY_OP_CODES = tuple(int(o) for o in BINARY_OPS)
#: the descriptors the activation sequencer runs
ACT_OPCODES = (Opcode.ACT, Opcode.SOFTMAX, Opcode.ELTWISE)


def act_op_codes():
    """(reduction op codes, binary op codes) of the activation unit."""
    return REDUCTION_OP_CODES, BINARY_OP_CODES


def pass_cycles(s: CoreStructure, p: PerfParams, n, in_fmt, out_fmt, binary=False,
                reduce=False) -> float:
    """Cycles of one pass over ``n`` elements, timed in SRAM words (one a cycle per port).

    Beats are ``lanes`` elements, the last one partial, and each reads (writes) only the
    words its elements fill. Reads stream back to back; a beat's writes start once the
    unit returns it and follow the previous beat's, so the pass ends after either all
    reads and the last beat's writes or the first beat's reads and all writes, whichever
    is later (at 16 lanes a beat is one word; at 256 a full FP16 beat is 16)."""
    lanes = s.config.act_lanes
    beats = -(-n // lanes)
    last = n - (beats - 1) * lanes

    def words(count, fmt):
        return -(-count * (4 if fmt == ActFmt.FP32 else 2) // SRAM_WORD_BYTES)

    sources = 2 if binary else 1
    rd_full, rd_last = sources * words(lanes, in_fmt), sources * words(last, in_fmt)
    reads = (beats - 1) * rd_full + rd_last
    if reduce:
        return reads + p.act_pass + s.tree + p.act_reduce
    wr_full, wr_last = words(lanes, out_fmt), words(last, out_fmt)
    writes = (beats - 1) * wr_full + wr_last
    t = max(reads + wr_last, (rd_full if beats > 1 else rd_last) + writes)
    if words(lanes, in_fmt) > wr_full:  # a source stream outruns the write stream (FP32 -> 16 bit)
        t += p.act_mixed * beats * wr_full / rd_full
    return t + p.act_pass


def act_cost(s: CoreStructure, p: PerfParams, op, f) -> Cost:
    """One ACT / SOFTMAX / ELTWISE descriptor (``op`` its opcode, ``f`` its fields)."""
    n = f["n"]
    if n == 0:
        return Cost(p.complete + p.block_reject)
    t = p.complete + p.act_fixed
    fp32 = ActFmt.FP32
    if op == Opcode.SOFTMAX:
        t += pass_cycles(s, p, n, f["in_fmt"], fp32, reduce=True)          # MAX
        t += pass_cycles(s, p, n, f["in_fmt"], fp32, reduce=True)          # SUMEXP
        t += 1 + p.act_pass                                                 # RECIP: one beat
        t += pass_cycles(s, p, n, f["in_fmt"], f["out_fmt"])                # EXP * 1/sum
    elif op == Opcode.ELTWISE:
        t += pass_cycles(s, p, n, f["in_fmt"], f["out_fmt"], binary=True)
    else:
        t += pass_cycles(s, p, n, f["in_fmt"], f["out_fmt"], reduce=f["op"] in REDUCTION_OP_CODES)
    return Cost(t)
