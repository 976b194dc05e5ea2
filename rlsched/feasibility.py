"""Which nodes could ever run a task: the stage-1 action mask.

A node is feasible for a task when it is alive, has the host memory the task holds, and — when
the task has GPU-only subtasks — a GPU of an allowed model with enough device memory for the
largest of them. Feasible does not mean free: queues absorb load; infeasible would wait forever.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from rlsched.tasks import Device, Task
from rlsched.view import ClusterView


@dataclass(frozen=True)
class TaskNeeds:
    """What a task requires of the node that takes it.

    :param host_mem_mb: host memory held while on the node.
    :param gpu_mem_mb: device memory of the largest GPU-only subtask (0 if none).
    :param any_gpu_mem_mb: device memory of the largest GPU-capable subtask (0 if none).
    :param needs_gpu: some subtask can only run on a GPU.
    :param needs_cpu: some subtask can only run on a CPU core.
    :param models: allowed GPU model names (empty = any).
    """

    host_mem_mb: float
    gpu_mem_mb: float
    any_gpu_mem_mb: float
    needs_gpu: bool
    needs_cpu: bool
    models: frozenset[str]


def task_needs(task: Task) -> TaskNeeds:
    """Summarise a task's requirements."""
    gpu_only = gpu_any = 0.0
    needs_gpu = needs_cpu = False
    for s in task.graph.subtasks:
        dev = s.kind.device
        if dev is Device.CPU:
            needs_cpu = True
            continue
        gpu_any = max(gpu_any, s.mem_mb)
        if dev is Device.GPU:
            needs_gpu = True
            gpu_only = max(gpu_only, s.mem_mb)
    return TaskNeeds(task.host_mem_mb, gpu_only, gpu_any, needs_gpu, needs_cpu, task.gpu_models)


def allowed_gpus(needs: TaskNeeds, view: ClusterView) -> np.ndarray:
    """(N, G) mask of GPUs of an allowed model."""
    if not needs.models:
        return view.gpu_valid
    idx = [i for i, m in enumerate(view.model_names) if m in needs.models]
    return view.gpu_valid & np.isin(view.gpu_model, idx)


def feasible_nodes(needs: TaskNeeds, view: ClusterView) -> np.ndarray:
    """(N,) bool mask of nodes that could run a task with these needs."""
    return view.alive & static_feasible(needs, view)


def static_feasible(needs: TaskNeeds, view: ClusterView) -> np.ndarray:
    """(N,) nodes whose hardware could run the task, alive or not (it never changes for a task)."""
    ok = view.host_mem_mb >= needs.host_mem_mb
    if needs.needs_cpu:
        ok &= view.cores > 0
    if needs.needs_gpu:
        if needs.models:
            ok &= (allowed_gpus(needs, view) & (view.gpu_mem_mb >= needs.gpu_mem_mb)).any(axis=1)
        else:  # any model: the node's largest GPU decides (cheaper than the (N, G) test)
            ok &= _max_gpu_mem(view) >= needs.gpu_mem_mb
    if not needs.needs_gpu and not needs.needs_cpu and needs.any_gpu_mem_mb > 0:
        # Every subtask may run on either side: a node needs cores or a fitting GPU.
        gpus = allowed_gpus(needs, view) & (view.gpu_mem_mb >= needs.any_gpu_mem_mb)
        ok &= (view.cores > 0) | gpus.any(axis=1)
    return ok


def _max_gpu_mem(view: ClusterView) -> np.ndarray:
    """(N,) device memory of each node's largest GPU (0 without GPUs), cached on the view."""
    m = view.extra.get("_max_gpu_mem")
    if m is None:
        m = view.extra["_max_gpu_mem"] = np.where(view.gpu_valid, view.gpu_mem_mb, 0.0).max(axis=1)
    return m


def why_infeasible(needs: TaskNeeds, view: ClusterView) -> str:
    """Why no node's hardware can run a task with these needs (for reports and warnings).

    Names the first requirement no node meets; when each is met by some node but never all by
    one, says so; when the hardware could run it, the nodes that could were down.
    """
    if not (view.host_mem_mb >= needs.host_mem_mb).any():
        most = float(view.host_mem_mb.max())
        return f"need {needs.host_mem_mb:,.0f} MB of host memory (largest node: {most:,.0f} MB)"
    if needs.needs_cpu and not (view.cores > 0).any():
        return "need a CPU core (no node has one)"
    if needs.needs_gpu or (not needs.needs_cpu and needs.any_gpu_mem_mb > 0 and not (view.cores > 0).any()):
        allowed = allowed_gpus(needs, view)
        mem = needs.gpu_mem_mb if needs.needs_gpu else needs.any_gpu_mem_mb
        if not view.gpu_valid.any():
            return "have a GPU-only subtask (the cluster has no GPU)"
        if not allowed.any():
            return f"need a GPU of model {', '.join(sorted(needs.models))} (the cluster has none)"
        most = float(np.where(allowed, view.gpu_mem_mb, 0.0).max())
        if most < mem:
            return f"need {mem:,.0f} MB on one GPU (largest allowed GPU: {most:,.0f} MB)"
    if not static_feasible(needs, view).any():
        return "need host memory, cores and GPUs that no single node has together"
    return "could run only on nodes that were down"
