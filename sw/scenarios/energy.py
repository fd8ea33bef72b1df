"""Energy (tokens per joule) and hardware cost of the systems the Hermes scenario compares.

The numbers live in ``sw/configs/energy/hermes_energy.toml``, each written
``{ value = ..., source = "..." }`` (an assumption says so, with the reasoning, in its source);
the RTX 4090's board power comes from the hardware file that file names (``hermes``). Loading
is strict like ``sw/scenarios/catalog.py`` (``hw/config_file.py``): a missing, unknown,
mistyped or out-of-range key, a number without its source, NaN or infinity raises
:class:`~ndpdimm.sw.scenarios.catalog.CatalogError` naming the file and key.

**Energy model.** A run (or one token of it) is described by a :class:`Usage`:
wall time ``T``, busy times and byte / MAC counts. Joules per component:

    gpu             = B_gpu P_board + (G T - B_gpu) P_gpu_idle        (G GPUs, B_gpu GPU-seconds)
    host_cpu        = B_cpu P_host_busy + (T - B_cpu) P_host_idle
    host_dram       = 8 host_dram_bytes e_host_dram
    pcie            = 8 pcie_bytes e_pcie
    dimm_dram       = 8 dimm_dram_bytes e_dimm_dram
    ndp_logic       = ndp_macs e_mac + B_ndp P_core_busy + (D T - B_ndp) P_core_idle
    dimm_link       = 8 link_bytes e_link                              (1.17 pJ/bit)
    dimm_background = D T P_dimm_background                            (D NDP-DIMMs)
    total           = the sum

with ``P_core_busy = core_area_mm2 x busy_w_per_mm2``. Counting rules for the
caller: bytes that cross PCIe from host DRAM are counted in both
``pcie_bytes`` and ``host_dram_bytes``; ``link_bytes`` is payload times hops;
``dimm_dram_bytes`` is what the NDP reads and writes inside the DIMMs;
``ndp_busy_s`` and ``gpu_busy_s`` are summed over DIMMs / GPUs (so at most
``D T`` / ``G T``). Tokens per joule = tokens / total.

**Prices.** :meth:`PriceCatalog.system_price` itemises each compared system:
the GPU systems without NDP (``accelerate``, ``flexgen``, ``dejavu``, ``powerinfer``) are an
RTX 4090 plus the host platform; ``ndp_dense`` and ``hermes`` add N
NDP-DIMMs (DIMM price + NDP premium each); ``datacenter`` is
``[datacenter] count`` x A100 80GB plus its server. :func:`reference_gpu`
gives the datacenter GPU as a :class:`~ndpdimm.sw.scenarios.catalog.Gpu` for
:class:`~ndpdimm.sw.scenarios.gpu.GpuModel`, and :meth:`EnergyModel.datacenter_usage`
a :class:`Usage` with that configuration's powers.
"""

import dataclasses
import math

from ndpdimm.sw.scenarios.catalog import CatalogError, Gpu, load_catalog

__all__ = ["SYSTEMS", "GpuPower", "DramEnergy", "NdpEnergy", "LinkEnergy", "PcieEnergy",
           "HostPower", "Prices", "Datacenter", "EnergyConfig", "Usage", "EnergyModel",
           "PriceCatalog", "load_energy", "reference_gpu", "COMPONENTS"]

#: The systems of the Hermes comparison, in the order the scenario reports them.
SYSTEMS = ("accelerate", "flexgen", "dejavu", "powerinfer", "ndp_dense", "hermes", "datacenter")
#: Keys of :meth:`EnergyModel.energy` besides ``total``.
COMPONENTS = ("gpu", "host_cpu", "host_dram", "pcie", "dimm_dram", "ndp_logic", "dimm_link",
              "dimm_background")
_NDP_SYSTEMS = ("ndp_dense", "hermes")


@dataclasses.dataclass(frozen=True)
class GpuPower:
    hardware: str             # hardware file whose [gpu] board_power_w is the busy power
    idle_w: float


