"""The host driver (``sw/driver/``): one test suite, run on both backends.

Every test takes a ``dimm`` on the ``model`` backend (reference model + calibrated
performance model) and on the ``rtl`` backend (the Verilated core in the C++
harness, built once for the small configuration below and shared by the
module). Functional results are compared bit for bit with the golden model
(``cosim/golden/numerics.py``) and with ``cosim/golden/act_program.py``; the last tests run the
same descriptor program on both backends and compare statuses and bytes.
"""

import random
import zlib

import numpy as np
import pytest
import torch

from ndpdimm.cosim.backend import COUNTER_REGISTERS, CoreConfig
from ndpdimm.cosim.gemv.cases import random_values
from ndpdimm.cosim.golden import act_program
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.activation.unit import ActFmt, ActOp
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.formats import Dtype
from ndpdimm.hw.memory.port import Status
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.errors import FreedBufferError, NdpError
from ndpdimm.sw.driver.system import NdpSystem

#: The small core of the cocotb full-chip benches: 8 GEMV units, batch 4, 16 KiB SRAM.
CFG = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
BACKEND_NAMES = ["model", "rtl"]


@pytest.fixture(scope="module")
def model_backend():
    from ndpdimm.cosim.model.backend import ModelBackend
    b = ModelBackend(CFG)
    yield b
    b.close()


@pytest.fixture(scope="module")
def rtl_backend():
    from ndpdimm.cosim.rtl.harness import RtlBackend
    b = RtlBackend(CFG)
    yield b
    b.close()


@pytest.fixture(params=BACKEND_NAMES)
def dimm(request):
    """A fresh driver (empty allocators) on the module's backend instance of that kind."""
    return Dimm(request.getfixturevalue(f"{request.param}_backend"))


@pytest.fixture(params=BACKEND_NAMES)
def fresh_dimm(request):
    """A driver on a new backend instance of that kind (the RTL library is the cached build):
    for tests whose cycle counts depend on where DRAM refreshes fall, which on the shared
    instance depends on the tests that ran before (and on xdist's order)."""
    if request.param == "model":
        from ndpdimm.cosim.model.backend import ModelBackend as backend_class
    else:
        from ndpdimm.cosim.rtl.harness import RtlBackend as backend_class
    backend = backend_class(CFG)
    yield Dimm(backend)
    backend.close()


def _bits(y):
    return golden.f32_bits(y) if y.dtype == torch.float32 else y.to(torch.int64)


def assert_bit_exact(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} vs {tuple(want.shape)}"
    g, w = _bits(got), _bits(want)
    if not torch.equal(g, w):
        bad = torch.nonzero(g != w)[0].tolist()
        raise AssertionError(f"{what}: differs from the golden model at {bad}: "
                             f"{got[tuple(bad)].item()!r} vs {want[tuple(bad)].item()!r}")


# ---- GEMV ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [Dtype.FP16, Dtype.BF16, Dtype.INT8], ids=lambda d: d.name)
@pytest.mark.parametrize("op", ["dense", "row_gather", "col_gather"])
def test_gemv_bit_exact(dimm, op, dtype):
    seed = zlib.crc32(f"{op} {int(dtype)}".encode()) & 0xFFFF   # stable across processes, unlike hash()
    print(f"seed={seed}")
    rng = random.Random(seed)
    B = 3
    if op == "col_gather":
        Wt = random_values((24, 100), dtype, rng, 0.03)
        X = random_values((B, 24), dtype, rng, 0.03)
        idx = torch.tensor([rng.randrange(24) for _ in range(11)])
        wb = dimm.store_weights(Wt, layout="axpy")
        want = golden.gemv_col_gather(Wt, X, idx, dtype)
    else:
        W = random_values((40, 70), dtype, rng, 0.03)
        X = random_values((B, 70), dtype, rng, 0.03)
        idx = None if op == "dense" else torch.tensor([39, 0, 5, 5, 17, 22, 38])
        wb = dimm.store_weights(W)
        want = golden.gemv_dot(W, X, dtype) if idx is None else golden.gemv_row_gather(W, X, idx, dtype)
    y = dimm.gemv(wb, X, op=op, idx=idx)
    assert_bit_exact(y, want, f"{op} {dtype.name} on {dimm.name} (seed={seed})")
    run = dimm.last_run
    assert run.backend == dimm.name and run.elapsed_cycles > 0
    assert run.cycles_by_opcode()["GEMV"] > 0 and run.cycles_by_opcode()["DMA"] > 0
    assert all(c.ok for _, c in run.descriptors)
    dimm.free(wb)


