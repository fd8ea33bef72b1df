"""Replays of sampled RTL co-simulation (``sw/sampling/replay.py``, the kernels' ``Shape.run``)
and ``--rtl-samples`` end to end: every kernel kind replayed on the RTL of the 8-unit test core
bit for bit against the golden model (and a flipped bit caught), each recipe deterministic on
the model, the Dask path, the JSON block as written, and a reduced Hermes run whose sample is
replayed on the RTL."""

import json

import pytest
import torch

import ndpdimm.sw.sampling.replay as replay_module
from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.cosim.provenance import without
from ndpdimm.sw.cli import main
from ndpdimm.sw.kernels import KINDS, shape
from ndpdimm.sw.result_files import write_json
from ndpdimm.sw.sampling.record import KernelLog
from ndpdimm.sw.sampling.replay import format_rtl_check, replay_one, rtl_check, same_bits
from ndpdimm.sw.scenarios.base import RunContext
from ndpdimm.sw.scenarios.catalog import CONFIG_DIR
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.scenario import run

CORE = CoreConfig(n_units=8, max_batch=4, sram_size=16384, sram_banks=4)   # the test core

SHAPES = {"cold_mlp": {"k": 12, "pool": 40, "hidden": 128, "batch": 2, "dtype": "fp16",
                       "gated": True},
          "qkv_dense": {"rows": 24, "hidden": 128, "batch": 3},
          "attention": {"context": 40, "head_dim": 32, "group": 2},
          "expert": {"hidden": 64, "ffn": 32, "tokens": 5, "dtype": "float16"}}

# a gated model small enough for the 16 KiB SRAM of the test core
TINY_GATED = """name = "tiny-gated"
source = "test model (tests/sw/sampling/test_replay.py)"
nominal_params_b = { value = 0.00062, source = "test" }
hidden = { value = 128, source = "test" }
layers = { value = 2, source = "test" }
heads = { value = 4, source = "test" }
kv_heads = { value = 2, source = "test" }
ffn = { value = 512, source = "test" }
vocab = { value = 1000, source = "test" }
max_positions = { value = 512, source = "test" }
learned_positions = false
mlp = "gated"
activation = "silu"
tied_embeddings = true
"""


def _quiet(*_):
    pass


def test_same_bits_sees_nan_payloads_and_signed_zeros():
    a = torch.tensor([0.0, float("nan")])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([-0.0, float("nan")]))
    assert not same_bits(a, a.half())
    assert same_bits(torch.tensor([3, 4]), torch.tensor([3, 4]))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_recipe_is_bit_exact_on_the_rtl(kind):
    """Each kernel kind replayed on the RTL backend of the test core (the Verilated core in the
    C++ harness) returns the golden model's results bit for bit (about 0.1 s a kind)."""
    r = replay_one(shape(kind, SHAPES[kind]), 3, CORE, backend="rtl")
    assert r["outputs_checked"] >= 1 and r["bit_exact"], r
    assert r["rtl_backend_cycles"] > 0 and r["model_backend_cycles"] > 0


def test_a_flipped_bit_on_the_rtl_side_is_not_bit_exact(monkeypatch):
    """The comparison can fail: one bit of the RTL's first result flipped is seen."""
    real = replay_module.replay

    def flip_on_the_rtl(dimm, shape_, seed, *part):
        cycles, results = real(dimm, shape_, seed, *part)
        if dimm.name == "rtl":
            first = results[0].clone()
            bits = first.view({2: torch.int16, 4: torch.int32}[first.element_size()])
            bits.view(-1)[0] ^= 1
            results = [first, *results[1:]]
        return cycles, results

    monkeypatch.setattr(replay_module, "replay", flip_on_the_rtl)
    r = replay_one(shape("qkv_dense", SHAPES["qkv_dense"]), 3, CORE, backend="rtl")
    assert r["outputs_checked"] == 1 and not r["bit_exact"]