@dataclasses.dataclass(frozen=True)
class DramEnergy:
    dimm_pj_per_bit: float    # inside an NDP-DIMM, no off-DIMM I/O
    dimm_background_w: float  # per NDP-DIMM
    host_pj_per_bit: float    # host DDR5 including I/O to the CPU


@dataclasses.dataclass(frozen=True)
class NdpEnergy:
    mac_pj: float             # one FP16 MAC of the bit-serial array
    core_area_mm2: float
    busy_w_per_mm2: float     # the core but its multipliers, while busy
    idle_w: float             # a present, non-computing core

    @property
    def core_busy_w(self) -> float:
        return self.core_area_mm2 * self.busy_w_per_mm2


@dataclasses.dataclass(frozen=True)
class LinkEnergy:
    pj_per_bit: float


@dataclasses.dataclass(frozen=True)
class PcieEnergy:
    pj_per_bit: float


@dataclasses.dataclass(frozen=True)
class HostPower:
    busy_w: float
    idle_w: float


@dataclasses.dataclass(frozen=True)
class Prices:
    basis: str
    gpu_usd: float
    host_cpu_usd: float
    host_board_usd: float
    host_memory_usd: float
    host_other_usd: float
    dimm_usd: float
    ndp_premium_usd: float
    datacenter_gpu_usd: float
    datacenter_server_usd: float


@dataclasses.dataclass(frozen=True)
class Datacenter(Gpu):
    """The reference configuration: ``count`` of one GPU (its :class:`Gpu` fields) and more."""
    count: int
    idle_w: float
    host_idle_w: float
    nvlink_gbs: float

    def gpu(self) -> Gpu:
        """One of the datacenter GPUs as the roofline model takes it."""
        return Gpu(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Gpu)})


@dataclasses.dataclass(frozen=True)
class EnergyConfig:
    """The whole energy / price file."""
    name: str
    path: str
    gpu: GpuPower
    dram: DramEnergy
    ndp: NdpEnergy
    link: LinkEnergy
    pcie: PcieEnergy
    host: HostPower
    prices: Prices
    datacenter: Datacenter


# Sanity ceilings (out-of-range beyond them is a typo, e.g. J for pJ or mW for W).
_CEILINGS = {"pj_per_bit": 1000.0, "dimm_pj_per_bit": 1000.0, "host_pj_per_bit": 1000.0,
             "mac_pj": 1000.0, "busy_w_per_mm2": 10.0, "core_area_mm2": 1000.0,
             "dimm_background_w": 100.0}


def load_energy(name_or_path="hermes_energy") -> EnergyConfig:
    """The energy model and price file (built-in name or TOML path); :class:`CatalogError` on a
    bad file."""
    config = load_catalog("energy", name_or_path, EnergyConfig, stem_as="name", path_as="path")
    path, parts = config.path, {f.name: getattr(config, f.name) for f in dataclasses.fields(config)}
    for key, table in parts.items():
        for name, ceiling in _CEILINGS.items():
            value = getattr(table, name, None)
            if value is not None and value > ceiling:
                raise CatalogError(f"{path} [{key}]: {name} must be at most {ceiling}, "
                                   f"got {value!r}")
    # Waiting must cost less than working: a swapped pair is a typo.
    for where, idle, busy, names in (
            ("host", parts["host"].idle_w, parts["host"].busy_w, "idle_w < busy_w"),
            ("ndp", parts["ndp"].idle_w, parts["ndp"].core_busy_w,
             "idle_w < core_area_mm2 x busy_w_per_mm2"),
            ("datacenter", parts["datacenter"].idle_w, parts["datacenter"].board_power_w,
             "idle_w < board_power_w")):
        if not idle < busy:
            raise CatalogError(f"{path} [{where}]: {names} required, got {idle!r} and {busy!r}")
    return config


def reference_gpu(name_or_path="hermes_energy") -> Gpu:
    """The datacenter reference GPU (``[datacenter]`` of the energy file) as a catalogue
    :class:`~ndpdimm.sw.scenarios.catalog.Gpu`."""
    config = name_or_path if isinstance(name_or_path, EnergyConfig) else load_energy(name_or_path)
    return config.datacenter.gpu()