def test_gemv_batch_above_max_batch_vector_and_accumulate(dimm):
    rng = random.Random(7)
    W = random_values((20, 33), Dtype.FP16, rng)
    X = random_values((6, 33), Dtype.FP16, rng)                 # 6 > max_batch 4: two groups
    wb = dimm.store_weights(W)
    assert_bit_exact(dimm.gemv(wb, X), golden.gemv_dot(W, X, Dtype.FP16), "batch 6")
    assert_bit_exact(dimm.gemv(wb, X[2]), golden.gemv_dot(W, X[2:3], Dtype.FP16)[0], "1-D x")
    prior = torch.randn(6, 20) * 4
    want = golden.result_values(golden.accumulate_bits(
        golden.result_bits(prior), golden.result_bits(golden.gemv_dot(W, X, Dtype.FP16)), False), True)
    assert_bit_exact(dimm.gemv(wb, X, accumulate=prior), want.reshape(6, 20), "accumulate")
    Wi = random_values((12, 50), Dtype.INT8, rng)
    Xi = random_values((2, 50), Dtype.INT8, rng)
    wi = dimm.store_weights(Wi)
    prior_i = torch.tensor([[2 ** 31 - 1] * 12, [-5] * 12], dtype=torch.int32)     # wraps
    want_i = golden.result_values(golden.accumulate_bits(
        golden.result_bits(prior_i), golden.result_bits(golden.gemv_dot(Wi, Xi, Dtype.INT8)), True),
        False)
    assert_bit_exact(dimm.gemv(wi, Xi, accumulate=prior_i), want_i.reshape(2, 12), "INT8 accumulate")


