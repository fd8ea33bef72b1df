"""Several DIMMs: :class:`NdpSystem`, a :class:`~ndpdimm.sw.driver.dimm.Dimm` per DIMM.

:class:`NdpSystem` is several DIMMs with the same API per DIMM, plus a GEMV
whose output rows are split across them (``store_weights_split`` /
``gemv_split``) reporting each DIMM's cycles and the parallel time (the max).

With ``CoreConfig(link=True)`` the DIMMs form a DIMM-Link chain whose descriptors reach each
other (``gemv_merged``, ``relayout``); :class:`SplitWeights` is a matrix spread over the DIMMs
and :class:`SystemRun` the per-DIMM cycles of one split operation.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ndpdimm.cosim.backend import Backend, CoreConfig
from ndpdimm.hw.formats import Dtype
from ndpdimm.sw.driver.buffers import GEMV_DTYPES, Buffer, check_tensor
from ndpdimm.sw.driver.dimm import Dimm
from ndpdimm.sw.driver.timeline import descriptor_timeline

__all__ = ["NdpSystem", "SplitWeights", "SystemRun", "relayout_round_trip_cycles"]


@dataclass
class SplitWeights:
    """A DOT weight matrix whose output rows are spread over the DIMMs of an :class:`NdpSystem`."""
    parts: list                # (dimm index, row0, row1, WeightBuffer)
    shape: tuple
    dtype: Dtype


@dataclass
class SystemRun:
    """Per-DIMM cycles of one split operation; the DIMMs work in parallel, so the time is the max."""
    operation: str
    backend: str
    per_dimm: list             # RunStats of each DIMM that took part

    @property
    def cycles(self) -> int:
        return max((r.elapsed_cycles for r in self.per_dimm), default=0)

    def as_dict(self) -> dict:
        return {"operation": self.operation, "backend": self.backend, "parallel_cycles": self.cycles,
                "per_dimm_cycles": [r.elapsed_cycles for r in self.per_dimm],
                "per_dimm": [r.as_dict() for r in self.per_dimm]}


class NdpSystem:
    """``n_dimms`` DIMMs, each a :class:`Dimm` on its own backend instance (``system[i]``).

    ``backend``: a name (one instance of it per DIMM) or a list of ``n_dimms`` Backend instances.
    With ``CoreConfig(link=True)`` the DIMMs form a DIMM-Link chain (ids 0..n-1, ``LINK_ID``
    set) and their LINK_SEND / ATOMIC_ADD / RELAYOUT descriptors reach each other: on the
    model backend through ``cosim/link/model.py``; on the RTL backend (2-4 DIMMs) the cores
    run in one harness (``cosim/rtl/harness.py`` :class:`RtlSystem`), joined by their RTL
    link ports through behavioural lane channels (``rtl`` holds it; backend keyword arguments
    such as ``latency`` or ``progress`` go to it, ``window`` to every DIMM).

    ``link_ber``, ``link_seed``: bit errors on that chain's links (a number in [0, 1e-2)). On
    the model, drawn from a numpy Generator seeded with ``link_seed``: frames are NAKed and
    replayed as the RTL link layer does, which costs time, never data. On the RTL, bits of
    the serial lanes flip and the link layer's CRC, NAK and replay deal with them.
    :meth:`link_counters` reads the per-link error counters (``docs/dimm_link.md``, "Bit
    errors and error counters").
    """

    def __init__(self, n_dimms: int, backend: str | Sequence[Backend] = "model",
                 config: CoreConfig | None = None, link_ber: float = 0.0, link_seed: int = 0,
                 **kwargs: Any) -> None:
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or n_dimms < 1:
            raise ValueError(f"n_dimms must be a positive integer, got {n_dimms!r}")
        if isinstance(backend, Backend):
            raise ValueError("every DIMM needs its own backend: pass a name or a list of "
                             f"{n_dimms} Backend instances")
        link = config is not None and config.link
        from ndpdimm.cosim.link.bit_errors import check_ber, check_seed
        link_ber = check_ber(link_ber, "link_ber")
        link_seed = check_seed(link_seed, "link_seed")
        if link_ber and not link:
            raise ValueError(f"link_ber={link_ber!r} needs a DIMM-Link system "
                             "(CoreConfig(link=True)), got config "
                             f"{'None' if config is None else 'with link=False'}")
        self.fabric = self.rtl = None
        if isinstance(backend, (list, tuple)):
            if len(backend) != n_dimms or len({id(b) for b in backend}) != n_dimms:
                raise ValueError(f"expected {n_dimms} distinct Backend instances, got {len(backend)}")
            if link and n_dimms > 1:
                raise ValueError("a DIMM-Link system builds its own model backends: pass "
                                 "backend='model', not instances")
            self.dimms = [Dimm(b, config, **kwargs) for b in backend]
        elif link and n_dimms > 1 and backend == "rtl":
            # DIMM-Link between RTL cores: one harness simulating them all, joined by their link
            # ports (cosim/rtl/harness.py RtlSystem); the DIMMs drive its cores
            from ndpdimm.cosim.rtl.harness import RtlSystem
            window = kwargs.pop("window", None)
            timeline = kwargs.pop("timeline", False)
            self.rtl = RtlSystem(config, n_dimms, ber=link_ber, seed=link_seed, **kwargs)
            self.dimms = [Dimm(core, window=window, timeline=timeline) for core in self.rtl.cores]
        elif link and n_dimms > 1:
            # DIMM-Link: one chain joining the DIMMs' models (cosim/link/model.py)
            if backend != "model":
                raise ValueError(f"DIMM-Link between {n_dimms} DIMMs runs on the 'model' or "
                                 f"'rtl' backend, got {backend!r}")
            from ndpdimm.cosim.link.model import LinkFabric
            self.fabric = LinkFabric(n_dimms, ber=link_ber, seed=link_seed)
            self.dimms = [Dimm(backend, config, fabric=self.fabric, dimm_id=i, **kwargs)
                          for i in range(n_dimms)]
        else:
            self.dimms = [Dimm(backend, config, **kwargs) for _ in range(n_dimms)]
        if link:
            for i, d in enumerate(self.dimms):
                d.set_link_id(i, n_dimms)
        self.link = link
        self.last_run: SystemRun | None = None

    def link_counters(self) -> dict:
        """Per DIMM-Link direction (``"0->1"``, ``"1->0"``, ...) the model fabric's counters since
        it was built or last reset (``self.fabric.reset_counters()``): ``frames_sent``,
        ``bytes``, ``wire_cycles``, ``crc_errors``, ``naks_sent``, ``replays``, ``timeouts``,
        ``replay_cycles`` (``cosim/link/bit_errors.py``, ``LINK_COUNTERS``). On the RTL backend the
        link ports' own counters (:meth:`RtlSystem.link_counters`: ``tx_*`` of the sender,
        ``rx_*`` and ``phy_*`` of the receiver, the channel's ``injected_bit_errors``). Empty
        for one DIMM (no link between DIMMs). ``ValueError`` without DIMM-Link."""
        if not self.link:
            raise ValueError("link_counters: this system has no DIMM-Link (build it with "
                             "CoreConfig(link=True))")
        if self.rtl is not None:
            return self.rtl.link_counters()
        return {} if self.fabric is None else self.fabric.counters()

    def write_timeline(self, path) -> Path:
        """Every DIMM's descriptors as one Chrome-trace/Perfetto JSON timeline, a process per
        DIMM (``sw/driver/timeline.py``); the DIMMs were made with ``timeline=True``."""
        if any(d.timeline_records is None for d in self.dimms):
            raise ValueError("the DIMMs keep no timeline: make the system with timeline=True")
        return descriptor_timeline({f"DIMM {i} ({d.name} backend)": d.timeline_records
                                    for i, d in enumerate(self.dimms)}, self.dimms[0].name).write(path)

    def __len__(self) -> int:
        return len(self.dimms)

    def __getitem__(self, i: int) -> Dimm:
        return self.dimms[i]

    def __iter__(self) -> Iterator[Dimm]:
        return iter(self.dimms)

    def close(self) -> None:
        for d in self.dimms:
            d.close()
        if self.rtl is not None:
            self.rtl.close()

    def store_weights_split(self, W: torch.Tensor, dtype: Dtype | str | int | None = None) -> SplitWeights:
        """DOT weights ``W`` [N, K] with rows split as evenly as possible over the DIMMs."""
        check_tensor("W", W, tuple(GEMV_DTYPES))
        if W.dim() != 2:
            raise ValueError(f"W must be 2-D, got shape {tuple(W.shape)}")
        n = W.shape[0]
        k = len(self.dimms)
        bounds = [n * i // k for i in range(k + 1)]
        parts = []
        for i, d in enumerate(self.dimms):
            r0, r1 = bounds[i], bounds[i + 1]
            if r1 > r0:
                parts.append((i, r0, r1, d.store_weights(W[r0:r1].contiguous(), dtype, "dot")))
        return SplitWeights(parts, tuple(W.shape), GEMV_DTYPES[W.dtype])

    def relayout(self, to_localized: bool, target: int, block_bytes: int, n_blocks: int,
                 src: Sequence[Buffer], dst: Sequence[Buffer], staging: Sequence[Buffer],
                 members: int | None = None) -> int:
        """One RELAYOUT over the first ``members`` DIMMs of the system (default all; a group is
        the chain's first members): each member's descriptor (``Dimm.relayout_descriptor``)
        submitted, then all waited for. ``src``, ``dst``, ``staging``: per member its Buffer
        (staging: ``2 block_bytes`` of SRAM). Returns the slowest member's cycles; a failed
        member raises :class:`NdpError`."""
        members = len(self.dimms) if members is None else members
        if not isinstance(members, int) or isinstance(members, bool) or not 1 <= members <= len(self.dimms):
            raise ValueError(f"members must be 1..{len(self.dimms)}, got {members!r}")
        group = self.dimms[:members]
        if not all(len(b) == members for b in (src, dst, staging)):
            raise ValueError(f"src, dst and staging need one buffer per member ({members})")
        descs = [d.relayout_descriptor(to_localized, members, target, block_bytes, n_blocks,
                                       src[i].addr, dst[i].addr, staging[i].addr)
                 for i, d in enumerate(group)]
        for d, desc in zip(group, descs):
            d.submit([desc])
        return max(d.wait([desc.id])[0].cycles for d, desc in zip(group, descs))

    def gemv_merged(self, W: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor], list[int]]:
        """Dense ``W x`` split by columns over the DIMMs of a DIMM-Link chain (DIMM ``i`` takes
        columns ``[K i / n, K (i + 1) / n)``): each computes its partial FP32 product on its own
        engine, then DIMMs 1, 2, ... in that order add theirs into DIMM 0's with ATOMIC_ADD, so
        the result is bit for bit ``((y0 + y1) + y2) + ...``. Returns ``(y, partials,
        merge_cycles)``: the merged product read from DIMM 0, each DIMM's partial product and
        each merge descriptor's cycles. The SRAM buffers it used are freed."""
        if not self.link:
            raise ValueError("gemv_merged needs a DIMM-Link system (CoreConfig(link=True))")
        n, K = len(self.dimms), W.shape[1]
        cols = [slice(K * i // n, K * (i + 1) // n) for i in range(n)]
        partial = [d.gemv(d.store_weights(W[:, c].contiguous()), x[..., c].contiguous())
                   for d, c in zip(self.dimms, cols)]
        bufs = [d.alloc_sram(y.numel() * 4) for d, y in zip(self.dimms, partial)]
        try:
            for d, buf, y in zip(self.dimms, bufs, partial):
                d.write(buf, y.contiguous())
            merge_cycles = []
            for i in range(1, n):                          # the merge order: DIMM 1, 2, ...
                d = self.dimms[i]
                desc = d.atomic_add_descriptor(0, bufs[0].addr, bufs[i].addr, bufs[i].nbytes)
                merge_cycles.append(d.run([desc], f"merge {i}")[0].cycles)
            y = self.dimms[0].read(bufs[0], torch.float32, tuple(partial[0].shape))
        finally:
            for d, b in zip(self.dimms, bufs):
                d.free(b)
        return y, partial, merge_cycles

    def gemv_split(self, split: SplitWeights, x: torch.Tensor) -> torch.Tensor:
        """Dense ``W x`` with every DIMM computing its rows; results concatenated. ``last_run``
        holds each DIMM's cycles and the parallel time."""
        outs, runs = [], []
        for i, r0, r1, wb in split.parts:
            outs.append(self.dimms[i].gemv(wb, x))
            runs.append(self.dimms[i].last_run)
        self.last_run = SystemRun("gemv dense split", self.dimms[0].name, runs)
        return torch.cat(outs, dim=-1)


def relayout_round_trip_cycles(n_dimms: int, block: int, n_blocks: int, config: CoreConfig | None,
                        target: int | None = None, system: NdpSystem | None = None) -> list:
    """Cycles (the slowest member) of striped -> localized and back (two ``SystemRun``), the
    tensor striped over ``n_dimms`` DIMMs, localized on member ``target`` (default the last).
    ``system``: an existing ``NdpSystem`` of at least ``n_dimms`` linked DIMMs to run on (its
    first ``n_dimms`` form the group; any backend; its buffers are freed after), else one is
    built from ``config`` on the model backend."""
    if system is None:
        system = NdpSystem(n_dimms, "model", config, functional=False)
    target = n_dimms - 1 if target is None else target
    per = -(-n_blocks // n_dimms)
    group = list(system)[:n_dimms]
    striped = [d.alloc(per * block) for d in group]
    localized = [d.alloc(n_blocks * block) for d in group]
    staging = [d.alloc_sram(2 * block) for d in group]
    try:
        return [system.relayout(to_localized, target, block, n_blocks, src, dst, staging,
                                members=n_dimms)
                for to_localized, src, dst in ((True, striped, localized),
                                               (False, localized, striped))]
    finally:
        for d, bufs in zip(group, zip(striped, localized, staging)):
            for b in bufs:
                d.free(b)
