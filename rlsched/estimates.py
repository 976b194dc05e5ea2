"""Run-time estimates from public information and observed speeds: the one home of the roofline.

A scheduler knows each subtask's declared work (GFLOP, bytes of memory traffic) and each device's
datasheet figures. From these it can form a roofline estimate of run time. The estimate is
deliberately naive — one efficiency for every kernel and architecture — because how well a kernel
really uses a device, how it slows when co-located, and how devices drift, are exactly what a
scheduler must *measure* (``ClusterView.speed_*``) or learn; the truth is in ``envs.ground_truth``.

Two parts: nominal seconds of work on a device (:func:`gpu_seconds`, :func:`cpu_seconds` and
their per-subtask and per-task forms, which both worlds use for a node's backlog), and per-node
completion estimates of a task (:func:`node_estimates`: the paper's expected completion time,
ETC, and its memory-aware variant), which stage-1 policies, the observation encoding and the
environments' invalid-action fallback read.
"""

from __future__ import annotations

import numpy as np

from rlsched.hardware import CPU_CORE_GFLOPS, gpu_model
from rlsched.tasks import Device, Subtask, SubtaskGraph, Task
from rlsched.view import ClusterView

#: Fraction of peak FP32 that the nominal model assumes a kernel reaches.
NOMINAL_COMPUTE_EFF = 0.5
#: Fraction of peak memory bandwidth the nominal model assumes.
NOMINAL_BW_EFF = 0.7
#: Memory bandwidth one CPU core can draw, GB/s.
CPU_CORE_BW_GBS = 8.0
#: The device a task's critical-path share is costed on (the share is a ratio, so which one
#: matters only through the roofline's compute/bandwidth balance; it is the features' reference).
_PATH_REF = gpu_model("T4")


def gpu_seconds(gflop: float, gbytes: float, tflops: float, bw_gbs: float) -> float:
    """Roofline run time of work on one GPU at nominal efficiency.

    :param gflop: floating-point work, GFLOP.
    :param gbytes: device-memory traffic, GB.
    :param tflops: the GPU's peak FP32 TFLOP/s.
    :param bw_gbs: the GPU's memory bandwidth, GB/s.
    """
    c = gflop / (tflops * 1e3 * NOMINAL_COMPUTE_EFF)
    b = gbytes / (bw_gbs * NOMINAL_BW_EFF)
    return c if c > b else b  # not max(): this runs several times per simulated subtask


def cpu_seconds(gflop: float, gbytes: float, core_gflops: float) -> float:
    """Run time of work on one CPU core at nominal efficiency.

    :param gflop: floating-point work, GFLOP.
    :param gbytes: memory traffic, GB.
    :param core_gflops: the core's sustained GFLOP/s.
    """
    return gflop / core_gflops + gbytes / CPU_CORE_BW_GBS


def subtask_gpu_seconds(sub: Subtask, tflops: float, bw_gbs: float) -> float:
    """Nominal time of ``sub`` alone on a GPU with these datasheet figures."""
    return gpu_seconds(sub.gflop, sub.gbytes, tflops, bw_gbs)


def subtask_cpu_seconds(sub: Subtask, core_gflops: float) -> float:
    """Nominal time of ``sub`` on one CPU core."""
    return cpu_seconds(sub.gflop, sub.gbytes, core_gflops)


def backlog_seconds(
    task: Task, tflops: float, bw_gbs: float, core_gflops: float, has_gpus: bool
) -> tuple[list[float], list[float]]:
    """Each subtask's nominal GPU seconds (GPU-capable subtasks, on a GPU with the node's mean
    datasheet figures) and CPU seconds (CPU-only subtasks, and every subtask on a node without
    GPUs, where GPU-capable work runs on cores): what the task adds to a node's backlog, the same
    in the simulator and in the live runtime.

    :param task: the task.
    :param tflops: the node's mean GPU peak TFLOP/s.
    :param bw_gbs: the node's mean GPU bandwidth, GB/s.
    :param core_gflops: the node's CPU core GFLOP/s.
    :param has_gpus: whether the node has GPUs.
    """
    gpu, cpu = [], []
    for s in task.graph.subtasks:
        on_cpu = s.kind.device is Device.CPU
        gpu.append(subtask_gpu_seconds(s, tflops, bw_gbs) if has_gpus and not on_cpu else 0.0)
        # A CPU-only node runs GPU-capable work on its cores: it is that node's backlog too
        # (counting it as nothing made the node look idle to every ETC however much it held).
        cpu.append(subtask_cpu_seconds(s, core_gflops) if on_cpu or not has_gpus else 0.0)
    return gpu, cpu


