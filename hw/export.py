"""The core's register map, descriptor formats and Verilog in the formats integration tools read.

``ndpdimm export`` (``sw/commands/export.py``) calls :func:`export`, which writes into one folder, for one
build of the ``NdpCore`` top (its parameters, e.g. ``n_units``):

* ``ndp_core.v`` - the core's Verilog (``ndp_core_verilog``), top module ``ndp_core``; its
  first line records the build parameters;
* ``ndp_regs.h`` - a C header for a host driver: per register ``NDP_<REG>_OFFSET`` and
  ``_RESET``, per field ``NDP_<REG>_<FIELD>_SHIFT``, ``_WIDTH``, ``_MASK`` (in place); the
  opcodes, status codes and the other codes a descriptor carries; every descriptor field's
  position (``NDP_DESC_<OP>_<FIELD>_LSB``/``_WIDTH``, its 64-bit staging word ``_WORD``,
  ``_SHIFT`` and ``_MASK`` in that word, and ``_HI_MASK`` for the bits of a field that
  continues into the next word) with ``ndp_desc_set``/``ndp_desc_get`` helpers that handle
  both; this build's ``CAPS`` value (``NDP_BUILD_CAPS``);
* ``ndp_regs.rdl`` - the register map in SystemRDL 2.0 (one ``addrmap`` of 64-bit registers,
  their fields, software access, reset values and descriptions; ``w1`` registers are
  ``sw = w`` with ``swmod``, privileged ones carry the user property ``ndp_privileged``;
  ``ro`` fields are ``hw = w`` (the core drives them, ``ID`` and ``CAPS`` as constants), the
  others ``hw = r``);
* ``ndpdimm.core`` - a FuseSoC CAPI2 core file packaging the Verilog and the header.

Everything comes from ``hw/registers.py``, ``hw/descriptors.py`` (and the enums the
descriptors use) and the command processor of the build, so nothing is written twice.
Descriptor field positions depend on the build (DRAM and SRAM address widths), so the header
is for one build. Existing files are not overwritten unless ``overwrite=True``; every
argument is checked and the core constructed before anything is written.
"""

import importlib.metadata
import json
from pathlib import Path

from amaranth.lib import data

from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.descriptors import DESCRIPTOR_BITS, GemvOp, Opcode, header_layout
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import CSR_DATA_BITS, REGISTERS

__all__ = ["PARTS", "TOP", "FILES", "CODES", "descriptor_layouts", "descriptor_fields",
           "c_header", "system_rdl", "fusesoc_core", "export", "package_version"]

#: What :func:`export` can write, and the file of each.
PARTS = ("verilog", "header", "rdl", "core")
FILES = {"verilog": "ndp_core.v", "header": "ndp_regs.h", "rdl": "ndp_regs.rdl",
         "core": "ndpdimm.core"}
#: Top module of the exported Verilog.
TOP = "ndp_core"
#: The codes a descriptor or completion carries: (C name prefix, enum).
CODES = (("OPCODE", Opcode), ("GEMV_OP", GemvOp), ("DTYPE", Dtype), ("ACT_OP", ActOp),
         ("ACT_FMT", ActFmt), ("STATUS_CODE", Status))
#: SystemRDL software access of each register access kind (``w1``: a write is an action).
RDL_SW = {"ro": "r", "rw": "rw", "wo": "w", "w1": "w"}
RDL_HW = {"ro": "w", "rw": "r", "wo": "r", "w1": "r"}
_WORD = 64
_VERILOG_STAMP = "// ndpdimm export: NdpCore "


def package_version() -> str:
    return importlib.metadata.version("ndpdimm")


def descriptor_layouts(core) -> dict[str, data.StructLayout]:
    """The descriptor layouts the command processor of ``core`` (an ``NdpCore``) decodes, by
    name: ``HEADER`` (common to all), ``GEMV``, ``DMA``, ``ACT`` (also SOFTMAX, ELTWISE),
    ``LINK`` (LINK_SEND, ATOMIC_ADD), ``RELAYOUT``."""
    cp = core.cp
    return {"HEADER": header_layout(), "GEMV": cp.gemv_layout, "DMA": cp.dma_layout,
            "ACT": core.act.descriptor_layout, "LINK": cp.link_layout,
            "RELAYOUT": cp.relayout_layout}


def descriptor_fields(layout: data.StructLayout) -> list[tuple[str, int, int]]:
    """``(name, lsb, width)`` of every field of ``layout``, in bit order."""
    return sorted(((name, f.offset, f.width) for name, f in layout), key=lambda t: t[1])


def _c_value(name: str, value: int) -> str:
    """64-bit values (masks, resets, CAPS) in hex with ``ULL``, offsets in hex, the rest decimal."""
    if name.endswith(("_MASK", "_RESET", "_CAPS")):
        return f"0x{value:X}ULL"
    return f"0x{value:03X}" if name.endswith("_OFFSET") else str(value)


def _c_string(text: str) -> str:
    return text.replace("*/", "* /")


