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
* **times** it with :meth:`LinkFabric.cycles`: dispatch; the first packet
  store-and-forward through every hop (a receiver checks a frame's CRC before
  it hands the packet on: per hop a fixed part and a part per word) and the
  answer's way back; the target's time for it (SRAM write, FP32/INT32 atomic
  add, DRAM write); every further packet at the pace of the slower of the
  wire (frame flits at the link's framing rate) and the target.

Where the numbers come from (constants below, each with its data): the
framing rate is the RTL link bench's (``bench/results/dimm_link.json``:
goodput within 0.2 % of it); dispatch and the target's per-packet and
per-word costs are fitted to the RTL harness with one DIMM addressing itself;
the per-hop costs and remote atomic adds to three RTL cores joined by two
links (``cosim/benches/link_system.py``, which also reports the model's
error for every case it measures: ``ndpdimm bench --suite dimm_link``).

RELAYOUT (``hw/relayout_unit.py``) on the model backend, each member's
descriptor on its own, as the host issues them: :meth:`LinkFabric.relayout_status`
makes the unit's checks in its order (``BAD_FIELD``, ``MISALIGNED``,
``DRAM_RANGE``, ``SRAM_RANGE``, nothing to send -> ``OK``) and then the
receivers' window checks block by block (``REMOTE_RANGE``: the unit starts
nothing after the first refused block); :meth:`LinkFabric.relayout_apply`
copies this member's blocks from its DRAM into the receivers' DRAM (and
leaves the last two staged blocks in its SRAM staging buffers, as the RTL
does); :meth:`LinkFabric.relayout_cycles` times the unit's walk - the checks,
the first block's DMA, then per block the larger of the next DMA and this
block's remote DRAM write (the unit keeps one of each outstanding), the last
write - and, for striped -> localized, no less than the time the target
needs to write every member's blocks into its DRAM one packet at a time, or
the busier of the two links into the target needs to carry the blocks from
its side (the senders share both, so they all finish at about that time).
"""

import numpy as np

from ndpdimm.hw.descriptors import RELAYOUT_COUNT_BITS, Opcode
from ndpdimm.hw.link_formats import WORD_BYTES, LinkConfig, frame_flits
from ndpdimm.hw.link_transaction import DRAM_SPACE
from ndpdimm.hw.memory_port import BURST_BYTES, Status

from .golden import accumulate_bits

__all__ = ["LinkFabric", "relayout_moves", "RELAYOUT_CHECK_CYCLES", "RELAYOUT_PACKET_CYCLES",
           "HOP_CYCLES", "HOP_WORD_CYCLES",
           "DISPATCH_CYCLES", "TARGET_PACKET_CYCLES", "REMOTE_ATOMIC_PACKET_CYCLES",
           "REMOTE_ATOMIC_WORD_CYCLES", "ATOMIC_PACKET_CYCLES",
           "WRITE_WORD_CYCLES", "ATOMIC_WORD_CYCLES", "DRAM_WORD_CYCLES", "DRAM_PACKET_CYCLES"]

#: Fitted to the RTL harness, one DIMM addressing itself (NdpCore(link=True), 16 KiB SRAM):
#: remote SRAM writes of 1, 32 and 80 words took 18, 56 and 132 cycles (1, 1 and 3 packets),
#: i.e. 8.2 + 8.57 per packet + 1.226 per word, exactly.
DISPATCH_CYCLES = 8.2
TARGET_PACKET_CYCLES = 8.57
WRITE_WORD_CYCLES = 1.226
#: Atomic adds at the same DIMM (its SRAM serves the initiator's reads too): 32 B, 1 and 2 KiB
#: took 21, 104, 199 cycles in the three-core RTL system (cosim/benches/link_system.py).
ATOMIC_PACKET_CYCLES = 10.1
ATOMIC_WORD_CYCLES = 2.68
#: Atomic adds at another DIMM, fitted to the same system over 1 and 2 hops (32 B, 1 KiB).
REMOTE_ATOMIC_PACKET_CYCLES = 9.7
REMOTE_ATOMIC_WORD_CYCLES = 2.26
#: Each hop of the first packet, fitted to the three-core system (writes of 32 B and 1 KiB over
#: 1 and 2 hops: 59/101 and 160/266 cycles): a fixed part for the data (or request) out and
#: the completion (or data) back, and a part per word - a receiver checks a frame's CRC before
#: it hands the packet on (store-and-forward: the frame's time on the wire, then its beats).
HOP_CYCLES = 39.5
HOP_WORD_CYCLES = 2.05
#: A DRAM-target packet, fitted to the same harness: remote DRAM writes of 64, 128, 512, 1024,
#: 2048 and 4096 B (1, 1, 1, 1, 2, 4 packets) took 32, 34, 46, 62, 116, 226 cycles, i.e.
#: 8.2 + 22 per packet + 1.0 per word (within 2 cycles).
DRAM_WORD_CYCLES = 1.0
DRAM_PACKET_CYCLES = 22
#: A RELAYOUT's checks (the unit's bit-serial division of n_blocks by the group size, 27, and
#: the command processor's hand-over): 30 cycles on the RTL for a member with nothing to send.
RELAYOUT_CHECK_CYCLES = RELAYOUT_COUNT_BITS + 6
#: Per packet of a relayout block sent to another DIMM, besides the remote DRAM write: fitted to
#: the three-core RTL system (striped -> localized and back, 64 B x 20, 512 B x 10, 2 KiB x 16
#: blocks: 37, 41 and 2 x 39 cycles per block more than the warm-row write). The receiver's
#: rows are not open when a block arrives (the constants above are for warm rows), and the
#: unit hands each block from DMA completion to the link and its completion back.
RELAYOUT_PACKET_CYCLES = 39


def relayout_moves(fields):
    """The blocks one RELAYOUT moves when every member of its group runs ``fields``
    (``hw/relayout_unit.py``): ``(from DIMM, from address, to DIMM, to address)`` per block, in
    block order (block ``k`` of ``n_blocks``; member ``j`` is DIMM ``group_base + j``)."""
    D, base, t, B = fields["group_dimms"], fields["group_base"], fields["target"], fields["block_bytes"]
    src, dst = fields["src"], fields["dst"]
    moves = []
    for k in range(fields["n_blocks"]):
        if fields["to_localized"]:
            moves.append((base + k % D, src + (k // D) * B, base + t, dst + k * B))
        else:
            moves.append((base + t, src + k * B, base + k % D, dst + (k // D) * B))
    return moves


def _striped_blocks(fields, member: int) -> int:
    """Blocks member ``member`` holds of a tensor striped over the RELAYOUT's group."""
    quo, rem = divmod(fields["n_blocks"], fields["group_dimms"])
    return quo + (member < rem)


