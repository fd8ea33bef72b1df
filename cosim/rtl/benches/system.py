"""cocotb bench of several RTL NDP cores joined by DIMM-Link ports (Verilator).

DUT: ``link_system`` (:func:`ndpdimm.cosim.rtl.system_top.link_system_verilog`):
``n_cores`` ``NdpCore(link=True)`` in a chain, two ``LinkPort`` ends per pair
of neighbours. Each core is driven exactly as ``cosim/rtl/benches/core.py``
drives one (its own host driver through the CSR registers, its own timing-
checked ``DramDevice``); every cycle, at the falling edge, each direction of
each link moves its lanes through a behavioural
:class:`~ndpdimm.cosim.link.channel.LinkChannel` (2-cycle latency, random bit
offsets, bit errors at ``LINK_BER``, and with ``LINK_DROP_EVERY = n`` one
chunk of a random lane dropped every ``n`` cycles on average).

Tests:

* ``split_gemv_merged_by_atomic_add``: a GEMV split by columns over the
  cores; each computes its partial FP32 result, then cores 1, 2, ... add
  theirs into core 0's with ATOMIC_ADD, one after the other (the merge order
  is the host's issue order: ``((y0 + y1) + y2) + ...``), core 2's packets
  crossing core 1's router. Bit for bit against the golden model.
* ``remote_traffic_is_exact``: every core at once issues random remote
  writes, reads and FP32 / INT32 atomic adds (any size up to two packets) to
  random DIMMs, itself included; regions are disjoint per source so the
  outcome is defined; at the end every SRAM, read back through DMA, equals a
  Python mirror that applied the same operations. With ``LINK_BER`` /
  ``LINK_DROP_EVERY`` this is the fault-injection run: zero wrong or lost
  deliveries, the cost shows in the replay counters.
* ``link_timing_against_model``: single remote SRAM writes, reads, atomic
  adds and remote DRAM writes over 0, 1 and 2 hops on a quiet system; the RTL's ``CQ_CYCLES`` next to
  :meth:`~ndpdimm.cosim.link.model.LinkFabric.cycles` (figures into
  ``LINK_STATS``; the relative error is asserted within ``MODEL_TOLERANCE``).
* ``relayout_round_trip``: RELAYOUT striped -> localized -> striped over all
  cores (issued on every member at once, as the host does); the DRAM of every
  DIMM equals the reference, the round trip gives the original bytes; cycles
  into ``LINK_STATS``.
* ``bad_requests_change_nothing``: a packet to a DIMM past the chain, a
  remote SRAM range past the target's SRAM: the error status, and no byte of
  any SRAM changes.
"""

import os
import random

import cocotb
import numpy as np
from cocotb.triggers import FallingEdge

from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import GemvJob
from ndpdimm.cosim.golden.numerics import accumulate_bits
from ndpdimm.cosim.link.channel import LinkChannel
from ndpdimm.cosim.link.model import LinkFabric
from ndpdimm.cosim.link.relayout import relayout_moves
from ndpdimm.cosim.rtl.benches.core import SRAM_Y, STAGE_Y, WINDOW, NdpCoreTB
from ndpdimm.cosim.rtl.benches.dram_device import start_clocks
from ndpdimm.cosim.rtl.benches.link_pair import move_serial
from ndpdimm.cosim.rtl.benches.streams import merge_stats
from ndpdimm.cosim.rtl.build import bench_params
from ndpdimm.cosim.rtl.system_top import core_prefix, port_prefix
from ndpdimm.hw.descriptors import Opcode, link_descriptor_layout, relayout_descriptor_layout
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.link.formats import LinkConfig
from ndpdimm.hw.link.port import LINK_COUNTERS, PHY_COUNTERS
from ndpdimm.hw.link.transaction import DRAM_SPACE
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import register

#: Largest |RTL - model| / RTL accepted for a single link descriptor on a quiet system.
MODEL_TOLERANCE = 0.10
#: DRAM area the traffic test uses to move SRAM images in and out.
IMAGE = WINDOW[0] + (3 << 20)


def _env(name, default, cast=float):
    value = os.environ.get(name, "")
    return cast(value) if value != "" else default


