"""Per-system timing of a Hermes run: every system's decode steps, layer by layer, on one trace.

Each ``*_run`` function decodes ``cfg.tokens`` steps of a
:class:`~ndpdimm.sw.scenarios.hermes.workload.Workload` with the kernel times of
:class:`~ndpdimm.sw.scenarios.hermes.costs.Costs` and returns a :class:`RunTally`
(critical-path time by component, busy times, traffic, imbalance, migrations):
:func:`ndp_run` (Hermes, its ablations and NDP without sparsity, on a
:class:`Placement`; :func:`_adjust` is its online adjustment),
:func:`offload_run` (Accelerate-like, FlexGen-like, Deja Vu-like), :func:`powerinfer_run`,
:func:`datacenter_run`; :func:`prefill_seconds` gives the TTFT. :class:`RunShape` holds
a model's per-layer sizes at a batch; :func:`gpu_mlp_seconds`, :func:`gpu_rows_seconds` and
:func:`cpu_seconds` time the GPU's and the host CPU's parts.
``sw/scenarios/hermes/scenario.py`` places the neurons and calls these.

**Decode step of one layer, Hermes** (``B`` sequences, context ``c``):

1. QKV: the ILP's share ``q`` of the rows on the GPU, the rest dense on the
   DIMMs (rows split evenly); the normed input goes to the DIMMs over PCIe;
   the GPU's q/K/V rows go to the DIMMs (the KV cache lives there).
2. Attention on the DIMMs: the ``B x kv_heads`` (sequence, K/V head) pairs
   dealt round-robin, each ``attention(c)``; the heads' outputs return over
   PCIe; the output projection runs on the GPU.
3. MLP: the input goes to the DIMMs; the GPU computes its predicted-active hot
   neurons while each DIMM computes its predicted-active cold neurons, the
   DIMMs' FP32 partial sums merge along the chain by ATOMIC_ADD in 4 KiB
   chunks (pipelined: ``(chunks + D - 2)`` chunk times), the merged sum
   returns over PCIe and the GPU adds it.
4. The predictor runs on the GPU (one kernel per layer).

Each phase takes the slower of its concurrent branches; the breakdown charges
a phase to the branch that set its time. The LM head runs on the GPU.

**Baselines** (same GPU, same trace, same predictions):
``accelerate`` (Hugging Face Accelerate's big model inference, ``device_map="auto"``) keeps
whole decoder layers on the GPU, in order, as far as they fit and the rest in host memory;
an offloaded layer's weights cross PCIe just before its forward, not overlapped with
compute (a layer takes transfer + compute), dense; ``flexgen`` keeps a uniform share of every layer on the GPU and streams the
rest over PCIe each token, overlapped with compute (the KV cache stays on the
GPU as far as it fits, the rest in host memory, read over PCIe each step - the
same for the two baselines after it); ``dejavu`` also keeps the
most frequent neurons resident and streams only the predicted-active others
(attention streamed densely), and runs its own per-layer MLP predictor on the GPU
(:data:`DEJAVU_PREDICTOR_RANK`; its weights take GPU memory from the resident share); ``powerinfer`` places hot neurons (and a share
of QKV/output rows) on the GPU with the same ILP, the DIMM side replaced by
the host CPU reading host DRAM; ``ndp_dense`` is the NDP system without
sparsity (placement by the ILP with every neuron firing, the DIMMs compute all
cold neurons); ``datacenter`` is ``[datacenter]`` A100s in tensor parallel
(two all-reduces per layer over NVLink). Ablations of Hermes:
``random`` placement (the ILP's hot counts, random neurons, random balanced
DIMMs), ``offline`` (ILP + snake split only), ``online`` (+ every
``adjust_window`` tokens in which the DIMMs' side of the MLP was the slower,
the window's least active hot and most active cold neurons swap between GPU
and DIMMs when the cold one fired ``adjust_margin`` x window more often,
their weights over PCIe), and ``hermes``
(+ window-based DIMM remapping, ``sw/scenarios/hermes/remap.py``, weights over
DIMM-Link). Migrations are charged as time (not overlapped) and logged.

Prefill (TTFT) runs on the GPU for every single-GPU system, streaming the
weights that are not resident over PCIe once per layer (overlapped); NDP
systems also write the prompt's KV cache to the DIMMs.
"""

import dataclasses

import numpy as np

