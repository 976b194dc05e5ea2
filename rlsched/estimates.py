"""Nominal cost estimates from public information only.

A scheduler knows each subtask's declared work (GFLOP, bytes of memory traffic) and each device's
datasheet figures. From these it can form a roofline estimate of run time. The estimate is
deliberately naive — one efficiency for every kernel and architecture — because how well a kernel
really uses a device, how it slows when co-located, and how devices drift, are exactly what a
scheduler must *measure* (``ClusterView.speed_*``) or learn; the truth is in ``envs.ground_truth``.
"""

from __future__ import annotations

import numpy as np

from rlsched.tasks import Device, Subtask, Task

#: Fraction of peak FP32 that the nominal model assumes a kernel reaches.
NOMINAL_COMPUTE_EFF = 0.5
#: Fraction of peak memory bandwidth the nominal model assumes.
NOMINAL_BW_EFF = 0.7
#: Memory bandwidth one CPU core can draw, GB/s.
CPU_CORE_BW_GBS = 8.0


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
    """Nominal time of ``sub`` on a GPU, scaled by the share of the GPU it asks for."""
    c = sub.gflop / (tflops * 1e3 * NOMINAL_COMPUTE_EFF)
    b = sub.gbytes / (bw_gbs * NOMINAL_BW_EFF)
    return c if c > b else b


def subtask_cpu_seconds(sub: Subtask, core_gflops: float) -> float:
    """Nominal time of ``sub`` on one CPU core."""
    return sub.gflop / core_gflops + sub.gbytes / CPU_CORE_BW_GBS


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


def gpu_seconds_array(gflop: float, gbytes: float, tflops: np.ndarray, bw_gbs: np.ndarray) -> np.ndarray:
    """Vectorised :func:`gpu_seconds` over devices (NaN-free for zero padding: returns inf)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.maximum(gflop / (tflops * 1e3 * NOMINAL_COMPUTE_EFF), gbytes / (bw_gbs * NOMINAL_BW_EFF))
    return np.where(tflops > 0, t, np.inf)
