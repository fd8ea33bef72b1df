"""Constrained-random full-chip benches of the NDP core (``hw/core/ndp_core.py``): descriptor streams and fuzzing.

Both benches drive the real core through its CSR port exactly as the host
runtime does (``NdpCoreTB`` of ``cosim/rtl/benches/core.py``) against the
timing-checked DRAM model (``DramDevice``), and check everything against the
Python reference model of the core, :class:`CoreModel` (``cosim/golden/core.py``,
also the model backend's functional half):

* ``CoreModel.expected_status(fields)`` predicts each descriptor's completion
  code from the documented check order (``hw/core/command_processor.py``: opcode,
  GEMV ``BAD_FIELD`` / ``MISALIGNED`` / window ``DRAM_RANGE`` / ``SRAM_RANGE``,
  then the weight streamer's index pre-scan ``BAD_INDEX`` on the index-list
  *contents*; DMA: window ``DRAM_RANGE``, then the DMA engine's ``MISALIGNED``,
  ``DRAM_RANGE``, ``SRAM_RANGE``), and the completion's DRAM bytes (the
  streamer's bursts x 64 for a GEMV, ``n_bytes`` for a DMA, 0 for a rejected
  descriptor);
* it holds the expected contents of the whole SRAM and of the DRAM (a
  ``SparseStore`` mirror of every byte the host loaded and every valid DMA
  wrote), and applies each valid descriptor in queue order: DMA copies, and
  GEMV results computed *from the memory images* (weights read back from DRAM
  in the streamer layout, X and the index list from the SRAM, padding lanes
  included) with the golden model (``cosim/golden/numerics.py``), written in the engine's
  beat order (group, batch element, ascending output) with the result
  writer's accumulate rule (``old + new`` in float32 with the canonical NaN,
  or INT32 wrap-around, ``hw/gemv/result_writer.py``).

``random_descriptor_streams``: rounds of constrained-random descriptor streams:
GEMV programs (DMA X / index list / prior Y in, GEMV dense / row gather /
column gather in FP16 / BF16 / INT8 with small random shapes, batch
1..max_batch, random pitches, sometimes ``accumulate = 1`` onto known prior
values, DMA Y out), random DMAs both ways, FENCEs (other bits random),
invalid descriptors of every kind (opcode 0 and 10..15, the DIMM-Link opcodes,
``BAD_FIELD``, ``MISALIGNED``, ``DRAM_RANGE`` - including DMA writes aimed at the
host's region -, ``SRAM_RANGE``, and GEMV programs whose index list has a bad
entry, often only the last one), some of them between the steps of a
program. Descriptors are pushed back to back in batches of up to the queue
depth, sometimes with the queue held (``CTRL.ENABLE`` = 0) to check ``STATUS``,
a refused ninth push (counted in ``CSR_ERRORS``, never executed: it would
wipe the SRAM) and a refused privileged ``WINDOW_BASE`` write; then every
completion is checked in order (id, opcode, code, DRAM bytes). Every GEMV's
results (DMA'd to DRAM) are checked bit for bit against
``GemvJob.result_bits()`` (plus the prior values for ``accumulate``); after
each round the whole DRAM equals the mirror. Concurrently, random 64 B host
pass-through reads and writes run on the ``host`` port in a region outside
the NDP window; every read is checked against a shadow copy. When a FENCE
completes, results that earlier descriptors DMA'd to DRAM are read back over
the host port and must be the bytes the DMA wrote. Some batches overfill the
completion queue instead (``STATUS[33]``; the core must stall, then drain in
order), and each round runs under a random arbitration ``POLICY``.

``fuzz_descriptors``: valid GEMV (one staged job per op and a row gather
whose last index entry is bad, all re-drawn every 30 descriptors) and DMA
descriptors get 1-3 random fields mutated to edge values (0, 1, field
maximum, window edges, just inside / exactly at / just past the SRAM end,
+-1/4/16/32/64 bytes, random; sometimes the opcode; sometimes an operand moved
to end exactly at the SRAM end or the weights at ``WINDOW_LIMIT``). Every
code must match ``expected_status``. Rejected descriptors (and header-only
ones: FENCE, undefined and DIMM-Link opcodes) run back to back in batches of
up to the queue depth; each batch must leave the DRAM without a new RD/WR
command, ``DRAM_BURSTS_READ`` unmoved, and every completion with 0 DRAM
bytes; mutated
descriptors that are still valid run one at a time and update the model
(constraints: bounded run time, results not overlapping their own operands,
whose outcome would depend on timing). The SRAM (DMA'd out) and the whole
DRAM must equal the model's images, which only valid descriptors changed
(SRAM and DRAM start with marker patterns). ACT / SOFTMAX / ELTWISE bases
(random valid fields over whatever the SRAM holds) are mutated the same way;
valid ones run in the batches (they touch no DRAM) and the model applies them
with ``cosim/golden/act_program.py``.

``checkers_catch_wrong_expectations``: the checks can fail - a wrong code
prediction, one flipped result bit and one flipped DRAM byte are detected.

This module holds the three cocotb tests (the module the pytest entry points of
``tests/hw/core/test_ndp_core_random_cocotb.py`` name). What they use: the testbench
``RandomCoreTB`` (host pass-through driver, descriptor batches, completion and memory
checkers) and ``Fuzzer`` in ``cosim/rtl/benches/random_tb.py``; the stream generator
``StreamGen`` in ``cosim/rtl/benches/descriptor_streams.py``; drawing and predicting
(``DescriptorPlanner``, ``DescriptorMutator``) in ``cosim/fuzz/plan.py``.

Environment: ``NDP_RANDOM_ROUNDS`` (rounds of the stream test, default 3),
``NDP_FUZZ_COUNT`` (fuzzed descriptors, default 120).
"""

