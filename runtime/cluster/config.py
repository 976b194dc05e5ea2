"""Live cluster configuration: nodes, their (real or emulated) GPUs and CPU cores.

A live node names catalog GPU models, so schedulers see the same datasheet view as in the
simulator (``ClusterView.from_spec``). On the NumPy backend each GPU is emulated: it runs kernels
on the host, slowed by its ``speed`` relative to the fastest device, with a memory capacity.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from rlsched.cluster import ClusterSpec, NodeSpec
from rlsched.hardware import gpu_model
from rlsched.view import ClusterView

MIB = 1 << 20


@dataclass(frozen=True)
class LiveGpu:
    """One GPU of a live node.

    :param model: catalog model name presented to schedulers, e.g. ``"V100M16"``.
    :param index: CUDA ordinal on the CuPy backend; ignored by emulated devices.
    :param mem_mib: memory the runtime may use on it; ``None`` = the model's datasheet memory.
    :param speed: emulated relative speed; ``None`` = the model's FP32 TFLOP/s (so the datasheet
        ratio between models is what an emulated cluster shows).
    """

    model: str
    index: int = 0
    mem_mib: float | None = None
    speed: float | None = None

    def __post_init__(self) -> None:
        gpu_model(self.model)  # raises a KeyError that names the unknown model
        if self.mem_mib is not None and self.mem_mib <= 0:
            raise ValueError(f"gpu mem_mib must be positive, got {self.mem_mib}")
        if self.speed is not None and self.speed <= 0:
            raise ValueError(f"gpu speed must be positive, got {self.speed}")

    @property
    def mem_bytes(self) -> int:
        mib = self.mem_mib if self.mem_mib is not None else gpu_model(self.model).mem_gib * 1024
        return int(mib * MIB)

    @property
    def rel_speed(self) -> float:
        return self.speed if self.speed is not None else gpu_model(self.model).fp32_tflops


@dataclass(frozen=True)
class LiveNode:
    """One live worker node.

    :param name: unique node name.
    :param cpu_cores: CPU lanes (subtasks running on cores at once).
    :param gpus: the node's GPUs.
    :param streams_per_gpu: initial streams per GPU (stream feedback moves them between GPUs).
    :param host_mem_gib: host memory presented to schedulers.
    """

    name: str
    cpu_cores: int = 2
    gpus: tuple[LiveGpu, ...] = ()
    streams_per_gpu: int = 4
    host_mem_gib: float = 16.0

    def __post_init__(self) -> None:
        if self.cpu_cores < 0 or self.streams_per_gpu < 1:
            raise ValueError(f"node {self.name}: cpu_cores must be >= 0 and streams_per_gpu >= 1")
        if self.cpu_cores == 0 and not self.gpus:
            raise ValueError(f"node {self.name} has neither CPU cores nor GPUs")


@dataclass(frozen=True)
class LiveClusterSpec:
    """A live cluster: its nodes and runtime options.

    :param nodes: worker nodes.
    :param max_streams_per_gpu: upper bound stream feedback may give one GPU.
    :param min_streams_per_gpu: lower bound stream feedback leaves on one GPU.
    :param device_concurrency: emulated GPUs run at most this many kernels at once (a real GPU
        overlaps only a few streams' kernels; more streams queue).
    :param emulate_core_speed: NumPy backend: a GPU-capable subtask on a CPU core is stretched to
        the cost model's core / GPU time ratio against the fastest emulated GPU. Without it a core
        runs such a kernel at native host speed, i.e. as fast as the fastest emulated GPU, where
        real cores are 10-100x slower. CPU-only kinds always run at native speed.
    """

    nodes: tuple[LiveNode, ...]
    max_streams_per_gpu: int = 8
    min_streams_per_gpu: int = 1
    device_concurrency: int = 2
    emulate_core_speed: bool = False
    extra: dict = field(default_factory=dict, compare=False)

    def to_cluster_spec(self) -> ClusterSpec:
        """The datasheet description schedulers see (same type as the simulator's)."""
        nodes = tuple(
            NodeSpec(
                name=n.name,
                cpu_cores=n.cpu_cores,
                host_mem_gib=n.host_mem_gib,
                gpus=tuple(gpu_model(g.model) for g in n.gpus),
                streams_per_gpu=n.streams_per_gpu,
                net_gbps=10.0,
            )
            for n in self.nodes
        )
        return ClusterSpec(nodes, name="live")

    def view(self) -> ClusterView:
        """An idle view of the cluster: datasheet figures, except each GPU's memory, which is
        what the runtime may use there (``LiveGpu.mem_mib``) — the capacity placers must respect."""
        v = ClusterView.from_spec(self.to_cluster_spec())
        for i, n in enumerate(self.nodes):
            for j, g in enumerate(n.gpus):
                v.gpu_mem_mb[i, j] = g.mem_bytes / MIB
        v.node_gpu_mem_mb = (v.gpu_mem_mb * v.gpu_valid).sum(axis=1)
        v.resync()
        return v

    @property
    def max_speed(self) -> float:
        return max((g.rel_speed for n in self.nodes for g in n.gpus), default=1.0)

    @property
    def fastest_gpu(self) -> LiveGpu | None:
        """The GPU that runs at native speed when emulated (``None`` without GPUs)."""
        return max((g for n in self.nodes for g in n.gpus), key=lambda g: g.rel_speed, default=None)


def fold_ordinals(spec: LiveClusterSpec, count: int) -> LiveClusterSpec:
    """``spec`` with CUDA ordinals folded onto the ``count`` devices present.

    The embedded default names ordinals 0 and 1; on a one-GPU machine both become GPU 0. They
    then share that GPU and its memory pool (whose limit the last device opened sets), so the
    run still works but two "GPUs" contend for one.
    """
    if count <= 0:
        return spec
    nodes = tuple(
        dataclasses.replace(n, gpus=tuple(dataclasses.replace(g, index=g.index % count) for g in n.gpus))
        for n in spec.nodes
    )
    return dataclasses.replace(spec, nodes=nodes)


def default_live_cluster() -> LiveClusterSpec:
    """The embedded default: two emulated nodes of different GPU generations, small memories.

    Runs on any machine (NumPy backend); each node has one fast and one slow GPU so placement
    and stream feedback both matter.
    """
    return LiveClusterSpec(
        nodes=(
            LiveNode("volta", cpu_cores=1, gpus=(LiveGpu("V100M16", 0, 256), LiveGpu("P4", 1, 128))),
            LiveNode("turing", cpu_cores=1, gpus=(LiveGpu("T4", 0, 256), LiveGpu("K80", 1, 256))),
        )
    )
