"""DIMM-Link on the model backend: N DIMMs whose link descriptors move data between their models.

A :class:`LinkFabric` joins the :class:`~ndpdimm.cosim.model.backend.ModelBackend`
of every DIMM of an ``NdpSystem`` built with ``CoreConfig(link=True)``
(a chain: DIMM ids 0..N-1, ``hops = |dest - src|``, a DIMM addressing itself
goes through its own router: 0 hops). When a DIMM dispatches a LINK_SEND or
ATOMIC_ADD descriptor, the fabric:

* **checks** it exactly as the RTL does (``hw/link/transaction.py``), in the
  initiator's order - ``dest`` past the chain (``LINK_ID``) -> ``BAD_FIELD``;
  a local or remote address or the length not a multiple of 32 ->
  ``MISALIGNED``; the local range past the SRAM -> ``SRAM_RANGE``; zero bytes
  -> ``OK`` - and then packet by packet (``max_payload`` each) as the target
  does: an SRAM range past the target's SRAM, or a DRAM target (address bit
  39) that is not a WRITE, not 64 B aligned, outside the target's window or
  DIMM -> ``REMOTE_RANGE`` for that packet (nothing written by it; the others
  land), the first error being the descriptor's status;
* **applies** it to the models' images: a write copies this SRAM's bytes into
  the target's SRAM or DRAM, a read copies the target's SRAM here, an atomic
  add adds FP32 (round to nearest even, canonical NaN) or INT32 (wrap-around)
  lanes with ``golden.accumulate_bits`` - the same rule as the RTL's result
  writer. The data is in place when the initiator's descriptor completes
  (the RTL's guarantee); the target DIMM's own timeline is not slowed by it
  (its SRAM port is idle in the model);
* **times** it with :meth:`LinkFabric.cycles`: dispatch; the first packet
  store-and-forward through every hop (a receiver checks a frame's CRC before
  it hands the packet on: per hop a fixed part and a part per word) and the
  answer's way back; the target's time for it (SRAM write, FP32/INT32 atomic
  add, DRAM write); every further packet at the pace of the slower of the
  wire (frame flits at the link's framing rate) and the target.

  The constants and the formula, each constant with the RTL data it is fitted to, are in
  ``cosim/link/timing.py``; on top of that error-free time the frames the descriptor puts on
  the links are carried over them (:meth:`LinkFabric.carry_descriptor`): counted and, at
  ``ber > 0``, hit by bit errors whose replays add their time.

RELAYOUT descriptors are checked, applied and timed by ``cosim/link/relayout.py``
(:meth:`LinkFabric.relayout_status`, :meth:`LinkFabric.relayout_apply`,
:meth:`LinkFabric.relayout_cycles` call it), with the same packet checks and link timing.

Bit errors (``LinkFabric(..., ber, seed)``, ``NdpSystem(..., link_ber, link_seed)``): the
fabric's links are a :class:`~ndpdimm.cosim.link.bit_errors.LinkErrors` (``fabric.errors``),
which counts every frame per link direction (:meth:`LinkFabric.counters`) and draws the
errors; the error model, its counters and its goodput against the RTL link bench are in
``cosim/link/bit_errors.py``. Errors cost time, never data: :meth:`LinkFabric.apply` is the
same at every BER.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from ndpdimm.cosim.golden.numerics import accumulate_bits
from ndpdimm.cosim.link import relayout
from ndpdimm.cosim.link.bit_errors import LinkErrors
from ndpdimm.cosim.link.timing import link_cycles, target_cycles
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.link.formats import WORD_BYTES, LinkConfig
from ndpdimm.hw.link.transaction import DRAM_SPACE
from ndpdimm.hw.memory.port import BURST_BYTES, Status

if TYPE_CHECKING:
    from ndpdimm.cosim.golden.core import CoreModel
    from ndpdimm.hw.memory.dram import DramOrganization

__all__ = ["LinkFabric", "LinkedDimm"]


class LinkedDimm(Protocol):
    """What the fabric uses of a DIMM's model (``cosim.model.backend.ModelBackend`` is one; the
    link sits below the model backend, so it names the shape, not the class): the functional
    core (SRAM, DRAM, window), the DRAM organisation, ``load`` into the DRAM, and the byte
    ranges of SRAM and DRAM whose contents are unknown (``remove``, ``add``, ``overlap``)."""

    core: CoreModel
    org: DramOrganization
    unknown_sram: Any
    unknown_dram: Any

    def load(self, addr: int, data: bytes) -> None: ...


class LinkFabric:
    """The DIMM-Link chain of a model-backend system (see the module docstring).

    ``config`` (default ``LinkConfig()``) is the links'; ``ber`` and ``seed`` their bit-error
    rate and the seed of its draws (``cosim/link/bit_errors.py``). ``errors`` is the chain's
    :class:`~ndpdimm.cosim.link.bit_errors.LinkErrors`, ``backends[i]`` DIMM i's model once
    it is attached."""

    def __init__(self, n_dimms: int, config: LinkConfig | None = None, ber: float = 0.0,
                 seed: int = 0) -> None:
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or not 1 <= n_dimms <= 16:
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        self.errors = LinkErrors(n_dimms, config, ber, seed)   # checks config, ber, seed
        self.ber, self.seed, self.config = self.errors.ber, self.errors.seed, self.errors.config
        self.n_dimms = n_dimms
        self.backends = [None] * n_dimms

    # ---- error counters ---------------------------------------------------------------------
    def reset_counters(self) -> None:
        """Every link direction's counters back to zero (the error process goes on where it was)."""
        self.errors.reset_counters()

    def counters(self) -> dict[str, dict[str, int | float]]:
        """Per link direction (``"0->1"``, ``"1->0"``, ...): the links' counters
        (:meth:`~ndpdimm.cosim.link.bit_errors.LinkErrors.counters`)."""
        return self.errors.counters()

    def attach(self, dimm_id: int, backend: LinkedDimm) -> None:
        """Join DIMM ``dimm_id``'s model to the chain (``ModelBackend`` attaches itself)."""
        if not 0 <= dimm_id < self.n_dimms:
            raise ValueError(f"dimm_id must be 0..{self.n_dimms - 1}, got {dimm_id!r}")
        self.backends[dimm_id] = backend

    # ---- descriptor semantics -----------------------------------------------------------
    @staticmethod
    def _kind(f) -> str:
        if f["opcode"] == Opcode.ATOMIC_ADD:
            return "atomic_int32" if f["int32"] else "atomic_fp32"
        return "read" if f["read"] else "write"

    def split(self, n_bytes: int) -> list[tuple[int, int]]:
        """``(offset, bytes)`` of each packet a transfer of ``n_bytes`` is cut into
        (``max_payload`` each)."""
        step = self.config.max_payload
        return [(off, min(step, n_bytes - off)) for off in range(0, n_bytes, step)]

    def _packets(self, f):
        """(remote address, local address, bytes) of each packet."""
        return [(f["remote"] + off, f["sram"] + off, n) for off, n in self.split(f["n_bytes"])]

    def packet_status(self, target: LinkedDimm, kind: str, remote: int, n: int) -> Status:
        """What DIMM ``target`` answers to one packet of ``n`` bytes of a ``kind`` transfer
        (``"write"``, ``"read"``, ``"atomic_fp32"``, ``"atomic_int32"``) at its address
        ``remote``: ``OK``, or ``REMOTE_RANGE`` for an SRAM range past its SRAM or a DRAM target
        (address bit 39) that is not a write, not 64 B aligned, outside its window or DIMM."""
        if remote & DRAM_SPACE:
            addr = remote - DRAM_SPACE
            lo, hi = target.core.window
            ok = (kind == "write" and addr % BURST_BYTES == 0 and n % BURST_BYTES == 0 and
                  addr >= lo and addr + n <= hi and addr + n <= target.org.capacity_bytes)
        else:
            ok = remote % WORD_BYTES == 0 and remote + n <= target.core.S
        return Status.OK if ok else Status.REMOTE_RANGE

    def status(self, src: int, link_id: int, f: Mapping[str, int]) -> Status:
        """The completion code of link descriptor ``f`` (decoded fields) issued by DIMM ``src``
        whose ``LINK_ID`` register holds ``link_id``."""
        n_dimms = link_id >> 4 & 0x1F
        here = self.backends[src]
        if f["dest"] >= n_dimms or f["dest"] >= self.n_dimms:
            return Status.BAD_FIELD
        if (f["sram"] | f["remote"] | f["n_bytes"]) % WORD_BYTES:
            return Status.MISALIGNED
        if f["sram"] + f["n_bytes"] > here.core.S:
            return Status.SRAM_RANGE
        target, kind = self.backends[f["dest"]], self._kind(f)
        for remote, _, n in self._packets(f):
            code = self.packet_status(target, kind, remote, n)
            if code != Status.OK:
                return code
        return Status.OK

    def apply(self, src: int, f: Mapping[str, int]) -> None:
        """The effect of ``f`` (whose status may be ``REMOTE_RANGE``: refused packets do nothing).
        Bytes a timing-only model (``functional=False``) does not know stay unknown where they
        are copied to."""
        here, target, kind = self.backends[src], self.backends[f["dest"]], self._kind(f)
        for remote, local, n in self._packets(f):
            if self.packet_status(target, kind, remote, n) != Status.OK:
                continue
            if kind == "read":
                src_unknown, dst_unknown, lo, delta = (target.unknown_sram, here.unknown_sram,
                                                       remote, local - remote)
            elif remote & DRAM_SPACE:
                src_unknown, dst_unknown, lo, delta = (here.unknown_sram, target.unknown_dram,
                                                       local, remote - DRAM_SPACE - local)
            else:
                src_unknown, dst_unknown, lo, delta = (here.unknown_sram, target.unknown_sram,
                                                       local, remote - local)
            carried = src_unknown.overlap(lo, lo + n)
            if not kind.startswith("atomic"):   # a sum stays unknown where either operand was
                dst_unknown.remove(lo + delta, lo + delta + n)
            for a, b in carried:
                dst_unknown.add(a + delta, b + delta)
            if kind == "read":
                here.core.sram[local:local + n] = target.core.sram[remote:remote + n]
            elif remote & DRAM_SPACE:
                target.load(remote - DRAM_SPACE, bytes(here.core.sram[local:local + n]))
            elif kind == "write":
                target.core.sram[remote:remote + n] = here.core.sram[local:local + n]
            else:
                old = np.frombuffer(bytes(target.core.sram[remote:remote + n]), dtype="<u4")
                new = np.frombuffer(bytes(here.core.sram[local:local + n]), dtype="<u4")
                summed = accumulate_bits(old, new, is_int=kind == "atomic_int32")
                target.core.sram[remote:remote + n] = np.asarray(summed, dtype="<u4").tobytes()

    def cycles(self, src: int, f: Mapping[str, int], status: Status) -> int:
        """Predicted ``CQ_CYCLES`` of ``f`` (see the module docstring). Each call carries ``f``'s
        frames over the links it crosses: they are counted, and at ``ber > 0`` their bit errors
        are drawn and the replays' time added (:meth:`carry_descriptor`)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED, Status.SRAM_RANGE) or f["n_bytes"] == 0:
            return 1
        return max(1, round(self.link_cycles(src, f) + self.carry_descriptor(src, f, status)))

    def carry_descriptor(self, src: int, f: Mapping[str, int], status: Status = Status.OK) -> float:
        """Carry link descriptor ``f``'s packets from DIMM ``src`` over the links
        (:meth:`~ndpdimm.cosim.link.bit_errors.LinkErrors.carry`) and return the time their
        replays add: a write or atomic add sends its payload and gets a COMPLETION (header
        only) back; a read sends a READ_REQUEST (header only) and gets the data back (none for
        a packet the target refuses)."""
        dest, kind = f["dest"], self._kind(f)
        if dest == src:
            return 0.0
        hops = abs(dest - src)
        packets = self._packets(f)
        target = [target_cycles(kind, remote, n, hops) for remote, _, n in packets]
        if kind == "read":
            answered = [n if status == Status.OK or self.packet_status(
                self.backends[dest], kind, remote, n) == Status.OK else 0
                for remote, _, n in packets]
            return self.errors.carry(src, dest, [0] * len(packets), answered, target)
        return self.errors.carry(src, dest, [n for _, _, n in packets], [0] * len(packets), target)

    def link_cycles(self, src: int, f: Mapping[str, int]) -> float:
        """The error-free time of link descriptor ``f`` issued by DIMM ``src``, which sends
        something (:func:`~ndpdimm.cosim.link.timing.link_cycles` of its packets)."""
        return link_cycles(self.config, self._kind(f), abs(f["dest"] - src), self._packets(f))

    # ---- RELAYOUT (cosim/link/relayout.py) ------------------------------------------------
    def relayout_status(self, src: int, link_id: int, f: Mapping[str, int]) -> Status:
        """The completion code of RELAYOUT ``f`` issued on member DIMM ``src``."""
        return relayout.relayout_status(self, src, link_id, f)

    def relayout_apply(self, src: int, f: Mapping[str, int], status: Status) -> None:
        """This member's blocks into the receivers' DRAM (up to the first refused block)."""
        relayout.relayout_apply(self, src, f, status)

    def relayout_cycles(self, src: int, f: Mapping[str, int], status: Status,
                        dma_cycles: Callable[[int, int], float]) -> int:
        """Predicted ``CQ_CYCLES`` of RELAYOUT ``f`` on member ``src``; ``dma_cycles(address,
        n_bytes)`` is this DIMM's DRAM -> SRAM DMA time (its performance model)."""
        return relayout.relayout_cycles(self, src, f, status, dma_cycles)
