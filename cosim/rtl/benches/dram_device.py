"""cocotb model of the DIMM's DRAM ranks behind the buffer chip's PHY ports.

``DramDevice`` watches the controller's command outputs (``cmd``, one
``command_layout`` per rank, in the ``dram`` clock) and plays the DRAM: every
command goes through ``DramModel`` (timing checker + sparse store; any
violated constraint raises ``TimingViolation`` naming command, cycle and
constraint, which fails the test), read data is driven on ``dq_rd`` exactly
``tCL`` cycles after its RD, and write data is taken from ``dq_wr`` exactly
``CWL`` cycles after its WR. It also checks the controller's own data marks
(``data_valid``/``data_write``, ``dq_wr_en``) against those cycles, so a
controller that captures read data in the wrong cycle fails here even if the
data happened to be stable.

Cycle convention: once per DRAM clock, at the falling edge, the device reads
the command of the cycle in progress and drives the read data that belongs to
it (sampled by the controller at the next rising edge).
"""

from collections import defaultdict

import cocotb
from cocotb.clock import Clock
from cocotb.triggers import FallingEdge, RisingEdge

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.hw.memory.address_map import DramCoord
from ndpdimm.hw.memory.controller import refresh_phases
from ndpdimm.hw.memory.port import BURST_BITS, BURST_BYTES
from ndpdimm.hw.memory.rank_scheduler import DramCommand

__all__ = ["DramDevice", "start_clocks"]

_BURST_MASK = (1 << BURST_BITS) - 1


async def start_clocks(dut, ndp_period_ps=1000, dram_period_ps=None, timing=None):
    """Start the 1 GHz and DRAM clocks and reset both domains."""
    dram_period_ps = dram_period_ps or round(timing.tCK_ns * 1000)
    for clk, period in ((dut.clk, ndp_period_ps), (dut.dram_clk, dram_period_ps)):
        # an odd period in ps (625 for DDR4-3200) gets a high phase one ps shorter than half
        cocotb.start_soon(Clock(clk, period, unit="ps", period_high=period // 2).start())
    dut.rst.value = 1
    dut.dram_rst.value = 1
    for _ in range(4):
        await RisingEdge(dut.clk)
    dut.rst.value = 0
    dut.dram_rst.value = 0
    await RisingEdge(dut.clk)


class DramDevice:
    def __init__(self, dut, model: DramModel, cmd_layout, clock=None):
        self.dut, self.model = dut, model
        self.clock = dut.dram_clk if clock is None else clock
        self.ranks = model.org.ranks
        self.codec = LayoutCodec(cmd_layout)
        self.cmd_bits = cmd_layout.size
        self.cycle = 0
        self.read_due = defaultdict(list)      # cycle -> [(rank, data int)]
        self.write_due = defaultdict(list)     # cycle -> [(rank, coord)]
        self.counts = {k: 0 for k in DramCommand if k != DramCommand.NOP}
        self.refs_per_rank = [0] * self.ranks
        self.bursts_read = self.bursts_written = 0
        self.first_data = self.last_data = None  # cycles of the first/last data burst
        self.running = False

    async def run(self):
        dut, model, t = self.dut, self.model, self.model.timing
        cmd_mask = (1 << self.cmd_bits) - 1
        self.running = True
        while self.running:
            await FallingEdge(self.clock)
            c = self.cycle
            cmds = int(dut.cmd.value)
            if cmds:
                for r in range(self.ranks):
                    fields = self.codec.decode((cmds >> (r * self.cmd_bits)) & cmd_mask)
                    kind = DramCommand(fields["kind"])
                    if kind == DramCommand.NOP:
                        continue
                    self.counts[kind] += 1
                    coord = DramCoord(r, fields["bank_group"], fields["bank"], fields["row"],
                                      fields["column"])
                    if kind == DramCommand.RD:
                        data = model.rd(c, coord)
                        self.read_due[c + t.tCL].append((r, int.from_bytes(data, "little")))
                    elif kind == DramCommand.WR:
                        model.command(c, "WR", r, coord.bank_group, coord.bank, coord.row,
                                      coord.column)
                        self.write_due[c + t.CWL].append((r, coord))
                    elif kind == DramCommand.REF:
                        model.command(c, "REF", r)
                        self.refs_per_rank[r] += 1
                    else:
                        model.command(c, kind.name, r, coord.bank_group, coord.bank, coord.row)
            elif c % 256 == 0:
                model.check_refresh(c)
            reads = self.read_due.pop(c, ())
            writes = self.write_due.pop(c, ())
            marks = int(dut.data_valid.value)
            expect = 0
            for r, _ in reads:
                expect |= 1 << r
            for r, _ in writes:
                expect |= 1 << r
            if marks != expect:
                raise AssertionError(f"DRAM cycle {c}: controller data marks {marks:0{self.ranks}b}, "
                                     f"DRAM data cycles {expect:0{self.ranks}b}")
            if writes:
                wr_en = int(dut.dq_wr_en.value)
                dq_wr = int(dut.dq_wr.value)
                for r, coord in writes:
                    if not (wr_en >> r) & 1:
                        raise AssertionError(f"DRAM cycle {c}: rank {r} write data not driven")
                    word = (dq_wr >> (r * BURST_BITS)) & _BURST_MASK
                    model.write_burst(coord, word.to_bytes(BURST_BYTES, "little"))
                    self.bursts_written += 1
            if reads:
                value = 0
                for r, word in reads:
                    value |= word << (r * BURST_BITS)
                dut.dq_rd.value = value
                self.bursts_read += len(reads)
            if reads or writes:
                if self.first_data is None:
                    self.first_data = c
                self.last_data = c
            self.cycle = c + 1

    def refreshes_owed(self, refresh: str = "aligned", cycle: int | None = None) -> list:
        """Per rank, the refreshes due by DRAM ``cycle`` (default: now) that were not issued.

        One refresh falls due every tREFI from the rank's phase (``refresh`` is the
        controller's mode, see :func:`refresh_phases`). A controller may postpone refreshes
        (DDR4 allows 8), so over a window the debt's change is the refresh work the window did
        not pay: :func:`steady_state` charges it.
        """
        t = self.model.timing
        cycle = self.cycle if cycle is None else cycle
        phases = refresh_phases(self.model.org, t, refresh)
        return [max(0, (cycle + phases[r]) // t.tREFI - self.refs_per_rank[r])
                for r in range(self.ranks)]

    def stop(self):
        self.running = False


def steady_state(fraction: float, window: float, ranks: int, owed_change: float,
                 trfc: float) -> float:
    """``fraction`` of peak measured over ``window`` cycles, with the window's change in
    refresh debt (summed over ranks) charged at ``trfc`` cycles of rank time each (credited when
    the window paid off earlier debt): the figure a run of any length would settle at."""
    rank_time = ranks * window
    return fraction * rank_time / (rank_time + owed_change * trfc)
