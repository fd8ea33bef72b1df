"""cocotb bench of the memory system (clock crossing + DRAM controller) against the DRAM model.

Structure: three traffic sources on the 1 GHz side - the host port and the
two request lanes of one NDP client - drive random reads and writes with
random idle cycles; every response stream (host and client, every rank) gets
random back-pressure; ``DramDevice`` plays the DRAM in the ``dram`` clock
(every command through the timing checker, data from/to the sparse store).

Data integrity ("every read returns the last write"): addresses come from a
small hot set (bank and row conflicts, hazards) plus random ones over the
whole DIMM. While an address has requests in flight, only the source that
issued them may send more to it, so each address sees one ordered stream at
a time: a read's expected data is the last write that source issued to it,
acknowledged or not (the controller must keep same-burst order), or the
preloaded contents. Every request must be answered exactly once with its
tag; ``resp_overflow`` must stay low.

Environment: ``MS_OPS`` requests per source (default 300), ``MS_IDLE`` /
``MS_STALL`` idle and back-pressure probabilities (0.3 / 0.2),
``MS_WRITE`` write probability (0.5), ``MS_MIN_CYCLES`` keep the run going at
least this many DRAM cycles (to cover refreshes), ``MS_CORRUPT=1`` flips a bit
in one read burst on the DRAM side (the bench must then fail: proves the
checker works).
"""

import os
import random

import cocotb
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.rtl.benches.dram_device import DramDevice, start_clocks
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.memory.controller import POLICIES
from ndpdimm.hw.memory.port import BURST_BYTES, CLIENT_TAG_BITS, memory_request_layout
from ndpdimm.hw.memory.system import memory_system_from_config

__all__ = ["MemorySystemTB"]


class _Source:
    """One ordered request stream (host port or one client lane)."""

    def __init__(self, name, valid, ready, payload, is_host):
        self.name, self.valid, self.ready, self.payload = name, valid, ready, payload
        self.is_host = is_host
        self.holding = None          # the op being offered
        self.issued = 0


