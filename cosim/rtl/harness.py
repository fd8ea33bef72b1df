"""The RTL backend: the Verilated ``NdpCore`` in a shared library with a C++ harness, driven from Python.

What runs where. ``cosim/rtl/cpp/ndp_harness.cpp`` owns the simulation: both
clocks (NDP 1 GHz, DRAM tCK from the DRAM config), the DRAM behind the PHY
ports (the C++ ``TimingChecker`` and ``SparseStore`` of
``cosim/dram/cpp/dram_model.h``, the same rules as the cocotb ``DramDevice``:
every command timing-checked, data tCL / CWL cycles after its command, data
marks checked) and a host driver on the CSR port (descriptors staged and
pushed while the queue has room, completions collected when ``irq`` rises) and
on the host pass-through port. Python makes one call per batch of work -
``submit`` then ``run`` ("until idle") - never one per cycle.

Build and cache. The library is built (once per design, in the shared build cache) by
:func:`~ndpdimm.cosim.rtl.harness_build.build_harness` (``cosim/rtl/harness_build.py``);
this module is the runtime that loads it with ctypes.

Several cores. :class:`RtlSystem` builds 2-4 cores of a ``CoreConfig(link=True)``
joined by their DIMM-Link ports (``cosim/rtl/system_top.py``'s top) into one
library (``<cache>/harness/link_system<n>-<hash16>/``): each core has its own DRAM
model and host driver, the links' lanes cross C++ channels (latency, bit-error
rate, random bit offsets), and ``system.cores[i]`` is core ``i``'s
:class:`RtlBackend`. ``harness_ports.h`` (generated) binds each core's and link
end's ports for the one C++ driver. Every C call names its core.

Waveforms. ``RtlBackend(config, waves=(path, first_cycle, last_cycle))``
uses a second build with Verilator's VCD tracing compiled in (tracing costs
speed even when idle, so the default library has none) and records the NDP
cycles ``first_cycle..last_cycle`` into ``path`` (open it with GTKWave or
Surfer). FST would need ``lz4.h``, which a fresh machine lacks.

Errors. A DRAM timing violation raises ``TimingViolation``-style
:class:`HarnessError` naming the command, cycle and rule; a broken pin
protocol (data marks, an ``irq`` without a completion, a host response with
an unknown tag, response overflow) raises :class:`HarnessError` too; after
either the instance refuses to run (its state is no longer meaningful). An
address outside the DIMM raises ``ValueError`` and changes nothing. A library
whose recorded parameters differ from the configuration asked for (e.g. a
path given explicitly) raises :class:`HarnessMismatch` before anything runs.
"""

import ctypes
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from ndpdimm.cosim.backend import COUNTER_REGISTERS, Backend, Completion, CoreConfig, check_word
from ndpdimm.cosim.rtl.harness_build import (
    VERILATOR_OPT,
    build_harness,
    check_n_cores,
    link_counter_names,
)
from ndpdimm.hw.memory.port import BURST_BYTES, Status
from ndpdimm.hw.registers import register

__all__ = ["RtlBackend", "RtlSystem", "HarnessError", "HarnessMismatch"]

_CQ_HEAD = register("CQ_HEAD")

_OK, _MAX_CYCLES, _VIOLATION, _PROTOCOL, _VALUE_ERROR, _DEAD = range(6)
#: Cycles a single register or host access may take before the harness gives up.
ACCESS_TIMEOUT_CYCLES = 1_000_000
#: Default delay of a DIMM-Link channel in NDP cycles, and the largest random bit offset of a
#: lane (one 66-bit block less a bit: the PHY must find block boundaries and deskew), as the
#: cocotb link_system bench has them.
LINK_LATENCY, LINK_MAX_BIT_OFFSET = 2, 65
#: Cycles the links get to train after reset before a system is handed out.
LINK_TRAINING_CYCLES = 20_000


class HarnessError(RuntimeError):
    """The simulation found the design misbehaving (timing violation, pin protocol)."""


class HarnessMismatch(RuntimeError):
    """A harness library built for other parameters than the ones asked for."""


# --- ctypes -----------------------------------------------------------------------------------

