"""Where the C++ harness spends its time, by block of the core: ``python -m ndpdimm.bench.profile``.

Runs the fixed workload of :mod:`ndpdimm.bench.cycle_identity` (the 142
calibration and held-out points, in one harness process from reset) under
Linux ``perf record`` (sampling at 299 Hz), reads the samples per function
(``perf report --sort sym``), and gives each Verilated function of the core
(``Vtop___024root___*``) to the block of ``NdpCore`` its C++ body names most
often (``ndp_harness_top.core.<block>``; signals of the harness top outside
the core count as ``harness``). Verilator splits the model's evaluation into
many functions by size, not by block, so a function that touches several
blocks is given whole to its majority: the split is approximate, to a few
per cent. Functions outside the model (libc, Python, the DRAM model's C++)
are listed under ``outside the model``.

Writes JSON: the share of samples per block, the 20 busiest functions with
their block, the sample count and the commands. Needs ``perf`` (Debian's
``linux-perf``) with permission to sample its own processes
(``kernel.perf_event_paranoid`` <= 2); without it the command stops with
that message before any run.
"""

import collections
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ndpdimm.bench.cycle_identity import command_line, workload_config, workload_parser
from ndpdimm.bench.gemv import bench_header
from ndpdimm.cosim.provenance import dumps_finite

__all__ = ["function_bodies", "block_of", "attribute", "perf_symbols", "main"]

PROG = "python -m ndpdimm.bench.profile"
#: Sampling frequency of ``perf record`` (Hz): a prime, off the kernel's tick.
FREQUENCY = 299
# a definition (a declaration or a call elsewhere ends in ";" and is not one)
_MODEL_FUNCTION = re.compile(r"\n(?:VL_ATTR_COLD |VL_INLINE_OPT )?void (Vtop___024root___\w+)"
                             r"\([^)]*\)\s*\{")
_CORE_BLOCK = re.compile(r"ndp_harness_top__DOT__core__DOT__([a-z0-9_]+?)__DOT__")
_HARNESS = re.compile(r"ndp_harness_top__DOT__(?!core__DOT__)")
OUTSIDE = "outside the model"


def function_bodies(obj_dir: Path) -> dict:
    """``{function name: C++ body}`` of the Verilated model's root functions in ``obj_dir``."""
    bodies = {}
    for path in sorted(Path(obj_dir).glob("Vtop___024root*.cpp")):
        text = path.read_text(errors="replace")
        for m in _MODEL_FUNCTION.finditer(text):
            end = text.find("\nvoid ", m.end())
            bodies[m.group(1)] = text[m.end():end if end >= 0 else len(text)]
    return bodies


def block_of(body: str) -> str:
    """The block of the core a function body names most (``harness`` for the harness top)."""
    refs = collections.Counter(_CORE_BLOCK.findall(body))
    harness = len(_HARNESS.findall(body))
    if harness:
        refs["harness"] = harness
    return refs.most_common(1)[0][0] if refs else "model (no block named)"


def attribute(samples, bodies: dict) -> tuple:
    """``samples``: ``[(percent, function)]``. Returns (``{block: percent}``, ``[(percent,
    function, block)]``) with the functions not in ``bodies`` under :data:`OUTSIDE`."""
    by_block, rows = collections.Counter(), []
    for pct, sym in samples:
        block = block_of(bodies[sym]) if sym in bodies else OUTSIDE
        by_block[block] += pct
        rows.append((pct, sym, block))
    return dict(by_block), rows


_REPORT_LINE = re.compile(r"^\s*([0-9.]+)%\s+\[[.k]\]\s+(\S+)")


def perf_symbols(perf_data: Path) -> list:
    """``[(percent, function)]`` of a ``perf record`` file, busiest first."""
    out = subprocess.run(["perf", "report", "-i", str(perf_data), "--stdio", "--sort", "sym"],
                         capture_output=True, text=True, check=True).stdout
    return [(float(m.group(1)), m.group(2)) for m in map(_REPORT_LINE.match, out.splitlines()) if m]


def _check_perf():
    if shutil.which("perf") is None:
        raise SystemExit("profile: `perf` not found (Debian: apt-get install linux-perf)")
    probe = subprocess.run(["perf", "record", "-o", "/dev/null", "-q", "--", "true"],
                           capture_output=True, text=True)
    if probe.returncode:
        raise SystemExit("profile: perf cannot sample here (kernel.perf_event_paranoid "
                         f"must be <= 2): {probe.stderr.strip()[-300:]}")


def main(argv=None) -> int:
    parser = workload_parser(PROG, __doc__)
    args = parser.parse_args(argv)
    config = workload_config(parser, args)          # a bad value stops here, before any run
    _check_perf()
    from ndpdimm.cosim.rtl.harness_build import build_harness
    lib = build_harness(config)                 # <build dir>/obj/<shared library>
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "perf.data"
        workload = [sys.executable, "-m", "ndpdimm.bench.cycle_identity", "--units",
                    str(args.units), "--act-lanes", str(args.act_lanes), "--out",
                    str(Path(tmp) / "cycle_identity.json")]
        subprocess.run(["perf", "record", "-F", str(FREQUENCY), "-o", str(data), "-q", "--",
                        *workload], check=True)
        samples = perf_symbols(data)
        ran = json.loads((Path(tmp) / "cycle_identity.json").read_text())
    bodies = function_bodies(lib.parent)
    if not bodies:
        raise SystemExit(f"profile: no Verilated functions found in {lib.parent}")
    by_block, rows = attribute(samples, bodies)
    res = {
        **bench_header("profile", command_line(PROG, argv)),
        "config": config.as_dict(),
        "harness_build": lib.parent.parent.name,
        "workload": "python -m ndpdimm.bench.cycle_identity (142 points, one process)",
        "simulated_cycles": ran["simulated_cycles"],
        "cycles_per_cpu_second": ran["cycles_per_cpu_second"],
        "method": f"perf record -F {FREQUENCY}; each Verilated function given to the core block "
                  "its body names most (approximate, see bench/profile.py)",
        "percent_by_block": dict(sorted(by_block.items(), key=lambda kv: -kv[1])),
        "top_functions": [{"percent": pct, "function": sym, "block": blk}
                          for pct, sym, blk in rows[:20]],
    }
    Path(args.out).write_text(dumps_finite(res, args.out) + "\n")
    for block, pct in res["percent_by_block"].items():
        print(f"{pct:6.2f} %  {block}")
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