def test_tiled_gemv_larger_than_sram(dimm):
    """Y of a dense GEMV (4 x 1100 x 4 B) and of a column gather exceed the 16 KiB SRAM with X:
    the driver splits outputs (row-gather chunks / stored column tiles), still bit-exact."""
    rng = random.Random(11)
    W = random_values((1100, 24), Dtype.FP16, rng, 0.02)
    X = random_values((4, 24), Dtype.FP16, rng)
    wb = dimm.store_weights(W)
    y = dimm.gemv(wb, X)
    assert_bit_exact(y, golden.gemv_dot(W, X, Dtype.FP16), "tiled dense")
    gemvs = [lab for lab, _ in dimm.last_run.descriptors if lab.startswith("GEMV")]
    assert len(gemvs) > 1, gemvs
    Wt = random_values((6, 1100), Dtype.BF16, rng)
    H = random_values((4, 6), Dtype.BF16, rng)
    idx = torch.tensor([5, 0, 3, 3])
    wt = dimm.store_weights(Wt, layout="axpy")
    assert len(wt.tiles) == -(-1100 // dimm.axpy_tile())
    assert_bit_exact(dimm.gemv(wt, H, idx=idx), golden.gemv_col_gather(Wt, H, idx, Dtype.BF16),
                     "tiled column gather")


# ---- activation unit -------------------------------------------------------------------------

def _act_reference(fields, inputs, out_bytes, lanes):
    """``cosim/act_program.apply`` on an SRAM image holding ``inputs`` at 0, 4096, ..."""
    img = bytearray(16384)
    for i, raw in enumerate(inputs):
        img[4096 * i:4096 * i + len(raw)] = raw
    f = {"c": 0, "k": 0x3F800000, **fields, "src_a": 0, "src_b": 4096, "dst": 8192}
    assert act_program.apply(f, img, lanes) == Status.OK
    return bytes(img[8192:8192 + out_bytes])


def _raw(t):
    return t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


@pytest.mark.parametrize("op,fin,fout", [
    ("gelu", torch.float16, torch.float16), ("silu", torch.float32, torch.float16),
    ("relu", torch.bfloat16, torch.bfloat16), ("exp", torch.float32, torch.float32),
    ("pass", torch.float32, torch.bfloat16), ("max", torch.float16, torch.float32),
    ("sumexp", torch.float32, torch.float32), ("scale", torch.float16, torch.float32)])
def test_activation_vs_act_program(dimm, op, fin, fout):
    x = (torch.randn(203, generator=torch.Generator().manual_seed(3)) * 3).to(fin)
    x[7] = float("inf")
    x[9] = -0.0
    kw = {"k": 0.125} if op == "scale" else ({"c": 1.5} if op in ("exp", "sumexp") else {})
    y = dimm.activation(op, x, out_dtype=fout, **kw)
    fmt = {torch.float16: ActFmt.FP16, torch.bfloat16: ActFmt.BF16, torch.float32: ActFmt.FP32}
    red = op in ("max", "sumexp")
    eo = torch.empty((), dtype=fout).element_size()
    consts = {"k": 0x3E000000} if op == "scale" else ({"c": 0x3FC00000} if kw else {})
    want = _act_reference({"opcode": Opcode.ACT, "op": ActOp[op.upper()], "in_fmt": fmt[fin],
                           "out_fmt": fmt[fout], "n": 203, **consts}, [_raw(x)],
                          eo * (1 if red else 203), dimm.config.act_lanes)
    assert _raw(y) == want, f"ACT {op} on {dimm.name} differs from act_program"
    assert dimm.last_run.cycles_by_opcode()["ACT"] > 0


def test_softmax_and_eltwise_vs_act_program(dimm):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 77, generator=g) * 4
    y = dimm.softmax(x, out_dtype=torch.float16)
    lanes = dimm.config.act_lanes
    for r in range(3):
        want = _act_reference({"opcode": Opcode.SOFTMAX, "op": 0, "in_fmt": ActFmt.FP32,
                               "out_fmt": ActFmt.FP16, "n": 77}, [_raw(x[r])], 2 * 77, lanes)
        assert _raw(y[r]) == want, f"softmax row {r} on {dimm.name}"
    assert abs(y.float().sum(-1) - 1).max() < 0.05
    assert [lab for lab, _ in dimm.last_run.descriptors].count("SOFTMAX row 2 n=77") == 1
    a = torch.randn(150, generator=g).to(torch.bfloat16)
    b = torch.randn(150, generator=g).to(torch.bfloat16)
    for op in ("add", "mul"):
        y = dimm.eltwise(op, a, b, out_dtype=torch.float32)
        want = _act_reference({"opcode": Opcode.ELTWISE, "op": ActOp[op.upper()],
                               "in_fmt": ActFmt.BF16, "out_fmt": ActFmt.FP32, "n": 150},
                              [_raw(a), _raw(b)], 4 * 150, lanes)
        assert _raw(y) == want, f"eltwise {op} on {dimm.name}"


# ---- memory and tensors ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.int8, torch.float32,
                                   torch.int32])
def test_tensor_round_trip_dram_and_sram(dimm, dtype):
    t = (torch.randn(5, 37) * 50).to(dtype)
    for buf in (dimm.alloc(t.numel() * t.element_size()), dimm.alloc_sram(t.numel() * t.element_size())):
        dimm.write(buf, t)
        assert torch.equal(dimm.read(buf, dtype, t.shape), t), buf
        dimm.free(buf)


def test_allocator_first_fit_reuses_freed_space(dimm):
    a, b, c = dimm.alloc(100), dimm.alloc(64), dimm.alloc(4096)
    assert a.addr % 64 == 0 and b.addr == a.addr + 128 and c.addr == b.addr + 64
    dimm.free(b)
    assert dimm.alloc(10).addr == b.addr                     # first fit into the hole
    s1, s2 = dimm.alloc_sram(40), dimm.alloc_sram(64)
    assert s1.addr % 32 == 0 and s1.nbytes == 64 and s2.addr == s1.addr + 64
    dimm.free(s1)
    dimm.free(s2)
    assert dimm.sram.largest_free == dimm.config.sram_size


