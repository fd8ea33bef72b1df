"""The Hermes paper's online predictor (Section IV-C): a 4-bit state per neuron and a top-2 table.

As the paper states it (``../shared/papers/hermes.md``, "Online predictor"):

* every neuron ``j`` of a layer has a **state** ``s1`` in 0..15, initialised from its
  activation frequency over the prompt (the prefill) in 16 bands: above 90 % -> 15, below
  2 % -> 0; in between the 14 equal bands of [2 %, 90 %] give 1..14 (the paper names the two
  ends only: the equal bands are our reading);
* after each token the state moves **+4 if the neuron fired, -1 if not**, saturating at 0 and
  15 (:meth:`PaperPredictor.observe`);
* a **correlation table**, sampled offline (:meth:`PaperPredictor.fit`), holds each neuron's
  top-2 correlated neurons of the previous layer (highest ``P(j | i)``,
  :func:`~ndpdimm.sw.scenarios.hermes.predictor.correlation_table`); ``s2`` is how many of the
  two fired in the previous layer for this token;
* ``j`` is **predicted active when s1 + 6 x s2 > 15** (:meth:`PaperPredictor.predict`);
* a neuron whose state exceeds **T_h = 10** is hot (:meth:`PaperPredictor.hot`).

Two ablations of the paper's Fig. 13 use one piece of evidence only, the other held at the
middle of its range (our definition; the paper's is not in the stored pages):
``token-only`` predicts ``s1 + 6 x 1 > 15`` (one of two correlated neurons assumed firing),
``layer-only`` predicts ``7.5 + 6 x s2 > 15`` (the state assumed at the middle of 0..15).

:meth:`PaperPredictor.score` is ``(s1 + 6 s2) / 32`` in [0, 27/32] (/32 keeps every score exact in
float32), so the rule is ``score >= 0.5`` (:data:`RULE_SCORE`) and a workload's ``at_threshold``
moves the same predictor along its other operating points (``k / 32``). :meth:`PaperPredictor.memory_bytes`: 4 bits of
state and two previous-layer indices per neuron.

Cycle behaviour: none (host software: the paper keeps the tables in the host CPU's last-level
cache); the scenario charges one GPU kernel launch per layer for it, as for the window
predictor (``sw/scenarios/hermes/simulate.py``).

Bad input (shapes, ranges, an unknown evidence mode) raises ``ValueError``.
"""

import numpy as np

from ndpdimm.sw.scenarios.hermes.predictor import correlation_table

__all__ = ["PaperPredictor", "MODES", "STATE_MAX", "UP", "DOWN", "LAYER_WEIGHT", "RULE",
           "HOT_THRESHOLD", "TOP_K", "SCALE", "RULE_SCORE", "initial_state"]

STATE_MAX = 15          # 4-bit state (Section IV-C)
UP, DOWN = 4, 1         # +4 when the neuron fired, -1 when not
LAYER_WEIGHT = 6        # s1 + 6 x s2
RULE = 15               # ... > 15
HOT_THRESHOLD = 10      # T_h: hot when the state exceeds it
TOP_K = 2               # top-2 correlated neurons of the previous layer
BAND_LOW, BAND_HIGH = 0.02, 0.90
SCALE = 32             # score = (s1 + 6 s2) / 32: exact in float32
RULE_SCORE = (RULE + 1) / SCALE
#: which evidence a predictor uses: both (the paper's), the state only, the table only
MODES = ("both", "token-only", "layer-only")


def initial_state(frequency: np.ndarray) -> np.ndarray:
    """The 4-bit state of each neuron from its activation frequency over the prompt: above 90 %
    -> 15, below 2 % -> 0, the 14 equal bands of [2 %, 90 %] -> 1..14."""
    f = np.asarray(frequency, dtype=np.float64)
    if f.size and (np.nanmin(f) < 0 or np.nanmax(f) > 1 or np.isnan(f).any()):
        raise ValueError("activation frequencies must be in [0, 1]")
    band = 1 + np.floor((f - BAND_LOW) / (BAND_HIGH - BAND_LOW) * (STATE_MAX - 1))
    state = np.clip(band, 1, STATE_MAX - 1)
    state = np.where(f < BAND_LOW, 0, np.where(f > BAND_HIGH, STATE_MAX, state))
    return state.astype(np.int8)


