"""Smoke-test DUT and bench for the RTL build flow (``tests/cosim/rtl/test_build.py``).

The DUT is a ``width``-bit counter that increments on each clock edge with
``en`` high and wraps at ``2**width``; ``count`` is the registered value, so it
changes one cycle after ``en`` is sampled. Nothing in the accelerator uses it:
it exists so the Verilator + cocotb plumbing can be proven in a few seconds.

Setting ``SMOKE_CORRUPT_MODEL=1`` in the simulator environment makes the
reference model off by one, which proves a failing bench is reported as such.
"""

import os
import random

import cocotb
from amaranth import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from ndpdimm.cosim.rtl.build import bench_params


class SmokeCounter(wiring.Component):
    """Free-running counter with enable; ``count`` wraps at ``2**width``."""

    def __init__(self, width):
        if not isinstance(width, int) or width < 1:
            raise TypeError(f"Counter width must be a positive integer, not {width!r}")
        self.width = width
        super().__init__({"en": In(1), "count": Out(width)})

    def elaborate(self, platform):
        m = Module()
        with m.If(self.en):
            m.d.sync += self.count.eq(self.count + 1)
        return m


def make_counter(width=8):
    """Factory for :func:`ndpdimm.cosim.rtl.build.build`: ``"...:make_counter"``."""
    return SmokeCounter(width)


# --- cocotb bench (runs inside the simulator process) -----------------------

class TB:
    """Owns clock and reset of the counter; the model tracks the expected count."""

    def __init__(self, dut):
        self.dut = dut
        self.width = bench_params().get("width", 8)
        self.mask = (1 << self.width) - 1
        self.corrupt = os.environ.get("SMOKE_CORRUPT_MODEL") == "1"
        cocotb.start_soon(Clock(dut.clk, 10, unit="ns").start())

    async def reset(self):
        self.dut.en.value = 0
        self.dut.rst.value = 1
        for _ in range(2):
            await RisingEdge(self.dut.clk)
        self.dut.rst.value = 0
        await RisingEdge(self.dut.clk)

    def expected(self, enabled_edges):
        return (enabled_edges + (1 if self.corrupt else 0)) & self.mask

    async def drive_and_check(self, en_pattern):
        """Drive ``en`` for one cycle per pattern entry, checking ``count`` every cycle.

        Inputs change and outputs are sampled on the falling edge, half a cycle
        away from the rising edge where the counter registers ``en``.
        """
        enabled_edges = 0
        for en in [*en_pattern, 0]:
            await FallingEdge(self.dut.clk)
            got = int(self.dut.count.value)
            assert got == self.expected(enabled_edges), (
                f"count={got}, expected {self.expected(enabled_edges)} "
                f"after {enabled_edges} enabled edges")
            self.dut.en.value = int(en)
            enabled_edges += int(en)


@cocotb.test()
async def test_counts_when_enabled(dut):
    """Counting every cycle for 2**width + 3 cycles also checks the wrap-around."""
    tb = TB(dut)
    await tb.reset()
    await tb.drive_and_check([1] * ((1 << tb.width) + 3))


@cocotb.test()
async def test_holds_when_disabled(dut):
    """Random enable pattern: the counter only advances on enabled edges."""
    tb = TB(dut)
    await tb.reset()
    rng = random.Random(cocotb.RANDOM_SEED)
    await tb.drive_and_check([rng.random() < 0.5 for _ in range(200)])