class CoreView:
    """Core ``i``'s top ports under the names a one-core bench uses (``csr__valid``, ``cmd``...)."""
    _SHARED = ("clk", "rst", "dram_clk", "dram_rst")

    def __init__(self, dut, prefix):
        self._dut, self._prefix = dut, prefix

    def __getattr__(self, name):
        return getattr(self._dut, name if name in self._SHARED else self._prefix + name)


class LinkSystemTB:
    """All cores, all link ends, the channels between them."""

    def __init__(self, dut, seed=None):
        self.dut = dut
        params = dict(bench_params())
        self.n = params.pop("n_cores")
        seed = cocotb.RANDOM_SEED if seed is None else seed
        self.rng = random.Random(seed)
        self.cores = [NdpCoreTB(CoreView(dut, core_prefix(i)), seed + i, {**params, "link": True})
                      for i in range(self.n)]
        core = self.cores[0].core
        self.sram_size = core.sram_geometry.size_bytes
        sram_bits = self.sram_size.bit_length() - 1
        self.link_layout = link_descriptor_layout(sram_bits)
        self.relayout_layout = relayout_descriptor_layout(core.org.capacity_bytes.bit_length() - 1,
                                                          sram_bits)
        self.config = LinkConfig(max_payload=params.get("link_max_payload", 1024))
        ber, self.drop_every = _env("LINK_BER", 0.0), _env("LINK_DROP_EVERY", 0, int)
        self.links = []        # (channel, tx, tx_valid, rx, rx_valid) per direction
        for link in range(self.n - 1):
            for frm, to in (("a", "b"), ("b", "a")):
                src, dst = port_prefix(link, frm), port_prefix(link, to)
                channel = LinkChannel(self.config.lanes, self.config.chunk_bits, latency=2, ber=ber,
                                      bit_offset=[self.rng.randrange(66)
                                                  for _ in range(self.config.lanes)],
                                      rng=random.Random(self.rng.random()))
                self.links.append((channel, getattr(dut, src + "serial_tx"),
                                   getattr(dut, src + "serial_tx_valid"),
                                   getattr(dut, dst + "serial_rx"),
                                   getattr(dut, dst + "serial_rx_valid")))
        self.ends = [port_prefix(link, end) for link in range(self.n - 1) for end in "ab"]
        self.fabric = LinkFabric(self.n, self.config)
        self.cycle = 0

    async def start(self):
        for tb in self.cores:
            tb.idle_inputs()
        for end in self.ends:
            getattr(self.dut, end + "link_reset").value = 0
            getattr(self.dut, end + "serial_rx_valid").value = 0
        await start_clocks(self.dut, timing=self.cores[0].timing)
        cocotb.start_soon(self._wires())
        for i, tb in enumerate(self.cores):
            await tb.open()
            await tb.write("LINK_ID", register("LINK_ID").pack(MY_ID=i, N_DIMMS=self.n))
        for _ in range(20_000):
            if all(int(getattr(self.dut, end + "link_up").value) for end in self.ends):
                return
            await FallingEdge(self.dut.clk)
        raise AssertionError("links not up after 20000 cycles")

    async def _wires(self):
        while True:
            await FallingEdge(self.dut.clk)
            if self.drop_every and self.rng.random() < 1 / self.drop_every:
                channel = self.rng.choice(self.links)[0]
                channel.drop_chunks(self.rng.randrange(self.config.lanes), 1)
            for channel, *ends in self.links:
                move_serial(channel, *ends)
            self.cycle += 1

    def counters(self) -> dict:
        return {end[:-2]: {n: int(getattr(self.dut, end + n).value)
                           for n in LINK_COUNTERS + tuple(f"phy_{p}" for p in PHY_COUNTERS)}
                for end in self.ends}

    # ---- descriptors ---------------------------------------------------------------------
    def link_fields(self, kind, dest, remote, sram, n_bytes) -> dict:
        """LINK_SEND (``write`` / ``read``) or ATOMIC_ADD (``atomic_fp32`` / ``atomic_int32``)."""
        atomic = kind.startswith("atomic")
        return {"opcode": Opcode.ATOMIC_ADD if atomic else Opcode.LINK_SEND,
                "read": int(kind == "read"), "int32": int(kind == "atomic_int32"),
                "dest": dest, "remote": remote, "sram": sram, "n_bytes": n_bytes}

    async def link(self, core, kind, dest, remote, sram, n_bytes, want=Status.OK):
        return await self.cores[core].run(self.link_layout,
                                          self.link_fields(kind, dest, remote, sram, n_bytes), want)

    async def load_sram(self, core, sram, data: bytes):
        """``data`` into core ``core``'s SRAM at ``sram`` (DRAM staging + DMA)."""
        tb = self.cores[core]
        tb.model.load(IMAGE + sram, data)
        await tb.dma(0, IMAGE + sram, sram, len(data))

    async def read_sram(self, core, sram, n_bytes) -> bytes:
        tb = self.cores[core]
        await tb.dma(1, IMAGE + sram, sram, n_bytes)
        return tb.model.dump(IMAGE + sram, n_bytes)


