"""The interface between the host driver (``sw/driver/dimm.py``) and one simulated NDP-DIMM.

Two backends implement it and the driver cannot tell them apart:

* ``rtl``   -- the Verilated ``NdpCore`` in a shared library with a C++ harness
  that owns both clocks, the DRAM model and the register interface
  (``cosim/rtl/harness.py``): cycle counts are the RTL's own.
* ``model`` -- a transaction-level performance model calibrated against the
  RTL backend (``cosim/model/backend.py``, ``cosim/model/perf/``): cycle
  counts are predictions; functional results come from the golden model.

Everything a backend does is expressed in the core's own terms: DIMM-local
byte addresses, 256-bit descriptor words (``hw/descriptors.py``), registers by
name (``hw/registers.py``) and completion records. Backends never raise for
a descriptor the core rejects: that is a completion with an error status
(the driver turns it into an exception). They raise ``ValueError`` for misuse
of the interface itself (an address outside the DIMM, a word wider than 256
bits, an unknown register) and change nothing when they do.

Time: ``cycle`` counts NDP clock cycles (1 GHz by default) since reset. ``run``
advances time until every submitted descriptor and host access has completed.
"""

import dataclasses
import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Self

from ndpdimm.hw.descriptors import DESCRIPTOR_BITS, Opcode
from ndpdimm.hw.memory.dram import DramOrganization, DramTiming, load_dram_config
from ndpdimm.hw.memory.port import Status

__all__ = ["CoreConfig", "Completion", "Backend", "BACKENDS", "COUNTER_REGISTERS", "check_word"]

#: Names a backend can be chosen by (``--backend``).
BACKENDS = ("rtl", "model")

#: Registers ``Backend.counters`` returns.
COUNTER_REGISTERS = ("CYCLES", "GEMV_BUSY_CYCLES", "ACT_BUSY_CYCLES", "DMA_BUSY_CYCLES",
                     "DRAM_BURSTS_READ", "DRAM_ROW_HITS", "DRAM_ROW_MISSES", "DRAM_REFRESHES",
                     "CSR_ERRORS")


