"""One way onto a Dask cluster for the sweeps and the sharded regression.

* :func:`cluster_client`: a client of the scheduler at ``scheduler`` (``tcp://HOST:PORT``), or
  of a ``LocalCluster`` of ``workers`` single-threaded worker processes made for the occasion
  (closed on exit).
* :func:`dask_runner`: the two above as a ``runner(fn, tasks, on_done)`` for code below ``sw``
  that shards work without importing Dask (``cosim/model/calibrate/measure.py``'s ``run_points``).
* :func:`run_tasks`: submit ``fn(*args)`` per item and hand each outcome to ``on_done(i,
  result, error)`` as it completes. A task whose worker was lost (``KilledWorker`` once the
  scheduler's own rescheduling gave up, a closed connection, a cancelled future) is resubmitted
  up to ``retries`` times (``on_retry`` is told), then reported with its error; any other
  exception is reported at once.
"""

import contextlib

__all__ = ["cluster_client", "run_tasks", "dask_runner", "WORKER_LOST"]

#: exception names meaning the task's worker went away, not that the task failed
WORKER_LOST = ("KilledWorker", "CommClosedError", "FutureCancelledError", "CancelledError")


@contextlib.contextmanager
def cluster_client(scheduler: str | None = None, workers: int = 1):
    """``(client, description)`` of the scheduler or of a fresh LocalCluster."""
    from dask.distributed import Client, LocalCluster
    if scheduler:
        client = Client(scheduler, timeout="20s")
        try:
            yield client, f"scheduler {scheduler}"
        finally:
            client.close()
        return
    cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    client = Client(cluster)
    try:
        yield client, f"LocalCluster of {workers} worker(s)"
    finally:
        client.close()
        cluster.close()


def run_tasks(client, fn, args, order=None, retries: int = 2, on_done=None, on_retry=None,
              key=None) -> None:
    """Run ``fn(*args[i])`` for every ``i`` (submitted in ``order``) on ``client``; see the
    module docstring. ``key(i, attempt)`` names a task (default: Dask's)."""
    from dask.distributed import as_completed
    attempts = {i: 0 for i in range(len(args))}

    def submit(i):
        attempts[i] += 1
        kw = {"key": key(i, attempts[i])} if key else {}
        return client.submit(fn, *args[i], pure=False, **kw)

    futures = {}
    for i in (order if order is not None else range(len(args))):
        futures[submit(i)] = i
    pending = as_completed(list(futures))
    for fut in pending:
        i = futures.pop(fut)
        if fut.status == "finished":
            on_done(i, fut.result(), None)
            continue
        err = fut.exception()
        if type(err).__name__ in WORKER_LOST and attempts[i] <= retries:
            if on_retry:
                on_retry(i, type(err).__name__, attempts[i])
            new = submit(i)
            futures[new] = i
            pending.add(new)
            continue
        on_done(i, None, err)


def dask_runner(scheduler: str | None = None, workers: int = 1):
    """``runner(fn, tasks, on_done)``: ``fn(task)`` per task on the scheduler at ``scheduler``
    or on a fresh LocalCluster of ``workers`` processes, ``on_done(i, result, error)`` as each
    finishes (lost workers retried as in :func:`run_tasks`). ``runner.description`` says where."""
    def run(fn, tasks, on_done):
        with cluster_client(scheduler, workers) as (client, _):
            run_tasks(client, fn, [(t,) for t in tasks], on_done=on_done)
    run.description = f"Dask scheduler {scheduler}" if scheduler else \
        f"Dask LocalCluster of {workers} worker(s)"
    return run
