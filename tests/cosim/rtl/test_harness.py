"""The fast RTL harness (``cosim/rtl/harness.py`` + ``cosim/rtl/cpp/ndp_harness.cpp``) at the backend level.

One small core is built once for the module (cached in ``<cache>/harness``, ``cosim/cache.py``); the memory
map is that of the cocotb full-chip bench (``cosim/rtl/benches/core.py``). The
tests drive it exactly as the driver does - descriptor words in, completions
out - and check results bit for bit against the golden model, the DRAM
command counts against the core's own counters, host pass-through traffic
while the NDP computes, the waveform window, and the errors.
"""

import random

import numpy as np
import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.gemv.job import EngineShape
from ndpdimm.cosim.rtl.benches.core import (
    SRAM_IDX,
    SRAM_X,
    SRAM_Y,
    STAGE_IDX,
    STAGE_X,
    STAGE_Y,
    WINDOW,
    _round,
    stage_gemv,
)
from ndpdimm.cosim.rtl.benches.datapath import job_from_spec
from ndpdimm.cosim.rtl.harness import HarnessMismatch, RtlBackend, RtlSystem
from ndpdimm.cosim.rtl.harness_build import build_harness
from ndpdimm.hw.core.ndp_core import ndp_core_from_config
from ndpdimm.hw.descriptors import Opcode, dma_descriptor_layout, gemv_descriptor_layout
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import register

SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


class Program:
    """Descriptor words for one core configuration (the layouts of ``hw/descriptors.py``)."""

    def __init__(self, config):
        core = ndp_core_from_config(config.dram_config, **config.core_params())
        e = core.engine
        self.shape = EngineShape(n_units=e.n_units, max_batch=e.max_batch, radix_bits=e.radix_bits,
                                 index_bits=e.index_bits, step_bits=e.step_bits)
        dram_bits = core.org.capacity_bytes.bit_length() - 1
        sram_bits = config.sram_size.bit_length() - 1
        self.gemv = gemv_descriptor_layout(dram_bits, sram_bits)
        self.dma_layout = dma_descriptor_layout(dram_bits, sram_bits)
        self.next_id = 1

    def word(self, layout, fields):
        fields = {"id": self.next_id & 0xFFF, **fields}
        self.next_id += 1
        return layout.const(fields).as_value().value

    def dma(self, to_dram, dram, sram, n):
        return self.word(self.dma_layout, {"opcode": Opcode.DMA, "to_dram": to_dram, "dram": dram,
                                           "sram": sram, "n_bytes": n})

    def stage(self, backend, job):
        """Load W, X, the index list into DRAM; the GEMV program's words and the Y pitch."""
        f, x_bytes, idx_bytes, y_bytes = stage_gemv(backend.load, job)
        words = [self.dma(0, STAGE_X, SRAM_X, _round(x_bytes, 64))]
        if idx_bytes:
            words.append(self.dma(0, STAGE_IDX, SRAM_IDX, _round(idx_bytes, 64)))
        words.append(self.word(self.gemv, f))
        words.append(self.dma(1, STAGE_Y, SRAM_Y, _round(y_bytes, 64)))
        return words, f["y_pitch"]

    @staticmethod
    def results(backend, job, y_pitch):
        out = np.zeros((job.batch, job.n_out), dtype=np.uint32)
        for b in range(job.batch):
            out[b] = np.frombuffer(backend.dump(STAGE_Y + b * y_pitch, 4 * job.n_out), dtype="<u4")
        return out


@pytest.fixture(scope="module")
def core():
    backend = RtlBackend(SMALL)
    backend.csr_write("WINDOW_BASE", WINDOW[0])
    backend.csr_write("WINDOW_LIMIT", WINDOW[1])
    backend.csr_write("CTRL", 1)
    yield backend
    backend.close()


JOBS = [
    {"op": "dense", "dtype": "fp16", "rows": 21, "cols": 70, "batch": 2},
    {"op": "row_gather", "dtype": "int8", "rows": 40, "cols": 130, "active": 0.4},
    {"op": "col_gather", "dtype": "bf16", "rows": 24, "cols": 100, "active": 0.5, "batch": 3},
    {"op": "dense", "dtype": "bf16", "rows": 67, "cols": 300, "batch": 4},
]


def test_registers_and_reset(core):
    assert core.csr_read("ID") == register("ID").reset
    caps = core.csr_read("CAPS")
    assert caps & 0xFFFF == SMALL.n_units
    assert core.csr_read("WINDOW_LIMIT") == WINDOW[1]
    before = core.csr_read("CYCLES")
    core.run_cycles(100)
    assert core.csr_read("CYCLES") >= before + 100


