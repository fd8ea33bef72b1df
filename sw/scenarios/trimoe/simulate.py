"""TriMoE's simulation: every system's MoE layers, step by step, on one routing trace.

One run (:func:`~ndpdimm.sw.scenarios.trimoe.scenario.run`, ``ndpdimm trimoe``) takes an MoE model and the
hardware from the catalogue (``sw/scenarios/trimoe/catalog.py``), a batch of tokens per
step and a routing trace (synthetic, ``sw/scenarios/trimoe/workload.py``, or a recorded
file), and simulates the MoE layers of ``steps`` steps for five systems:

===========  ==================================================================================
system       devices the scheduler may use
===========  ==================================================================================
gpu_only     the GPU: resident experts (hits) and the others copied over PCIe (misses)
gpu_cpu      GPU + the AMX CPU reading the experts from host memory (all striped)
cpu_routed   the AMX CPU computes every routed expert from host memory (all striped); the GPU
             only the shared experts, with no routed expert resident (KTransformers' placement)
gpu_ndp      GPU + the NDP-DIMMs, each computing the experts localized on it (the non-resident
             experts all localized, balanced over the DIMMs; GPU misses read one DIMM)
trimoe       all three, with the layouts managed: planned from the profile, relayout over
             DIMM-Link when the device choice changes, cold-expert rebalancing over the DIMMs
===========  ==================================================================================

**Per step and sampled layer** the layer's routed experts (token counts from
the trace) plus its shared experts (always on the GPU, every token) become
:class:`~ndpdimm.sw.scenarios.trimoe.scheduler.ExpertTask` s with their time on every
device the system allows (``sw/scenarios/trimoe/costs.py``), and the scheduler places
them (greedy + bottleneck-aware refinement), with the NDP times at the host
reads each DIMM served in the previous step. The schedule is then re-timed
with the contention it causes itself (per DIMM: the bytes the CPU and GPU
misses read from it - a striped expert spreads over all DIMMs, a localized one
loads its home - over the layer's time); that is the layer's latency. Systems
with DIMMs schedule each layer a second time with the CPU and GPU-miss options
withdrawn from the experts a DIMM can run, and keep the schedule whose
contended makespan is lower. All systems but ``cpu_routed`` (whose GPU holds no routed
expert: ``config.ROUTED_DOMAINS``) use the same GPU residency: the ``slots`` per
layer that fit in the GPU's expert memory (``(memory - reserved) /
expert bytes / MoE layers``, after the shared experts), filled from a
profiling trace (``gpu_staging_experts`` buffers are kept for the misses to stream
through) and kept current by the EMA predictor's prefetch
(``sw/scenarios/trimoe/manager.py``): prefetch copies run over PCIe while the GPU
computes; what does not fit into the PCIe's idle time of the step is charged
as migration time. In ``trimoe`` the initial layout is the better (by the
time of a warm-up over the profiling steps with the management below on, not
measured) of two plans from the profile's predicted loads (EMA): (a) experts
predicted to get a token or more per step scheduled as if every layout were
free, those put on a DIMM localized there, the colder ones (a token now and
then) localized, balanced over the DIMMs, the rest striped; (b) every
expert not resident on the GPU localized, balanced (gpu_ndp's layout). The
run starts from the state the chosen warm-up left. Then a striped
expert the scheduler puts on a DIMM pays its gathering relayout inside that
task (so the scheduler takes it only where it still shortens the layer); a
localized one given to the CPU or as a GPU miss accumulates the time it
loses to being read from one DIMM, and is spread back to striped once that
loss reaches the relayout's cost (the rent-or-buy rule: never more than
twice the better of the two choices in hindsight; background relayout,
charged as migration). Every ``rebalance_every`` steps the localized experts
are rebalanced over the DIMMs by predicted load, a move only where the
lowered peak over the window pays for it (DIMM-Link moves, charged as
migration).

**Sampling.** ``sample_layers`` MoE layers are simulated; the model's other
MoE layers are taken to behave like them (latency per layer is the mean; a
step's MoE time is that times the model's MoE layers). The DIMM capacity in
the layout books is the sampled layers' share of the DIMMs.

**Outputs** per system: mean MoE layer latency, throughput (tokens of the
batch per second of MoE-layer time), per-domain utilisation (busy time /
devices x makespan), share of routed expert executions per domain, GPU hit
rate, migration time and its share, the scheduler's iterations and time per
layer; once: the EMA predictor's accuracy and state size, and where every
number came from (NDP backend, core configuration, the measured NDP and
DIMM-Link costs). Only the MoE layers are modelled (attention and the dense
first layers run on the GPU in every system and are left out).
"""