@dataclass(frozen=True)
class CoreConfig:
    """Build parameters of one NDP core (the arguments of ``hw.core.ndp_core.NdpCore``).

    ``dram_config`` is a DRAM TOML file (``hw/configs/``); ``None`` is the SPEC's
    DDR4-3200 organisation and timing. The defaults are the SPEC's reference
    point but for the GEMV units (16 here: 256 is a valid value and the SPEC's;
    its Verilator build takes tens of minutes, so it is asked for explicitly).

    A configuration is one the RTL can build, on either backend (the model backend predicts the
    cycles of that RTL): a value ``NdpCore`` refuses (``n_units=12``: not a power of two;
    ``act_lanes=8``) is a ``ValueError`` here, naming the parameters and the core's reason.
    """
    n_units: int = 16
    max_batch: int = 16
    radix_bits: int = 1
    ring_beats: int = 8
    sram_size: int = 131072
    sram_banks: int = 16
    act_lanes: int = 16
    desc_queue: int = 8
    cq_depth: int = 8
    dram_config: str | None = None
    #: build the DIMM-Link transaction layer and router (LINK_SEND / ATOMIC_ADD descriptors)
    link: bool = False

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "dram_config":
                if v is not None and not isinstance(v, str):
                    raise ValueError(f"dram_config must be a path or None, got {v!r}")
            elif f.name == "link":
                if not isinstance(v, bool):
                    raise ValueError(f"link must be True or False, got {v!r}")
            elif not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"{f.name} must be a positive integer, got {v!r}")
        refusal = _rtl_refusal(self.dram_config, json.dumps(self.core_params(), sort_keys=True))
        if refusal:
            shown = ", ".join(f"{f.name}={getattr(self, f.name)}" for f in dataclasses.fields(self)
                              if getattr(self, f.name) != f.default) or "the default parameters"
            raise ValueError(f"the RTL cannot build an NDP core with {shown}: {refusal}")

    def core_params(self) -> dict[str, int | bool]:
        """Keyword arguments of ``ndp_core_from_config`` (JSON-able, a build-cache key)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if f.name != "dram_config" and not (f.name == "link" and not self.link)}

    def dram(self) -> tuple[DramOrganization, DramTiming]:
        """``(DramOrganization, DramTiming)`` of this configuration."""
        return load_dram_config(self.dram_config)

    def as_dict(self) -> dict[str, int | str | bool | None]:
        """The fields (``link`` only when set, so keys of link-less builds stay as they were)."""
        d = dataclasses.asdict(self)
        if not self.link:
            del d["link"]
        return d


@functools.lru_cache(maxsize=256)
def _rtl_refusal(dram_config: str | None, params: str) -> str | None:
    """Why ``NdpCore`` refuses these parameters (a JSON object), or None: the core is made, not
    elaborated (tens of milliseconds), so its own checks decide."""
    from ndpdimm.hw.core.ndp_core import silenced_ndp_core
    try:
        silenced_ndp_core(dram_config, **json.loads(params))
    except ValueError as e:
        return str(e)
    return None


@dataclass(frozen=True)
class Completion:
    """One entry of the completion queue (``CQ_HEAD``, ``CQ_CYCLES``, ``CQ_DRAM_BYTES``)."""
    id: int            # the descriptor's 12-bit id
    opcode: int        # Opcode value (an int: a bad opcode is reported as given)
    status: Status
    cycles: int        # dispatch to completion, NDP cycles
    dram_bytes: int    # DRAM bytes read + written
    done_cycle: int    # backend cycle at which the host saw it

    @property
    def ok(self) -> bool:
        return self.status == Status.OK

    def describe(self) -> str:
        try:
            op = Opcode(self.opcode).name
        except ValueError:
            op = f"opcode {self.opcode}"
        return f"descriptor {self.id} ({op}): {self.status.name}, {self.cycles} cycles"


class Backend:
    """What the driver needs from one NDP-DIMM. Subclasses implement every method.

    Attributes: ``name`` (one of :data:`BACKENDS`), ``config`` (:class:`CoreConfig`),
    ``org`` / ``timing`` (the DRAM's organisation and timing), ``functional`` (whether
    descriptors compute their results: True for the RTL; the model backend's
    ``functional=False`` only times them, and results read back are refused).
    """
    name = "abstract"
    functional = True

    # --- the DIMM's DRAM, as the host reaches it over the memory channel -----------------
    def load(self, addr: int, data: bytes) -> None:
        """Write bytes at a DIMM-local address (host writes before the NDP uses them; no NDP time)."""
        raise NotImplementedError

    def dump(self, addr: int, n: int) -> bytes:
        """Read ``n`` bytes at a DIMM-local address (no NDP time)."""
        raise NotImplementedError

    def host_access(self, addr: int, write: bool, data: bytes = b"") -> bytes:
        """One 64 B pass-through access on the host port at the current time; the simulation
        runs (descriptors in flight keep running) until it completes. Returns the read data."""
        raise NotImplementedError

    # --- registers -------------------------------------------------------------------------
    def csr_write(self, name: str, value: int) -> None:
        raise NotImplementedError

    def csr_read(self, name: str) -> int:
        raise NotImplementedError

    # --- descriptors -----------------------------------------------------------------------
    def submit(self, words: Iterable[int]) -> None:
        """Queue 256-bit descriptor words; they are pushed to the core as it has room."""
        raise NotImplementedError

    def run(self, max_cycles: int | None = None) -> list[Completion]:
        """Run until every submitted descriptor has completed (or ``max_cycles`` passed);
        returns the completions collected, in completion order."""
        raise NotImplementedError

    @property
    def pending(self) -> int:
        """Descriptors submitted whose completion has not been returned by ``run``."""
        raise NotImplementedError

    @property
    def cycle(self) -> int:
        raise NotImplementedError

    def counters(self) -> dict[str, int]:
        """The :data:`COUNTER_REGISTERS` by name."""
        return {n: self.csr_read(n) for n in COUNTER_REGISTERS}

    def close(self) -> None:
        pass

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def check_word(word: int) -> int:
    """A descriptor word as an int, or ``ValueError``."""
    if not isinstance(word, int) or isinstance(word, bool) or not 0 <= word < 1 << DESCRIPTOR_BITS:
        raise ValueError(f"a descriptor is a {DESCRIPTOR_BITS}-bit unsigned int, got {word!r}")
    return word
