"""RELAYOUT on the model backend: the blocks a group moves, each member's checks, effect and time.

RELAYOUT (``hw/link/relayout.py``) on the model backend, each member's descriptor on its own,
as the host issues them: :func:`relayout_status` makes the unit's checks in its order
(``BAD_FIELD``, ``MISALIGNED``, ``DRAM_RANGE``, ``SRAM_RANGE``, nothing to send -> ``OK``) and
then the receivers' window checks block by block (``REMOTE_RANGE``: the unit starts nothing
after the first refused block); :func:`relayout_apply` copies this member's blocks from its
DRAM into the receivers' DRAM (and leaves the last two staged blocks in its SRAM staging
buffers, as the RTL does); :func:`relayout_cycles` times the unit's walk - the checks, the
first block's DMA, then per block the larger of the next DMA and this block's remote DRAM write
(the unit keeps one of each outstanding), the last write - and, for striped -> localized, no
less than the time the target needs to write every member's blocks into its DRAM one packet at
a time, or the busier of the two links into the target needs to carry the blocks from its side
(the senders share both, so they all finish at about that time). Each block sent to another
DIMM is one remote DRAM write: timed as a LINK_SEND (``cosim/link/timing.py``) plus
:data:`RELAYOUT_PACKET_CYCLES` per packet, its frames carried over the links and its replays
added (``cosim/link/bit_errors.py``).

The three take the :class:`~ndpdimm.cosim.link.model.LinkFabric` of the member's DIMM (its
DIMMs' models, packet split and checks, and the timing and carrying of a link descriptor);
the fabric's methods of the same names (``LinkFabric.relayout_status``, ...) call them, which
is how the model backend runs a RELAYOUT.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ndpdimm.cosim.link.bit_errors import expected_frame_cycles
from ndpdimm.cosim.link.timing import DISPATCH_CYCLES, HOP_CYCLES, target_cycles
from ndpdimm.hw.descriptors import RELAYOUT_COUNT_BITS, Opcode
from ndpdimm.hw.link.formats import WORD_BYTES, frame_flits
from ndpdimm.hw.link.transaction import DRAM_SPACE
from ndpdimm.hw.memory.port import BURST_BYTES, Status

if TYPE_CHECKING:
    from ndpdimm.cosim.link.model import LinkFabric

__all__ = ["RELAYOUT_CHECK_CYCLES", "RELAYOUT_PACKET_CYCLES", "relayout_moves", "relayout_status",
           "relayout_apply", "relayout_cycles"]

#: A RELAYOUT's checks (the unit's bit-serial division of n_blocks by the group size, 27, and
#: the command processor's hand-over): 30 cycles on the RTL for a member with nothing to send.
RELAYOUT_CHECK_CYCLES = RELAYOUT_COUNT_BITS + 6
#: Per packet of a relayout block sent to another DIMM, besides the remote DRAM write: fitted to
#: the three-core RTL system (striped -> localized and back, 64 B x 20, 512 B x 10, 2 KiB x 16
#: blocks: 37, 41 and 2 x 39 cycles per block more than the warm-row write). The receiver's
#: rows are not open when a block arrives (the constants of ``cosim/link/timing.py`` are for
#: warm rows), and the unit hands each block from DMA completion to the link and its completion
#: back.
RELAYOUT_PACKET_CYCLES = 39


def relayout_moves(fields: Mapping[str, int]) -> list[tuple[int, int, int, int]]:
    """The blocks one RELAYOUT moves when every member of its group runs ``fields``
    (``hw/link/relayout.py``): ``(from DIMM, from address, to DIMM, to address)`` per block, in
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


def _blocks(src: int, f):
    """Member DIMM ``src``'s moves ``(k, from address, to DIMM, to address)``."""
    return [(k, at, to, to_at) for k, (frm, at, to, to_at) in enumerate(relayout_moves(f))
            if frm == src]


def relayout_status(fabric: LinkFabric, src: int, link_id: int, f: Mapping[str, int]) -> Status:
    """The completion code of RELAYOUT ``f`` issued on member DIMM ``src`` of ``fabric``, whose
    ``LINK_ID`` register holds ``link_id``."""
    here = fabric.backends[src]
    n_dimms = min(link_id >> 4 & 0x1F, fabric.n_dimms)
    D, t, B, n = f["group_dimms"], f["target"], f["block_bytes"], f["n_blocks"]
    me = src - f["group_base"]
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
    for _, _, to, to_at in _blocks(src, f):
        for off, n_packet in fabric.split(B):
            if fabric.packet_status(fabric.backends[to], "write", DRAM_SPACE | (to_at + off),
                                    n_packet) != Status.OK:
                return Status.REMOTE_RANGE
    return Status.OK


