"""The ``ndpdimm`` commands: one module per command, found through :data:`COMMANDS`.

Each command module has

* ``HELP``: its one-line help, listed by ``ndpdimm --help``;
* ``add_arguments(parser)``: declares its options on its ``argparse`` sub-parser;
* ``run(args) -> int``: does what the parsed options ask; returns the exit status (0: done,
  1: a check failed). A ``ValueError`` it raises is a user error: the CLI prints
  ``ndpdimm <command>: error: <message>`` and exits 2.

``sw/cli.py`` builds the parser from :data:`COMMANDS` and dispatches to ``run``. A command
module imports at its top only what declaring options needs (``argparse``,
``cosim/arguments.py``), so ``ndpdimm --help`` stays fast; what ``run`` needs is imported
inside it, and so is a scenario's configuration, whose fields are the options
(``options.add_config_options``): the CLI calls ``add_arguments`` of the command being run
only.

The commands (``sw/commands/<name>.py``, ``run_layer.py`` for ``run-layer``) and what they run:

* ``demo``: the Hermes scenario with the RTL in the loop (``sw/scenarios/hermes/demo.py``);
  ``--real-layer``: a real transformer MLP layer on the GEMV engine RTL
  (``sw/layer/engine_demo.py``)
* ``bench``: the benchmark suites, one JSON file each
  (:data:`ndpdimm.sw.commands.bench.SUITES`: ``bench/``, ``sw/scenarios/hermes/bench.py``, ...,
  ``sw/sweep/bench.py``)
* ``fuzz``: fuzz descriptors on the RTL harness (``cosim/fuzz/harness.py``)
* ``run-layer``: a real MLP layer or attention step through the driver API on the ``rtl`` or
  ``model`` backend, checked bit for bit against the golden model (``sw/layer/run.py``)
* ``calibrate``: fit the performance model of the ``model`` backend to RTL cycle counts
  (``cosim/model/calibrate/command.py``, on Dask with ``--scheduler`` or ``--jobs``)
* ``synth``: Yosys synthesis and the area report (``synth/command.py``)
* ``hermes``: the Hermes scenario, or a sweep (``sw/scenarios/hermes/report.py``)
* ``trimoe``: the TriMoE scenario (``sw/scenarios/trimoe/report.py``); ``--check``: the reduced
  MoE checked on a backend (``sw/scenarios/trimoe/check.py``)
* ``rapid``: the RAPID scenario (``sw/scenarios/rapid/report.py``)
* ``reproduce``: each paper's evaluation set-up (``sw/reproduce/``)
* ``sweep``: a design-space sweep on Dask distributed (``sw/sweep/run.py``)
* ``regress``: the RTL regression sharded over a Dask cluster (``sw/sweep/regress.py``)
* ``cache``: the shared build cache (``cosim/cache.py``)
* ``gpu-fit``, ``gpu-check``: a GPU's model fitted to measured operator tables, and held
  against them beside the roofline (``sw/scenarios/measured/``)
* ``gpu-profile``, ``cpu-profile``: a model's layer timed on a torch device, written as such a
  table (``sw/scenarios/measured/profile_ops.py``)
* ``export``: the core's Verilog, C header, SystemRDL and FuseSoC core file (``hw/export.py``)
* ``verilog``: the GEMV engine's Verilog (``hw/gemv/engine.py``)

``sw/commands/options.py`` holds the options several commands share and makes the options of a
configuration's fields.

May import: anything (they are the command line's own modules, at the top like ``sw/cli.py``:
the benchmark suites, synthesis, the calibration, the RTL harness); nothing else in
``ndpdimm.sw`` imports them (``tests/test_layering.py``).
"""

import importlib
from types import ModuleType

__all__ = ["COMMANDS", "command"]

#: command name -> its module, in the order ``ndpdimm --help`` lists them
COMMANDS = {
    "demo": "ndpdimm.sw.commands.demo",
    "bench": "ndpdimm.sw.commands.bench",
    "fuzz": "ndpdimm.sw.commands.fuzz",
    "run-layer": "ndpdimm.sw.commands.run_layer",
    "calibrate": "ndpdimm.sw.commands.calibrate",
    "synth": "ndpdimm.sw.commands.synth",
    "hermes": "ndpdimm.sw.commands.hermes",
    "trimoe": "ndpdimm.sw.commands.trimoe",
    "rapid": "ndpdimm.sw.commands.rapid",
    "reproduce": "ndpdimm.sw.commands.reproduce",
    "sweep": "ndpdimm.sw.commands.sweep",
    "regress": "ndpdimm.sw.commands.regress",
    "cache": "ndpdimm.sw.commands.cache",
    "gpu-fit": "ndpdimm.sw.commands.gpu_fit",
    "gpu-check": "ndpdimm.sw.commands.gpu_check",
    "gpu-profile": "ndpdimm.sw.commands.gpu_profile",
    "cpu-profile": "ndpdimm.sw.commands.cpu_profile",
    "export": "ndpdimm.sw.commands.export",
    "verilog": "ndpdimm.sw.commands.verilog",
}


def command(name: str) -> ModuleType:
    """The module of command ``name`` (a key of :data:`COMMANDS`)."""
    return importlib.import_module(COMMANDS[name])
