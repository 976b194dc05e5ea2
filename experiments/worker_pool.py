"""Worker processes for ``rlsched evaluate`` and the like: one BLAS/torch thread each, gone with
the process that started them, and a pool that survives one of them being killed.

A worker killed mid-item (the OOM killer on a large case, a signal) breaks a
:class:`~concurrent.futures.ProcessPoolExecutor`: every item not finished fails with it, and the
command used to end there, its report lost. :func:`run_surviving` instead runs the items the
broken pool had started again, each in a process of its own (so the one that kills its process
costs only itself), and the others in a fresh pool.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from experiments.process_exit import freeze_heap_at_exit

_ONE_THREAD = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

#: How often a worker checks that the process that started it is still there, s.
PARENT_CHECK_S = 1.0

#: A flag per item, set by the worker that starts it (shared memory; set in each worker).
_started: Any = None


def exit_with_parent(parent: int, every_s: float = PARENT_CHECK_S) -> None:
    """Exit this process once ``parent`` is no longer its parent (it died: a kill -9 or SIGTERM
    of ``rlsched evaluate`` would otherwise leave its workers running their case to the end and
    then waiting forever on a pipe no one reads). Runs in a daemon thread.

    :param parent: the pid of the process that started this one.
    :param every_s: seconds between checks.
    """
    while os.getppid() == parent:
        time.sleep(every_s)
    os._exit(1)


def worker_init() -> None:
    """A worker process's set-up: one BLAS and torch thread (workers are one per core), exit
    with the process that started it, and exit quickly (:mod:`experiments.process_exit`)."""
    # The environment is read when a library starts its pool, and the worker imported numpy (its
    # BLAS) while unpickling this function: limit the pools that have started, too.
    from threadpoolctl import threadpool_limits

    os.environ.update(_ONE_THREAD)
    threadpool_limits(limits=1)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    freeze_heap_at_exit()
    threading.Thread(
        target=exit_with_parent, args=(os.getppid(),), name="exit-with-parent", daemon=True
    ).start()


def _init_reporting(started: Any) -> None:
    global _started
    worker_init()
    _started = started


def _call(fn: Callable[[Any], Any], index: int, item: Any) -> Any:
    _started[index] = 1
    return fn(item)


def run_surviving(
    items: Sequence[Any],
    fn: Callable[[Any], Any],
    jobs: int,
    take: Callable[[int, Any], None],
    lost: Callable[[int, str], None],
    on_break: Callable[[int], None] | None = None,
) -> None:
    """``take(i, fn(items[i]))`` for every item, over ``jobs`` spawned processes, in ``items``'
    order of submission; ``lost(i, why)`` for an item whose own process died running it.

    :param items: the work (picklable), submitted in this order.
    :param fn: a module-level function (picklable), run in the workers.
    :param jobs: worker processes.
    :param take: called in this process with each finished item's index and result.
    :param lost: called with the index of an item whose process died even when it ran alone.
    :param on_break: called with the number of items left each time a pool breaks.
    """
    ctx = multiprocessing.get_context("spawn")
    left = list(range(len(items)))
    # Shared flags, not a queue: thousands of items would fill a pipe no one reads until a break.
    started = ctx.RawArray("b", len(items))
    while left:
        finished = _run_pooled(ctx, fn, items, left, jobs, started, take)
        left = [i for i in left if i not in finished]
        if not left:
            return
        if on_break is not None:
            on_break(len(left))
        # The item that killed its worker is among those started and not finished; with none
        # started (a worker killed as it started), the first left runs alone: progress either way.
        suspects = [i for i in left if started[i]] or left[:1]
        for i in suspects:
            if i not in _run_pooled(ctx, fn, items, [i], 1, started, take):
                lost(i, "its worker process died, running alone too")
        left = [i for i in left if i not in suspects]


class _EagerPool(ProcessPoolExecutor):
    """A pool that starts all its workers at its first submission, before its manager thread runs.

    CPython 3.11 starts a spawn-context pool's workers one per submission, while the manager
    thread may already be tearing the pool down because a worker died: a worker started then is
    never terminated and the teardown waits on it for ever, or its start fails on a pipe the
    teardown closed ("bad value(s) in fds_to_keep"). Both were seen here when a worker was killed
    as the pool filled (tests/test_worker_pool.py, about 1 run in 10 under pytest). Started
    before the manager thread exists, every worker is one the teardown knows.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Read by submit() (no spawn per submission) and by the first submission, which then
        # starts them all before the manager thread (concurrent/futures/process.py, 3.11-3.13).
        self._safe_to_dynamically_spawn_children = False


def _pool(ctx: Any, workers: int, started: Any) -> ProcessPoolExecutor:
    return _EagerPool(workers, mp_context=ctx, initializer=_init_reporting, initargs=(started,))


def _run_pooled(
    ctx: Any,
    fn: Callable[[Any], Any],
    items: Sequence[Any],
    left: list[int],
    jobs: int,
    started: Any,
    take: Callable[[int, Any], None],
) -> set[int]:
    """One pool over ``left``; the items it finished. A dead worker ends it quietly; an error of
    an item's own (its result would not unpickle) or of ``take`` (a full disk) is raised, the
    items not started cancelled."""
    finished: set[int] = set()
    failure: BaseException | None = None
    try:
        with _pool(ctx, min(jobs, len(left)), started) as pool:
            futs = {pool.submit(_call, fn, i, items[i]): i for i in left}
            for fut in as_completed(futs):
                if isinstance(fut.exception(), BrokenProcessPool):
                    continue
                try:
                    out = fut.result()
                    finished.add(futs[fut])
                    take(futs[fut], out)
                except BaseException as e:
                    failure = e
                    pool.shutdown(wait=False, cancel_futures=True)
                    break
    except (BrokenProcessPool, OSError):
        pass  # a worker died while the pool took work or shut down ("handle is closed")
    if failure is not None:
        raise failure
    return finished
