"""Descriptor formats of the NDP core's command queue: one 256-bit word per descriptor.

The host stages a descriptor in ``DESC0..DESC3`` and pushes it (see
``hw/registers.py``). Every descriptor starts with the same header:
``opcode`` (4 bits, :class:`Opcode`) and ``id`` (12 bits, echoed in its
completion); the rest is the operation's own layout, all of them views of the
same 256 bits (:data:`DESCRIPTOR_BITS`). The layouts here are the single
definition used by the command processor RTL, the benches and the host runtime
(``layout.const({...}).as_bits()`` packs one, ``layout(bits)`` reads it).

Addresses: ``dram`` fields are DIMM-local byte addresses (checked against the
host's protection window), ``sram`` fields SRAM byte addresses.

Operations and their data layouts:

* ``GEMV`` - weights in DRAM in the weight streamer's layout
  (``hw/memory/weight_streamer.py``), activations ``X`` in SRAM (``x_addr``, row pitch
  ``x_pitch``), optional index list (uint32 entries at ``idx_addr``), results
  FP32/INT32 to SRAM (``y_addr``, row pitch ``y_pitch``), ``accumulate`` adds
  them to what is there (``hw/gemv/result_writer.py``).
* ``DMA`` - ``n_bytes`` between ``dram`` and ``sram`` (``hw/memory/dma.py``).
* ``FENCE`` - completes when every earlier descriptor has completed (the core
  runs descriptors one at a time in queue order, so a FENCE completes at once
  when it is dispatched; it exists so host code does not depend on that).
* ``LINK_SEND`` - ``n_bytes`` between this DIMM's SRAM (``sram``) and the SRAM
  of DIMM ``dest`` (``remote``) over DIMM-Link: ``read = 0`` writes local data
  there, ``read = 1`` reads it here (``link_descriptor_layout``;
  ``hw/link/transaction.py`` has the checks and semantics).
* ``ATOMIC_ADD`` - adds ``n_bytes`` of FP32 (``int32 = 0``) or INT32 lanes from
  this SRAM into DIMM ``dest``'s SRAM at ``remote`` (same layout).
  In a core built without DIMM-Link both complete with ``Status.UNSUPPORTED``.
* ``RELAYOUT`` - converts a tensor between striped and localized layout over
  a group of DIMMs (``relayout_descriptor_layout``; semantics and checks in
  ``hw/link/relayout.py``). Needs DIMM-Link (else ``Status.UNSUPPORTED``).
* ``ACT``, ``SOFTMAX``, ``ELTWISE`` - activation-unit operations SRAM to SRAM
  (``act_descriptor_layout``; semantics and checks in
  ``hw/activation/sequencer.py``).
* Opcode 0 and 10..15 are not defined: ``Status.BAD_OPCODE``.
"""

import enum

from amaranth.lib import data

__all__ = ["Opcode", "GemvOp", "DESCRIPTOR_BITS", "header_layout", "gemv_descriptor_layout",
           "dma_descriptor_layout", "act_descriptor_layout", "link_descriptor_layout",
           "relayout_descriptor_layout", "RELAYOUT_COUNT_BITS",
           "DRAM_ADDR_BITS", "SRAM_ADDR_BITS", "REMOTE_ADDR_BITS"]

DESCRIPTOR_BITS = 256
#: Widths for the default 32 GiB DIMM and 128 KiB SRAM (the layouts take them as arguments).
DRAM_ADDR_BITS = 35
SRAM_ADDR_BITS = 17
#: Width of a remote (target DIMM's) byte address in a DIMM-Link descriptor.
REMOTE_ADDR_BITS = 40
#: Width of a RELAYOUT descriptor's block count.
RELAYOUT_COUNT_BITS = 24


class Opcode(enum.IntEnum):
    GEMV = 1
    ACT = 2
    SOFTMAX = 3
    ELTWISE = 4
    DMA = 5
    FENCE = 6
    LINK_SEND = 7
    ATOMIC_ADD = 8
    RELAYOUT = 9


class GemvOp(enum.IntEnum):
    DENSE = 0
    ROW_GATHER = 1
    COL_GATHER = 2


def header_layout() -> data.StructLayout:
    return data.StructLayout({"opcode": 4, "id": 12})


