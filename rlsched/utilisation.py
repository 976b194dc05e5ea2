"""Time integrals of per-node utilisation, for GPU utilisation and the paper's load balance.

Advanced lazily, one node at a time, whenever that node's state is about to change: between two
changes the state is constant, so each integral is exact.
"""

from __future__ import annotations

import numpy as np

from rlsched.view import ClusterView


class UtilAccumulator:
    """Time integrals of per-node utilisation, for GPU utilisation and load balance."""

    def __init__(self, view: ClusterView) -> None:
        n = view.n_nodes
        self.view = view
        self.last = [0.0] * n
        self.alive_s = [0.0] * n
        self.cpu = [0.0] * n
        self.hmem = [0.0] * n
        self.gpu = [0.0] * n  # GPU-seconds with at least one subtask running
        self.gmem = [0.0] * n
        self.ngpu = [int(x) for x in view.n_gpus]
        self.gmem_cap = [float(x) for x in view.gpu_mem_mb.sum(axis=1)]
        self.inv_cores = [1.0 / max(int(c), 1) for c in view.cores]
        self.inv_hmem = [1.0 / float(m) for m in view.host_mem_mb]

    def start(self, t: float) -> None:
        self.last = [t] * len(self.last)

    def advance_node(self, n: int, t: float) -> None:
        dt = t - self.last[n]
        if dt <= 0:
            return
        self.last[n] = t
        f = self.view.fast  # not cached: ClusterView.resync() replaces the mirrors
        if not f.alive[n]:
            return
        self.alive_s[n] += dt
        self.cpu[n] += dt * f.cpu_busy[n] * self.inv_cores[n]
        self.hmem[n] += dt * f.host_mem_used[n] * self.inv_hmem[n]
        if self.ngpu[n]:
            self.gpu[n] += dt * f.node_gpus_active[n]
            self.gmem[n] += dt * f.node_gpu_mem_used[n] / self.gmem_cap[n]

    def advance(self, t: float) -> None:
        for n in range(len(self.last)):
            self.advance_node(n, t)

    def summary(self) -> dict[str, np.ndarray]:
        """Per-node time-averaged utilisations over each node's alive time."""
        alive = np.maximum(np.array(self.alive_s), 1e-12)
        ngpu = np.array(self.ngpu, dtype=np.float64)
        gpu_s = np.array(self.gpu)
        return {
            "alive_s": np.array(self.alive_s),
            "cpu": np.array(self.cpu) / alive,
            "host_mem": np.array(self.hmem) / alive,
            "gpu": np.where(ngpu > 0, gpu_s / (alive * np.maximum(ngpu, 1)), 0.0),
            "gpu_mem": np.array(self.gmem) / alive,
            "gpu_seconds": gpu_s,
            "gpu_capacity_s": ngpu * np.array(self.alive_s),
            "has_gpu": ngpu > 0,
        }
