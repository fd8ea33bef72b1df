"""The merge: one FP32 ATOMIC_ADD of partial results into the neighbouring DIMM over DIMM-Link.

A DIMM adds ``n`` bytes of FP32 partial sums from its SRAM into its neighbour's SRAM with one
remote ATOMIC_ADD descriptor (Hermes merges the column gathers' partial outputs this way).
:func:`link_merge_cost` fits ``cycles = fixed + slope x bytes`` on two linked DIMMs of the model
backend: links between RTL DIMMs run only in the cocotb bench, and the link model is fitted to
it (6.3 % largest error, docs/dimm_link.md).
"""

from __future__ import annotations

import dataclasses

from ndpdimm.cosim.backend import CoreConfig
from ndpdimm.sw.driver.system import NdpSystem
from ndpdimm.sw.kernels.base import LinearCost, check_samples

__all__ = ["link_merge_cost"]


def link_merge_cost(config: CoreConfig, samples=(1024, 4096, 16384)) -> LinearCost:
    """Cycles of one FP32 ATOMIC_ADD of ``n`` bytes from a DIMM into its neighbour's SRAM, on two
    DIMMs joined by DIMM-Link (model backend; ``config`` a CoreConfig, ``link`` forced on)."""
    samples = check_samples(samples, 1, "byte counts")
    if any(n % 4 for n in samples):
        raise ValueError(f"merge sizes must be whole FP32 words, got {samples!r}")
    system = NdpSystem(2, "model", dataclasses.replace(config, link=True), functional=False)
    try:
        src = system[1]
        points = []
        for n in samples:
            local, remote = src.alloc_sram(n), system[0].alloc_sram(n)
            try:
                with src.measure("merge") as m:
                    src.run([src.atomic_add_descriptor(0, remote.addr, local.addr, n)], "merge")
                points.append((n, m.cycles))
            finally:
                src.free(local)
                system[0].free(remote)
    finally:
        system.close()
    return LinearCost.fitted("FP32 ATOMIC_ADD into the neighbouring DIMM, per byte", points,
                             "model (DIMM-Link model)")