def test_bad_input_errors(dimm):
    buf = dimm.alloc(256)
    with pytest.raises(ValueError, match="dtype torch.float64"):
        dimm.write(buf, torch.zeros(4, dtype=torch.float64))
    with pytest.raises(ValueError, match="do not fit"):
        dimm.write(buf, torch.zeros(300, dtype=torch.int8))
    with pytest.raises(ValueError, match="does not fit"):
        dimm.read(buf, torch.float32, (65,))
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        dimm.write(buf, [1, 2, 3])
    with pytest.raises(ValueError, match="dtype"):
        dimm.store_weights(torch.zeros(4, 4))                  # float32 weights
    with pytest.raises(ValueError, match="INT8 was asked for"):
        dimm.store_weights(torch.zeros(4, 4, dtype=torch.float16), dtype=Dtype.INT8)
    with pytest.raises(ValueError, match="2-D"):
        dimm.store_weights(torch.zeros(4, dtype=torch.float16))
    wb = dimm.store_weights(torch.ones(8, 16, dtype=torch.float16))
    with pytest.raises(ValueError, match="dtype torch.bfloat16"):
        dimm.gemv(wb, torch.ones(2, 16, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match=r"x must be \[16\] or \[B, 16\]"):
        dimm.gemv(wb, torch.ones(2, 15, dtype=torch.float16))
    with pytest.raises(ValueError, match="needs weights stored with layout axpy"):
        dimm.gemv(wb, torch.ones(2, 8, dtype=torch.float16), op="col_gather", idx=[0])
    with pytest.raises(ValueError, match="takes no index list"):
        dimm.gemv(wb, torch.ones(2, 16, dtype=torch.float16), op="dense", idx=[0])
    with pytest.raises(ValueError, match="accumulate must be"):
        dimm.gemv(wb, torch.ones(2, 16, dtype=torch.float16), accumulate=torch.zeros(2, 7))
    with pytest.raises(ValueError, match="an ACT op must be one of"):
        dimm.activation("add", torch.ones(4, dtype=torch.float16))
    with pytest.raises(ValueError, match="same dtype and shape"):
        dimm.eltwise("add", torch.ones(4, dtype=torch.float16), torch.ones(5, dtype=torch.float16))
    # allocation beyond the DIMM, the window and the SRAM
    with pytest.raises(MemoryError, match="holds only"):
        dimm.alloc(dimm.capacity + 64)
    with pytest.raises(MemoryError, match="SRAM"):
        dimm.alloc_sram(dimm.config.sram_size + 1)
    with pytest.raises(ValueError, match="positive number of bytes"):
        dimm.alloc(0)
    # use after free, double free
    dimm.free(buf)
    with pytest.raises(FreedBufferError, match="write of .* after it was freed"):
        dimm.write(buf, torch.zeros(4, dtype=torch.int8))
    with pytest.raises(FreedBufferError, match="read of"):
        dimm.read(buf, torch.int8, (4,))
    with pytest.raises(FreedBufferError, match="free of"):
        dimm.free(buf)
    dimm.free(wb)
    with pytest.raises(FreedBufferError, match="GEMV of"):
        dimm.gemv(wb, torch.ones(16, dtype=torch.float16))
    theirs = dimm.alloc(64)
    other = Dimm(dimm.backend)
    with pytest.raises(FreedBufferError, match="another DIMM"):
        other.read(theirs, torch.int8)


def test_bad_construction_errors(dimm):
    with pytest.raises(ValueError, match="backend must be one of rtl, model"):
        Dimm("fpga", CFG)
    with pytest.raises(ValueError, match="window"):
        Dimm(dimm.backend, window=(0, dimm.capacity + 64))
    with pytest.raises(ValueError, match="64 B aligned"):
        Dimm(dimm.backend, window=(32, 1 << 20))
    with pytest.raises(ValueError, match="differs from the backend"):
        Dimm(dimm.backend, CoreConfig())
    small = Dimm(dimm.backend, window=(1 << 20, 2 << 20))
    with pytest.raises(MemoryError, match=r"the NDP window \[0x100000, 0x200000\) holds only"):
        small.alloc(2 << 20)


def test_rtl_library_built_for_other_parameters(rtl_backend):
    from ndpdimm.cosim.rtl.harness import HarnessMismatch
    other = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4, desc_queue=4)
    with pytest.raises(HarnessMismatch, match="was built for"):
        Dimm("rtl", other, library=rtl_backend.library)


# ---- errors from the core --------------------------------------------------------------------

