"""Models from a Hugging Face ``config.json`` (``--model path/to/config.json``), read offline.

The config files are written by the test from the public configs the built-in TOML files
were made from, so a mapped config must give exactly the built-in shapes (name, source and
nominal count apart); then the folder form, and the clear errors: an architecture not
mapped, a missing field, shapes the catalogue cannot hold, a file that is not JSON.
"""

import dataclasses
import json

import pytest

from ndpdimm.sw.scenarios.catalog import CatalogError, load_model, model_from_hf_config
from ndpdimm.sw.scenarios.trimoe.catalog import load_moe_model, moe_model_from_hf_config

#: built-in name -> the public config.json's fields that matter (values from the source URLs
#: in the built-in files)
DENSE = {
    "llama2-70b": {"model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
                   "num_attention_heads": 64, "num_key_value_heads": 8, "intermediate_size": 28672,
                   "vocab_size": 32000, "max_position_embeddings": 4096, "hidden_act": "silu",
                   "tie_word_embeddings": False},
    "opt-66b": {"model_type": "opt", "hidden_size": 9216, "num_hidden_layers": 64,
                "num_attention_heads": 72, "ffn_dim": 36864, "vocab_size": 50272,
                "max_position_embeddings": 2048, "activation_function": "relu",
                "word_embed_proj_dim": 9216, "tie_word_embeddings": True},
    "falcon-40b": {"model_type": "falcon", "hidden_size": 8192, "num_hidden_layers": 60,
                   "num_attention_heads": 128, "num_kv_heads": 8, "new_decoder_architecture": True,
                   "vocab_size": 65024, "alibi": False, "max_position_embeddings": 2048},
}
MOE = {
    "deepseek-v2": {"model_type": "deepseek_v2", "hidden_size": 5120, "num_hidden_layers": 60,
                    "first_k_dense_replace": 1, "moe_layer_freq": 1, "intermediate_size": 12288,
                    "n_routed_experts": 160, "num_experts_per_tok": 6, "n_shared_experts": 2,
                    "moe_intermediate_size": 1536, "num_attention_heads": 128,
                    "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
                    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
                    "vocab_size": 102400, "tie_word_embeddings": False},
    "qwen3-235b-a22b": {"model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94,
                        "num_experts": 128, "num_experts_per_tok": 8, "moe_intermediate_size": 1536,
                        "intermediate_size": 12288, "decoder_sparse_step": 1, "mlp_only_layers": [],
                        "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
                        "vocab_size": 151936, "tie_word_embeddings": False},
    "mixtral-8x7b": {"model_type": "mixtral", "hidden_size": 4096, "num_hidden_layers": 32,
                     "num_local_experts": 8, "num_experts_per_tok": 2, "intermediate_size": 14336,
                     "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                     "tie_word_embeddings": False},
}


def write(tmp_path, fields, name="config.json"):
    path = tmp_path / name
    path.write_text(json.dumps(fields))
    return path


def same_shapes(a, b) -> dict:
    """Fields that differ, apart from what a config cannot state (name, source, nominal)."""
    skip = {"name", "source", "nominal_params_b"}
    return {f.name: (getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
            if f.name not in skip and getattr(a, f.name) != getattr(b, f.name)}


@pytest.mark.parametrize("name", sorted(DENSE))
def test_dense_config_gives_the_builtin_shapes(tmp_path, name):
    m = load_model(write(tmp_path, DENSE[name]))
    assert same_shapes(m, load_model(name)) == {}
    assert m.nominal_params_b == round(m.params / 1e9, 3) and m.source.endswith("config.json")


@pytest.mark.parametrize("name", sorted(MOE))
def test_moe_config_gives_the_builtin_shapes(tmp_path, name):
    m = load_moe_model(write(tmp_path, MOE[name]))
    assert same_shapes(m, load_moe_model(name)) == {}
    # the built-in files' nominal counts are the papers'; the derived one is the shapes' own
    assert abs(m.params / 1e9 - load_moe_model(name).nominal_params_b) < 0.03 * m.params / 1e9


def test_a_folder_holding_config_json_is_named_after_the_folder(tmp_path):
    folder = tmp_path / "my-llama"
    folder.mkdir()
    write(folder, DENSE["llama2-70b"])
    m = load_model(folder)
    assert m.name == "my-llama" and m.hidden == 8192
    moe = tmp_path / "my-moe"
    moe.mkdir()
    write(moe, MOE["mixtral-8x7b"])
    assert load_moe_model(moe).name == "my-moe"


def test_qwen2_moe_shared_expert_counts_in_routed_widths(tmp_path):
    cfg = {"model_type": "qwen2_moe", "hidden_size": 2048, "num_hidden_layers": 24,
           "num_experts": 60, "num_experts_per_tok": 4, "moe_intermediate_size": 1408,
           "shared_expert_intermediate_size": 5632, "num_attention_heads": 16,
           "num_key_value_heads": 16, "vocab_size": 151936, "decoder_sparse_step": 1,
           "mlp_only_layers": [], "tie_word_embeddings": False}
    m = moe_model_from_hf_config(write(tmp_path, cfg))
    assert (m.experts, m.top_k, m.shared_experts, m.expert_ffn) == (60, 4, 4, 1408)
    with pytest.raises(CatalogError, match="shared_expert_intermediate_size .5000. is not a multiple"):
        moe_model_from_hf_config(write(tmp_path, dict(cfg, shared_expert_intermediate_size=5000)))


@pytest.mark.parametrize("fields, loader, match", [
    (dict(DENSE["llama2-70b"], model_type="bert"), model_from_hf_config,
     "model_type 'bert' is not a dense family"),
    (MOE["mixtral-8x7b"], model_from_hf_config, "model_type 'mixtral' is not a dense family"),
    (DENSE["llama2-70b"], moe_model_from_hf_config, "model_type 'llama' is not an MoE family"),
    ({k: v for k, v in DENSE["opt-66b"].items() if k != "ffn_dim"}, model_from_hf_config,
     "has no ffn_dim"),
    ({k: v for k, v in MOE["deepseek-v2"].items() if k != "kv_lora_rank"}, moe_model_from_hf_config,
     "has no kv_lora_rank"),
    (dict(DENSE["falcon-40b"], alibi=True), model_from_hf_config, "alibi"),
    (dict(DENSE["opt-66b"], word_embed_proj_dim=512), model_from_hf_config, "word_embed_proj_dim"),
    (dict(DENSE["llama2-70b"], head_dim=256), model_from_hf_config, "head_dim .256."),
    (dict(DENSE["llama2-70b"], hidden_act="tanh"), model_from_hf_config, "activation 'tanh'"),
    (dict(MOE["deepseek-v2"], moe_layer_freq=2), moe_model_from_hf_config, "moe_layer_freq"),
    (dict(MOE["qwen3-235b-a22b"], mlp_only_layers=[3]), moe_model_from_hf_config, "mlp_only_layers"),
    (dict(MOE["mixtral-8x7b"], num_experts_per_tok=9), moe_model_from_hf_config, "top_k .9."),
])
def test_unmappable_configs_are_refused_naming_the_field(tmp_path, fields, loader, match):
    path = write(tmp_path, fields)
    with pytest.raises(CatalogError, match=match) as e:
        loader(path)
    assert str(path) in str(e.value)


def test_a_file_that_is_not_json_or_not_there(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(CatalogError, match="not a valid JSON config"):
        load_model(bad)
    with pytest.raises(CatalogError, match="no such file"):
        load_model(tmp_path / "missing.json")


def test_the_cli_takes_a_config(tmp_path):
    from ndpdimm.sw.cli import main
    bad = write(tmp_path, dict(DENSE["llama2-70b"], model_type="bert"))
    assert main(["hermes", "--model", str(bad)]) == 2
    assert main(["trimoe", "--model", str(write(tmp_path, DENSE["llama2-70b"], "dense.json"))]) == 2
