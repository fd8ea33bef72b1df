"""The measured all-reduce (sw/scenarios/measured/collectives.py), a fit carried to another card
(FittedGpu.scaled) and a hardware file's ``measured`` key (measured/gpus.py)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.measured.collectives import (
    TOLERANCE,
    AllReduceFit,
    fit_all_reduce,
    read_all_reduce,
    ring_factor,
)
from ndpdimm.sw.scenarios.measured.gpus import check_measured, fit_for, fit_path, load_fit, load_gpu
from ndpdimm.sw.scenarios.measured.tables import ProfileError

HEADER = ("idx,time_stats.all_reduce.min,time_stats.all_reduce.max,time_stats.all_reduce.mean,"
          "time_stats.all_reduce.median,time_stats.all_reduce.std,rank,num_workers,size,"
          "collective,devices_per_node,max_devices_per_node")


def _table(tmp_path, rows, header=HEADER) -> Path:
    """rows: (workers, devices_per_node, size, median_ms)."""
    lines = [header] + [f"{i},0,0,0,{t},0,0,{n},{s},all_reduce,{d},8"
                        for i, (n, d, s, t) in enumerate(rows)]
    path = tmp_path / "all_reduce.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_fit_is_monotone_keeps_one_node_and_interpolates_the_ring(tmp_path):
    rows = [(n, n, s, t) for n, base in ((2, 0.010), (4, 0.016), (8, 0.025))
            for s, t in ((2048, base * 3), (16384, base), (1 << 20, base * 4), (1 << 24, base * 40))]
    rows.append((8, 4, 2048, 9.0))                # crosses nodes: not read
    path = _table(tmp_path, rows)
    table = read_all_reduce(path)
    assert sorted(table) == [2, 4, 8] and all(len(v) == 4 for v in table.values())
    fit = fit_all_reduce(path)
    # a slow small message (noise) is lowered to the larger message's time: never less for more
    assert fit.time(2048, 4) == pytest.approx(0.016e-3)
    sizes = np.geomspace(1e3, 1e8, 60)
    for n in (2, 4, 5, 8):
        t = [fit.time(s, n) for s in sizes]
        assert all(b >= a for a, b in zip(t, t[1:])), n
    # measured points reproduced; beyond the largest message, linear in bytes
    assert fit.time(1 << 20, 8) == pytest.approx(0.100e-3)
    assert fit.time(1 << 25, 8) == pytest.approx(2 * 1.0e-3)
    # 5 GPUs: between 4 and 8 in the ring's traffic factor
    w = (ring_factor(5) - ring_factor(4)) / (ring_factor(8) - ring_factor(4))
    assert fit.time(1 << 20, 5) == pytest.approx((1 - w) * 0.064e-3 + w * 0.100e-3)
    assert fit.time(1 << 20, 1) == 0.0
    with pytest.raises(ValueError, match="all-reduce over 16 GPUs: the table .* measured 2, 4, 8"):
        fit.time(1 << 20, 16)
    assert AllReduceFit.from_dict(json.loads(json.dumps(fit.as_dict()))) == fit
    with pytest.raises(ValueError, match="not an all-reduce fit"):
        AllReduceFit.from_dict({"workers": []})


@pytest.mark.parametrize("edit, message", [
    (lambda rows, h: (rows, h.replace("time_stats.all_reduce.median", "median")),
     r":1: not an all-reduce table: missing column\(s\) time_stats.all_reduce.median"),
    (lambda rows, h: (rows[:1] + [(4, 4, 2048, -0.5)], h),
     r":3: time_stats.all_reduce.median must be a positive finite number, got '-0.5'"),
    (lambda rows, h: (rows[:1] + [(4, 4, 2048, "nan")], h), r":3: .* got 'nan'"),
    (lambda rows, h: (rows[:1] + [(4, 4, "2k", 0.1)], h), r":3: size is '2k', not a number"),
    (lambda rows, h: (rows[:1] + [(2.5, 4, 2048, 0.1)], h), r":3: num_workers must be a positive integer"),
    (lambda rows, h: ([(8, 4, 2048, 0.1)], h), r"no all-reduce inside one node"),
])
def test_a_bad_all_reduce_table_is_refused_naming_the_file_and_line(tmp_path, edit, message):
    rows, header = edit([(2, 2, 2048, 0.01), (2, 2, 4096, 0.02)], HEADER)
    path = _table(tmp_path, rows, header)
    with pytest.raises(ProfileError, match=f"{path.name}{message}" if message.startswith(":")
                       else message):
        read_all_reduce(path)
    with pytest.raises(ProfileError, match="no such all-reduce table"):
        read_all_reduce(tmp_path / "missing.csv")


def test_the_shared_a100_all_reduce_table_and_the_committed_fit_agree(gpu_profiles):
    path = gpu_profiles / "vidur/a100/network/all_reduce_dgx.csv"
    assert path.is_file(), f"{path}: the shared GPU profiles are missing"
    table = read_all_reduce(path)
    assert sorted(table) == [2, 4, 8]                         # one DGX: 2, 4 and 8 A100s
    fitted = fit_all_reduce(path)
    committed = load_fit(fit_path("a100-80gb"))
    assert committed.all_reduce, "fits/a100-80gb.json has no all-reduce (gpu-fit --all-reduce)"
    assert AllReduceFit.from_dict(committed.all_reduce).seconds == fitted.seconds
    for n, rows in table.items():
        sizes = np.array([s for s, _ in rows], float)
        measured = np.array([t for _, t in rows])
        model = np.array([fitted.time(s, n) for s in sizes])
        # the fit follows the monotone lower envelope within its 2 % tolerance: never more than
        # 2 % above a measurement, and within 2 % of the median one (noise at small sizes lowered)
        assert np.all(model <= measured * (1 + TOLERANCE + 1e-9)), n
        assert np.median(np.abs(model / measured - 1)) < TOLERANCE, n
    # a decode step's hidden vector of LLaMA2-70B (16 KB): tens of microseconds, not 2 x 5 us
    assert 10e-6 < committed.all_reduce_seconds(16384, 8) < 40e-6


def test_a_fit_carried_to_another_card_scales_bandwidth_and_flops():
    sxm = load_fit(fit_path("h100-sxm"))
    pcie = sxm.scaled("H100 PCIe", 2000 / 3350, 756 / 989.4)
    # a 1-token GEMV is memory-bound: its time grows by the bandwidth ratio; a 2048-token GEMM is
    # compute-bound: by the FLOP/s ratio
    gemv = pcie.linear_seconds(1, 14336, 4096) / sxm.linear_seconds(1, 14336, 4096)
    gemm = pcie.linear_seconds(2048, 14336, 4096) / sxm.linear_seconds(2048, 14336, 4096)
    assert gemv == pytest.approx(3350 / 2000, rel=0.02)
    assert gemm == pytest.approx(989.4 / 756, rel=0.02)
    assert pcie.gpu == "H100 PCIe" and "fit of H100 SXM5 80GB x 0.597 bandwidth" in pcie.source
    assert pcie.t_min == sxm.t_min and pcie.tile == sxm.tile
    with pytest.raises(ValueError, match="scale factors must be positive"):
        sxm.scaled("x", 0.0, 1.0)


def test_the_measured_key_picks_the_fit_or_the_roofline(tmp_path):
    rtx = load_gpu("rtx4090")
    assert fit_for(rtx).gpu == rtx.name
    assert fit_for(dataclasses.replace(rtx, measured="")) is None
    # a card of other datasheet figures gets the fit through the ratios
    slower = dataclasses.replace(rtx, name="half", memory_bandwidth_gbs=504.0)
    assert max(fit_for(slower).bw) == pytest.approx(max(fit_for(rtx).bw) / 2)
    # a fit file of this card charges as it is; of another card it is refused
    own = tmp_path / "own.json"
    own.write_text(json.dumps({"fit": load_fit(fit_path("rtx4090")).as_dict()}))
    assert fit_for(dataclasses.replace(rtx, measured=str(own))).gpu == rtx.name
    with pytest.raises(ValueError, match="that fit is of 'RTX 4090', this GPU is 'A100'"):
        fit_for(dataclasses.replace(rtx, name="A100", measured=str(own)))
    for bad, message in (("h100-pcie", "not a GPU with a committed fit"),
                         (str(tmp_path / "none.json"), "no such fit file")):
        with pytest.raises(ValueError, match=message):
            check_measured(bad)
        with pytest.raises(ValueError, match=message):
            dataclasses.replace(rtx, measured=bad)


def test_the_gpu_model_charges_the_measured_all_reduce_or_a_ring():
    a100 = load_gpu("a100-80gb")
    measured = GpuModel(a100)
    assert measured.all_reduce(16384, 8, 600.0) == load_fit(fit_path("a100-80gb")).all_reduce_seconds(16384, 8)
    ring = GpuModel(dataclasses.replace(a100, measured=""))
    want = 2 * a100.kernel_overhead_us * 1e-6 + 2 * 7 / 8 * 16384 / 600e9
    assert ring.all_reduce(16384, 8, 600.0) == pytest.approx(want)
    assert ring.all_reduce(16384, 1, 600.0) == 0.0
    with pytest.raises(ValueError, match="workers >= 1"):
        ring.all_reduce(16384, 0, 600.0)
    assert measured.source.startswith("measured fit of the A100 SXM4 80GB: ") and ring.source.startswith("roofline (")


def test_the_roofline_efficiencies_are_the_fits_sustained_rates():
    """Every GPU table that names a fit states that fit's sustained rates as its roofline
    efficiencies (the GPU catalogue, Hermes' GPU, the datacenter reference, TriMoE's GPU: the
    fractions carry to another card unchanged), so a refit that moves them fails here."""
    from ndpdimm.sw.scenarios.energy import reference_gpu
    from ndpdimm.sw.scenarios.hermes.catalog import load_hardware
    from ndpdimm.sw.scenarios.measured.gpus import FITS
    from ndpdimm.sw.scenarios.trimoe.catalog import load_trimoe_hardware
    gpus = [load_gpu(p.stem) for p in sorted(FITS.glob("*.json"))]
    gpus += [load_hardware("hermes").gpu, reference_gpu(), load_trimoe_hardware().gpu]
    for gpu in gpus:
        assert gpu.measured, gpu.name
        sustained = json.loads(fit_path(gpu.measured).read_text())["sustained"]
        for key, value in sustained.items():
            assert getattr(gpu, key) == value, (gpu.name, key)
