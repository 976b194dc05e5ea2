"""``LocalCluster``: a cluster backend (:class:`~runtime.cluster.backend.ClusterBackend`) that
keeps every node agent in this process.

It is the embedded default: every node agent runs in-process (emulated GPUs on the NumPy backend,
or real GPUs of this machine on CuPy). ``runtime.cluster.ray_cluster.RayCluster`` puts one agent
on each Ray node.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlsched.policies.registry import make_placer
from rlsched.scheduler import SubtaskPlacer
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.view_guard import guarded_view
from rlsched.world import Observe
from runtime import failpoints
from runtime.backends.base import Backend
from runtime.backends.select import choose_backend
from runtime.cluster.agent import NodeAgent
from runtime.cluster.backend import NODE_LOST, ClusterStats, DeviceReport, TaskOutcome
from runtime.cluster.config import LiveClusterSpec, LiveNode, fold_ordinals
from runtime.cluster.monitor import NvmlMonitor, fill_view_from_samples
from runtime.cluster.speed_reference import SpeedReference
from runtime.kernels import TaskData


class LocalCluster:
    """Node agents in this process.

    :param spec: the live cluster.
    :param backend: a backend object, its name (``numpy``/``cupy``), or ``None`` to choose
        automatically (``RLSCHED_BACKEND`` overrides).
    """

    def __init__(self, spec: LiveClusterSpec, backend: Backend | str | None = None) -> None:
        self.spec = spec
        self.backend = backend if backend is not None and not isinstance(backend, str) else None
        if self.backend is None:
            self.backend = choose_backend(
                backend if isinstance(backend, str) else None, max_speed=spec.max_speed
            )
        self.backend_name = self.backend.name
        if self.backend.device_count() > 0:  # real GPUs: a spec may name more than this machine has
            spec = self.spec = fold_ordinals(spec, self.backend.device_count())
        self.view = spec.view()
        self.lock = threading.RLock()
        self.agents: list[NodeAgent] = []
        self.monitor: NvmlMonitor | None = None
        self.speeds = SpeedReference()
        self._t0 = time.perf_counter()

    def clock(self) -> float:
        """Seconds since the agents started."""
        return time.perf_counter() - self._t0

    def start(self, placer_spec: str | SubtaskPlacer, seed: int, observe: Observe | None = None) -> None:
        placer = self._placer = make_placer(placer_spec)
        self._observe = observe
        assert self.backend is not None
        self._t0 = time.perf_counter()
        self.speeds = SpeedReference()  # one for every agent: speeds relative to the whole cluster
        self.agents = [
            NodeAgent(
                i, self.spec, self.backend, self.view, placer, self.lock, self.clock, observe, self.speeds
            )
            for i in range(len(self.spec.nodes))
        ]
        if self.backend_name == "cupy" and NvmlMonitor.available():
            self.monitor = NvmlMonitor()  # real GPUs: NVML's utilisation and memory fill the view too

    def submit(self, node: int, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None]) -> None:
        agent = self.agents[node]
        with self.lock:
            if agent.alive:
                agent.assign(task, data, on_done)
                return
        now = self.clock()  # stage 1 chose it just before it was removed
        on_done(TaskOutcome(task, node, now, math.nan, now, {}, NODE_LOST))

    def add_node(self, node: LiveNode, where: str | None = None) -> int:
        """Start an agent for a node joining at run time; its index in the view.

        :param node: the node (on CuPy, its GPU indices fold onto this machine's devices).
        :param where: unused (one machine holds every agent).
        :raises ValueError: a live node already has this name.
        """
        assert self.backend is not None
        if self.backend.device_count() > 0:
            node = fold_ordinals(LiveClusterSpec(nodes=(node,)), self.backend.device_count()).nodes[0]
        with self.lock:
            self.spec, i = join_node(self.spec, self.view, node)
            self.agents.append(
                NodeAgent(
                    i,
                    self.spec,
                    self.backend,
                    self.view,
                    self._placer,
                    self.lock,
                    self.clock,
                    self._observe,
                    self.speeds,
                )
            )
            return i

    def remove_node(self, node: int) -> int:
        """Stop a node's agent; its unfinished tasks come back with :data:`NODE_LOST`.

        :return: how many tasks it held.
        :raises ValueError: the node already left.
        """
        agent = self.agents[node]
        with self.lock:
            if not agent.alive:
                raise ValueError(f"node {agent.nspec.name!r} already left the cluster")
            self.view.set_alive(node, False)
        left = agent.shutdown()
        with self.lock:
            self.view.clear_node(node)
        self.speeds.forget(node)  # a departed node no longer sets the references
        now = self.clock()
        for run in left:
            run.on_done(TaskOutcome(run.task, node, run.assigned_s, math.nan, now, {}, NODE_LOST))
        late = failpoints.value("late-result")
        if late is not None:  # a partitioned node that finished anyway: its answer comes late
            for run in left:
                done = TaskOutcome(run.task, node, run.assigned_s, run.assigned_s, now, {}, None)
                threading.Timer(float(late), run.on_done, (done,)).start()
        return len(left)

    def withdraw(self, node: int, limit: int) -> int:
        """Hand back up to ``limit`` tasks of ``node`` that have not started.

        Their outcomes (error :data:`~runtime.cluster.backend.MOVED`) are given at once.
        """
        return self.agents[node].withdraw(limit) if self.agents[node].alive else 0

    def set_placer(self, placer_spec: str | SubtaskPlacer, observe: Observe | None = None) -> None:
        """Give every agent a new stage-2 placer (one object, as at start) and its ``observe``."""
        placer = make_placer(placer_spec)
        with self.lock:
            if isinstance(placer_spec, str):
                placer.reset(guarded_view(self.view, placer), 0)  # an object was reset by its scheduler
            self._placer, self._observe = placer, observe
            for a in self.agents:
                a.placer, a.observe = placer, observe

    def tick(self) -> None:
        for a in self.agents:
            if a.alive:
                a.revive_lanes()
                a.adjust_streams()
        if self.monitor is not None:
            samples = self.monitor.sample()
            with self.lock:
                for a in self.agents:
                    gpu_map = {g.index: j for j, g in enumerate(a.nspec.gpus)}
                    fill_view_from_samples(self.view, a.node, samples, gpu_map)

    def utilisation(self) -> dict[str, np.ndarray]:
        return merge_utilisation([a.util.summary() for a in self.agents], self.clock(), self.agents)

    def device_reports(self) -> list[DeviceReport]:
        return [r for a in self.agents for r in a.reports.device_reports()]

    def stats(self) -> ClusterStats:
        return ClusterStats.total(a.reports.stats() for a in self.agents)

    def location(self, node: int) -> str | None:
        """``None``: every agent runs in this process."""
        return None

    def free_hosts(self) -> list[dict[str, Any]]:
        """None: one machine holds every agent."""
        return []

    def close(self) -> None:
        for a in self.agents:
            a.shutdown()
        if self.monitor is not None:
            self.monitor.close()
            self.monitor = None


def join_node(spec: LiveClusterSpec, view: ClusterView, node: LiveNode) -> tuple[LiveClusterSpec, int]:
    """Add ``node`` to a running cluster's spec and (in place) to its view, alive; the new spec
    and the node's row. Every backend's ``add_node`` starts here (caller holds the view's lock).

    :raises ValueError: a live node already has this name.
    """
    if any(n.name == node.name and view.alive[i] for i, n in enumerate(spec.nodes)):
        raise ValueError(f"node {node.name!r} is already in the cluster")
    grown = dataclasses.replace(spec, nodes=(*spec.nodes, node))
    view.append_nodes(dataclasses.replace(spec, nodes=(node,)).view())
    view.set_alive(len(spec.nodes), True)
    return grown, len(spec.nodes)


def merge_utilisation(
    parts: list[dict[str, np.ndarray]], now: float, agents: list[NodeAgent]
) -> dict[str, np.ndarray]:
    """Each agent integrates only its own node's row: take that row from each."""
    for a in agents:
        with a.lock:
            a.util.advance_node(a.node, now)
    # Agents that joined later count more nodes than the first ones: each gives its own row.
    return {k: np.array([part[k][a.node] for a, part in zip(agents, parts, strict=True)]) for k in parts[0]}
