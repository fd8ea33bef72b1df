"""The ``ndpdimm`` command line.

Subcommands:

* ``ndpdimm demo``    the Hermes scenario with the RTL in the loop (``sw/scenarios/hermes/demo.py``);
  ``--real-layer``: a real transformer MLP layer on the GEMV engine RTL (``sw/layer/engine_demo.py``)
* ``ndpdimm bench``   performance figures as JSON (``bench/gemv.py``, ``bench/dram_gemv.py``,
  ``bench/speed.py``, ``bench/link.py``, ``sw/scenarios/hermes/bench.py``, ``sw/scenarios/trimoe/bench.py``,
  ``sw/scenarios/rapid/bench.py``, ``sw/sweep/bench.py``)
* ``ndpdimm verilog`` write the engine's Verilog for a parameter set
* ``ndpdimm export`` the core's Verilog, C header, SystemRDL and FuseSoC core file (``hw/export.py``)
* ``ndpdimm run-layer`` a real MLP layer or attention step through the driver API on the
  ``rtl`` or ``model`` backend, checked bit for bit against the golden model (``sw/layer/run.py``)
* ``ndpdimm calibrate`` fit the performance model of the ``model`` backend to RTL cycle counts
  (``cosim/model/calibrate/``)
* ``ndpdimm synth``   Yosys synthesis and the area report (``synth/command.py``)
* ``ndpdimm hermes``  the Hermes scenario: a dense LLM on a GPU + NDP-DIMMs against its baselines,
  or a sweep (``sw/scenarios/hermes/scenario.py``, ``sw/scenarios/hermes/report.py``)
* ``ndpdimm trimoe``  the TriMoE scenario: MoE layers over GPU, AMX CPU and NDP-DIMMs against
  GPU only / GPU+CPU / GPU+NDP (``sw/scenarios/trimoe/scenario.py``, ``sw/scenarios/trimoe/report.py``); ``--check``: a
  reduced MoE with every NDP expert run on the chosen backend and checked (``sw/scenarios/trimoe/check.py``)
* ``ndpdimm rapid``   the RAPID scenario: power-aware disaggregated prefill/decode LLM serving on
  an 8-GPU node under a power cap, static and dynamic configurations and an NDP-DIMM decode tier
  on one trace (``sw/scenarios/rapid/scenario.py``, ``sw/scenarios/rapid/report.py``); ``--save-trace`` / ``--trace`` write
  and replay the request trace
* ``ndpdimm reproduce hermes|trimoe|rapid|all`` each paper's evaluation set-up, our figures beside
  the published ones with ratios, explanations and sensitivity (``sw/reproduce/``)
* ``ndpdimm sweep FILE`` a design-space sweep on Dask distributed (LocalCluster or
  ``--scheduler tcp://HOST:PORT``), cached per point (``sw/sweep/run.py``, ``sw/sweep/jobs.py``)
* ``ndpdimm regress``   the RTL regression sharded over a Dask cluster, one merged pass/fail
  report (``sw/sweep/regress.py``; ``make sim SCHEDULER=tcp://HOST:PORT``)
* ``ndpdimm cache``     the shared build cache: its root and size per kind, ``--path``, ``--clear``
  (``cosim/cache.py``)

Bad arguments exit with status 2 and a one-line reason before any simulation starts.
"""

import argparse
import sys

from ndpdimm.cosim.arguments import non_negative_int, positive_int

__all__ = ["main"]


_positive = positive_int
_non_negative = non_negative_int
# ndpdimm.sw.scenarios.rapid.scenario imports torch (seconds): its choices are repeated here so that parsing stays
# fast; tests/sw/scenarios/rapid/test_report.py checks they equal rapid.MODES, PATTERNS and KV_PATHS.
RAPID_MODES = ("static", "dynamic-power", "dynamic", "all")
RAPID_PATTERNS = ("steady", "bursty")
RAPID_KV_PATHS = ("host", "p2p", "direct")
# the papers of ``ndpdimm reproduce`` (sw.reproduce.PAPERS, checked equal in tests/sw/reproduce/test_command.py)
REPRODUCE_PAPERS = ("hermes", "trimoe", "rapid", "all")


