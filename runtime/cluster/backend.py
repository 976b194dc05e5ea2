"""The cluster backend protocol: what the live run loop and the service need from a cluster, and
the records a cluster gives back (task outcomes, per-GPU reports, agent counters).

:class:`~runtime.cluster.local.LocalCluster` keeps every node agent in this process;
:class:`~runtime.cluster.ray_cluster.RayCluster` puts one on each Ray node. Both implement
:class:`ClusterBackend` in full, so callers never probe a backend for optional attributes.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from rlsched.scheduler import SubtaskPlacer
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.world import Observe
from runtime.cluster.config import LiveClusterSpec, LiveNode
from runtime.kernels import TaskData

#: Error of a task whose node left the cluster (died, or was removed) before it finished: it is
#: placed again on a live node.
NODE_LOST = "node lost"
#: Error of a task withdrawn from its node before any of its subtasks started (to be placed
#: again elsewhere; see :meth:`ClusterBackend.withdraw`).
MOVED = "moved: withdrawn from an overloaded node before it started"


@dataclass
class TaskOutcome:
    """What happened to one task on a node.

    ``outputs`` holds every array the task computed (on the host); ``units`` the unit each
    subtask ran on (a GPU index, :data:`~rlsched.scheduler.CPU`, or ``CPU - 1`` if it never ran);
    ``error`` is ``None`` on success.
    """

    task: Task
    node: int
    assigned_s: float
    first_start_s: float
    done_s: float
    outputs: dict[str, np.ndarray]
    error: str | None = None
    handbacks: int = 0
    units: list[int] = field(default_factory=list)
    #: The outputs in brief (``runtime.kernels.output_digest``) when a remote node sent that
    #: instead of the arrays (``outputs`` is then empty).
    digest: dict[str, dict[str, Any]] | None = None


@dataclass
class DeviceReport:
    """End-of-run figures of one GPU."""

    node: str
    gpu: int
    model: str
    streams: int
    util: float
    hits: int
    misses: int
    evictions: int
    h2d_bytes_loaded: int
    h2d_bytes_saved: int
    #: Requests for device memory MLSM refused (a GPU subtask waited for memory to free).
    memory_refusals: int = 0

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass(frozen=True)
class ClusterStats:
    """Counters of node agents (one node's, or a whole cluster's summed with ``+``).

    :param stream_moves: streams the feedback controllers moved between GPUs.
    :param subtasks_done: subtasks that ran to the end.
    :param dispatch_s: seconds spent offering ready subtasks to the stage-2 placer.
    """

    stream_moves: int = 0
    subtasks_done: int = 0
    dispatch_s: float = 0.0

    def __add__(self, other: ClusterStats) -> ClusterStats:
        return ClusterStats(
            self.stream_moves + other.stream_moves,
            self.subtasks_done + other.subtasks_done,
            self.dispatch_s + other.dispatch_s,
        )

    @classmethod
    def total(cls, parts: Iterable[ClusterStats]) -> ClusterStats:
        """The sum of ``parts`` (zeros when there are none)."""
        return sum(parts, cls())

    @property
    def dispatch_us_per_subtask(self) -> float:
        """Mean dispatch microseconds per finished subtask (NaN before any finished)."""
        return 1e6 * self.dispatch_s / self.subtasks_done if self.subtasks_done else math.nan


@runtime_checkable
class ClusterBackend(Protocol):
    """What the live run loop (:mod:`runtime.cluster.live`) and the service need from a cluster.

    The backend owns the :class:`~rlsched.view.ClusterView` the schedulers read and the lock that
    guards it, and runs each task on the node stage 1 chose.
    """

    spec: LiveClusterSpec
    view: ClusterView
    lock: threading.RLock
    backend_name: str

    def start(self, placer_spec: str | SubtaskPlacer, seed: int, observe: Observe | None) -> None:
        """Create the node agents with a stage-2 placer (a registry spec or an object)."""
        ...

    def submit(self, node: int, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None]) -> None:
        """Run a task on a node; ``on_done`` is called once with its outcome (any thread)."""
        ...

    def tick(self) -> None:
        """One stream-feedback step on every node."""
        ...

    def utilisation(self) -> dict[str, np.ndarray]:
        """Per-node utilisation integrals (``rlsched.metrics.summarise`` input)."""
        ...

    def device_reports(self) -> list[DeviceReport]:
        """Per-GPU stream counts, utilisation and cache counters."""
        ...

    def stats(self) -> ClusterStats:
        """The agents' counters summed over every node (a remote node's as last reported)."""
        ...

    def close(self) -> None:
        """Stop every agent."""
        ...

    def add_node(self, node: LiveNode, where: str | None = None) -> int:
        """Start an agent for a node joining at run time; its index in the view (which grows).

        :param node: the node's devices.
        :param where: backend-specific location (a Ray node id); ``None`` lets the backend choose.
        """
        ...

    def remove_node(self, node: int) -> int:
        """Stop a node's agent; its unfinished tasks get :data:`NODE_LOST`. How many it held."""
        ...

    def withdraw(self, node: int, limit: int) -> int:
        """Hand back up to ``limit`` not-yet-started tasks of a node (error :data:`MOVED`)."""
        ...

    def set_placer(self, placer_spec: str | SubtaskPlacer, observe: Observe | None = None) -> None:
        """Give every agent a new stage-2 placer (a registry spec or an object), as ``start``."""
        ...

    def location(self, node: int) -> str | None:
        """Where node ``node``'s agent runs, as ``add_node``'s ``where`` names it (a Ray node id);
        ``None`` for a backend that keeps every agent on one machine."""
        ...

    def free_hosts(self) -> list[dict[str, Any]]:
        """Machines that could take an agent but hold none of this cluster's, as ``ray.nodes()``
        entries (``NodeID``, ``Resources``); none for a backend that cannot discover machines."""
        ...
