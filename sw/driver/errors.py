"""Exceptions of the host driver: :class:`NdpError` and :class:`FreedBufferError`.

``NdpError`` is what ``Dimm.wait`` (so every operation) raises for a descriptor that
completed with an error status: its message names the opcode, id, label, status and the
descriptor's fields. ``FreedBufferError`` (a ``ValueError``) is a buffer used or freed after
it was freed, or one that belongs to another DIMM.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ndpdimm.cosim.backend import Completion
from ndpdimm.hw.descriptors import Opcode

if TYPE_CHECKING:
    from ndpdimm.sw.driver.dimm import Descriptor

__all__ = ["NdpError", "FreedBufferError"]


class NdpError(Exception):
    """A descriptor completed with an error status. ``status`` (a ``Status``), ``completion``
    (the ``Completion``) and ``descriptor`` (the :class:`Descriptor`, if the driver built it)."""

    def __init__(self, completion: Completion, descriptor: Descriptor | None = None) -> None:
        self.completion, self.descriptor, self.status = completion, descriptor, completion.status
        try:
            op = Opcode(completion.opcode).name
        except ValueError:
            op = f"opcode {completion.opcode}"
        what = f" [{descriptor.label}]" if descriptor is not None and descriptor.label else ""
        fields = ""
        if descriptor is not None and set(descriptor.fields) - {"opcode", "id"}:
            fields = ": " + ", ".join(f"{k}={v:#x}" if k in _ADDR_FIELDS else f"{k}={v}"
                                      for k, v in descriptor.fields.items() if k not in ("opcode", "id"))
        super().__init__(f"{op} descriptor {completion.id}{what} failed with "
                         f"{completion.status.name} (code {int(completion.status)}){fields}")


_ADDR_FIELDS = ("w_base", "idx_addr", "x_addr", "y_addr", "dram", "sram", "remote", "src_a", "src_b", "dst",
                "c", "k")


class FreedBufferError(ValueError):
    """A buffer used (or freed) after it was freed, or one that belongs to another DIMM."""