def _defines(core, registers) -> list[tuple[str, int, str]]:
    """``(macro, value, comment)`` of every numeric macro of the header, in order."""
    out = []
    for r in registers:
        out.append((f"NDP_{r.name}_OFFSET", r.offset, f"{r.access}: {r.doc}"))
        out.append((f"NDP_{r.name}_RESET", r.reset, ""))
        for f in r.fields:
            p = f"NDP_{r.name}_{f.name}"
            comment = f"[{f.msb}:{f.lsb}] {f.access}" + (f": {f.doc}" if f.doc else "")
            out += [(p + "_SHIFT", f.lsb, comment),
                    (p + "_WIDTH", f.width, ""), (p + "_MASK", f.mask, "")]
    for prefix, enum in CODES:
        out += [(f"NDP_{prefix}_{m.name}", int(m), "") for m in enum]
    out += [("NDP_DESC_BITS", DESCRIPTOR_BITS, "one descriptor, staged in DESC0..DESC3"),
            ("NDP_DESC_BYTES", DESCRIPTOR_BITS // 8, ""),
            ("NDP_DESC_WORDS", DESCRIPTOR_BITS // _WORD, "")]
    for lname, layout in descriptor_layouts(core).items():
        for name, lsb, width in descriptor_fields(layout):
            p = f"NDP_DESC_{lname}_{name.upper()}"
            word, shift = divmod(lsb, _WORD)
            low = min(width, _WORD - shift)
            out += [(p + "_LSB", lsb, ""), (p + "_WIDTH", width, ""), (p + "_WORD", word, ""),
                    (p + "_SHIFT", shift, ""), (p + "_MASK", ((1 << low) - 1) << shift, "")]
            if low < width:
                out.append((p + "_HI_MASK", (1 << (width - low)) - 1,
                            f"bits {low}.. of the field, in word {word + 1} from bit 0"))
    out.append(("NDP_BUILD_CAPS", core.cp.caps, "CAPS of the build this header describes"))
    names = [name for name, _, _ in out]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"register, field or code names give the same C macro twice: {twice}")
    return out


_HELPERS = """
/* Set / get a descriptor field by its _LSB and _WIDTH (fields may cross a 64-bit word). */
static inline void ndp_desc_set(uint64_t d[NDP_DESC_WORDS], unsigned lsb, unsigned width,
                                uint64_t value)
{
    unsigned done = 0;
    while (done < width) {
        unsigned bit = lsb + done, word = bit / 64, shift = bit % 64;
        unsigned n = width - done < 64 - shift ? width - done : 64 - shift;
        uint64_t mask = (n == 64 ? ~0ULL : ((1ULL << n) - 1)) << shift;
        d[word] = (d[word] & ~mask) | (((value >> done) << shift) & mask);
        done += n;
    }
}

static inline uint64_t ndp_desc_get(const uint64_t d[NDP_DESC_WORDS], unsigned lsb,
                                    unsigned width)
{
    uint64_t value = 0;
    unsigned done = 0;
    while (done < width) {
        unsigned bit = lsb + done, word = bit / 64, shift = bit % 64;
        unsigned n = width - done < 64 - shift ? width - done : 64 - shift;
        uint64_t part = (d[word] >> shift) & (n == 64 ? ~0ULL : ((1ULL << n) - 1));
        value |= part << done;
        done += n;
    }
    return value;
}

#define NDP_DESC_SET(d, OP, FIELD, value) \\
    ndp_desc_set((d), NDP_DESC_##OP##_##FIELD##_LSB, NDP_DESC_##OP##_##FIELD##_WIDTH, (value))
#define NDP_DESC_GET(d, OP, FIELD) \\
    ndp_desc_get((d), NDP_DESC_##OP##_##FIELD##_LSB, NDP_DESC_##OP##_##FIELD##_WIDTH)
"""


def c_header(core, params: dict, registers=REGISTERS) -> str:
    """``ndp_regs.h`` for ``core`` (an ``NdpCore``) built with ``params`` (``registers``: the
    register map, ``REGISTERS``); ``ValueError`` if two names give the same C macro."""
    lines = ["/* ndp_regs.h - NDP-DIMM core registers and descriptor formats.",
             f" * Generated by ndpdimm {package_version()} (ndpdimm export) from hw/registers.py "
             "and hw/descriptors.py; do not edit.",
             f" * Build: NdpCore {_c_string(json.dumps(params, sort_keys=True))}",
             f" * Registers are {CSR_DATA_BITS}-bit at byte offsets of the CSR port; a descriptor "
             "is staged in DESC0..DESC3 (word i = bits 64i+63..64i) and pushed with DESC_PUSH.",
             " */", "#ifndef NDP_REGS_H", "#define NDP_REGS_H", "", "#include <stdint.h>", ""]
    for name, value, comment in _defines(core, registers):
        text = f"#define {name} {_c_value(name, value)}"
        lines.append(f"{text:<56} /* {_c_string(comment)} */" if comment else text)
    lines += [_HELPERS, "#endif /* NDP_REGS_H */"]
    return "\n".join(lines) + "\n"


def _rdl_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def system_rdl() -> str:
    """``ndp_regs.rdl``: the register map (build-independent) as a SystemRDL 2.0 ``addrmap``."""
    lines = [f"// ndp_regs.rdl - NDP-DIMM core register map, generated by ndpdimm {package_version()}"
             " (ndpdimm export) from hw/registers.py; do not edit.",
             "", "property ndp_privileged { type = boolean; component = reg; };", "",
             "addrmap ndp_core {",
             '    name = "NDP-DIMM core";',
             '    desc = "Registers of the NDP core\'s CSR port (64-bit, byte offsets).";',
             f"    default regwidth = {CSR_DATA_BITS};",
             f"    default accesswidth = {CSR_DATA_BITS};", ""]
    for r in REGISTERS:
        lines += ["    reg {", f"        name = {_rdl_string(r.name)};",
                  f"        desc = {_rdl_string(r.doc)};"]
        if r.privileged:
            lines.append("        ndp_privileged = true;")
        for f in r.fields:
            props = [f"sw = {RDL_SW[f.access]};", f"hw = {RDL_HW[f.access]};"]
            if f.access == "w1":
                props.append("swmod = true;")
            if f.doc:
                props.append(f"desc = {_rdl_string(f.doc)};")
            lines.append(f"        field {{ {' '.join(props)} }} {f.name}[{f.msb}:{f.lsb}] = "
                         f"{f.width}'h{f.get(r.reset):x};")
        lines.append(f"    }} {r.name} @ 0x{r.offset:X};")
    lines.append("};")
    return "\n".join(lines) + "\n"


def fusesoc_core(params: dict) -> str:
    """``ndpdimm.core``: a FuseSoC CAPI2 core file for the Verilog and header beside it."""
    version = package_version()
    return "\n".join([
        "CAPI=2:",
        f"# Generated by ndpdimm {version} (ndpdimm export); do not edit.",
        f"name: ndpdimm:ndp:core:{version}",
        f"description: {json.dumps('NDP-DIMM core (NdpCore ' + json.dumps(params, sort_keys=True) + ')')}",
        "",
        "filesets:",
        "  rtl:",
        "    files:",
        f"      - {FILES['verilog']}",
        "    file_type: verilogSource",
        "  regs:",
        "    files:",
        f"      - {FILES['header']}: {{is_include_file: true}}",
        "    file_type: cSource",
        "  regmap:",
        "    files:",
        f"      - {FILES['rdl']}",
        "    file_type: systemRDLSource",
        "",
        "targets:",
        "  default:",
        "    filesets: [rtl, regs, regmap]",
        f"    toplevel: {TOP}",
        "  lint:",
        "    default_tool: verilator",
        "    filesets: [rtl]",
        f"    toplevel: {TOP}",
        "    tools:",
        "      verilator:",
        "        mode: lint-only",
        "        verilator_options: [-Wno-fatal]",
    ]) + "\n"


def _stamp(params: dict) -> str:
    return _VERILOG_STAMP + json.dumps(params, sort_keys=True)


def export(out_dir, *, what=PARTS, overwrite: bool = False, config_path: str | None = None,
           **params) -> list[Path]:
    """Write the ``what`` parts (of :data:`PARTS`) for an ``NdpCore`` built with ``params``
    (``config_path``: its DRAM TOML, default DDR4-3200) into ``out_dir``; the paths written.

    ``ValueError`` (nothing written) for an unknown part, a file that exists without
    ``overwrite``, a core parameter the core rejects, or ``core`` without ``verilog`` when
    ``ndp_core.v`` is missing from ``out_dir`` or was exported for other parameters."""
    from ndpdimm.hw.core.ndp_core import ndp_core_verilog, silenced_ndp_core

    what = tuple(what)
    unknown = [w for w in what if w not in PARTS]
    if unknown or not what:
        raise ValueError(f"unknown export part(s) {unknown or what!r}; parts: {', '.join(PARTS)}")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"output folder {str(out)!r} is a file")
    paths = {w: out / FILES[w] for w in PARTS}
    existing = [str(paths[w]) for w in what if paths[w].exists()]
    if existing and not overwrite:
        raise ValueError(f"would overwrite {', '.join(existing)}: give --force to overwrite")
    stamp_params = {**params, **({"config": config_path} if config_path else {})}
    core = silenced_ndp_core(config_path, **params)   # checks the parameters (layouts, CAPS)
    if "core" in what and "verilog" not in what:
        v = paths["verilog"]
        if not v.exists():
            raise ValueError(f"the FuseSoC core packages {v}, which does not exist: "
                             "export verilog too")
        with open(v) as f:
            first = f.readline().rstrip("\n")
        if first != _stamp(stamp_params):
            raise ValueError(f"{v} was not exported for these parameters ({first!r}): "
                             "export verilog too")
    texts = {}
    if "header" in what:
        texts["header"] = c_header(core, stamp_params)
    if "rdl" in what:
        texts["rdl"] = system_rdl()
    if "core" in what:
        texts["core"] = fusesoc_core(stamp_params)
    if "verilog" in what:
        texts["verilog"] = (_stamp(stamp_params) + "\n" +
                            ndp_core_verilog(config_path, name=TOP, **params))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for w in PARTS:
        if w in texts:
            paths[w].write_text(texts[w])
            written.append(paths[w])
    return written
