"""Python-list mirrors of a :class:`~rlsched.view.ClusterView`'s arrays, for per-event reads.

Reading one numpy element costs about 100 ns; the event loops (simulator and live runtime) and
stage-2 placers read the view on every subtask start and finish, so the view keeps these lists in
step with its arrays (:meth:`ClusterView.resync` rebuilds them, the update methods keep both).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class FastState:
    """Python-list mirrors of the view's arrays, for per-event reads (read-only to policies)."""

    cores: list[int]
    cpu_gflops: list[float]
    host_mem: list[float]
    n_gpus: list[int]
    gpu_streams: list[list[int]]
    gpu_mem: list[list[float]]
    gpu_tflops: list[list[float]]
    gpu_bw: list[list[float]]
    gpu_model: list[list[int]]
    node_streams: list[int]
    alive: list[bool]
    cpu_busy: list[int]
    host_mem_used: list[float]
    gpu_running: list[list[int]]
    gpu_mem_used: list[list[float]]
    node_gpu_running: list[int]
    node_gpus_active: list[int]
    node_gpu_mem_used: list[float]
    speed_gpu: list[list[float]]
    node_speed_gpu: list[float]
    speed_cpu: list[float]
    gpu_rate: list[list[float]]
    gpu_rate_samples: list[list[int]]
    node_gpu_rate: list[float]

    @classmethod
    def of(cls, v: Any) -> FastState:
        """Mirror the current arrays of ``v``, a :class:`~rlsched.view.ClusterView` (not imported:
        the view imports this module)."""
        return cls(
            cores=v.cores.tolist(),
            cpu_gflops=v.cpu_gflops.tolist(),
            host_mem=v.host_mem_mb.tolist(),
            n_gpus=v.n_gpus.tolist(),
            gpu_streams=v.gpu_streams.tolist(),
            gpu_mem=v.gpu_mem_mb.tolist(),
            gpu_tflops=v.gpu_tflops.tolist(),
            gpu_bw=v.gpu_bw_gbs.tolist(),
            gpu_model=v.gpu_model.tolist(),
            node_streams=v.node_streams.tolist(),
            alive=v.alive.tolist(),
            cpu_busy=v.cpu_busy.tolist(),
            host_mem_used=v.host_mem_used_mb.tolist(),
            gpu_running=v.gpu_running.tolist(),
            gpu_mem_used=v.gpu_mem_used_mb.tolist(),
            node_gpu_running=v.node_gpu_running.tolist(),
            node_gpus_active=v.node_gpus_active.tolist(),
            node_gpu_mem_used=v.node_gpu_mem_used_mb.tolist(),
            speed_gpu=v.speed_gpu.tolist(),
            node_speed_gpu=v.node_speed_gpu.tolist(),
            speed_cpu=v.speed_cpu.tolist(),
            gpu_rate=v.gpu_rate.tolist(),
            gpu_rate_samples=v.gpu_rate_samples.tolist(),
            node_gpu_rate=v.node_gpu_rate.tolist(),
        )
