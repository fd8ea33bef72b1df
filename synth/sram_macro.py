"""SRAM macros: every ``Memory`` of the RTL is a black-box macro with its area from a density model.

Yosys infers each ``amaranth.lib.memory.Memory`` (``reg [..] mem [..]`` in the
generated Verilog) as one ``$mem_v2`` cell (``memory -nomap``); the flow never
runs ``memory_map``, so no memory bit becomes a flip-flop. The macros are
listed from that netlist (:func:`macros_from_yosys_json`) and their area is
computed here, reported apart from the standard-cell logic.

Density model (``docs/synth.md`` has the discussion)
----------------------------------------------------

* **Single-port (1RW) macro density**: 0.826 Mb/mm^2 for OpenRAM-generated
  SRAM in FreePDK45 -- the same 45 nm PDK as the NanGate45 cells -- as
  published in the OpenRAM paper's comparison with fabricated SRAMs (M. R.
  Guthaus et al., "OpenRAM: An Open-Source Memory Compiler", ICCAD 2016; the
  table is reproduced in OpenRAM's ``docs/source/results.md``). This is a
  whole-macro figure, so the array efficiency (bitcells / macro area:
  decoders, sense amplifiers, write drivers, control) is already in it. We
  read "Mb" as 10^6 bits (reading 2^20 would give 4.6 % less area).
* **Two-port (1R + 1W) macros**: the bitcell needs a second port. OpenRAM's
  documentation gives relative planar bitcell sizes (SCMOS): standard 6T
  (1rw) 6.8 um x 9.2 um, isolated-read 10T (1rw + 1r) 10.9 um x 13.9 um, a
  ratio of 2.42; we scale the whole macro by it (the second port also doubles
  the decoder / sense periphery, so scaling the macro, not only the array,
  is the consistent choice).
* A memory whose read and write ports are driven by the *same* address signal
  (the SRAM banks: a bank is read or written in a cycle, never both) needs
  only one port: it is costed as 1RW.
* Memories with more than one read or write port have no published figure
  here; they are costed with the two-port factor per extra port and flagged
  (``extrapolated``) in the report. None of the current RTL has one.

Not modelled: the fixed periphery overhead that makes small macros less dense
(the density is that of a mid-size OpenRAM macro); small FIFOs are optimistic,
and so, far more, are the GEMV units' 512 x 16 accumulator RAMs: OpenRAM's own
FreePDK45 layout of that shape is 11.9x this model (``docs/synth.md``, 7 nm estimate).
"""

from dataclasses import asdict, dataclass

__all__ = ["DENSITY_BITS_PER_MM2", "TWO_PORT_FACTOR", "DENSITY_SOURCE", "TWO_PORT_SOURCE",
           "MemoryMacro", "macro_area_um2", "macros_from_yosys_json"]

#: OpenRAM FreePDK45 single-port macro density, bits per mm^2 (0.826 Mb/mm^2).
DENSITY_BITS_PER_MM2 = 0.826e6
DENSITY_SOURCE = ("OpenRAM in FreePDK45: 0.826 Mb/mm^2 (M. R. Guthaus et al., \"OpenRAM: An "
                  "Open-Source Memory Compiler\", ICCAD 2016, comparison with fabricated SRAMs; "
                  "OpenRAM docs/source/results.md)")
#: 10T (1rw + 1r) over 6T (1rw) planar bitcell area, OpenRAM documentation (SCMOS cells).
TWO_PORT_FACTOR = (10.9 * 13.9) / (6.8 * 9.2)
TWO_PORT_SOURCE = ("OpenRAM docs, relative planar bitcells: 6T (1rw) 6.8 x 9.2 um, "
                   "isolated-read 10T (1rw, 1r) 10.9 x 13.9 um")


@dataclass(frozen=True)
class MemoryMacro:
    """One inferred memory (a ``$mem_v2`` cell) of one module."""
    module: str
    name: str
    width: int
    depth: int
    read_ports: int
    write_ports: int
    shared_address: bool      # every read and write port uses one address signal

    @property
    def bits(self) -> int:
        return self.width * self.depth

    @property
    def ports(self) -> int:
        """Physical ports the macro needs."""
        if self.shared_address:
            return 1
        return max(1, self.read_ports + self.write_ports)

    @property
    def extrapolated(self) -> bool:
        return self.ports > 2

    def as_dict(self) -> dict:
        return {**asdict(self), "bits": self.bits, "ports": self.ports,
                "area_um2": macro_area_um2(self), "extrapolated": self.extrapolated}


def macro_area_um2(macro: MemoryMacro) -> float:
    """Area of one macro in um^2 (density model in the module docstring)."""
    single = macro.bits / DENSITY_BITS_PER_MM2 * 1e6
    return single * TWO_PORT_FACTOR ** (macro.ports - 1)


def _int_param(v) -> int:
    # write_json gives parameters as binary strings (or ints with -compat-int)
    return v if isinstance(v, int) else int(v, 2)


def macros_from_yosys_json(data: dict) -> list:
    """The ``$mem_v2`` cells of a ``write_json -selected`` dump, as :class:`MemoryMacro`s."""
    out = []
    for module, mod in data.get("modules", {}).items():
        for name, cell in mod.get("cells", {}).items():
            if cell["type"] != "$mem_v2":
                continue
            p, c = cell["parameters"], cell["connections"]
            rd, wr = _int_param(p["RD_PORTS"]), _int_param(p["WR_PORTS"])
            abits = _int_param(p["ABITS"])
            addrs = [tuple(c["RD_ADDR"][i * abits:(i + 1) * abits]) for i in range(rd)]
            addrs += [tuple(c["WR_ADDR"][i * abits:(i + 1) * abits]) for i in range(wr)]
            out.append(MemoryMacro(module=module.lstrip("\\"), name=name.lstrip("\\"),
                                   width=_int_param(p["WIDTH"]), depth=_int_param(p["SIZE"]),
                                   read_ports=rd, write_ports=wr,
                                   shared_address=len(addrs) > 1 and len(set(addrs)) == 1))
    return out
