"""``ndpdimm gpu-fit`` and ``ndpdimm gpu-check`` on a table written here (and on the shared RTX
4090 table): the fit's JSON, the comparison's sections, and bad input refused in one line."""

import json
from pathlib import Path

import pytest

from ndpdimm.sw.cli import main


def table(folder: Path) -> Path:
    """A dense LLMServingSim table of a Llama-3.1-8B-like layer on a made-up GPU (1 TB/s, 100
    TFLOP/s, 4 us floor), in a folder named so that the model is found from it."""
    shapes = {"qkv_proj": (6144, 4096), "o_proj": (4096, 4096), "gate_up_proj": (28672, 4096),
              "down_proj": (4096, 14336)}
    rows = ["layer,tokens,time_us"]
    for op, (n, k) in shapes.items():
        for m in (1, 4, 16, 64, 256, 1024):
            t = max(4.0, 1e6 * max(2 * (n * k + m * k + m * n) / 1e12, 2 * m * n * k / 100e12))
            rows.append(f"{op},{m},{t:.3f}")
    for m in (1, 64, 1024):
        rows.append(f"layernorm,{m},{2 + 4 * 2 * m * 4096 / 1e6:.3f}")
    path = folder / "llama-3.1-8b-bf16-tp1" / "dense.csv"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(rows) + "\n")
    return path.parent


def test_fit_then_check_writes_both_sections(tmp_path, capsys):
    profile = table(tmp_path)
    fit = tmp_path / "fit.json"
    assert main(["gpu-fit", "--profile", str(profile), "--gpu", "rtx4090", "--out", str(fit)]) == 0
    doc = json.loads(fit.read_text())
    assert doc["git_commit"] and doc["model"] == "llama3.1-8b" and doc["gpu"] == "RTX 4090"
    assert str(profile / "dense.csv") in doc["source"] and doc["fit"]["elementwise"]["norm"]
    out = tmp_path / "check.json"
    assert main(["gpu-check", "--profile", str(profile), "--gpu", "rtx4090", "--fit", str(fit),
                 "--out", str(out)]) == 0
    check = json.loads(out.read_text())
    for model in ("fitted", "roofline"):
        s = check[model]
        assert {"median_abs_pct", "max_abs_pct"} <= set(s)
        assert set(s["by_kind"]) == {"linear", "elementwise"}
        assert set(s["by_kind"]["linear"]["by_tokens"]) == {"1-16", "17-255", "256+"}
    assert check["fitted"]["by_kind"]["linear"]["median_abs_pct"] < 5
    assert check["fitted"]["by_kind"]["linear"]["points"] == 24
    text = capsys.readouterr().out
    assert "fitted:" in text and "roofline:" in text


def test_an_attention_grid_is_fitted_and_checked_by_call(tmp_path):
    """An attention.csv beside the dense table: the fit gets its attention part and the check
    reports attention (and its cache-resident corner apart) by call type."""
    profile = table(tmp_path)
    rows = ["prefill_chunk,kv_prefill,n_decode,kv_decode,time_us"]
    for n in (1, 16, 64):
        for s in (128, 4096, 16384):                  # 4 KiB of K and V per token and layer
            rows.append(f"0,0,{n},{s},{8 + n * s * 4096 / 0.9e6:.3f}")
    for c in (64, 512):
        rows.append(f"{c},0,0,0,{8 + 4 * c * (c + 1) / 2 * 4096 / 80e6:.3f}")
        rows.append(f"{c},0,4,1024,{8 + 4 * c * (c + 1) / 2 * 4096 / 80e6 + 4 * 1024 * 4096 / 0.3e6:.3f}")
    (profile / "attention.csv").write_text("\n".join(rows) + "\n")
    fit = tmp_path / "fit.json"
    assert main(["gpu-fit", "--profile", str(profile), "--gpu", "rtx4090", "--out", str(fit)]) == 0
    assert json.loads(fit.read_text())["fit"]["attention"]["bw"] > 0
    out = tmp_path / "check.json"
    assert main(["gpu-check", "--profile", str(profile), "--gpu", "rtx4090", "--fit", str(fit),
                 "--out", str(out)]) == 0
    check = json.loads(out.read_text())
    assert {"attention_decode", "attention_prefill", "attention_mixed"} <= set(check["fitted"]["by_op"])
    assert check["fitted"]["by_op"]["attention_decode"]["median_abs_pct"] < 10
    kinds = set(check["fitted"]["by_kind"])
    assert "attention" in kinds and kinds <= {"linear", "elementwise", "attention",
                                              "attention_cache_resident"}


def test_check_of_the_shared_rtx4090_table_with_the_committed_fit(tmp_path, gpu_profiles):
    """The committed fit (sw/configs/gpus/fits/rtx4090.json) against the table it came from."""
    out = tmp_path / "check.json"
    assert main(["gpu-check", "--profile", str(gpu_profiles / "llmservingsim/rtx4090/llama-3.1-8b-bf16-tp1"),
                 "--gpu", "rtx4090", "--out", str(out)]) == 0
    check = json.loads(out.read_text())
    assert check["fit"].endswith("fits/rtx4090.json")
    linear = check["fitted"]["by_kind"]["linear"]
    assert linear["points"] == 608 and linear["median_abs_pct"] < 5
    # the roofline at the card's sustained (best) rates is fast where the fit is not
    roof = check["roofline"]["by_kind"]["linear"]
    assert roof["median_pct"] < 0 and linear["median_abs_pct"] < roof["median_abs_pct"]


@pytest.mark.parametrize("argv, message", [
    (["--gpu", "tpu9"], "unknown GPU 'tpu9'"),
    (["--model", "gpt-5"], "unknown model 'gpt-5'"),
    (["--profile", "NOWHERE"], "NOWHERE: no such profile table"),
])
def test_bad_input_is_refused_in_one_line(argv, message, tmp_path, capsys):
    profile = table(tmp_path)
    base = {"--profile": str(profile), "--gpu": "rtx4090"}
    for i in range(0, len(argv), 2):
        base[argv[i]] = argv[i + 1]
    args = [x for kv in base.items() for x in kv]
    assert main(["gpu-check", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err


def test_a_bad_row_is_named_by_file_and_line(tmp_path, capsys):
    profile = table(tmp_path)
    path = profile / "dense.csv"
    path.write_text(path.read_text() + "down_proj,8,-1\n")
    assert main(["gpu-fit", "--profile", str(profile), "--gpu", "rtx4090",
                 "--out", str(tmp_path / "f.json")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:29: time_us must be a positive finite time, got '-1'" in err
    assert not (tmp_path / "f.json").exists()


def test_a_held_out_fit_leaves_the_ops_out_and_check_shows_their_error(tmp_path):
    profile = table(tmp_path)
    fit = tmp_path / "fit.json"
    assert main(["gpu-fit", "--profile", str(profile), "--gpu", "rtx4090", "--exclude-op",
                 "o_proj", "--out", str(fit)]) == 0
    doc = json.loads(fit.read_text())
    assert doc["excluded_ops"] == ["o_proj"]
    assert main(["gpu-check", "--profile", str(profile), "--gpu", "rtx4090", "--fit", str(fit),
                 "--out", str(tmp_path / "c.json")]) == 0
    by_op = json.loads((tmp_path / "c.json").read_text())["fitted"]["by_op"]
    assert by_op["o_proj"]["points"] == 6 and by_op["o_proj"]["median_abs_pct"] < 10
    assert main(["gpu-fit", "--profile", str(profile), "--gpu", "rtx4090", "--exclude-op",
                 "warp_drive"]) == 2