@dataclasses.dataclass(frozen=True)
class Usage:
    """What a run (or one token) used; see the module docstring for the counting rules."""
    seconds: float
    gpu_busy_s: float = 0.0
    gpus: int = 1
    pcie_bytes: float = 0.0
    host_dram_bytes: float = 0.0
    host_cpu_busy_s: float = 0.0
    dimm_dram_bytes: float = 0.0
    ndp_macs: float = 0.0
    ndp_busy_s: float = 0.0
    link_bytes: float = 0.0
    dimms: int = 0
    # Overrides of the file's powers (None: the file's), for the datacenter reference.
    gpu_board_w: float | None = None
    gpu_idle_w: float | None = None
    host_busy_w: float | None = None
    host_idle_w: float | None = None

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if v is None and f.default is None:
                continue
            if f.name in ("gpus", "dimms"):
                least = 1 if f.name == "gpus" else 0
                if not isinstance(v, int) or isinstance(v, bool) or v < least:
                    raise ValueError(f"Usage.{f.name} must be an int >= {least}, got {v!r}")
                continue
            if (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                    or v < 0):
                raise ValueError(f"Usage.{f.name} must be a finite number >= 0, got {v!r}")
        # Busy time cannot exceed what the devices had (tolerance for summed rounding).
        for busy, count, unit in (("gpu_busy_s", self.gpus, "gpus"),
                                  ("host_cpu_busy_s", 1, None),
                                  ("ndp_busy_s", self.dimms, "dimms")):
            cap = count * self.seconds
            if getattr(self, busy) > cap * (1 + 1e-9) + 1e-12:
                limit = f"{unit} x seconds" if unit else "seconds"
                raise ValueError(f"Usage.{busy} ({getattr(self, busy)!r}) exceeds {limit} "
                                 f"({cap!r})")
        if self.dimms == 0:
            used = [n for n in ("dimm_dram_bytes", "ndp_macs", "ndp_busy_s", "link_bytes")
                    if getattr(self, n)]
            if used:
                raise ValueError(f"Usage.{', '.join(used)} given with dimms = 0")


