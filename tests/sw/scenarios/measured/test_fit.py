"""The fitted GPU model: it reproduces the table it was fitted to, interpolates monotonically,
predicts shapes it was not fitted on (a synthetic GPU with a known law), and survives JSON."""

import dataclasses
import json

import numpy as np
import pytest

from ndpdimm.sw.scenarios.measured.fit import FittedGpu, elementwise_points, fit_gpu, linear_points
from ndpdimm.sw.scenarios.measured.ops import ModelDims
from ndpdimm.sw.scenarios.measured.tables import read_profile

LLAMA31_8B = ModelDims("llama3.1-8b", 4096, 32, 8, 14336, 128256)


def synthetic(shapes, tokens):
    """Linear points of a GPU whose law is the model's own form (module docstring of
    ``fit.py``): a 6 us floor, 900 GB/s, 150 TFLOP/s on tokens padded to 64-token tiles, the
    two terms joined by the smooth maximum (ops named after the shape)."""
    pts = []
    for n, k in shapes:
        for m in tokens:
            mp = m if m <= 64 else -(-m // 64) * 64
            mem, comp = 2 * (n * k + m * k + m * n) / 900e9, 2 * mp * n * k / 150e12
            pts.append((f"{n}x{k}", 1, m, n, k, max(6e-6, (mem ** 4 + comp ** 4) ** 0.25)))
    return pts


def errors(model, points):
    m, n, k, t = (np.array([p[i] for p in points], float) for i in (2, 3, 4, 5))
    return 100 * np.abs(model.linear_seconds(m, n, k) / t - 1)


def test_a_fit_finds_the_law_and_predicts_shapes_it_was_not_fitted_on():
    tokens = [1, 2, 4, 8, 16, 32, 64, 96, 128, 192, 256, 272, 320, 384, 512, 1024, 2048]
    train = synthetic([(1024, 1024), (4096, 4096), (14336, 4096), (4096, 14336), (28672, 4096)],
                      tokens)
    # other shapes moving as many bytes as the table's (a far smaller one falls between the
    # floor-bound points and the rest: its bandwidth is interpolated, not measured)
    held = synthetic([(8192, 8192), (6144, 4096), (4096, 8192)], tokens + [48, 700, 1500])
    model = fit_gpu("synthetic", "test", train)
    assert model.tile == 64 and model.t_min == pytest.approx(6e-6)
    assert max(model.fl) == pytest.approx(150e12, rel=0.02)
    assert max(model.bw) == pytest.approx(900e9, rel=0.02)
    assert np.median(errors(model, train)) < 1 and np.median(errors(model, held)) < 2
    assert errors(model, held).max() < 10


def test_the_fit_is_monotone_in_bytes_and_tokens():
    model = fit_gpu("synthetic", "test", synthetic([(4096, 4096), (14336, 4096)],
                                                   [1, 4, 16, 64, 256, 1024]))
    assert np.all(np.diff(model.bw) >= 0) and np.all(np.diff(model.fl) >= 0)
    m = np.arange(1, 2049)
    t = model.linear_seconds(m, 8192, 8192)
    assert np.all(np.diff(t) >= -1e-15), "more tokens never take less time"


def test_a_fit_survives_json_and_refuses_a_foreign_dict(tmp_path):
    model = fit_gpu("synthetic", "test", synthetic([(4096, 4096)], [1, 64, 512]),
                    [("norm", 1, m, 4096, 2e-6 + 4 * 2 * m * 4096 / 1e12) for m in (1, 64, 512)])
    back = FittedGpu.from_dict(json.loads(json.dumps(model.as_dict())))
    assert back == model
    assert back.elementwise_seconds("norm", 64, 4096) == pytest.approx(2e-6 + 2 * 4 * 64 * 4096 / 1e12,
                                                                       rel=1e-6)
    with pytest.raises(ValueError, match="no element-wise op of class 'activation'"):
        back.elementwise_seconds("activation", 1, 1)
    with pytest.raises(ValueError, match="not a fitted GPU model"):
        FittedGpu.from_dict({"gpu": "x"})


def test_the_rtx4090_fit_reproduces_its_table(gpu_profiles):
    """Issue 44's goal on the measured RTX 4090 table: linear ops within 5 % median; the max
    (26.5 %, cuBLAS's slower kernel for gate_up_proj at 272-320 tokens) is reported in
    docs/gpu_model.md, not asserted here."""
    tables = read_profile(gpu_profiles / "llmservingsim/rtx4090/llama-3.1-8b-bf16-tp1")
    linear = linear_points(tables, LLAMA31_8B)
    model = fit_gpu("RTX 4090", "shared", linear, elementwise_points(tables, LLAMA31_8B))
    assert len(linear) == 608 and np.median(errors(model, linear)) < 5
    assert set(model.elementwise) == {"norm", "activation", "rotary", "embedding"}


def test_the_attention_fit_finds_the_decode_rate_the_corner_and_the_prefill_rate():
    """A grid made by a known law: 10 us launch, decode caches at 900 GB/s except those of at
    most 64 MB (1.2 TB/s, the cache), prefill at 100 TFLOP/s; beside a prefill chunk, decoding
    sequences cost 1.5 us each plus their caches at 300 GB/s."""
    from ndpdimm.sw.scenarios.measured.attention import attention_work, fit_attention
    from ndpdimm.sw.scenarios.measured.tables import AttentionTime
    dims = ModelDims("m", 4096, 32, 8, 14336, 32000)
    rows = []
    for c, p, n, s in ([(0, 0, n, s) for n in (1, 4, 16, 64) for s in (128, 1024, 4096, 16384)]
                       + [(c, p, 0, 0) for c in (64, 256, 1024) for p in (0, 1024)]
                       + [(c, 0, n, s) for c in (64, 256) for n in (1, 4, 16, 64)
                          for s in (16, 256, 4096)]):
        row = AttentionTime(c, p, n, s, 1.0, 0)
        b, f = attention_work(row, dims)
        if b and f:
            t = 10e-6 + 1.5e-6 * n + b / 300e9 + f / 100e12
        else:
            t = 10e-6 + b / (1.2e12 if 0 < b <= 64e6 else 900e9) + f / 100e12
        rows.append(AttentionTime(c, p, n, s, t, 0))
    fit = fit_attention(rows, dims)
    mixed = [r for r in rows if r.n_decode and r.prefill_chunk]
    assert fit.mixed_n == (1.0, 4.0, 16.0, 64.0)
    # the fixed time per count within 0.5 us (a twentieth of the launch it sits beside)
    assert fit.mixed_t0 == pytest.approx([1.5e-6 * n for n in fit.mixed_n], abs=0.5e-6)
    assert fit.mixed_bw == pytest.approx([300e9] * 4, rel=0.05)
    assert max(abs(fit.seconds(r, dims) / r.seconds - 1) for r in mixed) < 0.02
    # between measured counts the fixed time and the rate are interpolated
    between = AttentionTime(64, 0, 8, 4096, 0.0, 0)
    b, f = attention_work(between, dims)
    assert fit.seconds(between, dims) == pytest.approx(10e-6 + 12e-6 + b / 300e9 + f / 100e12, rel=0.03)
    assert fit.t0 == pytest.approx(min(r.seconds for r in rows))
    assert fit.bw == pytest.approx(900e9, rel=0.05) and fit.corner_bw == pytest.approx(1.2e12, rel=0.1)
    assert 16e6 < fit.corner_bytes <= 64e6
    err = [abs(fit.seconds(r, dims) / r.seconds - 1) for r in rows]
    assert np.median(err) < 0.05


def test_the_gpu_model_charges_the_fit_where_given():
    """``GpuModel(gpu, fitted)``: the RTX 4090's committed fit against the measured table's own
    points (a decode GEMV, a prefill GEMM, a decode attention call), the roofline without it."""
    from ndpdimm.sw.scenarios.gpu import GpuModel
    from ndpdimm.sw.scenarios.measured.gpus import fit_path, load_fit, load_gpu
    gpu, fitted = load_gpu("rtx4090"), load_fit(fit_path("rtx4090"))
    measured = GpuModel(gpu, fitted)
    roof = GpuModel(dataclasses.replace(gpu, measured=""))
    gemv = measured.linear(1, 4096, 14336)                 # down_proj, 1 token: 126.8 us measured
    assert gemv.bound == "measured" and gemv.seconds == pytest.approx(126.8e-6, rel=0.05)
    assert roof.linear(1, 4096, 14336).bound == "memory"
    # the GPU file's measured key names that fit: GpuModel(gpu) charges it unasked
    assert gpu.measured == "rtx4090" and GpuModel(gpu).linear(1, 4096, 14336) == gemv
    gemm = measured.linear(2048, 2 * 14336, 4096)          # gate_up_proj, 2048: 2896.8 us
    assert gemm.seconds == pytest.approx(2896.8e-6, rel=0.05)
    att = measured.attention(16, 1, 4096, 32, 8, 128)      # 16 sequences x 4096: 315.5 us
    assert att.bound == "measured" and att.seconds == pytest.approx(315.5e-6, rel=0.10)
    assert measured.linear(1, 4096, 14336, elem_bytes=1).bound != "measured"   # INT8: roofline
    with pytest.raises(ValueError, match="fitted must be a fitted GPU model"):
        GpuModel(gpu, fitted="rtx4090")
