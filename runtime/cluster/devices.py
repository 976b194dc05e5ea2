"""The GPUs of one node as its agent uses them: the backend's devices, the MLSM memory manager
and stream pool of each, and the residency of task data on them."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from runtime.backends.base import Backend, Device, DeviceConfig
from runtime.cluster.config import LiveClusterSpec
from runtime.mlsm.memory import DeviceMemory
from runtime.mlsm.residency import Residency
from runtime.mlsm.streams import StreamPool


@dataclass
class NodeDevices:
    """One node's GPUs, index by index."""

    devices: list[Device]
    memory: list[DeviceMemory]
    pools: list[StreamPool]
    residency: Residency

    @classmethod
    def open(cls, spec: LiveClusterSpec, node: int, backend: Backend, lock: threading.RLock) -> NodeDevices:
        """Open the GPUs of node ``node`` of ``spec`` on ``backend``.

        :param lock: the cluster lock (the residency's per-task bookkeeping is shared with the agent).
        """
        ns = spec.nodes[node]
        devices = [
            backend.open(DeviceConfig(g.index, g.model, g.mem_bytes, g.rel_speed, spec.device_concurrency))
            for g in ns.gpus
        ]
        memory = [DeviceMemory(g.mem_bytes, f"{ns.name}/gpu{i}") for i, g in enumerate(ns.gpus)]
        pools = [StreamPool(d, ns.streams_per_gpu, f"{ns.name}-g{i}") for i, d in enumerate(devices)]
        residency = Residency(memory, [d.new_stream() for d in devices], lock)
        return cls(devices, memory, pools, residency)

    def __len__(self) -> int:
        return len(self.devices)

    def close(self) -> None:
        """Close every device (after its stream pool): CuPy returns the pool's free blocks, NumPy
        releases the BLAS limit."""
        for d in self.devices:
            d.close()
