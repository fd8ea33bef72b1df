"""The NDP core's memory-mapped registers: one Python description for RTL, tests, docs and the host runtime.

The host reaches the registers through the core's CSR port (64-bit registers,
byte offsets, 8-byte aligned). ``REGISTERS`` is the single source: the command
processor decodes offsets from it, the host runtime and benches look registers
up by name (``register("DESC_PUSH").offset``), and ``docs/registers.md`` is
generated from it (``python -m ndpdimm.hw.registers > docs/registers.md``;
a test checks the committed file is current), as are the C header, SystemRDL and
FuseSoC files of ``ndpdimm export`` (``hw/export.py``).

Each register's bits are named by its ``fields`` (``Field``: name, lsb, width,
access, doc; ``register("CAPS").field("UNITS")``), checked when the register
is defined (no overlap, nothing past bit 63, no duplicate name, no reset bit
outside a field). The RTL slices register words with them
(``word[field.bits]``) and the host side packs and unpacks values with
``Register.pack``/``unpack``, so a bit position is written once.

Access kinds: ``ro`` read only (writes ignored, and counted in ``CSR_ERRORS``),
``rw`` read/write, ``wo`` write only (reads return 0), ``w1`` a write of any
value triggers an action. ``privileged`` registers may only be changed by the
host while the core is idle (no descriptor queued or running); a write at any
other time is ignored and counted in ``CSR_ERRORS`` - so a running descriptor
can never see its protection window move.
"""

import re
from dataclasses import dataclass, replace

__all__ = ["Field", "Register", "REGISTERS", "register", "CSR_DATA_BITS", "ID_VALUE", "markdown"]

#: Width of every register and of the CSR port's data.
CSR_DATA_BITS = 64

_ACCESS = ("ro", "rw", "wo", "w1")
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
#: Name of the one field of a register declared without fields (the whole 64-bit value).
WHOLE = "VALUE"


@dataclass(frozen=True)
class Field:
    """Bits ``[lsb + width - 1 : lsb]`` of a register. ``access`` defaults to the register's."""
    name: str
    lsb: int
    width: int
    doc: str
    access: str | None = None

    @property
    def msb(self) -> int:
        return self.lsb + self.width - 1

    @property
    def bits(self) -> slice:
        """The field's bits as a slice of the register's value (Amaranth ``word[f.bits]``)."""
        return slice(self.lsb, self.lsb + self.width)

    @property
    def mask(self) -> int:
        """The field's bits in place in the register."""
        return ((1 << self.width) - 1) << self.lsb

    def get(self, word: int) -> int:
        """The field's value in register value ``word``."""
        return (word >> self.lsb) & ((1 << self.width) - 1)

    def put(self, value: int) -> int:
        """``value`` moved into place; ``ValueError`` if it does not fit the field."""
        if not (isinstance(value, int) and 0 <= value < 1 << self.width):
            raise ValueError(f"field {self.name} is {self.width} bits: {value!r} does not fit")
        return value << self.lsb


@dataclass(frozen=True)
class Register:
    """One 64-bit register. ``fields`` name its bits; a register declared without fields has one,
    ``VALUE``, the whole register. ``doc`` describes the register; each field's doc its bits (the
    register map's text is generated from both, nothing is written twice)."""
    name: str
    offset: int
    access: str
    doc: str
    reset: int = 0
    privileged: bool = False
    fields: tuple[Field, ...] = ()

    def __post_init__(self):
        where = f"register {self.name}"
        if not (isinstance(self.name, str) and _NAME.fullmatch(self.name)):
            raise ValueError(f"register name must be an upper-case identifier, got {self.name!r}")
        if self.access not in _ACCESS:
            raise ValueError(f"{where}: access must be one of {_ACCESS}, got {self.access!r}")
        if self.offset % 8 or self.offset < 0:
            raise ValueError(f"{where}: offset {self.offset:#x} is not 8-byte aligned")
        if not 0 <= self.reset < 1 << CSR_DATA_BITS:
            raise ValueError(f"{where}: reset {self.reset:#x} is not a {CSR_DATA_BITS}-bit value")
        fields = self.fields or (Field(WHOLE, 0, CSR_DATA_BITS, ""),)
        fields = tuple(replace(f, access=f.access or self.access) for f in fields)
        object.__setattr__(self, "fields", fields)
        used, names = 0, set()
        for f in fields:
            at = f"{where}, field {f.name!r}"
            if not (isinstance(f.name, str) and _NAME.fullmatch(f.name)):
                raise ValueError(f"{at}: a field name must be an upper-case identifier")
            if f.name in names:
                raise ValueError(f"{at}: duplicate field name")
            names.add(f.name)
            if f.access not in _ACCESS:
                raise ValueError(f"{at}: access must be one of {_ACCESS}, got {f.access!r}")
            if not (isinstance(f.lsb, int) and isinstance(f.width, int) and f.lsb >= 0
                    and f.width >= 1):
                raise ValueError(f"{at}: lsb must be >= 0 and width >= 1, got lsb {f.lsb!r}, "
                                 f"width {f.width!r}")
            if f.msb >= CSR_DATA_BITS:
                raise ValueError(f"{at}: bits [{f.msb}:{f.lsb}] go past bit {CSR_DATA_BITS - 1}")
            if used & f.mask:
                other = next(o.name for o in fields if o.mask & f.mask and o is not f)
                raise ValueError(f"{at}: bits [{f.msb}:{f.lsb}] overlap field {other!r}")
            used |= f.mask
        if self.reset & ~used:
            raise ValueError(f"{where}: reset {self.reset:#x} sets bits outside its fields "
                             f"({self.reset & ~used:#x})")

    @property
    def whole(self) -> bool:
        """True for a register declared without fields (one field, ``VALUE``, the whole register)."""
        return len(self.fields) == 1 and self.fields[0].name == WHOLE and not self.fields[0].doc

    def field(self, name: str) -> Field:
        """The field called ``name``; ``KeyError`` names it and the register's fields."""
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"register {self.name} has no field {name!r}; fields: "
                       f"{', '.join(f.name for f in self.fields)}")

    def pack(self, **values: int) -> int:
        """The register value with the named fields set (the others 0)."""
        word = 0
        for name, value in values.items():
            word |= self.field(name).put(value)
        return word

    def unpack(self, word: int) -> dict[str, int]:
        """Every field's value in register value ``word``."""
        return {f.name: f.get(word) for f in self.fields}


