"""ndp_regs.h, ndp_regs.rdl and ndpdimm.core from ``hw/export.py`` read back to the Python description.

The header is compiled with the system C compiler and every macro it defines is printed
and compared with the values derived here from ``hw/registers.py``, the descriptor
layouts of the build and the code enums; descriptors packed with its helpers equal
``layout.const(...)``. The SystemRDL file is elaborated with ``systemrdl-compiler`` and
walked back to ``REGISTERS``. The FuseSoC core file is read as YAML and loaded by FuseSoC.
The export with the core's Verilog (a minute or two of elaboration), linted through the core
file's FuseSoC target, is marked ``sim``.
"""

import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from systemrdl import RDLCompiler
from systemrdl.rdltypes import AccessType

from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.core.ndp_core import silenced_ndp_core
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.export import (
    FILES,
    PARTS,
    TOP,
    c_header,
    descriptor_layouts,
    export,
    fusesoc_core,
    package_version,
)
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import REGISTERS, Field, Register, register
from ndpdimm.sw.cli import main

#: A small build with every descriptor layout (DIMM-Link in).
PARAMS = {"n_units": 16, "max_batch": 8, "act_lanes": 16, "link": True}
CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no system C compiler")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    written = export(out, what=("header", "rdl"), **PARAMS)
    assert written == [out / FILES["header"], out / FILES["rdl"]]
    return out


@pytest.fixture(scope="module")
def core():
    return silenced_ndp_core(**PARAMS)


def _run_c(folder: Path, body: str, name: str) -> str:
    """Compile ``body`` (a C ``main`` body) including the header, strictly, and run it."""
    src = folder / f"{name}.c"
    src.write_text('#include <inttypes.h>\n#include <stdio.h>\n#include "ndp_regs.h"\n'
                   '#include "ndp_regs.h"\n'          # the include guard holds
                   f"int main(void)\n{{\n{body}\n    return 0;\n}}\n")
    exe = folder / name
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-I", str(folder),
                    str(src), "-o", str(exe)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def expected_macros(core) -> dict[str, int]:
    """Every numeric macro the header must define, with its value from the Python description."""
    want = {}
    for r in REGISTERS:
        want[f"NDP_{r.name}_OFFSET"] = r.offset
        want[f"NDP_{r.name}_RESET"] = r.reset
        for f in r.fields:
            want[f"NDP_{r.name}_{f.name}_SHIFT"] = f.lsb
            want[f"NDP_{r.name}_{f.name}_WIDTH"] = f.width
            want[f"NDP_{r.name}_{f.name}_MASK"] = ((1 << f.width) - 1) << f.lsb
    for prefix, enum in (("OPCODE", Opcode), ("GEMV_OP", GemvOp), ("DTYPE", Dtype),
                         ("ACT_OP", ActOp), ("ACT_FMT", ActFmt), ("STATUS_CODE", Status)):
        want.update({f"NDP_{prefix}_{m.name}": m.value for m in enum})
    want.update(NDP_DESC_BITS=256, NDP_DESC_BYTES=32, NDP_DESC_WORDS=4)
    for lname, layout in descriptor_layouts(core).items():
        for name, field in layout:
            p, width = f"NDP_DESC_{lname}_{name.upper()}", field.width
            in_word = min(width, 64 - field.offset % 64)
            want.update({p + "_LSB": field.offset, p + "_WIDTH": width,
                         p + "_WORD": field.offset // 64, p + "_SHIFT": field.offset % 64,
                         p + "_MASK": ((1 << in_word) - 1) << field.offset % 64})
            if in_word < width:
                want[p + "_HI_MASK"] = (1 << (width - in_word)) - 1
    want["NDP_BUILD_CAPS"] = register("CAPS").pack(UNITS=16, SRAM_LOG2=17, RANKS=4, MAX_BATCH=8,
                                                   ACT_LANES=16, LINK=1)
    return want


@needs_cc
def test_header_compiles_and_every_value_matches_the_description(exported, core):
    text = (exported / FILES["header"]).read_text()
    assert text.startswith("/* ndp_regs.h") and "do not edit" in text
    assert f"ndpdimm {package_version()}" in text
    names = re.findall(r"^#define (NDP_\w+) ", text, flags=re.M)      # function-like ones excluded
    body = "\n".join(f'    printf("%s %" PRIu64 "\\n", "{n}", (uint64_t)({n}));' for n in names)
    got = {}
    for line in _run_c(exported, body, "values").splitlines():
        name, value = line.split()
        got[name] = int(value)
    want = expected_macros(core)
    assert sorted(set(want) - set(got)) == [] and sorted(set(got) - set(want)) == []
    assert {n: got[n] for n in want if got[n] != want[n]} == {}
    # 64-bit constants carry ULL: an unsuffixed 0xFFFF...F would be signed/truncated somewhere
    for name in ("NDP_ID_RESET", "NDP_ID_VALUE_MASK", "NDP_STATUS_CQ_FULL_MASK"):
        assert re.search(rf"^#define {name} 0x[0-9A-F]+ULL\b", text, flags=re.M), name


