"""Where a task's arrays live on a node, and moving them: the data side of MLSM task mapping.

A task's inputs start on the host; on a GPU they come through the device's memory manager, so an
input the stream's earlier tasks uploaded is a cache hit. A subtask's outputs stay where it ran
(a reservation on that GPU) until the task ends; a child that runs elsewhere gets a copy. When a
GPU cannot hold an output, or the node must free memory to make progress, outputs move to the
host. Nothing here decides placement; the node agent calls it from its lanes and its lock.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlsched.scheduler import CPU
from runtime.backends.base import DeviceFull, Stream
from runtime.cluster.workload import input_id
from runtime.kernels import TaskData
from runtime.mlsm.memory import DeviceMemory

MIB = float(1 << 20)


@dataclass
class Held:
    """An array of a task's data and where it lives (:data:`CPU` = host, else a GPU index)."""

    value: Any
    loc: int
    nbytes: int


@dataclass
class TaskArrays:
    """A task's arrays on a node: outputs kept so far, inputs it cached, memory it reserved."""

    task_id: int
    data: TaskData
    store: dict[str, Held] = field(default_factory=dict)
    cached: set[tuple[int, str]] = field(default_factory=set)
    reserved: list[tuple[int, int]] = field(default_factory=list)


class Residency:
    """Moves and accounts the arrays of the tasks on one node.

    :param memory: the memory manager of each GPU.
    :param copy_streams: one stream per GPU for copies that no kernel lane owns.
    :param lock: the cluster lock (guards the per-task bookkeeping shared with the agent).
    """

    def __init__(
        self, memory: Sequence[DeviceMemory], copy_streams: Sequence[Stream], lock: threading.RLock
    ) -> None:
        self.memory = list(memory)
        self.copy_streams = list(copy_streams)
        self.lock = lock

    def let_go(self, unfinished: Iterable[TaskArrays]) -> None:
        """The node is closing: drop every device array it holds (cached inputs, and the outputs
        of ``unfinished`` tasks kept on a GPU), so the devices' pools can free them at once."""
        for m in self.memory:
            m.let_go()
        for ta in unfinished:
            for name in [n for n, held in list(ta.store.items()) if held.loc != CPU]:
                del ta.store[name]

    def on_host(self, ta: TaskArrays, name: str) -> Any:
        """``name`` as a host array (for a CPU core)."""
        if name in ta.data.inputs:
            return ta.data.inputs[name]
        held = ta.store[name]
        return held.value if held.loc == CPU else self.copy_streams[held.loc].download(held.value)

    def on_device(self, ta: TaskArrays, name: str, g: int, stream: Stream, pinned: list[str]) -> Any:
        """``name`` resident on GPU ``g``: inputs through the cache (pinned until the kernel is
        done: their ids go to ``pinned``), other subtasks' outputs copied if they live elsewhere.

        :raises DeviceFull: the GPU cannot hold it even after evicting unused inputs.
        """
        mem = self.memory[g]
        if name in ta.data.inputs:
            host = ta.data.inputs[name]
            data_id = input_id(ta.task_id, ta.data, name)
            value = mem.cached(data_id, int(host.nbytes), lambda: stream.upload(host))
            pinned.append(data_id)
            with self.lock:
                ta.cached.add((g, data_id))
            return value
        held = ta.store[name]
        if held.loc == g:
            return held.value
        host = held.value if held.loc == CPU else self.copy_streams[held.loc].download(held.value)
        mem.reserve(held.nbytes)  # the copy is one more buffer on this GPU until the task ends
        with self.lock:
            ta.reserved.append((g, held.nbytes))
        return stream.upload(host)

    def pending_bytes(self, ta: TaskArrays, names: Iterable[str], g: int) -> tuple[int, int]:
        """(bytes of ``names``, bytes of them not yet resident on GPU ``g``)."""
        total = pending = 0
        mem = self.memory[g]
        for name in names:
            if name in ta.data.inputs:
                nbytes = int(ta.data.inputs[name].nbytes)
                here = mem.contains(input_id(ta.task_id, ta.data, name))
            else:
                held = ta.store[name]
                nbytes, here = held.nbytes, held.loc == g
            total += nbytes
            pending += 0 if here else nbytes
        return total, pending

    def keep_outputs(self, ta: TaskArrays, unit: int, out: dict[str, Any]) -> None:
        """Keep a subtask's outputs where it ran (on the host if the GPU has no room)."""
        for name, value in out.items():
            nbytes = int(getattr(value, "nbytes", 0))
            if unit == CPU:
                ta.store[name] = Held(value, CPU, nbytes)
                continue
            try:
                self.memory[unit].reserve(nbytes)
                ta.reserved.append((unit, nbytes))
                ta.store[name] = Held(value, unit, nbytes)
            except DeviceFull:  # children fetch it from the host instead
                ta.store[name] = Held(self.copy_streams[unit].download(value), CPU, nbytes)

    def spill(self, tasks: Iterable[TaskArrays]) -> bool:
        """Move every output the tasks hold on a GPU to the host; True if any moved."""
        moved = False
        for ta in tasks:
            for name, held in ta.store.items():
                if held.loc == CPU:
                    continue
                g = held.loc
                ta.store[name] = Held(self.copy_streams[g].download(held.value), CPU, held.nbytes)
                if (g, held.nbytes) in ta.reserved:
                    ta.reserved.remove((g, held.nbytes))
                    self.memory[g].release(held.nbytes)
                moved = True
        return moved

    def outputs(self, ta: TaskArrays) -> dict[str, np.ndarray]:
        """Every array the task computed, on the host."""
        return {
            name: held.value if held.loc == CPU else self.copy_streams[held.loc].download(held.value)
            for name, held in ta.store.items()
        }

    def release(self, ta: TaskArrays) -> None:
        """The task ended: free its reservations and drop the inputs only it used (inputs its
        stream shares stay cached for the stream's next tasks)."""
        for g, nbytes in ta.reserved:
            self.memory[g].release(nbytes)
        ta.reserved.clear()
        shared = ta.data.shared_ids()
        for g, data_id in ta.cached:
            if data_id not in shared:
                self.memory[g].drop(data_id)

    def held_mb(self, g: int) -> float:
        """Memory of GPU ``g`` that placers must treat as taken: unused cached inputs are evicted
        on demand, so they count as free."""
        return self.memory[g].held_bytes() / MIB