import os

import cocotb

from ndpdimm.cosim.fuzz.plan import QUEUE_DEPTH, expected_status
from ndpdimm.cosim.rtl.benches.descriptor_streams import StreamGen
from ndpdimm.cosim.rtl.benches.random_tb import Fuzzer, RandomCoreTB
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

ROUNDS_ENV = "NDP_RANDOM_ROUNDS"
FUZZ_ENV = "NDP_FUZZ_COUNT"


@cocotb.test()
async def random_descriptor_streams(dut):
    """Constrained-random descriptor streams (GEMV programs, DMAs, FENCEs, invalid descriptors of
    every kind) in back-to-back batches with concurrent host traffic: every completion, every
    result bit, the DRAM and the SRAM as predicted."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED)
    await tb.start()
    rng = tb.rng
    await tb.init_memories()
    tb.start_host_traffic()
    rounds = int(os.environ.get(ROUNDS_ENV, "3"))
    n_desc = n_programs = 0
    for rnd in range(rounds):
        gen = StreamGen(tb)
        target = rng.randint(12, 28)
        gen.program(bad_index="last")                # every round: a bad last index entry
        while len(gen.stream) < target:
            r = rng.random()
            if r < 0.45:
                gen.program()
            elif r < 0.52:
                gen.program(bad_index=rng.choice(["last", "any"]))
            elif r < 0.60:
                gen.random_dma()
            elif r < 0.67:
                gen.activation()
            elif r < 0.75:
                gen.fence()
            else:
                gen.invalid()
        for kind in (Status.BAD_OPCODE, Status.UNSUPPORTED, Status.BAD_FIELD, Status.MISALIGNED,
                     Status.DRAM_RANGE, Status.SRAM_RANGE):
            if rnd == 0 or rng.random() < 0.3:
                gen.invalid(kind)                    # every kind, at least in the first round
        gen.fence()
        stream = gen.stream
        policy = rng.randrange(3)                    # host/NDP arbitration (privileged, idle)
        await tb.write("POLICY", policy)
        assert await tb.read("POLICY") == policy
        i = 0
        while i < len(stream):
            left = len(stream) - i
            r = rng.random()
            if r < 0.12 and left > QUEUE_DEPTH:
                k = rng.randint(QUEUE_DEPTH + 1, min(2 * QUEUE_DEPTH, left))
                await tb.run_full_cq(stream[i:i + k])
                tb.batches["completion queue full"] += 1
            else:
                hold = r < 0.45
                overflow = hold and rng.random() < 0.5 and left >= QUEUE_DEPTH
                k = QUEUE_DEPTH if overflow else rng.randint(1, min(QUEUE_DEPTH, left))
                await tb.run_batch(stream[i:i + k], hold=hold, overflow=overflow)
                tb.batches["held, refused push" if overflow else "held" if hold else "running"] += 1
            i += k
        for note, out, pitch, B, n_out, want in gen.programs:
            tb.compare_rows(tb.y_rows(tb.model.dump, out, pitch, B, n_out), want, f"round {rnd}: {note}")
        tb.compare_dram()
        tb.check_host_errors()
        n_desc += len(stream)
        n_programs += len(gen.programs)
        dut._log.info(f"round {rnd} (policy {policy}): {len(stream)} descriptors, {len(gen.programs)} "
                      f"GEMV programs OK; host {dict(tb.host_counts)}")
    await tb.stop_host_traffic()
    await tb.check_sram()
    tb.compare_dram()
    assert tb.host_counts["reads"] > 0 and tb.host_counts["writes"] > 0 and \
        tb.host_counts["fence_reads"] > 0, f"host traffic did not run: {dict(tb.host_counts)}"
    cycles = await tb.read("CYCLES")
    gemv_busy = await tb.read("GEMV_BUSY_CYCLES")
    dut._log.info(f"{cycles} NDP cycles ({gemv_busy} GEMV engine busy)")
    dut._log.info(f"{rounds} rounds, {n_desc} descriptors, {n_programs} GEMV programs; predicted codes "
                  f"{dict(tb.codes)}; batches {dict(tb.batches)}; host {dict(tb.host_counts)}")


# =========================================================================================
# fuzz_descriptors
# =========================================================================================

@cocotb.test()
async def fuzz_descriptors(dut):
    """Fuzzed GEMV / DMA descriptor fields: every completion code as ``expected_status`` predicts,
    rejected ones without DRAM access, SRAM and DRAM images changed only by valid ones."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED + 1000)
    await tb.start()
    await tb.init_memories()
    fz = Fuzzer(tb)
    count = int(os.environ.get(FUZZ_ENV, "120"))
    for step, arg in fz.schedule(count):
        if step == "restage":
            await fz.restage()
        elif step == "batch":
            await fz.flush(arg)
        elif step == "check":
            await tb.check_sram()
            tb.compare_dram()
        else:
            d = arg
            await tb.run_one(d)
            if d.opcode == Opcode.DMA and d.fields["to_dram"] and d.fields["n_bytes"]:
                a, k = d.fields["dram"], d.fields["n_bytes"]
                assert tb.model.dump(a, k) == tb.ref.dram.read(a, k), f"{d.note}: DRAM differs"
    dut._log.info(f"{count} fuzzed descriptors: {dict(fz.stats)}")
    dut._log.info(f"valid fuzzed GEMVs: {dict(sorted(fz.coverage.items()))}")
    assert fz.summary_ok(), dict(fz.stats)


