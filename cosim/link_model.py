"""DIMM-Link on the model backend: N DIMMs whose link descriptors move data between their models.

A :class:`LinkFabric` joins the :class:`~ndpdimm.cosim.model_backend.ModelBackend`
of every DIMM of an ``NdpSystem`` built with ``CoreConfig(link=True)``
(a chain: DIMM ids 0..N-1, ``hops = |dest - src|``, a DIMM addressing itself
goes through its own router: 0 hops). When a DIMM dispatches a LINK_SEND or
ATOMIC_ADD descriptor, the fabric:

* **checks** it exactly as the RTL does (``hw/link_transaction.py``), in the
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
* **times** it with :meth:`LinkFabric.cycles`: dispatch, the one-way latency
  of each hop, the frames' time on the wire at the link's framing rate, the
  target's write rate when slower (atomic adds: two SRAM accesses per word;
  DRAM: about two cycles per word plus a memory round trip per packet), and
  the completion's way back.

Where the numbers come from: the framing rate and the 64 B one-way latency are
the RTL link bench's measurements (``bench/results/dimm_link.json``: goodput
within 0.2 % of the framing formula used here, 25 cycles for 64 B at a 2-cycle
channel); dispatch, per-packet and per-word costs of the target are fitted to
the RTL harness with one DIMM addressing itself (constants below). Atomic and
DRAM-target rates are the RTL blocks' documented cycle behaviour, and nothing
here is yet checked against several RTL cores joined by real links (that
co-simulation does not exist yet). RELAYOUT is not modelled: it completes
with ``UNSUPPORTED`` on the model backend.
"""

import numpy as np

from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.link_formats import WORD_BYTES, LinkConfig, frame_flits
from ndpdimm.hw.link_transaction import DRAM_SPACE
from ndpdimm.hw.memory_port import BURST_BYTES, Status

from .golden import accumulate_bits

__all__ = ["LinkFabric", "LINK_LATENCY_64B", "DISPATCH_CYCLES", "TARGET_PACKET_CYCLES",
           "WRITE_WORD_CYCLES", "ATOMIC_WORD_CYCLES", "DRAM_WORD_CYCLES", "DRAM_PACKET_CYCLES"]

#: One-way latency of a 64 B packet over one link, cycles (RTL bench, 2-cycle channel).
LINK_LATENCY_64B = 25
#: Fitted to the RTL harness, one DIMM addressing itself (NdpCore(link=True), 16 KiB SRAM):
#: remote SRAM writes of 1, 32 and 80 words took 18, 56 and 132 cycles (1, 1 and 3 packets),
#: i.e. 8.2 + 8.57 per packet + 1.226 per word, exactly.
DISPATCH_CYCLES = 8.2
TARGET_PACKET_CYCLES = 8.57
WRITE_WORD_CYCLES = 1.226
#: An atomic add reads and writes each word (the result writer's accumulate: 2 cycles per beat).
ATOMIC_WORD_CYCLES = 2 * WRITE_WORD_CYCLES
#: A DRAM-target packet: about 2 cycles per word plus the memory round trip it waits for
#: (hw/link_transaction.py docstring; an estimate, not fitted).
DRAM_WORD_CYCLES = 2
DRAM_PACKET_CYCLES = 60


class LinkFabric:
    """The DIMM-Link chain of a model-backend system (see the module docstring)."""

    def __init__(self, n_dimms: int, config: LinkConfig = None):
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or not 1 <= n_dimms <= 16:
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        self.n_dimms = n_dimms
        self.config = LinkConfig() if config is None else config
        self.backends = [None] * n_dimms
        c = self.config
        # a hop's pipeline latency without the packet's own serialization
        self.hop_latency = LINK_LATENCY_64B - frame_flits(64, c.flit_bytes) * c.flit_cycles

    def attach(self, dimm_id: int, backend):
        if not 0 <= dimm_id < self.n_dimms:
            raise ValueError(f"dimm_id must be 0..{self.n_dimms - 1}, got {dimm_id!r}")
        self.backends[dimm_id] = backend

    # ---- descriptor semantics -----------------------------------------------------------
    @staticmethod
    def _kind(f) -> str:
        if f["opcode"] == Opcode.ATOMIC_ADD:
            return "atomic_int32" if f["int32"] else "atomic_fp32"
        return "read" if f["read"] else "write"

    def _packets(self, f):
        """(remote address, local address, bytes) of each packet."""
        step = self.config.max_payload
        return [(f["remote"] + off, f["sram"] + off, min(step, f["n_bytes"] - off))
                for off in range(0, f["n_bytes"], step)]

    def _packet_status(self, target, kind, remote, n) -> Status:
        if remote & DRAM_SPACE:
            addr = remote - DRAM_SPACE
            lo, hi = target.core.window
            ok = (kind == "write" and addr % BURST_BYTES == 0 and n % BURST_BYTES == 0 and
                  addr >= lo and addr + n <= hi and addr + n <= target.org.capacity_bytes)
        else:
            ok = remote % WORD_BYTES == 0 and remote + n <= target.core.S
        return Status.OK if ok else Status.REMOTE_RANGE

    def status(self, src: int, link_id: int, f) -> Status:
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
            code = self._packet_status(target, kind, remote, n)
            if code != Status.OK:
                return code
        return Status.OK

    def apply(self, src: int, f):
        """The effect of ``f`` (whose status may be ``REMOTE_RANGE``: refused packets do nothing).
        Bytes a timing-only model (``functional=False``) does not know stay unknown where they
        are copied to."""
        here, target, kind = self.backends[src], self.backends[f["dest"]], self._kind(f)
        for remote, local, n in self._packets(f):
            if self._packet_status(target, kind, remote, n) != Status.OK:
                continue
            if kind == "read":
                src_unknown, dst_unknown, lo, delta = (target._unknown_sram, here._unknown_sram,
                                                       remote, local - remote)
            elif remote & DRAM_SPACE:
                src_unknown, dst_unknown, lo, delta = (here._unknown_sram, target._unknown_dram,
                                                       local, remote - DRAM_SPACE - local)
            else:
                src_unknown, dst_unknown, lo, delta = (here._unknown_sram, target._unknown_sram,
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

    def cycles(self, src: int, f, status: Status) -> int:
        """Predicted ``CQ_CYCLES`` of ``f`` (see the module docstring)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED, Status.SRAM_RANGE) or f["n_bytes"] == 0:
            return 1
        c, kind = self.config, self._kind(f)
        hops = abs(f["dest"] - src)
        one_way = hops * self.hop_latency
        wire = 0.0
        for remote, _, n in self._packets(f):
            frame = frame_flits(n, c.flit_bytes) * c.flit_cycles
            words = n // WORD_BYTES
            if remote & DRAM_SPACE:
                write = DRAM_WORD_CYCLES * words + DRAM_PACKET_CYCLES
            else:
                per_word = ATOMIC_WORD_CYCLES if kind.startswith("atomic") else WRITE_WORD_CYCLES
                write = TARGET_PACKET_CYCLES + per_word * words
            wire += max(frame, write) if hops else write      # 0 hops: the router loops it back
        ctrl = c.flit_cycles if hops else 0      # a one-flit request or completion on a wire
        if kind == "read":        # the request out, the data back
            total = DISPATCH_CYCLES + one_way + ctrl + one_way + wire
        else:                     # the data out, the completion back
            total = DISPATCH_CYCLES + one_way + wire + one_way + ctrl
        return max(1, round(total))