class MemorySystemTB:
    def __init__(self, dut, seed):
        self.dut = dut
        self.params = bench_params()
        self.ms = memory_system_from_config(**self.params)
        self.org, self.timing = self.ms.org, self.ms.timing
        self.model = DramModel(self.org, self.timing)
        self.device = DramDevice(dut, self.model, self.ms.controller.cmd_layout)
        self.rng = random.Random(seed)
        self.req = LayoutCodec(memory_request_layout(self.org.capacity_bytes))
        self.resp_tag_mask = (1 << CLIENT_TAG_BITS) - 1
        self.sources = [_Source("host", dut.host__req__0__valid, dut.host__req__0__ready,
                                dut.host__req__0__payload, True)]
        for lane in range(self.ms.lanes):
            p = f"clients__0__req__{lane}__"
            self.sources.append(_Source(f"ndp{lane}", getattr(dut, p + "valid"),
                                        getattr(dut, p + "ready"), getattr(dut, p + "payload"),
                                        False))
        self.resp_ports = []
        for who in ["host"] + [f"clients__{c}" for c in range(self.ms.n_clients)]:
            for r in range(self.org.ranks):
                p = f"{who}__resp__{r}__"
                self.resp_ports.append((who, getattr(dut, p + "valid"), getattr(dut, p + "ready"),
                                        getattr(dut, p + "payload")))

    async def run_random(self, n_ops, idle, stall, write_prob, min_dram_cycles=0):
        dut, rng, org = self.dut, self.rng, self.org
        n_bursts = org.capacity_bytes // BURST_BYTES
        # hot set: a few rows of a few banks in every rank - conflicts and same-burst hazards
        hot = [rng.randrange(0, 1 << 16) for _ in range(24)] + \
              [rng.randrange(n_bursts) for _ in range(8)]
        preload = {}
        for b in hot:
            data = rng.randbytes(BURST_BYTES)
            self.model.load(b * BURST_BYTES, data)
            preload[b] = data
        shadow = dict(preload)                 # burst -> last data issued for it
        owner = {}                             # burst -> [source name, outstanding count]
        inflight = {}                          # tag -> (source, write, burst, expected, cycle)
        next_tag = 0
        latencies = {s.name: [] for s in self.sources}
        answered = 0
        cocotb.start_soon(self.device.run())
        cycle = 0

        def make_op(src):
            nonlocal next_tag
            for _ in range(8):
                burst = rng.choice(hot) if rng.random() < 0.8 else rng.randrange(n_bursts)
                own = owner.get(burst)
                if own is None or own[0] == src.name:
                    break
            else:
                return None
            write = rng.random() < write_prob
            data = rng.randbytes(BURST_BYTES) if write else bytes(BURST_BYTES)
            while next_tag in inflight:
                next_tag = (next_tag + 1) & self.resp_tag_mask
            tag = next_tag
            next_tag = (next_tag + 1) & self.resp_tag_mask
            expected = None
            if write:
                shadow[burst] = data
            else:
                expected = shadow.get(burst, bytes(BURST_BYTES))
            own = owner.setdefault(burst, [src.name, 0])
            own[1] += 1
            inflight[tag] = (src.name, write, burst, expected, None)
            return {"write": int(write), "burst": burst, "tag": tag,
                    "data": int.from_bytes(data, "little")}, tag

        total = n_ops * len(self.sources)
        while answered < total or self.device.cycle < min_dram_cycles:
            await FallingEdge(dut.clk)
            for src in self.sources:
                if src.holding is None and src.issued < n_ops and rng.random() >= idle:
                    op = make_op(src)
                    if op is not None:
                        src.holding = op
                        src.payload.value = self.req.encode(op[0])
                        src.issued += 1
                        tag = op[1]
                        inflight[tag] = inflight[tag][:4] + (cycle,)
                src.valid.value = int(src.holding is not None)
            readies = []
            for who, valid, ready, payload in self.resp_ports:
                rd = int(rng.random() >= stall)
                ready.value = rd
                readies.append(rd)
            await ReadOnly()
            # handshakes that complete at the next rising edge
            for src in self.sources:
                if src.holding is not None and int(src.ready.value):
                    src.holding = None
            for (who, valid, ready, payload), rd in zip(self.resp_ports, readies):
                if rd and int(valid.value):
                    bits = int(payload.value)
                    tag = bits & self.resp_tag_mask
                    data = (bits >> CLIENT_TAG_BITS).to_bytes(BURST_BYTES, "little")
                    if tag not in inflight:
                        raise AssertionError(f"cycle {cycle}: {who} response with unknown tag {tag}")
                    name, write, burst, expected, t0 = inflight.pop(tag)
                    if (name == "host") != (who == "host"):
                        raise AssertionError(f"cycle {cycle}: response for {name} arrived at {who}")
                    if not write and data != expected:
                        raise AssertionError(
                            f"cycle {cycle}: {name} read of burst {burst:#x} returned "
                            f"{data.hex()[:32]}..., expected {expected.hex()[:32]}...")
                    own = owner[burst]
                    own[1] -= 1
                    if own[1] == 0:
                        del owner[burst]
                    latencies[name].append(cycle - t0)
                    answered += 1
            if int(dut.resp_overflow.value):
                raise AssertionError(f"cycle {cycle}: response FIFO overflow")
            cycle += 1
            if cycle > 400 * total + 4 * min_dram_cycles + 20000:
                raise AssertionError(f"timeout: {answered}/{total} answered, in flight {inflight}")
        self.device.stop()
        return {"cycles": cycle, "latency": {k: sum(v) / max(len(v), 1) for k, v in latencies.items()},
                "dram": self.model.stats(), "commands": {k.name: v for k, v in self.device.counts.items()}}


def _env(name, default, kind=float):
    return kind(os.environ.get(name, default))


@cocotb.test()
async def random_traffic(dut):
    """Random host + NDP traffic: data integrity, every request answered, zero timing violations."""
    tb = MemorySystemTB(dut, cocotb.RANDOM_SEED)
    await start_clocks(dut, timing=tb.timing)
    dut.policy.value = POLICIES.index(tb.params.get("policy", "fair"))
    corrupt = os.environ.get("MS_CORRUPT") == "1"
    if corrupt:
        original = tb.model.rd
        state = {"done": False}

        def corrupted_rd(cycle, coord):
            data = original(cycle, coord)
            if not state["done"]:
                state["done"] = True
                data = bytes([data[0] ^ 1]) + data[1:]
            return data
        tb.model.rd = corrupted_rd
    try:
        res = await tb.run_random(_env("MS_OPS", 300, int), _env("MS_IDLE", 0.3),
                                  _env("MS_STALL", 0.2), _env("MS_WRITE", 0.5),
                                  _env("MS_MIN_CYCLES", 0, int))
    except AssertionError as e:
        if corrupt and "returned" in str(e):
            dut._log.info(f"corrupted read detected as required: {e}")
            return
        raise
    if corrupt:
        raise AssertionError("a corrupted read burst went unnoticed")
    dut._log.info(f"result: {res}")
    assert res["commands"]["RD"] + res["commands"]["WR"] == _env("MS_OPS", 300, int) * 3