@needs_cc
@pytest.mark.parametrize("seed", [1, 2])
def test_header_helpers_pack_descriptors_as_the_python_layouts(exported, core, seed):
    rng = random.Random(seed)
    lines, want_words = [], []
    for lname, layout in descriptor_layouts(core).items():
        values = {name: rng.getrandbits(f.width) for name, f in layout}
        bits = layout.const(values).as_bits()
        want_words += [(bits >> (64 * w)) & ((1 << 64) - 1) for w in range(4)]
        lines.append("    { uint64_t d[NDP_DESC_WORDS] = {0};")
        for name, value in values.items():
            lines.append(f"      NDP_DESC_SET(d, {lname}, {name.upper()}, {value}ULL);")
        lines.append('      for (int w = 0; w < 4; w++) printf("%" PRIu64 "\\n", d[w]);')
        for name, value in values.items():      # reading back gives every value
            lines.append(f'      if (NDP_DESC_GET(d, {lname}, {name.upper()}) != {value}ULL) '
                         f'printf("bad get {lname}.{name}\\n");')
        lines.append("    }")
    out = _run_c(exported, "\n".join(lines), f"pack{seed}")
    assert "bad get" not in out, out
    assert [int(v) for v in out.split()] == want_words


_RDL_ACCESS = {(AccessType.r, False): "ro", (AccessType.rw, False): "rw",
               (AccessType.w, False): "wo", (AccessType.w, True): "w1"}


def _rdl_map(path: Path) -> list:
    rdlc = RDLCompiler()
    rdlc.compile_file(str(path))
    root = rdlc.elaborate()
    regs = []
    for reg in root.top.registers():
        fields = []
        for f in reg.fields():
            fields.append((f.inst_name, f.lsb, f.width,
                           _RDL_ACCESS[(f.get_property("sw"), f.get_property("swmod"))],
                           f.get_property("desc") or "", f.get_property("reset")))
        reset = sum(v << lsb for _, lsb, _, _, _, v in fields)
        accesses = {a for _, _, _, a, _, _ in fields}
        assert reg.size == 8 and len(accesses) == 1, reg.inst_name
        regs.append((reg.inst_name, reg.address_offset, accesses.pop(), reg.get_property("desc"),
                     reset, bool(reg.get_property("ndp_privileged")),
                     [t[:5] for t in fields]))
    return regs


def test_systemrdl_elaborates_back_to_the_register_map(exported):
    want = [(r.name, r.offset, r.access, r.doc, r.reset, r.privileged,
             [(f.name, f.lsb, f.width, f.access, f.doc) for f in r.fields]) for r in REGISTERS]
    assert _rdl_map(exported / FILES["rdl"]) == want


def _check_core_file(folder: Path, params: dict, with_verilog=True) -> dict:
    """The FuseSoC core file read as YAML: its name, files and top level; every file it lists
    is in ``folder`` and the top level is a module of the Verilog (``with_verilog``)."""
    text = (folder / FILES["core"]).read_text()
    assert text.startswith("CAPI=2:\n")
    core = yaml.safe_load(text)
    assert core["name"] == f"ndpdimm:ndp:core:{package_version()}"
    assert all(f'"{k}": {str(v).lower() if isinstance(v, bool) else v}' in core["description"]
               for k, v in params.items())
    sets = core["filesets"]
    assert sets["rtl"] == {"files": [FILES["verilog"]], "file_type": "verilogSource"}
    assert sets["regs"] == {"files": [{FILES["header"]: {"is_include_file": True}}],
                            "file_type": "cSource"}
    assert sets["regmap"]["files"] == [FILES["rdl"]]
    default = core["targets"]["default"]
    assert default["toplevel"] == TOP and set(default["filesets"]) == set(sets)
    for fileset in sets.values():
        for entry in fileset["files"]:
            name = entry if isinstance(entry, str) else next(iter(entry))
            assert (folder / name).is_file() or (name, with_verilog) == (FILES["verilog"], False)
    if not with_verilog:
        return core
    verilog = (folder / FILES["verilog"]).read_text()
    assert re.search(rf"^module {default['toplevel']}\(", verilog, flags=re.M)
    return core


def _fusesoc(folder: Path, *args, env=None) -> str:
    """Run FuseSoC (the installed package's command) on the cores in ``folder`` only (an empty
    configuration: no library of the user's)."""
    exe = Path(sys.executable).parent / "fusesoc"
    config = folder.parent / f"{folder.name}-fusesoc.conf"
    config.write_text("")
    proc = subprocess.run([str(exe), "--config", str(config), "--cores-root", str(folder), *args],
                          cwd=folder, env=env, capture_output=True, text=True)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "ERROR" not in out, out[-3000:]
    return out