class PaperPredictor:
    """See the module docstring. ``layers`` x ``neurons``: the layers it predicts, in execution
    order (layer 0 has no previous layer: ``s2`` = 0 there)."""

    def __init__(self, layers: int, neurons: int, *, mode: str = "both"):
        for name, v, lo, hi in (("layers", layers, 1, 4096), ("neurons", neurons, 1, 1 << 20)):
            if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
                raise ValueError(f"{name} must be an int in [{lo}, {hi}], got {v!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.layers, self.neurons, self.mode = layers, neurons, mode
        self.state = np.zeros((layers, neurons), dtype=np.int8)
        self.table = np.zeros((layers, neurons, TOP_K), dtype=np.int64)
        self.table_valid = np.zeros((layers, neurons, TOP_K), dtype=bool)

    # ---- offline ----------------------------------------------------------------------------
    def fit(self, active: np.ndarray, min_support: int = 2) -> "PaperPredictor":
        """The top-2 table of every layer but the first from a profiling trace ``active``
        ([tokens, layers, neurons] bool)."""
        self._check(active, "profiling trace")
        for l in range(1, self.layers):
            ids, prob = correlation_table(active[:, l - 1], active[:, l], TOP_K, min_support)
            self.table[l], self.table_valid[l] = ids, prob > 0
        return self

    def start(self, prompt: np.ndarray) -> "PaperPredictor":
        """Every state from the activation frequency over the prompt (``prompt``: [tokens,
        layers, neurons] bool, the prefill's activations)."""
        self._check(prompt, "prompt trace")
        self.state[:] = initial_state(prompt.mean(axis=0))
        return self

    def _check(self, a, what):
        if not isinstance(a, np.ndarray) or a.dtype != np.bool_ or a.ndim != 3 \
                or a.shape[1:] != (self.layers, self.neurons) or a.shape[0] < 1:
            raise ValueError(f"{what} must be a bool array [tokens, {self.layers}, "
                             f"{self.neurons}], got {getattr(a, 'dtype', type(a))} "
                             f"{getattr(a, 'shape', '')}")

    # ---- online -----------------------------------------------------------------------------
    def correlated_fired(self, layer: int, prev_active: np.ndarray | None) -> np.ndarray:
        """``s2``: how many of each neuron's table entries fired in the previous layer (0..2)."""
        if layer == 0 or prev_active is None:
            return np.zeros(self.neurons, dtype=np.int64)
        return (prev_active[self.table[layer]] & self.table_valid[layer]).sum(axis=1)

    def score(self, layer: int, prev_active: np.ndarray | None) -> np.ndarray:
        """``(s1 + 6 s2) / 32`` of every neuron of ``layer``, with the evidence the mode leaves
        out at the middle of its range."""
        s1 = self.state[layer].astype(np.float64)
        s2 = self.correlated_fired(layer, prev_active).astype(np.float64)
        if self.mode == "token-only":
            s2 = np.full_like(s1, TOP_K / 2)
        elif self.mode == "layer-only":
            s1 = np.full_like(s1, STATE_MAX / 2)
        return (s1 + LAYER_WEIGHT * s2) / SCALE

    def predict(self, layer: int, prev_active: np.ndarray | None) -> np.ndarray:
        """Predicted active neurons of ``layer`` for this token: ``s1 + 6 x s2 > 15``."""
        return self.score(layer, prev_active) * SCALE > RULE

    def observe(self, layer: int, active: np.ndarray):
        """The actual activations of ``layer`` for this token: +4 / -1, saturating."""
        s = self.state[layer].astype(np.int16) + np.where(np.asarray(active, dtype=bool), UP, -DOWN)
        self.state[layer] = np.clip(s, 0, STATE_MAX)

    def hot(self, layer: int) -> np.ndarray:
        """Neurons of ``layer`` whose state exceeds T_h = 10."""
        return self.state[layer] > HOT_THRESHOLD

    def memory_bytes(self, per_layer: bool = False) -> dict:
        """Its tables, bytes per part, for all layers or (``per_layer``) one."""
        index_bits = max(1, (self.neurons - 1).bit_length())
        layers = 1 if per_layer else self.layers
        return {"states": layers * self.neurons * 4 // 8,
                "correlation_table": layers * self.neurons * TOP_K * index_bits // 8}
