"""The NDP core's memory-mapped registers: one Python description for RTL, tests, docs and the host runtime.

The host reaches the registers through the core's CSR port (64-bit registers,
byte offsets, 8-byte aligned). ``REGISTERS`` is the single source: the command
processor decodes offsets from it, the host runtime and benches look registers
up by name (``register("DESC_PUSH").offset``), and ``docs/registers.md`` is
generated from it (``python -m ndpdimm.hw.registers > docs/registers.md``;
a test checks the committed file is current).

Access kinds: ``ro`` read only (writes ignored, and counted in ``CSR_ERRORS``),
``rw`` read/write, ``wo`` write only (reads return 0), ``w1`` a write of any
value triggers an action. ``privileged`` registers may only be changed by the
host while the core is idle (no descriptor queued or running); a write at any
other time is ignored and counted in ``CSR_ERRORS`` - so a running descriptor
can never see its protection window move.
"""

from dataclasses import dataclass

__all__ = ["Register", "REGISTERS", "register", "CSR_DATA_BITS", "markdown"]

#: Width of every register and of the CSR port's data.
CSR_DATA_BITS = 64

_ACCESS = ("ro", "rw", "wo", "w1")


@dataclass(frozen=True)
class Register:
    name: str
    offset: int
    access: str
    doc: str
    reset: int = 0
    privileged: bool = False

    def __post_init__(self):
        if self.access not in _ACCESS:
            raise ValueError(f"register {self.name}: access must be one of {_ACCESS}, "
                             f"got {self.access!r}")
        if self.offset % 8 or self.offset < 0:
            raise ValueError(f"register {self.name}: offset {self.offset:#x} is not 8-byte aligned")


#: 'NDPDIMM' + format version 1, read from ``ID`` to find the core.
ID_VALUE = int.from_bytes(b"\x01MMIDPDN", "big")

REGISTERS = (
    Register("ID", 0x000, "ro", "identifies the core: 'NDPDIMM' and register-format version 1",
             reset=ID_VALUE),
    Register("CAPS", 0x008, "ro", "build parameters: [15:0] GEMV units, [23:16] log2 SRAM bytes, "
             "[27:24] DRAM ranks, [35:28] max batch, [47:36] activation lanes, [48] DIMM-Link built"),
    Register("CTRL", 0x010, "rw", "[0] ENABLE: descriptors are taken from the queue while set "
             "(clear it to hold the queue; a running descriptor finishes)"),
    Register("STATUS", 0x018, "ro", "[0] busy (a descriptor queued or running), [15:8] descriptors "
             "queued, [31:16] completions waiting, [32] descriptor queue full, [33] completion "
             "queue full"),
    Register("WINDOW_BASE", 0x020, "rw", "first DIMM-local byte the NDP may touch (64 B aligned)",
             privileged=True),
    Register("WINDOW_LIMIT", 0x028, "rw", "first byte past the NDP's DRAM window (64 B aligned); "
             "reset 0 = an empty window: every DRAM-touching descriptor is rejected until the host "
             "opens one", privileged=True),
    Register("POLICY", 0x030, "rw", "[1:0] host/NDP DRAM arbitration: 0 host_first, 1 ndp_first, "
             "2 fair", reset=2, privileged=True),
    Register("LINK_ID", 0x038, "rw", "DIMM-Link: [3:0] this DIMM's id in the chain, [8:4] DIMMs in "
             "the chain (reset 0: no link configured, every LINK_SEND/ATOMIC_ADD is BAD_FIELD)",
             privileged=True),
    Register("DESC0", 0x040, "wo", "descriptor staging word 0 (bits 63:0)"),
    Register("DESC1", 0x048, "wo", "descriptor staging word 1 (bits 127:64)"),
    Register("DESC2", 0x050, "wo", "descriptor staging word 2 (bits 191:128)"),
    Register("DESC3", 0x058, "wo", "descriptor staging word 3 (bits 255:192)"),
    Register("DESC_PUSH", 0x060, "w1", "push the staged descriptor into the queue (ignored and "
             "counted in CSR_ERRORS when the queue is full)"),
    Register("CQ_HEAD", 0x080, "ro", "oldest completion: [0] valid, [15:4] descriptor id, [23:16] "
             "status code (``Status``), [31:24] opcode"),
    Register("CQ_CYCLES", 0x088, "ro", "oldest completion: cycles from dispatch to completion"),
    Register("CQ_DRAM_BYTES", 0x090, "ro", "oldest completion: DRAM bytes read + written"),
    Register("CQ_POP", 0x098, "w1", "drop the oldest completion"),
    Register("CSR_ERRORS", 0x0A0, "ro", "count of ignored CSR writes (read-only or privileged "
             "register, full queue)"),
    Register("CYCLES", 0x100, "ro", "cycles since reset"),
    Register("GEMV_BUSY_CYCLES", 0x108, "ro", "cycles the GEMV engine was busy"),
    Register("ACT_BUSY_CYCLES", 0x110, "ro", "cycles the activation unit was busy"),
    Register("DMA_BUSY_CYCLES", 0x118, "ro", "cycles the DMA engine was busy"),
    Register("DRAM_BURSTS_READ", 0x120, "ro", "64 B bursts the NDP read from DRAM"),
    Register("DRAM_ROW_HITS", 0x128, "ro", "column commands that hit an open row (all ranks)"),
    Register("DRAM_ROW_MISSES", 0x130, "ro", "column commands right after an activate"),
    Register("DRAM_REFRESHES", 0x138, "ro", "refresh commands (all ranks)"),
)


def _check_unique():
    names, offsets = set(), set()
    for r in REGISTERS:
        if r.name in names or r.offset in offsets:
            raise AssertionError(f"duplicate register name or offset: {r}")
        names.add(r.name)
        offsets.add(r.offset)


_check_unique()
_BY_NAME = {r.name: r for r in REGISTERS}


def register(name: str) -> Register:
    """The register called ``name``; ``KeyError`` names the unknown register."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"no register {name!r}; registers: {', '.join(_BY_NAME)}") from None


def markdown() -> str:
    """The register map as a Markdown document (``docs/registers.md``)."""
    lines = ["# NDP core register map", "",
             "Generated from `hw/registers.py` (`python -m ndpdimm.hw.registers`); do not "
             "edit by hand.", "",
             f"All registers are {CSR_DATA_BITS} bits wide at 8-byte aligned byte offsets of the "
             "core's CSR port. Access: `ro` read only, `rw` read/write, `wo` write only, `w1` "
             "a write triggers an action. Privileged registers change only while the core is idle.",
             "", "| offset | name | access | reset | description |", "|---|---|---|---|---|"]
    for r in REGISTERS:
        access = r.access + (", privileged" if r.privileged else "")
        lines.append(f"| `{r.offset:#05x}` | `{r.name}` | {access} | `{r.reset:#x}` | {r.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
