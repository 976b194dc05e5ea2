"""``RayCluster``, the driver side: one node agent per Ray node, as an actor pinned to it.

Our scheduler, not Ray, decides placement: stage 1 runs in the driver against the driver's
:class:`~rlsched.view.ClusterView` and picks a node; the task goes to the actor pinned (hard node
affinity) to the Ray node that spec node maps to; stage 2 runs inside that actor
(:class:`~runtime.cluster.ray_actor.NodeActor`), whose :class:`~runtime.cluster.agent.NodeAgent` places
subtasks
on the node's devices. The actor answers each task with its outcome and a snapshot of its node's
row of the view, which the driver copies into its own view; stream-feedback ticks bring
snapshots between completions too.

This module holds the driver: :class:`RayCluster` and the waiter thread that hands finished
calls back. What runs on the nodes lives in :mod:`runtime.cluster.ray_actor` (its public names are
importable from here too); what a failed Ray call means, in :mod:`runtime.cluster.ray_errors`.

A node that dies (its Ray node removed or crashed, its actor killed) fails the calls in flight on
it: the driver marks the node dead in its view and hands each of those tasks back with
:data:`~runtime.cluster.live.NODE_LOST`, so :func:`~runtime.cluster.live.run_live` places them again on a
live node.

Actors ask Ray for no CPUs and no GPUs: the node's devices are the agent's to schedule, and
with no GPU assigned Ray 2.60 leaves ``CUDA_VISIBLE_DEVICES`` alone, so ``LiveGpu.index`` keeps
naming the node's CUDA ordinals (``RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1`` would hide them).

Ray is an optional dependency: this module imports without it, and :class:`RayCluster` raises an
``ImportError`` that says what to install. The caller owns ``ray.init`` and the Ray cluster.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlsched.estimates import node_backlog_seconds
from rlsched.policies.registry import make_placer
from rlsched.scheduler import SubtaskPlacer
from rlsched.tasks import Task
from rlsched.utilisation import UtilAccumulator
from rlsched.world import Observe
from runtime.cluster.backend import NODE_LOST, ClusterStats, DeviceReport, TaskOutcome
from runtime.cluster.config import LiveClusterSpec, LiveNode
from runtime.cluster.local import join_node
from runtime.cluster.ray_actor import (
    AGENT_SHUT_DOWN,
    CONTROL_GROUP,
    NodeActor,
    Snapshot,
    _ray,
    apply_node_snapshot,
    node_snapshot,
)
from runtime.cluster.ray_errors import is_lost, node_gone
from runtime.cluster.speed_reference import SpeedReference
from runtime.kernels import TaskData

__all__ = [
    "AGENT_SHUT_DOWN",
    "CONTROL_GROUP",
    "MAX_IN_FLIGHT",
    "NodeActor",
    "RayCluster",
    "Snapshot",
    "apply_node_snapshot",
    "node_snapshot",
]

log = logging.getLogger(__name__)

#: Shared inputs (by cache id) the driver keeps in Ray's object store for later tasks.
MAX_SHARED_INPUTS = 64
#: Default ``max_concurrency`` of a node actor: each task in flight on a node holds one actor
#: thread while it waits for its outcome; calls beyond this wait in Ray's queue (not lost).
MAX_IN_FLIGHT = 256


@dataclass
class _Call:
    """A call in flight: a task on a node (``on_done`` set) or a report (``on_done`` None)."""

    node: int
    task: Task | None = None
    on_done: Callable[[TaskOutcome], None] | None = None
    submit_s: float = 0.0


class RayCluster:
    """Node agents as Ray actors, one per Ray node; placement decided by our scheduler.

    Spec node ``i`` runs on Ray node ``node_ids[i]``. The driver must be connected to Ray
    (``ray.init``) before this is built; closing it stops the actors, not Ray.

    :param spec: the live cluster (its node count must not exceed the alive Ray nodes).
    :param node_ids: Ray node ids (hex) for the spec nodes, in order; ``None`` takes the alive
        Ray nodes in the order ``ray.nodes()`` lists them.
    :param backend: backend name the actors use (``numpy``/``cupy``); ``None`` lets each actor
        choose (``RLSCHED_BACKEND`` in its environment overrides).
    :param runtime_env: Ray runtime environment of the actors (e.g. ``{"env_vars": {...}}``).
    :param max_in_flight: actor threads for tasks in flight on one node.
    :param start_timeout_s: how long to wait for the actors to come up (a node without room for
        an actor would otherwise leave it pending forever).
    :param share_nodes: with fewer alive Ray nodes than spec nodes, deal spec nodes to Ray nodes
        round-robin (several agents on one machine: for trying the Ray path on one host). Default:
        one agent per Ray node, fewer Ray nodes is an error.
    :param outputs: what a finished task sends back: ``arrays`` (every output array, as
        ``run_live`` checks them) or ``digest`` (shape, dtype and CRC-32 of each in
        ``TaskOutcome.digest``: tens of bytes instead of up to 16 MB a task through Ray's object
        store, all the scheduling service returns).
    :raises ValueError: fewer alive Ray nodes than spec nodes, an unknown / dead node id, or
        an unknown ``outputs``.
    :raises RuntimeError: Ray is not initialised.
    """

    def __init__(
        self,
        spec: LiveClusterSpec,
        node_ids: Sequence[str] | None = None,
        backend: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        max_in_flight: int = MAX_IN_FLIGHT,
        start_timeout_s: float = 60.0,
        share_nodes: bool = False,
        outputs: str = "arrays",
    ) -> None:
        if outputs not in ("arrays", "digest"):
            raise ValueError(f"outputs: expected 'arrays' or 'digest', got {outputs!r}")
        self.outputs = outputs
        self._r = _ray()
        if not self._r.is_initialized():
            raise RuntimeError("RayCluster needs a connected driver: call ray.init(address=...) first")
        self.spec = spec
        self.view = spec.view()
        self.lock = threading.RLock()
        #: Every node's speed tables, from their snapshots: speeds relative to the whole cluster.
        self.speeds = SpeedReference()
        self.backend_name = backend or "auto"
        self._backend = backend
        self.node_ids = _map_nodes(self._r, len(spec.nodes), node_ids, share_nodes)
        self.runtime_env = runtime_env
        self.max_in_flight = max_in_flight
        self.start_timeout_s = start_timeout_s
        self.actors: list[Any] = []  # Ray actor handles, one per spec node, after start()
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._waiter: threading.Thread | None = None
        self._t0 = time.perf_counter()
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        n = len(self.spec.nodes)
        self.actors = []
        self._util_rows: list[dict[str, Any] | None] = [None] * n
        self._devices: list[list[DeviceReport]] = [[] for _ in range(n)]
        #: Each node's agent counters, as last reported.
        self._stats = [ClusterStats()] * n
        self._seq = [0] * n
        self._in_flight = [0] * n
        self._dead = [False] * n
        #: Rows whose agent left for good (removed, or its Ray node lost): their Ray node is free.
        self._left = [False] * n
        self._ticking = [False] * n
        self._calls: dict[Any, _Call] = {}
        #: Object references of shared inputs by cache id, least recently used first.
        self._shared: dict[str, Any] = {}

    def clock(self) -> float:
        """Seconds since :meth:`start` (the driver's time base for outcomes)."""
        return time.perf_counter() - self._t0

    # ---- start -------------------------------------------------------------------------------
    def start(self, placer_spec: str | SubtaskPlacer, seed: int, observe: Observe | None = None) -> None:
        """Create one actor per spec node, pinned to its Ray node, and wait until all are up.

        :param placer_spec: a registry name, or a placer object: each actor gets its own copy
            (a calibrated IAWP keeps its calibration; online learning then runs per node). The
            name ``iawp`` builds an uncalibrated IAWP in each actor, which assumes a fixed
            typical slowdown for every co-runner pair.
        :param seed: seed of placers built from a name.
        :param observe: when given, each actor feeds its finished GPU subtasks to its own
            placer's ``observe`` (the driver's callable cannot run in another process).
        :raises ValueError: an unknown placer name.
        :raises TypeError: a placer object Ray cannot serialise.
        :raises TimeoutError: an actor did not come up within ``start_timeout_s``.
        """
        self._check_placer(placer_spec)
        actor_cls = self._actor_cls = self._r.remote(concurrency_groups={CONTROL_GROUP: 2})(NodeActor)
        self._reset_run_state()
        self._started_with = (placer_spec, seed, observe is not None)
        self._create_actors(actor_cls, placer_spec, seed, observe is not None)
        answers = self._await_actors()
        self.backend_name = ",".join(sorted({name for name, _ in answers}))
        # Time 0 is when the agents are up, as for LocalCluster: run_live starts its clock next.
        self._t0 = time.perf_counter()
        self._stop.clear()
        self._waiter = threading.Thread(target=self._wait_loop, name="ray-cluster-waiter", daemon=True)
        self._waiter.start()

    def _check_placer(self, placer_spec: str | SubtaskPlacer) -> None:
        """Fail in the driver on a placer the actors could not build or receive."""
        if isinstance(placer_spec, str):
            make_placer(placer_spec)  # fail here, in the driver, on an unknown name
            return
        try:  # fail here with a clear message rather than inside Ray's argument packing
            self._r.cloudpickle.dumps(placer_spec)
        except Exception as exc:  # pickling errors come in several types
            raise TypeError(f"cannot send placer {placer_spec!r} to Ray actors: {exc}") from exc

    def _create_actors(
        self, actor_cls: Any, placer_spec: str | SubtaskPlacer, seed: int, observe: bool
    ) -> None:
        """One actor per spec node, pinned (hard affinity) to its Ray node, into ``self.actors``."""
        for i, node_id in enumerate(self.node_ids):
            self.actors.append(self._new_actor(actor_cls, i, node_id, placer_spec, seed, observe))

    def _new_actor(
        self, actor_cls: Any, i: int, node_id: str, placer_spec: str | SubtaskPlacer, seed: int, observe: bool
    ) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        opts: dict[str, Any] = {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node_id, soft=False),
            "num_cpus": 0,  # the agent's lanes and GPUs are ours to count, not Ray's slots
            "max_concurrency": self.max_in_flight,
            "max_restarts": 0,  # a restarted agent would have lost its tasks anyway
        }
        if self.runtime_env is not None:
            opts["runtime_env"] = self.runtime_env
        return actor_cls.options(**opts).remote(i, self.spec, placer_spec, self._backend, seed, observe)

    def _await_actors(self) -> list[tuple[str, str]]:
        """Wait for every actor's start-up handshake; its (backend name, Ray node id) answers.

        :raises TimeoutError: an actor did not come up within ``start_timeout_s`` (all are killed).
        :raises RuntimeError: an actor runs on another Ray node than the one it was pinned to.
        """
        ray = self._r
        refs = [a.ready.options(concurrency_group=CONTROL_GROUP).remote() for a in self.actors]
        _, pending = ray.wait(refs, num_returns=len(refs), timeout=self.start_timeout_s)
        if pending:
            self._kill_actors()
            raise TimeoutError(
                f"{len(pending)} node actor(s) not up after {self.start_timeout_s:.0f} s "
                "(does each Ray node have room for an actor?)"
            )
        answers: list[tuple[str, str]] = ray.get(refs)
        for i, (_, where) in enumerate(answers):
            if where != self.node_ids[i]:  # hard affinity should make this impossible
                raise RuntimeError(f"node actor {i} runs on Ray node {where}, not {self.node_ids[i]}")
        return answers

    # ---- tasks -------------------------------------------------------------------------------
    def submit(self, node: int, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None]) -> None:
        """Send a task to its node's actor; ``on_done`` gets its outcome on the waiter thread.

        :param node: the node stage 1 chose.
        :param task: the task.
        :param data: its arrays.
        :param on_done: called once with the outcome (``NODE_LOST`` when the node died).
        """
        now = self.clock()
        with self.lock:
            dead = self._dead[node]
            if not dead:
                # Stage 1 must see the load now, not when the actor's first snapshot comes back:
                # the task's backlog is counted as its agent will count it (the next snapshot,
                # the actor's own figures, replaces it), so a burst's decisions do not all see
                # the same idle node.
                self._in_flight[node] += 1
                self.view.tasks_on_node[node] = self._in_flight[node]
                gpu_s, cpu_s = node_backlog_seconds(task, self.view, node, self.view.n_gpus[node] > 0)
                self.view.backlog_gpu_s[node] += sum(gpu_s)
                self.view.backlog_cpu_s[node] += sum(cpu_s)
        if dead:  # stage 1 chose it just before it was marked dead
            on_done(TaskOutcome(task, node, now, math.nan, now, {}, NODE_LOST))
            return
        own, shared = self._split_shared(data)
        ref = self.actors[node].run.remote(task, own, shared, self.outputs == "digest")
        with self._cond:
            self._calls[ref] = _Call(node, task, on_done, now)
            self._cond.notify_all()

    def _split_shared(self, data: TaskData) -> tuple[TaskData, dict[str, Any]]:
        """``data`` without its shared inputs, and a Ray object reference to each of those.

        Every chunk of a stream carries the same shared inputs (a model's weights: 9 MB of a
        10 MB ``matmul`` task). Sent with each task, they filled small object stores under load
        until a submission and a result fetch waited on each other for good (the chaos campaign's
        Ray fault, 2026-12-03). Each is put in the object store once, by its cache id, and every
        node pulls it once.
        """
        if not data.shared:
            return data, {}
        refs = {}
        with self._cond:
            for name in data.shared:
                key = data.input_ids[name]
                ref = self._shared.pop(key, None)
                if ref is None:
                    ref = self._r.put(data.inputs[name])
                self._shared[key] = ref  # most recently used last
                refs[name] = ref
            while len(self._shared) > MAX_SHARED_INPUTS:
                self._shared.pop(next(iter(self._shared)))  # tasks in flight keep theirs alive
        own = dataclasses.replace(data, inputs={k: v for k, v in data.inputs.items() if k not in refs})
        return own, refs

    def tick(self) -> None:
        """One stream-feedback step on every live node (answers are applied as they arrive)."""
        for i, actor in enumerate(self.actors):
            with self._cond:
                if self._dead[i] or self._ticking[i]:
                    continue  # do not pile up ticks behind a slow node
                self._ticking[i] = True
                ref = actor.tick.options(concurrency_group=CONTROL_GROUP).remote()
                self._calls[ref] = _Call(i)
                self._cond.notify_all()

    def _wait_loop(self) -> None:
        """Hand finished calls to their callers (one thread for all nodes)."""
        ray = self._r
        while not self._stop.is_set():
            with self._cond:
                refs = list(self._calls)
                if not refs:
                    self._cond.wait(timeout=0.1)
                    continue
            # A short timeout: calls submitted meanwhile join the next round.
            ready, _ = ray.wait(refs, num_returns=1, timeout=0.01)
            if ready:
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
            for ref in ready:
                with self._cond:
                    call = self._calls.pop(ref, None)
                if call is None or self._stop.is_set():
                    continue
                try:
                    self._resolve(ref, call)
                except Exception:  # this thread must outlive a bad call, or every later task hangs
                    log.exception("RayCluster: handling a call of node %d failed", call.node)

    def _resolve(self, ref: Any, call: _Call) -> None:
        ray = self._r
        now = self.clock()
        try:
            value = ray.get(ref)
            err: BaseException | None = None
        except Exception as exc:  # classified below
            value, err = None, exc
        if call.task is None:  # a tick's report
            with self._cond:
                self._ticking[call.node] = False
            if err is None:
                self._take_report(call.node, value)
            elif is_lost(ray, err):
                self._lost(call.node, err)
            else:
                log.warning("RayCluster: stream feedback on node %d failed: %s", call.node, err)
            return
        assert call.on_done is not None
        with self.lock:
            if not self._dead[call.node]:
                self._in_flight[call.node] = max(self._in_flight[call.node] - 1, 0)
                self.view.tasks_on_node[call.node] = self._in_flight[call.node]
        if err is None:
            out, snap = value
            self._apply(call.node, snap)
            if out.error == AGENT_SHUT_DOWN and self._dead[call.node]:
                out.error = NODE_LOST  # removed while the task ran: it is placed again
            call.on_done(_driver_outcome(out, call, now))
            return
        if is_lost(ray, err):
            self._lost(call.node, err)
            call.on_done(TaskOutcome(call.task, call.node, call.submit_s, math.nan, now, {}, NODE_LOST))
            return
        call.on_done(TaskOutcome(call.task, call.node, call.submit_s, math.nan, now, {}, f"ray: {err}"))

    def _apply(self, node: int, snap: Snapshot) -> None:
        """Copy a node's snapshot into the driver's view unless a newer one came first."""
        with self.lock:
            if self._dead[node] or not snap or snap["seq"] <= self._seq[node]:
                return
            self._seq[node] = snap["seq"]
            # The driver's count is the truth for stage 1: it includes tasks still on their way.
            apply_node_snapshot(
                self.view, node, {**snap, "tasks_on_node": self._in_flight[node]}, self.speeds
            )

    def _take_report(self, node: int, rep: dict[str, Any]) -> None:
        self._apply(node, rep["snapshot"])
        with self.lock:
            self._util_rows[node] = rep["util"]
            self._devices[node] = rep["devices"]
            self._stats[node] = rep["stats"]

    def _lost(self, node: int, err: BaseException) -> None:
        """The node's actor is gone (or its Ray node is): take the node out of the view."""
        if not node_gone(self._r, err, self.node_ids[node]):
            return  # a lost object or an unreachable moment: retry the task, keep the node
        with self.lock:
            if self._dead[node]:
                return
            self._dead[node] = self._left[node] = True
            held = self._in_flight[node]
            self._in_flight[node] = 0
            self.view.set_alive(node, False)
            self.view.clear_node(node)
        self.speeds.forget(node)
        log.warning(
            "node %s lost (Ray node %s gone): its %d task(s) in flight are placed again",
            self.spec.nodes[node].name,
            self.node_ids[node][:12],
            held,
        )

    # ---- membership --------------------------------------------------------------------------
    def location(self, node: int) -> str | None:
        """The Ray node id node ``node``'s agent runs on."""
        return self.node_ids[node]

    def free_hosts(self) -> list[dict[str, Any]]:
        """Alive Ray nodes that hold no agent of this cluster (``ray.nodes()`` entries): a Ray
        node whose agent was removed is free again."""
        with self.lock:
            mine = {x for x, left in zip(self.node_ids, self._left, strict=True) if not left}
        return [x for x in self._r.nodes() if x.get("Alive") and str(x["NodeID"]) not in mine]

    def add_node(self, node: LiveNode, where: str | None = None) -> int:
        """Start an agent for a node joining at run time, pinned to a Ray node; its index.

        :param node: the node's devices.
        :param where: the Ray node id; ``None`` takes the first alive Ray node without an agent.
        :raises ValueError: no such free Ray node, or a live node already has this name.
        :raises TimeoutError: the actor did not come up within ``start_timeout_s``.
        """
        free = [str(x["NodeID"]) for x in self.free_hosts()]
        ray_id = where if where is not None else (free[0] if free else None)
        if ray_id is None or ray_id not in free:
            raise ValueError(f"Ray node {where or '(any)'}: not alive, or it already runs an agent")
        with self.lock:
            self.spec, i = join_node(self.spec, self.view, node)
            self.view.set_alive(i, False)  # not offered to stage 1 until the actor is up
            self._util_rows.append(None)
            self._devices.append([])
            self._stats.append(ClusterStats())
            self._seq.append(0)
            self._in_flight.append(0)
            self._dead.append(True)
            self._left.append(False)
            self._ticking.append(False)
            self.node_ids.append(ray_id)
            actor = self._new_actor(self._actor_cls, i, ray_id, *self._started_with)
            self.actors.append(actor)
        ready = actor.ready.options(concurrency_group=CONTROL_GROUP).remote()
        done, _ = self._r.wait([ready], timeout=self.start_timeout_s)
        if not done:
            with contextlib.suppress(Exception):
                self._r.kill(actor, no_restart=True)
            with self.lock:
                self._left[i] = True
            raise TimeoutError(f"node actor for {node.name!r} not up after {self.start_timeout_s:.0f} s")
        with self.lock:
            self._dead[i] = False
            self.view.set_alive(i, True)
        return i

    def remove_node(self, node: int) -> int:
        """Stop a node's actor; its unfinished tasks come back with :data:`NODE_LOST`.

        :return: how many tasks it held.
        :raises ValueError: the node already left.
        """
        with self.lock:
            if self._dead[node]:
                raise ValueError(f"node {self.spec.nodes[node].name!r} already left the cluster")
            self._dead[node] = self._left[node] = True  # answers are NODE_LOST now (_resolve)
            held = self._in_flight[node]
            self._in_flight[node] = 0
            self.view.set_alive(node, False)
            self.view.clear_node(node)
        self.speeds.forget(node)
        actor = self.actors[node]
        with contextlib.suppress(Exception):
            self._r.get(actor.shutdown.options(concurrency_group=CONTROL_GROUP).remote(), timeout=10.0)
        with contextlib.suppress(Exception):
            self._r.kill(actor, no_restart=True)
        return held

    def withdraw(self, node: int, limit: int) -> int:
        """Hand back up to ``limit`` tasks of ``node`` that have not started (their outcomes,
        error :data:`~runtime.cluster.backend.MOVED`, arrive on the waiter thread); how many."""
        if self._dead[node]:
            return 0
        ref = self.actors[node].withdraw.options(concurrency_group=CONTROL_GROUP).remote(limit)
        try:
            return int(self._r.get(ref, timeout=10.0))
        except Exception as exc:  # the node died meanwhile: its tasks come back as lost
            if is_lost(self._r, exc):
                self._lost(node, exc)
            return 0

    def set_placer(self, placer_spec: str | SubtaskPlacer, observe: Observe | None = None) -> None:
        """Give every live agent a new stage-2 placer (each actor gets its own copy, as at
        :meth:`start`; with ``observe`` each feeds its own placer)."""
        self._check_placer(placer_spec)
        live = [a for i, a in enumerate(self.actors) if not self._dead[i]]
        obs = observe is not None
        refs = [a.set_placer.options(concurrency_group=CONTROL_GROUP).remote(placer_spec, obs) for a in live]
        self._r.get(refs, timeout=30.0)
        self._started_with = (placer_spec, self._started_with[1], obs)

    # ---- reports -----------------------------------------------------------------------------
    def _gather(self) -> None:
        """Fresh reports from every live node (a node that fails to answer is checked for death)."""
        ray = self._r
        live = [i for i in range(len(self.actors)) if not self._dead[i]]
        refs = [self.actors[i].report.options(concurrency_group=CONTROL_GROUP).remote() for i in live]
        ray.wait(refs, num_returns=len(refs), timeout=10.0)
        for i, ref in zip(live, refs, strict=True):
            try:
                self._take_report(i, ray.get(ref, timeout=0))
            except Exception as exc:  # dead node or timeout: keep its last report
                if is_lost(ray, exc):
                    self._lost(i, exc)

    def utilisation(self) -> dict[str, np.ndarray]:
        """Per-node utilisation integrals; a dead node keeps the row it last reported (zeros if
        it never reported)."""
        self._gather()
        with self.lock:
            merged = UtilAccumulator(self.view).summary()  # all-zero rows of the right shapes
            for i, row in enumerate(self._util_rows):
                if row is not None:
                    for k, v in row.items():
                        merged[k][i] = v
        return merged

    def device_reports(self) -> list[DeviceReport]:
        """Per-GPU figures of every node (a dead node's as last reported)."""
        self._gather()
        with self.lock:
            return [d for devs in self._devices for d in devs]

    def stats(self) -> ClusterStats:
        """The agents' counters as last reported (every tick; :meth:`utilisation` and
        :meth:`device_reports` gather fresh reports first)."""
        with self.lock:
            return ClusterStats.total(self._stats)

    # ---- teardown ----------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the actors (dead ones are skipped) and the waiter thread; Ray keeps running.

        Tasks still in flight get no outcome, as with ``LocalCluster``.
        """
        ray = self._r
        self._stop.set()
        live = [a for i, a in enumerate(self.actors) if not self._dead[i]]
        refs = [a.shutdown.options(concurrency_group=CONTROL_GROUP).remote() for a in live]
        if refs:
            ray.wait(refs, num_returns=len(refs), timeout=10.0)
        with self._cond:
            self._cond.notify_all()
        if self._waiter is not None:
            self._waiter.join(timeout=5)
            self._waiter = None
        self._kill_actors()
        with self._cond:
            self._calls.clear()

    def _kill_actors(self) -> None:
        for a in self.actors:
            # Already dead, or its node is gone: nothing left to stop.
            with contextlib.suppress(Exception):
                self._r.kill(a, no_restart=True)
        self.actors = []


def _map_nodes(ray: Any, n: int, node_ids: Sequence[str] | None, share: bool = False) -> list[str]:
    """Ray node ids for ``n`` spec nodes (``share``: dealt round-robin when Ray has fewer)."""
    alive = [str(x["NodeID"]) for x in ray.nodes() if x.get("Alive")]
    if node_ids is None:
        if share and alive:
            return [alive[i % len(alive)] for i in range(n)]
        if len(alive) < n:
            raise ValueError(f"the live cluster has {n} nodes but Ray has only {len(alive)} alive node(s)")
        return alive[:n]
    ids = [str(x) for x in node_ids]
    if len(ids) != n:
        raise ValueError(f"node_ids names {len(ids)} Ray node(s) for {n} spec nodes")
    if len(set(ids)) != len(ids):
        raise ValueError("node_ids names a Ray node twice: one agent per Ray node")
    missing = [x for x in ids if x not in alive]
    if missing:
        raise ValueError(f"Ray node(s) not alive or unknown: {', '.join(missing)}")
    return ids


def _driver_outcome(out: TaskOutcome, call: _Call, now: float) -> TaskOutcome:
    """The actor's outcome in the driver's time base, for the driver's task object.

    Clocks of different machines do not agree: assignment is when the driver sent the task,
    completion when its answer arrived, and the first start keeps its measured distance from
    the completion.
    """
    assert call.task is not None
    ran = out.done_s - out.first_start_s
    first = max(now - ran, call.submit_s) if not math.isnan(ran) else math.nan
    # Copies free the object-store buffers the outputs arrived in (run_live keeps them all).
    outputs = {k: np.array(v) for k, v in out.outputs.items()}
    return TaskOutcome(
        call.task, call.node, call.submit_s, first, now, outputs, out.error, out.handbacks, digest=out.digest
    )
