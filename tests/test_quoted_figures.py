"""The headline figures the README and ``docs/measured.md`` quote are the committed results'.

Each entry of :data:`QUOTES` names a figure, the committed JSON it comes from, how to read it
there and how the pages write it; the test formats the file's value and finds it in each page.
A rerun that changes a figure fails here until the page says the new value, so a page can no
longer quote a result that the file beside it does not hold. (The figures are read from the
files, never written here: the test holds where to look, not what to find.)
"""

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README, MEASURED, GPU = "README.md", "docs/measured.md", "docs/gpu_model.md"
GPU_BENCH = "bench/results/gpu_model.json"
CAL = "cosim/model/calibration/"


def _load(path: str) -> dict:
    return json.loads((REPO / path).read_text())


def _point(doc: dict, name: str, key: str = "name") -> dict:
    found = [p for p in doc["points"] if p[key] == name]
    assert len(found) == 1, f"{len(found)} points named {name!r}"
    return found[0]


def _run(doc: dict, model: str, batch: int) -> dict:
    found = [r for r in doc["runs"] if r["model"] == model and r["batch"] == batch]
    assert len(found) == 1, f"{len(found)} runs of {model} at batch {batch}"
    return found[0]


def _config(doc: dict, units: int) -> dict:
    found = [c for c in doc["configs"] if c["config"]["n_units"] == units]
    assert len(found) == 1, f"{len(found)} cosim configurations of {units} units"
    return found[0]


def _rapid(doc: dict, workload: str, pattern: str, system: str) -> dict:
    run = [r for r in doc["runs"] if r["workload"] == workload and r["pattern"] == pattern]
    assert len(run) == 1, f"{len(run)} RAPID runs of {workload}/{pattern}"
    return next(s for s in run[0]["systems"] if s["system"] == system)


def _figure(doc: dict, key: str) -> float:
    found = [f for f in doc["figures"] if f["key"] == key]
    assert len(found) == 1, f"{len(found)} reproduction figures keyed {key!r}"
    return found[0]["ours"]


def _core_mm2(doc: dict, part: str) -> float:
    return sum(row[f"{part}_um2"] for row in doc["core_breakdown"]) / 1e6


