"""The blocks `make synth` reports: one registry entry each, with the parameters they are built with.

Each :class:`Block` names an elaboration factory (``"module:function"`` with
JSON-able keyword arguments, elaborated by ``cosim/rtl/build.py:elaborate`` in a
child Python, as the simulation builds do) and the Verilog top module. Blocks
that do not exist in ``hw/`` yet have no factory: the report lists them as
"not built yet"; adding one later is one entry here (a factory and a top).

Parameters are the SPEC's defaults (``CoreConfig`` of ``cosim/backend.py``
for everything but the GEMV units, which default to the SPEC's 256 here;
``LinkConfig`` for the DIMM-Link port).
Blocks marked ``per_units`` depend on the unit count (``--units``). The
engine and the core are elaborated hierarchically: the GEMV unit is one
Verilog module instantiated ``n_units`` times (``engine_verilog`` /
``ndp_core_verilog``), so it is synthesized once and the totals are composed
from instance counts (``synth/flow.py:compose``).

When the core is synthesized, the rows of the blocks it contains come from
its hierarchical run (``core_module``: the same Verilog module body, the
hierarchy is kept, so the cells are those of a stand-alone run); a block
synthesized alone (``ndpdimm synth gemv_engine``) gets its own run.

Elaborating the 256-unit core takes minutes in Amaranth, so Verilog is cached
in ``<cache>/synth/verilog/`` (the shared cache root, ``cosim/cache.py``) by a hash of the ``hw/`` sources and the factories,
the factory, its parameters and the Amaranth version.
"""

import hashlib
import importlib.metadata
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Block", "BLOCKS", "DEFAULT_UNITS", "REDUCED_UNITS", "VALIDATION_BLOCK", "COMPARISON",
           "UnknownBlock",
           "get_block", "block_params", "block_verilog", "core_config"]

#: SPEC section 1: 256 bit-serial multiplier units per core.
DEFAULT_UNITS = 256
#: The reduced configuration on which composition is checked against a flattened synthesis.
REDUCED_UNITS = 16
#: The block of that check: the GEMV engine, whose units are the core's largest replicated
#: module (the streamer's ring columns are the other: registers and a read mux); a flattened
#: 16-unit core would also re-synthesize the activation unit, DRAM controller and streamer
#: flat, several more minutes.
VALIDATION_BLOCK = "gemv_engine"


class UnknownBlock(ValueError):
    """A block name that is not in the registry."""


@dataclass(frozen=True)
class Block:
    name: str
    title: str
    top: str                      # Verilog module name of the block
    factory: str | None           # "module:function"; None = not built yet
    per_units: bool = False       # parameters depend on the GEMV unit count
    note: str = ""
    core_module: str | None = None  # the same module inside ndp_core's hierarchical netlist

    @property
    def built(self) -> bool:
        return self.factory is not None


_HERE = "ndpdimm.synth.blocks"

#: Report order. The core is last: it contains the other blocks.
BLOCKS = (
    Block("multiplier_unit", "Bit-serial multiplier unit (128-bit word)", "multiplier_unit",
          "ndpdimm.hw.gemv.multiplier:BitSerialMultiplierUnit",
          note="radix 1: 8 FP16/BF16 or 16 INT8 lanes, one weight bit per cycle",
          core_module="gemv_unit.multiplier"),
    Block("gemv_engine", "GEMV engine", "gemv_engine", "ndpdimm.hw.gemv.engine:engine_verilog",
          per_units=True, note="n_units x (multiplier unit + lane reducer) + control",
          core_module="ndp_core.engine"),
    Block("activation_unit", "Activation unit", "activation_unit",
          "ndpdimm.hw.activation.unit:ActivationUnit",
          note="16 lanes as in NdpCore (act_lanes; see hw/core/ndp_core.py for why not 256)",
          core_module="ndp_core.act.unit"),
    Block("bank_scheduler", "Bank scheduler (one rank)", "bank_scheduler",
          f"{_HERE}:bank_scheduler", note="RankScheduler as the core's DRAM controller builds it; "
                                          "the core has one per rank",
          core_module="ndp_core.memory.controller.rank0"),
    Block("command_processor", "Command processor", "command_processor",
          f"{_HERE}:command_processor", per_units=True, core_module="ndp_core.cp"),
    Block("sram", "On-chip SRAM (banked)", "banked_sram", "ndpdimm.hw.memory.sram:BankedSram",
          note="128 KiB, 16 banks of 256-bit words, 6 ports", core_module="ndp_core.sram"),
    Block("dimm_link", "DIMM-Link port (link layer + PHY)", "dimm_link", f"{_HERE}:dimm_link",
          note="one end of a link: 8 64b/66b lanes, deskew/training, frames with CRC-32C, "
               "64-flit replay and receive buffers (macros); a DIMM in a chain has two"),
    Block("relayout_unit", "Relayout unit", "relayout_unit", f"{_HERE}:relayout_unit",
          note="as NdpCore(link=True) builds it"),
    Block("ndp_core", "NdpCore (top)", "ndp_core", "ndpdimm.hw.core.ndp_core:ndp_core_verilog",
          per_units=True, note="composed from per-module synthesis with the hierarchy kept"),
)