import copy
import dataclasses

import numpy as np

from ndpdimm.sw.kernels.expert import Shape as ExpertShape
from ndpdimm.sw.scenarios.base import Result, Tally
from ndpdimm.sw.scenarios.trimoe.config import DOMAINS, ROUTED_DOMAINS
from ndpdimm.sw.scenarios.trimoe.manager import STRIPED, EmaPredictor, ExpertLayout, GpuResidency
from ndpdimm.sw.scenarios.trimoe.scheduler import Device, ExpertTask, InfeasibleSchedule, schedule

__all__ = ["simulate", "SystemTally", "SystemResult"]


@dataclasses.dataclass(frozen=True)
class SystemResult(Result):
    """One system's run (``simulate.py`` describes each figure)."""
    system: str
    moe_layer_latency_ms: float
    moe_layer_latency_p99_ms: float
    step_moe_time_ms: float
    throughput_tokens_per_s: float | None
    utilisation: dict                    # domain -> busy time / capacity time (None: unused)
    executions: dict                     # gpu_hit, gpu_miss, cpu, ndp: routed expert executions
    execution_share: dict
    gpu_hit_rate: float | None
    gpu_slots_per_layer: int
    migration_seconds: dict
    migration_stall_share: float
    migration_ndp_share: float
    migration_counts: dict
    scheduler: dict
    ndp_contention_slowdown_mean: float
    placement: list                      # per step: domain code per expert of the first layer
    predictor: dict
    initial_layout: str | None           # trimoe: the initial layout plan chosen
    speedup_vs_gpu_only: float | None = None   # set by the run, against its gpu_only system


@dataclasses.dataclass
class _SystemState:
    residency: GpuResidency
    layout: ExpertLayout
    loss: np.ndarray               # [layers, experts] seconds a localized expert lost off-NDP
    contention: np.ndarray         # [layers, dimms] host-read GB/s each DIMM served last step


#: the timeline's tracks (``--timeline``, docs/trimoe.md); one process per system
STEP, LAYER, GPU, CPU = "step", "MoE layer", "GPU", "CPU (AMX)"
PCIE, PREFETCH, LINK = "PCIe host->GPU (misses)", "PCIe prefetch", "DIMM-Link"


class SystemTally(Tally):
    """What one system's run accumulates: latencies, busy and capacity time per domain,
    executions, migrations, the scheduler's effort, the placement codes and the NDP kernel log;
    ``timeline``: a :class:`~ndpdimm.cosim.timeline.Timeline` (``--timeline``) or None."""

    def __init__(self, timeline=None, process=""):
        super().__init__(timeline, process)
        self.clock = 0.0            # seconds of the run laid on the timeline so far
        self.latency = []           # per (step, layer) seconds
        self.busy = {"gpu": 0.0, "cpu": 0.0, "ndp": 0.0}
        self.capacity_time = {"gpu": 0.0, "cpu": 0.0, "ndp": 0.0}
        self.executions = {"gpu_hit": 0, "gpu_miss": 0, "cpu": 0, "ndp": 0}
        self.migration = {"relayout_in_task": 0.0, "relayout_back": 0.0, "rebalance": 0.0,
                          "prefetch_stall": 0.0}
        self.counts = {"relayouts_in_task": 0, "relayouts_back": 0, "rebalance_moves": 0,
                       "prefetches": 0, "reads_withdrawn": 0}
        self.iterations = []
        self.sched_seconds = []
        self.initial_makespan = []
        self.contention = []        # slowdown of each NDP execution by host reads
        self.placement = []         # per step: domain code per expert of the first sampled layer
        self.last_codes = None      # the codes of the layer scheduled last
        self.kernels = None         # a KernelLog of the NDP expert executions (--rtl-samples)


_CODE = {None: 0, "gpu_hit": 1, "gpu_miss": 2, "cpu": 3, "ndp": 4}


