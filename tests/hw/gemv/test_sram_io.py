# amaranth: UnusedElaboratable=no
"""Amaranth-simulator tests of the GEMV's SRAM-side helpers: ``ActivationFeeder`` and ``ResultWriter``.

One harness holds a real ``BankedSram`` (8 KiB, 4 banks, 256-bit words, 3
ports): port 0 the feeder, port 1 the writer, port 2 the testbench (preload
and read back). Several commands run back to back in one simulation.

* Feeder: random ``GemvJob``s (every op and dtype, odd K, batch 1-4, several
  groups) with garbage - NaN patterns included - everywhere around the
  operands; the ``acts`` stream, taken with random back-pressure, must equal
  ``job.act_words()`` exactly.
* Writer: ``job.expected_beats()`` (and beats of chosen partial results:
  NaN payloads, Inf, subnormals, -0, overflow) sent with random idle cycles;
  the SRAM is read back and compared byte for byte with a reference that
  applies the beats in order to an image of the SRAM (so bytes outside the
  rows must be unchanged). Accumulate results are also checked against one
  vectorised torch float32 / int32 addition of the whole tensors.
(First line: the parameter tests build components only to check errors.)
"""

import random

import numpy as np
import pytest
import torch
from amaranth.hdl import Elaboratable, Module
from amaranth.lib import wiring
from amaranth.sim import Simulator

from ndpdimm.cosim.amaranth_sim import streams as streams
from ndpdimm.cosim.amaranth_sim.sram_access import (
    check_image,
    garbage,
    image_words,
    read_words,
    write_words,
)
from ndpdimm.cosim.gemv.cases import random_job, random_values
from ndpdimm.cosim.gemv.engine_model import beats_from_results
from ndpdimm.cosim.gemv.job import EngineShape, GemvJob
from ndpdimm.cosim.golden import numerics as golden
from ndpdimm.hw.formats import Dtype, GemvMode
from ndpdimm.hw.gemv.activation_feeder import ActivationFeeder
from ndpdimm.hw.gemv.result_writer import ResultWriter
from ndpdimm.hw.memory.port import Status
from ndpdimm.hw.memory.sram import BankedSram, SramGeometry

GEOMETRY = SramGeometry(size_bytes=8192, n_banks=4, word_bits=256, n_ports=3)
WORD = GEOMETRY.word_bytes
assert WORD == 32
MAX_BATCH = 4
STEP_BITS = 8
INDEX_BITS = 12
FEEDER_PORT, WRITER_PORT, TB_PORT = 0, 1, 2


class Harness(Elaboratable):
    """SRAM + feeder + writer; the testbench drives the feeder's and writer's streams and SRAM port 2."""

    def __init__(self, geometry=GEOMETRY):
        g = geometry
        self.sram = BankedSram(g.size_bytes, g.n_banks, g.word_bits, g.n_ports, g.resp_depth)
        self.feeder = ActivationFeeder(g, max_batch=MAX_BATCH, step_bits=STEP_BITS, group_bits=8)
        self.writer = ResultWriter(g, max_batch=MAX_BATCH, index_bits=INDEX_BITS)

    def elaborate(self, platform):
        m = Module()
        m.submodules.sram = self.sram
        m.submodules.feeder = self.feeder
        m.submodules.writer = self.writer
        wiring.connect(m, self.feeder.sram, self.sram.ports[FEEDER_PORT])
        wiring.connect(m, self.writer.sram, self.sram.ports[WRITER_PORT])
        return m


def simulate(harness, *testbenches):
    sim = Simulator(harness)
    sim.add_clock(1e-9)
    for tb in testbenches:
        sim.add_testbench(tb)
    sim.run()


# ---- feeder ---------------------------------------------------------------------------------