# =========================================================================================
# the checks can fail
# =========================================================================================

@cocotb.test()
async def checkers_catch_wrong_expectations(dut):
    """A wrong completion prediction, a flipped result bit and a flipped DRAM byte are detected."""
    tb = RandomCoreTB(dut, cocotb.RANDOM_SEED + 2000)
    await tb.start()
    await tb.init_memories()
    job = tb.random_job("dense", small=True)
    f, dmas, yr = tb.stage_job(job)
    for dm in dmas:
        await tb.run_now(Opcode.DMA, dm, "DMA in")
    # the checker predicts the documented code, not OK, for a misaligned weight base
    bad = {**f, "w_base": f["w_base"] + 16}
    assert tb.ref.expected_status(f) == Status.OK
    assert expected_status(bad, tb.ref) == Status.MISALIGNED
    # a wrong prediction (OK for that descriptor) fails the completion check
    d = tb.evaluate(tb.word(Opcode.GEMV, bad), "misaligned GEMV, wrongly expected OK")
    d.want = Status.OK
    try:
        await tb.run_one(d)
    except AssertionError as e:
        assert "MISALIGNED" in str(e), e
    else:
        raise AssertionError("a wrong code prediction was not detected")
    # a flipped golden bit fails the result check
    g = await tb.run_now(Opcode.GEMV, f, "GEMV")
    out = tb.out_area.take(yr)
    await tb.run_now(Opcode.DMA, tb.dma_fields(1, out, f["y_addr"], yr), "DMA out")
    got = tb.y_rows(tb.model.dump, out, f["y_pitch"], job.batch, job.n_out)
    want = job.result_bits()
    tb.compare_rows(got, want, "dense GEMV")
    assert (g.y == want).all()
    wrong = want.copy()
    wrong.flat[tb.rng.randrange(wrong.size)] ^= 1 << tb.rng.randrange(32)
    try:
        tb.compare_rows(got, wrong, "corrupted golden")
    except AssertionError as e:
        assert "differ from the golden model" in str(e), e
    else:
        raise AssertionError("a corrupted golden result was not detected")
    # a flipped mirror byte fails the DRAM comparison
    tb.compare_dram()
    a = out + tb.rng.randrange(yr)
    tb.ref.dram.write(a, bytes([tb.ref.dram.read(a, 1)[0] ^ 0x40]))
    try:
        tb.compare_dram()
    except AssertionError as e:
        assert f"{a:#x}" in str(e), e
    else:
        raise AssertionError("a DRAM difference was not detected")
