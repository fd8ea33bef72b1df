"""Hermes' online activation predictor: which neurons of a layer will fire for this token.

It runs once per layer per decoded token, after the previous layer's
activations are known, and combines four cheap pieces of evidence for each
neuron ``j`` of layer ``l``:

* **cross-layer correlation table** (built offline from a profiling trace by
  :meth:`NeuronPredictor.fit`): the ``top_k`` neurons ``i`` of layer ``l - 1``
  whose firing best predicts ``j`` (highest ``P(j | i)`` with enough
  support), with that probability in 8 bits; evidence = the largest
  ``P(j | i)`` among those active now (0 if none is);
* **recent-token window**: how often ``j`` fired over the last ``window``
  tokens (16-24 in Hermes);
* **similar recent token**: a MinHash signature of the previous layer's active
  set (``bands`` hash functions); a Bloom filter over the window's signatures
  answers "was there a similar token recently?" without a search, and on a
  hit the most recent such token's bitmap of layer ``l`` is the evidence;
* **per-neuron saturating counter** (``counter_bits``): up when ``j`` fires,
  down when it does not.

The evidence is averaged with fixed weights into a score in [0, 1]; a neuron
is predicted active when ``coefficient x score >= 0.5``: the coefficient
(0.85 by default) below 1 makes the predictor conservative, trading recall
for precision, as Hermes does. After the layer ran, :meth:`observe` feeds the
actual activations back (window, counters, signatures).

:meth:`NeuronPredictor.memory_bytes` reports the state's size per part;
:func:`evaluate` replays a trace and reports precision and recall (over all
neurons, or over the cold ones only when a mask is given: the DIMMs compute
exactly the predicted cold neurons).
"""

import dataclasses
from collections import deque

import numpy as np
import torch

from ndpdimm.sw.scenarios.hermes.traces import ActivationTrace

__all__ = ["NeuronPredictor", "PredictorAccuracy", "evaluate", "correlation_table", "WEIGHTS"]

#: Weights of the evidence: correlation table, window frequency, similar token, counter.
WEIGHTS = (0.4, 0.25, 0.2, 0.15)
#: Neurons of a layer whose table entries are found at once by :meth:`NeuronPredictor.fit`.
_FIT_CHUNK = 2048
_PRIME = (1 << 61) - 1


@dataclasses.dataclass
class PredictorAccuracy:
    true_positives: int
    false_positives: int
    false_negatives: int
    predictions: int

    @property
    def precision(self) -> float:
        p = self.true_positives + self.false_positives
        return self.true_positives / p if p else 1.0

    @property
    def recall(self) -> float:
        a = self.true_positives + self.false_negatives
        return self.true_positives / a if a else 1.0


def _band_key(band: int, value: int) -> int:
    """One Bloom-filter key per (band, MinHash value)."""
    return band << 56 ^ value


class _Bloom:
    """A Bloom filter of 64-bit keys: ``bits`` bits, ``hashes`` probes."""

    def __init__(self, bits: int, hashes: int = 3):
        self.bits, self.hashes = bits, hashes
        self.array = np.zeros(bits, dtype=bool)

    def _probes(self, key: int):
        return [((key * (2 * i + 1) + i * 0x9E3779B97F4A7C15) % _PRIME) % self.bits
                for i in range(self.hashes)]

    def add(self, key: int):
        self.array[self._probes(key)] = True

    def add_signature(self, bands):
        """Every band value of a MinHash signature (an empty set's -1 left out)."""
        for band, value in enumerate(bands):
            if value >= 0:
                self.add(_band_key(band, value))

    def __contains__(self, key: int) -> bool:
        return bool(self.array[self._probes(key)].all())


