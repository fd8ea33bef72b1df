"""``ndpdimm bench --suite gpu_model`` (``bench/gpu_model.py``): the folder of the shared tables
is found or refused in one line; the committed result holds every check the docs quote."""

import json
from pathlib import Path

from ndpdimm.bench.gpu_model import TABLES, profiles_folder
from ndpdimm.sw.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_a_folder_without_the_tables_is_refused_in_one_line(tmp_path, capsys):
    assert main(["bench", "--suite", "gpu_model", "--gpu-profiles", str(tmp_path),
                 "--out-dir", str(tmp_path / "out")]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "not the shared GPU profiles folder" in err
    assert not (tmp_path / "out").exists()


def test_the_shared_folder_is_found_from_the_environment(monkeypatch):
    shared = REPO.parent / "shared" / "gpu-profiles"
    monkeypatch.setenv("NDPDIMM_GPU_PROFILES", str(shared))
    assert profiles_folder() == shared
    assert all((shared / path).is_dir() for path, _ in TABLES.values())


def test_the_committed_result_holds_every_check():
    doc = json.loads((REPO / "bench/results/gpu_model.json").read_text())
    checks = [doc["rtx4090"]["self"], *doc["h100_sxm"].values(),
              *(v for k, v in doc["a100_80gb"].items() if k != "all_reduce")]
    for check in checks:
        for model in ("fitted", "roofline"):
            for kind in ("linear", "elementwise"):
                assert check[model][kind]["points"] > 0
    assert set(doc["rtx4090"]["held_out_ops"]) == {"qkv_proj", "o_proj", "gate_up_proj", "down_proj"}
    # the fit reproduces its own table far better than the roofline does
    self_ = doc["rtx4090"]["self"]
    assert self_["fitted"]["linear"]["median_abs_pct"] < 5
    assert self_["fitted"]["linear"]["median_abs_pct"] < self_["roofline"]["linear"]["median_abs_pct"]
    # the all-reduce: its fit within 2 % median of its table; 4 GPUs predicted from 2 and 8
    ar = doc["a100_80gb"]["all_reduce"]
    assert set(ar["self"]) == {"2", "4", "8"}
    assert all(v["median_abs_pct"] < 2 for v in ar["self"].values())
    assert ar["fit_2_8_check_4"]["points"] > 900 and ar["fit_2_8_check_4"]["median_abs_pct"] < 10


def test_bench_all_goes_on_without_the_shared_tables(tmp_path, monkeypatch, capsys):
    """``--suite all`` on a machine without the tables: the note, and the other suites run."""
    from ndpdimm.sw.commands import bench
    ran = []
    for suite in bench.SUITES:
        if suite != "gpu_model":
            monkeypatch.setitem(bench.SUITES, suite, lambda args, out, s=suite: ran.append(s))
    assert main(["bench", "--gpu-profiles", str(tmp_path), "--out-dir", str(tmp_path / "o")]) == 0
    assert ran == [s for s in bench.ALL if s != "gpu_model"]
    assert "gpu_model not run" in capsys.readouterr().err
    assert not (tmp_path / "o" / "gpu_model.json").exists()