def _pad(fields: dict) -> data.StructLayout:
    used = sum(data.Layout.cast(v).size if not isinstance(v, int) else v for v in fields.values())
    if used > DESCRIPTOR_BITS:
        raise AssertionError(f"descriptor layout uses {used} > {DESCRIPTOR_BITS} bits")
    return data.StructLayout(fields)


def gemv_descriptor_layout(dram_bits: int = DRAM_ADDR_BITS, sram_bits: int = SRAM_ADDR_BITS,
                           count_bits: int = 20) -> data.StructLayout:
    """GEMV: ``op`` (GemvOp), ``dtype`` (3 reserved), ``batch_minus_one``, ``accumulate``,
    weights ``w_base``/``n_rows``/``n_cols`` (stored neurons x elements, as the streamer),
    ``idx_addr``/``n_idx``, activations ``x_addr``/``x_pitch``, results ``y_addr``/``y_pitch``."""
    return _pad({
        "opcode": 4, "id": 12,
        "op": 2, "dtype": 2, "batch_minus_one": 4, "accumulate": 1,
        "w_base": dram_bits, "n_rows": count_bits, "n_cols": count_bits,
        "idx_addr": sram_bits, "n_idx": count_bits,
        "x_addr": sram_bits, "x_pitch": sram_bits,
        "y_addr": sram_bits, "y_pitch": sram_bits,
    })


def dma_descriptor_layout(dram_bits: int = DRAM_ADDR_BITS,
                          sram_bits: int = SRAM_ADDR_BITS) -> data.StructLayout:
    """DMA: ``to_dram`` (0: DRAM -> SRAM), ``dram``, ``sram``, ``n_bytes``."""
    return _pad({
        "opcode": 4, "id": 12,
        "to_dram": 1, "dram": dram_bits, "sram": sram_bits, "n_bytes": sram_bits + 1,
    })


def act_descriptor_layout(sram_bits: int = SRAM_ADDR_BITS, count_bits: int = 20) -> data.StructLayout:
    """ACT / SOFTMAX / ELTWISE: ``op`` (``ActOp``), ``in_fmt``/``out_fmt`` (``ActFmt``: 0 FP16,
    1 BF16, 2 FP32), ``n`` elements, SRAM byte addresses ``src_a``, ``src_b``, ``dst``, binary32
    constants ``c`` and ``k``."""
    return _pad({
        "opcode": 4, "id": 12,
        "op": 4, "in_fmt": 2, "out_fmt": 2, "n": count_bits,
        "src_a": sram_bits, "src_b": sram_bits, "dst": sram_bits,
        "c": 32, "k": 32,
    })


def link_descriptor_layout(sram_bits: int = SRAM_ADDR_BITS) -> data.StructLayout:
    """LINK_SEND / ATOMIC_ADD: ``read`` (LINK_SEND: 1 = remote -> local), ``int32`` (ATOMIC_ADD:
    1 = INT32 lanes, 0 = FP32), ``dest`` (DIMM id), ``remote`` (byte address in the target's
    SRAM), ``sram`` (local SRAM byte address), ``n_bytes``."""
    return _pad({
        "opcode": 4, "id": 12,
        "read": 1, "int32": 1, "dest": 4, "remote": REMOTE_ADDR_BITS,
        "sram": sram_bits, "n_bytes": sram_bits + 1,
    })


def relayout_descriptor_layout(dram_bits: int = DRAM_ADDR_BITS,
                               sram_bits: int = SRAM_ADDR_BITS) -> data.StructLayout:
    """RELAYOUT: ``to_localized`` (1: striped -> localized, 0: localized -> striped), the group
    (DIMM ids ``group_base`` .. ``group_base + group_dimms - 1``; member ``j`` is DIMM
    ``group_base + j``), ``target`` (member index of the DIMM holding the localized tensor),
    ``block_bytes`` and ``n_blocks`` (the tensor), ``src`` (this DIMM's DRAM base of the layout
    it converts from), ``dst`` (the DRAM base of the layout it converts to, on the receiving
    DIMMs), ``staging`` (SRAM byte address of two blocks of staging space)."""
    return _pad({
        "opcode": 4, "id": 12,
        "to_localized": 1, "group_base": 4, "group_dimms": 5, "target": 4,
        "block_bytes": sram_bits + 1, "n_blocks": RELAYOUT_COUNT_BITS,
        "src": dram_bits, "dst": dram_bits, "staging": sram_bits,
    })