class EnergyModel:
    """Joules per component of a :class:`Usage` (see the module docstring).

    ``config`` defaults to the built-in file; ``gpu`` is the GPU of the hardware file
    ``config.gpu.hardware`` names (its board power is the busy GPU power): the scenario loads it
    from its own hardware catalogue (Hermes: ``hermes/catalog.py``) and passes it in."""

    def __init__(self, config: EnergyConfig | None = None, gpu: Gpu | None = None):
        self.config = config if config is not None else load_energy()
        if not isinstance(self.config, EnergyConfig):
            raise ValueError(f"config must be an EnergyConfig, got {self.config!r}")
        if not isinstance(gpu, Gpu):
            raise ValueError(f"gpu must be the catalog.Gpu of hardware file "
                             f"{self.config.gpu.hardware!r}, got {gpu!r}")
        self.gpu = gpu
        if not self.config.gpu.idle_w < self.gpu.board_power_w:
            raise CatalogError(f"{self.config.path} [gpu]: idle_w ({self.config.gpu.idle_w}) must "
                               f"be below the board power of {self.gpu.name} "
                               f"({self.gpu.board_power_w})")

    def energy(self, usage: Usage) -> dict:
        """Joules per component (:data:`COMPONENTS`) and ``total``."""
        if not isinstance(usage, Usage):
            raise ValueError(f"usage must be a Usage, got {usage!r}")
        c, u = self.config, usage
        board_w = self.gpu.board_power_w if u.gpu_board_w is None else u.gpu_board_w
        gpu_idle_w = c.gpu.idle_w if u.gpu_idle_w is None else u.gpu_idle_w
        host_busy_w = c.host.busy_w if u.host_busy_w is None else u.host_busy_w
        host_idle_w = c.host.idle_w if u.host_idle_w is None else u.host_idle_w
        pj = 1e-12
        joules = {
            "gpu": u.gpu_busy_s * board_w + (u.gpus * u.seconds - u.gpu_busy_s) * gpu_idle_w,
            "host_cpu": (u.host_cpu_busy_s * host_busy_w
                         + (u.seconds - u.host_cpu_busy_s) * host_idle_w),
            "host_dram": 8 * u.host_dram_bytes * c.dram.host_pj_per_bit * pj,
            "pcie": 8 * u.pcie_bytes * c.pcie.pj_per_bit * pj,
            "dimm_dram": 8 * u.dimm_dram_bytes * c.dram.dimm_pj_per_bit * pj,
            "ndp_logic": (u.ndp_macs * c.ndp.mac_pj * pj + u.ndp_busy_s * c.ndp.core_busy_w
                          + (u.dimms * u.seconds - u.ndp_busy_s) * c.ndp.idle_w),
            "dimm_link": 8 * u.link_bytes * c.link.pj_per_bit * pj,
            "dimm_background": u.dimms * u.seconds * c.dram.dimm_background_w,
        }
        # Busy times within the rounding tolerance of Usage may exceed capacity by a hair.
        joules = {k: max(v, 0.0) for k, v in joules.items()}
        joules["total"] = sum(joules.values())
        return joules

    def tokens_per_joule(self, usage: Usage, tokens: float) -> float:
        """``tokens`` generated with ``usage`` per joule of its total energy."""
        if isinstance(tokens, bool) or not isinstance(tokens, (int, float)) or not (
                math.isfinite(tokens) and tokens > 0):
            raise ValueError(f"tokens must be a finite number > 0, got {tokens!r}")
        total = self.energy(usage)["total"]
        if total <= 0:
            raise ValueError("usage spends no energy (seconds = 0?): tokens per joule undefined")
        return tokens / total

    def datacenter_usage(self, seconds: float, gpu_busy_s: float, **counts) -> Usage:
        """A :class:`Usage` of the ``[datacenter]`` configuration: its GPU count, board and idle
        power, and its server's power for the host (no NDP-DIMMs, no host compute)."""
        dc = self.config.datacenter
        return Usage(seconds=seconds, gpu_busy_s=gpu_busy_s, gpus=dc.count,
                     gpu_board_w=dc.board_power_w, gpu_idle_w=dc.idle_w,
                     host_busy_w=dc.host_idle_w, host_idle_w=dc.host_idle_w, **counts)


class PriceCatalog:
    """Hardware cost of each system of :data:`SYSTEMS`, itemised in USD."""

    def __init__(self, config: EnergyConfig | None = None):
        self.config = config if config is not None else load_energy()
        if not isinstance(self.config, EnergyConfig):
            raise ValueError(f"config must be an EnergyConfig, got {self.config!r}")

    def system_price(self, system: str, dimms: int = 8) -> dict:
        """Items and ``total`` (USD) of ``system``; ``dimms`` NDP-DIMMs for the NDP systems (ignored
        by the others)."""
        p, dc = self.config.prices, self.config.datacenter
        if system not in SYSTEMS:
            raise ValueError(f"unknown system {system!r}: one of {', '.join(SYSTEMS)}")
        if system == "datacenter":
            items = {"gpus": dc.count * p.datacenter_gpu_usd, "server": p.datacenter_server_usd}
        else:
            items = {"gpu": p.gpu_usd, "host_cpu": p.host_cpu_usd, "host_board": p.host_board_usd,
                     "host_memory": p.host_memory_usd, "host_other": p.host_other_usd}
            if system in _NDP_SYSTEMS:
                if not isinstance(dimms, int) or isinstance(dimms, bool) or dimms < 1:
                    raise ValueError(f"dimms must be an int >= 1 for {system}, got {dimms!r}")
                items["ndp_dimms"] = dimms * (p.dimm_usd + p.ndp_premium_usd)
        items["total"] = sum(items.values())
        return items

    def all_prices(self, dimms: int = 8) -> dict:
        """``system_price`` of every system of :data:`SYSTEMS`."""
        return {s: self.system_price(s, dimms) for s in SYSTEMS}
