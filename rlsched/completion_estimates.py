"""Per-node completion-time estimates of a task, from what a scheduler may observe.

The paper's expected completion time (ETC) and its memory-aware variant, vectorised over nodes.
Stage-1 policies (``mct``, ``mct-mem``), the observation encoding and the environments'
invalid-action fallback all read them, so they belong to the core, not to a policy.
"""

from __future__ import annotations

import numpy as np

from rlsched.estimates import NOMINAL_BW_EFF, NOMINAL_COMPUTE_EFF, cpu_seconds, task_work_vector
from rlsched.tasks import Task
from rlsched.view import ClusterView


def _static(view: ClusterView) -> dict[str, np.ndarray | bool]:
    """Reciprocals of datasheet arrays used on every decision, computed once per view."""
    st = view.extra.get("_estimate_static")
    if st is None:
        has_gpu = view.n_gpus > 0
        with np.errstate(divide="ignore"):
            inv_tf = np.where(has_gpu, 1.0 / (view.node_tflops_mean * (1e3 * NOMINAL_COMPUTE_EFF)), 0.0)
            inv_bw = np.where(has_gpu, 1.0 / (view.node_bw_mean * NOMINAL_BW_EFF), 0.0)
        st = view.extra["_estimate_static"] = {
            "has_gpu": has_gpu,
            "all_gpu": bool(has_gpu.all()),
            "inv_tf": inv_tf,
            "inv_bw": inv_bw,
            "inv_ng": 1.0 / np.maximum(view.n_gpus, 1),
            "inv_cores": 1.0 / np.maximum(view.cores, 1),
            "inv_cgf": 1.0 / view.cpu_gflops,
            "inv_net": 1.0 / view.net_mbps,
        }
    return st


def estimates(task: Task, view: ClusterView) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the task's (GPU-side run time, CPU-side run time, expected completion time).

    Run times come from datasheets corrected by measured speeds; GPU-capable work is costed on the
    node's average GPU, and on a core where a node has no GPU. The expected completion time (ETC,
    relative to now) adds the input transfer after what the NIC already has queued and the queued
    work ahead of the task on the node's GPUs or cores, whichever is longer.
    """
    st = _static(view)
    gf, gb, cf, cb = task_work_vector(task)
    inv_sp = 1.0 / np.maximum(view.node_speed_gpu, 1e-3)
    inv_cpu = st["inv_cgf"] / np.maximum(view.speed_cpu, 1e-3)  # seconds per GFLOP on a core
    g_s = np.maximum(gf * st["inv_tf"], gb * st["inv_bw"]) * inv_sp
    if not st["all_gpu"]:
        # cpu_seconds(gflop, gbytes, 1.0) x (1 / rate) is exact for the flop term and slightly
        # pessimistic for the bandwidth term on fast cores — the same for every node.
        g_s = np.where(st["has_gpu"], g_s, cpu_seconds(gf, gb, 1.0) * inv_cpu)
    c_s = cpu_seconds(cf, cb, 1.0) * inv_cpu
    wait = np.maximum(
        view.backlog_gpu_s * st["inv_ng"] * inv_sp, view.backlog_cpu_s * st["inv_cores"] * inv_cpu
    )
    etc = view.net_in_busy_s + task.input_mb * st["inv_net"] + wait + g_s + c_s
    return g_s, c_s, etc


def host_memory_wait(task: Task, view: ClusterView) -> np.ndarray:
    """Per node: estimated seconds before ``task``'s host memory is admitted (0 where it fits).

    Admission is FIFO, so the task waits until the memory held and queued ahead of it, plus its
    own, fits: until about ``excess / m`` of the tasks ahead have finished (``m``: their mean host
    memory). Those admitted run side by side, ``used / m`` of them, each for about the node's
    nominal backlog per assigned task (corrected by measured speeds), so tasks finish at
    ``(used / m) / duration`` per second.
    """
    tasks = np.maximum(view.tasks_on_node, 1)
    held = view.host_mem_used_mb + view.host_mem_queued_mb
    excess = held + task.host_mem_mb - view.host_mem_mb
    mean_mem = np.maximum(held / tasks, 1.0)
    inv_sp = 1.0 / np.maximum(view.node_speed_gpu, 1e-3)
    inv_cpu = 1.0 / np.maximum(view.speed_cpu, 1e-3)
    duration = (view.backlog_gpu_s * inv_sp + view.backlog_cpu_s * inv_cpu) / tasks
    side_by_side = np.maximum(view.host_mem_used_mb / mean_mem, 1.0)
    wait = np.ceil(np.maximum(excess, 0.0) / mean_mem) * duration / side_by_side
    return np.where(excess > 0, wait, 0.0)


def memory_aware_estimates(
    task: Task, view: ClusterView
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the task's GPU and CPU seconds and ETC as :func:`estimates`, except that the ETC
    counts the host-memory admission wait (``mct-mem``), and that wait (0 where the task fits)."""
    g_s, c_s, etc = estimates(task, view)
    wait = host_memory_wait(task, view)
    after_mem = wait + task.input_mb * _static(view)["inv_net"] + g_s + c_s
    return g_s, c_s, np.maximum(etc, after_mem), wait


def best_etc_node(task: Task, view: ClusterView, mask: np.ndarray) -> int:
    """The feasible node with the smallest ETC (what ``mct`` picks)."""
    return int(np.argmin(np.where(mask, estimates(task, view)[2], np.inf)))
