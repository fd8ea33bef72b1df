"""Transaction-level performance model of one NDP core: the cycles of a descriptor from its fields, one module per hardware part.

The model backend (``cosim/model/backend.py``) asks it, for every descriptor, what the RTL
would have reported in ``CQ_CYCLES`` and how the performance counters would have moved,
without simulating anything: each answer is arithmetic on the descriptor's fields and the
build parameters (:class:`~ndpdimm.cosim.backend.CoreConfig`); a GEMV walks the weight
accesses of one or two output groups (at most 32 each, the pattern is periodic) and
extrapolates, so no answer depends on the size of the operation. Equations, parameters,
calibration and measured error: ``docs/perf_model.md``.

The parts, from how the hardware works (module docstrings of ``hw/``):

* ``model``: :class:`PerfModel`, which dispatches a descriptor to the part below that
  times it and carries the refresh debt between descriptors; rejected descriptors complete
  at dispatch or a few cycles later;
* ``gemv``: the GEMV engine's output groups and the larger of the compute and DRAM-bound
  paths per phase, with ``access`` (the weight accesses and the streamer/engine
  recurrence that times them), ``rows`` (which accesses open DRAM rows, which conflict)
  and ``gather`` (how unevenly a row gather loads the ranks);
* ``dma``: a burst every ``max(64 B / SRAM word, round trip / outstanding)`` cycles plus
  latency and row openings; its refreshes wait for its end;
* ``activation``: ACT / SOFTMAX / ELTWISE passes timed in the SRAM words they move;
* ``refresh``: the refresh boundaries inside a descriptor (the ranks refresh every tREFI
  from reset, all together in the core's ``aligned`` mode), what they cost it, and the
  refresh debt left to the next descriptor;
* ``host``: host pass-through accesses while a descriptor streams DRAM;
* ``counters``: the counter registers a descriptor moves;
* ``params``: the few physical constants that are fitted or measured (:class:`PerfParams`,
  grouped by part in :data:`PARAMETER_GROUPS`) and the calibration files they live in;
  ``structure``: everything else, taken from the configuration and the ``hw/`` modules that
  build the core; ``cost``: the named quantities the parts hand to the model.

The fitted parameters come from ``cosim/model/calibrate/`` runs against the RTL backend
and live in ``cosim/model/calibration/<config key>.json``. :meth:`PerfModel.for_config`
loads the file of a configuration; a configuration without one gets the default
configuration's parameters with an :class:`UncalibratedWarning` (the structural part -
units, lanes, ring, DRAM timing - is always the configuration's own), or
:class:`UncalibratedError` with ``strict=True``.

Imports: ``hw`` and ``cosim.backend`` (the configuration); nothing else of ``cosim``.
"""

from ndpdimm.cosim.model.perf.activation import BINARY_OP_CODES, REDUCTION_OP_CODES, act_op_codes
from ndpdimm.cosim.model.perf.cost import Cost, DramUse, Regime
from ndpdimm.cosim.model.perf.counters import COUNTER_NAMES
from ndpdimm.cosim.model.perf.gemv import GemvShape, gemv_shape
from ndpdimm.cosim.model.perf.host import POLICY_NAMES
from ndpdimm.cosim.model.perf.model import Dispatched, PerfModel, Timing
from ndpdimm.cosim.model.perf.params import (
    CALIBRATION_DIR,
    DEFAULT_CONFIG,
    DRAM_FITTED,
    FITTED,
    PARAMETER_GROUPS,
    PerfParams,
    UncalibratedError,
    UncalibratedWarning,
    calibration_path,
    calibration_words,
    config_key,
    load_calibration,
)
from ndpdimm.cosim.model.perf.refresh import RefreshDebt
from ndpdimm.cosim.model.perf.rows import RowOpenings
from ndpdimm.cosim.model.perf.structure import CoreStructure

__all__ = ["PerfParams", "PerfModel", "GemvShape", "gemv_shape", "config_key", "calibration_path",
           "calibration_words",
           "CALIBRATION_DIR", "DEFAULT_CONFIG", "UncalibratedWarning", "UncalibratedError",
           "COUNTER_NAMES", "FITTED", "DRAM_FITTED", "act_op_codes", "RefreshDebt", "Timing",
           "POLICY_NAMES", "load_calibration", "PARAMETER_GROUPS", "Cost", "DramUse", "Regime",
           "Dispatched", "RowOpenings", "CoreStructure"]

# The activation op codes under the names the tests check against the hardware's.
_REDUCTION_OPS, _BINARY_OPS = REDUCTION_OP_CODES, BINARY_OP_CODES
