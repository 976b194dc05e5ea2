"""The node side of :class:`~runtime.cluster.ray_cluster.RayCluster`: what runs inside one Ray node.

:class:`NodeActor` is the body of the Ray actor pinned to one Ray node (the driver wraps it with
``ray.remote``). It keeps its own :class:`~rlsched.view.ClusterView`, of which its
:class:`~runtime.cluster.agent.NodeAgent` writes only its node's row, and runs stage 2 there: the
agent places each task's subtasks on the node's devices. Each finished task comes back with a
:data:`Snapshot` of that row (:func:`node_snapshot`), which the driver copies into its own view
(:func:`apply_node_snapshot`).

Also here: the actor's control concurrency group (:data:`CONTROL_GROUP`), the error of tasks
caught by a shutdown (:data:`AGENT_SHUT_DOWN`), and the helpers both sides use to import Ray and
to build a placer from its registry name.

Ray is an optional dependency: this module imports without it.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from typing import Any

from rlsched.policies.registry import make_placer
from rlsched.scheduler import SubtaskPlacer
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.view_guard import guarded_view
from runtime.backends.select import choose_backend
from runtime.cluster.agent import NodeAgent
from runtime.cluster.backend import TaskOutcome
from runtime.cluster.config import LiveClusterSpec
from runtime.cluster.speed_reference import CPU_UNIT, SpeedReference
from runtime.kernels import TaskData, output_digest

#: Actor concurrency group of the control calls (tick, report, shutdown), so that a node full
#: of waiting ``run`` calls still answers them.
CONTROL_GROUP = "control"
#: ``TaskOutcome.error`` of tasks still on a node agent when it shuts down.
AGENT_SHUT_DOWN = "node agent shut down"

#: A node's row of the view as plain values (:func:`node_snapshot`), sent to the driver.
Snapshot = dict[str, Any]


def _ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to get it."""
    try:
        import ray
    except ImportError as exc:  # optional dependency: only RayCluster needs it
        raise ImportError("RayCluster needs Ray: pip install 'ray==2.60.0'") from exc
    return ray


def node_snapshot(view: ClusterView, node: int, seq: int, speeds: SpeedReference | None = None) -> Snapshot:
    """The dynamic state of one node's row of ``view`` (what stage 1 reads), as plain values.

    :param view: a view kept by the node's agent.
    :param node: the row.
    :param seq: increasing number of the snapshot, so older ones arriving late are ignored.
    :param speeds: the agent's speed reference: its table goes along, so that the driver can
        make the node's speeds relative to the whole cluster, not to this node alone.
    """
    f = view.fast
    return {
        "speed_table": speeds.table(node) if speeds is not None else {},
        "seq": seq,
        "cpu_busy": int(f.cpu_busy[node]),
        "gpu_running": list(f.gpu_running[node]),
        "gpu_mem_used_mb": list(f.gpu_mem_used[node]),
        "speed_gpu": list(f.speed_gpu[node]),
        "gpu_rate": list(f.gpu_rate[node]),
        "gpu_rate_samples": list(f.gpu_rate_samples[node]),
        "speed_cpu": float(f.speed_cpu[node]),
        "tasks_on_node": int(view.tasks_on_node[node]),
        "backlog_gpu_s": float(view.backlog_gpu_s[node]),
        "backlog_cpu_s": float(view.backlog_cpu_s[node]),
        "ready_waiting": int(view.ready_waiting[node]),
        "gpu_streams": list(f.gpu_streams[node]),
        "gpu_kinds": [list(k) for k in view.gpu_kinds[node]],
    }


def apply_node_snapshot(
    view: ClusterView, node: int, snap: Snapshot, speeds: SpeedReference | None = None
) -> None:
    """Copy a node's snapshot (:func:`node_snapshot`) into row ``node`` of ``view``.

    Stream counts go through :meth:`ClusterView.set_streams` (it keeps ``node_streams``, which
    ``resync`` does not recompute); the other arrays are written directly, then
    :meth:`ClusterView.resync` rebuilds the per-node aggregates and the Python mirrors.

    :param view: the driver's view (caller holds its lock).
    :param node: the row to overwrite.
    :param snap: the node's state; keys missing from it are left as they are.
    :param speeds: the driver's speed reference: it takes the node's table, and the node's speeds
        become relative to every node's (the snapshot's own are relative to that node alone).
    """
    if speeds is not None and "speed_table" in snap:
        speeds.load(node, snap["speed_table"])
        own = snap.get("speed_gpu", ())
        relative = [speeds.relative(node, g) for g in range(len(own))]
        snap = {
            **snap,
            "speed_gpu": relative,
            "speed_cpu": speeds.relative(node, CPU_UNIT),
        }
        if "gpu_rate" in snap:
            # A rate is a speed times co-runners: rescale it as its speed was rescaled.
            snap["gpu_rate"] = [
                r * (rel / sp if sp > 0 else 1.0)
                for r, rel, sp in zip(snap["gpu_rate"], relative, own, strict=False)
            ]
    for g, streams in enumerate(snap.get("gpu_streams", ())):
        if view.fast.gpu_streams[node][g] != streams:
            view.set_streams(node, g, int(streams))
    for key in ("cpu_busy", "tasks_on_node", "ready_waiting", "backlog_gpu_s", "backlog_cpu_s", "speed_cpu"):
        if key in snap:
            getattr(view, key)[node] = snap[key]
    for key in ("gpu_running", "gpu_mem_used_mb", "speed_gpu", "gpu_rate", "gpu_rate_samples"):
        if key in snap:
            row = snap[key]
            getattr(view, key)[node, : len(row)] = row
    for g, kinds in enumerate(snap.get("gpu_kinds", ())):
        view.gpu_kinds[node][g][:] = kinds
    view.resync()


