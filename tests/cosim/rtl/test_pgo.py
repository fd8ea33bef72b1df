"""A profile-guided harness build (``cosim/rtl/harness_build.py``, ``pgo=True``) simulates
exactly what the plain build does: on the cycle-identity workload (``bench/cycle_identity.py``:
every calibration and held-out point, in one process from reset, in a fixed order) every
point has the same status, cycles, start cycle and DRAM / engine counters, and on a driver-built
workload like the speed benchmark's (``bench/speed.py``, sized for this core's 16 KiB SRAM:
dense and gathered GEMVs, SiLU, a multiply, a softmax) every output has the same bits (the GEMVs'
those of the golden model) and every descriptor takes the same cycles. Both libraries are built in the shared cache (the
PGO one about 2.5x a plain build of this small core, once), hence ``sim``."""

import pytest
import torch

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.cosim.model import calibrate
from ndpdimm.cosim.rtl.harness import RtlBackend
from ndpdimm.cosim.rtl.harness_build import build_harness, build_record
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.dimm import Dimm

pytestmark = pytest.mark.sim

SMALL = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)
PLAIN = {"pgo": False, "cxx_flags": (), "compiler": "g++"}
PGO = {**PLAIN, "pgo": True}


@pytest.fixture(scope="module")
def libraries():
    return {name: build_harness(SMALL, progress=False, **opts) for name, opts in
            (("plain", PLAIN), ("pgo", PGO))}


def test_the_pgo_build_is_profiled_and_says_so(libraries):
    plain, pgo = (build_record(libraries[k]) for k in ("plain", "pgo"))
    assert libraries["plain"] != libraries["pgo"]
    assert "toolchain" not in plain and "pgo" not in plain
    assert pgo["toolchain"]["pgo"] is True and pgo["toolchain"]["compiler"] == "g++"
    assert pgo["pgo"]["training_seconds"] > 0 and "-fprofile-use" in pgo["pgo"]["use_flags"]
    assert list(libraries["pgo"].parent.glob("*.gcda")), "the profile the build used is kept"


def _cycle_identity(library):
    sets = calibrate.point_sets(SMALL)
    records, _ = calibrate.measure_on_rtl(SMALL, sets["calibration"] + sets["held_out"],
                                          library=library)
    # everything a point records but its wall-clock time
    return [{k: v for k, v in r.items() if "wall" not in k} for r in records]


def test_same_cycles_and_statuses_on_the_cycle_identity_workload(libraries):
    plain, pgo = (_cycle_identity(libraries[k]) for k in ("plain", "pgo"))
    assert len(plain) > 100
    assert [p["name"] for p, q in zip(plain, pgo) if p != q] == []
    assert plain == pgo


def _driver_workload(library):
    """Outputs (raw bytes), per-descriptor (opcode, status, cycles) and final cycle of a
    driver-built stream on ``library``."""
    g = torch.Generator().manual_seed(1)
    W = (torch.randn(256, 512, generator=g) / 16).half()
    x = torch.randn(2, 512, generator=g).half()
    v = torch.randn(2048, generator=g).half()
    idx = torch.randperm(256, generator=g)[:64]
    with RtlBackend(SMALL, library=library, progress=False) as backend:
        dimm = Dimm(backend)
        records = []

        def step(fn):
            out = fn()
            records.extend((d["opcode"], d["status"], d["cycles"])
                           for d in dimm.last_run.as_dict()["descriptors"])
            return out

        w = dimm.store_weights(W, Dtype.FP16)
        dense = step(lambda: dimm.gemv(w, x))
        gather = step(lambda: dimm.gemv(w, x[:1], op="row_gather", idx=idx))
        assert (golden.result_bits(dense) == golden.result_bits(golden.gemv_dot(W, x, Dtype.FP16))).all()
        assert (golden.result_bits(gather) ==
                golden.result_bits(golden.gemv_dot(W[idx], x[:1], Dtype.FP16))).all()
        outs = [dense, gather, step(lambda: dimm.activation("silu", v)),
                step(lambda: dimm.eltwise("mul", v, v)), step(lambda: dimm.softmax(v[:1024]))]
        return [o.contiguous().numpy().tobytes() for o in outs], records, backend.cycle


def test_same_results_and_cycles_on_a_driver_workload(libraries):
    plain, pgo = (_driver_workload(libraries[k]) for k in ("plain", "pgo"))
    assert len(plain[1]) >= 5 and all(status == "OK" for _, status, _ in plain[1])
    assert pgo[0] == plain[0], "outputs differ"
    assert pgo[1] == plain[1], "descriptor cycles differ"
    assert pgo[2] == plain[2]
