"""The activations a Hermes run executes and the predictor's predictions of them.

Synthetic traces (``sw/scenarios/hermes/traces.py``, parameters in
:class:`~ndpdimm.sw.scenarios.hermes.config.HermesConfig`), one per sequence of
the batch; a batch activates the union of its sequences' neurons. A
*profiling* trace (other seeds, same model seed) drives the offline placement
and the predictor's table; the *run* trace is what the systems execute (or a
recorded trace replayed instead). ``sample_layers`` distinct layers are
simulated and layer ``l`` of the model replays sample ``l mod S``.

Entry points: :func:`make_workload` (traces, the fitted
:class:`~ndpdimm.sw.scenarios.hermes.predictor.NeuronPredictor` run over the run
trace) returning a :class:`Workload`; a sweep reuses one per model and batch.
The workload keeps the predictor's scores, so :meth:`Workload.at_threshold` gives
the same run at another operating point (a neuron predicted active when its score
reaches the threshold; the configured point is ``score >= 0.5 / coefficient``)
without fitting or replaying the predictor again: the scores do not depend on the
threshold, since the predictor learns from the actual activations only.
"""

import dataclasses
import time

import numpy as np

from ndpdimm.sw.scenarios.catalog import ModelShape, load_model
from ndpdimm.sw.scenarios.hermes.config import HermesConfig
from ndpdimm.sw.scenarios.hermes.paper_predictor import RULE_SCORE, PaperPredictor
from ndpdimm.sw.scenarios.hermes.predictor import NeuronPredictor
from ndpdimm.sw.scenarios.hermes.traces import ActivationTrace, synthetic_trace

__all__ = ["Workload", "make_workload"]


@dataclasses.dataclass
class Workload:
    """The activations a run executes and what the predictor said about them."""
    model: ModelShape
    batch: int
    profile: ActivationTrace               # [profile_tokens, S, ffn], batch union
    run: ActivationTrace                   # [tokens, S, ffn]
    predicted: np.ndarray                  # [tokens, S, ffn] bool
    predictor_memory: dict                 # bytes per part for one layer (full neuron count)
    fit_seconds: float
    predict_seconds: float
    scores: np.ndarray | None = None       # [tokens, S, ffn] float32, the predictor's scores

    def at_threshold(self, threshold: float) -> "Workload":
        """The same workload with neurons predicted active when their score is at least
        ``threshold`` (in [0, 1]; 0 predicts every neuron active, i.e. no sparsity on the
        cold side). Needs the scores (kept by :func:`make_workload`)."""
        if self.scores is None:
            raise ValueError("this workload has no predictor scores (made without make_workload)")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
                or not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        return dataclasses.replace(self, predicted=self.scores >= threshold)


def _batch_trace(cfg: HermesConfig, model: ModelShape, tokens: int, seed_base: int,
                 lead: int = 0) -> ActivationTrace:
    layers = min(cfg.sample_layers, model.layers) + lead
    active = None
    for b in range(cfg.batch):
        t = synthetic_trace(tokens, layers, model.ffn, active_fraction=cfg.active_fraction,
                            skew=cfg.skew, token_similarity=cfg.token_similarity,
                            layer_correlation=cfg.layer_correlation, seed=seed_base + b,
                            model_seed=cfg.seed, copy_similarity=cfg.copy_similarity)
        active = t.active if active is None else active | t.active
    meta = dict(t.meta, batch=cfg.batch, seed=seed_base, note="union over the batch's sequences")
    return ActivationTrace(active, meta)