def feeder_case(job, rng):
    """Place one job's X (or H) and index list in an SRAM image full of garbage; return (cmd, image, lo, hi)."""
    e = job.dtype.info.elem_bits // 8
    n_cols = job.X.shape[1]
    pitch = -(-n_cols * e // 16) * 16 + 16 * rng.randint(0, 2)
    x_addr = 16 * rng.randint(0, 12)
    x_end = x_addr + job.batch * pitch
    idx_addr = -(-x_end // 4) * 4 + 4 * rng.randint(0, 9)
    n_idx = len(job.idx) if job.idx is not None else 0
    lo, hi = 0, idx_addr + 4 * n_idx + 40
    image = bytearray(GEOMETRY.size_bytes)
    image[lo:hi] = garbage(rng, hi - lo)
    raw = golden.elem_bits(job.X, job.dtype).numpy().astype(np.uint16 if e == 2 else np.uint8)
    for b in range(job.batch):
        image[x_addr + b * pitch:x_addr + b * pitch + n_cols * e] = raw[b].tobytes()
    if job.mode == GemvMode.AXPY:
        image[idx_addr:idx_addr + 4 * n_idx] = job.idx.numpy().astype("<u4").tobytes()
    cmd = {"mode": job.mode, "dtype": int(job.dtype), "batch_minus_one": job.batch - 1,
           "n_cols": n_cols if job.mode == GemvMode.DOT else 0, "n_steps": job.n_steps,
           "n_groups": job.n_groups, "x_addr": x_addr, "x_pitch": pitch, "idx_addr": idx_addr}
    return cmd, image, lo, hi


def run_feeder(cases, seed=0, stall=0.5, geometry=GEOMETRY):
    """Run (cmd, image, lo, hi, n_words) cases back to back; return [(words, code, cycles)] per case."""
    h = Harness(geometry)
    rng = random.Random(seed)
    results = []

    async def tb(ctx):
        for cmd, image, lo, hi, n_words in cases:
            await write_words(ctx, h.sram.ports[TB_PORT], image_words(image, lo, hi))
            await streams.put(ctx, h.feeder.cmd, h.feeder.cmd_layout.const(cmd).as_bits())
            words = [await streams.get(ctx, h.feeder.acts, rng, stall) for _ in range(n_words)]
            status = await streams.get(ctx, h.feeder.status, rng, stall)
            assert not ctx.get(h.feeder.acts.valid), "word after the status"
            results.append((words, int(status.code), int(status.cycles)))
    simulate(h, tb)
    return results


FEEDER_SHAPES = [EngineShape(n_units=4, max_batch=MAX_BATCH, index_bits=INDEX_BITS,
                             step_bits=STEP_BITS),
                 EngineShape(n_units=2, max_batch=MAX_BATCH, index_bits=INDEX_BITS,
                             step_bits=STEP_BITS)]


@pytest.mark.parametrize("dtype", list(Dtype))
def test_feeder_random_jobs(dtype):
    """Every op, odd and even K, batch 1-4, 1-4 groups: acts == job.act_words(), bit for bit."""
    gen = random.Random(100 + int(dtype))
    cases, expected = [], []
    for n in range(6):
        op = ("dense", "row_gather", "col_gather")[n % 3]
        job = random_job(FEEDER_SHAPES[n % 2], gen, dtype=dtype, op=op, max_out=9, max_in=37,
                         special_share=0.1)
        cmd, image, lo, hi = feeder_case(job, gen)
        words = job.act_words()
        cases.append((cmd, image, lo, hi, len(words)))
        expected.append(words)
    for n, ((words, code, _), want) in enumerate(zip(run_feeder(cases, seed=int(dtype)), expected)):
        assert code == Status.OK
        assert words == want, f"case {n}: acts differ from GemvJob.act_words()"


def test_feeder_axpy_index_words_and_zero_lanes():
    """Column gather: 19 steps from an unaligned list cross 3 index words, 1-3 groups (1 unit)."""
    gen = random.Random(7)
    shape = EngineShape(n_units=1, max_batch=MAX_BATCH, index_bits=INDEX_BITS, step_bits=STEP_BITS)
    jobs = []
    for dtype in Dtype:
        job = random_job(shape, gen, dtype=dtype, op="col_gather", max_out=40, max_in=35)
        job.idx = torch.tensor([gen.randrange(job.X.shape[1]) for _ in range(19)])
        job.X = job.X[:1].repeat(3, 1)
        jobs.append(job)
    cases = []
    for job in jobs:
        cmd, image, lo, hi = feeder_case(job, gen)
        cmd["idx_addr"] |= 4 * 5 if cmd["idx_addr"] % 32 == 0 else 0     # start mid-word
        image[cmd["idx_addr"]:cmd["idx_addr"] + 76] = job.idx.numpy().astype("<u4").tobytes()
        cases.append((cmd, image, lo, hi + 40, len(job.act_words())))
    assert max(job.n_groups for job in jobs) > 1
    for (words, code, _), job in zip(run_feeder(cases, seed=3, stall=0.3), jobs):
        assert code == Status.OK
        assert words == job.act_words()


def test_feeder_detects_a_wrong_word():
    """The comparison can fail: one flipped bit in the expectation is caught."""
    gen = random.Random(11)
    job = random_job(FEEDER_SHAPES[0], gen, dtype=Dtype.FP16, op="dense", max_out=5, max_in=11)
    cmd, image, lo, hi = feeder_case(job, gen)
    want = job.act_words()
    [(words, code, _)] = run_feeder([(cmd, image, lo, hi, len(want))], stall=0.0)
    assert code == Status.OK and words == want
    want[len(want) // 2] ^= 1 << 100
    assert words != want


def test_feeder_status_codes_and_empty_commands():
    """Checks before any read: BAD_FIELD (dtype 3, DOT steps != ceil(K/lanes)), MISALIGNED; empty -> OK."""
    base = {"mode": GemvMode.DOT, "dtype": int(Dtype.FP16), "batch_minus_one": 0, "n_cols": 9,
            "n_steps": 2, "n_groups": 1, "x_addr": 0, "x_pitch": 32, "idx_addr": 0}
    image = bytearray(GEOMETRY.size_bytes)
    variants = [
        ({"dtype": 3}, Status.BAD_FIELD),
        ({"n_steps": 3}, Status.BAD_FIELD),
        ({"dtype": int(Dtype.INT8), "n_steps": 2}, Status.BAD_FIELD),   # INT8: ceil(9/16) = 1
        ({"x_addr": 8}, Status.MISALIGNED),
        ({"x_pitch": 40}, Status.MISALIGNED),
        ({"mode": GemvMode.AXPY, "idx_addr": 2, "n_steps": 1}, Status.MISALIGNED),
        ({"mode": GemvMode.AXPY, "idx_addr": 4, "n_steps": 0}, Status.OK),
        ({"n_groups": 0}, Status.OK),
        ({"n_cols": 0, "n_steps": 0}, Status.OK),
    ]
    cases = [(base | change, image, 0, 0, 0) for change, _ in variants]
    for (words, code, cycles), (change, want) in zip(run_feeder(cases, stall=0.0), variants):
        assert (words, code, cycles) == ([], want, 1), change


def test_feeder_rate():
    """Consumer always ready: a DOT command (batch 4) delivers its words at >= 4 per 5 cycles."""
    gen = random.Random(5)
    job = GemvJob("dense", Dtype.BF16, random_values((4, 33), Dtype.BF16, gen),
                  random_values((4, 33), Dtype.BF16, gen), shape=FEEDER_SHAPES[0])
    cmd, image, lo, hi = feeder_case(job, gen)
    want = job.act_words()
    [(words, code, cycles)] = run_feeder([(cmd, image, lo, hi, len(want))], stall=0.0)
    assert code == Status.OK and words == want
    # 5 steps x 4 words: first word in cycle 6, then 4 words per 5 cycles (a setup cycle per
    # step): last word in cycle 6 + 19 + 4 = 29, status 2 cycles later
    assert cycles == 31


# ---- writer ---------------------------------------------------------------------------------

def apply_beats(image: bytes, beats, cmd, stale_reads=False) -> bytearray:
    """Reference: apply the beats in order to an SRAM image (``old + new`` when accumulating).

    ``stale_reads=True`` models a writer that reads every word before any write
    of the command: a deliberately wrong model for the read-after-write tests.
    """
    img, before = bytearray(image), bytes(image)
    for beat in beats:
        for j in range(beat["count"]):
            a = (cmd["y_addr"] + beat["batch"] * cmd["y_pitch"] + 4 * (beat["index"] + j)) \
                % GEOMETRY.size_bytes
            new = beat["data"][j]
            if cmd["accumulate"]:
                src = before if stale_reads else img
                old = int.from_bytes(src[a:a + 4], "little")
                new = int(golden.accumulate_bits([old], [new], cmd["is_int"])[0])
            img[a:a + 4] = new.to_bytes(4, "little")
    return img


def run_writer(cases, seed=0, idle=0.3, geometry=GEOMETRY):
    """Run (cmd, image, beats) cases back to back; return [(image read back, status code)]."""
    h = Harness(geometry)
    rng = random.Random(seed)
    layout = h.writer.result_layout
    out = []

    async def tb(ctx):
        port = h.sram.ports[TB_PORT]
        for cmd, image, beats in cases:
            await write_words(ctx, port, image_words(image, 0, len(image)))
            await streams.put(ctx, h.writer.cmd, h.writer.cmd_layout.const(cmd).as_bits())
            for beat in beats:
                await streams.put(ctx, h.writer.results, layout.const(beat).as_bits(), rng, idle)
            status = await streams.get(ctx, h.writer.status)
            words = await read_words(ctx, port, list(range(len(image) // WORD)))
            out.append((b"".join(w.to_bytes(WORD, "little") for w in words), int(status.code)))
    simulate(h, tb)
    return out


SPECIAL_F32 = [0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
               0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x7F800001, 0x3F800000, 0xBF800000,
               0x33800000, 0x4B000001]


def partials(rng: random.Random, batch: int, n_out: int, is_int: bool, special_share=0.3):
    """Result patterns [batch, n_out]: random values with special FP32 patterns mixed in."""
    if is_int:
        pool = [0, 1, 0xFFFFFFFF, 0x7FFFFFFF, 0x80000000]
        return np.array([[rng.choice(pool) if rng.random() < special_share else rng.getrandbits(32)
                          for _ in range(n_out)] for _ in range(batch)], np.uint32)
    vals = np.array([[rng.choice(SPECIAL_F32) if rng.random() < special_share else
                      int(golden.f32_bits(torch.tensor(rng.gauss(0, 2.0 ** rng.randint(-20, 20))))
                          .item()) for _ in range(n_out)] for _ in range(batch)], np.uint32)
    return vals


def writer_case(rng, beats, batch, n_out, accumulate, is_int, pitch_words=None, y_word=None):
    """An SRAM image from word 0 to 2 words past Y: garbage, and old partial sums in the rows if accumulating."""
    row_words = -(-n_out // 8)
    pitch_words = row_words + rng.randint(0, 1) if pitch_words is None else pitch_words
    y_word = rng.randint(1, 4) if y_word is None else y_word
    n_words = y_word + (batch - 1) * pitch_words + row_words + 2
    image = bytearray(garbage(rng, n_words * WORD))
    if accumulate:
        old = partials(rng, batch, n_out, is_int)
        for b in range(batch):
            a = (y_word + b * pitch_words) * WORD
            image[a:a + 4 * n_out] = old[b].astype("<u4").tobytes()
    cmd = {"y_addr": y_word * WORD, "y_pitch": pitch_words * WORD, "accumulate": accumulate,
           "is_int": is_int, "batch_minus_one": batch - 1, "n_out": n_out}
    return cmd, image, beats


def rows_of(image: bytes, cmd) -> np.ndarray:
    b1 = cmd["batch_minus_one"] + 1
    return np.stack([np.frombuffer(image, "<u4", cmd["n_out"], cmd["y_addr"] + b * cmd["y_pitch"])
                     for b in range(b1)])


WRITER_SHAPES = [EngineShape(n_units=u, max_batch=MAX_BATCH, index_bits=INDEX_BITS,
                             step_bits=STEP_BITS) for u in (8, 3, 12, 4)]


@pytest.mark.parametrize("accumulate", [0, 1])
def test_writer_gemv_jobs(accumulate):
    """job.expected_beats() of random jobs (DOT at 3, 4, 8 and 12 units: word-crossing beats) -> Y."""
    gen = random.Random(20 + accumulate)
    cases = []
    for n in range(8):
        dtype = list(Dtype)[n % 3]
        shape = WRITER_SHAPES[n % 4]
        op = ("dense", "col_gather", "row_gather", "dense")[n % 4]
        job = random_job(shape, gen, dtype=dtype, op=op, max_out=30, max_in=9, special_share=0.1)
        if job.n_out == 0:
            continue
        cases.append(writer_case(gen, job.expected_beats(), job.batch, job.n_out, accumulate,
                                 dtype == Dtype.INT8))
    for n, ((got, code), (cmd, image, beats)) in enumerate(zip(run_writer(cases, seed=accumulate),
                                                               cases)):
        assert code == Status.OK
        check_image(got, apply_beats(image, beats, cmd), f"case {n}: ")
        # independent: one vectorised addition of the whole tensors
        new = np.zeros_like(rows_of(image, cmd))
        for beat in beats:
            new[beat["batch"], beat["index"]:beat["index"] + beat["count"]] = \
                beat["data"][:beat["count"]]
        want = golden.accumulate_bits(rows_of(image, cmd), new, cmd["is_int"]) if accumulate else new
        assert np.array_equal(rows_of(got, cmd), want), f"case {n}"


@pytest.mark.parametrize("is_int", [0, 1])
def test_writer_accumulate_specials(is_int):
    """Old and new partials full of NaN payloads, Inf, subnormals, -0, overflow; crossing beats too."""
    gen = random.Random(30 + is_int)
    cases = []
    for n, (batch, n_out, opg) in enumerate([(4, 21, 8), (3, 13, 3), (2, 30, 12), (1, 8, 8)]):
        beats = beats_from_results(partials(gen, batch, n_out, is_int, 0.6), opg)
        cases.append(writer_case(gen, beats, batch, n_out, 1, is_int))
    for n, ((got, code), (cmd, image, beats)) in enumerate(zip(run_writer(cases, seed=is_int),
                                                               cases)):
        assert code == Status.OK
        check_image(got, apply_beats(image, beats, cmd), f"case {n}: ")


def test_writer_read_after_write_same_word():
    """Accumulate into aliased rows (pitch 0 and pitch 1 word < row): beats hit a word back to back.

    The stale-read model (every read before any write) must disagree with the
    hardware: this proves the checker can fail and that the hazard was exercised.
    """
    gen = random.Random(40)
    cases = []
    for pitch_words, is_int, n_out, opg in [(0, 0, 8, 8), (0, 1, 5, 3), (1, 0, 20, 8),
                                            (0, 0, 17, 12)]:
        beats = beats_from_results(partials(gen, 4, n_out, is_int, 0.1), opg)
        cases.append(writer_case(gen, beats, 4, n_out, 1, is_int, pitch_words=pitch_words))
    for n, ((got, code), (cmd, image, beats)) in enumerate(zip(run_writer(cases, idle=0.0),
                                                               cases)):
        assert code == Status.OK
        check_image(got, apply_beats(image, beats, cmd), f"case {n}: ")
        with pytest.raises(AssertionError, match="differs"):
            check_image(got, apply_beats(image, beats, cmd, stale_reads=True))


def test_writer_status_codes():
    """n_out 0 -> OK at once; misaligned -> beats consumed, nothing written; bad beat -> BAD_FIELD."""
    gen = random.Random(50)
    bits = partials(gen, 2, 10, False)
    beats = beats_from_results(bits, 8)
    cmd, image, _ = writer_case(gen, beats, 2, 10, 0, 0, pitch_words=2, y_word=1)
    misaligned = dict(cmd, y_pitch=cmd["y_pitch"] + 4)
    wrong = [dict(b) for b in beats]
    wrong[1]["index"] = 8
    wrong[1]["count"] = 4                       # runs past n_out = 10: dropped
    late_last = [dict(b, last=False) for b in beats] + [dict(beats[0], last=True)]
    cases = [(dict(cmd, n_out=0), image, []), (misaligned, image, beats), (cmd, image, wrong),
             (cmd, image, late_last), (cmd, image, beats)]
    got = run_writer(cases)
    assert [code for _, code in got] == [Status.OK, Status.MISALIGNED, Status.BAD_FIELD,
                                         Status.BAD_FIELD, Status.OK]
    check_image(got[0][0], image)
    check_image(got[1][0], image)
    check_image(got[2][0], apply_beats(image, [b for n, b in enumerate(wrong) if n != 1], cmd))
    check_image(got[4][0], apply_beats(image, beats, cmd))


def test_writer_rate():
    """No idle: accumulate = 0 writes a beat per cycle, accumulate = 1 one per 2 cycles (+4 cycles)."""
    h = Harness()
    gen = random.Random(60)
    n_beats = 24
    beats = beats_from_results(partials(gen, 1, 8 * n_beats, False), 8 * n_beats)
    cycles = {}

    async def tb(ctx):
        for acc in (0, 1):
            cmd = {"y_addr": 0, "y_pitch": 0, "accumulate": acc, "is_int": 0,
                   "batch_minus_one": 0, "n_out": 8 * n_beats}
            await streams.put(ctx, h.writer.cmd, h.writer.cmd_layout.const(cmd).as_bits())
            for beat in beats:
                await streams.put(ctx, h.writer.results, h.writer.result_layout.const(beat).as_bits())
            status = await streams.get(ctx, h.writer.status)
            cycles[acc] = int(status.cycles)
    simulate(h, tb)
    assert cycles[0] <= n_beats + 4, cycles
    assert cycles[1] <= 2 * n_beats + 4, cycles


def test_response_fifo_of_one_word():
    """SRAM resp_depth = 1: the writer's queue shrinks to 1 (no deadlock), the feeder is only slower."""
    geometry = SramGeometry(size_bytes=8192, n_banks=4, word_bits=256, n_ports=3, resp_depth=1)
    gen = random.Random(70)
    beats = beats_from_results(partials(gen, 3, 19, False), 12)
    cmd, image, _ = writer_case(gen, beats, 3, 19, 1, 0, pitch_words=0)
    [(got, code)] = run_writer([(cmd, image, beats)], idle=0.0, geometry=geometry)
    assert code == Status.OK
    check_image(got, apply_beats(image, beats, cmd))
    job = random_job(FEEDER_SHAPES[0], gen, dtype=Dtype.FP16, op="dense", max_out=9, max_in=20)
    fcmd, fimage, lo, hi = feeder_case(job, gen)
    want = job.act_words()
    assert want
    [(words, code, _)] = run_feeder([(fcmd, fimage, lo, hi, len(want))], stall=0.0,
                                    geometry=geometry)
    assert code == Status.OK and words == want


def test_which_beats_cross_a_word():
    """The docstring's claim: a beat is one SRAM word unless DOT with n_units neither a multiple of 8
    nor a divisor of 8 (then some beats cross a word and the writer splits them)."""
    for n_units in range(1, 25):
        for mode_lanes in (1, 8, 16):           # DOT; AXPY FP16/BF16; AXPY INT8
            opg = n_units * mode_lanes
            beats = beats_from_results(np.zeros((2, 3 * opg + 5), np.uint32), opg)
            crossing = any(b["index"] % 8 + b["count"] > 8 for b in beats)
            assert crossing == (mode_lanes == 1 and n_units % 8 != 0 and 8 % n_units != 0), \
                (n_units, mode_lanes)


# ---- constructor validation -----------------------------------------------------------------

@pytest.mark.parametrize("kwargs, match", [
    ({"max_batch": 0}, "max_batch.*0"),
    ({"max_batch": 65}, "max_batch.*65"),
    ({"step_bits": "8"}, "step_bits.*'8'"),
    ({"group_bits": 31}, "group_bits.*31"),
    ({"depth": 1}, "depth.*1"),
    ({"depth": True}, "depth.*True"),
    ({"sram": 131072}, "SramGeometry.*131072"),
    ({"sram": SramGeometry(word_bits=128)}, "word_bits=128"),
])
def test_feeder_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ActivationFeeder(**kwargs)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_batch": 0}, "max_batch.*0"),
    ({"index_bits": 3}, "index_bits.*3"),
    ({"index_bits": 2.0}, r"index_bits.*2\.0"),
    ({"sram": "big"}, "SramGeometry.*'big'"),
    ({"sram": SramGeometry(word_bits=512)}, "word_bits=512"),
])
def test_writer_rejects_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ResultWriter(**kwargs)


def test_defaults_and_layouts():
    f, w = ActivationFeeder(), ResultWriter()
    assert f.cmd_layout.size == 1 + 2 + 4 + 20 + 16 + 16 + 3 * 17
    assert w.result_layout == ResultWriter(max_batch=16, index_bits=20).result_layout
    assert w.queue_depth == 3
    assert ResultWriter(SramGeometry(resp_depth=8)).queue_depth == 4