def node_backlog_seconds(
    task: Task, view: ClusterView, node: int, has_gpus: bool
) -> tuple[list[float], list[float]]:
    """:func:`backlog_seconds` of ``task`` on ``node`` from the view's datasheet figures (the live
    runtime's form; the simulator keeps the same figures in its own arrays)."""
    tflops, bw = view.node_tflops_mean[node], view.node_bw_mean[node]
    return backlog_seconds(task, tflops, bw, view.fast.cpu_gflops[node], has_gpus)


def task_split_seconds(task: Task, tflops: float, bw_gbs: float, core_gflops: float) -> tuple[float, float]:
    """Nominal (GPU seconds, CPU seconds) of a task when every GPU-capable subtask runs on a GPU.

    :param task: the task.
    :param tflops: reference GPU peak TFLOP/s.
    :param bw_gbs: reference GPU bandwidth GB/s.
    :param core_gflops: reference CPU core GFLOP/s.
    """
    g = c = 0.0
    for s in task.graph.subtasks:
        if s.device is Device.CPU:
            c += subtask_cpu_seconds(s, core_gflops)
        else:
            g += subtask_gpu_seconds(s, tflops, bw_gbs)
    return g, c


def critical_path_shares(graph: SubtaskGraph) -> tuple[float, float]:
    """(GPU-capable, CPU-only) critical path of a task's DAG over its total work, each in (0, 1].

    A task whose subtasks form one chain has 1: it runs no faster on a node with more devices.
    One of eight independent subtasks (an eight-GPU pod) has 1/8: a node with eight GPUs runs it
    in an eighth of the time one GPU would. Each part's path counts only that part's subtasks,
    weighted by their nominal seconds on a reference GPU (:data:`_PATH_REF`) or core. Cached on
    the graph (computed once per task).
    """
    cached = getattr(graph, "_path_shares", None)
    if cached is not None:
        return cached
    n = len(graph.subtasks)
    gpu_t, cpu_t = np.zeros(n), np.zeros(n)
    for s in graph.subtasks:
        if s.device is Device.CPU:
            cpu_t[s.index] = subtask_cpu_seconds(s, CPU_CORE_GFLOPS)
        else:
            gpu_t[s.index] = subtask_gpu_seconds(s, _PATH_REF.fp32_tflops, _PATH_REF.mem_bw_gbs)
    shares = (_path_share(graph, gpu_t), _path_share(graph, cpu_t))
    object.__setattr__(graph, "_path_shares", shares)
    return shares


def _path_share(graph: SubtaskGraph, seconds: np.ndarray) -> float:
    """The DAG's longest path under per-subtask ``seconds`` over their sum (1 where the sum is 0)."""
    total = float(seconds.sum())
    if total <= 0:
        return 1.0
    finish = np.zeros(len(seconds))
    for s in graph.subtasks:  # topological order: parents first
        start = max((finish[p] for p in s.parents), default=0.0)
        finish[s.index] = start + seconds[s.index]
    return min(float(finish.max()) / total, 1.0)


def task_work_vector(task: Task) -> tuple[float, float, float, float]:
    """(GPU-capable GFLOP, GPU-capable GB traffic, CPU-only GFLOP, CPU-only GB) of a task.

    Nominal times on any device follow from these by the roofline, which lets selectors
    estimate a task on every node with a few vectorised operations.
    """
    gf = gb = cf = cb = 0.0
    for s in task.graph.subtasks:
        if s.device is Device.CPU:
            cf += s.gflop
            cb += s.gbytes
        else:
            gf += s.gflop
            gb += s.gbytes
    return gf, gb, cf, cb


def _static(view: ClusterView) -> dict[str, np.ndarray | bool]:
    """Reciprocals of datasheet arrays used on every decision, computed once per view (the
    roofline of :func:`gpu_seconds`, vectorised over nodes as rates)."""
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
            # What runs a task's GPU-capable subtasks side by side: GPUs, or cores on a node without.
            "inv_gpu_units": 1.0 / np.maximum(np.where(has_gpu, view.n_gpus, view.cores), 1),
            "inv_cgf": 1.0 / view.cpu_gflops,
            "inv_net": 1.0 / view.net_mbps,
        }
    return st


