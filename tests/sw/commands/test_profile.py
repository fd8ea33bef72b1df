"""``ndpdimm cpu-profile`` / ``gpu-profile`` (``sw/scenarios/measured/profile_ops.py``) on the CPU
device at tiny sizes: the table it writes is read back and fitted; bad requests refused."""

import json

import pytest

from ndpdimm.sw.cli import main
from ndpdimm.sw.scenarios.measured.fit import elementwise_points, fit_gpu, linear_points
from ndpdimm.sw.scenarios.measured.ops import ModelDims
from ndpdimm.sw.scenarios.measured.profile_ops import dims_from_config, profile
from ndpdimm.sw.scenarios.measured.tables import read_profile

TINY = {"hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128, "vocab": 100, "experts": 0,
        "expert_ffn": 0, "source": "test"}


def test_a_cpu_profile_is_read_back_and_fitted(tmp_path):
    rows = profile(TINY, "cpu", "bf16", (1, 2, 8), warmup=1, iterations=2, out=tmp_path / "p",
                   log=lambda *_: None)
    assert len(rows) == 3 * 8 and all(t > 0 for _, _, t in rows)
    tables = read_profile(tmp_path / "p")
    assert [t.format for t in tables] == ["llmservingsim-dense"] and tables[0].gpu
    dims = ModelDims("tiny", 64, 4, 2, 128, 100)
    assert {p[0] for p in linear_points(tables, dims)} == {"qkv_proj", "o_proj", "gate_up_proj",
                                                            "down_proj"}
    fitted = fit_gpu("cpu", "test", linear_points(tables, dims), elementwise_points(tables, dims))
    assert fitted.linear_seconds(8, 128, 64) > 0
    meta = (tmp_path / "p" / "meta.yaml").read_text()
    assert 'device: "cpu"' in meta and 'dtype: "bf16"' in meta and "statistic" in meta


def test_an_moe_config_profiles_one_experts_matrices(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 64, "num_attention_heads": 4,
                               "num_key_value_heads": 4, "intermediate_size": 256,
                               "vocab_size": 50, "num_local_experts": 4,
                               "moe_intermediate_size": 32}))
    d = dims_from_config(cfg)
    assert (d["experts"], d["expert_ffn"]) == (4, 32)
    ops = {op for op, _, _ in profile(d, "cpu", "bf16", (2,), warmup=0, iterations=1,
                                      log=lambda *_: None)}
    assert {"expert.w1", "expert.w2", "expert.w3"} <= ops and "gate_up_proj" not in ops


def test_the_command_writes_the_table_and_refuses_bad_requests(tmp_path, capsys):
    out = tmp_path / "prof"
    assert main(["cpu-profile", "--model", "llama2-7b", "--tokens", "1", "--iterations", "1",
                 "--out", str(out)]) == 0
    assert (out / "dense.csv").read_text().startswith("layer,tokens,time_us\n")
    assert "git_commit:" in (out / "meta.yaml").read_text()
    capsys.readouterr()
    assert main(["cpu-profile", "--tokens", "1,x", "--out", str(tmp_path / "b")]) == 2
    assert "--tokens must be comma-separated integers" in capsys.readouterr().err
    with pytest.raises(ValueError, match="dtype must be one of bf16, fp16"):
        profile(TINY, "cpu", "fp64", (1,))
