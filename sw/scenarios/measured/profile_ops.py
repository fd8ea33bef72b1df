"""Time one transformer layer's operators on a torch device and write them as a profile table.

A plain script: it needs torch and the standard library only, so that it runs on a GPU machine
where nothing else is installed (copy this one file there), and it also runs on the CPU device
(``ndpdimm cpu-profile``; the tests run it at tiny sizes). It writes, into ``--out DIR``:

* ``dense.csv`` in LLMServingSim's format (``layer,tokens,time_us``), read back by
  ``sw/scenarios/measured/tables.py``: the linear ops ``qkv_proj``, ``o_proj``,
  ``gate_up_proj``, ``down_proj`` (an MoE model: ``expert.w1``, ``expert.w3``, ``expert.w2``
  of one expert instead of the dense MLP) and the element-wise ``layernorm`` (RMS norm),
  ``act_fn`` (SiLU and multiply), ``rotary_emb`` and ``embedding``, at each token count;
* ``meta.yaml``: the device's name, torch and CUDA versions, the dtype, the model's
  dimensions and where they came from, the timing method, iterations and the date.

Timing: after ``--warmup`` calls, ``--iterations`` calls each timed alone (CUDA events around
the call on a GPU; ``time.perf_counter`` around it on the CPU); the median is written. The
weights are random (timing does not depend on values).

Usage::

    python profile_ops.py --config config.json --device cuda --out rtx4090-llama2-7b
    python profile_ops.py --dims 4096,32,32,11008,32000 --device cpu --tokens 1,4,16 --out cpu
"""

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from pathlib import Path

TOKENS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)
#: 16-bit only: the fit (``fit.py``) counts 2 bytes an element, as the public tables are
DTYPES = ("bf16", "fp16")


def dims_from_config(path) -> dict:
    """The dimensions of a Hugging Face ``config.json`` (dense or MoE) the profile needs."""
    c = json.loads(Path(path).read_text())

    def need(*keys):
        for k in keys:
            if isinstance(c.get(k), int) and not isinstance(c.get(k), bool) and c[k] > 0:
                return c[k]
        raise ValueError(f"{path}: needs a positive integer {' or '.join(keys)}")
    hidden, heads = need("hidden_size", "n_embd", "d_model"), need("num_attention_heads", "n_head")
    d = {"hidden": hidden, "heads": heads,
         "kv_heads": c.get("num_key_value_heads") or heads,
         "ffn": need("intermediate_size", "ffn_dim", "n_inner"), "vocab": need("vocab_size"),
         "experts": c.get("num_local_experts") or c.get("n_routed_experts") or 0,
         "source": str(path)}
    d["expert_ffn"] = c.get("moe_intermediate_size") or (d["ffn"] if d["experts"] else 0)
    return d