def test_failing_descriptors_raise_and_change_nothing(dimm):
    rng = random.Random(3)
    W = random_values((16, 40), Dtype.FP16, rng)
    X = random_values((2, 40), Dtype.FP16, rng)
    wb = dimm.store_weights(W)
    # a bad last index-list entry: BAD_INDEX, and the results area keeps its old contents
    with pytest.raises(NdpError) as e:
        dimm.gemv(wb, X, idx=[3, 4, 16])
    assert e.value.status == Status.BAD_INDEX and "BAD_INDEX" in str(e.value)
    assert e.value.completion.opcode == Opcode.GEMV and e.value.descriptor.opcode == Opcode.GEMV
    # low-level descriptors with one fault each, against a marked SRAM area
    y = dimm.alloc_sram(256)
    marker = torch.arange(256, dtype=torch.int32).to(torch.uint8)
    dimm.write(y, marker)
    x = dimm.alloc_sram(128)
    lo, hi = dimm.window
    S = dimm.config.sram_size
    bursts0 = dimm.counters()["DRAM_BURSTS_READ"]
    good = dict(op="dense", dtype=Dtype.FP16, batch=2, w_base=wb.buffer.addr, n_rows=16,
                n_cols=40, x_addr=x.addr, x_pitch=96, y_addr=y.addr, y_pitch=64)
    cases = [
        (dimm.gemv_descriptor(**{**good, "dtype": 3}), Status.BAD_FIELD),
        (dimm.gemv_descriptor(**{**good, "batch": 5}), Status.BAD_FIELD),     # max_batch 4
        (dimm.gemv_descriptor(**{**good, "w_base": wb.buffer.addr + 16}), Status.MISALIGNED),
        (dimm.gemv_descriptor(**{**good, "y_addr": S - 64}), Status.SRAM_RANGE),
        (dimm.dma_descriptor(1, hi - 64, y.addr, 128), Status.DRAM_RANGE),
        (dimm.dma_descriptor(1, lo + 32, y.addr, 64), Status.MISALIGNED),
        (dimm.dma_descriptor(0, lo, S - 64, 128), Status.SRAM_RANGE),
        (dimm.act_descriptor(Opcode.ACT, ActOp.ADD, 0, 0, 16, x.addr, y.addr), Status.BAD_FIELD),
        (dimm.act_descriptor(Opcode.ACT, ActOp.RELU, 0, 0, 16, x.addr + 2, y.addr), Status.MISALIGNED),
        (dimm.raw_descriptor(11), Status.BAD_OPCODE),
        (dimm.raw_descriptor(Opcode.LINK_SEND), Status.UNSUPPORTED),
    ]
    for d, want in cases:
        with pytest.raises(NdpError) as e:
            dimm.run([d])
        assert e.value.status == want, f"{d.fields}: {e.value}"
        assert e.value.completion.dram_bytes == 0
    assert dimm.counters()["DRAM_BURSTS_READ"] == bursts0, "a rejected descriptor read DRAM"
    assert torch.equal(dimm.read(y, torch.uint8, (256,)), marker), "a rejected descriptor wrote"
    # wait(check=False) returns the failure instead of raising
    d = dimm.raw_descriptor(12)
    dimm.submit([d])
    (c,) = dimm.wait([d], check=False)
    assert c.status == Status.BAD_OPCODE and c.id == d.id
    for b in (y, x, wb):
        dimm.free(b)


def test_held_queue_status_and_privileged_writes(dimm):
    be = dimm.backend
    dimm.enable(False)
    ds = [dimm.fence() for _ in range(3)]
    dimm.submit(ds)
    dimm.run_for(500)                           # pushed into the core, held there
    st = dimm.status()
    assert st.busy and st.queued == 3 and not st.queue_full, st
    with pytest.raises(RuntimeError, match="held"):
        dimm.wait(ds)
    errors = be.csr_read("CSR_ERRORS")
    be.csr_write("WINDOW_BASE", 0)              # privileged: refused while busy, counted
    be.csr_write("ID", 5)                       # read only: refused, counted
    assert be.csr_read("WINDOW_BASE") == dimm.window[0]
    assert be.csr_read("CSR_ERRORS") == errors + 2
    dimm.enable(True)
    cs = dimm.wait(ds)
    assert [c.id for c in cs] == [d.id for d in ds] and all(c.ok for c in cs)
    assert not dimm.status().busy