from ndpdimm.hw.formats import NDP_CLOCK_HZ
from ndpdimm.sw.kernels.attention import Shape as AttentionShape
from ndpdimm.sw.kernels.cold_mlp import Shape as ColdMlpShape
from ndpdimm.sw.kernels.dense import Shape as DenseShape
from ndpdimm.sw.scenarios.base import Tally
from ndpdimm.sw.scenarios.catalog import ModelShape
from ndpdimm.sw.scenarios.gpu import GpuModel
from ndpdimm.sw.scenarios.hermes.config import ELEM, MERGE_CHUNK
from ndpdimm.sw.scenarios.hermes.partition import cold_counts
from ndpdimm.sw.scenarios.hermes.remap import rebalance_layer

__all__ = ["RunTally", "RunShape", "Placement", "ndp_run", "offload_run", "powerinfer_run",
           "datacenter_run", "prefill_seconds", "accelerate_layers", "cpu_seconds", "gpu_mlp_seconds",
           "gpu_rows_seconds", "dejavu_predictor_bytes", "dejavu_predictor_seconds",
           "DEJAVU_PREDICTOR_RANK", "pipeline_run", "layer_gpu_seconds"]


# ---- accounting --------------------------------------------------------------------------------

#: the timeline's process and its tracks (``--timeline``, docs/hermes.md)
PROCESS = "Hermes (GPU + NDP-DIMMs)"
STEP, LAYER, GPU = "decode step", "layer", "GPU"
PCIE_DOWN, PCIE_UP, LINK = "PCIe GPU->DIMMs", "PCIe DIMMs->GPU", "DIMM-Link"
#: tracks whose transfers the model lets run concurrently (spread over lanes by the writer)
SHARED_TRACKS = (PCIE_DOWN, PCIE_UP)


class RunTally(Tally):
    """Critical-path time by component, busy times and traffic of one system's run;
    ``timeline``: a :class:`~ndpdimm.cosim.timeline.Timeline` the run lays its slices on
    (``--timeline``), or ``None``."""
    SHARED_TRACKS = SHARED_TRACKS

    def __init__(self, timeline=None):
        super().__init__(timeline, PROCESS)
        self.seconds = 0.0
        self.breakdown = {}
        self.gpu_busy = self.ndp_busy = self.cpu_busy = 0.0
        self.pcie_bytes = self.host_dram_bytes = self.dimm_dram_bytes = 0.0
        self.ndp_macs = self.link_bytes = 0.0
        self.active = self.active_on_gpu = 0
        self.mlp_seconds = 0.0             # critical-path time of the MLP blocks (NDP systems)
        self.predictor_busy = 0.0          # GPU time of the activation predictor
        self.imbalance = []                # per token: mean over layers of max/mean DIMM load
        self.migrations = 0
        self.migration_log = []

    def add(self, parts: dict):
        for k, v in parts.items():
            if v:
                self.breakdown[k] = self.breakdown.get(k, 0.0) + v
                self.seconds += v

    def phase(self, *branches):
        """Concurrent branches (dicts of component seconds): the slowest sets the time."""
        self.add(max(branches, key=lambda b: sum(b.values())))


@dataclasses.dataclass
class RunShape:
    """Per-layer sizes of a model at a batch."""
    model: ModelShape
    batch: int
    cold_dtype: str = "fp16"

    def __post_init__(self):
        m = self.model
        self.H, self.F, self.L = m.hidden, m.ffn, m.layers
        self.mats = 3 if m.mlp == "gated" else 2
        self.qkv_rows = m.hidden + 2 * m.kv_dim
        self.neuron_bytes = self.mats * m.hidden * ELEM
        self.cold_neuron_bytes = self.neuron_bytes // (2 if self.cold_dtype == "int8" else 1)
        self.qkv_bytes = self.qkv_rows * m.hidden * ELEM
        self.o_bytes = m.hidden * m.hidden * ELEM
        self.head_bytes = m.vocab * m.hidden * ELEM
        self.layer_bytes = self.qkv_bytes + self.o_bytes + self.F * self.neuron_bytes
        self.x_bytes = self.batch * m.hidden * ELEM

    def kv_bytes(self, context: int) -> float:
        """KV cache of the batch over all layers."""
        return float(self.batch * context * self.model.kv_bytes_per_token(ELEM))


def gpu_mlp_seconds(costs, sh, n):
    """The GPU's share of an MLP: ``n`` neurons (up [and gate] rows, down columns)."""
    if n <= 0:
        return 0.0
    g = costs.gpu
    return (sh.mats - 1) * g.linear(sh.batch, int(n), sh.H).seconds + \
        g.linear(sh.batch, sh.H, int(n)).seconds