class LinkFabric:
    """The DIMM-Link chain of a model-backend system (see the module docstring)."""

    def __init__(self, n_dimms: int, config: LinkConfig = None):
        if not isinstance(n_dimms, int) or isinstance(n_dimms, bool) or not 1 <= n_dimms <= 16:
            raise ValueError(f"n_dimms must be 1..16, got {n_dimms!r}")
        self.n_dimms = n_dimms
        self.config = LinkConfig() if config is None else config
        self.backends = [None] * n_dimms

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

    def _split(self, n_bytes: int) -> list:
        """(offset, bytes) of each packet a transfer of ``n_bytes`` is cut into."""
        step = self.config.max_payload
        return [(off, min(step, n_bytes - off)) for off in range(0, n_bytes, step)]

    def _packets(self, f):
        """(remote address, local address, bytes) of each packet."""
        return [(f["remote"] + off, f["sram"] + off, n) for off, n in self._split(f["n_bytes"])]

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

    def _target_cycles(self, kind: str, remote: int, n_bytes: int, hops: int) -> float:
        """The target's time for one packet of ``n_bytes``."""
        words = n_bytes // WORD_BYTES
        if remote & DRAM_SPACE:
            return DRAM_PACKET_CYCLES + DRAM_WORD_CYCLES * words
        if kind.startswith("atomic"):
            if hops:
                return REMOTE_ATOMIC_PACKET_CYCLES + REMOTE_ATOMIC_WORD_CYCLES * words
            return ATOMIC_PACKET_CYCLES + ATOMIC_WORD_CYCLES * words
        return TARGET_PACKET_CYCLES + WRITE_WORD_CYCLES * words

    def cycles(self, src: int, f, status: Status) -> int:
        """Predicted ``CQ_CYCLES`` of ``f`` (see the module docstring)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED, Status.SRAM_RANGE) or f["n_bytes"] == 0:
            return 1
        c, kind = self.config, self._kind(f)
        hops = abs(f["dest"] - src)
        packets = self._packets(f)
        first = packets[0][2]
        # the first packet, store-and-forward through every hop, and the answer's way back
        total = (DISPATCH_CYCLES + hops * (HOP_CYCLES + HOP_WORD_CYCLES * first // WORD_BYTES)
                 + self._target_cycles(kind, packets[0][0], first, hops))
        # the others follow at the pace of the slower of the wire and the target
        for remote, _, n in packets[1:]:
            frame = frame_flits(n, c.flit_bytes) * c.flit_cycles if hops else 0
            total += max(frame, self._target_cycles(kind, remote, n, hops))
        return max(1, round(total))

    # ---- RELAYOUT -------------------------------------------------------------------------
    @staticmethod
    def _member(src: int, f) -> int:
        return src - f["group_base"]

    def _relayout_blocks(self, src: int, f):
        """This member's moves ``(k, from address, to DIMM, to address)``."""
        return [(k, at, to, to_at) for k, (frm, at, to, to_at) in enumerate(relayout_moves(f))
                if frm == src]

    def relayout_status(self, src: int, link_id: int, f) -> Status:
        """The completion code of RELAYOUT ``f`` issued on member DIMM ``src``."""
        here = self.backends[src]
        n_dimms = min(link_id >> 4 & 0x1F, self.n_dimms)
        D, t, B, n = f["group_dimms"], f["target"], f["block_bytes"], f["n_blocks"]
        me = self._member(src, f)
        if not 1 <= D <= 16 or t >= D or not 0 <= me < D or f["group_base"] + D > n_dimms or B == 0:
            return Status.BAD_FIELD
        if B % BURST_BYTES or f["src"] % BURST_BYTES or f["dst"] % BURST_BYTES or \
                f["staging"] % WORD_BYTES:
            return Status.MISALIGNED
        count = _striped_blocks(f, me) if f["to_localized"] else (n if me == t else 0)
        extent = n if f["to_localized"] else _striped_blocks(f, 0)
        lo, hi = here.core.window
        if f["src"] < lo or f["src"] + count * B > hi or f["dst"] + extent * B > here.org.capacity_bytes:
            return Status.DRAM_RANGE
        if f["staging"] + 2 * B > here.core.S:
            return Status.SRAM_RANGE
        for _, _, to, to_at in self._relayout_blocks(src, f):
            for off, n_packet in self._split(B):
                if self._packet_status(self.backends[to], "write", DRAM_SPACE | (to_at + off),
                                       n_packet) != Status.OK:
                    return Status.REMOTE_RANGE
        return Status.OK

    def relayout_apply(self, src: int, f, status: Status):
        """This member's blocks into the receivers' DRAM (up to the first refused block)."""
        here, B, staging = self.backends[src], f["block_bytes"], f["staging"]
        if status not in (Status.OK, Status.REMOTE_RANGE):
            return
        for j, (_, at, to, to_at) in enumerate(self._relayout_blocks(src, f)):
            receiver = self.backends[to]
            data = here.core.dram.read(at, B)
            buf = staging + (j % 2) * B
            here.core.sram[buf:buf + B] = data
            here._unknown_sram.remove(buf, buf + B)
            for a, b in here._unknown_dram.overlap(at, at + B):
                here._unknown_sram.add(a - at + buf, b - at + buf)
            refused = False
            for off, n_packet in self._split(B):
                if self._packet_status(receiver, "write", DRAM_SPACE | (to_at + off),
                                       n_packet) != Status.OK:
                    refused = True
                    continue
                receiver.core.dram.write(to_at + off, data[off:off + n_packet])
                receiver._unknown_dram.remove(to_at + off, to_at + off + n_packet)
                for a, b in here._unknown_dram.overlap(at + off, at + off + n_packet):
                    receiver._unknown_dram.add(a - at + to_at, b - at + to_at)
            if refused:
                # the DMA of the next block may have been under way: staging is undefined
                here._unknown_sram.add(staging, staging + 2 * B)
                return

    def _dram_write_cycles(self, n_bytes: int) -> float:
        """A receiver writing one block into its DRAM, one packet at a time."""
        return sum(self._target_cycles("write", DRAM_SPACE, n, 0) for _, n in self._split(n_bytes))

    def relayout_cycles(self, src: int, f, status: Status, dma_cycles) -> int:
        """Predicted ``CQ_CYCLES`` of RELAYOUT ``f`` on member ``src``; ``dma_cycles(address,
        n_bytes)`` is this DIMM's DRAM -> SRAM DMA time (its performance model)."""
        if status in (Status.BAD_FIELD, Status.MISALIGNED):
            return 1
        blocks = self._relayout_blocks(src, f)
        if status != Status.OK or not blocks:
            return RELAYOUT_CHECK_CYCLES
        B = f["block_bytes"]
        packets = len(self._split(B))
        link = [self.cycles(src, {"opcode": Opcode.LINK_SEND, "read": 0, "dest": to,
                                  "remote": DRAM_SPACE | to_at, "sram": f["staging"], "n_bytes": B},
                            Status.OK) - DISPATCH_CYCLES
                + (RELAYOUT_PACKET_CYCLES * packets if to != src else 0)
                for _, _, to, to_at in blocks]
        dma = [dma_cycles(at, B) - DISPATCH_CYCLES for _, at, _, _ in blocks]
        walk = RELAYOUT_CHECK_CYCLES + dma[0]
        for j in range(len(blocks) - 1):
            walk += max(dma[j + 1], link[j])
        walk += link[-1]
        if f["to_localized"]:
            # every member's blocks land in the target's DRAM one packet at a time, and those
            # from either side share the link into the target
            c, D, t = self.config, f["group_dimms"], f["target"]
            left = sum(_striped_blocks(f, j) for j in range(t))
            right = sum(_striped_blocks(f, j) for j in range(t + 1, D))
            wire = sum(frame_flits(n, c.flit_bytes) * c.flit_cycles for _, n in self._split(B))
            write = self._dram_write_cycles(B) + RELAYOUT_PACKET_CYCLES * packets
            busy = max(f["n_blocks"] * write, max(left, right) * wire)
            back = abs(f["group_base"] + t - src) * HOP_CYCLES / 2
            walk = max(walk, RELAYOUT_CHECK_CYCLES + dma[0] + busy + back)
        return max(1, round(walk))