def dims_from_list(text: str) -> dict:
    """``hidden,heads,kv_heads,ffn,vocab[,experts,expert_ffn]``."""
    try:
        v = [int(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"--dims must be integers, got {text!r}") from None
    if len(v) not in (5, 7) or min(v[:5]) < 1 or min(v) < 0:
        raise ValueError("--dims is hidden,heads,kv_heads,ffn,vocab[,experts,expert_ffn] "
                         f"(positive), got {text!r}")
    names = ("hidden", "heads", "kv_heads", "ffn", "vocab", "experts", "expert_ffn")
    return {**dict(zip(names, v + [0, 0][:7 - len(v)])), "source": f"--dims {text}"}


def _timer(torch, device):
    if device.type == "cuda":
        def timed(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) * 1e3                    # ms -> us
        return timed

    def timed(fn):
        t0 = time.perf_counter()
        fn()
        return (time.perf_counter() - t0) * 1e6
    return timed


def _ops(torch, d, dtype, device, m):
    """``{op: zero-argument callable}`` for ``m`` tokens."""
    F = torch.nn.functional
    hd = d["hidden"] // d["heads"]
    w = lambda n, k: torch.randn(n, k, dtype=dtype, device=device)
    x = torch.randn(m, d["hidden"], dtype=dtype, device=device)
    qkv = w(d["hidden"] + 2 * d["kv_heads"] * hd, d["hidden"])
    o = w(d["hidden"], d["hidden"])
    ffn = d["expert_ffn"] if d["experts"] else d["ffn"]
    up, down = w(2 * ffn, d["hidden"]), w(d["hidden"], ffn)
    h = torch.randn(m, 2 * ffn, dtype=dtype, device=device)
    g = torch.ones(d["hidden"], dtype=dtype, device=device)
    q = torch.randn(m, d["heads"] + d["kv_heads"], hd, dtype=dtype, device=device)
    cos = torch.randn(m, 1, hd // 2, dtype=dtype, device=device)
    sin = torch.randn(m, 1, hd // 2, dtype=dtype, device=device)
    table = torch.randn(d["vocab"], d["hidden"], dtype=dtype, device=device)
    ids = torch.randint(0, d["vocab"], (m,), device=device)
    xf = torch.randn(m, ffn, dtype=dtype, device=device)

    def rms():
        return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dtype) * g

    def act():
        a, b = h.chunk(2, dim=-1)
        return F.silu(a) * b

    def rotary():
        a, b = q[..., : hd // 2], q[..., hd // 2:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    ops = {"qkv_proj": lambda: F.linear(x, qkv), "o_proj": lambda: F.linear(x, o)}
    if d["experts"]:
        ops.update({"expert.w1": lambda: F.linear(x, up[:ffn]),
                    "expert.w3": lambda: F.linear(x, up[ffn:]),
                    "expert.w2": lambda: F.linear(xf, down)})
    else:
        ops.update({"gate_up_proj": lambda: F.linear(x, up), "down_proj": lambda: F.linear(xf, down)})
    ops.update({"layernorm": rms, "act_fn": act, "rotary_emb": rotary,
                "embedding": lambda: F.embedding(ids, table)})
    return ops


def profile(dims: dict, device: str = "cpu", dtype: str = "bf16", tokens=TOKENS, warmup: int = 3,
            iterations: int = 10, out=None, log=print) -> list:
    """Time every op at every token count; ``[(op, tokens, median_us), ...]``, also written
    to ``out`` (see the module docstring) when given."""
    import torch
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if iterations < 1 or warmup < 0 or not tokens or min(tokens) < 1:
        raise ValueError("iterations >= 1, warmup >= 0 and token counts >= 1 are needed")
    dev = torch.device(device)
    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[dtype]
    timed = _timer(torch, dev)
    rows = []
    with torch.inference_mode():
        for m in tokens:
            for op, fn in _ops(torch, dims, torch_dtype, dev, m).items():
                for _ in range(warmup):
                    fn()
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                rows.append((op, m, statistics.median(timed(fn) for _ in range(iterations))))
            log(f"[profile] {m} tokens: {len(rows)} ops timed")
    if out is not None:
        write(rows, dims, dev, dtype, warmup, iterations, out, torch)
    return rows


def write(rows, dims, dev, dtype, warmup, iterations, out, torch) -> Path:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["layer,tokens,time_us"] + [f"{op},{m},{t:.3f}" for op, m, t in rows]
    (out / "dense.csv").write_text("\n".join(lines) + "\n")
    name = torch.cuda.get_device_name(dev) if dev.type == "cuda" else (platform.processor()
                                                                      or platform.machine())
    meta = {"profiler": "ndpdimm profile_ops.py", "gpu": name, "device": str(dev),
            "torch_version": torch.__version__, "cuda_version": torch.version.cuda or "none",
            "dtype": dtype, "timing": "CUDA events" if dev.type == "cuda" else "perf_counter",
            "warmup": warmup, "iterations": iterations, "statistic": "median",
            "profiled_at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            **{f"model_{k}": v for k, v in dims.items()}}
    (out / "meta.yaml").write_text("".join(f"{k}: {json.dumps(v)}\n" for k, v in meta.items()))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="the model's Hugging Face config.json")
    src.add_argument("--dims", help="hidden,heads,kv_heads,ffn,vocab[,experts,expert_ffn]")
    p.add_argument("--device", default="cuda", help="torch device (default cuda)")
    p.add_argument("--dtype", choices=DTYPES, default="bf16")
    p.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="comma-separated counts")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iterations", type=int, default=10)
    p.add_argument("--out", required=True, help="folder for dense.csv and meta.yaml")
    a = p.parse_args(argv)
    try:
        dims = dims_from_config(a.config) if a.config else dims_from_list(a.dims)
        tokens = tuple(int(t) for t in a.tokens.split(","))
        profile(dims, a.device, a.dtype, tokens, a.warmup, a.iterations, a.out)
    except (ValueError, RuntimeError) as e:
        print(f"profile_ops: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {a.out}/dense.csv and meta.yaml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