def _cpu_seconds_scale(
    speed: np.ndarray, st: dict[str, np.ndarray | bool], legacy_cpu_wait: bool = False
) -> np.ndarray:
    """What one second of a node's CPU backlog takes there: 1 / its measured core speed
    (``backlog_cpu_s`` is already in seconds of one of its cores).

    :param speed: the nodes' measured core speeds, floored at 1e-3 (the caller has them already).
    :param legacy_cpu_wait: the form LDWP feature version 2 reads (the shipped network was trained
        on it): divided by the core's GFLOP/s as well, a unit slip that read a node's CPU queue
        ~25x too short (until 2026-12-04 every ETC had it, and ``mct`` sent a burst to nodes whose
        cores were already queued for half a minute). Only version-2 features keep it.
    """
    return st["inv_cgf"] / speed if legacy_cpu_wait else 1.0 / speed  # the first bit for bit as before


def node_estimates(
    task: Task, view: ClusterView, legacy_cpu_wait: bool = False, parallel: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the task's (GPU-side run time, CPU-side run time, expected completion time).

    Run times come from datasheets corrected by measured speeds; GPU-capable work is costed on the
    node's average GPU, and on a core where a node has no GPU. Subtasks that do not depend on each
    other run side by side on a node's devices, so each part takes its total work over the node's
    GPUs (or cores), but never less than its critical path (:func:`critical_path_shares`): an
    eight-GPU pod takes an eighth of its work on an eight-GPU node and four eighths on a two-GPU
    one. The expected completion time (ETC, relative to now) adds the input transfer after what
    the NIC already has queued and the queued work ahead of the task on the node's GPUs or cores,
    whichever is longer.

    :param legacy_cpu_wait: the CPU queue's wait as feature version 2 reads it
        (:func:`_cpu_seconds_scale`); every heuristic uses the corrected one.
    :param parallel: count the task's subtasks running side by side. LDWP's features (versions 2
        and 3) do not: they keep the form their networks were trained on, the whole task on one
        device (until 2026-12-05 every ETC had it, and sent an eight-GPU pod to a two-GPU node
        whose queue was shorter, to run four times as long).
    """
    st = _static(view)
    gf, gb, cf, cb = task_work_vector(task)
    inv_sp = 1.0 / np.maximum(view.node_speed_gpu, 1e-3)
    speed_cpu = np.maximum(view.speed_cpu, 1e-3)
    inv_cpu = st["inv_cgf"] / speed_cpu  # seconds per GFLOP on a core
    g_s = np.maximum(gf * st["inv_tf"], gb * st["inv_bw"]) * inv_sp
    if not st["all_gpu"]:
        # cpu_seconds(gflop, gbytes, 1.0) x (1 / rate) is exact for the flop term and slightly
        # pessimistic for the bandwidth term on fast cores — the same for every node.
        g_s = np.where(st["has_gpu"], g_s, cpu_seconds(gf, gb, 1.0) * inv_cpu)
    c_s = cpu_seconds(cf, cb, 1.0) * inv_cpu
    if parallel:
        path_gpu, path_cpu = critical_path_shares(task.graph)
        if path_gpu < 1.0:
            g_s = g_s * np.maximum(path_gpu, st["inv_gpu_units"])
        if path_cpu < 1.0:
            c_s = c_s * np.maximum(path_cpu, st["inv_cores"])
    wait = np.maximum(
        view.backlog_gpu_s * st["inv_ng"] * inv_sp,
        view.backlog_cpu_s * st["inv_cores"] * _cpu_seconds_scale(speed_cpu, st, legacy_cpu_wait),
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
    task: Task, view: ClusterView, legacy_cpu_wait: bool = False, parallel: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per node: the task's GPU and CPU seconds and ETC as :func:`node_estimates`, except that the ETC
    counts the host-memory admission wait (``mct-mem``), and that wait (0 where the task fits).

    :param legacy_cpu_wait: the CPU queue's wait as feature version 2 reads it
        (:func:`_cpu_seconds_scale`).
    :param parallel: count subtasks running side by side (:func:`node_estimates`)."""
    g_s, c_s, etc = node_estimates(task, view, legacy_cpu_wait, parallel)
    wait = host_memory_wait(task, view)
    after_mem = wait + task.input_mb * _static(view)["inv_net"] + g_s + c_s
    return g_s, c_s, np.maximum(etc, after_mem), wait


def best_etc_node(task: Task, view: ClusterView, mask: np.ndarray) -> int:
    """The feasible node with the smallest ETC (what ``mct`` picks)."""
    return int(np.argmin(np.where(mask, node_estimates(task, view)[2], np.inf)))


def stream_queue_wait(view: ClusterView) -> np.ndarray:
    """Per node: estimated seconds before a new task's first GPU subtask gets a stream.

    A node's GPUs serve tasks side by side, one stream each (a task's chain holds about one stream
    at a time), at the measured per-run speed, which already carries the slowdown of co-running.
    So a task waits only for the tasks queued beyond the node's streams: about
    ``(T - S + 1) / S`` mean remaining task times (``T`` tasks on the node, ``S`` streams), not the
    whole backlog per GPU that :func:`node_estimates` assumes (the same on a node of one GPU with
    one stream; that backlog is a manifold over-estimate for many streams). 0 on a node without
    GPUs.
    """
    tasks = view.tasks_on_node
    streams = np.maximum(view.node_streams, 1)
    per_task = view.backlog_gpu_s / np.maximum(tasks, 1) / np.maximum(view.node_speed_gpu, 1e-3)
    queued = np.maximum(tasks + 1 - streams, 0)
    return np.where(view.n_gpus > 0, queued * per_task / streams, 0.0)


def stream_aware_estimates(task: Task, view: ClusterView, parallel: bool = True) -> np.ndarray:
    """Per node: the task's ETC (relative to now) when a GPU's streams serve tasks side by side
    (:func:`stream_queue_wait`), counting the host-memory admission wait as ``mct-mem`` does.

    :param parallel: count the task's subtasks running side by side (:func:`node_estimates`)."""
    return _etc_after_gpu_wait(task, view, stream_queue_wait(view), parallel)


def _etc_after_gpu_wait(task: Task, view: ClusterView, gpu_wait: np.ndarray, parallel: bool) -> np.ndarray:
    """Per node: the task's ETC when its work starts after ``gpu_wait``, the CPU queue
    and the host-memory admission wait, whichever is longest."""
    st = _static(view)
    g_s, c_s, _, mem_wait = memory_aware_estimates(task, view, parallel=parallel)
    cpu_wait = view.backlog_cpu_s * st["inv_cores"] * _cpu_seconds_scale(np.maximum(view.speed_cpu, 1e-3), st)
    wait = np.maximum(np.maximum(gpu_wait, cpu_wait), mem_wait)
    return view.net_in_busy_s + task.input_mb * st["inv_net"] + wait + g_s + c_s


def drain_wait(view: ClusterView) -> np.ndarray:
    """Per node: estimated seconds before the node's GPUs have worked off what is assigned to them.

    The node's GPU backlog (nominal seconds) over its measured aggregate GPU rate
    (``ClusterView.node_gpu_rate``: per-run speed times co-runners, so streams that run side by
    side count as much as they really deliver, interference included). Unlike
    :func:`stream_queue_wait` it needs no model of how streams share a GPU: it is measured.
    0 on a node without GPUs.
    """
    return np.where(view.n_gpus > 0, view.backlog_gpu_s / np.maximum(view.node_gpu_rate, 1e-6), 0.0)


def capacity_wait(view: ClusterView) -> np.ndarray:
    """Per node: estimated seconds before the node's GPUs have worked off what is assigned to them,
    at the rate they would deliver with every stream busy.

    The node's GPU backlog (nominal seconds) over the sum, per GPU, of its measured per-run speed
    times its streams. :func:`drain_wait` divides by what the streams delivered — per-run speed
    times the co-runners seen — which measures use, not capacity: a lightly used node reads slow,
    gets less work and stays lightly used, while a busy one attracts more (one node of twenty alike
    took 61 tasks where the mean was 28). The per-run speed carries the slowdown of the co-running
    seen so far, so the estimate is optimistic on a lightly used GPU and exact on a full one: more
    work corrects it. 0 on a node without GPUs.
    """
    cap = (view.speed_gpu * view.gpu_streams * view.gpu_valid).sum(axis=1)
    return np.where(view.n_gpus > 0, view.backlog_gpu_s / np.maximum(cap, 1e-6), 0.0)


def capacity_estimates(task: Task, view: ClusterView, parallel: bool = True) -> np.ndarray:
    """Per node: the task's ETC (relative to now) when its GPU work starts after the node's GPU
    backlog drains at the streams' capacity (:func:`capacity_wait`), counting the CPU queue and
    the host-memory admission wait as ``mct-mem`` does.

    :param parallel: count the task's subtasks running side by side (:func:`node_estimates`)."""
    return _etc_after_gpu_wait(task, view, capacity_wait(view), parallel)


def drain_estimates(task: Task, view: ClusterView, parallel: bool = True) -> np.ndarray:
    """Per node: the task's ETC (relative to now) when its GPU work starts after the node's GPU
    backlog drains at the measured aggregate rate (:func:`drain_wait`), counting the CPU queue and
    the host-memory admission wait as ``mct-mem`` does.

    :param parallel: count the task's subtasks running side by side (:func:`node_estimates`)."""
    return _etc_after_gpu_wait(task, view, drain_wait(view), parallel)