def test_counters_move(dimm):
    rng = random.Random(9)
    W = random_values((64, 64), Dtype.INT8, rng)
    X = random_values((2, 64), Dtype.INT8, rng)
    wb = dimm.store_weights(W)
    c0 = dimm.counters()
    dimm.gemv(wb, X)
    c1 = dimm.counters()
    for k in ("CYCLES", "GEMV_BUSY_CYCLES", "DMA_BUSY_CYCLES", "DRAM_BURSTS_READ"):
        assert c1[k] > c0[k], f"{k} did not move on {dimm.name}: {c0[k]} -> {c1[k]}"
    assert c1["DRAM_BURSTS_READ"] - c0["DRAM_BURSTS_READ"] >= 64     # 64 rows x 1 burst
    assert dimm.last_run.counters["GEMV_BUSY_CYCLES"] > 0
    assert dimm.backend.csr_read("ID") == int.from_bytes(b"\x01MMIDPDN", "big")
    assert dimm.backend.csr_read("CAPS") & 0xFFFF == CFG.n_units
    # the one-call read (the driver's, around every run) is the registers one by one; on RTL
    # every read clocks the core, so CYCLES moves between them and only grows
    one_call = dimm.backend.counters()
    one_by_one = {n: dimm.backend.csr_read(n) for n in COUNTER_REGISTERS}
    if dimm.name == "model":
        assert one_call == one_by_one
    else:
        assert one_call["CYCLES"] < one_by_one["CYCLES"]
        assert {k: v for k, v in one_call.items() if k != "CYCLES"} == \
            {k: v for k, v in one_by_one.items() if k != "CYCLES"}


def test_ndp_system_splits_rows(dimm):
    sys_ = NdpSystem(2, "model", CFG) if dimm.name == "model" else None
    if sys_ is None:                              # one more RTL instance of the cached library
        sys_ = NdpSystem(2, "rtl", CFG)
    rng = random.Random(4)
    W = random_values((50, 40), Dtype.FP16, rng)
    X = random_values((2, 40), Dtype.FP16, rng)
    split = sys_.store_weights_split(W)
    assert [(r0, r1) for _, r0, r1, _ in split.parts] == [(0, 25), (25, 50)]
    y = sys_.gemv_split(split, X)
    assert_bit_exact(y, golden.gemv_dot(W, X, Dtype.FP16), "2-DIMM split")
    run = sys_.last_run
    assert len(run.per_dimm) == 2 and run.cycles == max(r.elapsed_cycles for r in run.per_dimm) > 0
    sys_.close()


# ---- background host reads -------------------------------------------------------------------

def test_host_reads_during_a_gemv(fresh_dimm):
    """``host_reads``: 64 B host reads every ``spacing`` cycles while the GEMV runs, counted per
    scope, per operation and per DIMM; results stay bit-exact; outside the scope none. On a
    fresh backend: the quiet and the busy GEMV are compared, and a refresh landing in one and
    not in the other would outweigh the contention."""
    dimm = fresh_dimm
    rng = random.Random(21)
    W = random_values((64, 256), Dtype.FP16, rng, 0.03)
    X = random_values((4, 256), Dtype.FP16, rng)
    wb = dimm.store_weights(W)
    other = dimm.alloc(256)                          # 4 bursts: the reads wrap around it
    dimm.backend.load(other.addr, bytes(range(256)))
    want = golden.gemv_dot(W, X, Dtype.FP16)
    dimm.gemv(wb, X)
    quiet = dimm.last_run
    assert quiet.host_reads == 0
    spacing = 40
    with dimm.host_reads(other, spacing) as hr:
        y = dimm.gemv(wb, X)
        busy = dimm.last_run
        assert_bit_exact(y, want, f"GEMV under host reads on {dimm.name}")
        assert hr.issued == busy.host_reads == dimm.host_reads_issued > 4
        # one read per spacing at most (each waits for its response: slower if that is longer)
        assert hr.issued <= busy.elapsed_cycles // spacing + 1
        gemv = lambda run: sum(c.cycles for lab, c in run.descriptors if lab.startswith("GEMV"))
        assert gemv(busy) >= gemv(quiet)            # contention can only slow the GEMV down
        with pytest.raises(RuntimeError, match="already active"):
            with dimm.host_reads(other, spacing):
                pass
        assert dimm._host_reads is hr               # the failed nested scope left it active
        first = hr.issued
        dimm.gemv(wb, X[:1])
        assert hr.issued > first
    total = dimm.host_reads_issued
    assert_bit_exact(dimm.gemv(wb, X), want, "after the scope")
    assert dimm.host_reads_issued == total and dimm.last_run.host_reads == 0
    assert dimm.last_run.as_dict()["host_reads"] == 0
    with dimm.host_reads(wb, 500) as hr2:           # a WeightBuffer is fine too
        dimm.gemv(wb, X)
    assert hr2.issued >= 1 and dimm.host_reads_issued == total + hr2.issued
    dimm.free(wb)
    dimm.free(other)


