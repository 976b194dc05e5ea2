"""``ClusterView``: everything a scheduler may observe, identical from simulator and live runtime.

The view is a set of numpy arrays (one row per node, one column per GPU slot, padded to the
largest GPU count) that the executor keeps up to date in place. Policies read it; only executors
write it. It holds public specifications and *measured* state — never ground-truth parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rlsched.cluster import ClusterSpec


@dataclass
class ClusterView:
    """Observable cluster state.

    Static (datasheet) arrays: ``cores``, ``host_mem_mb``, ``net_mbps`` (MB/s), ``cpu_gflops``
    (per core), ``gpu_valid``, ``gpu_tflops``, ``gpu_bw_gbs``, ``gpu_mem_mb``, ``gpu_streams``,
    ``gpu_model`` (index into ``model_names``, -1 for padding).

    Dynamic arrays: ``alive``; ``cpu_busy`` (cores running a subtask); ``host_mem_used_mb``;
    ``gpu_running`` (subtasks on each GPU); ``gpu_mem_used_mb``; ``net_in_busy_s`` (seconds of
    input transfers still queued on the NIC); ``tasks_on_node`` (assigned, not finished);
    ``ready_waiting`` (ready subtasks waiting for a unit); ``backlog_gpu_s`` / ``backlog_cpu_s``
    (nominal seconds of GPU-capable / CPU-only work assigned and not finished); ``speed_gpu`` /
    ``speed_cpu`` (measured speed: EMA of nominal over measured run time, 1 = as datasheet
    predicts); ``gpu_kinds`` (names of subtask kinds running on each GPU); ``time_s``.
    """

    node_names: list[str]
    model_names: list[str]
    cores: np.ndarray
    host_mem_mb: np.ndarray
    net_mbps: np.ndarray
    cpu_gflops: np.ndarray
    gpu_valid: np.ndarray
    gpu_tflops: np.ndarray
    gpu_bw_gbs: np.ndarray
    gpu_mem_mb: np.ndarray
    gpu_streams: np.ndarray
    gpu_model: np.ndarray
    alive: np.ndarray
    cpu_busy: np.ndarray
    host_mem_used_mb: np.ndarray
    gpu_running: np.ndarray
    gpu_mem_used_mb: np.ndarray
    net_in_busy_s: np.ndarray
    tasks_on_node: np.ndarray
    ready_waiting: np.ndarray
    backlog_gpu_s: np.ndarray
    backlog_cpu_s: np.ndarray
    speed_gpu: np.ndarray
    speed_cpu: np.ndarray
    gpu_kinds: list[list[list[str]]]
    time_s: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def max_gpus(self) -> int:
        return self.gpu_valid.shape[1]

    @property
    def gpu_idle_streams(self) -> np.ndarray:
        """Free stream slots per GPU (0 on padding)."""
        return np.where(self.gpu_valid, np.maximum(self.gpu_streams - self.gpu_running, 0), 0)

    @property
    def n_gpus(self) -> np.ndarray:
        """GPUs per node."""
        return self.gpu_valid.sum(axis=1)

    @classmethod
    def from_spec(cls, spec: ClusterSpec) -> ClusterView:
        """An all-idle view of ``spec``; every node starts alive unless it joins later."""
        n, g = len(spec.nodes), max(spec.max_gpus, 1)
        models = sorted({m.name for node in spec.nodes for m in node.gpus})
        midx = {m: i for i, m in enumerate(models)}
        f = lambda: np.zeros((n, g), dtype=np.float64)  # noqa: E731
        v = cls(
            node_names=[node.name for node in spec.nodes],
            model_names=models,
            cores=np.array([node.cpu_cores for node in spec.nodes], dtype=np.int64),
            host_mem_mb=np.array([node.host_mem_gib * 1024 for node in spec.nodes], dtype=np.float64),
            net_mbps=np.array([node.net_gbps * 125.0 for node in spec.nodes], dtype=np.float64),
            cpu_gflops=np.array([node.cpu_core_gflops for node in spec.nodes], dtype=np.float64),
            gpu_valid=np.zeros((n, g), dtype=bool),
            gpu_tflops=f(),
            gpu_bw_gbs=f(),
            gpu_mem_mb=f(),
            gpu_streams=np.zeros((n, g), dtype=np.int64),
            gpu_model=np.full((n, g), -1, dtype=np.int64),
            alive=np.array([node.join_s <= 0 for node in spec.nodes], dtype=bool),
            cpu_busy=np.zeros(n, dtype=np.int64),
            host_mem_used_mb=np.zeros(n),
            gpu_running=np.zeros((n, g), dtype=np.int64),
            gpu_mem_used_mb=f(),
            net_in_busy_s=np.zeros(n),
            tasks_on_node=np.zeros(n, dtype=np.int64),
            ready_waiting=np.zeros(n, dtype=np.int64),
            backlog_gpu_s=np.zeros(n),
            backlog_cpu_s=np.zeros(n),
            speed_gpu=np.ones((n, g)),
            speed_cpu=np.ones(n),
            gpu_kinds=[[[] for _ in range(g)] for _ in range(n)],
        )
        for i, node in enumerate(spec.nodes):
            for j, m in enumerate(node.gpus):
                v.gpu_valid[i, j] = True
                v.gpu_tflops[i, j] = m.fp32_tflops
                v.gpu_bw_gbs[i, j] = m.mem_bw_gbs
                v.gpu_mem_mb[i, j] = m.mem_gib * 1024
                v.gpu_streams[i, j] = node.streams_per_gpu
                v.gpu_model[i, j] = midx[m.name]
        return v