class NodeActor:
    """The body of the Ray actor that runs one node's agent (wrapped by ``ray.remote`` on use).

    It keeps its own view of the whole cluster, of which its agent writes only its own row.

    :param node: the node's index in ``spec``.
    :param spec: the live cluster.
    :param placer_spec: a registry name (``rlsched.policies.registry.PLACERS``) or a placer
        object (this actor gets its own copy).
    :param backend: backend name, or ``None`` for ``$RLSCHED_BACKEND`` / automatic.
    :param seed: placer seed for placers built from a name.
    :param observe: feed finished GPU subtasks to this actor's placer's ``observe``.
    """

    def __init__(
        self,
        node: int,
        spec: LiveClusterSpec,
        placer_spec: str | SubtaskPlacer,
        backend: str | None,
        seed: int,
        observe: bool,
    ) -> None:
        self.node = node
        self.view = spec.view()
        self.lock = threading.RLock()
        self.backend = choose_backend(backend, max_speed=spec.max_speed)
        placer = make_placer(placer_spec)
        if isinstance(placer_spec, str):
            placer.reset(
                guarded_view(self.view, placer), seed
            )  # an object was reset by the driver's scheduler
        self._t0 = time.perf_counter()
        obs = getattr(placer, "observe", None) if observe else None
        self.agent = NodeAgent(node, spec, self.backend, self.view, placer, self.lock, self.clock, obs)
        self._seq = 0
        self._closed = False
        # Tasks whose ``run`` call waits: shutdown answers them, or their threads would hang.
        self._waiting: dict[int, tuple[Task, threading.Event, list[tuple[TaskOutcome, Snapshot]]]] = {}

    def clock(self) -> float:
        """Seconds since the actor started (its agent's time base)."""
        return time.perf_counter() - self._t0

    def ready(self) -> tuple[str, str]:
        """The backend name and the Ray node id this actor runs on (start-up handshake)."""
        node_id = _ray().get_runtime_context().get_node_id()
        return self.backend.name, str(node_id)

    def _snapshot(self) -> Snapshot:
        with self.lock:
            self._seq += 1
            return node_snapshot(self.view, self.node, self._seq, self.agent.speeds)

    def run(
        self, task: Task, data: TaskData, shared: dict[str, Any] | None = None, digest: bool = False
    ) -> tuple[TaskOutcome, Snapshot]:
        """Run one task on this node; block until it is done.

        :param task: the task stage 1 placed here.
        :param data: its arrays, but for the shared ones.
        :param shared: object references of its shared inputs, by name (fetched once per node:
            Ray keeps a pulled object in the node's store while it is referenced).
        :param digest: send back the outputs' digest (``output_digest``) instead of the arrays.
        :return: its outcome and the node's state right after it finished.
        """
        if shared:
            # Read-only views of the node's object store: kernels read their inputs, never write.
            fetched = dict(zip(shared, _ray().get(list(shared.values())), strict=True))
            data = dataclasses.replace(data, inputs={**data.inputs, **fetched})
        done = threading.Event()
        box: list[tuple[TaskOutcome, Snapshot]] = []

        def on_done(out: TaskOutcome) -> None:
            # Called by the agent with the lock held: the snapshot is the state it leaves.
            box.append((out, self._snapshot()))
            done.set()

        with self.lock:
            if self._closed:  # the agent would take the task and never run it
                now = self.clock()
                return TaskOutcome(task, self.node, now, math.nan, now, {}, AGENT_SHUT_DOWN), {}
            self._waiting[task.id] = (task, done, box)
            self.agent.assign(task, data, on_done)
        try:
            done.wait()
        finally:
            with self.lock:
                self._waiting.pop(task.id, None)
        out, snap = box[0]
        if digest and out.outputs:
            out = dataclasses.replace(out, outputs={}, digest=output_digest(out.outputs))
        return out, snap

    def tick(self) -> dict[str, Any]:
        """One stream-feedback step, then :meth:`report`."""
        self.agent.revive_lanes()
        self.agent.adjust_streams()
        return self.report()

    def report(self) -> dict[str, Any]:
        """The node's snapshot, utilisation row, device reports and agent counters
        (:class:`~runtime.cluster.backend.ClusterStats`)."""
        a, n = self.agent, self.node
        with self.lock:
            a.util.advance_node(n, self.clock())
            util = {k: v[n].item() for k, v in a.util.summary().items()}
            devices, stats = a.reports.device_reports(), a.reports.stats()
            return {"snapshot": self._snapshot(), "util": util, "devices": devices, "stats": stats}

    def withdraw(self, limit: int) -> int:
        """Hand back up to ``limit`` tasks that have not started (their ``run`` calls answer
        with error ``MOVED``); how many."""
        return self.agent.withdraw(limit)

    def set_placer(self, placer_spec: str | SubtaskPlacer, observe: bool) -> None:
        """Take a new stage-2 placer (a registry spec, or this actor's copy of an object)."""
        placer = make_placer(placer_spec)
        with self.lock:
            if isinstance(placer_spec, str):
                placer.reset(guarded_view(self.view, placer), 0)
            self.agent.placer = placer
            self.agent.observe = getattr(placer, "observe", None) if observe else None

    def shutdown(self) -> int:
        """Stop the agent; tasks still on it come back with :data:`AGENT_SHUT_DOWN`.

        :return: how many tasks were still on the node.
        """
        with self.lock:
            self._closed = True
            waiting = list(self._waiting.values())
        self.agent.shutdown()
        now = self.clock()
        left = 0
        for task, done, box in waiting:
            if not done.is_set():
                left += 1
                box.append((TaskOutcome(task, self.node, now, math.nan, now, {}, AGENT_SHUT_DOWN), {}))
                done.set()
        return left
