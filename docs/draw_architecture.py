"""Draw docs/architecture.png: the NDP-DIMM chip (left) and the host software stack (right).

Run from the repository root: ``.venv/bin/python docs/draw_architecture.py``
(matplotlib only, no network). Every box names the package or file that implements it,
so the picture is checked against the tree by reading it; redraw it when a block moves.
"""

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed; chosen before pyplot is imported
import matplotlib.pyplot as plt
from matplotlib.patches import FancyBboxPatch
from PIL import Image

OUT = Path(__file__).resolve().parent / "architecture.png"

# one colour per layer of the tree
HW = "#fde2c4"       # hw/: the RTL
HW_MEM = "#fcd1a4"   # hw/memory/
DRAM = "#e6e6e6"     # DRAM devices (not ours)
SW = "#cfe3f7"       # sw/
COSIM = "#d3efd0"    # cosim/
SYNTH = "#e4d7f2"    # synth/
EDGE = "#333333"


#: data units per typographic point (the axes are 100 units high, about 560 pt)
UNIT_PER_PT = 100 / 560


def box(ax, x, y, w, h, title, path="", detail="", color=HW, title_size=10.5, bold=True):
    """A rounded box with a title, the package path in monospace and a few lines of detail,
    stacked and centred vertically (line heights from the font sizes)."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.25,rounding_size=0.8",
                                facecolor=color, edgecolor=EDGE, linewidth=1.1, zorder=2))
    parts = [(title, title_size, dict(fontweight="bold" if bold else "normal"))]
    if path:
        parts.append((path, 8.8, dict(family="monospace", color="#7a2e00")))
    if detail:
        parts.append((detail, 8.3, dict(color="#222222")))
    gap = 0.9
    heights = [(text.count("\n") + 1) * size * 1.2 * UNIT_PER_PT for text, size, _ in parts]
    cursor = y + h / 2 + (sum(heights) + gap * (len(parts) - 1)) / 2
    for (text, size, style), height in zip(parts, heights):
        ax.text(x + w / 2, cursor - height / 2, text, ha="center", va="center", zorder=3,
                fontsize=size, linespacing=1.05, **style)
        cursor -= height + gap


def frame(ax, x, y, w, h, label, path, color, label_size=11, label_x=None):
    """A container outline with its label in the top-left corner."""
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.3,rounding_size=1.2",
                                facecolor=color, edgecolor=EDGE, linewidth=1.4, zorder=1))
    ax.text(x + 1.2 if label_x is None else label_x, y + h - 1.6, label, ha="left", va="top",
            fontsize=label_size, fontweight="bold", zorder=3)
    if path:
        ax.text(x + w - 1.2, y + h - 1.6, path, ha="right", va="top", fontsize=8.8,
                family="monospace", color="#7a2e00", zorder=3)


def arrow(ax, x0, y0, x1, y1, label="", both=False, dashed=False, label_dx=0.8, label_dy=0.0,
          ha="left", color=EDGE):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=4,
                arrowprops=dict(arrowstyle="<|-|>" if both else "-|>", color=color, lw=1.3,
                                linestyle="--" if dashed else "-", shrinkA=0, shrinkB=0,
                                mutation_scale=11))
    if label:
        ax.text((x0 + x1) / 2 + label_dx, (y0 + y1) / 2 + label_dy, label, fontsize=8.2,
                ha=ha, va="center", color=color, zorder=5, style="italic",
                bbox=dict(facecolor="white", edgecolor="none", pad=0.6, alpha=0.85))


def chip(ax):
    ax.set_title("The chip: one NDP core in each DIMM's buffer chip  (hw/)", fontsize=13.5,
                 fontweight="bold", loc="left")
    # host memory channel
    box(ax, 4, 92, 80, 7, "Host CPU memory channel (DDR4)",
        detail="CSR port (registers, hw/registers.py) + host pass-through reads and writes",
        color="#f4f4f4")
    frame(ax, 1, 1, 86, 88, "NDP-DIMM", "", "#fbfbfb", label_x=8)
    frame(ax, 3, 29, 82, 56, "Buffer chip: NDP core, 1 GHz", "hw/core/ndp_core.py", "#fff6ec",
          label_x=9)

    # row A: control and compute
    box(ax, 9, 64, 21, 15, "Command\nprocessor", "hw/core/",
        "registers, descriptor queue,\nchecks, protection window")
    box(ax, 33, 64, 24, 15, "GEMV engine", "hw/gemv/",
        "256 bit-serial multiplier\nunits + lane reducers")
    box(ax, 60, 64, 23, 15, "Activation unit", "hw/activation/",
        "ReLU, SiLU, GELU, softmax,\nelement-wise, conversions")
    # row B: data movement and storage
    box(ax, 9, 47, 21, 13, "Weight streamer\n+ DMA", "hw/memory/",
        "weights DRAM -> engine;\nDRAM <-> SRAM", color=HW_MEM)
    box(ax, 33, 47, 29, 13, "Banked SRAM, 128 KiB", "hw/memory/sram.py",
        "vectors, partial sums, outputs", color=HW_MEM)
    box(ax, 65, 47, 18, 13, "DIMM-Link port", "hw/link/",
        "PHY, frames, router,\nrelayout unit")
    # row C: the DRAM side
    box(ax, 4, 31, 18, 13, "Host\npass-through", "hw/memory/system.py",
        "host/NDP arbitration,\nclock crossing", color=HW_MEM, title_size=10)
    frame(ax, 25, 31, 58, 13, "DRAM controller", "hw/memory/controller.py", HW_MEM, label_size=10)
    for i in range(4):
        box(ax, 27 + i * 13.9, 32.2, 12, 6.8, f"scheduler {i}", "", "FR-FCFS",
            color="#fbe6cf", title_size=8.6)
    ax.text(54, 29.6, "one hw/memory/rank_scheduler.py per rank", fontsize=8.2, ha="center",
            va="top", family="monospace", color="#7a2e00", zorder=5,
            bbox=dict(facecolor="#fbfbfb", edgecolor="none", pad=0.5))

    # DRAM ranks
    for i in range(4):
        box(ax, 27 + i * 13.9, 5, 12, 13, f"rank {i}", "", "DDR4-3200\nx64, 25.6 GB/s",
            color=DRAM, title_size=9.5)
        arrow(ax, 33 + i * 13.9, 32.2, 33 + i * 13.9, 18, both=True)
    ax.text(4, 11.5, "4 DDR4 ranks:\n102.4 GB/s per DIMM\n(the GEMV engine's\nphysical limit)",
            fontsize=8.8, ha="left", va="center")
    ax.text(4, 23.5, "DDR4 command bus\nper rank", fontsize=8.2, ha="left", va="center",
            style="italic")

    # neighbour DIMMs
    box(ax, 91, 44, 18, 19, "Neighbour\nNDP-DIMMs", "", "same chip,\nchained", color="#f4f4f4",
        title_size=10)
    arrow(ax, 83, 53.5, 91, 53.5, both=True)
    ax.text(100, 41.5, "DIMM-Link\n8 x 25 Gb/s\nper direction", fontsize=8.2, ha="center",
            va="top", style="italic")

    # control and data paths
    arrow(ax, 19.5, 92, 19.5, 79)                # CSR writes and reads
    arrow(ax, 6, 92, 6, 44)                      # host pass-through
    arrow(ax, 30, 73, 33, 73)                    # dispatch to the engine
    arrow(ax, 19.5, 64, 19.5, 60, "dispatch", label_dx=-0.8, ha="right")
    arrow(ax, 30, 57, 35, 64)
    ax.text(31.5, 62.3, "weights", fontsize=7.8, ha="right", va="center", style="italic", zorder=5)
    arrow(ax, 47, 60, 47, 64, both=True)         # SRAM <-> engine (activations, results)
    arrow(ax, 59, 60, 68, 64, both=True)         # SRAM <-> activation unit
    arrow(ax, 30, 50, 33, 50, both=True)         # DMA <-> SRAM
    arrow(ax, 62, 53.5, 65, 53.5, both=True)     # link <-> SRAM
    arrow(ax, 27.5, 47, 27.5, 44, both=True)     # streamer/DMA <-> controller
    arrow(ax, 22, 37.5, 25, 37.5)                # host requests into the controller
    ax.text(44.5, 61.8, "acts / results", fontsize=7.8, ha="center", va="center",
            style="italic", zorder=5)


def host(ax):
    ax.set_title("The host stack: scenarios to cycles  (sw/, cosim/, synth/)", fontsize=13.5,
                 fontweight="bold", loc="left")
    box(ax, 3, 91, 84, 7, "ndpdimm command line  +  benchmark suites", "sw/cli.py   bench/",
        color=SW, title_size=10)
    frame(ax, 3, 69, 84, 20, "Scenarios and sweeps", "sw/scenarios/", "#e8f1fb", label_size=10.5)
    box(ax, 5, 70.5, 18, 13, "Hermes", "hermes/", "dense LLM, GPU +\n8 NDP-DIMMs", color=SW)
    box(ax, 25, 70.5, 18, 13, "TriMoE", "trimoe/", "MoE, GPU + AMX\nCPU + 16 DIMMs", color=SW)
    box(ax, 45, 70.5, 18, 13, "RAPID", "rapid/", "power-capped\nserving, 8 GPUs", color=SW)
    box(ax, 65, 70.5, 20, 13, "Sweeps, real layer", "sw/sweep/  sw/layer/",
        "Dask grids; MiniLM\nlayer run", color=SW)

    box(ax, 3, 53, 84, 12, "Driver API", "sw/driver/",
        "Dimm, NdpSystem: allocate / write / read DRAM, submit descriptors, wait, status, counters",
        color=SW)
    box(ax, 3, 43, 84, 6.5, "Backend interface  (Backend, CoreConfig, Completion)", "cosim/backend.py",
        color=COSIM, title_size=9.8)
    arrow(ax, 45, 69, 45, 65, "the driver only; scenarios never import a backend class",
          label_dx=1.2)
    arrow(ax, 45, 53, 45, 49.5)

    box(ax, 3, 17, 40, 22, "RTL harness  (--backend rtl)", "cosim/rtl/  +  cosim/dram/",
        "Verilated NdpCore in a shared library,\nC++ DRAM model with a timing checker,\n"
        "one call per command; cocotb benches", color=COSIM, title_size=9.6)
    box(ax, 47, 17, 40, 22, "Performance model  (--backend model)", "cosim/model/",
        "transaction-level, calibrated on RTL\ncycle counts, held-out error reported;\n"
        "sizes RTL cannot reach", color=COSIM, title_size=9.6)
    arrow(ax, 23, 43, 23, 39)
    arrow(ax, 67, 43, 67, 39)
    arrow(ax, 43, 25, 47, 25, dashed=True)
    ax.text(45, 22.2, "ndpdimm\ncalibrate", fontsize=7.8, ha="center", va="top", style="italic")

    box(ax, 91, 30, 18, 35, "Golden model", "cosim/golden/",
        "bit-exact torch\nreference in the\nhardware's order;\nevery result\nchecked bit\nfor bit",
        color=COSIM)
    arrow(ax, 91, 59, 87, 59, dashed=True)
    arrow(ax, 91, 33, 87, 33, dashed=True)

    box(ax, 3, 2, 56, 10, "Amaranth RTL", "hw/", "Verilog, built with Verilator (cached in ~/.cache/ndpdimm)",
        color=HW)
    arrow(ax, 23, 12, 23, 17)
    box(ax, 65, 2, 44, 10, "Synthesis", "synth/",
        "Yosys + NanGate45 -> synth/reports/area.md", color=SYNTH)
    arrow(ax, 59, 7, 65, 7)


def main():
    fig, (left, right) = plt.subplots(1, 2, figsize=(19, 8.6), dpi=100)
    for ax in (left, right):
        ax.set_xlim(0, 110)
        ax.set_ylim(0, 100)
        ax.set_aspect("auto")
        ax.axis("off")
    chip(left)
    host(right)
    fig.text(0.5, 0.012, "Labels are package paths. Imports flow downward only "
             "(hw <- cosim <- sw; synth beside), checked by tests/test_layering.py.",
             ha="center", fontsize=9.5, color="#444444")
    fig.subplots_adjust(left=0.01, right=0.99, top=0.94, bottom=0.04, wspace=0.05)
    # a palette PNG keeps the file commit-sized (Pillow is matplotlib's own dependency)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    Image.open(buffer).convert("RGB").quantize(colors=96).save(OUT, optimize=True)
    print(f"wrote {OUT} ({OUT.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
