"""Amaranth-simulator testbench access to a ``BankedSram`` port: load, dump, compare SRAM images.

Shared by the tests of the blocks that read and write the SRAM (feeder, result
writer, activation sequencer). Words are 256 bits (32 B), as in the NDP core.
"""

import random

__all__ = ["WORD", "write_words", "read_words", "image_words", "garbage", "check_image"]

#: Bytes per SRAM word.
WORD = 32


async def write_words(ctx, port, words: dict):
    """Write ``{word address: 256-bit int}`` (all bytes), one request per granted cycle."""
    for addr, value in sorted(words.items()):
        ctx.set(port.req.payload.addr, addr)
        ctx.set(port.req.payload.write, 1)
        ctx.set(port.req.payload.data, value)
        ctx.set(port.req.payload.mask, (1 << WORD) - 1)
        ctx.set(port.req.valid, 1)
        await ctx.tick().until(port.req.ready)
    ctx.set(port.req.valid, 0)


async def read_words(ctx, port, addrs: list) -> list:
    """Read word addresses, reads pipelined (the SRAM's credit paces them)."""
    out, i = [], 0
    ctx.set(port.resp.ready, 1)
    ctx.set(port.req.payload.write, 0)
    while len(out) < len(addrs):
        if i < len(addrs):
            ctx.set(port.req.payload.addr, addrs[i])
        ctx.set(port.req.valid, i < len(addrs))
        _, _, ready, valid, data = await ctx.tick().sample(port.req.ready, port.resp.valid,
                                                           port.resp.payload)
        if i < len(addrs) and ready:
            i += 1
        if valid:
            out.append(data)
    ctx.set(port.req.valid, 0)
    ctx.set(port.resp.ready, 0)
    return out


def image_words(image: bytearray, lo: int, hi: int) -> dict:
    """The SRAM words covering bytes [lo, hi) of ``image``."""
    return {w: int.from_bytes(image[w * WORD:(w + 1) * WORD], "little")
            for w in range(lo // WORD, -(-hi // WORD))}


def garbage(rng: random.Random, n: int) -> bytes:
    """Bytes that are mostly NaN / Inf / -1 patterns in every dtype (0xFF.., 0x7F.., 0x7C..)."""
    pool = [0xFF, 0x7F, 0x7C, 0xC0, 0x80, 0xFE, 0x01]
    return bytes(rng.choice(pool) if rng.random() < 0.7 else rng.randrange(256) for _ in range(n))


def check_image(got: bytes, want: bytes, what=""):
    """Byte-for-byte compare; the error names the first differing byte and its 32-bit element."""
    if got == want:
        return
    k = next(i for i in range(len(want)) if got[i] != want[i])
    e = k & ~3
    raise AssertionError(f"{what}SRAM byte {k:#x} differs: element at {e:#x} is "
                         f"{int.from_bytes(got[e:e + 4], 'little'):#010x}, expected "
                         f"{int.from_bytes(want[e:e + 4], 'little'):#010x}")