@pytest.mark.parametrize("i", range(len(JOBS)))
def test_gemv_program_bit_exact(core, i):
    """DMA in, GEMV, DMA out submitted as one batch; results in DRAM bit-exact vs golden;
    completion bytes and the core's DRAM counters agree with the harness's DRAM model."""
    prog = Program(SMALL)
    job = job_from_spec(JOBS[i], prog.shape, 900 + i)
    words, y_pitch = prog.stage(core, job)
    reads0, stats0 = core.csr_read("DRAM_BURSTS_READ"), core.stats()
    core.submit(words)
    done = core.run()
    assert core.pending == 0
    assert [c.status for c in done] == [Status.OK] * len(words), [c.describe() for c in done]
    assert [c.id for c in done] == [(w >> 4) & 0xFFF for w in words]
    assert (prog.results(core, job, y_pitch) == job.result_bits()).all()
    gemv = done[-2]
    assert gemv.opcode == Opcode.GEMV and gemv.cycles > 0
    stats = core.stats()
    rd = stats["RD"] - stats0["RD"]
    # every burst the DRAM model served was read by the streamer or the DMA
    assert rd == sum(c.dram_bytes for c in done if c.opcode == Opcode.DMA and
                     (words[done.index(c)] >> 16) & 1 == 0) // 64 + gemv.dram_bytes // 64
    assert core.csr_read("DRAM_BURSTS_READ") - reads0 == gemv.dram_bytes // 64


def test_profile_splits_the_loop_time(core):
    """``profile``: off, nothing is counted; on, every eval() and run loop is timed (the
    model's evaluation is most of the loop, never more than it); off again, the totals stay."""
    base = core.profile()
    core.run_cycles(200)
    assert core.profile() == base, "counted while profiling was off"
    core.profile(True)
    core.run_cycles(500)
    on = core.profile(False)
    # at least one eval per edge: 500 NDP cycles are 1000 NDP edges (DRAM edges share some)
    assert on["evals"] - base["evals"] >= 1000
    eval_s, loop_s = on["eval_seconds"] - base["eval_seconds"], on["loop_seconds"] - base["loop_seconds"]
    assert 0 < eval_s <= loop_s
    assert 0 <= on["harness_share"] < 1
    core.run_cycles(200)
    assert core.profile() == on


def test_rejected_descriptors_change_nothing(core):
    prog = Program(SMALL)
    marker = random.Random(5).randbytes(256)
    core.load(STAGE_Y, marker)
    wr0 = core.stats()["WR"]
    words = [prog.dma(1, WINDOW[0] - 64, 0, 128),            # outside the window
             prog.dma(1, STAGE_Y + 16, 0, 64),               # misaligned
             prog.word(prog.dma_layout, {"opcode": 11}),
             prog.word(prog.dma_layout, {"opcode": Opcode.FENCE})]
    core.submit(words)
    got = [c.status for c in core.run()]
    assert got == [Status.DRAM_RANGE, Status.MISALIGNED, Status.BAD_OPCODE, Status.OK]
    assert core.stats()["WR"] == wr0 and core.dump(STAGE_Y, 256) == marker


def test_host_traffic_while_computing(core):
    """Host pass-through writes and reads run while a GEMV program is in flight and see
    exactly their own data."""
    prog = Program(SMALL)
    job = job_from_spec({"op": "dense", "dtype": "fp16", "rows": 64, "cols": 256, "batch": 2},
                        prog.shape, 31)
    words, y_pitch = prog.stage(core, job)
    core.submit(words)
    rng = random.Random(9)
    host = 1 << 27                                          # outside the NDP window
    for k in range(6):
        data = rng.randbytes(64)
        core.host_access(host + 64 * k, True, data)
        assert core.host_access(host + 64 * k, False) == data
        assert core.dump(host + 64 * k, 64) == data
    assert core.pending > 0, "the program should still be running during host traffic"
    done = core.run()
    assert all(c.ok for c in done)
    assert (prog.results(core, job, y_pitch) == job.result_bits()).all()


