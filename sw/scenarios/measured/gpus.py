"""The GPU catalogue (``sw/configs/gpus/``) and the fitted models committed beside it.

``sw/configs/gpus/<name>.toml`` holds a GPU's datasheet figures and the roofline's efficiency
factors (a :class:`~ndpdimm.sw.scenarios.catalog.Gpu`: every number with its source, the
factors marked as assumptions); ``sw/configs/gpus/fits/<name>.json`` the model fitted to a
measured table of that GPU (``ndpdimm gpu-fit``: the fit, the table it came from and the
provenance of the run that wrote it). A GPU without a fit file has the roofline only.

A hardware file's GPU opts into a fit by its ``measured`` key (:func:`fit_for`): ``""`` keeps the
roofline; the name of a GPU of this catalogue charges that GPU's committed fit, carried to the
hardware file's card through the two datasheets (:meth:`FittedGpu.scaled`: memory bandwidth and
tensor peak ratios, both 1 when the card is the measured one); a path to a ``.json`` written by
``ndpdimm gpu-fit`` charges that fit as it is (it must be of a card of the same name).
"""

import dataclasses
import functools
import json
from pathlib import Path

from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, Gpu, load_catalog
from ndpdimm.sw.scenarios.measured.fit import FittedGpu

__all__ = ["GPUS", "FITS", "load_gpu", "fit_path", "load_fit", "fit_for", "check_measured"]

GPUS = CONFIG_DIR / "gpus"
FITS = GPUS / "fits"


def load_gpu(name_or_path) -> Gpu:
    """A GPU of the catalogue (name or TOML path); ``CatalogError`` naming the file and key."""
    return load_catalog("gpus", name_or_path, Gpu, what="GPU")


def fit_path(name: str) -> Path:
    """Where the committed fit of built-in GPU ``name`` lives (it may not exist)."""
    return FITS / f"{name}.json"


def load_fit(path) -> FittedGpu:
    """A fit written by ``ndpdimm gpu-fit`` (its ``fit`` block); ``ValueError`` naming the file."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        return FittedGpu.from_dict(data["fit"])
    except FileNotFoundError:
        raise ValueError(f"{path}: no such fit file") from None
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not a fit written by ndpdimm gpu-fit ({e})") from None


def check_measured(measured: str) -> None:
    """``ValueError`` unless ``measured`` is ``""``, a GPU of this catalogue with a committed fit,
    or an existing ``.json`` (what a hardware file's loader checks before anything runs)."""
    if not measured:
        return
    if Path(measured).suffix == ".json":
        if not Path(measured).is_file():
            raise ValueError(f"measured = {measured!r}: no such fit file")
        return
    names = sorted(p.stem for p in FITS.glob("*.json") if (GPUS / f"{p.stem}.toml").is_file())
    if measured not in names:
        raise ValueError(f"measured = {measured!r}: not a GPU with a committed fit (those are "
                         f"{', '.join(names)}; \"\" for the roofline, or a fit's .json)")


def fit_for(gpu: Gpu) -> FittedGpu | None:
    """The fitted model ``gpu`` charges (its ``measured`` key: see the module docstring), or
    ``None`` for the roofline; ``ValueError`` naming the fit for one that cannot apply."""
    return _fit_for(gpu.measured, gpu.name, gpu.memory_bandwidth_gbs, gpu.fp16_tflops)


@functools.cache
def _fit_for(measured: str, name: str, bandwidth: float, tflops: float) -> FittedGpu | None:
    if not measured:
        return None
    if Path(measured).suffix == ".json":
        fit = load_fit(measured)
        if fit.gpu != name:
            raise ValueError(f"measured = {measured!r}: that fit is of {fit.gpu!r}, this GPU is "
                             f"{name!r} (name a GPU of sw/configs/gpus to carry a fit to another "
                             f"card through the datasheets)")
        return fit
    source = load_gpu(measured)
    path = fit_path(measured)
    if not path.is_file():
        raise ValueError(f"measured = {measured!r}: the GPU has no committed fit ({path})")
    fit = load_fit(path)
    memory, compute = bandwidth / source.memory_bandwidth_gbs, tflops / source.fp16_tflops
    if memory == 1.0 and compute == 1.0:
        return fit if name == fit.gpu else dataclasses.replace(fit, gpu=name)
    return fit.scaled(name, memory, compute)