def make_workload(cfg: HermesConfig, model: ModelShape | None = None, trace: ActivationTrace | None = None,
                  log=None) -> Workload:
    """Profiling and run traces for ``cfg`` (``trace``: a recorded run trace to replay instead of
    the synthetic one; its layers are the samples) and the predictor's predictions on the run."""
    model = load_model(cfg.model) if model is None else model
    profile = _batch_trace(cfg, model, cfg.profile_tokens, 1_000_003 * (cfg.seed + 1))
    if trace is None:
        run = _batch_trace(cfg, model, cfg.tokens, 7 * (cfg.seed + 1) + 10_000)
    else:
        if not isinstance(trace, ActivationTrace):
            raise ValueError(f"trace must be an ActivationTrace, got {type(trace).__name__}")
        if trace.neurons != model.ffn or trace.layers > model.layers:
            raise ValueError(f"the trace has {trace.layers} layers x {trace.neurons} neurons; "
                             f"{model.name} has {model.layers} x {model.ffn}")
        if trace.tokens < cfg.tokens:
            raise ValueError(f"the trace has {trace.tokens} tokens, fewer than the {cfg.tokens} "
                             f"decode steps asked for")
        run = trace
        if trace.layers != profile.layers:
            profile = ActivationTrace(profile.active[:, :trace.layers] if trace.layers <= profile.layers
                                      else np.tile(profile.active, (1, -(-trace.layers // profile.layers), 1))
                                      [:, :trace.layers], profile.meta)
    if cfg.predictor != "window":
        return _paper_workload(cfg, model, profile if trace is not None else None, run
                               if trace is not None else None, log)
    t0 = time.perf_counter()
    predictor = NeuronPredictor(run.layers, model.ffn, window=cfg.predictor_window,
                                coefficient=cfg.coefficient, seed=cfg.seed).fit(profile)
    fit_s = time.perf_counter() - t0
    if log:
        log(f"[hermes] predictor table fitted on {profile.tokens} profiling tokens in {fit_s:.1f} s")
    t0 = time.perf_counter()
    predicted = np.zeros(run.active.shape, dtype=bool)
    scores = np.zeros(run.active.shape, dtype=np.float32)
    for t in range(run.tokens):
        for s in range(run.layers):
            prev = run.active[t, s - 1] if s else None
            score = predictor.scores(s, prev)            # what predictor.predict thresholds
            predicted[t, s] = predictor.coefficient * score >= 0.5
            scores[t, s] = score
            predictor.observe(s, run.active[t, s], prev)
    memory = NeuronPredictor(1, model.ffn, window=cfg.predictor_window).memory_bytes(per_layer=True)
    return Workload(model, cfg.batch, profile, run, predicted, memory, fit_s,
                    time.perf_counter() - t0, scores)


#: prompt tokens whose activations start the paper predictor's states (the last ones of the prompt)
PROMPT_INIT_TOKENS = 128


def _paper_workload(cfg: HermesConfig, model: ModelShape, profile: ActivationTrace | None,
                    run: ActivationTrace | None, log) -> Workload:
    """The workload with the paper's predictor (``cfg.predictor``: ``paper`` or one of its
    evidence ablations). Synthetic traces carry one *lead* layer before the sampled ones, so
    every sampled layer has a previous layer to read ``s2`` from (as every layer but the first
    has in the model), and ``min(prompt, 128)`` prompt tokens before the decoded ones, whose
    activation frequency starts the states. A replayed trace (``run`` given) has neither: its
    first layer gets ``s2`` = 0 and the states start from the profiling trace's frequency."""
    mode = {"paper": "both", "paper-token-only": "token-only",
            "paper-layer-only": "layer-only"}[cfg.predictor]
    if run is None:
        init = min(cfg.prompt, PROMPT_INIT_TOKENS)
        lead_profile = _batch_trace(cfg, model, cfg.profile_tokens, 1_000_003 * (cfg.seed + 1), lead=1)
        full = _batch_trace(cfg, model, init + cfg.tokens, 7 * (cfg.seed + 1) + 10_000, lead=1)
        prompt, decode = full.active[:init], full.active[init:]
        profile = ActivationTrace(lead_profile.active[:, 1:], dict(lead_profile.meta, lead_layers=1))
        run = ActivationTrace(decode[:, 1:], dict(full.meta, prompt_tokens=init, lead_layers=1))
        lead = 1
    else:
        prompt, decode, lead = profile.active, run.active, 0
        lead_profile = profile
    t0 = time.perf_counter()
    predictor = PaperPredictor(decode.shape[1], model.ffn, mode=mode).fit(lead_profile.active)
    predictor.start(prompt)
    fit_s = time.perf_counter() - t0
    if log:
        log(f"[hermes] paper predictor ({mode}): top-2 table fitted on {profile.tokens} profiling "
            f"tokens, states from {prompt.shape[0]} tokens, in {fit_s:.1f} s")
    t0 = time.perf_counter()
    scores = np.zeros(run.active.shape, dtype=np.float32)
    for t in range(decode.shape[0]):
        for layer in range(decode.shape[1]):
            prev = decode[t, layer - 1] if layer else None
            if layer >= lead:
                scores[t, layer - lead] = predictor.score(layer, prev)
            predictor.observe(layer, decode[t, layer])
    predicted = scores >= RULE_SCORE
    memory = PaperPredictor(1, model.ffn).memory_bytes(per_layer=True)
    return Workload(model, cfg.batch, profile, run, predicted, memory, fit_s,
                    time.perf_counter() - t0, scores)