def test_every_recipe_replays_and_is_deterministic_on_the_model():
    """On the model backend both sides of a replay are the golden model: ``bit_exact`` here
    says two fresh DIMMs gave the same results, and the cycles repeat."""
    assert set(SHAPES) == set(KINDS)
    for kind, p in SHAPES.items():
        a = replay_one(shape(kind, p), 3, CORE, backend="model")
        b = replay_one(shape(kind, p), 3, CORE, backend="model")
        assert a["bit_exact"] and a["outputs_checked"] >= 1
        assert a["rtl_backend_cycles"] == a["model_backend_cycles"] == b["model_backend_cycles"] > 0


@pytest.mark.parametrize("pool", [None, 11, 12.0, True])
def test_a_cold_mlp_replay_needs_its_pool(pool):
    p = {k: v for k, v in SHAPES["cold_mlp"].items() if k != "pool"}
    if pool is not None:
        p["pool"] = pool
    with pytest.raises(ValueError, match="pool"):
        replay_one(shape("cold_mlp", p), 0, CORE, backend="model")


def test_a_cold_mlp_replay_draws_from_its_pool():
    """The pool is what the up rows are stored as: another pool, another gather."""
    small = replay_one(shape("cold_mlp", SHAPES["cold_mlp"]), 3, CORE, backend="model")
    large = replay_one(shape("cold_mlp", {**SHAPES["cold_mlp"], "pool": 400}), 3, CORE, backend="model")
    assert small["bit_exact"] and large["bit_exact"]
    assert small["model_backend_cycles"] != large["model_backend_cycles"]


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="'gemm'"):
        replay_one(shape("gemm", {}), 0, CORE, backend="model")


def test_the_dask_path_gives_every_sample():
    log = KernelLog()
    log.add(shape("qkv_dense", SHAPES["qkv_dense"]), 1000.0, count=4)
    log.add(shape("attention", SHAPES["attention"]), 2000.0, count=8)
    r = rtl_check(log, 4, seed=1, core=CORE, backend="model", workers=2, say=_quiet)
    assert r["replayed"] == 4 and r["errors"] == 0 and r["bit_exact"]
    for k in ("qkv_dense", "attention"):
        assert r["kinds"][k]["n"] == 2
        assert r["kinds"][k]["ratio_vs_model_backend"]["mean"] == 1.0
    assert r["ndp_time"]["model_cycles"] == 4 * 1000 + 8 * 2000


def test_a_reduced_hermes_run_replays_its_sample_on_the_rtl(tmp_path, capsys):
    model = tmp_path / "tiny.toml"
    model.write_text(TINY_GATED)
    hw = tmp_path / "tiny_gpu.toml"
    hw.write_text((CONFIG_DIR / "hardware" / "hermes.toml").read_text()
                  .replace("memory_gb = { value = 24.0,", "memory_gb = { value = 0.002,"))
    cfg = HermesConfig(model=str(model), hardware=str(hw), tokens=4, prompt=32, profile_tokens=16,
                       sample_layers=2, gpu_reserve_gb=0.0, group=64)
    kernels = KernelLog()
    r = run(cfg, RunContext(log=_quiet, rtl_samples=2, rtl_seed=5, rtl_workers=0, kernels=kernels),
            core=CORE).as_dict()
    # each cold-MLP invocation records its DIMM's cold neurons of the layer, which the cost
    # line was measured at (their upper median) and its replay draws from
    pools = [e.params["pool"] for e in kernels.entries("cold_mlp")]
    assert pools and all(e.params["k"] <= e.params["pool"] <= 512
                         for e in kernels.entries("cold_mlp"))
    assert min(pools) <= r["costs"]["neuron"]["pool"] <= max(pools)
    s = r["rtl_samples"]
    assert s["backend"] == "rtl" and s["core"] == CORE.as_dict() and s["n"] == 2
    assert s["replayed"] == 2 and s["bit_exact"], s
    assert set(s["kinds"]) == set(r["ndp_kernels"]["kinds"]) >= {"cold_mlp", "attention"}
    assert sum(k["n"] for k in s["kinds"].values()) == 2
    # the charged cycles are the Hermes system's NDP busy time
    assert s["ndp_time"]["model_seconds"] == pytest.approx(r["ndp_kernels"]["ndp_busy_seconds"])
    for sample in s["samples"]:
        assert sample["ratio"] == sample["rtl_backend_cycles"] / sample["model_cycles"]
    text = format_rtl_check(s)
    assert "RTL/model ratio" in text and "NDP kernel time" in text


