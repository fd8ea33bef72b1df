"""The GPU catalogue (``sw/configs/gpus/``) and the fitted models committed beside it.

``sw/configs/gpus/<name>.toml`` holds a GPU's datasheet figures and the roofline's efficiency
factors (a :class:`~ndpdimm.sw.scenarios.catalog.Gpu`: every number with its source, the
factors marked as assumptions); ``sw/configs/gpus/fits/<name>.json`` the model fitted to a
measured table of that GPU (``ndpdimm gpu-fit``: the fit, the table it came from and the
provenance of the run that wrote it). A GPU without a fit file has the roofline only.
"""

import json
from pathlib import Path

from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, Gpu, load_catalog
from ndpdimm.sw.scenarios.measured.fit import FittedGpu

__all__ = ["GPUS", "FITS", "load_gpu", "fit_path", "load_fit"]

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