_LIBS: dict = {}


def _load(path: Path):
    key = str(path)
    if key not in _LIBS:
        lib = ctypes.CDLL(key)
        P, I32, I64, U64 = ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64, ctypes.c_uint64
        B = ctypes.c_char_p
        sigs = {
            "ndph_build_info": (B, []),
            "ndph_n_cores": (I32, []),
            "ndph_create": (P, [ctypes.c_char_p, ctypes.c_size_t]),
            "ndph_destroy": (None, [P]),
            "ndph_error": (B, [P]),
            "ndph_link_configure": (I32, [P, I64, ctypes.c_double, U64, I32]),
            "ndph_link_counters": (I32, [P, I32, I32, ctypes.POINTER(I64)]),
            "ndph_run_until_links_up": (I32, [P, I64]),
            "ndph_submit": (I32, [P, I32, ctypes.POINTER(U64), I64]),
            "ndph_run": (I32, [P, I32, I64]),
            "ndph_run_cycles": (I32, [P, I64]),
            "ndph_csr": (I32, [P, I32, ctypes.c_uint32, I32, U64, ctypes.POINTER(U64), I64]),
            "ndph_csr_reads": (I32, [P, I32, ctypes.POINTER(ctypes.c_uint32), I32, ctypes.POINTER(U64), I64]),
            "ndph_completions": (I64, [P, I32, ctypes.POINTER(I64), I64]),
            "ndph_pending": (I64, [P, I32]),
            "ndph_host_access": (I32, [P, I32, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_host_stream": (I32, [P, I32, I64, I64, I64]),
            "ndph_host_stream_stats": (I32, [P, I32, ctypes.POINTER(I64)]),
            "ndph_load": (I32, [P, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_dump": (I32, [P, I32, I64, ctypes.POINTER(ctypes.c_uint8), I64]),
            "ndph_stats": (I32, [P, I32, ctypes.POINTER(I64)]),
            "ndph_trace_open": (I32, [P, ctypes.c_char_p, I64, I64]),
            "ndph_trace_close": (None, [P]),
            "ndph_bare_clock": (I64, [P, I64]),
            "ndph_profile": (I32, [P, I32, ctypes.POINTER(I64)]),
        }
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _LIBS[key] = lib
    return _LIBS[key]


def _bytes_arg(data: bytes):
    return (ctypes.c_uint8 * len(data)).from_buffer_copy(data)


class _Simulation:
    """One instance of a harness library: the Verilated top (one core, or a DIMM-Link chain),
    its clocks, and per core its DRAM and host driver. Shared by the backends of its cores;
    destroyed when the last of them closes."""

    def __init__(self, config: CoreConfig, n_cores: int, *, waves, progress, library, cxx_opt,
                 extra_flags, build_root, toolchain=None):
        if not isinstance(config, CoreConfig):
            raise ValueError(f"config must be a CoreConfig, got {config!r}")
        n_cores = check_n_cores(config, n_cores)
        if waves is not None:
            if not (isinstance(waves, (tuple, list)) and len(waves) == 3):
                raise ValueError(f"waves must be (path, first_cycle, last_cycle), got {waves!r}")
        path = Path(library) if library is not None else build_harness(
            config, waves=waves is not None, cxx_opt=cxx_opt, extra_flags=extra_flags,
            build_root=build_root, progress=progress, n_cores=n_cores, **(toolchain or {}))
        self.library = path
        self.lib = lib = _load(path.resolve())
        info = json.loads(lib.ndph_build_info().decode())
        built_cores = lib.ndph_n_cores()
        if info.get("config") != config.as_dict() or built_cores != n_cores:
            raise HarnessMismatch(
                f"harness library {path} was built for {built_cores} core(s) of "
                f"{info.get('config')}, not for {n_cores} of {config.as_dict()}: build one for "
                "this configuration (omit library=)")
        if waves is not None and not info.get("waves"):
            raise HarnessMismatch(f"harness library {path} was built without waveform support")
        self.build_info, self.n_cores, self.config = info, n_cores, config
        err = ctypes.create_string_buffer(512)
        self.h = lib.ndph_create(err, len(err))
        if not self.h:
            raise RuntimeError(f"cannot create the harness: {err.value.decode()}")
        self.users = 0
        if waves is not None:
            wpath, first, last = waves
            self.check(lib.ndph_trace_open(self.h, str(wpath).encode(), int(first), int(last)))

    def start(self) -> None:
        self.check(self.lib.ndph_run_cycles(self.h, 8))   # out of reset

    def check(self, status: int) -> int:
        if status in (_OK, _MAX_CYCLES):
            return status
        msg = self.lib.ndph_error(self.h).decode()
        if status == _VALUE_ERROR:
            raise ValueError(msg)
        raise HarnessError(msg)

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0 and self.h:
            self.lib.ndph_destroy(self.h)
            self.h = None


class RtlBackend(Backend):
    """One NDP-DIMM simulated from its RTL (see the module docstring).

    ``waves``: ``None`` or ``(path, first_cycle, last_cycle)`` to record a VCD window.
    ``library``: use this harness library instead of building one; it must have been built
    for ``config`` (else :class:`HarnessMismatch`).
    ``cxx_opt``, ``extra_flags``, ``pgo``, ``cxx_flags``, ``compiler``: how the library is built
    (``harness_build.build_harness``; ``None``: the default, profile-guided unless
    ``$NDPDIMM_HARNESS_PLAIN`` is set).

    The cores of an :class:`RtlSystem` are ``RtlBackend`` s too (``system.cores[i]``); each
    call names its core, and running one core clocks them all (they are one simulation).
    """
    name = "rtl"

    def __init__(self, config: CoreConfig = CoreConfig(), *, waves: tuple[str | os.PathLike, int, int] | None = None,
                 progress: bool = True, library: str | os.PathLike | None = None, cxx_opt: str | None = None,
                 extra_flags: Sequence[str] = VERILATOR_OPT, build_root: str | os.PathLike | None = None,
                 pgo: bool | None = None, cxx_flags: Sequence[str] | None = None,
                 compiler: str | None = None) -> None:
        sim = _Simulation(config, 1, waves=waves, progress=progress, library=library,
                          cxx_opt=cxx_opt, extra_flags=extra_flags, build_root=build_root,
                          toolchain={"pgo": pgo, "cxx_flags": cxx_flags, "compiler": compiler})
        self._attach(sim, 0)
        sim.start()

    @classmethod
    def _core(cls, sim: _Simulation, core: int) -> "RtlBackend":
        b = cls.__new__(cls)
        b._attach(sim, core)
        return b

    def _attach(self, sim: _Simulation, core: int):
        self._sim, self._core_index = sim, core
        sim.users += 1
        self.config = sim.config
        self.org, self.timing = self.config.dram()
        self.library, self.build_info = sim.library, sim.build_info
        self._lib = sim.lib

    @property
    def _h(self):
        return self._sim.h

    # --- plumbing -------------------------------------------------------------------------
    def _check(self, status):
        return self._sim.check(status)

    def close(self) -> None:
        if getattr(self, "_sim", None) is not None:
            self._sim.release()
            self._sim = None

    def __del__(self):
        self.close()

    def _range(self, addr, n):
        cap = self.org.capacity_bytes
        if not isinstance(addr, int) or not isinstance(n, int) or addr < 0 or n < 0 or addr + n > cap:
            raise ValueError(f"DRAM range {addr!r} + {n!r} bytes is outside the DIMM (0..{cap:#x})")

    # --- Backend --------------------------------------------------------------------------
    def load(self, addr: int, data: bytes) -> None:
        data = bytes(data)
        self._range(addr, len(data))
        if data:
            self._check(self._lib.ndph_load(self._h, self._core_index, addr, _bytes_arg(data), len(data)))

    def dump(self, addr: int, n: int) -> bytes:
        self._range(addr, n)
        buf = (ctypes.c_uint8 * max(n, 1))()
        if n:
            self._check(self._lib.ndph_dump(self._h, self._core_index, addr, buf, n))
        return bytes(buf)[:n]

    def _burst_address(self, addr, what="host access address"):
        if not isinstance(addr, int) or isinstance(addr, bool) or addr % BURST_BYTES or \
                not 0 <= addr <= self.org.capacity_bytes - BURST_BYTES:
            raise ValueError(f"{what} {addr!r} is not a 64 B aligned burst in the DIMM")

    def host_access(self, addr: int, write: bool, data: bytes = b"") -> bytes:
        self._burst_address(addr)
        if write and len(bytes(data)) != BURST_BYTES:
            raise ValueError(f"a host write is {BURST_BYTES} bytes, got {len(bytes(data))}")
        buf = _bytes_arg(bytes(data) if write else bytes(BURST_BYTES))
        self._check(self._lib.ndph_host_access(self._h, self._core_index, int(bool(write)), addr, buf,
                                               ACCESS_TIMEOUT_CYCLES))
        return b"" if write else bytes(buf)

    def host_stream(self, addr: int, nbytes: int, spacing_cycles: int) -> None:
        """Background host reads: one 64 B pass-through read every ``spacing_cycles`` NDP cycles,
        cycling over ``[addr, addr + nbytes)``, issued by the harness while the simulation runs
        (no Python call per read). ``nbytes`` 0 stops the stream. Reads in flight do not keep
        :meth:`run` going. See :meth:`host_stream_stats`."""
        if not isinstance(spacing_cycles, int) or isinstance(spacing_cycles, bool) or spacing_cycles < 1:
            raise ValueError(f"spacing_cycles must be a positive integer, got {spacing_cycles!r}")
        if nbytes != 0:
            self._burst_address(addr, "host stream address")
            if not isinstance(nbytes, int) or nbytes < 0 or nbytes % BURST_BYTES:
                raise ValueError(f"host stream size must be whole 64 B bursts, got {nbytes!r}")
            self._range(addr, nbytes)
        self._check(self._lib.ndph_host_stream(self._h, self._core_index, int(addr), int(nbytes),
                                               int(spacing_cycles)))

    def host_stream_stats(self) -> dict[str, int | float]:
        """The background stream since it was started: reads issued and completed, mean and
        max latency of the completed ones (NDP cycles from issue to response)."""
        out = (ctypes.c_int64 * 4)()
        self._check(self._lib.ndph_host_stream_stats(self._h, self._core_index, out))
        issued, completed, total, worst = list(out)
        return {"issued": issued, "completed": completed,
                "mean_latency": total / completed if completed else 0.0, "max_latency": worst}

    def csr_write(self, name: str, value: int) -> None:
        r = register(name)
        if not isinstance(value, int) or not 0 <= value < 1 << 64:
            raise ValueError(f"register {name}: value must be a 64-bit unsigned int, got {value!r}")
        self._check(self._lib.ndph_csr(self._h, self._core_index, r.offset, 1, value, None,
                                       ACCESS_TIMEOUT_CYCLES))

    def csr_read(self, name: str) -> int:
        r = register(name)
        out = ctypes.c_uint64()
        self._check(self._lib.ndph_csr(self._h, self._core_index, r.offset, 0, 0, ctypes.byref(out),
                                       ACCESS_TIMEOUT_CYCLES))
        return out.value

    def counters(self) -> dict[str, int]:
        """The :data:`COUNTER_REGISTERS` by name, read in one harness call (the reads queue back
        to back on the CSR port, as a host would issue them)."""
        n = len(COUNTER_REGISTERS)
        addrs = (ctypes.c_uint32 * n)(*(register(name).offset for name in COUNTER_REGISTERS))
        out = (ctypes.c_uint64 * n)()
        self._check(self._lib.ndph_csr_reads(self._h, self._core_index, addrs, n, out,
                                             n * ACCESS_TIMEOUT_CYCLES))
        return dict(zip(COUNTER_REGISTERS, list(out)))

    def submit(self, words: Iterable[int]) -> None:
        words = [check_word(w) for w in words]
        if not words:
            return
        arr = (ctypes.c_uint64 * (4 * len(words)))()
        for i, w in enumerate(words):
            for k in range(4):
                arr[4 * i + k] = (w >> (64 * k)) & (2 ** 64 - 1)
        self._check(self._lib.ndph_submit(self._h, self._core_index, arr, len(words)))

    def run(self, max_cycles: int | None = None) -> list[Completion]:
        limit = (1 << 62) if max_cycles is None else int(max_cycles)
        if limit < 0:
            raise ValueError(f"max_cycles must be >= 0, got {max_cycles!r}")
        self._check(self._lib.ndph_run(self._h, self._core_index, limit))
        return self._take_completions()

    def run_cycles(self, n: int) -> list[Completion]:
        """Clock ``n`` NDP cycles (the driver keeps pushing and collecting); completions so far."""
        self._check(self._lib.ndph_run_cycles(self._h, int(n)))
        return self._take_completions()

    def _take_completions(self):
        out = []
        while True:
            buf = (ctypes.c_int64 * (4 * 64))()
            k = self._lib.ndph_completions(self._h, self._core_index, buf, 64)
            for i in range(k):
                head, cycles, nbytes, done = buf[4 * i:4 * i + 4]
                f = _CQ_HEAD.unpack(head)
                out.append(Completion(id=f["ID"], opcode=f["OPCODE"], status=Status(f["STATUS"]),
                                      cycles=cycles, dram_bytes=nbytes, done_cycle=done))
            if k < 64:
                return out

    @property
    def pending(self) -> int:
        return self._lib.ndph_pending(self._h, self._core_index)

    @property
    def cycle(self) -> int:
        return self.stats()["ndp_cycle"]

    def stats(self) -> dict[str, int]:
        """Harness-side counts: cycles of both clocks, DRAM commands by kind, bursts, row
        hits/misses (the timing checker's), bytes the sparse store holds (this core's DRAM)."""
        out = (ctypes.c_int64 * 12)()
        self._check(self._lib.ndph_stats(self._h, self._core_index, out))
        keys = ("ndp_cycle", "dram_cycle", "ACT", "RD", "WR", "PRE", "REF", "bursts_read",
                "bursts_written", "row_hits", "row_misses", "touched_bytes")
        return dict(zip(keys, list(out)))

    def close_waves(self) -> None:
        self._lib.ndph_trace_close(self._h)

    def profile(self, enable: bool | None = None) -> dict[str, float | int | None]:
        """Where the clocking loop's time goes, by the steady clock. ``enable`` True / False
        starts / stops timing every ``eval()`` of the Verilated model and every run loop
        (two clock reads per ``eval()``: at most a few per cent of a 16-unit core's cycle, less
        for larger cores); None only reads. Returns the totals since the instance was
        created: ``eval_seconds`` (the model's own evaluation), ``loop_seconds`` (the run
        loops: evaluation plus DRAM model, drivers and channels), ``evals`` and
        ``harness_share`` (the part of the loops spent outside the model)."""
        out = (ctypes.c_int64 * 3)()
        on = -1 if enable is None else int(bool(enable))
        self._check(self._lib.ndph_profile(self._h, on, out))
        eval_s, loop_s = out[0] * 1e-9, out[1] * 1e-9
        return {"eval_seconds": eval_s, "loop_seconds": loop_s, "evals": out[2],
                "harness_share": (loop_s - eval_s) / loop_s if loop_s else None}

    def bare_clock(self, n: int) -> int:
        """Measurement baseline: clock the model alone for ``n`` cycles (no DRAM, no driver).
        The instance is unusable afterwards."""
        return self._lib.ndph_bare_clock(self._h, int(n))


class RtlSystem:
    """``n_cores`` RTL NDP cores joined in a DIMM-Link chain (core ``i`` = DIMM ``i``), in one
    harness library (``cosim/rtl/system_top.py``'s top): each core has its own DRAM and host
    driver, and each direction of each link is a behavioural channel in C++ (``latency``
    cycles, bit errors at ``ber``, per lane a random bit offset of up to ``max_bit_offset``
    bits, all from a generator seeded with ``seed``) between the link ports' serial lanes.
    ``cores[i]`` is core ``i``'s :class:`RtlBackend`.
    """

    def __init__(self, config: CoreConfig, n_cores: int, *, latency: int = LINK_LATENCY,
                 ber: float = 0.0, seed: int = 0, max_bit_offset: int = LINK_MAX_BIT_OFFSET,
                 progress: bool = True, library: str | os.PathLike | None = None,
                 cxx_opt: str | None = None, extra_flags: Sequence[str] = VERILATOR_OPT,
                 build_root: str | os.PathLike | None = None, pgo: bool | None = None,
                 cxx_flags: Sequence[str] | None = None, compiler: str | None = None) -> None:
        if not isinstance(n_cores, int) or isinstance(n_cores, bool) or n_cores < 2:
            raise ValueError(f"an RTL DIMM-Link system has 2 or more cores, got {n_cores!r}")
        if not isinstance(latency, int) or isinstance(latency, bool) or not 0 <= latency <= 1 << 20:
            raise ValueError(f"link latency must be an integer number of cycles in 0..2^20, got {latency!r}")
        if not isinstance(ber, (int, float)) or isinstance(ber, bool) or not 0 <= ber < 1:
            raise ValueError(f"link ber must be a number in [0, 1), got {ber!r}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"link seed must be a non-negative integer, got {seed!r}")
        if not isinstance(max_bit_offset, int) or isinstance(max_bit_offset, bool) or \
                not 0 <= max_bit_offset <= 90:
            raise ValueError(f"max_bit_offset must be an integer in 0..90, got {max_bit_offset!r}")
        sim = _Simulation(config, n_cores, waves=None, progress=progress, library=library,
                          cxx_opt=cxx_opt, extra_flags=extra_flags, build_root=build_root,
                          toolchain={"pgo": pgo, "cxx_flags": cxx_flags, "compiler": compiler})
        sim.check(sim.lib.ndph_link_configure(sim.h, latency, float(ber), seed, max_bit_offset))
        self.cores = [RtlBackend._core(sim, i) for i in range(n_cores)]
        self.latency, self.ber, self.seed = latency, float(ber), seed
        self._sim = sim
        sim.start()
        # as the cocotb bench: nothing is sent before every link end has trained
        if sim.check(sim.lib.ndph_run_until_links_up(sim.h, LINK_TRAINING_CYCLES)) == _MAX_CYCLES:
            raise HarnessError(f"the DIMM-Links did not come up within {LINK_TRAINING_CYCLES} cycles")

    def __len__(self) -> int:
        return len(self.cores)

    def run(self, max_cycles: int | None = None) -> list[list[Completion]]:
        """Run until every core is idle; each core's completions (a list per core)."""
        limit = (1 << 62) if max_cycles is None else int(max_cycles)
        self._sim.check(self._sim.lib.ndph_run(self._sim.h, -1, limit))
        return [c._take_completions() for c in self.cores]

    def link_counters(self) -> dict[str, dict[str, int]]:
        """Per direction ``"i->j"`` of every link: the sending end's and the receiving end's
        counters as the RTL link ports count them (``tx_*``: the sender's, e.g. frames sent,
        replays, timeouts, NAKs received; ``rx_*``: the receiver's, e.g. CRC errors, NAKs sent,
        duplicates; ``phy_*`` of the receiver), plus the channel's ``chunks`` carried and
        ``injected_bit_errors``."""
        from ndpdimm.hw.link.port import RX_COUNTERS, TX_COUNTERS
        names = link_counter_names()
        out = {}
        for link in range(len(self.cores) - 1):
            ends = []
            for end in (0, 1):
                buf = (ctypes.c_int64 * (len(names) + 2))()
                self._sim.check(self._sim.lib.ndph_link_counters(self._sim.h, link, end, buf))
                ends.append(list(buf))
            for send, recv, key in ((0, 1, f"{link}->{link + 1}"), (1, 0, f"{link + 1}->{link}")):
                tx, rx = dict(zip(names, ends[send])), dict(zip(names, ends[recv]))
                row = {f"tx_{n}": tx[n] for n in TX_COUNTERS}
                row.update({f"rx_{n}": rx[n] for n in RX_COUNTERS})
                row.update({n: rx[n] for n in names if n.startswith("phy_")})
                row["chunks"], row["injected_bit_errors"] = ends[send][len(names):]
                out[key] = row
        return out

    def close(self) -> None:
        for c in self.cores:
            c.close()
