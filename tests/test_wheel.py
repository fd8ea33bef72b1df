"""The installed package: the wheel carries everything, and it runs from anywhere.

* fast: build the wheel (``python -m build --wheel --no-isolation``, from a copy of the source
  tree so no stale ``build/lib`` leaks in) and check it holds every Python package folder and
  module and every data file of the source tree, found by walking the tree rather than listed
  here: a new package missing from ``[tool.setuptools] packages`` or a new data file missing
  from ``[tool.setuptools.package-data]`` fails. Only :data:`NOT_PACKAGED` is left out, each
  folder with its reason.
* ``sim``: install that wheel into a fresh venv and run ``ndpdimm run-layer --backend rtl
  --units 8`` from an empty folder with ``$NDPDIMM_CACHE`` in a temporary folder: the 8-unit
  harness is built into that cache (nothing into the working folder) and the layer is
  bit-exact. Dependencies come through the machine's pip configuration (its cache, the local
  torch wheel), as for ``make install``.
"""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
#: top-level folder -> import name of the one distribution (``[tool.setuptools.package-dir]``)
PACKAGE_DIRS = {"hw": "ndpdimm/hw", "cosim": "ndpdimm/cosim", "sw": "ndpdimm/sw",
                "synth": "ndpdimm/synth", "bench": "ndpdimm/bench"}
#: Files of those folders that are outputs, not inputs the code reads: (folder, except these).
NOT_PACKAGED = {
    # benchmark results of `ndpdimm bench` (committed for the docs); calibrate reads one of them
    "bench/results": ("bench/results/dram_gemv.json",),
    # the area report `ndpdimm synth` writes
    "synth/reports": (),
}
_SKIP_PARTS = {"__pycache__"}


def source_files() -> list[str]:
    """Every file of the package folders the wheel must hold, relative to the repository."""
    keep = {f for kept in NOT_PACKAGED.values() for f in kept}
    out = []
    for top in PACKAGE_DIRS:
        for path in sorted((REPO / top).rglob("*")):
            rel = path.relative_to(REPO).as_posix()
            if not path.is_file() or _SKIP_PARTS & set(path.parts) or path.suffix == ".pyc":
                continue
            if rel not in keep and any(rel.startswith(folder + "/") for folder in NOT_PACKAGED):
                continue
            out.append(rel)
    return out


def in_wheel(rel: str) -> str:
    """Where the repository file ``rel`` lies inside the wheel."""
    top, _, rest = rel.partition("/")
    return f"{PACKAGE_DIRS[top]}/{rest}"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel built from a copy of the source tree (the files :func:`source_files` walks)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, src / name)
    for top in PACKAGE_DIRS:
        shutil.copytree(REPO / top, src / top, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    proc = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir",
                           str(tmp / "dist"), str(src)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (whl,) = (tmp / "dist").glob("ndpdimm-*.whl")
    return whl


def test_wheel_holds_every_package_module_and_data_file(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    files = source_files()
    packages = [f for f in files if f.endswith("/__init__.py")]
    data = [f for f in files if not f.endswith(".py")]
    # the walk found what the backends need (a broken walk must not pass by finding nothing)
    for needed in ("cosim/rtl/cpp/ndp_harness.cpp", "cosim/dram/cpp/dram_model.h",
                   "hw/configs/ddr4-3200.toml", "sw/configs/models/llama2-70b.toml"):
        assert needed in files
    assert len(packages) >= 20 and len(data) >= 20
    missing = [f for f in files if in_wheel(f) not in names]
    assert not missing, (f"{len(missing)} file(s) of the source tree not in {wheel.name}: a package missing "
                         f"from [tool.setuptools] packages or a data file from [tool.setuptools.package-data] "
                         f"in pyproject.toml (or add its folder to NOT_PACKAGED with the reason): {missing}")
    dist_info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert "ndpdimm = ndpdimm.sw.cli:console_main" in entry_points


def test_the_config_loader_finds_the_packaged_folders_in_the_wheel(wheel, tmp_path):
    """Unpacked and imported on its own, the wheel's configuration folders are what
    ``importlib.resources`` gives the loaders (``hw/config_file.py``), and every kind loads."""
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import json; from ndpdimm.hw.memory.dram import DEFAULT_CONFIG_PATH, load_dram_config; "
            "from ndpdimm.sw.scenarios.catalog import CONFIG_DIR, list_models, load_model; "
            "from ndpdimm.sw.scenarios.hermes.catalog import load_hardware; "
            "from ndpdimm.sw.scenarios.rapid.workload import WORKLOAD_DIR, list_workloads; "
            "from ndpdimm.sw.reproduce.params import CONFIG_DIR as REPRO, load_params; "
            "load_dram_config(); load_hardware(); load_params('hermes'); "
            "print(json.dumps([str(DEFAULT_CONFIG_PATH), str(CONFIG_DIR), str(WORKLOAD_DIR), "
            "str(REPRO), list_models(), list_workloads(), load_model('llama2-70b').hidden]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env=dict(env, PYTHONPATH=str(site)))
    assert proc.returncode == 0, proc.stderr[-3000:]
    dram, configs, workloads, repro, models, names, hidden = json.loads(proc.stdout)
    root = str(site.resolve())
    assert all(p.startswith(root) for p in (dram, configs, workloads, repro)), (root, dram)
    assert "llama2-70b" in models and "mixed" in names and hidden == 8192


def test_not_packaged_folders_exist():
    """Each exclusion still names a folder of the tree (a stale one would hide nothing useful)."""
    for folder, kept in NOT_PACKAGED.items():
        assert (REPO / folder).is_dir(), folder
        for f in kept:
            assert (REPO / f).is_file(), f


@pytest.mark.sim
def test_installed_wheel_runs_the_rtl_backend_from_an_empty_folder(wheel, tmp_path):
    venv, work, cache = tmp_path / "venv", tmp_path / "work", tmp_path / "cache"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", str(wheel)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout[-3000:] + pip.stderr[-3000:]
    # a clean environment: nothing of the checkout's venv or the repository on the paths
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS", "VERILATOR_ROOT")
           and not k.startswith("NDPDIMM_")}
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and not p.startswith(str(REPO)))
    env["NDPDIMM_CACHE"] = str(cache)
    where = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import ndpdimm.cosim.rtl.harness as h; print(h.__file__)"],
                           cwd=work, env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(venv), where

    run = subprocess.run([str(venv / "bin" / "ndpdimm"), "run-layer", "--backend", "rtl", "--units", "8",
                          "--no-progress", "--json", "result.json"],
                         cwd=work, env=env, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = json.loads((work / "result.json").read_text())
    assert result["backend"] == "rtl" and result["config"]["n_units"] == 8
    assert result["bit_exact_vs_golden"] and len(result["steps"]) == 5
    assert all(r["bit_exact"] and r["elapsed_cycles"] > 0 for r in result["steps"])
    for r in result["steps"]:
        assert any(line.startswith(r["step"]) and "bit-exact" in line for line in run.stdout.splitlines())
    assert sorted(p.name for p in work.iterdir()) == ["result.json"]
    built = list((cache / "harness").glob("ndp_core-*/build.done.json"))
    assert len(built) == 1 and json.loads(built[0].read_text())["config"]["n_units"] == 8
    assert (cache / "CACHEDIR.TAG").exists()
