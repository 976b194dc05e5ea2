"""The MLSM side of the live runtime: per-device memory management with an input cache,
residency of task data between host and devices, stream pools with stream feedback, and the
worker lanes kernels run on."""

from runtime.mlsm.lanes import Lane
from runtime.mlsm.memory import DeviceMemory, MemoryStats
from runtime.mlsm.residency import Residency, TaskArrays
from runtime.mlsm.streams import StreamFeedback, StreamPool, StreamStats

__all__ = [
    "DeviceMemory",
    "Lane",
    "MemoryStats",
    "Residency",
    "StreamFeedback",
    "StreamPool",
    "StreamStats",
    "TaskArrays",
]
