"""Run metrics: throughput, latency, utilisation and the paper's load-balancing degree."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from rlsched.records import TaskRecord


@dataclass
class RunMetrics:
    """Summary of one run. Times in seconds, throughput in tasks per second."""

    throughput: float
    makespan_s: float
    tasks_total: int
    tasks_completed: int
    tasks_lost: int
    tasks_unschedulable: int
    tasks_requeued: int
    gpu_util: float
    load_balance: float
    latency_mean_s: float
    latency_p50_s: float
    latency_p95_s: float
    latency_p99_s: float
    queue_wait_mean_s: float
    deadline_miss_rate: float
    wall_s: float
    decisions_per_s: float
    #: A policy of the run read the simulator's ground truth: a clairvoyant reference, not a
    #: scheduler (``rlsched.scheduler.Clairvoyant``).
    clairvoyant: bool = False

    @property
    def not_completed(self) -> int:
        """Tasks that did not complete, whatever the reason: lost, unschedulable or failed.

        Every report, simulated or live, shows this one count (``tasks_total - tasks_completed``).
        """
        return self.tasks_total - self.tasks_completed

    def to_dict(self) -> dict[str, float | int | None]:
        """Plain-JSON dictionary (NaN becomes ``None``)."""
        return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in asdict(self).items()}


def load_balance(util: dict[str, np.ndarray]) -> float:
    """The paper's load-balancing degree: 1 - std over nodes of mean(CPU, host memory, GPU, GPU memory).

    Nodes that were never alive are left out; GPU terms are left out for GPU-less nodes.
    """
    alive = util["alive_s"] > 0
    if not alive.any():
        return math.nan
    has_gpu = util["has_gpu"]
    four = (util["cpu"] + util["host_mem"] + util["gpu"] + util["gpu_mem"]) / 4.0
    two = (util["cpu"] + util["host_mem"]) / 2.0
    load = np.where(has_gpu, four, two)[alive]
    return float(1.0 - load.std())


def summarise(
    records: Sequence[TaskRecord],
    util: dict[str, np.ndarray],
    *,
    unschedulable: int,
    decisions: int,
    wall_s: float,
    decide_s: float,
    clairvoyant: bool = False,
) -> RunMetrics:
    """Compute :class:`RunMetrics` from per-task records and utilisation integrals.

    :param records: one record per task.
    :param util: per-node time-averaged utilisations (see the simulator's accumulator).
    :param unschedulable: tasks that never found a feasible node.
    :param decisions: stage-1 decisions made.
    :param wall_s: wall time of the whole run.
    :param decide_s: wall time spent inside stage-1 decisions.
    :param clairvoyant: a policy of the run read the simulator's ground truth.
    """
    arr = np.array([r.arrival_s for r in records], dtype=np.float64)
    done = np.array([r.done_s for r in records], dtype=np.float64)
    start = np.array([r.first_start_s for r in records], dtype=np.float64)
    ok = ~np.isnan(done)
    n_done = int(ok.sum())
    lat = done[ok] - arr[ok]
    makespan = float(done[ok].max() - arr.min()) if n_done else math.nan
    with_dl = [(r.done_s, r.deadline_s) for r in records if r.deadline_s is not None]
    missed = sum(1 for d, dl in with_dl if math.isnan(d) or d > dl)
    pct = (lambda q: float(np.percentile(lat, q))) if n_done else (lambda q: math.nan)
    cap = util["gpu_capacity_s"].sum()
    return RunMetrics(
        throughput=n_done / makespan if n_done and makespan > 0 else 0.0,
        makespan_s=makespan,
        tasks_total=len(records),
        tasks_completed=n_done,
        tasks_lost=len(records) - n_done - unschedulable,
        tasks_unschedulable=unschedulable,
        tasks_requeued=sum(r.requeues for r in records),
        gpu_util=float(util["gpu_seconds"].sum() / cap) if cap > 0 else 0.0,
        load_balance=load_balance(util),
        latency_mean_s=float(lat.mean()) if n_done else math.nan,
        latency_p50_s=pct(50),
        latency_p95_s=pct(95),
        latency_p99_s=pct(99),
        queue_wait_mean_s=float(np.nanmean(start[ok] - arr[ok])) if n_done else math.nan,
        deadline_miss_rate=missed / len(with_dl) if with_dl else 0.0,
        wall_s=wall_s,
        decisions_per_s=decisions / decide_s if decide_s > 0 else math.nan,
        clairvoyant=clairvoyant,
    )


#: The middle of a run's arrivals over which :func:`served_share` counts (edges have no steady state).
SERVED_WINDOW = (0.1, 0.9)


def served_share(
    arrivals: Sequence[float] | np.ndarray,
    done: Sequence[float] | np.ndarray,
    floor: Sequence[float] | np.ndarray | None = None,
) -> float:
    """Completions within the middle of the arrival window (:data:`SERVED_WINDOW`), over the
    completions an ideal scheduler would make in it: each task done at its arrival plus
    ``floor`` (its least possible latency; 0 without one).

    A scheduler that keeps up completes tasks as fast as they arrive: with any steady extra
    latency its completions in a window are the ideal ones shifted by it, so the share is ~1.
    One that does not keep up completes at its capacity, below the arrival rate, and the share
    is about capacity over arrival rate. Unlike throughput over the whole run it does not depend
    on how long the run is against its tail latency, and with ``floor`` not on how long the
    tasks themselves run (replayed trace pods run for minutes in a run of a few). NaN under 20
    tasks.

    :param arrivals: arrival time of every task.
    :param done: completion time of every task, in the same order (NaN: not completed).
    :param floor: each task's least possible latency, in the same order (NaN: never runnable).
    """
    a = np.asarray(arrivals, dtype=np.float64)
    if len(a) < 20:
        return math.nan
    d = np.asarray(done, dtype=np.float64)
    ideal = a + (np.asarray(floor, dtype=np.float64) if floor is not None else 0.0)
    t0, t1 = _window(a)
    expected = np.count_nonzero((ideal >= t0) & (ideal <= t1))  # NaN compares False
    completed = np.count_nonzero((d >= t0) & (d <= t1))
    return float(completed / expected) if expected else math.nan


def _window(arrivals: np.ndarray) -> tuple[float, float]:
    """The middle of the arrival window (:data:`SERVED_WINDOW`): its first and last arrival."""
    order = np.sort(arrivals)
    lo, hi = SERVED_WINDOW
    return float(order[int(lo * len(order))]), float(order[int(hi * len(order)) - 1])