def test_core_file_names_the_exported_files_and_top(exported):
    """The core file as ``export`` writes it beside the header and SystemRDL file, read as YAML
    and loaded by FuseSoC (the Verilog, a minute to elaborate, is checked by the ``sim`` test
    below)."""
    (exported / FILES["core"]).write_text(fusesoc_core(PARAMS))
    _check_core_file(exported, PARAMS, with_verilog=False)
    info = _fusesoc(exported, "core-info", "ndpdimm:ndp:core")
    assert f"Name:        ndpdimm:ndp:core:{package_version()}" in info
    assert re.search(r"^default\s*:", info, flags=re.M) and re.search(r"^lint\s*:", info, flags=re.M)


@pytest.mark.sim
def test_export_command_writes_a_consistent_package(tmp_path):
    """``ndpdimm export`` with the Verilog: the .core lists files that are there, its top level
    is the Verilog's top module, FuseSoC runs its Verilator lint target; the .core is re-made for
    the same Verilog and refused for a Verilog of other parameters."""
    argv = ["export", "--out-dir", str(tmp_path), "--units", "16", "--max-batch", "8", "--link"]
    assert main(argv) == 0
    params = {"n_units": 16, "max_batch": 8, "act_lanes": 16, "link": True}
    _check_core_file(tmp_path, params)
    from ndpdimm.cosim.rtl.build import verilator_bin_dir
    env = {**os.environ, "PATH": f"{verilator_bin_dir()}{os.pathsep}{os.environ['PATH']}"}
    lint = _fusesoc(tmp_path, "run", "--build-root", str(tmp_path / "fusesoc"), "--target", "lint",
                    "ndpdimm:ndp:core", env=env)
    assert "verilator" in lint.lower()
    (tmp_path / FILES["core"]).unlink()
    assert main(argv + ["--what", "core"]) == 0
    _check_core_file(tmp_path, params)
    assert main(["export", "--out-dir", str(tmp_path), "--units", "32", "--what", "core",
                 "--force"]) == 2


def test_core_file_without_its_verilog_is_refused(tmp_path, capsys):
    assert main(["export", "--out-dir", str(tmp_path), "--units", "16", "--what",
                 "header,core"]) == 2
    assert f"{FILES['verilog']}, which does not exist" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []                       # nothing written


def test_existing_files_are_kept_without_force(exported, tmp_path, capsys):
    header = tmp_path / FILES["header"]
    header.write_text("/* mine */\n")
    argv = ["export", "--out-dir", str(tmp_path), "--units", "16", "--what", "rdl,header"]
    assert main(argv) == 2
    assert f"would overwrite {header}" in capsys.readouterr().err
    assert header.read_text() == "/* mine */\n" and not (tmp_path / FILES["rdl"]).exists()
    assert main(argv + ["--force"]) == 0
    assert header.read_text().startswith("/* ndp_regs.h")


@pytest.mark.parametrize("argv,message", [
    (["--units", "12"], "n_units must be a power of two"),
    (["--max-batch", "17"], "max_batch"),
    (["--act-lanes", "24"], "lanes must be a power of two"),
    (["--dram-config", "/no/such.toml"], "/no/such.toml"),
])
def test_bad_core_parameters_write_nothing(tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["export", "--out-dir", str(out), "--what", "header,rdl", *argv]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("what,message", [("header,hdr", "unknown part(s) 'hdr'"),
                                          ("", "unknown part(s) ''")])
def test_unknown_part_exits_2(tmp_path, capsys, what, message):
    with pytest.raises(SystemExit) as e:
        main(["export", "--out-dir", str(tmp_path), "--what", what])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert message in err and f"parts: {', '.join(PARTS)}" in err


def test_output_folder_that_is_a_file(tmp_path, capsys):
    target = tmp_path / "file"
    target.write_text("x")
    assert main(["export", "--out-dir", str(target), "--what", "rdl"]) == 2
    assert f"output folder '{target}' is a file" in capsys.readouterr().err


def test_names_that_give_one_c_macro_twice_are_refused(core):
    """CQ + HEAD_ID and CQ_HEAD + ID would both define NDP_CQ_HEAD_ID_SHIFT."""
    regs = (Register("CQ", 0x0, "ro", "x", fields=(Field("HEAD_ID", 0, 4, "x"),)),
            Register("CQ_HEAD", 0x8, "ro", "x", fields=(Field("ID", 0, 4, "x"),)))
    with pytest.raises(ValueError, match="same C macro twice.*NDP_CQ_HEAD_ID_SHIFT"):
        c_header(core, {}, registers=regs)
    assert "NDP_CQ_HEAD_ID_SHIFT" in c_header(core, {}, registers=regs[1:])
