"""The training run of a profile-guided harness build (``harness_build.PGO``).

``python -m ndpdimm.cosim.rtl.pgo_train <instrumented library> <config JSON> <n_cores>`` runs
part of the cycle-identity workload (``bench/cycle_identity.py``: the calibration and held-out
points of ``cosim/model/calibrate``, in one process from reset, in a fixed order) on the
instrumented library: the cheapest point of each kind, then the others in order while their
expected cycles (the performance model's) fit in :data:`TRAIN_CYCLES`, so that every kind of descriptor (GEMVs of every operation and
dtype, DMAs, activations, rejected descriptors) trains the profile while the build stays
short. The compiler's runtime writes the profile when this process exits. A DIMM-Link build
trains on its first core.
"""

import json
import sys
import time

from ndpdimm.cosim.backend import CoreConfig

__all__ = ["TRAIN_CYCLES", "describe", "training_points", "train", "main"]

#: Expected cycles (the performance model's) of the training points. The run simulates more,
#: as every point starts from an idle DRAM: 35 points, 275,000 cycles and 5 CPU seconds on the
#: instrumented 16-unit core.
TRAIN_CYCLES = 150_000


def describe() -> str:
    """The training workload in words (part of a PGO build's identity)."""
    return (f"cycle-identity points (calibration + held-out): the cheapest of each kind, then the "
            f"others in order, within {TRAIN_CYCLES} expected cycles")


def training_points(config: CoreConfig) -> list:
    """The points of the training run, in the cycle-identity order: first the cheapest point of
    each kind (the name's first word: dense, rowg, colg, dma, silu, softmax, ...), then the others
    in order, each taken if its expected cycles fit in what is left of :data:`TRAIN_CYCLES`."""
    from ndpdimm.cosim.model import calibrate
    from ndpdimm.cosim.model.calibrate.points import expected_status, point_fields
    from ndpdimm.cosim.model.perf import PerfModel
    sets = calibrate.point_sets(config)
    model = PerfModel(config)
    # sequences (refresh-debt runs) are long and alike: left out
    points = [p for p in sets["calibration"] + sets["held_out"] if "set" not in p]
    cost = [model.descriptor_cycles(point_fields(p, config), expected_status(p)) for p in points]
    cheapest = {}
    for i, p in enumerate(points):
        kind = p["name"].split("-")[0]
        if kind not in cheapest or cost[i] < cost[cheapest[kind]]:
            cheapest[kind] = i
    left, chosen = TRAIN_CYCLES, set()
    for i in [*sorted(cheapest.values()), *range(len(points))]:
        if i not in chosen and cost[i] <= left:
            chosen.add(i)
            left -= cost[i]
    return [points[i] for i in sorted(chosen)]


def train(library: str, config: CoreConfig, n_cores: int = 1) -> dict:
    """Run the training points on ``library``; (points, simulated cycles, CPU seconds)."""
    from ndpdimm.cosim.model.calibrate.measure import Runner
    from ndpdimm.cosim.rtl.harness import RtlBackend, RtlSystem
    points = training_points(config)
    t = time.process_time()
    if n_cores == 1:
        owner = backend = RtlBackend(config, library=library, progress=False)
    else:
        owner = RtlSystem(config, n_cores, library=library, progress=False)
        backend = owner.cores[0]
    c0 = backend.cycle
    runner = Runner(backend, config)
    for pt in points:
        runner.measure(pt)
    cycles = backend.cycle - c0
    owner.close()
    return {"points": len(points), "cycles": cycles, "cpu_seconds": round(time.process_time() - t, 2)}


def main(argv=None) -> int:
    library, config, n_cores = argv if argv is not None else sys.argv[1:]
    print(json.dumps(train(library, CoreConfig(**json.loads(config)), int(n_cores))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
