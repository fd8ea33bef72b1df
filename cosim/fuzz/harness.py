"""The descriptor fuzzer on the C++ fast harness: the cocotb fuzzer's checks at harness speed.

:class:`HarnessFuzzer` drives an :class:`~ndpdimm.cosim.rtl.harness.RtlBackend` (the Verilated
``NdpCore`` with the timing-checked C++ DRAM model) with the fuzz run that
:class:`~ndpdimm.cosim.fuzz.plan.DescriptorMutator` schedules, and checks, as the cocotb
``fuzz_descriptors`` bench does:

* every completion (id, opcode, code, DRAM bytes) against ``CoreModel``'s prediction, in order;
* rejected and header-only descriptors run back to back in batches of up to the queue depth:
  afterwards (and 64 idle cycles later) the DRAM has seen no new RD or WR command and
  ``DRAM_BURSTS_READ`` has not moved;
* a valid DMA to DRAM leaves exactly the model's bytes there;
* every ``restage_every`` descriptors and at the end, the whole memories: the SRAM (DMA'd out to
  ``DUMP_ADDR``) byte for byte against the model's image, every DRAM page the model holds
  against the harness's store, and the harness store holding no page the model does not (its
  touched-page count equals the model's), so a stray write anywhere in the 32 GiB is found.

Window edges come from the mutator: exact fit at both ends, one byte and one burst past each,
zero length, the 64-bit wrap-around (a window up to ``2^64 - 64``, addresses near the field
maximum) and a window that ends past the DIMM.

Cycle behaviour: one ``submit`` + ``run`` (run until idle) per batch or valid descriptor; no
Python call per cycle. A failure raises ``AssertionError`` whose message starts with the seed.
"""

import random
import time
from collections.abc import Callable

from ndpdimm.cosim.backend import Completion, CoreConfig
from ndpdimm.cosim.fuzz.plan import (
    DUMP_ADDR,
    WINDOW,
    Desc,
    DescriptorMutator,
    DescriptorPlanner,
)
from ndpdimm.cosim.gemv.job import EngineShape
from ndpdimm.cosim.golden.core import CoreModel
from ndpdimm.hw.descriptors import Opcode
from ndpdimm.hw.memory.port import Status

__all__ = ["HarnessFuzzer", "FuzzResult", "run_fuzz"]

#: NDP cycles clocked after a batch of rejected descriptors before the DRAM counts are compared
#: (a late command would show up within them).
SETTLE_CYCLES = 64


