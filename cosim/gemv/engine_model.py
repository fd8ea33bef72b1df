"""Reference model of the GEMV engine at its stream boundary.

It takes what a monitor *observed* on the engine's input streams (the command,
the weight beats, the activation words) and returns the result beats the
engine must emit, computed with the golden model (``cosim/golden/numerics.py``). Because it
works from observed traffic rather than from the job that generated it, a
driver that sends the wrong words is caught as well as an engine that
computes wrongly.
"""

import math

import numpy as np
import torch

from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import RESULT_LANES, WORD_BITS, Dtype, GemvMode

__all__ = ["expected_beats_from_traffic", "beats_from_results", "compare_beats"]


def _unpack_words(words: list, n_words_each: int, dtype: Dtype) -> np.ndarray:
    """List of ints of ``n_words_each * 128`` bits -> [len, n_words_each * lanes] raw elements."""
    nbytes = n_words_each * WORD_BITS // 8
    raw = b"".join(int(w).to_bytes(nbytes, "little") for w in words)
    elem = np.uint16 if dtype.info.elem_bits == 16 else np.uint8
    return np.frombuffer(raw, dtype=elem).reshape(len(words), -1)


def _elements(raw: np.ndarray, dtype: Dtype) -> torch.Tensor:
    return golden.bits_elem(torch.from_numpy(raw.astype(np.int64)), dtype)


def expected_beats_from_traffic(command: dict, weight_beats: list, act_words: list,
                                n_units: int) -> list:
    """Result beats (dicts: index, batch, count, data, last) for one observed command."""
    dtype = Dtype(int(command["dtype"]))
    mode = GemvMode(int(command["mode"]))
    batch = int(command["batch_minus_one"]) + 1
    n_out, n_steps = int(command["n_out"]), int(command["n_steps"])
    lanes = dtype.info.lanes
    opg = n_units * (lanes if mode == GemvMode.AXPY else 1)
    n_groups = math.ceil(n_out / opg)
    if len(weight_beats) != n_groups * n_steps:
        raise AssertionError(f"observed {len(weight_beats)} weight beats, command needs "
                             f"{n_groups * n_steps}")
    if len(act_words) != n_groups * n_steps * batch:
        raise AssertionError(f"observed {len(act_words)} activation words, command needs "
                             f"{n_groups * n_steps * batch}")
    bits = np.zeros((batch, n_groups * opg), dtype=np.uint32)
    for g in range(n_groups):
        if n_steps:
            w = _unpack_words(weight_beats[g * n_steps:(g + 1) * n_steps], n_units, dtype)
            w = w.reshape(n_steps, n_units, lanes)                              # [S, U, L]
            x = _unpack_words(act_words[g * n_steps * batch:(g + 1) * n_steps * batch], 1, dtype)
            x = x.reshape(n_steps, batch, lanes)                                # [S, B, L]
            if mode == GemvMode.DOT:
                W = _elements(w.transpose(1, 0, 2).reshape(n_units, n_steps * lanes), dtype)
                X = _elements(x.transpose(1, 0, 2).reshape(batch, n_steps * lanes), dtype)
                y_t = golden.gemv_dot(W, X, dtype)                              # [B, U]
            else:
                Wt = _elements(w.reshape(n_steps, n_units * lanes), dtype)
                H = _elements(np.ascontiguousarray(x[:, :, 0].T), dtype)        # [B, S]
                y_t = golden.gemv_col_gather(Wt, H, torch.arange(n_steps), dtype)
            bits[:, g * opg:(g + 1) * opg] = golden.result_bits(y_t)
    return beats_from_results(bits[:, :n_out], opg)


def beats_from_results(bits: np.ndarray, outs_per_group: int) -> list:
    """[B, n_out] result bit patterns -> result-stream beats in the engine's emission order.

    Per output group: batch element by batch element, 8 outputs per beat in
    ascending index; ``last`` on the final beat.
    """
    batch, n_out = bits.shape
    beats = []
    for lo in range(0, n_out, outs_per_group):
        hi = min(lo + outs_per_group, n_out)
        for b in range(batch):
            for index in range(lo, hi, RESULT_LANES):
                count = min(RESULT_LANES, hi - index)
                data = [int(v) for v in bits[b, index:index + count]]
                beats.append({"index": index, "batch": b, "count": count,
                              "data": data + [0] * (RESULT_LANES - count), "last": False})
    if beats:
        beats[-1]["last"] = True
    return beats


def compare_beats(observed: list, expected: list, context: str = "") -> None:
    """In-order checker: raise ``AssertionError`` describing the first difference."""
    for n, (got, want) in enumerate(zip(observed, expected)):
        if got != want:
            fields = [k for k in want if got.get(k) != want[k]]
            detail = ""
            if "data" in fields:
                lane = next(i for i in range(RESULT_LANES) if got["data"][i] != want["data"][i])
                detail = (f" lane {lane}: got 0x{got['data'][lane]:08x}, "
                          f"expected 0x{want['data'][lane]:08x}")
            raise AssertionError(f"{context}result beat {n} (batch {want['batch']}, index "
                                 f"{want['index']}) differs in {fields}:{detail}\n"
                                 f"  got      {got}\n  expected {want}")
    if len(observed) != len(expected):
        raise AssertionError(f"{context}observed {len(observed)} result beats, "
                             f"expected {len(expected)}")
