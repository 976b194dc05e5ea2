"""Static description of a cluster: nodes, their CPU cores, host memory and GPUs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rlsched.hardware import CPU_CORE_GFLOPS, GpuModel


@dataclass(frozen=True)
class NodeSpec:
    """One worker node.

    :param name: unique node name (a scenario file writes ``GROUP-INDEX`` names only).
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

    def __post_init__(self) -> None:
        # A node built in code is held to what a scenario file's loader checks: one that cannot
        # run anything ran with plausible metrics (0 streams per GPU: 1/40 of the throughput).
        where = f"node {self.name!r}"
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"{where}: name: expected a non-empty string")
        if isinstance(self.cpu_cores, bool) or not isinstance(self.cpu_cores, int) or self.cpu_cores < 0:
            raise ValueError(f"{where}: cpu_cores: expected an integer >= 0, got {self.cpu_cores!r}")
        if self.cpu_cores == 0 and not self.gpus:  # a live GPU node may leave its cores to others
            raise ValueError(
                f"{where}: cpu_cores: expected at least one CPU core or one GPU, got 0 and no GPU"
            )
        if not all(isinstance(g, GpuModel) for g in self.gpus):
            raise ValueError(
                f"{where}: gpus: expected GpuModel objects (rlsched.hardware.gpu_model('V100M16')), "
                f"got {self.gpus!r}"
            )
        if self.gpus and (not isinstance(self.streams_per_gpu, int) or self.streams_per_gpu < 1):
            raise ValueError(
                f"{where}: streams_per_gpu: expected an integer >= 1, got {self.streams_per_gpu!r}"
            )
        if self.leave_s is not None and self.leave_s <= self.join_s:
            raise ValueError(f"{where}: leave_s: expected a time after join_s ({self.join_s:g} s)")


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


def check_runnable(cluster: ClusterSpec) -> None:
    """What a scenario file's loader checks of a cluster as a whole, for one built in code (a
    world runs it otherwise, with plausible metrics): node names unique. (A cluster whose nodes
    all join late runs: tasks wait for them; only a file must have one from time 0.)

    :raises ValueError: naming the rule.
    """
    twice = sorted(name for name, n in Counter(x.name for x in cluster.nodes).items() if n > 1)
    if twice:
        raise ValueError(f"cluster {cluster.name!r}: nodes: expected unique names, {', '.join(twice)} twice")
