"""Hermes' hardware catalogue: one GPU + PCIe + host + NDP-DIMMs system, from a TOML file with its sources.

A hardware file (``sw/configs/hardware/<name>.toml``) holds a system's GPU, PCIe link, host and
NDP-DIMMs, every number written ``{ value = ..., source = "..." }`` (an assumption says so in its
source). Loading is strict (``hw/config_file.py`` through ``sw/scenarios/catalog.py``): a missing,
unknown or mistyped key, a number without its source, NaN or infinity raises
:class:`~ndpdimm.sw.scenarios.catalog.CatalogError` naming the file and the key, before anything
runs. :func:`load_hardware` takes a built-in name (:func:`list_hardware`) or a path. Hermes'
models are the shared dense-model catalogue (``sw/scenarios/catalog.py``: ``load_model``).
"""

import dataclasses

from ndpdimm.sw.scenarios.catalog import Gpu, Pcie, available_names, load_catalog

__all__ = ["Host", "NdpDimms", "Hardware", "load_hardware", "list_hardware"]


@dataclasses.dataclass(frozen=True)
class Host:
    name: str
    memory_gb: float
    memory_bandwidth_gbs: float
    fp32_tflops: float
    memory_efficiency: float


@dataclasses.dataclass(frozen=True)
class NdpDimms:
    dimms: int
    capacity_gb: float
    link_gbs: float


@dataclasses.dataclass(frozen=True)
class Hardware:
    name: str
    gpu: Gpu
    pcie: Pcie
    host: Host
    ndp: NdpDimms


def list_hardware() -> list:
    """Names of the built-in hardware files."""
    return available_names("hardware")


def load_hardware(name_or_path="hermes", gpu: str = "") -> Hardware:
    """A system's hardware (built-in name or TOML path); :class:`CatalogError` on a bad file.
    ``gpu``: a GPU of ``sw/configs/gpus`` (name or TOML path) in place of the file's (the rest of
    the platform kept)."""
    hw = load_catalog("hardware", name_or_path, Hardware, stem_as="name")
    if gpu:
        from ndpdimm.sw.scenarios.measured.gpus import load_gpu
        hw = dataclasses.replace(hw, gpu=load_gpu(gpu))
    return hw