async def _all(coroutines):
    tasks = [cocotb.start_soon(c) for c in coroutines]
    return [await t for t in tasks]


def _words(raw: bytes) -> np.ndarray:
    return np.frombuffer(raw, dtype="<u4")


@cocotb.test()
async def split_gemv_merged_by_atomic_add(dut):
    tb = LinkSystemTB(dut)
    await tb.start()
    rng = random.Random(cocotb.RANDOM_SEED)
    n_out, slice_cols = 40, 48
    cols = slice_cols * tb.n
    W = random_values((n_out, cols), Dtype.FP16, rng)
    X = random_values((1, cols), Dtype.FP16, rng)
    shape = tb.cores[0].shape
    jobs = [GemvJob("dense", Dtype.FP16, W[:, i * slice_cols:(i + 1) * slice_cols].contiguous(),
                    X[:, i * slice_cols:(i + 1) * slice_cols].contiguous(), None, shape)
            for i in range(tb.n)]
    done = await _all(tb.cores[i].gemv_program(jobs[i]) for i in range(tb.n))
    partial = [job.result_bits()[0] for job in jobs]
    for i, (c, f) in enumerate(done):
        assert (tb.cores[i].results_in_dram(jobs[i], f["y_pitch"])[0] == partial[i]).all(), \
            f"core {i}: partial result differs from the golden model"
    y_bytes = done[0][1]["y_pitch"]
    merged = partial[0]
    for i in range(1, tb.n):
        c = await tb.link(i, "atomic_fp32", 0, SRAM_Y, SRAM_Y, y_bytes)
        merged = np.asarray(accumulate_bits(merged, partial[i], is_int=False), dtype=np.uint32)
        dut._log.info(f"core {i} -> core 0 atomic add of {y_bytes} B ({i} hops): "
                      f"{c['cycles']} cycles")
    await tb.cores[0].dma(1, STAGE_Y, SRAM_Y, -(-y_bytes // 64) * 64)
    got = _words(tb.cores[0].model.dump(STAGE_Y, 4 * n_out))
    assert np.array_equal(got, merged), "merged result differs from the golden ((y0 + y1) + y2)"
    # and the merge is the GEMV of the whole matrix to within FP32 rounding
    want = (W.double() @ X[0].double()).numpy()
    got_f = got.view(np.float32).astype(np.float64)
    finite = np.isfinite(want)
    assert np.allclose(got_f[finite], want[finite], rtol=1e-3, atol=1e-3 * np.abs(want).max())


@cocotb.test()
async def remote_traffic_is_exact(dut):
    tb = LinkSystemTB(dut)
    await tb.start()
    n, S = tb.n, tb.sram_size
    region = S // (n + 2) // 64 * 64      # source area, n inboxes, a read landing area
    inbox = [region * (1 + s) for s in range(n)]
    landing = region * (1 + n)
    ops = _env("LINK_OPS", 12, int)
    rng = random.Random(cocotb.RANDOM_SEED)
    mirror = []
    for i in range(n):                    # random contents everywhere, INT/FP corners included
        image = bytearray(rng.randbytes(region * (n + 2)))
        words = _words(bytes(image)).copy()
        pick = np.array([rng.random() < 0.1 for _ in words])
        corners = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 1,
                            0x7FFFFFFF], dtype=np.uint32)
        words[pick] = corners[[rng.randrange(len(corners)) for _ in range(pick.sum())]]
        image = bytearray(words.tobytes())
        await tb.load_sram(i, 0, bytes(image))
        mirror.append(image)
    counts = {"write": 0, "read": 0, "atomic_fp32": 0, "atomic_int32": 0}

    async def source(s):
        r = random.Random(rng.random())
        for _ in range(ops):
            kind = r.choice(list(counts))
            dest = r.randrange(n)
            n_bytes = 32 * r.randint(1, min(region, 2 * tb.config.max_payload) // 32)
            local = 32 * r.randrange((region - n_bytes) // 32 + 1)
            if kind == "read":       # from the target's source area (nobody writes it)
                remote, sram = local, landing + 32 * r.randrange((region - n_bytes) // 32 + 1)
            else:
                remote, sram = inbox[s] + 32 * r.randrange((region - n_bytes) // 32 + 1), local
            await tb.link(s, kind, dest, remote, sram, n_bytes)
            counts[kind] += 1
            if kind == "read":
                mirror[s][sram:sram + n_bytes] = mirror[dest][remote:remote + n_bytes]
            elif kind == "write":
                mirror[dest][remote:remote + n_bytes] = mirror[s][sram:sram + n_bytes]
            else:
                old = _words(bytes(mirror[dest][remote:remote + n_bytes]))
                new = _words(bytes(mirror[s][sram:sram + n_bytes]))
                mirror[dest][remote:remote + n_bytes] = np.asarray(
                    accumulate_bits(old, new, is_int=kind == "atomic_int32"), dtype="<u4").tobytes()

    start = tb.cycle
    await _all(source(s) for s in range(n))
    cycles = tb.cycle - start
    for i in range(n):
        got = await tb.read_sram(i, 0, len(mirror[i]))
        if got != bytes(mirror[i]):
            bad = next(k for k in range(len(got)) if got[k] != mirror[i][k])
            raise AssertionError(f"core {i}: SRAM differs from the mirror first at byte {bad:#x}")
    counters = tb.counters()
    injected = sum(sum(ch.injected_errors) for ch, *_ in tb.links)
    dropped = sum(sum(ch.dropped_chunks) for ch, *_ in tb.links)
    for end, c in counters.items():
        assert c["overflows"] == 0 and c["oversize_packets"] == 0, f"{end}: {c}"
    if injected == 0 and dropped == 0:
        for end, c in counters.items():
            assert c["crc_errors"] == 0 and c["replays"] == 0, f"{end} without faults: {c}"
    dut._log.info(f"{n * ops} operations {counts} in {cycles} cycles; injected {injected} bit "
                  f"errors, dropped {dropped} chunks; replays "
                  f"{ {e: c['replays'] for e, c in counters.items()} }")
    merge_stats(os.environ.get("LINK_STATS"), "remote_traffic_is_exact", {
        "ber": _env("LINK_BER", 0.0), "drop_every": tb.drop_every, "operations": counts,
        "cycles": cycles, "injected_bit_errors": injected, "dropped_chunks": dropped,
        "counters": counters})


@cocotb.test()
async def link_timing_against_model(dut):
    tb = LinkSystemTB(dut)
    await tb.start()
    await tb.load_sram(0, 0, random.Random(3).randbytes(tb.sram_size // 2))
    for i in range(1, tb.n):
        await tb.load_sram(i, 0, bytes(tb.sram_size // 2))
    rows, worst = [], 0.0
    half = tb.sram_size // 2
    dram = DRAM_SPACE | (WINDOW[0] + (5 << 20))
    for dest in range(tb.n):
        for kind in ("write", "read", "atomic_fp32", "dram_write"):
            for n_bytes in (64, 1024, 2048) if kind == "dram_write" else (32, 1024, 2048):
                if kind == "dram_write":
                    f = tb.link_fields("write", dest, dram, 0, n_bytes)
                else:
                    f = tb.link_fields(kind, dest, half, 0 if kind != "read" else half, n_bytes)
                c = await tb.cores[0].run(tb.link_layout, f)
                if kind == "dram_write":
                    # the model's DRAM-target figures are for open rows and no refresh: warm
                    # the rows up, and take the better of two runs (a refresh hits one at most)
                    c = min([await tb.cores[0].run(tb.link_layout, f) for _ in range(2)],
                            key=lambda c: c["cycles"])
                model = tb.fabric.cycles(0, f, Status.OK)
                err = (model - c["cycles"]) / c["cycles"]
                worst = max(worst, abs(err))
                rows.append({"kind": kind, "hops": dest, "bytes": n_bytes, "rtl_cycles": c["cycles"],
                             "model_cycles": model, "error": round(err, 4)})
                dut._log.info(f"{kind:12s} {dest} hops {n_bytes:5d} B: RTL {c['cycles']:5d}, "
                              f"model {model:5d} ({100 * err:+.1f} %)")
    merge_stats(os.environ.get("LINK_STATS"), "link_timing_against_model",
                {"rows": rows, "max_abs_error": round(worst, 4)})
    assert worst <= MODEL_TOLERANCE, f"link model off by up to {100 * worst:.1f} %"


@cocotb.test()
async def relayout_round_trip(dut):
    tb = LinkSystemTB(dut)
    await tb.start()
    rng = random.Random(cocotb.RANDOM_SEED)
    n, B = tb.n, _env("RELAYOUT_BLOCK", 512, int)
    n_blocks = _env("RELAYOUT_BLOCKS", 3 * n + 1, int)
    striped, localized, restriped = WINDOW[0] + (1 << 22), WINDOW[0] + (2 << 22), WINDOW[0] + (3 << 22)
    staging = tb.sram_size - 2 * B
    target = n - 1
    drams = {i: {} for i in range(n)}
    tensor = [rng.randbytes(B) for _ in range(n_blocks)]
    for k, block in enumerate(tensor):
        tb.cores[k % n].model.load(striped + (k // n) * B, block)
        drams[k % n][striped + (k // n) * B] = block
    common = {"opcode": Opcode.RELAYOUT, "group_base": 0, "group_dimms": n, "target": target,
              "block_bytes": B, "n_blocks": n_blocks, "staging": staging}
    phases = [{**common, "to_localized": 1, "src": striped, "dst": localized},
              {**common, "to_localized": 0, "src": localized, "dst": restriped}]
    stats = []
    for fields in phases:
        start = tb.cycle
        done = await _all(tb.cores[i].run(tb.relayout_layout, fields) for i in range(n))
        stats.append({"to_localized": fields["to_localized"], "wall_cycles": tb.cycle - start,
                      "cycles": [c["cycles"] for c in done]})
        for frm, at, to, to_at in relayout_moves(fields):
            drams[to][to_at] = drams[frm][at]
    for i in range(n):
        for addr, block in drams[i].items():
            assert tb.cores[i].model.dump(addr, B) == block, f"DIMM {i}: block at {addr:#x} differs"
    for k, block in enumerate(tensor):    # the round trip: the original bytes, at the new base
        assert tb.cores[k % n].model.dump(restriped + (k // n) * B, B) == block
    dut._log.info(f"relayout of {n_blocks} x {B} B over {n} DIMMs: {stats}")
    merge_stats(os.environ.get("LINK_STATS"), "relayout_round_trip",
                {"dimms": n, "block_bytes": B, "n_blocks": n_blocks, "phases": stats})


@cocotb.test()
async def bad_requests_change_nothing(dut):
    tb = LinkSystemTB(dut)
    await tb.start()
    images = [random.Random(i).randbytes(tb.sram_size) for i in range(tb.n)]
    for i in range(tb.n):
        await tb.load_sram(i, 0, images[i])
    last = tb.n - 1
    await tb.link(0, "write", tb.n, 0, 0, 64, want=Status.BAD_FIELD)        # past the chain
    await tb.link(0, "write", last, tb.sram_size - 32, 0, 64, want=Status.REMOTE_RANGE)
    await tb.link(0, "atomic_fp32", last, tb.sram_size, 0, 32, want=Status.REMOTE_RANGE)
    await tb.link(last, "read", 0, tb.sram_size - 32, 0, 64, want=Status.REMOTE_RANGE)
    for i in range(tb.n):
        assert await tb.read_sram(i, 0, tb.sram_size) == images[i], f"core {i}: SRAM changed"
    # and the system still works afterwards
    await tb.link(0, "write", last, 0, 0, 64)
    assert (await tb.read_sram(last, 0, 64)) == images[0][:64]