def test_rtl_samples_with_a_sweep_is_refused(capsys):
    assert main(["hermes", "--sweep", "batch", "--rtl-samples", "2"]) == 2
    assert "--rtl-samples" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["hermes", "--rtl-samples", "-1"], ["trimoe", "--rtl-samples", "x"],
                                  ["rapid", "--rtl-workers", "-2"]])
def test_bad_rtl_sample_options_exit_2(argv, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and "expected an int >= 0" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["hermes", "--rtl-sub-cycles", "0"], "expected a positive number"),
    (["trimoe", "--rtl-allocation", "optimal"], "invalid choice"),
    (["hermes", "--rtl-model-draws", "-3"], "expected an int >= 0"),
])
def test_bad_sample_design_options_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2 and message in capsys.readouterr().err


def test_one_full_replay_with_sub_sampling_is_refused_before_any_run(capsys):
    """The correction's interval needs two whole replays per kind: ``--rtl-full 1`` is an error
    (exit 2) before the scenario runs."""
    assert main(["hermes", "--rtl-samples", "2", "--rtl-sub-cycles", "1000", "--rtl-full", "1"]) == 2
    err = capsys.readouterr()
    assert "two full replays" in err.err and "OPERATING POINT" not in err.out


def test_a_replay_after_a_stream_starts_from_a_running_state():
    """``before``: the preceding invocation runs first on the same DIMM, untimed; the replay's
    results stay bit-exact and its cycles are its own (within a few per cent of a start from
    reset, not the stream's added on)."""
    q, d = shape("qkv_dense", GROUPED["qkv_dense"]), shape("cold_mlp", GROUPED["cold_mlp"])
    cold = replay_one(q, 3, CORE, backend="rtl")
    warm = replay_one(q, 3, CORE, backend="rtl", before=((d, 5, None),))
    alone = replay_one(d, 5, CORE, backend="rtl")
    assert warm["bit_exact"] and cold["bit_exact"]
    assert abs(warm["rtl_backend_cycles"] / cold["rtl_backend_cycles"] - 1) < 0.1
    assert warm["rtl_backend_cycles"] < cold["rtl_backend_cycles"] + alone["rtl_backend_cycles"] / 2


def test_the_json_block_is_written(tmp_path):
    """The block as a scenario writes it: read back equal, no NaN or infinity (one sample per
    kind: its interval is null), the per-kind and NDP-time figures consistent."""
    log = KernelLog()
    log.add(shape("qkv_dense", SHAPES["qkv_dense"]), 1000.0, count=2)
    log.add(shape("attention", SHAPES["attention"]), 2000.0, count=1)
    r = rtl_check(log, 2, seed=0, core=CORE, backend="model", workers=0, say=_quiet)
    path = write_json(r, tmp_path / "rtl_samples.json")

    def refuse(constant):
        raise ValueError(f"{constant} written in {path}")

    back = json.loads(path.read_text(), parse_constant=refuse)
    assert without(back) == r and back["git_commit"] and back["date"]    # provenance in front
    assert back["backend"] == "model" and back["core"] == CORE.as_dict()
    assert back["n"] == back["replayed"] == 2 and back["errors"] == 0 and back["bit_exact"]
    assert sorted(s["kind"] for s in back["samples"]) == ["attention", "qkv_dense"]
    ndp = 0.0
    for k, cycles in (("qkv_dense", 2000.0), ("attention", 2000.0)):
        e = back["kinds"][k]
        assert e["model_cycles"] == cycles and e["n"] == 1
        assert e["ratio"]["half_width"] is None            # one sample: no interval
        (sample,) = [s for s in back["samples"] if s["kind"] == k]
        assert e["ratio"]["mean"] == sample["ratio"] == sample["rtl_backend_cycles"] / (cycles / e["invocations"])
        ndp += cycles * e["ratio"]["mean"]
    assert back["ndp_time"]["model_cycles"] == 4000.0
    assert back["ndp_time"]["rtl_cycles"] == pytest.approx(ndp)