def relayout_apply(fabric: LinkFabric, src: int, f: Mapping[str, int], status: Status) -> None:
    """Member ``src``'s blocks into the receivers' DRAM (up to the first refused block)."""
    here, B, staging = fabric.backends[src], f["block_bytes"], f["staging"]
    if status not in (Status.OK, Status.REMOTE_RANGE):
        return
    for j, (_, at, to, to_at) in enumerate(_blocks(src, f)):
        receiver = fabric.backends[to]
        data = here.core.dram.read(at, B)
        buf = staging + (j % 2) * B
        here.core.sram[buf:buf + B] = data
        here.unknown_sram.remove(buf, buf + B)
        for a, b in here.unknown_dram.overlap(at, at + B):
            here.unknown_sram.add(a - at + buf, b - at + buf)
        refused = False
        for off, n_packet in fabric.split(B):
            if fabric.packet_status(receiver, "write", DRAM_SPACE | (to_at + off),
                                    n_packet) != Status.OK:
                refused = True
                continue
            receiver.core.dram.write(to_at + off, data[off:off + n_packet])
            receiver.unknown_dram.remove(to_at + off, to_at + off + n_packet)
            for a, b in here.unknown_dram.overlap(at + off, at + off + n_packet):
                receiver.unknown_dram.add(a - at + to_at, b - at + to_at)
        if refused:
            # the DMA of the next block may have been under way: staging is undefined
            here.unknown_sram.add(staging, staging + 2 * B)
            return


def _dram_write_cycles(fabric: LinkFabric, n_bytes: int) -> float:
    """A receiver writing one block into its DRAM, one packet at a time."""
    return sum(target_cycles("write", DRAM_SPACE, n, 0) for _, n in fabric.split(n_bytes))


def relayout_cycles(fabric: LinkFabric, src: int, f: Mapping[str, int], status: Status,
                    dma_cycles: Callable[[int, int], float]) -> int:
    """Predicted ``CQ_CYCLES`` of RELAYOUT ``f`` on member ``src``; ``dma_cycles(address,
    n_bytes)`` is this DIMM's DRAM -> SRAM DMA time (its performance model)."""
    if status in (Status.BAD_FIELD, Status.MISALIGNED):
        return 1
    blocks = _blocks(src, f)
    if status != Status.OK or not blocks:
        return RELAYOUT_CHECK_CYCLES
    B = f["block_bytes"]
    packets = len(fabric.split(B))
    link = []
    for _, _, to, to_at in blocks:
        # each block is one remote DRAM write: its frames are carried (counted, their errors
        # drawn) and its replays delay it like a LINK_SEND's
        write = {"opcode": Opcode.LINK_SEND, "read": 0, "int32": 0, "dest": to,
                 "remote": DRAM_SPACE | to_at, "sram": f["staging"], "n_bytes": B}
        link.append(max(1, round(fabric.link_cycles(src, write))) - DISPATCH_CYCLES
                    + (RELAYOUT_PACKET_CYCLES * packets if to != src else 0)
                    + fabric.carry_descriptor(src, write))
    dma = [dma_cycles(at, B) - DISPATCH_CYCLES for _, at, _, _ in blocks]
    walk = RELAYOUT_CHECK_CYCLES + dma[0]
    for j in range(len(blocks) - 1):
        walk += max(dma[j + 1], link[j])
    walk += link[-1]
    if f["to_localized"]:
        # every member's blocks land in the target's DRAM one packet at a time, and those
        # from either side share the link into the target
        c, D, t = fabric.config, f["group_dimms"], f["target"]
        left = sum(_striped_blocks(f, j) for j in range(t))
        right = sum(_striped_blocks(f, j) for j in range(t + 1, D))
        if fabric.ber:    # the other senders' replays on the shared link: their expectation
            wire = sum(expected_frame_cycles(n, fabric.ber, c) for _, n in fabric.split(B))
        else:
            wire = sum(frame_flits(n, c.flit_bytes) * c.flit_cycles for _, n in fabric.split(B))
        write = _dram_write_cycles(fabric, B) + RELAYOUT_PACKET_CYCLES * packets
        busy = max(f["n_blocks"] * write, max(left, right) * wire)
        back = abs(f["group_base"] + t - src) * HOP_CYCLES / 2
        walk = max(walk, RELAYOUT_CHECK_CYCLES + dma[0] + busy + back)
    return max(1, round(walk))
