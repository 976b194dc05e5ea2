"""Python-list mirrors of a :class:`~rlsched.view.ClusterView`'s arrays, for per-event reads.

Reading one numpy element costs about 100 ns; the event loops (simulator and live runtime) and
stage-2 placers read the view on every subtask start and finish, so the view keeps these lists in
step with its arrays (:meth:`ClusterView.resync` rebuilds them, the update methods keep both).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
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
        return cls(**{f.name: getattr(v, _SOURCE.get(f.name, f.name)).tolist() for f in fields(cls)})


#: The view's array behind each mirror whose name differs (the rest share the mirror's name).
_SOURCE = {
    "host_mem": "host_mem_mb",
    "gpu_mem": "gpu_mem_mb",
    "gpu_bw": "gpu_bw_gbs",
    "host_mem_used": "host_mem_used_mb",
    "gpu_mem_used": "gpu_mem_used_mb",
    "node_gpu_mem_used": "node_gpu_mem_used_mb",
}