def test_host_reads_bad_arguments_change_nothing(dimm):
    other = dimm.alloc(128)
    sram = dimm.alloc_sram(64)
    gone = dimm.alloc(64)
    dimm.free(gone)
    foreign = Dimm("model", CFG).alloc(64)
    for buf, spacing, message in [
            (other, 0, "spacing_cycles"), (other, -3, "spacing_cycles"),
            (other, 2.5, "spacing_cycles"), (other, True, "spacing_cycles"),
            (other, "100", "spacing_cycles"), (other, None, "spacing_cycles"),
            (sram, 100, "DRAM"), (torch.zeros(4), 100, "Buffer"), (None, 100, "Buffer"),
            (gone, 100, "after it was freed"), (foreign, 100, "another DIMM")]:
        with pytest.raises(ValueError, match=message):
            dimm.host_reads(buf, spacing)
    assert dimm._host_reads is None and dimm.host_reads_issued == 0
    wb = dimm.store_weights(random_values((8, 32), Dtype.FP16, random.Random(3)))
    dimm.gemv(wb, random_values((2, 32), Dtype.FP16, random.Random(4)))
    assert dimm.host_reads_issued == 0 and dimm.last_run.host_reads == 0
    for b in (wb, other, sram):
        dimm.free(b)


# ---- the two backends agree ------------------------------------------------------------------

def _program(dimm):
    """A descriptor program with valid and failing steps; returns (statuses, DRAM bytes, out)."""
    rng = random.Random(21)
    W = random_values((30, 50), Dtype.BF16, rng, 0.05)
    X = random_values((3, 50), Dtype.BF16, rng, 0.05)
    wb = dimm.store_weights(W)
    xs, ys, ix = dimm.alloc_sram(3 * 112), dimm.alloc_sram(3 * 128), dimm.alloc_sram(64)
    stage, out = dimm.alloc(1024), dimm.alloc(1024)
    xb = np.zeros((1024,), np.uint8)
    xb[:336].reshape(3, 112)[:, :100] = X.view(torch.uint8).numpy()
    dimm.write(stage, torch.from_numpy(xb))
    dimm.write(ys, torch.full((96,), -1.5))                  # known padding between Y rows
    idx = torch.tensor([29, 1, 30, 2], dtype=torch.int32)      # 30: BAD_INDEX
    dimm.write(ix, idx)
    f = dict(dtype=Dtype.BF16, batch=3, w_base=wb.buffer.addr, n_rows=30, n_cols=50,
             x_addr=xs.addr, x_pitch=112, y_addr=ys.addr, y_pitch=128)
    ds = [dimm.dma_descriptor(0, stage.addr, xs.addr, 384),
          dimm.gemv_descriptor("dense", **f),
          dimm.gemv_descriptor("row_gather", idx_addr=ix.addr, n_idx=4, **f),
          dimm.gemv_descriptor("row_gather", idx_addr=ix.addr, n_idx=2, accumulate=True, **f),
          dimm.raw_descriptor(Opcode.RELAYOUT), dimm.fence(),
          dimm.act_descriptor(Opcode.ACT, ActOp.GELU, ActFmt.FP32, ActFmt.FP16, 60, ys.addr,
                              ys.addr),
          dimm.dma_descriptor(1, out.addr, ys.addr, 384)]
    dimm.submit(ds)
    cs = dimm.wait(ds, check=False)
    result = dimm.read(out, torch.uint8, (384,))
    for b in (wb, xs, ys, ix, stage, out):
        dimm.free(b)
    return [c.status for c in cs], [c.dram_bytes for c in cs], result, cs


def test_model_and_rtl_agree(model_backend, rtl_backend):
    m_status, m_bytes, m_out, m_cs = _program(Dimm(model_backend))
    r_status, r_bytes, r_out, r_cs = _program(Dimm(rtl_backend))
    assert r_status == m_status
    assert m_status[2] == Status.BAD_INDEX and m_status[4] == Status.UNSUPPORTED
    assert r_bytes == m_bytes
    assert torch.equal(r_out, m_out), "SRAM results differ between the backends"
    for m, r in zip(m_cs, r_cs):                 # the model's cycles are predictions, not copies
        assert m.cycles > 0 and r.cycles > 0


