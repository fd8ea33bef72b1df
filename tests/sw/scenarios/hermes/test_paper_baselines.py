"""The Hermes paper's baselines as the reproduction sets them up: Deja Vu's MLP predictor (its
size from the paper's 'about 2 GB for LLaMA-7B', its time on the GPU) and the datacenter system
in pipeline parallel (sw/scenarios/hermes/simulate.py)."""

import pytest

from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.simulate import (
    DEJAVU_PREDICTOR_RANK,
    RunShape,
    dejavu_predictor_bytes,
    dejavu_predictor_seconds,
    pipeline_run,
)
from ndpdimm.sw.scenarios.measured.gpus import load_gpu


class _Costs:
    def __init__(self, gpu):
        self.gpu = GpuModel(load_gpu(gpu))


def test_dejavu_predictor_is_about_2_gb_for_llama_7b_and_runs_on_the_gpu():
    sh = RunShape(load_model("llama2-7b"), 1)
    assert dejavu_predictor_bytes(sh) == pytest.approx(2e9, rel=1e-3)
    c = _Costs("rtx4090")
    g = c.gpu
    want = g.linear(1, DEJAVU_PREDICTOR_RANK, sh.H).seconds + g.linear(1, sh.F, DEJAVU_PREDICTOR_RANK).seconds
    assert dejavu_predictor_seconds(c, sh) == pytest.approx(want)
    # a bigger model, a bigger predictor (rank fixed, hidden + neurons grow)
    assert dejavu_predictor_bytes(RunShape(load_model("opt-66b"), 1)) > 10e9


def test_pipeline_parallel_decode_at_batch_1_is_every_layer_in_turn():
    cfg = HermesConfig(model="llama2-70b", batch=1, prompt=16, tokens=2)
    sh = RunShape(load_model("llama2-70b"), 1)
    gpu = load_gpu("a100-40gb")
    g = GpuModel(gpu)
    d5, p5 = pipeline_run(cfg, sh, gpu, 5, 300.0)
    d1, p1 = pipeline_run(cfg, sh, gpu, 1, 300.0)
    # one sequence goes through the 5 stages in turn: no faster than one GPU holding every layer
    # (5 stages of 16 layers = the 80 layers), only the 4 hops between GPUs added
    assert d5 == pytest.approx(d1, rel=0.01) and d5 >= d1
    m = sh.model

    def layer(c):
        return (g.linear(1, sh.qkv_rows, sh.H).seconds + g.linear(1, sh.H, sh.H).seconds
                + 2 * g.linear(1, sh.F, sh.H).seconds + g.linear(1, sh.H, sh.F).seconds
                + g.attention(1, 1, c, m.heads, m.kv_heads, m.head_dim).seconds)
    head = g.linear(1, m.vocab, sh.H).seconds
    hop = sh.H * 2 / 300e9
    want = sum(5 * (16 * layer(16 + t) + hop) + head for t in range(2))
    assert d5 == pytest.approx(want)


def test_pipeline_parallel_overlaps_micro_batches():
    """At batch 16 on 5 GPUs the batch splits into 5 micro-batches: a step takes 9 stage times of
    a 4-sequence micro-batch, not 5 x 16-sequence ones (GPipe's bubble)."""
    cfg = HermesConfig(model="llama2-70b", batch=16, prompt=16, tokens=1)
    sh = RunShape(load_model("llama2-70b"), 16)
    gpu = load_gpu("a100-40gb")
    d16, _ = pipeline_run(cfg, sh, gpu, 5, 300.0)
    d1, _ = pipeline_run(HermesConfig(model="llama2-70b", batch=1, prompt=16, tokens=1),
                         RunShape(load_model("llama2-70b"), 1), gpu, 5, 300.0)
    # decode at batch 4 reads the same weights as at batch 1: 9/5 of batch 1's step, give or
    # take the micro-batch's extra compute, far below 16 steps of batch 1
    assert 1.7 * d1 < d16 < 2.5 * d1
