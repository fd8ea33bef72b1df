"""Shared formats of the NDP core: data types, GEMV modes and stream payload layouts.

Defined once here and used by the RTL (``ndpdimm.hw``), the golden model and
benches (``ndpdimm.cosim``) and the host runtime (``ndpdimm.sw``), so a field
position or a lane count is written in exactly one place.

A *weight word* is 128 bits: 8 FP16/BF16 elements or 16 INT8 elements, element
``i`` in bits ``[i*w, (i+1)*w)`` (little-endian lanes, as the words sit in DRAM).
"""

import enum
import math
from dataclasses import dataclass

from amaranth.lib import data

__all__ = [
    "WORD_BITS", "ACC_BITS", "RESULT_LANES",
    "Dtype", "DtypeInfo", "GemvMode",
    "serial_digits", "slot_cycles", "peak_macs_per_cycle", "check_int", "NDP_CLOCK_HZ",
    "weights_beat_layout", "result_beat_layout", "gemv_command_layout",
]

#: Width of one weight word (one DRAM-to-unit transfer) in bits.
WORD_BITS = 128
#: Accumulator width: FP32 for FP16/BF16, INT32 for INT8.
ACC_BITS = 32
#: 32-bit results carried by one result-stream beat (256 bits, one SRAM word).
RESULT_LANES = 8
#: Clock of the NDP core (SPEC section 1).
NDP_CLOCK_HZ = 1e9


def check_int(name: str, value, low: int, high: int) -> int:
    """Return ``value`` if it is an integer in ``low..high``; else ``ValueError`` quoting it."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


class Dtype(enum.IntEnum):
    """Operand data type of one operation (weights and activations share it)."""
    FP16 = 0
    BF16 = 1
    INT8 = 2

    @property
    def info(self) -> "DtypeInfo":
        return _DTYPE_INFO[self]

    @classmethod
    def parse(cls, value) -> "Dtype":
        """Accept a ``Dtype``, its name (any case) or its code; raise ``ValueError`` otherwise."""
        if isinstance(value, Dtype):
            return value
        if isinstance(value, str):
            try:
                return cls[value.upper()]
            except KeyError:
                pass
        elif isinstance(value, int) and not isinstance(value, bool):
            try:
                return cls(value)
            except ValueError:
                pass
        raise ValueError(f"unknown dtype {value!r}: expected one of "
                         f"{', '.join(d.name.lower() for d in cls)}")


@dataclass(frozen=True)
class DtypeInfo:
    elem_bits: int       # storage width of one element
    lanes: int           # elements per 128-bit weight word
    exp_bits: int        # 0 for integers
    frac_bits: int       # stored fraction bits (0 for integers)
    bias: int            # exponent bias (0 for integers)
    serial_bits: int     # weight bits the bit-serial multiplier walks through:
                         # significand incl. hidden bit, or the 8 integer bits
    is_float: bool


_DTYPE_INFO = {
    Dtype.FP16: DtypeInfo(16, 8, 5, 10, 15, 11, True),
    Dtype.BF16: DtypeInfo(16, 8, 8, 7, 127, 8, True),
    Dtype.INT8: DtypeInfo(8, 16, 0, 0, 0, 8, False),
}


class GemvMode(enum.IntEnum):
    """How a unit combines its lanes.

    ``DOT``: the lanes of a word are consecutive columns of one output row; all
    lane products go into one accumulator (dense GEMV and row gather).
    ``AXPY``: the lanes of a word are consecutive output elements; the
    activation is one scalar broadcast to every lane and each lane keeps its own
    accumulator (column gather: a weighted sum of selected neuron vectors).
    """
    DOT = 0
    AXPY = 1


def serial_digits(dtype: Dtype, radix_bits: int) -> int:
    """Cycles the bit-serial multiplier needs for one weight word and one activation."""
    return math.ceil(Dtype.parse(dtype).info.serial_bits / radix_bits)


def slot_cycles(dtype: Dtype, radix_bits: int) -> int:
    """Steady-state cycles per (weight word, batch element) of one unit.

    The multiply stage takes ``serial_digits`` cycles, the lane reducer one cycle
    per lane (one adder walks the lanes); the two stages overlap, so the slower
    one sets the rate.
    """
    dtype = Dtype.parse(dtype)
    return max(serial_digits(dtype, radix_bits), dtype.info.lanes)


def peak_macs_per_cycle(n_units: int, dtype: Dtype, radix_bits: int) -> float:
    """MACs per cycle with every unit busy: ``n_units * lanes / slot_cycles``."""
    dtype = Dtype.parse(dtype)
    return n_units * dtype.info.lanes / slot_cycles(dtype, radix_bits)


def weights_beat_layout(n_units: int) -> data.ArrayLayout:
    """One beat of the weight stream: one 128-bit word for every unit."""
    return data.ArrayLayout(WORD_BITS, n_units)


def result_beat_layout(max_batch: int, index_bits: int) -> data.StructLayout:
    """One beat of the result stream: up to 8 consecutive outputs of one batch element.

    ``index`` is the position of ``data[0]`` in the output vector of batch
    element ``batch``; ``count`` (1..8) says how many of ``data`` are valid;
    ``last`` marks the final beat of the operation.
    """
    return data.StructLayout({
        "data": data.ArrayLayout(ACC_BITS, RESULT_LANES),
        "count": range(RESULT_LANES + 1),
        "batch": range(max(max_batch, 2)),
        "index": index_bits,
        "last": 1,
    })


def gemv_command_layout(max_batch: int, index_bits: int, step_bits: int) -> data.StructLayout:
    """One GEMV engine command (the engine-level view of a GEMV descriptor).

    ``n_out``: outputs per batch element (DOT: output rows; AXPY: output
    elements). ``n_steps``: weight words each unit consumes per output group
    (DOT: words per row, ``ceil(K / lanes)``; AXPY: number of selected neurons).
    ``batch_minus_one``: batch size - 1, so every encoding is a legal batch.
    ``dtype`` 3 is reserved: the engine rejects it (``error``) and consumes nothing.
    """
    return data.StructLayout({
        "mode": GemvMode,
        "dtype": 2,
        "batch_minus_one": range(max(max_batch, 2)),
        "n_out": index_bits,
        "n_steps": step_bits,
    })