def gpu_rows_seconds(costs, sh, rows, n_in=None):
    return costs.gpu.linear(sh.batch, int(rows), sh.H if n_in is None else n_in).seconds \
        if rows > 0 else 0.0


def layer_gpu_seconds(g, sh, tokens, seqs, q_len, context, split=1):
    """One decoder layer on one GPU (``g``: a :class:`GpuModel`) holding ``1 / split`` of every
    matrix and of the heads (tensor parallel; 1: the whole layer): QKV, output projection, the
    MLP's matrices over ``tokens`` rows, and attention of ``seqs`` sequences of ``q_len`` new
    tokens over ``context``."""
    m = sh.model

    def part(x):
        return -(-x // split)
    return (g.linear(tokens, part(sh.qkv_rows), sh.H).seconds +
            g.linear(tokens, sh.H, part(sh.H)).seconds +
            (sh.mats - 1) * g.linear(tokens, part(sh.F), sh.H).seconds +
            g.linear(tokens, sh.H, part(sh.F)).seconds +
            g.attention(seqs, q_len, context, part(m.heads), part(m.kv_heads), m.head_dim).seconds)


def prefill_seconds(costs, sh, prompt, resident_per_layer, kv_to_dimms, overlap=True):
    """TTFT: every layer's GEMMs over the batch's prompt on the GPU, the weights not resident
    streamed over PCIe (overlapped; ``overlap`` False: before the layer's GEMMs), the KV cache
    written to the DIMMs when they hold it."""
    g, m, B = costs.gpu, sh.model, sh.batch
    tok = B * prompt
    t = 0.0
    for l in range(sh.L):
        comp = layer_gpu_seconds(g, sh, tok, B, prompt, prompt)
        stream = costs.pcie(max(0.0, sh.layer_bytes - resident_per_layer[l]))
        t += max(comp, stream) if overlap else comp + stream
    if kv_to_dimms:
        t += costs.pcie(sh.kv_bytes(prompt))
    return t + g.linear(B, m.vocab, sh.H).seconds


# ---- the NDP systems (Hermes, its ablations, NDP without sparsity) -----------------------------

@dataclasses.dataclass
class Placement:
    on_gpu: np.ndarray                     # [L, F] bool
    dimm: np.ndarray                       # [L, F] int, -1 on the GPU
    qkv_share: np.ndarray                  # [L] share of QKV rows on the GPU


def ndp_run(cfg, costs, sh, wl, place, dimms, *, sparse=True, adjust=False, remap=False,
             timeline=None, kernels=None):
    """Decode ``cfg.tokens`` steps on GPU + ``dimms`` NDP-DIMMs; returns a RunTally.
    ``timeline``: lay every step's kernels and transfers on it (see :func:`_lay_layer`).
    ``kernels``: a :class:`~ndpdimm.sw.sampling.record.KernelLog` that gets every NDP kernel
    invocation costed (the DIMM-Link merges excepted: they are not NDP-core kernels), for
    ``--rtl-samples``."""
    tl = RunTally(timeline)
    if timeline is not None:                              # the tracks in display order
        for track in (STEP, LAYER, GPU, PCIE_DOWN, PCIE_UP) + tuple(map(Tally.dimm_track, range(dimms))) + (LINK,):
            timeline.track(PROCESS, track, exclusive=track not in SHARED_TRACKS)
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    on_gpu, dimm = place.on_gpu.copy(), place.dimm.copy()
    g = costs.gpu
    clock = NDP_CLOCK_HZ
    neuron = costs.neuron
    pairs = B * m.kv_heads
    per_dimm_pairs = -(-pairs // dimms)
    merge_bytes = B * H * 4
    chunks = -(-merge_bytes // MERGE_CHUNK)
    merge_s = 0.0 if dimms == 1 else \
        (chunks + dimms - 2) * costs.merge.cycles(min(MERGE_CHUNK, merge_bytes)) / clock
    window = np.zeros((L, sh.F), dtype=np.int32)         # activations since the last adjustment
    side_gpu = side_ndp = 0.0                            # MLP time of each side since then
    remap_window = np.zeros((L, sh.F), dtype=np.int32)
    remap_tokens = []
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        act_t, pred_t = wl.run.active[t], wl.predicted[t]
        ratios = []
        step_start = tl.seconds
        for l in range(L):
            s = l % S
            act, pred = act_t[s], pred_t[s]
            q = float(place.qkv_share[l])
            gpu_rows = int(round(q * sh.qkv_rows))
            ndp_rows = -(-(sh.qkv_rows - gpu_rows) // dimms)
            # 1. QKV
            t_qkv = tl.seconds
            gpu_qkv = gpu_rows_seconds(costs, sh, gpu_rows)
            ndp_qkv = costs.dense.seconds(ndp_rows) if ndp_rows else 0.0
            tl.phase({"gpu": gpu_qkv, "pcie": costs.pcie(B * gpu_rows * ELEM)},
                     {"pcie": costs.pcie(sh.x_bytes), "ndp": ndp_qkv})
            # 2. attention on the DIMMs, output projection on the GPU
            t_att = tl.seconds
            att = per_dimm_pairs * costs.attention.seconds(c)
            o = gpu_rows_seconds(costs, sh, H)
            tl.add({"ndp": att, "pcie": costs.pcie(B * H * ELEM), "gpu": o})
            # 3. MLP
            if sparse:
                run_gpu = pred & on_gpu[l]
                run_ndp = pred & ~on_gpu[l]
            else:
                run_gpu, run_ndp = on_gpu[l], ~on_gpu[l]
            n_gpu = int(run_gpu.sum())
            k = np.bincount(dimm[l][run_ndp], minlength=dimms)
            ndp_mlp = np.where(k > 0, neuron.fixed_cycles + neuron.per_neuron_cycles * k, 0.0) / clock
            gpu_mlp = gpu_mlp_seconds(costs, sh, n_gpu)
            side_gpu += gpu_mlp
            side_ndp += float(ndp_mlp.max())
            t_mlp = tl.seconds
            tl.phase({"gpu": gpu_mlp + (g.overhead_s if sparse else 0.0)},       # + predictor
                     {"pcie": costs.pcie(sh.x_bytes) + costs.pcie(merge_bytes),
                      "ndp": float(ndp_mlp.max()), "link": merge_s if k.sum() else 0.0})
            tl.mlp_seconds += tl.seconds - t_mlp
            tl.predictor_busy += g.overhead_s if sparse else 0.0
            if timeline is not None:
                _lay_layer(tl, costs, sh, l, s, c, (t_qkv, t_att, t_mlp), dimms=dimms,
                           gpu_rows=gpu_rows, ndp_rows=ndp_rows, pairs=pairs, o=o,
                           gpu_mlp=gpu_mlp, n_gpu=n_gpu, k=k, ndp_mlp=ndp_mlp,
                           merge=(merge_bytes, merge_s if k.sum() else 0.0),
                           predictor=g.overhead_s if sparse else 0.0)
            # busy time and traffic
            tl.gpu_busy += gpu_qkv + o + gpu_mlp
            if kernels is not None:
                _log_kernels(kernels, cfg, costs, sh, dimms, ndp_rows, c, pairs, k,
                             cold_counts(dimm[l], dimms))
            tl.ndp_busy += float(ndp_mlp.sum()) + \
                (costs.dense.seconds(ndp_rows) * dimms if ndp_rows else 0.0) + \
                costs.attention.seconds(c) * pairs
            tl.pcie_bytes += sh.x_bytes * 2 + B * H * ELEM + merge_bytes + B * gpu_rows * ELEM
            kv = 2 * B * c * m.kv_dim * ELEM
            tl.dimm_dram_bytes += int(k.sum()) * sh.cold_neuron_bytes + \
                (sh.qkv_rows - gpu_rows) * H * ELEM + kv
            tl.ndp_macs += B * (int(k.sum()) * sh.mats * H + (sh.qkv_rows - gpu_rows) * H) + \
                2 * B * c * m.heads * m.head_dim
            tl.link_bytes += merge_bytes * (dimms - 1) if k.sum() else 0
            tl.active += int(act.sum())
            tl.active_on_gpu += int((act & on_gpu[l]).sum())
            if dimms > 1 and k.sum():
                ratios.append(float(k.max() / k.mean()))
            window[l] += act
            remap_window[l] += act
        tl.lay(GPU, "LM head", tl.seconds, g.linear(B, m.vocab, H).seconds, batch=B)
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
        tl.imbalance.append(float(np.mean(ratios)) if ratios else 1.0)
        remap_tokens.append(t)
        # online adjustment, only while the DIMMs' side of the MLP was the slower one (moving
        # active neurons to a GPU that is already the bottleneck would slow the step down)
        if adjust and (t + 1) % cfg.adjust_window == 0 and side_ndp > side_gpu:
            moved = _adjust(on_gpu, dimm, window, cfg.adjust_swaps,
                            max(1, int(cfg.adjust_margin * cfg.adjust_window)))
            for l, a, b in moved:
                tl.migration_log.append((t + 1, "gpu<->dimm", l, a, b))
            if moved:
                tl.migrations += 2 * len(moved)
                nbytes = 2 * len(moved) * sh.neuron_bytes
                tl.lay(PCIE_DOWN, "neuron migration GPU<->DIMMs", tl.seconds, costs.pcie(nbytes),
                       swaps=len(moved), bytes=nbytes, note="both directions, charged as one transfer")
                tl.add({"migration": costs.pcie(nbytes)})
                tl.pcie_bytes += nbytes
        if adjust and (t + 1) % cfg.adjust_window == 0:
            window[:] = 0
            side_gpu = side_ndp = 0.0
        if remap and dimms > 1 and (t + 1) % cfg.remap_window == 0:
            for l in range(L):
                cold = dimm[l] >= 0
                loads = np.bincount(dimm[l, cold], weights=remap_window[l, cold], minlength=dimms)
                if loads.mean() > 0 and loads.max() > cfg.remap_threshold * loads.mean():
                    moves = rebalance_layer(remap_window[l][None], dimm[l], dimms, cfg.remap_swaps)
                    for n, a, b in moves:
                        tl.migration_log.append((t + 1, "dimm->dimm", l, n, (a, b)))
                    if moves:
                        tl.migrations += len(moves)
                        hops = sum(abs(a - b) for _, a, b in moves)
                        tl.link_bytes += hops * sh.neuron_bytes
                        # swaps run in both directions on the chain at once: the longer half
                        per = costs.merge.cycles(sh.neuron_bytes) / clock
                        tl.lay(LINK, "remap migration", tl.seconds, per * len(moves) / 2,
                               layer=l, moves=len(moves), hops=hops)
                        tl.add({"migration": per * len(moves) / 2})
            remap_window[:] = 0
        tl.lay(STEP, f"step {t}", step_start, tl.seconds - step_start, token=t, context=c)
    return tl


def _lay_layer(tl, costs, sh, l, s, c, starts, *, dimms, gpu_rows, ndp_rows, pairs, o, gpu_mlp,
               n_gpu, k, ndp_mlp, merge, predictor):
    """Lay layer ``l``'s decode step on the timeline from the times :func:`ndp_run` charged:
    each phase starts when the previous one ended (its slowest branch), and inside a phase
    each branch runs its parts in order (QKV: GPU rows then their PCIe copy, beside the input
    over PCIe then each DIMM's dense rows; attention: each DIMM's (sequence, K/V head) pairs,
    then the heads over PCIe, then the output projection; MLP: hot neurons and the predictor
    on the GPU, beside the input over PCIe, each DIMM's cold neurons, the merge over
    DIMM-Link and the merged sum back over PCIe)."""
    t_qkv, t_att, t_mlp = starts
    B, H = sh.batch, sh.H
    clock = NDP_CLOCK_HZ
    end = tl.lay(GPU, "QKV rows", t_qkv, gpu_rows_seconds(costs, sh, gpu_rows), layer=l, rows=gpu_rows)
    tl.lay(PCIE_DOWN, "q/k/v rows to DIMMs", end, costs.pcie(B * gpu_rows * ELEM), layer=l,
           bytes=B * gpu_rows * ELEM)
    end = tl.lay(PCIE_DOWN, "input to DIMMs", t_qkv, costs.pcie(sh.x_bytes), layer=l,
                 bytes=sh.x_bytes)
    if ndp_rows:
        for d in range(dimms):
            tl.lay(Tally.dimm_track(d), "dense QKV rows", end, costs.dense.seconds(ndp_rows), layer=l,
                   rows=ndp_rows)
    att_end = t_att
    for d in range(dimms):
        n = pairs // dimms + (d < pairs % dimms)
        att_end = max(att_end, tl.lay(Tally.dimm_track(d), "attention", t_att,
                                      n * costs.attention.seconds(c), layer=l, pairs=n,
                                      context=c))
    end = tl.lay(PCIE_UP, "attention heads to GPU", att_end, costs.pcie(B * H * ELEM), layer=l,
                 bytes=B * H * ELEM)
    tl.lay(GPU, "output projection", end, o, layer=l)
    end = tl.lay(GPU, "hot neurons (MLP)", t_mlp, gpu_mlp, layer=l, neurons=n_gpu)
    tl.lay(GPU, "predictor", end, predictor, layer=l)
    end = tl.lay(PCIE_DOWN, "input to DIMMs", t_mlp, costs.pcie(sh.x_bytes), layer=l,
                 bytes=sh.x_bytes)
    for d in range(dimms):
        tl.lay(Tally.dimm_track(d), "cold neurons (MLP)", end, float(ndp_mlp[d]), layer=l,
               neurons=int(k[d]))
    merge_bytes, merge_s = merge
    end = tl.lay(LINK, "merge partial sums (ATOMIC_ADD)", end + float(ndp_mlp.max()), merge_s,
                 layer=l, bytes=merge_bytes * (dimms - 1), cycles_per_chunk=costs.merge.cycles(
                     min(MERGE_CHUNK, merge_bytes)), clock_hz=clock)
    end = tl.lay(PCIE_UP, "merged MLP sum to GPU", end, costs.pcie(merge_bytes), layer=l,
                 bytes=merge_bytes)
    tl.lay(LAYER, f"layer {l}", t_qkv, tl.seconds - t_qkv, layer=l, sample=s, context=c)


def _log_kernels(kernels, cfg, costs, sh, dimms, ndp_rows, context, pairs, per_dimm, pool):
    """One layer-step's NDP kernels into ``kernels``, each with the cycles ``ndp_run`` charged
    (``per_dimm``: each DIMM's activated cold neurons, ``pool``: the cold neurons it stores in
    the layer, which a replay draws them from)."""
    m, B, H = sh.model, sh.batch, sh.H
    if ndp_rows:
        kernels.add(DenseShape(rows=ndp_rows, hidden=H, batch=B),
                    costs.dense.cycles(ndp_rows), count=dimms)
    kernels.add(AttentionShape(context=context, head_dim=m.head_dim, group=m.heads // m.kv_heads),
                costs.attention.cycles(context), count=pairs)
    n = costs.neuron
    busy = per_dimm > 0
    pairs_kp, counts = np.unique(np.stack([per_dimm[busy], pool[busy]], axis=1), axis=0,
                                 return_counts=True)
    for (k, p), count in zip(pairs_kp, counts):
        kernels.add(ColdMlpShape(k=int(k), pool=int(p), hidden=H, batch=B, dtype=cfg.cold_dtype,
                                   gated=m.mlp == "gated"),
                    n.fixed_cycles + n.per_neuron_cycles * int(k), count=int(count))


def _adjust(on_gpu, dimm, window, max_swaps, margin):
    """Online adjustment: per layer, swap the window's most active cold neurons with its least
    active hot ones while the cold one fired at least ``margin`` more times (a swap costs two
    neurons' weights over PCIe); the cold one takes the hot one's DIMM slot."""
    moved = []
    for l in range(on_gpu.shape[0]):
        hot, cold = np.flatnonzero(on_gpu[l]), np.flatnonzero(~on_gpu[l])
        if not len(hot) or not len(cold):
            continue
        hot = hot[np.argsort(window[l, hot], kind="stable")][:max_swaps]
        cold = cold[np.argsort(-window[l, cold], kind="stable")][:max_swaps]
        for h, c in zip(hot, cold):
            if window[l, c] < window[l, h] + margin:
                break
            on_gpu[l, h], on_gpu[l, c] = False, True
            dimm[l, h], dimm[l, c] = dimm[l, c], -1
            moved.append((l, int(c), int(h)))
    return moved


# ---- the baselines without NDP -----------------------------------------------------------------

def accelerate_layers(budget_bytes, layer_bytes, layers):
    """How many whole decoder layers Accelerate's ``device_map="auto"`` keeps on the GPU: it
    fills the GPU first, in layer order, and does not split a decoder layer across devices
    (``no_split_module_classes``), so the budget's remainder below one layer stays unused."""
    if budget_bytes <= 0:
        return 0
    return min(int(layers), int(budget_bytes // layer_bytes))


def offload_run(cfg, costs, sh, wl, resident_share, hot=None, kv_stream=0.0, overlap=True):
    """FlexGen-like (``hot`` None: a ``resident_share`` of every matrix stays on the GPU, the
    rest streams) or Deja Vu-like (``hot`` [L, F]: resident neurons; the predicted-active
    others stream; attention weights stream densely); the KV cache the GPU cannot hold streams
    too (``kv_stream`` bytes per layer and context token). ``resident_share``: one share for
    every layer or one per layer (Accelerate-like: 1 for the layers on the GPU, 0 for those
    offloaded). ``overlap``: a layer takes ``max(GPU, PCIe)`` (the next layer's weights stream
    while this one computes); False: ``GPU + PCIe`` (the weights move just before the layer's
    forward, Accelerate-like)."""
    tl = RunTally()
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    g = costs.gpu
    att_bytes = sh.qkv_bytes + sh.o_bytes
    shares = np.broadcast_to(np.asarray(resident_share, dtype=float), (L,))
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        for l in range(L):
            s, share = l % S, float(shares[l])
            act, pred = wl.run.active[t, s], wl.predicted[t, s]
            att = gpu_rows_seconds(costs, sh, sh.qkv_rows) + gpu_rows_seconds(costs, sh, H) + \
                g.attention(B, 1, c, m.heads, m.kv_heads, m.head_dim).seconds
            if hot is None:
                n = sh.F
                stream = (1 - share) * sh.layer_bytes
                tl.active_on_gpu += int(act.sum() * share)
            else:
                n = int(pred.sum())
                stream = (1 - share) * att_bytes + \
                    int((pred & ~hot[l]).sum()) * sh.neuron_bytes
                tl.active_on_gpu += int((act & hot[l]).sum())
            stream += kv_stream * c
            predictor = dejavu_predictor_seconds(costs, sh) if hot is not None else 0.0
            comp = att + gpu_mlp_seconds(costs, sh, n) + predictor
            tl.predictor_busy += predictor
            if overlap:
                tl.phase({"gpu": comp}, {"pcie": costs.pcie(stream)})
            else:
                tl.add({"pcie": costs.pcie(stream), "gpu": comp})
            tl.gpu_busy += comp
            tl.pcie_bytes += stream
            tl.host_dram_bytes += stream
            tl.active += int(act.sum())
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
    return tl


#: Deja Vu's per-layer MLP predictor (a low-rank two-layer MLP, hidden -> rank -> neurons, on the
#: GPU): its rank from the Hermes paper's Section III-B statement that MLP predictors for
#: LLaMA-7B need about 2 GB (../shared/papers/hermes.md): 2e9 B / (32 layers x (4096 + 11008)
#: x 2 B) = 2069
DEJAVU_PREDICTOR_RANK = 2069


def dejavu_predictor_bytes(sh) -> float:
    """GPU memory of Deja Vu's MLP predictors, all layers (FP16)."""
    return float(sh.L * DEJAVU_PREDICTOR_RANK * (sh.H + sh.F) * ELEM)


def dejavu_predictor_seconds(costs, sh) -> float:
    """One layer's Deja Vu MLP predictor on the GPU for the batch: hidden -> rank -> neurons."""
    g = costs.gpu
    return g.linear(sh.batch, DEJAVU_PREDICTOR_RANK, sh.H).seconds + \
        g.linear(sh.batch, sh.F, DEJAVU_PREDICTOR_RANK).seconds


def cpu_seconds(costs, sh, n_rows_equiv):
    """Host CPU: ``n_rows_equiv`` rows of the hidden size for the batch."""
    h = costs.hardware.host
    nbytes = n_rows_equiv * sh.H * ELEM
    flops = 2.0 * sh.batch * n_rows_equiv * sh.H
    return max(nbytes / (h.memory_bandwidth_gbs * 1e9 * h.memory_efficiency),
               flops / (h.fp32_tflops * 1e12))


def powerinfer_run(cfg, costs, sh, wl, place, kv_stream=0.0):
    """Hot neurons and a share of QKV + output rows on the GPU, the rest on the host CPU; the KV
    cache the GPU cannot hold crosses PCIe each step (``kv_stream`` per layer and token)."""
    tl = RunTally()
    m, B, H, L, S = sh.model, sh.batch, sh.H, sh.L, wl.run.layers
    g = costs.gpu
    rows = sh.qkv_rows + H
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        for l in range(L):
            s = l % S
            act, pred = wl.run.active[t, s], wl.predicted[t, s]
            gpu_rows = int(round(place.qkv_share[l] * rows))
            cpu_att = cpu_seconds(costs, sh, rows - gpu_rows)
            gpu_att = gpu_rows_seconds(costs, sh, gpu_rows)
            sync = costs.pcie(sh.x_bytes) * 2
            tl.phase({"gpu": gpu_att}, {"cpu": cpu_att, "pcie": sync if cpu_att else 0.0})
            attn = g.attention(B, 1, c, m.heads, m.kv_heads, m.head_dim).seconds
            if kv_stream:
                tl.add({"pcie": costs.pcie(kv_stream * c)})
                tl.pcie_bytes += kv_stream * c
                tl.host_dram_bytes += kv_stream * c
            n_gpu, n_cpu = int((pred & place.on_gpu[l]).sum()), int((pred & ~place.on_gpu[l]).sum())
            gpu_mlp = gpu_mlp_seconds(costs, sh, n_gpu) + g.overhead_s
            tl.predictor_busy += g.overhead_s
            cpu_mlp = cpu_seconds(costs, sh, n_cpu * sh.mats)
            tl.add({"gpu": attn})
            tl.phase({"gpu": gpu_mlp}, {"cpu": cpu_mlp, "pcie": sync if n_cpu else 0.0})
            tl.gpu_busy += gpu_att + attn + gpu_mlp
            tl.cpu_busy += cpu_att + cpu_mlp
            tl.host_dram_bytes += ((rows - gpu_rows) + n_cpu * sh.mats) * H * ELEM
            tl.pcie_bytes += 4 * sh.x_bytes
            tl.active += int(act.sum())
            tl.active_on_gpu += int((act & place.on_gpu[l]).sum())
        tl.add({"gpu": g.linear(B, m.vocab, H).seconds})
        tl.gpu_busy += g.linear(B, m.vocab, H).seconds
    return tl


def datacenter_run(cfg, sh, dc):
    """``dc.count`` GPUs in tensor parallel: each holds 1/N of every matrix; two all-reduces of
    the batch's hidden vector per layer, timed by the GPU's measured all-reduce table where its
    fit has one (``GpuModel.all_reduce``), else a ring over NVLink (2 (N-1)/N of the bytes)."""
    tl = RunTally()
    g = GpuModel(dc.gpu())
    m, B, H, n = sh.model, sh.batch, sh.H, dc.count
    ar = g.all_reduce(sh.x_bytes, n, dc.nvlink_gbs)
    for t in range(cfg.tokens):
        c = cfg.prompt + t
        per_layer = layer_gpu_seconds(g, sh, B, B, 1, c, split=n)
        tl.add({"gpu": per_layer * sh.L, "nvlink": 2 * ar * sh.L})
        tl.add({"gpu": g.linear(B, -(-m.vocab // n), H).seconds})
        tl.gpu_busy += n * (per_layer * sh.L + g.linear(B, -(-m.vocab // n), H).seconds)
        tl.active += 1
        tl.active_on_gpu += 1
    return tl


def pipeline_run(cfg, sh, gpu, count: int, link_gbs: float) -> tuple[float, float]:
    """``count`` GPUs (``gpu``: a :class:`~ndpdimm.sw.scenarios.catalog.Gpu`) in pipeline
    parallel, as a TensorRT-LLM deployment runs a model whose heads the GPU count does not
    divide (tensor parallelism needs it to): each GPU holds ``ceil(L / count)`` whole layers;
    the batch goes through in ``m = min(batch, count)`` micro-batches, GPipe-style, so a step
    takes ``(count + m - 1)`` stage times of one micro-batch (a stage: its layers plus sending
    the activations to the next GPU over ``link_gbs``); the LM head runs once per step on the
    last GPU. Returns ``(decode seconds for cfg.tokens steps, prefill seconds)`` (prefill: the
    same schedule over the prompts, every prompt token through every layer)."""
    g = GpuModel(gpu)
    m_shape, B, H, n = sh.model, sh.batch, sh.H, int(count)
    micro = min(B, n)
    b = -(-B // micro)
    per_gpu = -(-sh.L // n)
    hop = b * H * ELEM / (link_gbs * 1e9)
    decode = 0.0
    for t in range(cfg.tokens):
        stage = per_gpu * layer_gpu_seconds(g, sh, b, b, 1, cfg.prompt + t) + hop
        decode += (n + micro - 1) * stage + g.linear(B, m_shape.vocab, H).seconds
    stage = per_gpu * layer_gpu_seconds(g, sh, b * cfg.prompt, b, cfg.prompt, cfg.prompt) + \
        hop * cfg.prompt
    prefill = (n + micro - 1) * stage + g.linear(B, m_shape.vocab, H).seconds
    return decode, prefill