def _positive_float(text):
    """A finite number > 0 (seconds, a rate factor): a bad one exits 2 naming the option."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _timeline_argument(parser, what: str) -> None:
    parser.add_argument("--timeline", default=None, metavar="FILE",
                        help=f"also write {what} as a Chrome-trace/Perfetto JSON timeline "
                             "(open it at https://ui.perfetto.dev); its folder must exist")


def _check_timeline(args) -> None:
    """A bad --timeline path is an error before the run starts (nothing is written)."""
    if getattr(args, "timeline", None) is not None:
        from ndpdimm.cosim.timeline import check_timeline_path
        check_timeline_path(args.timeline)


def _export_parts(text):
    """A comma-separated list of ``ndpdimm export`` parts."""
    from ndpdimm.hw.export import PARTS
    parts = [t.strip() for t in text.split(",")]
    bad = [t for t in parts if t not in PARTS]
    if bad:
        raise argparse.ArgumentTypeError(f"unknown part(s) {', '.join(map(repr, bad))}; parts: "
                                         f"{', '.join(PARTS)}")
    return tuple(dict.fromkeys(parts))


def _rtl_sample_arguments(p):
    """Sampled RTL co-simulation of a scenario run (``sw/sampling/``)."""
    p.add_argument("--rtl-samples", type=_non_negative, default=0, metavar="N",
                   help="replay N of the run's NDP kernel invocations (stratified by kind) on the "
                        "RTL of the same core and print the RTL/model ratio with 95 %% intervals "
                        "beside the model's NDP time (default 0: none; the first use of a core "
                        "builds its harness: minutes at 16 units, 12+ at 256)")
    p.add_argument("--rtl-seed", type=int, default=0, help="seed of the sample (default 0)")
    p.add_argument("--rtl-workers", type=_non_negative, default=2,
                   help="Dask worker processes for the replays (default 2; 0: in this process)")


def _core_arguments(p):
    """The NDP core a scenario measures its kernels on, and on which backend."""
    p.add_argument("--units", type=_positive, default=256, help="GEMV multiplier units per NDP core")
    p.add_argument("--act-lanes", type=_positive, default=256, help="activation unit lanes")
    p.add_argument("--backend", choices=("model", "rtl"), default="model",
                   help="where NDP kernel cycles come from (rtl: the Verilated core; needs a "
                        "small --units, e.g. 16, and --act-lanes 16)")


def _rtl_sample_kwargs(args) -> dict:
    return {"rtl_samples": args.rtl_samples, "rtl_seed": args.rtl_seed,
            "rtl_workers": args.rtl_workers}


def _parser():
    p = argparse.ArgumentParser(prog="ndpdimm", description="NDP-DIMM accelerator toolkit")
    sub = p.add_subparsers(dest="command", required=True)

    d = sub.add_parser("demo", help="the Hermes scenario end to end: a reduced model's decode with "
                                    "its NDP kernels on the Verilated core, then LLaMA2-70B on the "
                                    "calibrated model against the baselines (--real-layer: a real "
                                    "MLP layer of all-MiniLM-L6-v2 on the GEMV datapath RTL)")
    d.add_argument("--real-layer", action="store_true",
                   help="run the real-layer demo instead (the options below apply to it)")
    d.add_argument("--model", default="llama2-70b", help="full-size model of the Hermes demo")
    d.add_argument("--out-dir", default="build/demo", help="Hermes demo output folder")
    d.add_argument("--rtl-samples", type=_non_negative, default=6, metavar="N",
                   help="Hermes demo step 3: replay N of a 16-unit run's NDP kernels on the RTL "
                        "(default 6; 0 skips the step)")
    d.add_argument("--units", type=_positive, default=16, help="GEMV units of the simulated engine (default 16)")
    d.add_argument("--batch", type=_positive, default=2, help="tokens per GEMV batch (default 2)")
    d.add_argument("--layer", type=int, default=3, help="transformer layer 0..5 (default 3)")
    d.add_argument("--sentence", default=None, help="input sentence")
    d.add_argument("--threshold", type=float, default=0.02,
                   help="a neuron is active if |GELU output| exceeds this for any token (default 0.02)")
    d.add_argument("--out", default="build/demo/real_layer.json", help="JSON output file")
    d.add_argument("--engine-only", action="store_true",
                   help="run the GEMV engine alone (weights fed by the bench) instead of the "
                        "datapath that streams them from the DRAM model")

    b = sub.add_parser("bench", help="performance figures from the RTL as JSON: GEMV engine "
                                     "MACs/cycle (gemv_engine) and GEMV streaming from DRAM vs the "
                                     "DIMM's peak bandwidth (dram_gemv)")
    b.add_argument("--suite", choices=("gemv_engine", "dram_gemv", "dram_trace", "cosim", "fuzz", "dimm_link", "hermes",
                                       "trimoe", "rapid", "sweep", "all"),
                   default="all",
                   help="which benchmark (default all); cosim: simulation speed of the backends "
                        "(bare Verilated loop, harness, cocotb, calibrated model) and model error "
                        "(bench/speed.py); dram_trace: 64 B address streams (weight stream, random, "
                        "stream + host reads, row gathers, a trace file) replayed through the "
                        "memory-system RTL (bench/dram_trace.py); fuzz: the descriptor fuzzer on the harness, descriptors/s, into "
                        "cosim.json's fuzz section; dimm_link: link goodput, latency and goodput "
                        "under bit errors (bench/link.py); hermes: tokens/s of every system "
                        "for every model (sw/scenarios/hermes/bench.py); trimoe: MoE layer latency of every "
                        "system per model and batch, scheduler time (sw/scenarios/trimoe/bench.py); rapid: "
                        "simulator speed on an hour at peak load and the serving results table "
                        "per workload and pattern (sw/scenarios/rapid/bench.py); sweep: Dask sweep scaling "
                        "from 1 to 2 workers and per-task overhead (sw/sweep/bench.py)")
    b.add_argument("--build-options", action="store_true",
                   help="cosim: also compare C++/Verilator build options on the reduced configuration")
    b.add_argument("--model-only", action="store_true",
                   help="cosim: rerun only the model sections against the harness runs already in "
                        "cosim.json (after a recalibration; the RTL figures are kept)")
    b.add_argument("--units", type=_positive, default=None,
                   help="GEMV units (default: the SPEC's 256)")
    b.add_argument("--k", type=_positive, default=None, help="gemv_engine: columns of the GEMVs")
    b.add_argument("--rows", type=_positive, default=None, help="dram_gemv: matrix rows (4096)")
    b.add_argument("--cols", type=_positive, default=None, help="dram_gemv: matrix columns (4096)")
    b.add_argument("--ring-beats", type=_positive, default=None,
                   help="dram_gemv: weight streamer ring depth in beats (8)")
    b.add_argument("--jobs", type=_positive, default=None,
                   help="dram_gemv, dimm_link: simulator processes run in parallel (default: CPU "
                        "count, max 4; dimm_link 2)")
    b.add_argument("--points-file", default=None,
                   help="dram_gemv: JSON list of points to run instead of the default set "
                        "(see bench/dram_gemv.py; e.g. bench/dram_gemv_points.json)")
    b.add_argument("--bursts", type=_positive, default=40000,
                   help="dram_trace: NDP bursts per generated stream (default 40000; random: half)")
    b.add_argument("--trace", default=None,
                   help="dram_trace: also replay this trace file (lines cycle,address,R|W,host|ndp)")
    b.add_argument("--policy", choices=("fair", "host_first", "ndp_first"), default="fair",
                   help="dram_trace: host/NDP arbitration policy (default fair)")
    b.add_argument("--fuzz-count", type=_positive, default=100_000,
                   help="fuzz: descriptors fuzzed (default 100000)")
    b.add_argument("--out-dir", default="bench/results", help="directory of the JSON files")

    f = sub.add_parser("fuzz", help="fuzz descriptors on the RTL harness: every completion code, "
                                    "result and memory image checked against the core's reference")
    f.add_argument("--count", type=_positive, default=10_000, help="descriptors (default 10000)")
    f.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    f.add_argument("--units", type=_positive, default=8, help="GEMV units (default 8)")
    f.add_argument("--max-batch", type=_positive, default=4, help="largest batch (default 4)")
    f.add_argument("--sram-size", type=_positive, default=16384, help="SRAM bytes (default 16384)")
    f.add_argument("--sram-banks", type=_positive, default=4, help="SRAM banks (default 4)")
    f.add_argument("--json", default=None, metavar="FILE", help="also write the counts as JSON")

    r = sub.add_parser("run-layer", help="run one real all-MiniLM-L6-v2 MLP layer or attention step "
                                         "through the host driver on a chosen backend; prints the "
                                         "result check and cycles")
    r.add_argument("--backend", choices=("rtl", "model"), default="model",
                   help="rtl: the Verilated core in the C++ harness; model: reference model + "
                        "calibrated performance model (default model)")
    r.add_argument("--layer", choices=("mlp", "attention"), default="mlp",
                   help="what to run (default mlp)")
    r.add_argument("--units", type=_positive, default=16, help="GEMV units of the core (default 16)")
    r.add_argument("--batch", type=_positive, default=2,
                   help="tokens (mlp) or queries (attention) per batch (default 2)")
    r.add_argument("--model-layer", type=int, default=3, help="transformer layer 0..5 (default 3)")
    r.add_argument("--head", type=int, default=0, help="attention head 0..11 (default 0)")
    r.add_argument("--sentence", default=None, help="input sentence")
    r.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    _timeline_argument(r, "every descriptor's start and end cycle per engine")

    from ndpdimm.cosim.model import calibrate
    c = sub.add_parser("calibrate", help="fit the performance model (model backend) to cycle counts "
                                         "of the RTL backend; writes cosim/model/calibration/<config>.json")
    calibrate.add_arguments(c)

    from ndpdimm.synth import command as synth_command
    s = sub.add_parser("synth", help="synthesize the blocks with Yosys (NanGate45) and write the "
                                     "area report (synth/reports/area.md, .json, .png)")
    synth_command.add_arguments(s)

    h = sub.add_parser("hermes", help="Hermes scenario: dense LLM decode on one GPU + NDP-DIMMs "
                                      "with activation sparsity, against its baselines")
    h.add_argument("--model", default="llama2-70b",
                   help="model name from sw/configs/models, a TOML file, or a Hugging Face config.json (or its folder: OPT, LLaMA, Mistral, Falcon) (default llama2-70b)")
    h.add_argument("--hardware", default="hermes", help="hardware name or TOML file (default hermes)")
    h.add_argument("--batch", type=_positive, default=1, help="sequences per decode step, 1..16")
    h.add_argument("--dimms", type=_positive, default=None, help="NDP-DIMMs (default: the hardware file's)")
    _core_arguments(h)
    _rtl_sample_arguments(h)
    h.add_argument("--prompt", type=_positive, default=512, help="prompt tokens (default 512)")
    h.add_argument("--tokens", type=_positive, default=64, help="decode steps simulated (default 64)")
    h.add_argument("--sample-layers", type=_positive, default=4,
                   help="distinct layers simulated; layer l replays sample l mod S (default 4)")
    h.add_argument("--active-fraction", type=float, default=0.1)
    h.add_argument("--skew", type=float, default=1.2)
    h.add_argument("--token-similarity", type=float, default=0.9)
    h.add_argument("--layer-correlation", type=float, default=0.8)
    h.add_argument("--coefficient", type=float, default=0.85, help="predictor coefficient")
    h.add_argument("--hot-share", type=float, default=None,
                   help="force this share of MLP neurons on the GPU (default: the ILP's choice)")
    h.add_argument("--cold-int8", action="store_true",
                   help="cold neurons stored in INT8 on the DIMMs (half their DRAM traffic); the "
                        "accuracy cost is measured on the reduced model")
    h.add_argument("--trace", default=None, help="replay a recorded activation trace (.npz)")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--sweep", choices=("batch", "dimms", "units", "hot_share"), default=None,
                   help="run once per value of this parameter")
    h.add_argument("--values", default=None,
                   help="comma-separated sweep values (default: batch 1..16, dimms 4,8,16, "
                        "units 32..512, hot_share 0..0.3)")
    h.add_argument("--out-dir", default="build/hermes", help="JSON and plots (default build/hermes)")
    _timeline_argument(h, "the Hermes system's decode steps (GPU, PCIe, each DIMM, DIMM-Link)")

    t = sub.add_parser("trimoe", help="TriMoE scenario: MoE layers over a GPU, an AMX CPU and "
                                      "NDP-DIMMs (hot/warm/cold experts), against GPU only, "
                                      "GPU+CPU and GPU+NDP")
    t.add_argument("--model", default="deepseek-v2",
                   help="MoE model from sw/configs/moe_models, a TOML file, or a Hugging Face config.json (or its folder: Mixtral, Qwen-MoE, DeepSeek-V2/V3) (default deepseek-v2)")
    t.add_argument("--hardware", default="h100-amx",
                   help="hardware from sw/configs/trimoe_hardware or a TOML file (default h100-amx)")
    t.add_argument("--batch", type=_positive, default=512, help="tokens per step (default 512)")
    t.add_argument("--steps", type=_positive, default=16, help="steps simulated (default 16)")
    t.add_argument("--profile-steps", type=_positive, default=8,
                   help="steps of the profiling trace that warm the EMA and GPU residency (default 8)")
    t.add_argument("--sample-layers", type=_positive, default=4, help="MoE layers simulated (default 4)")
    _core_arguments(t)
    _rtl_sample_arguments(t)
    t.add_argument("--trace", default=None, help="replay a recorded routing trace (.npz)")
    t.add_argument("--skew", type=float, default=1.0, help="Zipf exponent within each expert class")
    t.add_argument("--hot-mass", type=float, default=0.45, help="share of routed tokens to hot experts")
    t.add_argument("--temporal-correlation", type=float, default=0.9)
    t.add_argument("--alpha", type=float, default=0.3, help="EMA coefficient (default 0.3)")
    t.add_argument("--theta-hot", type=float, default=0.7,
                   help="prefetch when EMA > theta x max EMA (default 0.7)")
    t.add_argument("--link-ber", type=float, default=0.0,
                   help="DIMM-Link bit-error rate for relayouts and moves (model; default 0)")
    t.add_argument("--systems", default=None,
                   help="comma-separated subset of gpu_only,gpu_cpu,gpu_ndp,trimoe (default all)")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--check", action="store_true",
                   help="run the reduced MoE with every NDP expert executed on --backend and "
                        "checked against the golden model and torch")
    t.add_argument("--out-dir", default="build/trimoe", help="JSON and plots (default build/trimoe)")
    _timeline_argument(t, "every system's schedule per step and MoE layer (GPU, CPU, each "
                          "DIMM, PCIe, DIMM-Link)")

    q = sub.add_parser("rapid", help="RAPID scenario: power-aware disaggregated prefill/decode "
                                     "LLM serving on an 8-GPU node under a power cap, with an "
                                     "NDP-DIMM decode tier, against static configurations")
    q.add_argument("--workload", default="mixed",
                   help="built-in workload (mixed, long-context) or a .toml file (default mixed)")
    q.add_argument("--pattern", choices=RAPID_PATTERNS, default="bursty",
                   help="arrival pattern of the generated trace (default bursty)")
    q.add_argument("--mode", choices=RAPID_MODES, default="dynamic",
                   help="controlled systems run besides the static ones: dynamic-power (power "
                        "moves), dynamic (power and roles), all (both), static (none); "
                        "default dynamic")
    q.add_argument("--duration", type=_positive_float, default=600.0,
                   help="seconds of generated trace (default 600)")
    q.add_argument("--rate-scale", type=_positive_float, default=None,
                   help="multiply the workload's arrival rates (default 1; not for --trace)")
    q.add_argument("--seed", type=int, default=0, help="trace generator seed (default 0)")
    q.add_argument("--trace", default=None, metavar="FILE",
                   help="replay a recorded CSV trace instead of generating one (--workload, "
                        "--pattern and --duration then do not apply)")
    q.add_argument("--save-trace", default=None, metavar="FILE",
                   help="write the trace the run replays as CSV, then run")
    q.add_argument("--kv-path", choices=RAPID_KV_PATHS, default="direct",
                   help="how KV caches move from prefill to decode GPUs (default direct)")
    q.add_argument("--no-ndp", action="store_true", help="do not run the NDP-DIMM decode tier")
    q.add_argument("--backend", choices=("model", "rtl"), default="model",
                   help="where the NDP attention cycles come from (rtl: the Verilated core, "
                        "16 units by default; default model)")
    _rtl_sample_arguments(q)
    q.add_argument("--units", type=_positive, default=None,
                   help="GEMV units of the NDP core (default 256 on model, 16 on rtl)")
    q.add_argument("--ndp-dimms", type=_positive, default=None,
                   help="NDP-DIMMs in the node (default: the node file's, 32); their peak power "
                        "is taken out of the node budget")
    q.add_argument("--ttft-slo", type=_positive_float, default=None, metavar="SECONDS",
                   help="TTFT SLO (default: p90 TTFT of static-4p4d on the steady workload)")
    q.add_argument("--tpot-slo", type=_positive_float, default=None, metavar="SECONDS",
                   help="TPOT SLO (default 0.05)")
    q.add_argument("--model", default="llama3.1-8b",
                   help="serving model from sw/configs/serving_models or a TOML file "
                        "(default llama3.1-8b)")
    q.add_argument("--node", default="mi300x-node",
                   help="node from sw/configs/rapid or a TOML file (default mi300x-node)")
    q.add_argument("--out-dir", default="build/rapid", help="JSON and plots (default build/rapid)")
    _timeline_argument(q, "one system's run (per GPU: batches, KV transfers, role switches; "
                          "counters: power caps, queue depths)")
    q.add_argument("--timeline-system", default=None, metavar="NAME",
                   help="the system --timeline records (default: the mode's controlled system, "
                        "static-4p4d for --mode static)")

    rp = sub.add_parser("reproduce", help="run a paper's evaluation set-up and print our figures "
                                          "beside the published ones (ratio, explanation, "
                                          "sensitivity); JSON, Markdown and plots")
    rp.add_argument("paper", choices=REPRODUCE_PAPERS,
                    help="hermes, trimoe, rapid, or all three in turn")
    rp.add_argument("--out", "--out-dir", dest="out", default="build/reproduce", metavar="DIR",
                    help="folder of <paper>.json, .md and the plots (default build/reproduce)")
    rp.add_argument("--reduced", action="store_true",
                    help="a small model and short run (for tests): still a complete table and plots")

    w = sub.add_parser("sweep", help="run a design-space sweep file (scenario or RTL job over a "
                                     "grid of parameters) on Dask distributed, cached per point")
    w.add_argument("file", nargs="?", help="sweep file (.toml, .yaml); see docs/sweep.md")
    w.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (default: a LocalCluster on this machine)")
    w.add_argument("--workers", type=_positive, default=2,
                   help="LocalCluster worker processes (default 2)")
    w.add_argument("--in-process", action="store_true",
                   help="run the points one after another in this process (no Dask)")
    w.add_argument("--no-cache", action="store_true",
                   help="recompute every point (results are still written to the cache)")
    w.add_argument("--cache-dir", default="build/sweeps/cache",
                   help="point cache (default build/sweeps/cache)")
    w.add_argument("--out-dir", default=None,
                   help="results table, summary and plot (default build/sweeps/<name>)")
    w.add_argument("--list-jobs", action="store_true", help="list the jobs and their parameters")

    g = sub.add_parser("regress", help="the RTL regression sharded over a Dask cluster (one task "
                                       "per sim bench and seed, one per other test file), merged "
                                       "into one pass/fail report")
    g.add_argument("paths", nargs="*", default=["tests"], help="test paths (default tests)")
    g.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT",
                   help="an existing Dask scheduler (default: a LocalCluster on this machine)")
    g.add_argument("--workers", type=_positive, default=None,
                   help="LocalCluster worker processes (default: one per core)")
    g.add_argument("-m", dest="select", default=None, metavar="EXPR",
                   help="pytest -m expression restricting the tests")
    g.add_argument("--timeout", type=_positive_float, default=None,
                   help="seconds per shard before it counts as failed")
    g.add_argument("--out-dir", default="build/regress",
                   help="report.json and report.md (default build/regress)")

    k = sub.add_parser("cache", help="the shared build cache (Verilator, harness, native, synth, "
                                     "calibration runs): its root and size per kind")
    k_what = k.add_mutually_exclusive_group()
    k_what.add_argument("--path", action="store_true", help="print only the cache root")
    k_what.add_argument("--clear", action="store_true",
                        help="remove every kind's folder under the root (only a root ndpdimm created)")


    x = sub.add_parser("export", help="the NdpCore top's Verilog with its register map as a C "
                                      "header (ndp_regs.h), SystemRDL (ndp_regs.rdl) and a FuseSoC "
                                      "core file (ndpdimm.core), for SoC integration")
    x.add_argument("--out-dir", default="build/export", help="output folder (default build/export)")
    x.add_argument("--units", type=_positive, default=256, help="GEMV units (default 256)")
    x.add_argument("--max-batch", type=_positive, default=16, help="max batch (default 16)")
    x.add_argument("--act-lanes", type=_positive, default=16, help="activation lanes (default 16)")
    x.add_argument("--link", action="store_true", help="build DIMM-Link in")
    x.add_argument("--dram-config", default=None, metavar="TOML",
                   help="DRAM organisation and timing (default DDR4-3200)")
    x.add_argument("--what", type=_export_parts, default=None, metavar="PART,...",
                   help="which files: verilog, header, rdl, core (default all; the Verilog of the "
                        "256-unit core takes minutes)")
    x.add_argument("--force", action="store_true", help="overwrite files that exist")

    v = sub.add_parser("verilog", help="write the GEMV engine Verilog (hierarchical)")
    v.add_argument("--units", type=_positive, default=256)
    v.add_argument("--max-batch", type=_positive, default=16)
    v.add_argument("--radix-bits", type=_positive, default=1)
    v.add_argument("-o", "--output", default="-", help="file, or - for stdout")
    return p


def _calibrate(args) -> None:
    """``ndpdimm calibrate``: the command of ``cosim/model/calibrate/command.py``, with its RTL
    points and held-out streams on Dask when ``--scheduler`` or ``--jobs`` > 1."""
    from ndpdimm.cosim.model.calibrate import command
    from ndpdimm.sw.sweep.tasks import dask_runner
    sharded = args.scheduler or args.jobs > 1
    command.run(args, runner=dask_runner(args.scheduler, args.jobs) if sharded else None)


def _fuzz(args) -> int:
    """``ndpdimm fuzz``: 0 when every check passed, 1 with the failing check (and its seed)."""
    from pathlib import Path

    from tqdm import tqdm

    from ndpdimm.cosim.backend import CoreConfig
    from ndpdimm.cosim.fuzz.harness import run_fuzz
    from ndpdimm.cosim.rtl.harness import RtlBackend
    config = CoreConfig(n_units=args.units, max_batch=args.max_batch, sram_size=args.sram_size,
                        sram_banks=args.sram_banks)
    if args.json and not Path(args.json).resolve().parent.is_dir():
        raise ValueError(f"--json {args.json!r}: its folder does not exist")
    with RtlBackend(config) as backend:
        bar = tqdm(total=args.count, unit="desc", desc=f"fuzz seed {args.seed}")
        try:
            result = run_fuzz(backend, config, args.count, args.seed,
                              progress=lambda done, total: bar.update(done - bar.n))
        except AssertionError as e:
            bar.close()
            print(f"ndpdimm fuzz: FAILED: {e}", file=sys.stderr)
            return 1
        bar.close()
    print(f"{result['descriptors']} fuzzed descriptors (seed {args.seed}): every check passed; "
          f"{result['per_second']:.0f} descriptors/s, {result['ndp_cycles']} NDP cycles")
    print("codes: " + ", ".join(f"{k} {v}" for k, v in sorted(result["codes"].items())))
    if args.json:
        from ndpdimm.sw.result_files import write_json
        write_json({"config": config.as_dict(), **result}, args.json)
        print(f"wrote {args.json}")
    return 0


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        _check_timeline(args)
        if args.command == "demo" and not args.real_layer:
            if args.threshold < 0:
                raise ValueError(f"threshold must be >= 0, got {args.threshold}")
            from ndpdimm.sw.scenarios.hermes.demo import run_hermes_demo
            return run_hermes_demo(out_dir=args.out_dir, model=args.model,
                                   rtl_samples=args.rtl_samples)
        elif args.command == "demo":
            from ndpdimm.sw.layer.engine_demo import DEFAULT_SENTENCE, run_demo
            run_demo(units=args.units, batch=args.batch, layer=args.layer,
                     sentence=args.sentence or DEFAULT_SENTENCE, threshold=args.threshold,
                     out=args.out, from_dram=not args.engine_only)
        elif args.command == "bench":
            if args.suite in ("gemv_engine", "all"):
                from ndpdimm.bench.gemv import run_bench
                kw = {k: v for k, v in (("units", args.units), ("k", args.k)) if v is not None}
                run_bench(out=f"{args.out_dir}/gemv_engine.json", **kw)
            if args.suite in ("cosim", "all"):
                from ndpdimm.bench.speed import rerun_model
                from ndpdimm.bench.speed import run_bench as run_cosim_bench
                units = (args.units,) if args.units else (256, 16)
                if args.model_only:
                    rerun_model(f"{args.out_dir}/cosim.json")
                else:
                    run_cosim_bench(units=units, build_options=args.build_options,
                                    out=f"{args.out_dir}/cosim.json")
            if args.suite in ("fuzz", "all"):
                from ndpdimm.bench.speed import run_fuzz_bench
                run_fuzz_bench(args.fuzz_count, out=f"{args.out_dir}/cosim.json")
            if args.suite in ("dimm_link", "all"):
                from ndpdimm.bench.link import run_link_bench
                run_link_bench(out=f"{args.out_dir}/dimm_link.json", jobs=args.jobs or 2)
            if args.suite in ("hermes", "all"):
                from ndpdimm.sw.scenarios.hermes.bench import run_hermes_bench
                run_hermes_bench(out=f"{args.out_dir}/hermes.json")
            if args.suite in ("trimoe", "all"):
                from ndpdimm.sw.scenarios.trimoe.bench import run_trimoe_bench
                run_trimoe_bench(out=f"{args.out_dir}/trimoe.json")
            if args.suite in ("rapid", "all"):
                from ndpdimm.sw.scenarios.rapid.bench import run_rapid_bench
                run_rapid_bench(out=f"{args.out_dir}/rapid.json")
            if args.suite in ("sweep", "all"):
                from ndpdimm.sw.sweep.bench import run_sweep_bench
                run_sweep_bench(out=f"{args.out_dir}/sweep.json")
            if args.suite in ("dram_gemv", "all"):
                from ndpdimm.bench.dram_gemv import run_dram_bench
                kw = {k: v for k, v in (("units", args.units), ("rows", args.rows),
                                        ("cols", args.cols), ("ring_beats", args.ring_beats),
                                        ("jobs", args.jobs), ("points_file", args.points_file))
                      if v is not None}
                run_dram_bench(out=f"{args.out_dir}/dram_gemv.json", **kw)
            if args.suite in ("dram_trace", "all"):
                from ndpdimm.bench.dram_trace import load_trace, run_trace_bench
                if args.trace:
                    load_trace(args.trace)          # a bad file fails before any simulation
                run_trace_bench(bursts=args.bursts, trace_file=args.trace, policy=args.policy,
                                out=f"{args.out_dir}/dram_trace.json")
        elif args.command == "fuzz":
            return _fuzz(args)
        elif args.command == "run-layer":
            from ndpdimm.sw.layer.model import DEFAULT_SENTENCE
            from ndpdimm.sw.layer.run import run_layer
            result = run_layer(backend=args.backend, layer=args.layer, units=args.units,
                               batch=args.batch, model_layer=args.model_layer, head=args.head,
                               sentence=args.sentence or DEFAULT_SENTENCE, json_out=args.json,
                               progress=not args.no_progress, timeline=args.timeline)
            if not result["bit_exact_vs_golden"]:
                return 1
        elif args.command == "calibrate":
            _calibrate(args)
        elif args.command == "synth":
            from ndpdimm.synth import command as synth_command
            synth_command.run(args)
        elif args.command == "hermes":
            from ndpdimm.sw.scenarios.hermes.config import HermesConfig
            from ndpdimm.sw.scenarios.hermes.report import hermes_command
            values = None
            if args.values is not None:
                conv = float if args.sweep == "hot_share" else int
                try:
                    values = tuple(conv(v) for v in args.values.split(","))
                except ValueError:
                    raise ValueError(f"--values must be comma-separated numbers, got {args.values!r}") from None
                if args.sweep is None:
                    raise ValueError("--values needs --sweep")
            cfg = HermesConfig(model=args.model, hardware=args.hardware, batch=args.batch,
                               dimms=args.dimms, units=args.units, act_lanes=args.act_lanes,
                               backend=args.backend, prompt=args.prompt, tokens=args.tokens,
                               sample_layers=args.sample_layers,
                               active_fraction=args.active_fraction, skew=args.skew,
                               token_similarity=args.token_similarity,
                               layer_correlation=args.layer_correlation,
                               coefficient=args.coefficient, hot_share=args.hot_share,
                               cold_dtype="int8" if args.cold_int8 else "fp16",
                               seed=args.seed)
            hermes_command(cfg, out_dir=args.out_dir, sweep=args.sweep, sweep_values=values,
                           trace_file=args.trace, timeline_file=args.timeline,
                           **_rtl_sample_kwargs(args))
        elif args.command == "trimoe":
            if args.check:
                if args.timeline:
                    raise ValueError("--timeline records the scenario run, not --check")
                from ndpdimm.sw.scenarios.trimoe.check import trimoe_check_command
                result = trimoe_check_command(backend=args.backend, out_dir=args.out_dir,
                                              seed=args.seed)
                return 0 if result["ok"] else 1
            from ndpdimm.sw.scenarios.trimoe.report import trimoe_command
            from ndpdimm.sw.scenarios.trimoe.scenario import SYSTEMS, TriMoeConfig
            systems = SYSTEMS if args.systems is None else tuple(args.systems.split(","))
            cfg = TriMoeConfig(model=args.model, hardware=args.hardware, batch=args.batch,
                               steps=args.steps, profile_steps=args.profile_steps,
                               sample_layers=args.sample_layers, backend=args.backend,
                               units=args.units, act_lanes=args.act_lanes, trace=args.trace,
                               skew=args.skew, hot_mass=args.hot_mass,
                               temporal_correlation=args.temporal_correlation, alpha=args.alpha,
                               theta_hot=args.theta_hot, systems=systems, seed=args.seed,
                               link_ber=args.link_ber)
            trimoe_command(cfg, out_dir=args.out_dir, timeline_file=args.timeline,
                           **_rtl_sample_kwargs(args))
        elif args.command == "rapid":
            from ndpdimm.sw.scenarios.rapid.report import rapid_command
            from ndpdimm.sw.scenarios.rapid.scenario import RapidConfig
            if args.trace is not None and args.rate_scale is not None:
                raise ValueError("--rate-scale applies to generated traces, not to --trace "
                                 f"{args.trace!r} (it is replayed as recorded)")
            kw = {k: v for k, v in (("rate_scale", args.rate_scale),
                                    ("tpot_slo_s", args.tpot_slo)) if v is not None}
            cfg = RapidConfig(model=args.model, node=args.node, workload=args.workload,
                              pattern=args.pattern, duration_s=args.duration, seed=args.seed,
                              trace=args.trace, kv_path=args.kv_path, mode=args.mode,
                              ndp=not args.no_ndp, backend=args.backend, units=args.units,
                              ndp_dimms=args.ndp_dimms, ttft_slo_s=args.ttft_slo, **kw)
            rapid_command(cfg, out_dir=args.out_dir, save_trace=args.save_trace,
                          timeline_file=args.timeline, timeline_system=args.timeline_system,
                          **_rtl_sample_kwargs(args))
        elif args.command == "reproduce":
            from ndpdimm.sw.reproduce import PAPERS, run
            papers = tuple(PAPERS) if args.paper == "all" else (args.paper,)
            run(papers, args.out, reduced=args.reduced)
        elif args.command == "sweep":
            from ndpdimm.sw.sweep.jobs import JOBS, job_parameters
            from ndpdimm.sw.sweep.run import load_sweep, run_sweep
            if args.list_jobs:
                for name, job in JOBS.items():
                    params = ", ".join(f"{k}={d!r}" for k, (_, d) in job_parameters(name).items())
                    print(f"{name}: {job.summary}\n    {params}")
                return 0
            if args.file is None:
                raise ValueError("give a sweep file (or --list-jobs)")
            if args.scheduler and args.in_process:
                raise ValueError("--scheduler and --in-process exclude each other")
            if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://", "inproc://")):
                raise ValueError(f"--scheduler must be an address like tcp://HOST:PORT, got "
                                 f"{args.scheduler!r}")
            sweep = load_sweep(args.file)
            result = run_sweep(sweep, scheduler=args.scheduler, workers=args.workers,
                               in_process=args.in_process, cache_dir=args.cache_dir,
                               use_cache=not args.no_cache, out_dir=args.out_dir or "default")
            print(f"wrote {result.out_dir}/results.csv, results.jsonl, summary.json, sweep.png")
            return 0 if result.count("ok") == len(result.records) else 1
        elif args.command == "regress":
            from ndpdimm.sw.sweep.regress import run_regression
            if args.scheduler and not args.scheduler.startswith(("tcp://", "tls://")):
                raise ValueError(f"--scheduler must be an address like tcp://HOST:PORT, got "
                                 f"{args.scheduler!r}")
            report = run_regression(paths=tuple(args.paths), select=args.select,
                                    scheduler=args.scheduler, workers=args.workers,
                                    out_dir=args.out_dir, timeout=args.timeout)
            return 0 if report["passed"] else 1
        elif args.command == "cache":
            from ndpdimm.cosim import cache
            if args.path:
                print(cache.cache_root())
            elif args.clear:
                print(f"freed {cache.format_bytes(cache.clear_cache())}")
            else:
                print(cache.cache_report())


        elif args.command == "export":
            from ndpdimm.hw.export import PARTS, export
            params = {"n_units": args.units, "max_batch": args.max_batch,
                      "act_lanes": args.act_lanes, "link": args.link}
            for path in export(args.out_dir, what=args.what or PARTS, overwrite=args.force,
                               config_path=args.dram_config, **params):
                print(path)
        elif args.command == "verilog":
            from ndpdimm.hw.gemv.engine import engine_verilog
            text = engine_verilog(n_units=args.units, max_batch=args.max_batch,
                                  radix_bits=args.radix_bits)
            if args.output == "-":
                sys.stdout.write(text)
            else:
                with open(args.output, "w") as f:
                    f.write(text)
    except ValueError as e:
        print(f"ndpdimm {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


def console_main():
    """Entry point of the ``ndpdimm`` script."""
    sys.exit(main())


if __name__ == "__main__":
    console_main()