#: The head-to-head comparison circuit (not part of the accelerator, not in the default set).
COMPARISON = Block("parallel_fp16", "Parallel FP16 multiplier array (same throughput)",
                   "parallel_fp16_multipliers",
                   "ndpdimm.synth.parallel_multiplier:ParallelFp16Multipliers")


def get_block(name: str) -> Block:
    for b in BLOCKS + (COMPARISON,):
        if b.name == name:
            return b
    raise UnknownBlock(f"unknown block {name!r}: expected one of "
                       f"{', '.join(b.name for b in BLOCKS + (COMPARISON,))}")


def core_config(units: int):
    """The core's build parameters (``CoreConfig``) with ``units`` GEMV units."""
    from ndpdimm.cosim.backend import CoreConfig
    return CoreConfig(n_units=units)


def block_params(block: Block, units: int = DEFAULT_UNITS) -> dict:
    """Keyword arguments of ``block.factory`` (JSON-able)."""
    cfg = core_config(units)
    if block.name == "multiplier_unit":
        return {"radix_bits": cfg.radix_bits}
    if block.name == "gemv_engine":
        return {"name": block.top, "n_units": units, "max_batch": cfg.max_batch,
                "radix_bits": cfg.radix_bits}
    if block.name == "activation_unit":
        return {"lanes": cfg.act_lanes}
    if block.name == "sram":
        # the core's geometry: 6 ports (hw/core/ndp_core.py), 256-bit words
        return {"size_bytes": cfg.sram_size, "n_banks": cfg.sram_banks, "word_bits": 256,
                "n_ports": 6}
    if block.name in ("ndp_core", "command_processor", "bank_scheduler"):
        params = cfg.core_params()
        return {"name": block.top, **params} if block.name == "ndp_core" else params
    if block.name == "dimm_link":
        return {}                                   # LinkConfig defaults: SPEC section 1
    if block.name == "relayout_unit":
        return cfg.core_params()
    if block.name == "parallel_fp16":
        from ndpdimm.synth.parallel_multiplier import matching_multipliers
        return {"n_multipliers": matching_multipliers(cfg.radix_bits)}
    raise UnknownBlock(f"block {block.name!r} has no parameters ({block.note or 'not built'})")


def _silenced_core(**core_params):
    """An NdpCore built only for its parts: no UnusedElaboratable warnings for the rest."""
    from ndpdimm.hw.core.ndp_core import silenced_ndp_core
    return silenced_ndp_core(**core_params)


def command_processor(**core_params):
    """The command processor exactly as ``NdpCore(**core_params)`` builds it."""
    cp = _silenced_core(**core_params).cp
    cp._MustUse__silence = False
    return cp


def relayout_unit(**core_params):
    """The relayout unit exactly as ``NdpCore(link=True, **core_params)`` builds it."""
    unit = _silenced_core(link=True, **core_params).relayout
    unit._MustUse__silence = False
    return unit


def dimm_link(**link_params):
    """One DIMM-Link port (``LinkConfig(**link_params)``)."""
    from ndpdimm.hw.link.formats import LinkConfig
    from ndpdimm.hw.link.port import LinkPort
    return LinkPort(LinkConfig(**link_params))


def bank_scheduler(**core_params):
    """One rank's scheduler with the queue depth and tag width the core's DRAM controller uses."""
    from ndpdimm.hw.memory.rank_scheduler import RankScheduler
    core = _silenced_core(**core_params)
    ctrl = core.memory.controller
    return RankScheduler(core.org, core.timing, ctrl.queue_depth,
                         ctrl.tag_bits + 1 + ctrl.slot_bits)


def _sources_hash() -> str:
    """Hash of every Python source elaboration can depend on: ``hw/`` and the factories here."""
    repo = Path(__file__).resolve().parent.parent
    files = sorted((repo / "hw").rglob("*.py")) + sorted((repo / "hw").rglob("*.toml"))
    files += [repo / "synth" / "blocks.py", repo / "synth" / "parallel_multiplier.py"]
    h = hashlib.sha256()
    for p in files:
        h.update(p.relative_to(repo).as_posix().encode())
        h.update(p.read_bytes())
    h.update(importlib.metadata.version("amaranth").encode())
    return h.hexdigest()


def block_verilog(block: Block, params: dict, cache_dir: Path, log=print) -> str:
    """Verilog of ``block`` built with ``params`` (cached, see module docstring)."""
    import json
    import time

    from ndpdimm.cosim.rtl.build import elaborate
    if not block.built:
        raise UnknownBlock(f"block {block.name!r} is not built yet")
    key = hashlib.sha256(f"{_sources_hash()}|{block.factory}|{block.top}|"
                         f"{json.dumps(params, sort_keys=True)}".encode()).hexdigest()[:16]
    path = Path(cache_dir) / f"{block.name}-{key}.v"
    if path.exists():
        return path.read_text()
    log(f"[synth] {block.name}: elaborating {json.dumps(params, sort_keys=True)}")
    t0 = time.monotonic()
    text = elaborate(block.top, block.factory, params)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    log(f"[synth] {block.name}: elaborated in {time.monotonic() - t0:.0f} s")
    return text

