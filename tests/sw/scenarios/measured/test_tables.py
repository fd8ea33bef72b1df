"""The profile readers on small tables written here in each public format, on bad rows (each
refused naming the file and the line), and on the shared measured tables (``../shared``)."""

from pathlib import Path

import pytest

from ndpdimm.sw.scenarios.measured.ops import ModelDims, op_shape
from ndpdimm.sw.scenarios.measured.tables import ProfileError, read_profile, read_table

VIDUR_DIMS = "n_head,n_kv_head,n_embd,n_expanded_embd,vocab_size,use_gated_mlp"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_llmservingsim_dense_layer_and_attention_tables(tmp_path):
    dense = read_table(write(tmp_path / "d" / "dense.csv",
                             "layer,tokens,time_us\nqkv_proj,1,20.5\nact_fn,16,3.25\n"))
    assert dense.format == "llmservingsim-dense"
    assert [(o.op, o.tokens, o.tp, o.seconds, o.line) for o in dense.ops] == \
        [("qkv_proj", 1, 1, pytest.approx(20.5e-6), 2), ("act_fn", 16, 1, pytest.approx(3.25e-6), 3)]
    layer = read_table(write(tmp_path / "l" / "layers.csv", "layer_name,input,kv_cache,tp_size,"
                             "latency(ns)\nexpert.w1,64,0,2,43118\n"))
    assert layer.format == "llmservingsim-layer"
    assert (layer.ops[0].tokens, layer.ops[0].tp, layer.ops[0].seconds) == (64, 2, pytest.approx(43.118e-6))
    att = read_table(write(tmp_path / "d" / "attention.csv", "prefill_chunk,kv_prefill,n_decode,"
                           "kv_decode,time_us\n0,0,4,128,12.5\n"))
    assert att.attention[0].n_decode == 4 and att.attention[0].seconds == pytest.approx(12.5e-6)
    write(tmp_path / "d" / "meta.yaml", "profiler_version: 1.0.0\ngpu: NVIDIA GeForce RTX 4090\n")
    assert [t.gpu for t in read_profile(tmp_path / "d")] == ["NVIDIA GeForce RTX 4090"] * 2


def test_vidur_table_reads_medians_in_ms_and_the_models_dimensions(tmp_path):
    t = read_table(write(tmp_path / "v" / "mlp.csv",
                         "time_stats.mlp_up_proj.median,time_stats.mlp_up_proj.mean,"
                         f"time_stats.add.median,num_tokens,num_tensor_parallel_workers,{VIDUR_DIMS}\n"
                         "2.5,2.6,0.1,8,2,64,8,8192,28672,32768,True\n"))
    assert t.format == "vidur" and t.dims.hidden == 8192 and t.dims.gated
    assert sorted((o.op, o.tokens, o.tp, round(o.seconds * 1e3, 6)) for o in t.ops) == \
        [("add", 8, 2, 0.1), ("mlp_up_proj", 8, 2, 2.5)]
    assert op_shape("mlp_up_proj", t.dims, 2).n_out == 28672      # 2 x 28672 / 2


@pytest.mark.parametrize("text, message", [
    ("layer,tokens,time_us\nqkv_proj,1,-3\n", ":2: time_us must be a positive finite time, got '-3'"),
    ("layer,tokens,time_us\nqkv_proj,1,nan\n", ":2: time_us must be a positive finite time"),
    ("layer,tokens,time_us\nqkv_proj,1,2\nwarp_drive,1,2\n", ":3: unknown op 'warp_drive'"),
    ("layer,tokens,time_us\nqkv_proj,1.5,2\n", ":2: tokens must be a positive integer, got '1.5'"),
    ("layer,tokens,time_us\nqkv_proj,1\n", ":2: 2 fields, the header has 3"),
    ("time_stats.add.median,num_tokens\n0.1,4\n", ":1: missing column(s) n_embd, n_expanded_embd"),
    ("when,what\n1,2\n", ":1: not a profile table this reader knows"),
    ("", ":1: empty file"),
])
def test_a_bad_table_is_refused_naming_the_file_and_line(tmp_path, text, message):
    path = write(tmp_path / "bad.csv", text)
    with pytest.raises(ProfileError) as e:
        read_table(path)
    assert str(e.value).startswith(str(path)) and message in str(e.value)


def test_an_moe_op_on_a_dense_model_and_a_tp_that_does_not_divide_are_refused():
    dense = ModelDims("d", 4096, 32, 8, 14336, 32000)
    with pytest.raises(ValueError, match="MoE op, and d has no experts"):
        op_shape("expert.w1", dense)
    with pytest.raises(ValueError, match="does not divide by tensor-parallel degree 3"):
        op_shape("o_proj", dense, 3)


def test_the_shared_tables_read_whole(gpu_profiles):
    """The measured tables of ../shared/gpu-profiles (every developer and CI has them)."""
    rtx = read_profile(gpu_profiles / "llmservingsim/rtx4090/llama-3.1-8b-bf16-tp1")
    assert [(t.format, len(t.ops), len(t.attention)) for t in rtx] == \
        [("llmservingsim-attention", 0, 8643), ("llmservingsim-dense", 1368, 0)]
    assert rtx[1].gpu == "NVIDIA GeForce RTX 4090"
    (h100,) = read_profile(gpu_profiles / "vidur/h100/llama-2-70b")
    assert h100.dims.hidden == 8192 and {o.tp for o in h100.ops} == {1, 2, 4, 8}
    (mix,) = read_profile(gpu_profiles / "llmservingsim/h100/mixtral-8x7b-tp1")
    assert len(mix.ops) == 30720 and {o.op for o in mix.ops} >= {"expert.w1", "expert.w2"}
