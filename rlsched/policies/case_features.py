"""What kind of case a scheduler is in: features of the fleet and of the first tasks it sees.

The case recogniser (:mod:`rlsched.policies.recogniser`) chooses a scheduling pair from these.
Everything here is observable by a real system at decision time: the fleet's datasheet figures
(the :class:`~rlsched.view.ClusterView`'s static arrays, alive nodes only) and the tasks that
have arrived so far — their arrival times, declared subtasks and sizes, priorities and
deadlines. Nothing about the future of the run (churn, drift, later arrivals) and nothing of the
simulator's ground truth. The same function computes the features of a training case offline
(from its generated tasks) and of a live run online (from the tasks the selector has seen), so
the two agree on the same tasks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlsched.estimates import subtask_cpu_seconds, subtask_gpu_seconds
from rlsched.tasks import Device, Task
from rlsched.view import ClusterView

#: The features, in order (the recogniser's checkpoint records them and refuses others).
FEATURES: tuple[str, ...] = (
    "log_nodes",
    "cpu_only_share",
    "gpus_per_gpu_node",
    "streams_per_gpu",
    "gpu_models",
    "gpu_speed_spread",
    "log_arrivals_per_gpu",
    "gpu_load",
    "cpu_load",
    "burstiness",
    "gpu_subtasks_per_task",
    "multi_gpu_share",
    "gpu_share_mean",
    "memory_per_gpu",
    "deadline_share",
    "priority_share",
    "constrained_share",
)


def fleet_features(view: ClusterView) -> dict[str, float]:
    """Features of the alive fleet's datasheet figures.

    :param view: the cluster as the scheduler sees it.
    """
    alive = np.asarray(view.alive, dtype=bool)
    valid = np.asarray(view.gpu_valid, dtype=bool) & alive[:, None]
    n_alive = max(int(alive.sum()), 1)
    gpu_nodes = valid.any(axis=1)
    n_gpus = int(valid.sum())
    tflops = np.asarray(view.gpu_tflops)[valid]
    models = np.asarray(view.gpu_model)[valid]
    return {
        "log_nodes": float(np.log10(n_alive)),
        "cpu_only_share": float((alive & ~gpu_nodes).sum() / n_alive),
        "gpus_per_gpu_node": n_gpus / max(int(gpu_nodes.sum()), 1),
        "streams_per_gpu": float(np.asarray(view.gpu_streams)[valid].mean()) if n_gpus else 0.0,
        "gpu_models": float(len(np.unique(models))) if n_gpus else 0.0,
        "gpu_speed_spread": float(tflops.std() / tflops.mean()) if n_gpus and tflops.mean() > 0 else 0.0,
    }


def _task_figures(
    task: Task, tflops: float, bw: float, core: float
) -> tuple[float, float, int, float, float]:
    """(GPU seconds, CPU seconds, GPU subtasks, mean GPU share, GPU memory MB) of one task on
    the fleet's mean GPU and core (the roofline every selector estimates with)."""
    g = c = mem = share = 0.0
    n = 0
    for s in task.graph.subtasks:
        if s.device is Device.CPU:
            c += subtask_cpu_seconds(s, core)
        else:
            g += subtask_gpu_seconds(s, tflops, bw)
            n += 1
            share += s.share
            mem += s.mem_mb
    return g, c, n, share / n if n else 0.0, mem


def workload_features(view: ClusterView, tasks: Sequence[Task]) -> dict[str, float]:
    """Features of the tasks seen so far, relative to the alive fleet.

    :param view: the cluster as the scheduler sees it.
    :param tasks: the tasks that arrived, in arrival order (at least two).
    :raises ValueError: with fewer than two tasks (no arrival rate).
    """
    if len(tasks) < 2:
        raise ValueError(f"workload features need at least 2 tasks, got {len(tasks)}")
    alive = np.asarray(view.alive, dtype=bool)
    valid = np.asarray(view.gpu_valid, dtype=bool) & alive[:, None]
    n_gpus = int(valid.sum())
    tflops = float(np.asarray(view.gpu_tflops)[valid].mean()) if n_gpus else 1.0
    bw = float(np.asarray(view.gpu_bw_gbs)[valid].mean()) if n_gpus else 1.0
    gpu_mem = float(np.asarray(view.gpu_mem_mb)[valid].mean()) if n_gpus else 1.0
    cores = float(np.asarray(view.cores)[alive].sum())
    core = float(np.asarray(view.cpu_gflops)[alive].mean()) if alive.any() else 1.0
    fig = np.array([_task_figures(t, tflops, bw, core) for t in tasks], dtype=float)
    arrivals = np.array([t.arrival_s for t in tasks], dtype=float)
    span = max(float(arrivals[-1] - arrivals[0]), 1e-6)
    rate = (len(tasks) - 1) / span
    gaps = np.diff(arrivals)
    gpu_tasks = fig[:, 2] > 0
    lowest = min(t.priority for t in tasks)
    return {
        "log_arrivals_per_gpu": float(np.log10(rate / max(n_gpus, 1))),
        # Offered work over the fleet's units, at datasheet speed: ~1 is saturated.
        "gpu_load": float(rate * fig[:, 0].mean() / max(n_gpus, 1)),
        "cpu_load": float(rate * fig[:, 1].mean() / max(cores, 1.0)),
        "burstiness": float(gaps.std() / gaps.mean()) if gaps.mean() > 0 else 0.0,
        "gpu_subtasks_per_task": float(fig[:, 2].mean()),
        "multi_gpu_share": float((fig[:, 2] >= 2).mean()),
        "gpu_share_mean": float(fig[gpu_tasks, 3].mean()) if gpu_tasks.any() else 0.0,
        "memory_per_gpu": float(fig[:, 4].mean() / gpu_mem),
        "deadline_share": float(np.mean([t.deadline_s is not None for t in tasks])),
        "priority_share": float(np.mean([t.priority > lowest for t in tasks])),
        "constrained_share": float(np.mean([bool(t.gpu_models) for t in tasks])),
    }


def case_features(view: ClusterView, tasks: Sequence[Task]) -> np.ndarray:
    """The :data:`FEATURES` of a case: its fleet and the tasks seen so far, as one vector.

    :param view: the cluster as the scheduler sees it.
    :param tasks: the tasks that arrived, in arrival order (at least two).
    """
    both = fleet_features(view) | workload_features(view, tasks)
    return np.array([both[name] for name in FEATURES], dtype=float)
