"""The core's reference model (``cosim/golden/core.py``) and the model backend built on it
(``cosim/model/backend.py``), without any simulator.

The model's predictions are checked against the RTL by the constrained-random
full-chip bench (``tests/hw/core/test_ndp_core_random_cocotb.py``) and, through the
driver, by ``tests/sw/driver/test_driver.py``; these are the quick checks of its
plumbing: widths from the engine, the reset window, register semantics, time,
and the honest failure of a timing-only model asked for data it never computed.
"""

import random
import warnings

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import COUNTER_REGISTERS, CoreConfig
from ndpdimm.cosim.gemv import weight_layout
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden.core import CoreModel, engine_counter_bits
from ndpdimm.cosim.model.backend import ModelBackend, UnknownDataError
from ndpdimm.hw.descriptors import GemvOp, Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.gemv.engine import GemvEngine
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.registers import register

CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


def model_backend(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # an uncalibrated configuration is fine here
        return ModelBackend(CFG, **kw)


def test_widths_come_from_the_engine():
    e = GemvEngine(n_units=8, max_batch=4)
    e._MustUse__silence = True
    assert engine_counter_bits(8, 4, 1) == (e.index_bits, e.step_bits)
    m = CoreModel.from_config(CFG)
    assert (m.S, m.U, m.max_batch, m.lanes) == (16384, 8, 4, CFG.act_lanes)
    assert m.capacity == CFG.dram()[0].capacity_bytes
    assert m.width(Opcode.GEMV, "w_base") == m.capacity.bit_length() - 1
    assert m.width(Opcode.DMA, "sram") == 14


def test_reset_window_is_empty():
    m = CoreModel.from_config(CFG)
    dma = {"opcode": Opcode.DMA, "id": 1, "to_dram": 0, "dram": 1 << 20, "sram": 0, "n_bytes": 64}
    assert m.expected_status(dma) == Status.DRAM_RANGE
    m.window = (1 << 20, 2 << 20)
    assert m.expected_status(dma) == Status.OK
    assert m.expected_status({"opcode": Opcode.FENCE, "id": 2}) == Status.OK
    assert m.expected_status({"opcode": 0, "id": 2}) == Status.BAD_OPCODE
    assert m.expected_status({"opcode": Opcode.ATOMIC_ADD, "id": 2}) == Status.UNSUPPORTED


def test_gemv_from_memory_images_matches_golden():
    rng = random.Random(1)
    m = CoreModel.from_config(CFG, window=(0, 1 << 24))
    W = random_values((20, 37), Dtype.BF16, rng, 0.05)
    X = random_values((3, 37), Dtype.BF16, rng, 0.05)
    idx = torch.tensor([19, 0, 4, 4])
    job = GemvJob("row_gather", Dtype.BF16, W, X, idx, EngineShape(n_units=8, max_batch=4))
    m.dram.write(4096, weight_layout.dram_image(job))
    xb = X.view(torch.int16).numpy().astype("<i2")
    for b in range(3):
        m.sram[1024 + 96 * b:1024 + 96 * b + 74] = xb[b].tobytes()
    m.sram[0:16] = weight_layout.index_bytes(idx)
    f = {"opcode": Opcode.GEMV, "id": 3, "op": GemvOp.ROW_GATHER, "dtype": int(Dtype.BF16),
         "batch_minus_one": 2, "accumulate": 0, "w_base": 4096, "n_rows": 20, "n_cols": 37,
         "idx_addr": 0, "n_idx": 4, "x_addr": 1024, "x_pitch": 96, "y_addr": 2048, "y_pitch": 32}
    assert m.expected_status(f) == Status.OK
    assert m.completion_bytes(f, Status.OK) == 4 * 64 * 2         # 4 rows x 2 bursts
    y = m.apply(f)
    assert (y == job.result_bits()).all()
    got = np.frombuffer(bytes(m.sram[2048:2048 + 96]), "<u4").reshape(3, 8)[:, :4]
    assert (got == job.result_bits()).all()
    m.sram[12:16] = (20).to_bytes(4, "little")                     # last entry past the matrix
    assert m.expected_status(f) == Status.BAD_INDEX


def test_model_backend_registers_and_time():
    be = model_backend()
    assert be.csr_read("ID") == register("ID").reset and be.csr_read("POLICY") == 2
    assert be.csr_read("WINDOW_LIMIT") == 0 and be.csr_read("CTRL") == 0
    dma = be.core.encode(Opcode.DMA, {"opcode": Opcode.DMA, "id": 7, "dram": 1 << 20, "n_bytes": 64})
    be.submit([dma])
    with pytest.raises(RuntimeError, match="CTRL.ENABLE is 0"):
        be.run()
    assert be.run(max_cycles=100) == [] and be.cycle == 100
    be.csr_write("WINDOW_BASE", 1 << 20)            # privileged, a descriptor queued: refused
    assert be.csr_read("WINDOW_BASE") == 0 and be.csr_read("CSR_ERRORS") == 1
    be.csr_write("CTRL", 1)
    (c,) = be.run()
    assert c.id == 7 and c.status == Status.DRAM_RANGE and c.done_cycle == be.cycle > 100
    be.csr_write("WINDOW_BASE", 1 << 20)
    be.csr_write("WINDOW_LIMIT", 2 << 20)
    be.load(1 << 20, bytes(range(64)))
    be.submit([dma])
    (c,) = be.run()
    assert c.ok and c.dram_bytes == 64 and c.cycles > 1
    assert bytes(be.core.sram[:64]) == bytes(range(64))
    counters = be.counters()
    assert set(counters) == set(COUNTER_REGISTERS) and counters["CYCLES"] == be.cycle
    assert counters["DMA_BUSY_CYCLES"] > 0
    t = be.cycle
    assert be.host_access(1 << 20, False) == bytes(range(64)) and be.cycle > t
    with pytest.raises(ValueError, match="outside the DIMM"):
        be.load(be.org.capacity_bytes - 8, bytes(16))
    with pytest.raises(ValueError, match="no register"):
        be.csr_read("FOO")
    with pytest.raises(ValueError, match="256-bit"):
        be.submit([1 << 256])


def test_timing_only_model_refuses_unknown_data():
    be = model_backend(functional=False)
    be.csr_write("WINDOW_LIMIT", 1 << 24)
    be.csr_write("CTRL", 1)
    W = torch.ones(8, 16, dtype=torch.float16)
    be.load(0, weight_layout.dot_image(W, Dtype.FP16))
    enc = be.core.encode
    be.submit([
        enc(Opcode.GEMV, {"opcode": Opcode.GEMV, "id": 1, "dtype": int(Dtype.FP16), "w_base": 0,
                          "n_rows": 8, "n_cols": 16, "x_addr": 0, "x_pitch": 32, "y_addr": 1024,
                          "y_pitch": 32}),
        enc(Opcode.DMA, {"opcode": Opcode.DMA, "id": 2, "to_dram": 1, "dram": 8192,
                         "sram": 1024, "n_bytes": 64})])
    cs = be.run()
    assert [c.status for c in cs] == [Status.OK, Status.OK] and cs[0].cycles > 1
    assert be.dump(8192 + 32, 32) == bytes(32)           # not written by the GEMV: known
    with pytest.raises(UnknownDataError, match="only timed"):
        be.dump(8192, 64)
    be.load(8192, bytes(64))                              # the host overwrote it: known again
    assert be.dump(8192, 64) == bytes(64)


def test_driver_on_a_timing_only_model():
    """Same cycles as the functional model; results are refused, not invented."""
    from ndpdimm.sw.driver.dimm import Dimm
    W = torch.ones(300, 64, dtype=torch.float16)
    X = torch.ones(4, 64, dtype=torch.float16)
    cycles = []
    for functional in (True, False):
        d = Dimm(model_backend(functional=functional))
        wb = d.store_weights(W)
        out = d.gemv(wb, X, fetch=False)
        assert out is None
        cycles.append([(lab, c.cycles, c.status) for lab, c in d.last_run.descriptors])
        if not functional:
            with pytest.raises(UnknownDataError, match="only timed"):
                d.gemv(wb, X)
            assert d.activation("relu", torch.ones(64, dtype=torch.float16), fetch=False) is None
    assert cycles[0] == cycles[1]