def correlation_table(prev: np.ndarray, cur: np.ndarray, top_k: int, min_support: int = 2):
    """For every neuron ``j`` of a layer (``cur``: [tokens, neurons] bool), the ``top_k``
    neurons ``i`` of the previous layer (``prev``: [tokens, neurons'] bool) with the highest
    ``P(j fires | i fired)`` over the tokens, among those that fired at least ``min_support``
    times; returns ``(ids, probability)``, both [neurons, top_k] (probability 0 where no
    candidate predicts anything). Ties in the probability (rare ``i``, or ``j`` firing always)
    go to the ``i`` seen firing with ``j`` most."""
    if prev.ndim != 2 or cur.ndim != 2 or prev.shape[0] != cur.shape[0]:
        raise ValueError(f"prev and cur must be [tokens, neurons] over the same tokens, got "
                         f"{prev.shape} and {cur.shape}")
    tokens = prev.shape[0]
    a_prev = torch.from_numpy(np.ascontiguousarray(prev)).float()
    a_cur = torch.from_numpy(np.ascontiguousarray(cur)).float()
    k = top_k
    tie = 0.5 / (tokens ** 3 + 1)          # below the smallest gap between two ratios (1 / T^2)
    support = a_prev.sum(0)
    # only previous-layer neurons with enough support can predict anything: the others score 0
    # and would only fill the table
    cand = torch.nonzero(support >= min_support).flatten()
    if cand.numel() < k:
        cand = torch.unique(torch.cat([cand, torch.arange(min(k, a_prev.shape[1]))]))
    inv = torch.where(support[cand] >= min_support, 1.0 / support[cand].clamp(min=1), 0.0)
    prev_c = a_prev[:, cand]
    neurons = a_cur.shape[1]
    ids = np.zeros((neurons, k), dtype=np.int64)
    prob = np.zeros((neurons, k))
    # neurons in chunks: a full [neurons x neurons] table of a large model (28672^2 floats,
    # 3.3 GB) would not fit in memory
    for c0 in range(0, neurons, _FIT_CHUNK):
        both = a_cur[:, c0:c0 + _FIT_CHUNK].T @ prev_c              # [neuron, candidate]
        score = both * inv
        _, top = torch.topk(score + tie * both, k, dim=1)
        prob[c0:c0 + _FIT_CHUNK] = torch.gather(score, 1, top).double().numpy()
        ids[c0:c0 + _FIT_CHUNK] = cand[top].numpy()
    return ids, prob


