"""GEMV row openings: which weight accesses open DRAM rows, and which of those conflict.

The weight layout (``cosim/gemv/weight_layout.py``) puts burst ``base + j*N + row`` of a
stored neuron in 64 KiB spans of the default address map: a span is one row of every rank
and bank group of one bank, so one open span per bank. A DOT GEMV's access ``j`` of a group
touches the spans its rows' bursts fall in; a span opens rows unless it is the span its bank
last opened, and an access whose first span opens rows in the bank the access before it
ended in is a *conflict* (the precharge waits for those reads). :class:`RowReplay` replays
that over every group of a DOT GEMV (dense or row gather); :func:`axpy_openings` flags the
accesses of a column gather's sweep. The access replay (``cosim/model/perf/access.py``)
charges an opening ``open_latency`` (``open_latency_aligned`` at span strides) and a
conflict ``conflict_latency`` more; the DRAM-bound path ``open_penalty`` and
``conflict_penalty``; the counters count ``spans opened x 8`` row misses.
"""

from typing import NamedTuple

import numpy as np

from ndpdimm.cosim.model.perf.structure import BURST_BYTES, CoreStructure

__all__ = ["RowOpenings", "RowReplay", "axpy_openings"]


class RowOpenings(NamedTuple):
    """A DOT GEMV's row openings, each per group: ``flags`` of its first ``min(bpr, WINDOW)``
    accesses (0: all its spans open; 1: opens rows; 2: a conflict), how many of its
    ``accesses`` open rows, how many of those ``conflicts``, how many ``spans`` they open."""
    flags: list
    accesses: list
    conflicts: list
    spans: list


def axpy_openings(s: CoreStructure, blocks: list, final: int, windowed: bool,
                  max_sweep: int) -> tuple[list, int]:
    """(row-opening flags, spans the sweep touches) of a column gather's accesses: ``blocks``
    are the spans of the accesses replayed, ``final`` the span of the group's last access
    (the one before the first, from the previous group); ``windowed``: the group has more
    accesses than those replayed, so its sweep is every span from the first to ``final``
    (unknown, ``None`` inside, beyond ``max_sweep`` spans). An access opens rows when it
    enters another span than the access before it and that span's bank holds other spans of
    the same sweep (else its rows stay open from the previous group)."""
    first = blocks[0]
    banks = [s.span_bank(b) for b in blocks]
    final_bank = s.span_bank(final)
    if windowed:
        sweep = set(range(first, final + 1)) if final - first < max_sweep else None
    else:
        sweep = set(blocks)
    per_bank = [0] * s.banks
    if sweep is not None:
        for b in sweep:
            per_bank[s.span_bank(b)] += 1
    opens = []
    for i, b in enumerate(blocks):
        prev, prev_bank = (blocks[i - 1], banks[i - 1]) if i else (final, final_bank)
        # 1: opens rows; 2: right after another row of the same bank was opened
        if b == prev or (sweep is not None and per_bank[banks[i]] < 2):
            opens.append(0)                 # same span, or its rows stay open across groups
        else:
            opens.append(2 if banks[i] == prev_bank else 1)
    spans = final - first + 1 if sweep is None else len(sweep)
    return opens, spans


class RowReplay:
    """The row openings of DOT GEMVs on one core, cached per shape and index list."""

    #: entries kept before the cache starts over
    CACHE_ENTRIES = 4096

    def __init__(self, structure: CoreStructure, window: int):
        self.structure, self.window = structure, window
        self._cache = {}

    def dot(self, g, fields) -> RowOpenings:
        """Row openings of a DOT GEMV (dense or row gather) of shape ``g``, replayed in the
        streamer's order over every group: access ``j`` of a group reads burst ``base + j*N +
        row`` of each of the group's rows, so it touches the 64 KiB spans those bursts fall
        in (8 rows: every rank and bank group of one bank). Measured: the spans opened x 8
        are the RTL's ``DRAM_ROW_MISSES`` on 17 of the 20 dense and row-gather calibration
        points of the scenario core without a refresh (docs/perf_model.md). A row gather's
        rows are ``fields["indices"]``; without them, evenly spread over the ``N`` stored
        ones."""
        s = self.structure
        idx = None
        if g.gather:
            idx = fields.get("indices")
            idx = (np.arange(g.n_out, dtype=np.int64) * fields["n_rows"] // max(g.n_out, 1)
                   if idx is None else np.asarray(idx, dtype=np.int64)[:g.n_out])
        key = (fields["w_base"], fields["n_rows"], g.bpr, g.n_out, g.per_group,
               None if idx is None else idx.tobytes())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        blk, N, u = s.span_bursts, fields["n_rows"], g.per_group
        base = fields["w_base"] // BURST_BYTES
        w = min(g.bpr, self.window)
        open_span = [-1] * s.banks
        bank_of = {}                        # span -> bank, over this replay
        flags, accesses, conflicts, spans, prev_bank = [], [], [], [], -1
        for grp in range(g.groups):
            lo_row, hi_row = grp * u, min(g.n_out, (grp + 1) * u)
            if idx is None:
                row0 = base + np.arange(g.bpr, dtype=np.int64) * N
                first_span = ((row0 + lo_row) // blk).tolist()
                last_span = ((row0 + hi_row - 1) // blk).tolist()
                touched = [range(a, b + 1) for a, b in zip(first_span, last_span)]
            else:
                sel = np.sort(idx[lo_row:hi_row])
                spans_of = (base + np.arange(g.bpr, dtype=np.int64)[:, None] * N + sel) // blk
                keep = np.ones(spans_of.shape, dtype=bool)
                keep[:, 1:] = spans_of[:, 1:] != spans_of[:, :-1]
                touched = [row[k].tolist() for row, k in zip(spans_of, keep)]
            group_flags, n_access, n_conflict, n_span = [], 0, 0, 0
            for j, blocks in enumerate(touched):
                opened = []
                first_bank = bank_of.get(blocks[0])
                if first_bank is None:
                    first_bank = bank_of[blocks[0]] = s.span_bank(blocks[0])
                # a conflict: its first span opens rows in the bank the access before it ended
                # in, so the precharge waits for those reads
                conflict = open_span[first_bank] != blocks[0] and first_bank == prev_bank
                for b in blocks:
                    bank = bank_of.get(b)
                    if bank is None:
                        bank = bank_of[b] = s.span_bank(b)
                    if open_span[bank] != b:
                        open_span[bank] = b
                        opened.append(bank)
                    prev_bank = bank
                flag = 0 if not opened else 2 if conflict else 1
                if opened:
                    n_access += 1
                    n_conflict += flag == 2
                    n_span += len(opened)
                if j < w:
                    group_flags.append(flag)
            flags.append(tuple(group_flags))
            accesses.append(n_access)
            conflicts.append(n_conflict)
            spans.append(n_span)
        out = RowOpenings(flags, accesses, conflicts, spans)
        if len(self._cache) > self.CACHE_ENTRIES:
            self._cache.clear()
        self._cache[key] = out
        return out
