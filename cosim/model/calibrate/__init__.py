"""``ndpdimm calibrate``: fit the performance model (``cosim/model/perf/``) to RTL cycle counts.

The procedure (``docs/perf_model.md`` has the rationale and the measured figures):

1. Two fixed, disjoint sets of single-descriptor *points* (:func:`point_sets`):
   the **calibration** set and the **held-out** set. Held-out points use other
   shapes (non-power-of-two sizes, other batches, other index densities) and
   whole families the fit never sees: column gather in INT8, GEMVs with
   ``accumulate``, GELU / SCALE / RECIP activations, FP32 ELTWISE MUL, SRAM ->
   DRAM DMAs of other sizes. Points that do not fit a configuration (SRAM size,
   batch limit) are dropped for it.
2. Every point runs on the RTL backend (``cosim/rtl/harness.py``, the
   Verilated ``NdpCore`` with the timing-checked DRAM model): its operands are
   staged first (index lists DMA'd into the SRAM, as the host runtime does;
   weight and activation *values* are left as they are because no cycle count
   depends on them - the bit-serial multipliers walk every digit, the
   activation pipeline has a fixed latency), then the measured descriptor runs
   alone, after 4000 idle cycles (so that no refresh an earlier point
   postponed is paid inside it). Recorded: its ``CQ_CYCLES``, status, dispatch
   cycle, the counter increments, and the wall time of the RTL run. Also measured directly: the
   dispatch gap between back-to-back descriptors, the host pass-through
   latencies, and the busy-counter offsets.
3. The parameters in ``cosim.model.perf.FITTED`` are fitted to the calibration
   points only, by least squares on the relative error (``scipy``'s bounded
   trust-region solver from several starts). The DRAM-bound path's two
   parameters (``stream_efficiency``, ``open_penalty``) are not reachable with
   16 units (the engine consumes at most 23 B/cycle of the 102.4 the DRAM
   gives); they are fitted to the 256-unit bandwidth bench
   (``bench/results/dram_gemv.json``) when it exists.
4. The model is evaluated on the held-out points: mean and max absolute
   percentage error of ``CQ_CYCLES`` (the goal: at most 3 % mean), with the
   dispatch cycle given (as the model backend knows its own time) and without.
   Speed: simulated cycles per wall-second of the RTL runs, predictions per
   second of the model, and their ratio on the same descriptors.
5. Everything goes into ``cosim/model/calibration/<config key>.json``: the
   configuration, git commit, date, command, parameters, every point with its
   RTL and model cycles and counters, the error summary and the speeds.

``--refit FILE`` redoes steps 3-5 from the points stored in a file (no RTL): the RTL runs
of step 2 are kept in ``<cache>/calibration/<config key>.rtl.json`` under the shared cache
root (``cosim/cache.py``) before the fit.

One module per step, each importing only those above it:

* ``points``: the point catalogue (step 1, the sequences, each point's descriptor fields);
* ``measure``: running points on a backend, sharded and resumable (step 2);
* ``fitting``: the fits (step 3);
* ``evaluation``: the model against the RTL, the error summary and the speeds (step 4);
* ``record``: the procedure end to end and the record it writes (step 5);
* ``command``: the command line (:func:`add_arguments`, :func:`run`; :func:`main` is the
  stand-alone ``python -m ndpdimm.cosim.model.calibrate``).

This package re-exports the names other modules use; a test that patches a module-level
value (``measure.SHARD_CYCLES``) patches the module that owns it.

May import: ``ndpdimm.hw`` and ``ndpdimm.cosim`` (the held-out streams of ``ndpdimm.sw``
are reached through an entry point, ``command.STREAMS_GROUP``).
"""

from ndpdimm.cosim.model.calibrate.command import (
    add_arguments,
    config_from_args,
    main,
    run,
    streams_provider,
)
from ndpdimm.cosim.model.calibrate.evaluation import error_summary, evaluate, evaluate_sequences
from ndpdimm.cosim.model.calibrate.fitting import (
    BENCH_256,
    bench_comparison,
    fit,
    fit_debt,
    fit_dram_bound,
    fit_host,
    measured_params,
    sequence_params,
)
from ndpdimm.cosim.model.calibrate.measure import (
    PointStore,
    Runner,
    local_runner,
    measure_on_rtl,
    replay_sequence,
    run_points,
)
from ndpdimm.cosim.model.calibrate.points import (
    DMA_BASE,
    IDLE_CYCLES,
    POLICIES,
    expected_status,
    fits,
    model_fields,
    point_fields,
    point_sets,
    sequence_runs,
)
from ndpdimm.cosim.model.calibrate.record import (
    add_held_out_streams,
    calibrate,
    held_out_table,
    load_record,
    report,
)

__all__ = ["point_sets", "point_fields", "expected_status", "run_points", "fit", "evaluate",
           "calibrate", "report", "held_out_table", "add_arguments", "run", "main", "BENCH_256",
           "error_summary", "measure_on_rtl",
           # also used by the CLI, the benches and the tests
           "config_from_args", "load_record", "add_held_out_streams", "local_runner",
           "PointStore", "Runner", "replay_sequence", "sequence_runs", "sequence_params",
           "model_fields", "fits", "DMA_BASE", "IDLE_CYCLES", "POLICIES", "streams_provider",
           "evaluate_sequences", "bench_comparison", "fit_dram_bound", "measured_params",
           "fit_host", "fit_debt"]
