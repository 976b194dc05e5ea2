"""Static description of a cluster: nodes, their CPU cores, host memory and GPUs."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlsched.hardware import CPU_CORE_GFLOPS, GpuModel


@dataclass(frozen=True)
class NodeSpec:
    """One worker node.

    :param name: unique node name.
    :param cpu_cores: cores available to subtasks (each runs one subtask at a time).
    :param host_mem_gib: host memory in GiB.
    :param gpus: the node's GPUs, by model.
    :param streams_per_gpu: concurrent streams (subtask slots) per GPU.
    :param net_gbps: NIC bandwidth in Gbit/s (inputs arrive over it).
    :param cpu_core_gflops: sustained FP32 GFLOP/s of one core (public spec).
    :param join_s: time the node joins the cluster (0 = present from the start).
    :param leave_s: time the node leaves (``None`` = never).
    """

    name: str
    cpu_cores: int
    host_mem_gib: float
    gpus: tuple[GpuModel, ...]
    streams_per_gpu: int = 4
    net_gbps: float = 1.0
    cpu_core_gflops: float = CPU_CORE_GFLOPS
    join_s: float = 0.0
    leave_s: float | None = None


@dataclass(frozen=True)
class ClusterSpec:
    """All nodes that are ever part of the cluster (some may join late or leave)."""

    nodes: tuple[NodeSpec, ...]
    name: str = "cluster"
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def max_gpus(self) -> int:
        """Largest GPU count of any node (per-GPU arrays are padded to it)."""
        return max((len(n.gpus) for n in self.nodes), default=0)

    def __len__(self) -> int:
        return len(self.nodes)