# shapes of several groups each on the test core
GROUPED = {"cold_mlp": {"k": 100, "pool": 128, "hidden": 128, "batch": 2, "dtype": "fp16", "gated": True},
           "qkv_dense": {"rows": 200, "hidden": 128, "batch": 3},
           "expert": {"hidden": 64, "ffn": 192, "tokens": 9, "dtype": "float16"}}


@pytest.mark.parametrize("kind", sorted(GROUPED))
def test_a_subset_of_groups_is_bit_exact_on_the_rtl_and_every_group_is_the_whole(kind):
    """A sub-sampled replay (first and last group after a warm-up group) is bit-exact on the RTL
    and shorter than the whole; listing every group issues the same stream as the whole (equal
    cycles and bits on the model)."""
    from ndpdimm.sw.driver.dimm import Dimm
    from ndpdimm.sw.kernels import replay
    from ndpdimm.sw.sampling.subsample import Plan
    s = shape(kind, GROUPED[kind])
    g = s.groups(CORE.max_batch)
    assert g >= 3
    part = replay_one(s, 3, CORE, backend="rtl", plan=Plan(g, (0, g - 1), (1,)))
    whole = replay_one(s, 3, CORE, backend="rtl")
    assert part["bit_exact"] and whole["bit_exact"]
    assert part["rtl_backend_cycles"] < whole["rtl_backend_cycles"]
    with Dimm("model", CORE, functional=True) as d:
        a = replay(d, s, 3, tuple(range(g)))
    with Dimm("model", CORE, functional=True) as d:
        b = replay(d, s, 3)
    assert a[0] == b[0] == whole["model_backend_cycles"]
    assert all(same_bits(x, y) for x, y in zip(a[1], b[1]))


def test_a_sub_sampled_run_on_the_rtl_covers_the_whole_replays():
    """Row gathers of 160-288 neurons on the test core, charged the model's cycles off by -10 to
    +10 % (a cost line's spread): the two-phase estimate from sub-sampled RTL draws (about a
    third of each invocation after a warm-up group, three whole replays for the correction,
    24 model draws) has an interval that holds the estimate from 8 whole replays, seed 4."""
    from ndpdimm.sw.sampling.replay import model_one
    from ndpdimm.sw.sampling.stats import Design
    log = KernelLog()
    for i, k in enumerate((160, 192, 224, 256, 288)):
        s = shape("cold_mlp", {"k": k, "pool": 320, "hidden": 128, "batch": 1, "dtype": "fp16",
                               "gated": True})
        log.add(s, model_one(s, 0, CORE)["model_backend_cycles"] * (0.9 + 0.05 * i), count=2)
    target = 0.3 * min(e.cycles_each for e in log.entries())
    sub = rtl_check(log, 6, seed=4, core=CORE, backend="rtl", workers=0, say=_quiet,
                    design=Design(sub_cycles=target, full=3, model_draws=24))
    whole = rtl_check(log, 8, seed=4, core=CORE, backend="rtl", workers=0, say=_quiet)
    e = sub["kinds"]["cold_mlp"]["ratio"]
    assert sub["bit_exact"] and whole["bit_exact"] and sub["full_replays"] == 3
    assert e["n1"] == 24 and e["n2"] == 6 and e["sub_sampled"] == 6 and e["correction"]["n"] == 3
    assert all(len(s["plan"]["groups"]) < s["plan"]["n_groups"] for s in sub["samples"]
               if s["role"] == "rtl")
    w = whole["kinds"]["cold_mlp"]["ratio"]["mean"]
    assert e["low"] <= w <= e["high"], (e, w)
    assert sub["ndp_time"]["low"] <= whole["ndp_time"]["rtl_cycles"] <= sub["ndp_time"]["high"]
