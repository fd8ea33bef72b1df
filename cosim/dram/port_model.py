"""Behavioural DRAM behind a memory-client port, for Amaranth-simulator unit tests of clients.

``MemoryPortModel.serve`` is a testbench process standing in for the whole
memory system (CDC, controller, DRAM): it accepts burst requests on every
request lane with random back-pressure, applies writes at once (in acceptance
order, lane 0 before lane 1 in a cycle), and answers every request on the
response stream of the rank the ``AddressMap`` assigns to its address after a
random latency, in random order - the freedom the real controller has: a read
with its data, a write with an acknowledgement (data 0). Data lives in
a ``SparseStore``; read data is taken when the request is accepted.

The cocotb benches use the real controller and ``DramModel`` instead.
"""

import random

from ndpdimm.cosim.dram.model import SparseStore
from ndpdimm.hw.memory.address_map import AddressMap
from ndpdimm.hw.memory.dram import load_dram_config
from ndpdimm.hw.memory.port import BURST_BYTES

__all__ = ["MemoryPortModel"]


class MemoryPortModel:
    def __init__(self, seed=0, min_latency=3, max_latency=40, accept_prob=0.8,
                 org=None, address_map=None):
        self.org = load_dram_config()[0] if org is None else org
        self.address_map = AddressMap(self.org) if address_map is None else address_map
        self.store = SparseStore(self.org.capacity_bytes)
        self.rng = random.Random(seed)
        self.min_latency, self.max_latency = min_latency, max_latency
        self.accept_prob = accept_prob
        self.reads = self.writes = 0
        self.log = []                      # (cycle, lane, write, burst, tag) in acceptance order

    # ---- host-side set-up and inspection -------------------------------------------------
    def load(self, addr: int, data) -> None:
        self.store.write(addr, bytes(data))

    def dump(self, addr: int, n: int) -> bytes:
        return self.store.read(addr, n)

    # ---- the testbench process -------------------------------------------------------------
    async def serve(self, ctx, port, n_cycles=None, stop=None):
        """Serve ``port`` (a client's ``req``/``resp``) until ``stop()`` is true or ``n_cycles``."""
        lanes = len(port.req)
        ranks = len(port.resp)
        pending = [[] for _ in range(ranks)]     # per rank: [ready_cycle, tag, data]
        presenting = [None] * ranks
        cycle = 0
        while (n_cycles is None or cycle < n_cycles) and not (stop is not None and stop()):
            accept = [self.rng.random() < self.accept_prob for _ in range(lanes)]
            for lane in range(lanes):
                ctx.set(port.req[lane].ready, accept[lane])
            for r in range(ranks):
                if presenting[r] is None:
                    due = [p for p in pending[r] if p[0] <= cycle]
                    if due:
                        pick = self.rng.choice(due)
                        pending[r].remove(pick)
                        presenting[r] = pick
                item = presenting[r]
                ctx.set(port.resp[r].valid, item is not None)
                if item is not None:
                    ctx.set(port.resp[r].payload, {"tag": item[1], "data": item[2]})
            # values at the clock edge, after every process has settled (no testbench race)
            sampled = await ctx.tick().sample(
                *[x for lane in range(lanes) for x in (port.req[lane].valid, port.req[lane].payload)],
                *[port.resp[r].ready for r in range(ranks)])
            sampled = sampled[2:]
            reqs = [(sampled[2 * lane], sampled[2 * lane + 1]) for lane in range(lanes)]
            resp_ready = sampled[2 * lanes:]
            for lane, (valid, p) in enumerate(reqs):
                if not (valid and accept[lane]):
                    continue
                addr = p.burst * BURST_BYTES
                if addr >= self.org.capacity_bytes:
                    raise AssertionError(f"cycle {cycle}: request outside the DIMM: {addr:#x}")
                self.log.append((cycle, lane, bool(p.write), int(p.burst), int(p.tag)))
                if p.write:
                    self.writes += 1
                    self.store.write(addr, int(p.data).to_bytes(BURST_BYTES, "little"))
                    data = 0
                else:
                    self.reads += 1
                    data = int.from_bytes(self.store.read(addr, BURST_BYTES), "little")
                rank = self.address_map.decode_burst(addr).rank
                latency = self.rng.randint(self.min_latency, self.max_latency)
                pending[rank].append([cycle + latency, int(p.tag), data])
            for r in range(ranks):
                if presenting[r] is not None and resp_ready[r]:
                    presenting[r] = None
            cycle += 1
        for r in range(ranks):
            ctx.set(port.resp[r].valid, 0)
        return cycle