#: 'NDPDIMM' + format version 1, read from ``ID`` to find the core.
ID_VALUE = int.from_bytes(b"\x01MMIDPDN", "big")

REGISTERS = (
    Register("ID", 0x000, "ro", "identifies the core: 'NDPDIMM' and register-format version 1",
             reset=ID_VALUE),
    Register("CAPS", 0x008, "ro", "build parameters", fields=(
        Field("UNITS", 0, 16, "GEMV units"),
        Field("SRAM_LOG2", 16, 8, "log2 SRAM bytes"),
        Field("RANKS", 24, 4, "DRAM ranks"),
        Field("MAX_BATCH", 28, 8, "max batch"),
        Field("ACT_LANES", 36, 12, "activation lanes"),
        Field("LINK", 48, 1, "DIMM-Link built"))),
    Register("CTRL", 0x010, "rw", "control", fields=(
        Field("ENABLE", 0, 1, "descriptors are taken from the queue while set (clear it to hold "
              "the queue; a running descriptor finishes)"),)),
    Register("STATUS", 0x018, "ro", "core status", fields=(
        Field("BUSY", 0, 1, "a descriptor queued or running"),
        Field("QUEUED", 8, 8, "descriptors queued"),
        Field("CQ_WAITING", 16, 16, "completions waiting"),
        Field("QUEUE_FULL", 32, 1, "descriptor queue full"),
        Field("CQ_FULL", 33, 1, "completion queue full"))),
    Register("WINDOW_BASE", 0x020, "rw", "first DIMM-local byte the NDP may touch (64 B aligned)",
             privileged=True),
    Register("WINDOW_LIMIT", 0x028, "rw", "first byte past the NDP's DRAM window (64 B aligned); "
             "reset 0 = an empty window: every DRAM-touching descriptor is rejected until the host "
             "opens one", privileged=True),
    Register("POLICY", 0x030, "rw", "host/NDP DRAM arbitration", reset=2, privileged=True, fields=(
        Field("ARBITRATION", 0, 2, "0 host_first, 1 ndp_first, 2 fair"),)),
    Register("LINK_ID", 0x038, "rw", "DIMM-Link position (reset 0: no link configured, every "
             "LINK_SEND/ATOMIC_ADD is BAD_FIELD)", privileged=True, fields=(
        Field("MY_ID", 0, 4, "this DIMM's id in the chain"),
        Field("N_DIMMS", 4, 5, "DIMMs in the chain"))),
    Register("DESC0", 0x040, "wo", "descriptor staging word 0 (bits 63:0)"),
    Register("DESC1", 0x048, "wo", "descriptor staging word 1 (bits 127:64)"),
    Register("DESC2", 0x050, "wo", "descriptor staging word 2 (bits 191:128)"),
    Register("DESC3", 0x058, "wo", "descriptor staging word 3 (bits 255:192)"),
    Register("DESC_PUSH", 0x060, "w1", "push the staged descriptor into the queue (ignored and "
             "counted in CSR_ERRORS when the queue is full)"),
    Register("CQ_HEAD", 0x080, "ro", "oldest completion", fields=(
        Field("VALID", 0, 1, "a completion is waiting"),
        Field("ID", 4, 12, "descriptor id"),
        Field("STATUS", 16, 8, "status code (``Status``)"),
        Field("OPCODE", 24, 8, "opcode"))),
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


def _field_text(r: Register) -> str:
    return "; ".join(f"[{_bits(f)}] `{f.name}` {f.doc}".rstrip() for f in r.fields)


def _bits(f: Field) -> str:
    return f"{f.msb}:{f.lsb}" if f.width > 1 else f"{f.lsb}"


def markdown() -> str:
    """The register map as a Markdown document (``docs/registers.md``)."""
    lines = ["# NDP core register map", "",
             "Generated from `hw/registers.py` (`python -m ndpdimm.hw.registers`); do not "
             "edit by hand. `ndpdimm export` writes the same map as a C header and a SystemRDL "
             "file ([ndp_core.md](ndp_core.md#integrating-the-core)).", "",
             f"All registers are {CSR_DATA_BITS} bits wide at 8-byte aligned byte offsets of the "
             "core's CSR port. Access: `ro` read only, `rw` read/write, `wo` write only, `w1` "
             "a write triggers an action. Privileged registers change only while the core is idle. "
             f"A register declared without fields is one field, `{WHOLE}`, of all "
             f"{CSR_DATA_BITS} bits; bits outside every field read 0.",
             "", "| offset | name | access | reset | description | fields |",
             "|---|---|---|---|---|---|"]
    for r in REGISTERS:
        access = r.access + (", privileged" if r.privileged else "")
        lines.append(f"| `{r.offset:#05x}` | `{r.name}` | {access} | `{r.reset:#x}` | {r.doc} "
                     f"| {_field_text(r)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
