"""cocotb replay of a recorded backend session on the NDP core: the cocotb side of ``bench/speed.py``.

``bench/speed.py`` records what the driver asked of the RTL harness (DRAM
loads, register writes, descriptor words, "run until idle") and replays it here,
on the same ``NdpCore`` parameters, with the cocotb ``DramDevice`` and a host
driver that behaves like the C++ one: descriptors pushed while fewer than
the queue depth are outstanding, completions collected when ``irq`` rises.
The simulation phase is timed (CPU time of the simulator process, and wall clock) and the completions are written to
``$NDPDIMM_REPLAY_OUT`` (JSON) for the bench to compare with the harness's.

Input: ``$NDPDIMM_REPLAY`` (JSON ``{"events": [...], "blob": file}``; events
``["load", addr, offset, n]`` into the blob, ``["csr_write", name, value]``,
``["submit", [word hex, ...]]``, ``["run"]``).
"""

import json
import os
import time
from pathlib import Path

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.rtl.benches.core import NdpCoreTB
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import register


class ReplayTB(NdpCoreTB):
    def __init__(self, dut):
        super().__init__(dut, 0)
        self.pending = []
        self.outstanding = 0
        self.completions = []
        self.desc_queue = self.params.get("desc_queue", 8)

    async def push(self, word):
        for i in range(4):
            await self.write(f"DESC{i}", (word >> (64 * i)) & (2 ** 64 - 1))
        await self.write("DESC_PUSH", 1)
        self.outstanding += 1

    async def collect(self):
        head = register("CQ_HEAD").unpack(await self.read("CQ_HEAD"))
        assert head["VALID"], "irq was high but CQ_HEAD holds no completion"
        cycles = await self.read("CQ_CYCLES")
        nbytes = await self.read("CQ_DRAM_BYTES")
        await self.write("CQ_POP", 1)
        self.outstanding -= 1
        self.completions.append({"id": head["ID"], "opcode": head["OPCODE"],
                                 "status": Status(head["STATUS"]).name, "cycles": cycles,
                                 "dram_bytes": nbytes})

    async def drain(self):
        d = self.dut
        while self.pending or self.outstanding:
            await ReadOnly()
            if d.irq.value == 1:
                await FallingEdge(d.clk)
                await self.collect()
            elif self.pending and self.outstanding < self.desc_queue:
                await FallingEdge(d.clk)
                await self.push(self.pending.pop(0))
            else:
                await FallingEdge(d.clk)


@cocotb.test()
async def replay(dut):
    spec = json.loads(Path(os.environ["NDPDIMM_REPLAY"]).read_text())
    blob = Path(spec["blob"]).read_bytes()
    tb = ReplayTB(dut)
    await tb.start()
    cycles0 = await tb.read("CYCLES")
    start, wall = time.process_time(), time.perf_counter()
    for ev in spec["events"]:
        if ev[0] == "load":
            tb.model.load(ev[1], blob[ev[2]:ev[2] + ev[3]])
        elif ev[0] == "csr_write":
            await tb.write(ev[1], ev[2])
        elif ev[0] == "submit":
            tb.pending += [int(w, 16) for w in ev[1]]
        elif ev[0] == "run":
            await tb.drain()
        else:
            raise ValueError(f"unknown replay event {ev[0]!r}")
    seconds, wall = time.process_time() - start, time.perf_counter() - wall
    cycles = await tb.read("CYCLES") - cycles0
    Path(os.environ["NDPDIMM_REPLAY_OUT"]).write_text(json.dumps({
        "cycles": cycles, "cpu_seconds": seconds, "wall_seconds": wall,
        "completions": tb.completions}) + "\n")
    dut._log.info(f"replayed {len(tb.completions)} descriptors: {cycles} cycles in {seconds:.1f} s "
                  f"({cycles / seconds:.0f} cycles/s)")
