"""cocotb trace replay on the memory system (clock crossing + DRAM controller) against the timing-checked DRAM model.

The cocotb side of ``ndpdimm bench --suite dram_trace`` (``bench/dram_trace.py``).
DUT: ``MemorySystem`` with one NDP client (two request lanes); ``DramDevice``
plays the DRAM, so every command goes through the timing checker (a
violation fails the run) with refresh on.

Input ``$DT_TRACE``: an ``.npz`` with equal-length arrays ``cycle`` (earliest
1 GHz cycle the request may be offered), ``burst`` (64 B burst address),
``write`` (0/1) and ``host`` (1 = host port, 0 = NDP client), in issue order
per source. Each source offers its requests in order as soon as their cycle
has come and the port takes them: the host port one per cycle, the NDP
client up to two per cycle (one per lane, like the weight streamer). Every
response port is always ready (the bench measures the controller, not a
consumer). Host requests whose cycle lies after the last NDP request was
taken are not issued when ``$DT_HOST_WITH_NDP`` is 1 (the generated mixes:
the window ends with the NDP stream). Write data is zero.

Output ``$DT_OUT`` (JSON): DRAM cycles from the first request offered to
the last data burst, bursts per source, the controller's row-hit / row-miss
/ refresh counters, per-rank REF counts and refreshes still owed at the end
(from the scheduler's tREFI counters: ``floor((cycle + phase) / tREFI)``
credits minus REFs issued), command counts and every host request's latency
in ns (1 GHz cycles from its trace cycle to its response).
"""

import json
import os

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge, ReadOnly

from ndpdimm.cosim.dram.model import DramModel
from ndpdimm.cosim.golden.codec import LayoutCodec
from ndpdimm.cosim.rtl.benches.dram_device import DramDevice, start_clocks
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.hw.memory.controller import POLICIES
from ndpdimm.hw.memory.port import CLIENT_TAG_BITS, memory_request_layout
from ndpdimm.hw.memory.system import memory_system_from_config

__all__ = ["replay_trace"]


class _Port:
    """One request lane: the item it offers (index into the trace) or None."""

    def __init__(self, dut, prefix):
        self.valid = getattr(dut, prefix + "valid")
        self.ready = getattr(dut, prefix + "ready")
        self.payload = getattr(dut, prefix + "payload")
        self.holding = None


async def replay_trace(dut, trace, params, host_with_ndp=False):
    ms = memory_system_from_config(**params)
    org, timing = ms.org, ms.timing
    model = DramModel(org, timing)
    device = DramDevice(dut, model, ms.controller.cmd_layout)
    await start_clocks(dut, timing=timing)
    dut.policy.value = POLICIES.index(params.get("policy", "fair"))
    codec = LayoutCodec(memory_request_layout(org.capacity_bytes))
    tag_mask = (1 << CLIENT_TAG_BITS) - 1
    cycles, bursts = trace["cycle"].tolist(), trace["burst"].tolist()
    writes, hosts = trace["write"].tolist(), trace["host"].tolist()
    order = {1: [i for i, h in enumerate(hosts) if h], 0: [i for i, h in enumerate(hosts) if not h]}
    ports = {1: [_Port(dut, "host__req__0__")],
             0: [_Port(dut, f"clients__0__req__{lane}__") for lane in range(ms.lanes)]}
    nxt = {1: 0, 0: 0}
    inflight = {1: {}, 0: {}}          # tag -> trace index
    next_tag = {1: 0, 0: 0}
    resp = []
    for who in ("host", "clients__0"):
        for r in range(org.ranks):
            p = f"{who}__resp__{r}__"
            getattr(dut, p + "ready").value = 1
            resp.append((1 if who == "host" else 0, getattr(dut, p + "valid"), getattr(dut, p + "payload")))
    done_cycle = [None] * len(cycles)
    host_latency = []
    counts = {1: 0, 0: 0}
    ndp_total = len(order[0])
    ndp_taken_cycle = None             # cycle the last NDP request was taken
    cocotb.start_soon(device.run())
    start_dram = device.cycle
    cycle = 0
    remaining = len(cycles)
    while remaining:
        await FallingEdge(dut.clk)
        for src in (0, 1):
            for port in ports[src]:
                if port.holding is None and nxt[src] < len(order[src]):
                    i = order[src][nxt[src]]
                    if src and host_with_ndp and ndp_taken_cycle is not None and cycles[i] > ndp_taken_cycle:
                        remaining -= len(order[1]) - nxt[1]        # host tail after the stream: dropped
                        nxt[1] = len(order[1])
                    elif cycles[i] <= cycle and len(inflight[src]) <= tag_mask:
                        tag = next_tag[src]
                        while tag in inflight[src]:
                            tag = (tag + 1) & tag_mask
                        next_tag[src] = (tag + 1) & tag_mask
                        inflight[src][tag] = i
                        port.payload.value = codec.encode({"write": writes[i], "burst": bursts[i],
                                                           "tag": tag})
                        port.holding = i
                        nxt[src] += 1
                port.valid.value = int(port.holding is not None)
        await ReadOnly()
        for src in (0, 1):
            for port in ports[src]:
                if port.holding is not None and int(port.ready.value):
                    port.holding = None
                    counts[src] += 1
                    if src == 0 and counts[0] == ndp_total:
                        ndp_taken_cycle = cycle
        for src, valid, payload in resp:
            if int(valid.value):
                tag = int(payload.value) & tag_mask
                if tag not in inflight[src]:
                    raise AssertionError(f"cycle {cycle}: response with unknown tag {tag} "
                                         f"({'host' if src else 'ndp'})")
                i = inflight[src].pop(tag)
                done_cycle[i] = cycle
                remaining -= 1
                if src:
                    host_latency.append(cycle + 1 - cycles[i])
        if int(dut.resp_overflow.value):
            raise AssertionError(f"cycle {cycle}: response FIFO overflow")
        cycle += 1
        if cycle > 200 * len(cycles) + 50000:
            raise AssertionError(f"timeout at cycle {cycle}: {remaining} requests unanswered")
    device.stop()
    await FallingEdge(dut.dram_clk)
    end = device.last_data + 1
    refs = device.refs_per_rank
    owed = device.refreshes_owed(ms.controller.refresh, end)
    return {
        "dram_cycles": end - start_dram,
        "ndp_cycles": cycle,
        "ndp_bursts": len(order[0]),
        "host_bursts": sum(1 for i in order[1] if done_cycle[i] is not None),
        "row_hits": int(dut.row_hits.value),
        "row_misses": int(dut.row_misses.value),
        "refreshes": int(dut.refreshes.value),
        "refreshes_per_rank": refs,
        "refreshes_owed_per_rank": owed,
        "commands": {k.name: v for k, v in device.counts.items()},
        "host_latency_ns": host_latency,
    }


@cocotb.test()
async def trace_replay(dut):
    """Replay ``$DT_TRACE`` and write the figures to ``$DT_OUT``; zero timing violations."""
    with np.load(os.environ["DT_TRACE"]) as f:
        trace = {k: f[k] for k in ("cycle", "burst", "write", "host")}
    res = await replay_trace(dut, trace, bench_params(), os.environ.get("DT_HOST_WITH_NDP") == "1")
    with open(os.environ["DT_OUT"], "w") as f:
        json.dump(res, f)
    dut._log.info(f"replayed {len(trace['cycle'])} requests in {res['dram_cycles']} DRAM cycles")