#: (what, pages, committed file, value read from it, how the pages write it)
QUOTES = [
    ("GEMV engine, FP16 dense batch 1 MACs/cycle", (README, MEASURED), "bench/results/gemv_engine.json",
     lambda d: _point(d, "dense FP16 B=1", "label")["macs_per_cycle"], "{:.1f}"),
    ("GEMV engine, FP16 dense batch 16 MACs/cycle", (README, MEASURED), "bench/results/gemv_engine.json",
     lambda d: _point(d, "dense FP16 B=16", "label")["macs_per_cycle"], "{:.1f}"),
    ("GEMV engine bench, simulated cycles per second", (MEASURED,), "bench/results/gemv_engine.json",
     lambda d: d["simulation"]["cycles_per_second"], "{:,.0f} cycles/s in the gemv_engine bench"),
    ("GEMV engine bench, Verilator build seconds", (MEASURED,), "bench/results/gemv_engine.json",
     lambda d: d["simulation"]["verilator_build_seconds"], "build takes {:.0f} s once"),
    ("DRAM GEMV, dense FP16 4096 x 4096 B/cycle", (README, MEASURED), "bench/results/dram_gemv.json",
     lambda d: _point(d, "dense-fp16-4096x4096")["bytes_per_cycle"], "{:.1f} B/cycle"),
    ("DRAM GEMV, dense FP16 4096 x 4096 share of peak", (README, MEASURED), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-fp16-4096x4096")["utilisation"], "{:.1f} % of peak"),
    ("DRAM GEMV, dense INT8 share of peak", (README, MEASURED), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-int8-2048x4096")["utilisation"], "{:.1f} %"),
    ("DRAM GEMV, host traffic (fair) NDP share of peak", (MEASURED,), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-fp16-256x4096-host-traffic-fair")["utilisation"], "{:.1f} % (fair"),
    ("DRAM GEMV, host traffic (host_first) NDP share of peak", (MEASURED,), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-fp16-256x4096-host-traffic-host_first")["utilisation"],
     "{:.1f} % (host_first)"),
    ("DRAM GEMV, host traffic (ndp_first) NDP share of peak", (MEASURED,), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-fp16-256x4096-host-traffic-ndp_first")["utilisation"],
     "{:.1f} % (ndp_first)"),
    ("DRAM GEMV, dense FP16 steady state", (MEASURED,), "bench/results/dram_gemv.json",
     lambda d: 100 * _point(d, "dense-fp16-4096x4096")["steady_state_utilisation"], "FP16 stream is {:.1f} %"),
    ("DRAM trace, weight stream steady state", (README, MEASURED), "bench/results/dram_trace.json",
     lambda d: 100 * _point(d, "stream")["steady_state_fraction_of_peak"], "{:.1f} %"),
    ("DRAM trace, random reads", (README, MEASURED), "bench/results/dram_trace.json",
     lambda d: 100 * _point(d, "random")["fraction_of_peak"], "{:.1f} %"),
    ("DRAM trace, stream + host reads steady state", (README, MEASURED), "bench/results/dram_trace.json",
     lambda d: 100 * _point(d, "mix")["steady_state_fraction_of_peak"], "{:.1f} %"),
    ("DRAM trace, host mean latency", (README, MEASURED), "bench/results/dram_trace.json",
     lambda d: _point(d, "mix")["host_mean_latency_ns"], "{:.0f} ns"),
    ("harness speed, 256-unit core", (README, MEASURED), "bench/results/cosim.json",
     lambda d: _config(d, 256)["harness"]["cycles_per_second"], "{:,.0f} cycles/s"),
    ("harness speed, 16-unit core", (MEASURED,), "bench/results/cosim.json",
     lambda d: _config(d, 16)["harness"]["cycles_per_second"], "{:,.0f} cycles/s"),
    ("harness against cocotb, 256 units", (MEASURED,), "bench/results/cosim.json",
     lambda d: _config(d, 256)["harness_vs_cocotb"], "{:.1f}x slower (256 units)"),
    ("harness against cocotb, 16 units", (MEASURED,), "bench/results/cosim.json",
     lambda d: _config(d, 16)["harness_vs_cocotb"], "{:.1f}x slower (16)"),
    ("model against the harness, 256 units", (MEASURED,), "bench/results/cosim.json",
     lambda d: _config(d, 256)["model_vs_harness"], "{:,.0f}x"),
    ("fuzzing, descriptors per second", (MEASURED,), "bench/results/cosim.json",
     lambda d: d["fuzz"]["descriptors_per_second"], "{:.0f} descriptors/s"),
    ("fuzzing, descriptors run with the checks", (MEASURED,), "bench/results/cosim.json",
     lambda d: d["fuzz"]["descriptors_run_incl_checks"], "{:,} descriptors run"),
    ("fuzzing, mismatches", (MEASURED,), "bench/results/cosim.json",
     lambda d: "zero" if d["fuzz"]["mismatches"] == 0 else d["fuzz"]["mismatches"], "{} mismatches"),
    ("model error, 16-unit core, held-out GEMV and activation", (README, MEASURED),
     CAL + "u16-b16-r1-ring8-sram131072x16-act16-q8-cq8-ddr4-3200.json",
     lambda d: d["summary"]["held_out_gemv_and_act"]["mean_abs_pct"], "{:.2f} %"),
    ("model error, scenarios' 256-unit core, held-out GEMV and activation", (README, MEASURED),
     CAL + "u256-b16-r1-ring8-sram131072x16-act256-q8-cq8-ddr4-3200.json",
     lambda d: d["summary"]["held_out_gemv_and_act"]["mean_abs_pct"], "{:.2f} %"),
    ("Hermes, LLaMA2-70B batch 1 tokens/s", (README, MEASURED), "bench/results/hermes.json",
     lambda d: _run(d, "llama2-70b", 1)["tokens_per_s"]["hermes"], "{:.1f} tokens/s"),
    ("Hermes, PowerInfer-like tokens/s", (README, MEASURED), "bench/results/hermes.json",
     lambda d: _run(d, "llama2-70b", 1)["tokens_per_s"]["powerinfer"], "{:.1f} PowerInfer-like"),
    ("Hermes, 5 x A100 tokens/s", (README, MEASURED), "bench/results/hermes.json",
     lambda d: _run(d, "llama2-70b", 1)["tokens_per_s"]["datacenter"], "{:.1f} on"),
    ("TriMoE, DeepSeek-V2 768 tokens, TriMoE ms", (README, MEASURED), "bench/results/trimoe.json",
     lambda d: _run(d, "deepseek-v2", 768)["moe_layer_latency_ms"]["trimoe"], "{:.1f} ms"),
    ("TriMoE, DeepSeek-V2 768 tokens, GPU+NDP ms", (README, MEASURED), "bench/results/trimoe.json",
     lambda d: _run(d, "deepseek-v2", 768)["moe_layer_latency_ms"]["gpu_ndp"], "{:.1f} GPU+NDP"),
    ("TriMoE, DeepSeek-V2 768 tokens, GPU only ms", (README, MEASURED), "bench/results/trimoe.json",
     lambda d: _run(d, "deepseek-v2", 768)["moe_layer_latency_ms"]["gpu_only"], "{:.0f} on the GPU alone"),
    ("RAPID, requests in the hour at peak load", (MEASURED,), "bench/results/rapid.json",
     lambda d: d["simulator_speed"]["requests"], "{:,} requests"),
    ("RAPID, simulator wall time for the hour", (MEASURED,), "bench/results/rapid.json",
     lambda d: d["simulator_speed"]["wall_s"], "requests) in\n{:.1f} s beside"),
    ("RAPID, mixed bursty goodput, dynamic", (MEASURED,), "bench/results/rapid.json",
     lambda d: _rapid(d, "mixed", "bursty", "dynamic")["goodput_rps"], "{:.2f} vs"),
    ("RAPID, mixed bursty goodput, static 4P4D", (MEASURED,), "bench/results/rapid.json",
     lambda d: _rapid(d, "mixed", "bursty", "static-4p4d")["goodput_rps"], "vs {:.2f} requests/s"),
    ("Hermes reproduction, LLaMA2-70B batch 1 tokens/s", (README,), "bench/results/reproduce/hermes.json",
     lambda d: _figure(d, "llama2_70b_b1_tokens_per_s"), "{:.1f} tokens/s (published 13.75)"),
    ("Hermes reproduction, speed-up over Deja Vu", (README,), "bench/results/reproduce/hermes.json",
     lambda d: _figure(d, "speedup_vs_dejavu_avg"), "{:.1f}x over the Deja Vu-like"),
    ("TriMoE reproduction, decode speed-up, lowest model", (README,), "bench/results/reproduce/trimoe.json",
     lambda d: _figure(d, "decode_speedup_min"), "{:.2f}-"),
    ("TriMoE reproduction, decode speed-up, highest model", (README,), "bench/results/reproduce/trimoe.json",
     lambda d: _figure(d, "decode_speedup_max"), "-{:.2f}x per model"),
    ("RAPID reproduction, SLO attainment ratio at peak", (README,), "bench/results/reproduce/rapid.json",
     lambda d: _figure(d, "slo_attainment_ratio_at_peak"), "{:.2f}x the static 4P4D"),
    ("RAPID reproduction, QPS/W ratio at peak", (README,), "bench/results/reproduce/rapid.json",
     lambda d: _figure(d, "qps_per_w_ratio_at_peak"), "QPS/W {:.3f}x"),
    ("area, 256-unit core at 45 nm", (README, MEASURED), "synth/reports/area.json",
     lambda d: _core_mm2(d, "logic") + _core_mm2(d, "sram"), "{:.1f} mm^2 at 45 nm"),
    ("area, bit-serial unit", (README,), "synth/reports/area.json",
     lambda d: d["multiplier_comparison"]["bit_serial_um2"], "{:,.0f} um^2"),
    ("area, bit-serial unit per FP16 lane", (README,), "synth/reports/area.json",
     lambda d: d["multiplier_comparison"]["bit_serial_um2"] / 8, "{:,.0f} um^2 per FP16 lane"),
    ("area, parallel FP16 multiplier", (README,), "synth/reports/area.json",
     lambda d: d["multiplier_comparison"]["parallel_um2"], "against {:,.0f} for"),
    ("area, bit-serial unit per FP16 product per cycle", (README,), "synth/reports/area.json",
     lambda d: d["multiplier_comparison"]["bit_serial_um2_per_product_per_cycle"], "{:,.0f} um^2"),
    ("RTX 4090 fit, linear ops, median and max", (GPU,), GPU_BENCH,
     lambda d: (d["rtx4090"]["self"]["fitted"]["linear"]["median_abs_pct"],
                d["rtx4090"]["self"]["fitted"]["linear"]["max_abs_pct"]), "| all 608 | {0[0]:.2f} % / {0[1]:.1f} %"),
    ("RTX 4090 roofline, linear ops, prefill", (GPU,), GPU_BENCH,
     lambda d: tuple(d["rtx4090"]["self"][m]["linear"]["by_tokens"]["256+"][k]
                     for m, k in (("fitted", "median_abs_pct"), ("fitted", "max_abs_pct"),
                                  ("roofline", "median_abs_pct"))),
     "| 256+ tokens (prefill) | {0[0]:.2f} % / {0[1]:.1f} % | {0[2]:.1f} %"),
    ("RTX 4090 fit, decode GEMVs", (GPU,), GPU_BENCH,
     lambda d: d["rtx4090"]["self"]["fitted"]["linear"]["by_tokens"]["1-16"]["median_abs_pct"],
     "| 1-16 tokens (decode) | {:.2f} %"),
    ("H100 fit on Mixtral, checked on Llama-2-70B", (GPU,), GPU_BENCH,
     lambda d: d["h100_sxm"]["fit_mixtral_check_llama2_70b"]["fitted"]["linear"]["median_abs_pct"],
     "| Mixtral-8x7B | Llama-2-70B (Vidur) | {:.1f} %"),
    ("RTX 4090 attention, decode calls outside the cache corner", (GPU,), GPU_BENCH,
     lambda d: tuple(d["rtx4090"]["self"]["fitted"]["attention"]["by_op"]["attention_decode"][k]
                     for k in ("points", "median_abs_pct", "max_abs_pct", "median_pct")),
     "| decode only, outside the corner ({0[0]}) | {0[1]:.2f} % / {0[2]:.1f} % ({0[3]:+.2f} %)"),
    ("A100 fit at TP 1, 2, 4 checked at 8", (GPU,), GPU_BENCH,
     lambda d: d["a100_80gb"]["fit_tp124_check_tp8"]["fitted"]["linear"]["median_abs_pct"],
     "checked at\n8: {:.2f} %"),
]


@pytest.mark.parametrize("what, pages, path, read, form", QUOTES, ids=[q[0] for q in QUOTES])
def test_page_quotes_the_committed_figure(what, pages, path, read, form):
    text = form.format(read(_load(path)))
    for page in pages:
        assert text in (REPO / page).read_text(), \
            f"{page} does not say {text!r} ({what}, from {path}): update the page from the file"


def test_a_changed_figure_is_caught():
    """The check is not vacuous: the same figure one digit off is not in the page."""
    doc = _load("bench/results/dram_gemv.json")
    value = 100 * _point(doc, "dense-fp16-4096x4096")["utilisation"] + 0.1
    assert f"{value:.1f} % of peak" not in (REPO / README).read_text()
