"""``ndpdimm demo`` (``make demo``): the Hermes scenario end to end, RTL in the loop first.

1. **Reduced model on the RTL.** One decode step of a small ReLU LLM (2 layers,
   hidden 128, 4 heads, ffn 512; ``sw/scenarios/hermes/decode.py``) for a batch of 2
   sequences, split the Hermes way between the "GPU" (torch float32) and 2
   NDP-DIMMs served by the Verilated ``NdpCore`` (16 units; the first run
   builds it, a few minutes, then it is cached): cold QKV rows, attention over
   the KV cache, and the active cold neurons' row / column gathers all run on
   the RTL, every kernel checked bit for bit against the golden model and the
   step's output against a float64 torch forward pass. Prints the kernel
   table with the RTL's cycles; ``hermes_decode_rtl.json``.
2. **Full-size model on the calibrated model.** :func:`~ndpdimm.sw.scenarios.hermes.scenario.run`
   on the default configuration (LLaMA2-70B, batch 1, RTX 4090 + 8 NDP-DIMMs of
   256 units): every system of the comparison and the ablations, the predictor,
   the placement ILP and the imbalance; ``hermes.json`` and plots.
3. **The full-size run anchored to the RTL** (``rtl_samples`` > 0, 6 in ``make demo``): the
   same model on a 16-unit core (8 decode steps), ``rtl_samples`` of its NDP kernel
   invocations replayed on the 16-unit RTL that step 1 built (``sw/sampling/``, on a Dask
   LocalCluster of 2 workers), each bit-exact against the golden model; prints the RTL/model
   ratio per kernel kind and the NDP time re-estimated with its 95 % interval beside the
   model's; ``rtl_samples/hermes.json``. Adds about a minute (60 s measured: the 16-unit
   run and six full-size replays on two workers, 39 s of it).

Everything lands in ``out_dir`` (``build/demo``). Returns 0 when step 1 was
bit-exact and within tolerance (and step 3's replays bit-exact), 1 otherwise.
"""

import dataclasses
import time
from pathlib import Path

from ndpdimm.sw.scenarios.catalog import load_model
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.decode import run_hermes_decode
from ndpdimm.sw.scenarios.hermes.report import hermes_command

__all__ = ["run_hermes_demo"]


def run_hermes_demo(out_dir="build/demo", model="llama2-70b", batch=1, log=print,
                    rtl_samples: int = 0) -> int:
    cfg = HermesConfig(model=model, batch=batch)          # checked before the RTL build starts
    load_model(model)
    out = Path(out_dir)
    t0 = time.monotonic()
    log("== 1/2: Hermes decode of a reduced model, NDP kernels on the Verilated NdpCore ==")
    doc = run_hermes_decode("rtl", batch=2, n_dimms=2, json_out=out / "hermes_decode_rtl.json",
                            log=log)
    ok = doc["all_bit_exact"] and doc["within_tolerance"]
    log(f"NDP kernels bit-exact vs golden: {doc['all_bit_exact']}; output vs float64 torch: "
        f"relative error {doc['relative_error']:.2e} (bound {doc['tolerance']:.1e}) -> "
        f"{'PASS' if ok else 'FAIL'}  [{time.monotonic() - t0:.0f} s]")
    log("")
    steps = 3 if rtl_samples else 2
    log(f"== 2/{steps}: {model} on the calibrated model backend: Hermes against its baselines ==")
    hermes_command(cfg, out_dir=out, log=log)
    if rtl_samples:
        log("")
        log(f"== 3/3: {model} on a 16-unit core, {rtl_samples} of its NDP kernels replayed on "
            f"the 16-unit RTL ==")
        small = dataclasses.replace(cfg, units=16, act_lanes=16, tokens=8)
        r = hermes_command(small, out_dir=out / "rtl_samples", log=log, rtl_samples=rtl_samples)
        ok = ok and r.rtl_samples["bit_exact"]
    log(f"demo done in {time.monotonic() - t0:.0f} s")
    return 0 if ok else 1