def test_background_host_stream(core):
    """Host reads issued by the harness itself every 40 cycles while a GEMV program runs (no
    Python call per read): the program stays bit exact, the reads were issued at that pace and
    completed with their latency measured; once stopped, no more are issued."""
    prog = Program(SMALL)
    job = job_from_spec({"op": "dense", "dtype": "int8", "rows": 64, "cols": 512, "batch": 2},
                        prog.shape, 37)
    words, y_pitch = prog.stage(core, job)
    host = 1 << 27                                          # outside the NDP window
    core.load(host, bytes(range(256)) * 16)
    start = core.cycle
    core.host_stream(host, 4096, 40)
    core.submit(words)
    done = core.run()
    elapsed = core.cycle - start
    assert all(c.ok for c in done)
    assert (prog.results(core, job, y_pitch) == job.result_bits()).all()
    stats = core.host_stream_stats()
    assert elapsed // 40 <= stats["issued"] <= elapsed // 40 + 1
    assert stats["issued"] - 4 <= stats["completed"] <= stats["issued"]
    assert 0 < stats["mean_latency"] <= stats["max_latency"] < 2000
    core.host_stream(0, 0, 1)                               # stop
    core.run_cycles(400)
    stopped = core.host_stream_stats()
    core.run_cycles(400)
    assert core.host_stream_stats()["issued"] == stopped["issued"]
    assert stopped["completed"] == stopped["issued"]        # the ones in flight finished
    cap = core.org.capacity_bytes
    for addr, n, spacing in ((100, 64, 10), (host, 100, 10), (host, 64, 0), (cap - 64, 128, 5)):
        with pytest.raises(ValueError):
            core.host_stream(addr, n, spacing)
    assert core.host_stream_stats() == stopped              # refused calls changed nothing


def test_rtl_system_arguments_are_checked_before_building(core):
    linked = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, link=True)
    with pytest.raises(ValueError, match="2 or more cores"):
        RtlSystem(linked, 1)
    with pytest.raises(ValueError, match="n_cores must be 1..4"):
        RtlSystem(linked, 5)
    with pytest.raises(ValueError, match="link=True"):
        RtlSystem(SMALL, 2)
    with pytest.raises(ValueError, match="latency"):
        RtlSystem(linked, 3, latency=-1)
    with pytest.raises(ValueError, match="ber"):
        RtlSystem(linked, 3, ber=1.0)
    with pytest.raises(HarnessMismatch, match="1 core"):     # a one-core library
        RtlSystem(linked, 3, library=core.library)


def test_bad_input(core):
    cap = core.org.capacity_bytes
    with pytest.raises(ValueError, match="outside the DIMM"):
        core.load(cap - 8, bytes(16))
    with pytest.raises(ValueError, match="outside the DIMM"):
        core.dump(-64, 64)
    with pytest.raises(ValueError, match="64 B aligned"):
        core.host_access(100, False)
    with pytest.raises(ValueError, match="256-bit"):
        core.submit([1 << 256])
    with pytest.raises(KeyError, match="NOPE"):
        core.csr_read("NOPE")
    # nothing above changed the core
    assert core.pending == 0
    assert core.csr_read("ID") == register("ID").reset


def test_library_built_for_other_parameters(core):
    other = CoreConfig(n_units=4, max_batch=4, sram_size=16384, sram_banks=4)
    with pytest.raises(HarnessMismatch, match="was built for"):
        RtlBackend(other, library=core.library)


def test_build_is_cached(core):
    assert build_harness(SMALL, progress=False) == core.library


@pytest.mark.sim
def test_waveform_window(tmp_path):
    """A VCD of NDP cycles 40..90 only: standard header, the core's ports, and every
    timestamp inside the window. In the full regression (``make sim``) only: the traced
    build of the core takes about 8 minutes, the longest single item of ``make test``."""
    path = tmp_path / "core.vcd"
    prog = Program(SMALL)
    with RtlBackend(SMALL, waves=(path, 40, 90)) as b:
        b.csr_write("WINDOW_BASE", WINDOW[0])
        b.csr_write("WINDOW_LIMIT", WINDOW[1])
        b.csr_write("CTRL", 1)
        b.submit([prog.dma(0, STAGE_X, 0, 256)])
        assert [c.status for c in b.run()] == [Status.OK]
        b.run_cycles(200)
        b.close_waves()
    text = path.read_text()
    head, _, body = text.partition("$enddefinitions $end")
    assert "$timescale" in head and " clk " in head and " irq " in head
    times = [int(line[1:]) for line in body.splitlines() if line.startswith("#")]
    assert times, "no value changes recorded"
    # cycle n's rising edge is at about (n + 4 reset cycles) ns
    assert 40_000 <= min(times) < 46_000 and 90_000 <= max(times) <= 96_000, (min(times), max(times))


def test_waves_need_a_traced_library(core, tmp_path):
    with pytest.raises(HarnessMismatch, match="without waveform"):
        RtlBackend(SMALL, library=core.library, waves=(tmp_path / "x.vcd", 0, 10))