class NeuronPredictor:
    """See the module docstring."""

    def __init__(self, layers: int, neurons: int, *, window: int = 16, top_k: int = 4,
                 counter_bits: int = 2, coefficient: float = 0.85, bands: int = 4,
                 bloom_bits: int = 4096, seed: int = 0):
        for name, v, lo, hi in (("layers", layers, 1, 4096), ("neurons", neurons, 1, 1 << 20),
                                ("window", window, 1, 1024), ("top_k", top_k, 1, 64),
                                ("counter_bits", counter_bits, 1, 8), ("bands", bands, 1, 64),
                                ("bloom_bits", bloom_bits, 8, 1 << 24)):
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
        if not isinstance(coefficient, (int, float)) or not 0 < coefficient <= 2:
            raise ValueError(f"coefficient must be in (0, 2], got {coefficient!r}")
        self.layers, self.neurons, self.window, self.top_k = layers, neurons, window, top_k
        self.counter_bits, self.coefficient, self.bands = counter_bits, float(coefficient), bands
        self.counter_max = (1 << counter_bits) - 1
        rng = np.random.default_rng(seed)
        self._hash_a = rng.integers(1, _PRIME, size=bands, dtype=np.int64)
        self._hash_b = rng.integers(0, _PRIME, size=bands, dtype=np.int64)
        self.table = np.zeros((layers, neurons, top_k), dtype=np.int64)   # previous-layer ids
        self.table_valid = np.zeros((layers, neurons, top_k), dtype=bool)
        self.table_prob = np.zeros((layers, neurons, top_k))              # P(neuron | that one)
        self.counters = np.zeros((layers, neurons), dtype=np.int64)
        self.history = [deque(maxlen=window) for _ in range(layers)]     # bitmaps per layer
        self.signatures = [deque(maxlen=window) for _ in range(layers)]  # band values per token
        self.blooms = [_Bloom(bloom_bits) for _ in range(layers)]
        self.bloom_bits = bloom_bits
        self.similar_hits = 0

    # ---- offline ----------------------------------------------------------------------------
    def fit(self, trace: ActivationTrace, min_support: int = 2):
        """Build the cross-layer table from a profiling ``trace`` (same layers and neurons)."""
        if (trace.layers, trace.neurons) != (self.layers, self.neurons):
            raise ValueError(f"trace has {trace.layers} layers x {trace.neurons} neurons, the "
                             f"predictor {self.layers} x {self.neurons}")
        for l in range(1, self.layers):
            ids, prob = correlation_table(trace.active[:, l - 1], trace.active[:, l], self.top_k,
                                          min_support)
            self.table[l] = ids
            self.table_prob[l] = np.round(prob * 255) / 255                # 8 bits
            self.table_valid[l] = prob > 0
        return self

    # ---- online ----------------------------------------------------------------------------
    def _bands(self, active: np.ndarray) -> list:
        idx = np.flatnonzero(active).astype(np.int64)
        if idx.size == 0:
            return [-1] * self.bands
        return [int(((a * idx + b) % _PRIME).min()) for a, b in zip(self._hash_a, self._hash_b)]

    def scores(self, layer: int, prev_active: np.ndarray | None) -> np.ndarray:
        """The score in [0, 1] of every neuron of ``layer`` for this token (``prev_active``: the
        previous layer's actual activations, None for layer 0)."""
        w_corr, w_win, w_sim, w_cnt = WEIGHTS
        parts, weights = [], []
        if layer > 0 and prev_active is not None:
            hits = prev_active[self.table[layer]] & self.table_valid[layer]
            # the strongest active predictor's P(neuron | it); none active: no evidence for
            parts.append(np.where(hits, self.table_prob[layer], 0.0).max(axis=1))
            weights.append(w_corr)
            bands = self._bands(prev_active)
            similar = None
            for band, value in enumerate(bands):
                if value >= 0 and _band_key(band, value) in self.blooms[layer]:
                    for sig, bitmap in zip(reversed(self.signatures[layer]),
                                           reversed(self.history[layer])):
                        if sig[band] == value:
                            similar = bitmap
                            break
                if similar is not None:
                    break
            if similar is not None:
                self.similar_hits += 1
                parts.append(similar.astype(np.float64))
                weights.append(w_sim)
        if self.history[layer]:
            parts.append(np.mean(self.history[layer], axis=0))
            weights.append(w_win)
        parts.append(self.counters[layer] / self.counter_max)
        weights.append(w_cnt)
        return np.average(np.stack(parts), axis=0, weights=weights)

    def predict(self, layer: int, prev_active: np.ndarray | None) -> np.ndarray:
        """Predicted active neurons of ``layer`` for this token (bool array)."""
        return self.coefficient * self.scores(layer, prev_active) >= 0.5

    def observe(self, layer: int, active: np.ndarray, prev_active: np.ndarray | None):
        """The actual activations of ``layer`` for this token (after it ran)."""
        active = np.asarray(active, dtype=bool)
        c = self.counters[layer]
        self.counters[layer] = np.clip(c + np.where(active, 1, -1), 0, self.counter_max)
        if layer > 0 and prev_active is not None:
            bands = self._bands(prev_active)
            if len(self.signatures[layer]) == self.window:
                self._rebuild_bloom(layer, skip_oldest=True)
            self.signatures[layer].append(bands)
            self.blooms[layer].add_signature(bands)
        self.history[layer].append(active)

    def _rebuild_bloom(self, layer, skip_oldest):
        """A Bloom filter cannot forget: rebuilt from the window when a token leaves it."""
        bloom = _Bloom(self.bloom_bits)
        for sig in list(self.signatures[layer])[1 if skip_oldest else 0:]:
            bloom.add_signature(sig)
        self.blooms[layer] = bloom

    def memory_bytes(self, per_layer: bool = False) -> dict:
        """The predictor's state as hardware/software would hold it, bytes per part: for all
        layers, or (``per_layer``) for the one layer being predicted - the working set that
        must be at hand while a layer runs (the other layers' state can wait in DRAM)."""
        index_bits = max(1, (self.neurons - 1).bit_length())
        layers = 1 if per_layer else self.layers
        return {
            "correlation_table": layers * self.neurons * self.top_k * (index_bits + 8) // 8,
            "window_bitmaps": layers * self.window * self.neurons // 8,
            "counters": layers * self.neurons * self.counter_bits // 8,
            "signatures": layers * self.window * self.bands * 8,
            "bloom_filters": layers * self.bloom_bits // 8,
        }


def evaluate(predictor: NeuronPredictor, trace: ActivationTrace, cold=None) -> PredictorAccuracy:
    """Replay ``trace`` token by token, layer by layer (predict, then observe); precision and
    recall over all neurons, or over ``cold`` (bool [layers, neurons]) only."""
    if (trace.layers, trace.neurons) != (predictor.layers, predictor.neurons):
        raise ValueError("trace and predictor differ in layers or neurons")
    mask = np.ones((trace.layers, trace.neurons), dtype=bool) if cold is None else np.asarray(cold)
    if mask.shape != (trace.layers, trace.neurons):
        raise ValueError(f"cold mask must be {trace.layers} x {trace.neurons}, got {mask.shape}")
    tp = fp = fn = n = 0
    for t in range(trace.tokens):
        for l in range(trace.layers):
            prev = trace.active[t, l - 1] if l else None
            guess = predictor.predict(l, prev)
            actual = trace.active[t, l]
            m = mask[l]
            tp += int((guess & actual & m).sum())
            fp += int((guess & ~actual & m).sum())
            fn += int((~guess & actual & m).sum())
            n += int(m.sum())
            predictor.observe(l, actual, prev)
    return PredictorAccuracy(tp, fp, fn, n)