# ---- the run-layer command -------------------------------------------------------------------

def test_run_layer_cli_on_the_model_backend(tmp_path, capsys):
    from ndpdimm.sw.cli import main
    out = tmp_path / "attention.json"
    assert main(["run-layer", "--backend", "model", "--layer", "attention", "--units", "8",
                 "--json", str(out), "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "bit-exact" in text and "DIFFERS" not in text and "softmax" in text
    import json
    r = json.loads(out.read_text())
    assert r["backend"] == "model" and r["bit_exact_vs_golden"] and r["config"]["n_units"] == 8
    assert [s["bit_exact"] for s in r["steps"]] == [True] * 4 and r["total_elapsed_cycles"] > 0
    assert r["accuracy"]["relative_l2_error_vs_transformer"] < 0.01
    assert main(["run-layer", "--backend", "model", "--layer", "mlp", "--batch", "3",
                 "--no-progress"]) == 0
    assert "down projection" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["run-layer", "--backend", "fpga"])
    assert "invalid choice: 'fpga'" in capsys.readouterr().err


# ---- descriptor timelines -----------------------------------------------------------------------

@pytest.mark.parametrize("name", BACKEND_NAMES)
def test_descriptor_timeline(name, request, tmp_path):
    """``Dimm(..., timeline=True).write_timeline``: every descriptor waited for on its engine's
    track, lasting exactly its CQ_CYCLES (1 ns per cycle), ending no later than the host
    collected it (exactly then on the model), one descriptor at a time across all engines."""
    from ndpdimm.cosim.timeline import read_timeline
    from ndpdimm.sw.driver.timeline import ENGINES, engine_of
    dimm = Dimm(request.getfixturevalue(f"{name}_backend"), timeline=True)
    _, _, _, cs = _program(dimm)
    f = read_timeline(dimm.write_timeline(tmp_path / "descriptors.json"))
    proc = f"DIMM ({name} backend)"
    assert f.track_names(proc) == list(ENGINES)
    slices = sorted((s + (e,) for e in ENGINES for s in f.tracks[(proc, e)]), key=lambda s: s[0])
    assert len(slices) == len(dimm.timeline_records) > len(cs)       # the DMAs of write/read too
    for a, b in zip(slices, slices[1:]):
        assert b[0] >= a[0] + a[1] - 1e-9, f"{a[2]!r} and {b[2]!r} overlap on {name}"
    got = {s[3]["id"]: s for s in slices if s[3]["id"] in {c.id for c in cs}}
    for c in cs:
        ts, dur, _, args, engine = got[c.id]
        assert engine == engine_of(c.opcode) and args["status"] == c.status.name
        assert dur == pytest.approx(c.cycles / 1e3, abs=1e-9)
        end = (ts + dur) * 1e3
        assert end <= c.done_cycle + 1e-6
        if name == "model":
            assert end == pytest.approx(c.done_cycle)
    with pytest.raises(ValueError, match="make it with Dimm"):
        Dimm(request.getfixturevalue(f"{name}_backend")).write_timeline(tmp_path / "none.json")


def test_system_timeline_has_a_process_per_dimm(tmp_path):
    """``NdpSystem(..., timeline=True).write_timeline``: each DIMM's split GEMV on its own
    process, the GEMV slices lasting their completions' cycles."""
    from ndpdimm.cosim.timeline import read_timeline
    sys_ = NdpSystem(2, "model", CFG, timeline=True)
    rng = random.Random(5)
    split = sys_.store_weights_split(random_values((40, 32), Dtype.FP16, rng))
    sys_.gemv_split(split, random_values((2, 32), Dtype.FP16, rng))
    f = read_timeline(sys_.write_timeline(tmp_path / "system.json"))
    for i, d in enumerate(sys_):
        gemv = f.tracks[(f"DIMM {i} (model backend)", "GEMV engine")]
        want = sorted(c.cycles for _, c in d.timeline_records if c.opcode == Opcode.GEMV)
        assert want and sorted(round(s[1] * 1e3) for s in gemv) == want
    sys_.close()
    with pytest.raises(ValueError, match="make the system with timeline=True"):
        NdpSystem(1, "model", CFG).write_timeline(tmp_path / "none.json")