def simulate(system: str, cfg, model, hw, costs, profile, run, progress=None, timeline=None,
             kernels=None) -> "SystemResult":
    """One system over the run loads ``run`` [steps, layers, experts] (see the module docstring),
    ``cfg`` a :class:`~ndpdimm.sw.scenarios.trimoe.config.TriMoeConfig`, ``costs`` the
    :class:`~ndpdimm.sw.scenarios.trimoe.costs.DomainCosts`; its :class:`SystemResult` (the
    speed-up over ``gpu_only`` is the run's to set).
    ``timeline``: the run's schedule is laid on it as process ``TriMoE <system>``; ``kernels``
    gets every NDP expert execution of the measured run, each with the uncontended cycles of
    its cost (``--rtl-samples``)."""
    domains = DOMAINS[system]
    n_layers, n_exp = run.shape[1], run.shape[2]
    dimms = hw.ndp.dimms
    eb = costs.expert_bytes
    # GPU: expert memory minus the shared experts of every MoE layer, split over the MoE layers
    # (none where the GPU runs no routed expert)
    gpu_room = (hw.gpu.memory_gb - hw.gpu.reserved_gb) * 1e9 - cfg.gpu_staging_experts * eb
    slots = max(0, int(gpu_room // eb) // model.moe_layers - model.shared_experts) \
        if "gpu" in ROUTED_DOMAINS[system] else 0
    residency = GpuResidency(n_layers, n_exp, slots, cfg.theta_hot)
    layout = ExpertLayout(n_layers, n_exp, dimms, eb,
                          hw.ndp.capacity_gb * 1e9 * n_layers / model.moe_layers)
    predictor = EmaPredictor(n_layers, n_exp, cfg.alpha, cfg.theta_hot)
    for s in range(profile.shape[0]):
        for layer in range(n_layers):
            predictor.update(layer, profile[s, layer])
    for layer in range(n_layers):
        residency.fill(layer, predictor.predict(layer))
    state = _SystemState(residency, layout, np.zeros((n_layers, n_exp)), np.zeros((n_layers, dimms)))
    if system == "gpu_ndp":
        for layer in range(n_layers):
            _localize_cold(costs, state, None, layer, predictor.predict(layer))
    devices = [Device("gpu", "gpu")]
    if "cpu" in domains:
        devices.append(Device("cpu", "cpu"))
    if "ndp" in domains:
        devices += [Device(f"ndp{j}", "ndp") for j in range(dimms)]
    plan = None
    if system == "trimoe":
        # initial layout: of two plans, the one whose warm-up (the profile's steps once more,
        # layout management on, not measured) takes less time
        trials = {}
        for plan, make in (("scheduled", _plan_layout), ("cold_localized", _localize_cold)):
            trial = copy.deepcopy(state)
            for layer in range(n_layers):
                make(costs, trial, devices, layer, predictor.predict(layer))
            warm = SystemTally()
            for s in range(profile.shape[0]):
                _step(system, cfg, model, costs, trial, devices, profile[s], warm, predictor, s,
                      learn=False)
            trials[plan] = (float(np.sum(warm.latency)) + sum(warm.migration.values())
                            - warm.migration["relayout_in_task"], trial)
        plan = min(trials, key=lambda k: trials[k][0])
        state = trials[plan][1]
    # predictor accuracy is scored on the run only
    predictor.abs_error = predictor.total_load = 0.0
    predictor.tp = predictor.fp = predictor.fn = 0
    tally = SystemTally(timeline, f"TriMoE {system}")
    if timeline is not None:                              # the tracks in display order
        for track in [STEP, LAYER, GPU, PCIE, PREFETCH] + [CPU] * ("cpu" in domains) + \
                [Tally.dimm_track(j) for j in range(dimms) if "ndp" in domains] + [LINK] * ("ndp" in domains):
            timeline.track(tally.process, track, exclusive=track != LINK)
    tally.kernels = kernels
    for s in range(run.shape[0]):
        _step(system, cfg, model, costs, state, devices, run[s], tally, predictor, s, learn=True)
        if progress:
            progress(system, s + 1, run.shape[0])
    return SystemResult(**_summary(system, cfg, model, tally, predictor, slots, run),
                        initial_layout=plan)


def _localize_cold(costs, state, devices, layer, ema):
    """The GPU+NDP system's layout: every expert not resident on the GPU localized, balanced
    over the DIMMs by predicted NDP time."""
    res = state.residency
    state.layout.localize(layer, [e for e in range(len(ema)) if not res.is_resident(layer, e)],
                          _predicted_ndp(costs, ema))


def _predicted_ndp(costs, ema) -> list:
    """Each expert's expected NDP time per step from its EMA (an EMA x < 1 read as one token
    with probability x)."""
    return [min(1.0, x) * costs.ndp(max(1, round(float(x)))) for x in ema]


def _plan_layout(costs, state, devices, layer, ema):
    """The initial layout of ``layer`` from the predicted loads: the experts predicted to get a
    token or more (EMA >= 1) are scheduled as if every layout were free, and those the
    scheduler puts on a DIMM are localized there; the colder ones (EMA < 1: cold experts,
    a token now and then) are localized too, balanced over the DIMMs; the rest stay striped."""
    res, lay = state.residency, state.layout
    warm = [int(e) for e in np.flatnonzero(np.asarray(ema) >= 1)]
    tasks = []
    for e in warm:
        t = int(round(float(ema[e])))
        times = {"gpu": costs.gpu(t, res.is_resident(layer, e))}
        if any(d.domain == "cpu" for d in devices):
            times["cpu"] = costs.cpu(t)
        used = {}
        for d in devices:
            if d.domain == "ndp":
                times[d.name], used[d.name] = costs.ndp(t), costs.expert_bytes
        tasks.append(ExpertTask(e, t, times, used))
    devs = [Device(d.name, d.domain, lay.free(int(d.name[3:])) if d.domain == "ndp" else d.capacity)
            for d in devices]
    for e, dev in schedule(tasks, devs).assignment.items():
        if dev.startswith("ndp"):
            lay.set_home(layer, e, int(dev[3:]))
    cold = [e for e in range(len(ema)) if ema[e] < 1 and not res.is_resident(layer, e)]
    lay.localize(layer, cold, _predicted_ndp(costs, ema))


def _step(system, cfg, model, costs, state, devices, loads, tally, predictor, s, learn):
    """One step: every sampled layer scheduled; then (``learn``) the EMA update and prefetch
    planning for the next step (copies overlap this step's compute), and every
    ``rebalance_every`` steps the DIMM rebalancing (trimoe)."""
    step_time = pcie_busy = 0.0
    step_start, before = tally.clock, dict(tally.migration)
    for layer in range(loads.shape[0]):
        t, pcie = _layer(system, cfg, model, costs, state, devices, layer, loads[layer], tally)
        step_time += t
        pcie_busy += pcie
        if layer == 0:
            tally.placement.append(tally.last_codes)
    if learn:
        prefetch_bytes = 0
        for layer in range(loads.shape[0]):
            predictor.update(layer, loads[layer])
            plan = state.residency.plan_prefetch(layer, predictor.predict(layer))
            state.residency.apply(layer, plan)
            prefetch_bytes += len(plan) * costs.expert_bytes
            tally.counts["prefetches"] += len(plan)
        tally.migration["prefetch_stall"] += max(0.0, prefetch_bytes / costs.pcie - (step_time - pcie_busy))
    if system == "trimoe" and cfg.dynamic_layout and (s + 1) % cfg.rebalance_every == 0:
        for layer in range(loads.shape[0]):
            pred = _predicted_ndp(costs, predictor.predict(layer))
            moves = state.layout.rebalance(layer, pred, cfg.rebalance_moves,
                                           lambda a, b: costs.move(abs(a - b)), cfg.rebalance_every)
            tally.counts["rebalance_moves"] += len(moves)
            tally.migration["rebalance"] += sum(costs.move(abs(a - b)) for _, a, b in moves)
    if tally.timeline is not None and learn:
        _lay_step_end(tally, s, step_start, before,
                      min(prefetch_bytes / costs.pcie, max(0.0, step_time - pcie_busy)))


def _lay_step_end(tally, s, step_start, before, prefetch_s):
    """After the step's layers: the prefetch copies that fit the PCIe's idle time of the step
    (``prefetch_s``, from the step's start, beside its compute) and the time charged beyond the
    layers, one after another as the summary adds it: background relayouts back to striped and
    rebalancing moves (DIMM-Link), then the rest of the prefetch (the stall)."""
    tl, p = tally.timeline, tally.process
    delta = {k: tally.migration[k] - before[k] for k in before}
    tl.slice(p, PREFETCH, "prefetch copies (PCIe idle time)", step_start, prefetch_s, {"step": s})
    for key, track, name in (("relayout_back", LINK, "relayout back to striped"),
                             ("rebalance", LINK, "rebalance moves"),
                             ("prefetch_stall", PREFETCH, "prefetch stall")):
        tally.clock = tl.slice(p, track, name, tally.clock, delta[key], {"step": s},
                               exclusive=track != LINK)
    tl.slice(p, STEP, f"step {s}", step_start, tally.clock - step_start, {"step": s})


def _tasks(system, model, costs, state, layer, loads, rates, avoid_reads, gather=True):
    """The layer's ExpertTasks at the per-DIMM host-read ``rates`` (GB/s): the shared experts on
    the GPU, each routed expert with its time on every device of the system's
    ``ROUTED_DOMAINS``; ``avoid_reads``: an expert that can run on a DIMM may not be read by
    the CPU or as a GPU miss; ``gather`` (trimoe): a striped expert may be gathered into a DIMM
    inside its task."""
    res, lay = state.residency, state.layout
    routed = ROUTED_DOMAINS[system]
    batch = int(loads.sum()) // model.top_k
    tasks = [ExpertTask(-1 - k, batch, {"gpu": costs.gpu(batch, True)})
             for k in range(model.shared_experts)]
    for e in np.flatnonzero(loads):
        e, t = int(e), int(loads[e])
        hit = res.is_resident(layer, e)
        home = int(lay.home[layer, e])
        striped = home == STRIPED
        times, used = {}, {}
        if "ndp" in routed:
            if not striped:
                times[f"ndp{home}"] = costs.ndp(t, rates[home])
            elif system == "trimoe" and gather:
                for j in range(lay.dimms):
                    if lay.free(j) >= costs.expert_bytes:
                        times[f"ndp{j}"] = costs.relayout(True) + costs.ndp(t, rates[j])
                        used[f"ndp{j}"] = costs.expert_bytes
        if "gpu" in routed and (hit or not (avoid_reads and times)):
            times["gpu"] = costs.gpu(t, hit, striped)
        if "cpu" in routed and not (avoid_reads and times.keys() - {"gpu"}):
            times["cpu"] = costs.cpu(t, striped)
        tasks.append(ExpertTask(e, t, times, used))
    return tasks


def _kind(state, layer, e, dev) -> str:
    if dev == "gpu":
        return "gpu_hit" if state.residency.is_resident(layer, e) else "gpu_miss"
    return "cpu" if dev == "cpu" else "ndp"


def _contended(costs, state, layer, tasks, sched, prev_rates):
    """The schedule's device loads with each DIMM's NDP work at the host-read rate the schedule
    makes it serve (bytes the CPU and GPU misses read from it over the layer's time: a striped
    expert spreads over all DIMMs, a localized one loads its home); returns (loads, rates)."""
    lay = state.layout
    host_bytes = np.zeros(lay.dimms)
    for task in tasks:
        if task.expert >= 0 and _kind(state, layer, task.expert, sched.assignment[task.expert]) \
                in ("cpu", "gpu_miss"):
            home = int(lay.home[layer, task.expert])
            if home == STRIPED:
                host_bytes += costs.expert_bytes / lay.dimms
            else:
                host_bytes[home] += costs.expert_bytes
    loads = dict(sched.loads)
    rates = host_bytes / sched.makespan / 1e9 if sched.makespan > 0 else np.zeros(lay.dimms)
    for task in tasks:
        dev = sched.assignment[task.expert]
        if dev.startswith("ndp"):
            j = int(dev[3:])
            loads[dev] += costs.ndp(task.tokens, rates[j]) - costs.ndp(task.tokens, prev_rates[j])
    return loads, rates


def _layer(system, cfg, model, costs, state, devices, layer, loads, tally):
    """Schedule one layer of one step; returns (latency seconds, PCIe busy seconds).

    Host reads slow the DIMMs' NDP work down, so when a system has the DIMMs and another
    domain that reads them, the layer is scheduled twice - with every option, and with the
    CPU and GPU-miss options withdrawn from the experts a DIMM can run - and the schedule
    whose makespan *with* the contention it causes is lower is kept. The second schedule is
    dropped when it cannot fit (its striped experts may then only be gathered into DIMMs, and
    the DIMMs' free room may not hold them all)."""
    lay = state.layout
    names = {d.name for d in devices}
    prev = state.contention[layer]
    # capacity of the DIMMs for gathered experts: what the layout books leave free
    devs = [Device(d.name, d.domain, lay.free(int(d.name[3:])) if d.domain == "ndp" else d.capacity)
            for d in devices]
    candidates = []
    for avoid in ((False, True) if "ndp0" in names else (False,)):
        tasks = _tasks(system, model, costs, state, layer, loads, prev, avoid, cfg.dynamic_layout)
        try:
            sched = schedule(tasks, devs, max_iterations=10_000 if system in cfg.refinement else 0)
        except InfeasibleSchedule:
            if not avoid:
                raise
            continue
        dev_loads, rates = _contended(costs, state, layer, tasks, sched, prev)
        candidates.append((max(dev_loads.values()), avoid, tasks, sched, dev_loads, rates))
    makespan, avoid, tasks, sched, dev_loads, rates = min(candidates, key=lambda c: (c[0], c[1]))
    tally.counts["reads_withdrawn"] += avoid
    tally.iterations.append(sum(c[3].iterations for c in candidates))
    tally.sched_seconds.append(sum(c[3].seconds for c in candidates))
    tally.initial_makespan.append(sched.initial_makespan)
    pcie = 0.0
    codes = np.zeros(len(loads), np.int8)
    cursor = dict.fromkeys(dev_loads, tally.clock)       # each device runs its tasks in turn
    for task in tasks:
        e = task.expert
        if tally.timeline is not None:
            _lay_task(tally, costs, state, layer, task, sched.assignment[e], cursor, prev, rates)
        if e < 0:
            continue
        dev = sched.assignment[e]
        kind = _kind(state, layer, e, dev)
        is_striped = lay.home[layer, e] == STRIPED
        if kind == "gpu_miss":
            pcie += costs.pcie_transfer()
        if kind == "ndp":
            j = int(dev[3:])
            tally.contention.append(costs.contention(task.tokens, rates[j]))
            if tally.kernels is not None:
                tally.kernels.add(ExpertShape(hidden=model.hidden, ffn=model.expert_ffn,
                                               tokens=task.tokens, dtype="float16"),
                                  costs.ndp_cost.cycles(task.tokens))
        tally.executions[kind] += 1
        codes[e] = _CODE[kind]
        # layout changes caused by this schedule (trimoe with its layouts managed only)
        if system == "trimoe" and cfg.dynamic_layout:
            if kind == "ndp" and is_striped:
                lay.set_home(layer, e, int(dev[3:]))
                tally.migration["relayout_in_task"] += costs.relayout(True)
                tally.counts["relayouts_in_task"] += 1
            elif kind in ("cpu", "gpu_miss") and not is_striped:
                # rent or buy: relayout back once the time lost to reading it from one DIMM
                # adds up to what the relayout costs (at most twice the better choice in hindsight)
                t = task.tokens
                state.loss[layer, e] += (costs.cpu(t, False) - costs.cpu(t, True) if kind == "cpu"
                                         else costs.gpu(t, False, False) - costs.gpu(t, False, True))
                if state.loss[layer, e] >= costs.relayout(False):
                    lay.set_home(layer, e, STRIPED)
                    state.loss[layer, e] = 0.0
                    tally.migration["relayout_back"] += costs.relayout(False)
                    tally.counts["relayouts_back"] += 1
            elif kind == "ndp":
                state.loss[layer, e] = 0.0
    tally.last_codes = codes
    state.contention[layer] = rates
    tally.latency.append(makespan)
    if tally.timeline is not None:
        tally.timeline.slice(tally.process, LAYER, f"layer {layer}", tally.clock, makespan,
                             {"layer": layer, "withdrawn_reads": avoid})
        tally.clock += makespan
    for d in devices:
        tally.busy[d.domain] += dev_loads[d.name]
        tally.capacity_time[d.domain] += makespan
    return makespan, pcie


def _lay_task(tally, costs, state, layer, task, dev, cursor, prev, rates):
    """One expert task on its device's track, after the device's earlier tasks of the layer
    (the scheduler's device load is their sum); an NDP task at the host-read rate the layer's
    schedule makes its DIMM serve (as :func:`_contended`), a striped expert's gathering
    relayout at its start (also on DIMM-Link); a GPU miss's weights over PCIe from its start
    (pipelined with its compute)."""
    tl, p, e = tally.timeline, tally.process, task.expert
    dur = task.times[dev]
    args = {"expert": e, "tokens": task.tokens, "layer": layer}
    if e < 0:
        name = f"shared expert {-1 - e}"
    else:
        kind = _kind(state, layer, e, dev)
        name = f"expert {e} ({kind.replace('_', ' ')})"
        args["striped"] = bool(state.layout.home[layer, e] == STRIPED)
    start = cursor[dev]
    if dev.startswith("ndp"):
        j = int(dev[3:])
        dur += costs.ndp(task.tokens, rates[j]) - costs.ndp(task.tokens, prev[j])
        args["host_read_gbs"] = float(rates[j])
        if args["striped"]:
            tl.slice(p, LINK, f"relayout expert {e} into DIMM {j}", start, costs.relayout(True),
                     args, exclusive=False)
        track = Tally.dimm_track(j)
    elif dev == "gpu":
        track = GPU
        if e >= 0 and kind == "gpu_miss":
            tl.slice(p, PCIE, f"expert {e} weights", start, costs.pcie_transfer(), args)
    else:
        track = CPU
    cursor[dev] = tl.slice(p, track, name, start, dur, args)


def _mean(xs):
    return float(np.mean(xs)) if len(xs) else 0.0


def _summary(system, cfg, model, tally, predictor, slots, run) -> dict:
    layer_s = _mean(tally.latency)
    total = float(np.sum(tally.latency))
    # relayouts into a DIMM are inside their NDP task (the layer's makespan); the rest is extra
    extra = float(sum(v for k, v in tally.migration.items() if k != "relayout_in_task"))
    runs = sum(tally.executions.values())
    gpu_runs = tally.executions["gpu_hit"] + tally.executions["gpu_miss"]
    util = {d: (tally.busy[d] / tally.capacity_time[d] if tally.capacity_time[d] else None)
            for d in tally.busy}
    step_moe_s = layer_s * model.moe_layers
    return {
        "system": system,
        "moe_layer_latency_ms": layer_s * 1e3,
        "moe_layer_latency_p99_ms": float(np.percentile(tally.latency, 99)) * 1e3,
        "step_moe_time_ms": step_moe_s * 1e3,
        "throughput_tokens_per_s": cfg.batch / (step_moe_s + extra / run.shape[0] * model.moe_layers
                                                / run.shape[1]) if step_moe_s else None,
        "utilisation": util,
        "executions": dict(tally.executions),
        "execution_share": {k: v / runs for k, v in tally.executions.items()} if runs else {},
        "gpu_hit_rate": tally.executions["gpu_hit"] / gpu_runs if gpu_runs else None,
        "gpu_slots_per_layer": slots,
        "migration_seconds": dict(tally.migration),
        # time spent migrating: stalls (background relayouts, rebalancing, prefetch beyond the
        # PCIe's idle time) as a share of the wall time, and relayouts into a DIMM as a share of
        # the DIMMs' busy time (they run inside the NDP tasks)
        "migration_stall_share": extra / (total + extra) if total + extra else 0.0,
        "migration_ndp_share": (tally.migration["relayout_in_task"] / tally.busy["ndp"]
                                if tally.busy["ndp"] else 0.0),
        "migration_counts": dict(tally.counts),
        "scheduler": {"iterations_mean": _mean(tally.iterations),
                      "iterations_max": int(max(tally.iterations, default=0)),
                      "seconds_per_layer_mean": _mean(tally.sched_seconds),
                      "seconds_per_layer_max": float(max(tally.sched_seconds, default=0.0)),
                      "greedy_makespan_ms": _mean(tally.initial_makespan) * 1e3},
        "ndp_contention_slowdown_mean": _mean(tally.contention),
        "placement": [c.tolist() for c in tally.placement],
        "predictor": {**predictor.accuracy(),
                      "state_bytes_full_model": model.moe_layers * model.experts * 4},
    }