class HarnessFuzzer(DescriptorPlanner):
    """The reference model and the checks, on an ``RtlBackend`` of ``config``."""

    def __init__(self, backend, config: CoreConfig, seed: int):
        self.backend, self.config, self.seed = backend, config, seed
        self.rng = random.Random(seed)
        self.next_id = 1
        self.init_planner(CoreModel.from_config(config, window=WINDOW))
        ref = self.ref
        self.shape = EngineShape(n_units=ref.U, max_batch=ref.max_batch, radix_bits=ref.radix_bits,
                                 index_bits=ref.index_bits, step_bits=ref.step_bits)
        self.queue_depth = config.desc_queue
        self.descriptors_run = 0

    def fail(self, msg: str):
        raise AssertionError(f"fuzz seed {self.seed}: {msg}")

    # ---- memory and registers ----------------------------------------------------------------
    def load(self, addr: int, data: bytes) -> None:
        """Host set-up write into DRAM (the harness's store and the model's mirror)."""
        self.backend.load(addr, data)
        self.ref.dram.write(addr, data)

    def set_window(self, lo: int, hi: int) -> None:
        b = self.backend
        b.csr_write("WINDOW_BASE", lo)
        b.csr_write("WINDOW_LIMIT", hi)
        got = (b.csr_read("WINDOW_BASE"), b.csr_read("WINDOW_LIMIT"))
        if got != (lo, hi):
            self.fail(f"window reads back {got[0]:#x}..{got[1]:#x}, wrote {lo:#x}..{hi:#x}")
        self.ref.window = (lo, hi)

    # ---- descriptors -------------------------------------------------------------------------
    def run_batch(self, batch: list[Desc]) -> list[Completion]:
        self.backend.submit([d.word for d in batch])
        done = self.backend.run()
        if len(done) != len(batch):
            self.fail(f"{len(done)} completions for {len(batch)} descriptors")
        for c, d in zip(done, batch):
            try:
                self.check({"id": c.id, "opcode": c.opcode, "code": int(c.status),
                            "dram_bytes": c.dram_bytes}, d)
            except AssertionError as e:
                self.fail(str(e))
        self.descriptors_run += len(batch)
        return done

    def run_now(self, layout_op, fields: dict, note: str = "") -> Desc:
        """Build, commit and run one descriptor (it must be predicted OK)."""
        d = self.commit(self.evaluate(self.word(layout_op, fields), note))
        if d.want != Status.OK:
            self.fail(f"{note}: predicted {d.want.name}")
        self.run_batch([d])
        return d

    def run_valid(self, d: Desc) -> None:
        """A committed, valid GEMV or DMA, alone; a DMA to DRAM must leave the model's bytes."""
        self.run_batch([d])
        if d.opcode == Opcode.DMA and d.fields["to_dram"] and d.fields["n_bytes"]:
            a, k = d.fields["dram"], d.fields["n_bytes"]
            if self.backend.dump(a, k) != self.ref.dram.read(a, k):
                self.fail(f"{d.note}: DRAM at {a:#x}+{k} differs from the model after the DMA")

    def flush(self, pending: list[Desc]) -> None:
        """Rejected (and FENCE / no-op) descriptors back to back: no DRAM RD/WR, no weight burst."""
        b = self.backend
        s0, bursts0 = b.stats(), b.csr_read("DRAM_BURSTS_READ")
        self.run_batch(pending)
        b.run_cycles(SETTLE_CYCLES)
        s1, bursts1 = b.stats(), b.csr_read("DRAM_BURSTS_READ")
        if (s1["RD"], s1["WR"]) != (s0["RD"], s0["WR"]) or bursts1 != bursts0:
            notes = "; ".join(f"{d.want.name} {d.note} {d.fields}" for d in pending)
            self.fail(f"rejected descriptors touched DRAM: RD {s0['RD']} -> {s1['RD']}, WR {s0['WR']} -> "
                      f"{s1['WR']}, DRAM_BURSTS_READ {bursts0} -> {bursts1}: {notes}")

    # ---- whole-memory checks -------------------------------------------------------------------
    def check_sram(self) -> None:
        """DMA the whole SRAM out and compare it with the model's image."""
        self.run_now(Opcode.DMA, self.dma_fields(1, DUMP_ADDR, 0, self.S), "SRAM dump")
        diff = self.sram_difference(self.backend.dump(DUMP_ADDR, self.S))
        if diff:
            self.fail(diff)

    def compare_dram(self) -> None:
        """Every page the model holds equals the harness's, and the harness holds no other page."""
        mirror = self.ref.dram
        pb = mirror.page_bytes
        pages = sorted(mirror._pages)
        for p in pages:
            got, want = self.backend.dump(p * pb, pb), mirror.read(p * pb, pb)
            if got != want:
                off = next(i for i in range(pb) if got[i] != want[i])
                self.fail(f"DRAM at {p * pb + off:#x}: {got[off:off + 16].hex()} expected "
                          f"{want[off:off + 16].hex()}")
        touched = self.backend.stats()["touched_bytes"]
        if touched != len(pages) * pb:
            self.fail(f"the harness's DRAM holds {touched // pb} touched pages, the model {len(pages)}: "
                      "something wrote outside what valid descriptors may write")

    def check_memories(self) -> None:
        self.check_sram()
        self.compare_dram()

    def init_memories(self) -> None:
        self.run_now(Opcode.DMA, self.load_markers(), "SRAM marker")


class _Mutator(DescriptorMutator):
    def restage(self) -> None:
        for step, arg in self.restage_steps():
            if step == "window":
                self.tb.set_window(*arg)
            else:
                self.tb.run_now(Opcode.DMA, arg, "fuzz base DMA in")


class FuzzResult(dict):
    """Counts of a fuzz run (``descriptors``, ``descriptors_run``, ``seconds``, ``per_second``,
    ``ndp_cycles``, ``codes``, ``stats``, ``coverage``): a plain dict, JSON-able."""


def run_fuzz(backend, config: CoreConfig, count: int, seed: int, *, restage_every: int = 30,
             progress: Callable[[int, int], None] | None = None) -> FuzzResult:
    """Fuzz ``count`` descriptors on ``backend`` (an ``RtlBackend`` of ``config``, freshly reset
    with the core enabled) and check everything; returns the counts. ``progress(done, count)`` is
    called after every restage."""
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    t0 = time.monotonic()
    fz = HarnessFuzzer(backend, config, seed)
    backend.csr_write("CTRL", 1)
    fz.set_window(*WINDOW)
    fz.init_memories()
    mut = _Mutator(fz)
    handlers = {"restage": lambda _: mut.restage(), "batch": fz.flush, "run": fz.run_valid,
                "check": lambda _: fz.check_memories()}
    for step, arg in mut.schedule(count, restage_every=restage_every):
        handlers[step](arg)
        if step == "restage" and progress is not None:
            progress(sum(v for k, v in mut.stats.items() if k in Status.__members__), count)
    if not mut.summary_ok():
        fz.fail(f"the run drew only one outcome: {dict(mut.stats)}")
    seconds = time.monotonic() - t0
    if progress is not None:
        progress(count, count)
    return FuzzResult(descriptors=count, descriptors_run=fz.descriptors_run, seed=seed,
                      seconds=seconds, per_second=count / seconds, ndp_cycles=backend.cycle,
                      codes={k: v for k, v in mut.stats.items() if k in Status.__members__},
                      stats={k: v for k, v in mut.stats.items() if k not in Status.__members__},
                      coverage=dict(sorted(mut.coverage.items())))
