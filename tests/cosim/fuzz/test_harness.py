"""The descriptor fuzzer on the C++ harness (``cosim/fuzz/harness.py``): a long run, and proof its checks can fail.

The small core of the harness tests (8 GEMV units, 16 KiB SRAM, cached build). ``make test``
fuzzes 10^4 descriptors with one seed; ``make sim`` (marker ``sim``) 10^5 each with two more.
A failure's message starts with the seed (``fuzz seed N: ...``), and the seed is in the test id.
"""

import pytest

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.fuzz.harness import HarnessFuzzer, run_fuzz
from ndpdimm.cosim.fuzz.plan import OUT_AREA, WINDOW
from ndpdimm.cosim.rtl.harness import RtlBackend
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)


def _fuzz(count, seed):
    with RtlBackend(SMALL) as backend:
        result = run_fuzz(backend, SMALL, count, seed)
    assert result["descriptors"] == count
    # both outcomes, every kind of rejection the mutator aims at, and valid GEMVs and DMAs ran
    for code in ("OK", "BAD_FIELD", "MISALIGNED", "DRAM_RANGE", "SRAM_RANGE", "BAD_INDEX", "BAD_OPCODE"):
        assert result["codes"].get(code, 0) > 0, (seed, result["codes"])
    assert result["stats"]["ran GEMV"] > 0 and result["stats"]["ran DMA"] > 0, (seed, result["stats"])
    return result


@pytest.mark.parametrize("seed", [1])
def test_fuzz_ten_thousand_descriptors(seed):
    r = _fuzz(10_000, seed)
    # the windows the run switched between include the wrap-around and past-the-DIMM ones
    windows = [k for k in r["stats"] if k.startswith("window")]
    assert any("0xffffffffffffffc0" in w for w in windows), windows


@pytest.mark.sim
@pytest.mark.parametrize("seed", [2, 3])
def test_fuzz_hundred_thousand_descriptors(seed):
    _fuzz(100_000, seed)


@pytest.fixture
def fuzzer():
    with RtlBackend(SMALL) as backend:
        fz = HarnessFuzzer(backend, SMALL, seed=7)
        backend.csr_write("CTRL", 1)
        fz.set_window(*WINDOW)
        fz.init_memories()
        yield fz


def _dma_out(fz, n=256):
    return fz.word(Opcode.DMA, fz.dma_fields(1, OUT_AREA[0], 0, n))


def test_a_wrong_prediction_fails(fuzzer):
    d = fuzzer.evaluate(fuzzer.word(Opcode.DMA, fuzzer.dma_fields(1, OUT_AREA[0] + 16, 0, 256)))
    assert d.want == Status.MISALIGNED
    d.want = Status.OK                      # the checker is told the wrong code
    with pytest.raises(AssertionError, match=r"fuzz seed 7: .*MISALIGNED"):
        fuzzer.run_batch([d])


def test_a_differing_dram_byte_fails(fuzzer):
    fuzzer.run_now(Opcode.DMA, fuzzer.dma_fields(1, OUT_AREA[0], 0, 256), "DMA out")
    fuzzer.compare_dram()
    a = OUT_AREA[0] + 100
    fuzzer.ref.dram.write(a, bytes([fuzzer.ref.dram.read(a, 1)[0] ^ 0x40]))
    with pytest.raises(AssertionError, match=f"DRAM at {a:#x}"):
        fuzzer.compare_dram()


def test_a_stray_page_anywhere_fails(fuzzer):
    fuzzer.compare_dram()
    fuzzer.backend.load(3 << 30, b"\x01")   # a write the model never saw, far from every area
    with pytest.raises(AssertionError, match="touched pages"):
        fuzzer.compare_dram()


def test_a_differing_sram_byte_fails(fuzzer):
    fuzzer.check_sram()
    fuzzer.ref.sram[5] ^= 1
    with pytest.raises(AssertionError, match="SRAM at 0x5"):
        fuzzer.check_sram()


def test_a_rejected_descriptor_that_touches_dram_fails(fuzzer):
    d = fuzzer.commit(fuzzer.evaluate(_dma_out(fuzzer)))   # valid: it writes DRAM
    with pytest.raises(AssertionError, match="rejected descriptors touched DRAM"):
        fuzzer.flush([d])


def test_bad_count_is_refused():
    with pytest.raises(ValueError, match="count must be a positive integer, got 0"):
        run_fuzz(None, SMALL, 0, 1)
