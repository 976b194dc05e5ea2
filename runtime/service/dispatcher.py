"""From the durable queue to the live cluster: fair sharing between tenants, stage 1, completion.

One thread takes queued tasks from the store and gives each a node with the scheduler's stage-1
selector (stage 2 runs in the node agents, as in every live run). It decides in the loop the
simulator and ``run_live`` decide in, :func:`rlsched.world.drive`, over the queue
(:class:`runtime.service.queue_world.QueueWorld`). Tenants share the cluster by
start-time fair queueing over dispatches: each tenant has a virtual time that advances by
``1 / weight`` per task it starts; the backlogged tenant with the smallest virtual time goes next,
and a tenant that was idle re-enters at the smallest virtual time of the backlogged ones (so idle
time is not banked). Under contention each tenant's share of started tasks tends to its share of
the weights. A tenant at its ``max_running`` is skipped until one of its tasks finishes.

Tasks in flight are bounded (a few per stream and core of the cluster), so the queue itself stays
in the database, where a crash cannot lose it. A tenant's ``gpu_share`` bounds its tasks in flight
to that share of the cluster's GPU dispatch slots (:data:`INFLIGHT_PER_UNIT` per alive GPU stream).

Within a tenant, higher ``priority`` starts first (then older); the priority also orders the
task's ready subtasks on its node. Priorities never cross tenants: the weights decide between them.

A task comes back to the queue, and runs again, when its node is lost or removed
(``NODE_LOST``) or when it was moved off an overloaded node before it started (``MOVED``, see
:mod:`runtime.service.rebalance`; it is then placed on another node). Nodes being drained take
no new tasks.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from rlsched.overload import OverloadWatch
from rlsched.scheduler import TwoStageScheduler
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.world import drive
from runtime.cluster.backend import MOVED, NODE_LOST, ClusterBackend, TaskOutcome
from runtime.kernels import TaskData, output_digest
from runtime.service.canary import Canary
from runtime.service.config import Tenant
from runtime.service.promotion import Promotion
from runtime.service.queue_world import QueueWorld
from runtime.service.store import StorageError, TaskRow, TaskStore

log = logging.getLogger(__name__)

#: Tasks in flight per stream or core of the cluster.
INFLIGHT_PER_UNIT = 2
#: Seconds the loop waits after a dispatch raised (a bug in a policy must not spin the CPU).
ERROR_BACKOFF_S = 1.0
#: Outcomes after which a task runs again rather than finishing (backends report a node that
#: left, however it left, as ``NODE_LOST``).
_RUN_AGAIN = (NODE_LOST, MOVED)


class _CurrentSelector:
    """The scheduler's selector at each decision (an admin may switch schedulers while the
    loop runs)."""

    def __init__(self, dispatcher: Dispatcher) -> None:
        self.d = dispatcher

    @property
    def name(self) -> str:
        """The running selector's (a decision that breaks its contract is logged naming it)."""
        return str(getattr(self.d.scheduler.selector, "name", type(self.d.scheduler.selector).__name__))

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        canary = self.d.canary
        if canary is not None and canary.choose(task.id):  # the candidate's share of the tasks
            return int(canary.selector.select(task, view, mask))  # type: ignore[attr-defined]
        node = self.d.scheduler.selector.select(task, view, mask)
        if self.d.recorder is not None and getattr(self.d.scheduler.selector, "name", "") == "ldwp":
            self.d.recorder(task, view, mask, node)  # the selector learner's transitions
        return node


@dataclass
class _Flight:
    row: TaskRow
    attempt: int
    started: float


class Dispatcher:
    """Starts queued tasks on the cluster and records their outcomes.

    :param store: the durable queue.
    :param cluster: a started cluster backend.
    :param scheduler: stage 1 (its placer already runs in the cluster's agents).
    :param tenants: the service's tenants.
    :param on_event: called with ``(kind, tenant, seconds)`` for metrics: ``decision``,
        ``completed``, ``failed``, ``moved``, ``requeued``, and for a finished task that had a
        deadline ``deadline_met`` or ``deadline_missed``.
    """

    def __init__(
        self,
        store: TaskStore,
        cluster: ClusterBackend,
        scheduler: TwoStageScheduler,
        tenants: tuple[Tenant, ...],
        on_event: Callable[[str, str, float], None] | None = None,
    ) -> None:
        self.store, self.cluster, self.scheduler = store, cluster, scheduler
        self.tenants = {t.name: t for t in tenants}
        #: Tenants the config no longer names, as they were: their accepted tasks still run.
        self.former: dict[str, Tenant] = {}
        self.on_event = on_event or (lambda kind, tenant, s: None)
        self.inflight: dict[int, _Flight] = {}
        self.vtime: dict[str, float] = {}
        #: Nodes that take no new tasks (being drained), by index.
        self.closed: set[int] = set()
        #: Tasks moved off a node, and that node (stage 1 places them elsewhere).
        self.avoid: dict[int, int] = {}
        self.watch = OverloadWatch()
        #: Where a candidate selector under a canary comes from (``runtime.service.promotion``).
        self.promotion: Promotion | None = None
        #: Called with each decision of an LDWP incumbent (``selector_learning``), if set.
        self.recorder: Callable[[Task, ClusterView, np.ndarray, int], None] | None = None
        self._lock = threading.Lock()
        #: Outcomes the store refused (full, read-only), in arrival order, recorded by the loop.
        self._pending: deque[tuple[TaskRow, int, TaskOutcome]] = deque()
        self._outage: float | None = None
        self._stop = threading.Event()
        #: Set when a task may have become startable; the loop waits on it when none may start.
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rlsched-dispatch", daemon=True)
        self.t0 = time.perf_counter()

    @property
    def canary(self) -> Canary | None:
        """The candidate placing a share of the tasks now, if any."""
        return self.promotion.canary if self.promotion is not None else None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def wake(self) -> None:
        """Tell the loop a task may start now (tasks queued, capacity or limits changed)."""
        self._wake.set()

    def idle(self, seconds: float) -> None:
        """Wait until :meth:`wake` or ``seconds`` pass. A wake between the loop's look at the
        queue and this wait is kept by the event, so none is lost; a spurious one costs a look."""
        self._wake.wait(seconds)
        self._wake.clear()

    # ---- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        """Stage 1 by the decision loop every world shares (:func:`rlsched.world.drive`), over
        the queue; it returns only when the service stops."""
        world = QueueWorld(self, self._stop)

        def timed(task: Task, seconds: float) -> None:
            self.on_event("decision", world.tenant, seconds)

        while not self._stop.is_set():
            try:
                drive(world, _CurrentSelector(self), on_select=timed)
            except StorageError as e:  # the queue refuses writes: nothing changed, try again later
                self._storage_refused(e)
                self._stop.wait(ERROR_BACKOFF_S)
            except Exception:  # the task stays queued; the loop must outlive a policy's bug
                log.exception("rlsched serve: dispatching failed; retrying in %.0f s", ERROR_BACKOFF_S)
                self._stop.wait(ERROR_BACKOFF_S)

    def _storage_refused(self, e: StorageError) -> None:
        """Say so once per outage, not once per retry."""
        if self._outage is None:
            self._outage = time.monotonic()
            log.warning("rlsched serve: %s; dispatching paused, outcomes kept until it takes writes", e)

    def record_pending(self) -> None:
        """Record outcomes the store refused earlier, oldest first (they stay in flight until
        recorded, so no task is started in their place)."""
        while True:
            with self._lock:
                if not self._pending:
                    break
                row, attempt, out = self._pending[0]
            self._record(row, attempt, out)  # raises StorageError while the store still refuses
            with self._lock:
                self._pending.popleft()
        if self._outage is not None:
            took = time.monotonic() - self._outage
            log.warning("rlsched serve: the queue takes writes again after %.1f s", took)
            self._outage = None

    def capacity(self) -> tuple[int, int]:
        """(tasks in flight in all, of them on GPU slots) the alive open nodes allow now."""
        c = self.cluster
        with c.lock:
            v = c.view
            open_ = v.alive.astype(bool)
            open_[list(self.closed)] = False
            gpu = int(v.node_streams[open_].sum())
            units = gpu + int(v.cores[open_].sum())
        return INFLIGHT_PER_UNIT * units, INFLIGHT_PER_UNIT * gpu

    def set_tenants(self, tenants: tuple[Tenant, ...]) -> None:
        """The tenants of a reloaded config; a removed one's accepted tasks still run under its
        last limits."""
        new = {t.name: t for t in tenants}
        with self._lock:
            for name, t in self.tenants.items():
                if name not in new:
                    self.former[name] = t
            for name in new:
                self.former.pop(name, None)
            self.tenants = new
        self.wake()

    def tenant(self, name: str) -> Tenant:
        """The tenant ``name``'s limits: configured, as they were before it was removed, or (a
        tenant the config did not name when the service started) the defaults."""
        with self._lock:
            t = self.tenants.get(name) or self.former.get(name)
            if t is None:
                t = self.former[name] = Tenant(name, "")
                log.warning(
                    "rlsched serve: tenant %s is not in the config; its accepted tasks run at "
                    "weight 1 with the default limits",
                    name,
                )
        return t

    def limit(self, tenant: Tenant, gpu_slots: int) -> int:
        """Tasks ``tenant`` may have in flight: its ``max_running``, and its share of the GPUs."""
        if tenant.gpu_share >= 1.0:
            return tenant.max_running
        return min(tenant.max_running, max(1, math.floor(tenant.gpu_share * gpu_slots)))

    def next_row(self) -> TaskRow | None:
        """The queued task to start next by fair share, if any may start now."""
        total, gpu_slots = self.capacity()
        with self._lock:
            if len(self.inflight) >= total:
                return None
            busy: dict[str, int] = {}
            for f in self.inflight.values():
                busy[f.row.tenant] = busy.get(f.row.tenant, 0) + 1
        heads = self.store.queued_heads(1)
        ready = [t for t in heads if busy.get(t, 0) < self.limit(self.tenant(t), gpu_slots)]
        if not ready:
            return None
        floor = min((self.vtime.get(t, 0.0) for t in ready if t in self.vtime), default=0.0)
        for t in ready:
            self.vtime[t] = max(self.vtime.get(t, floor), floor)
        tenant = min(ready, key=lambda t: (self.vtime[t], t))
        return heads[tenant][0]

    def unschedulable(self, row: TaskRow, task: Task, now: float) -> None:
        """Fail a task no node of the cluster could ever run."""
        attempt = self.store.start(row.id, "-")
        if attempt is not None:
            self._done(row, attempt, TaskOutcome(task, -1, now, math.nan, now, {}, "no feasible node"))

    def start_task(self, row: TaskRow, task: Task, data: TaskData, node: int) -> None:
        """Start ``row`` on ``node`` (its attempt recorded first), unless it was cancelled."""
        attempt = self.store.start(row.id, self.cluster.spec.nodes[node].name)
        if attempt is None:  # cancelled between the read and the start
            return
        t = self.tenant(row.tenant)
        self.vtime[row.tenant] = self.vtime.get(row.tenant, 0.0) + 1.0 / t.weight
        with self._lock:
            self.inflight[row.id] = _Flight(row, attempt, time.perf_counter())
        self.cluster.submit(node, task, data, functools.partial(self._done, row, attempt))

    def _done(self, row: TaskRow, attempt: int, out: TaskOutcome) -> None:
        """An outcome from the cluster (any thread): recorded now, or kept for the dispatch loop
        when the store refuses writes (an outcome is never dropped)."""
        with self._lock:
            if self._pending:  # keep the order: an earlier outcome is still waiting
                self._pending.append((row, attempt, out))
                return
        try:
            self._record(row, attempt, out)
        except StorageError as e:
            self._storage_refused(e)
            with self._lock:
                self._pending.append((row, attempt, out))

    def _record(self, row: TaskRow, attempt: int, out: TaskOutcome) -> None:
        # The store first, the in-flight count after: the database never shows a tenant more
        # tasks running than its limit.
        if out.error in _RUN_AGAIN:
            if out.error == MOVED:
                self.avoid[row.id] = out.node
            kind = "moved" if out.error == MOVED else "requeued"
            recorded = self.store.requeue(row.id, attempt, "moved" if out.error == MOVED else "lost")
        else:
            kind = "completed" if out.error is None else "failed"
            # The outputs in brief, as the API returns them (a Ray node sent only that).
            digest = out.digest if out.digest is not None else output_digest(out.outputs)
            result = json.dumps(digest) if out.error is None else None
            recorded = self.store.finish(row.id, attempt, out.error, result)
        with self._lock:
            flight = self.inflight.get(row.id)
            if flight is not None and flight.attempt == attempt:
                del self.inflight[row.id]  # a stale attempt's report leaves the retry in flight
        self.wake()
        if recorded:
            took = time.perf_counter() - flight.started if flight and kind in ("completed", "failed") else 0.0
            self.on_event(kind, row.tenant, took)
            if row.deadline_s is not None and kind in ("completed", "failed"):
                late = kind == "failed" or time.time() - row.submitted_at > row.deadline_s
                self.on_event("deadline_missed" if late else "deadline_met", row.tenant, 0.0)
            canary = self.canary
            if canary is not None and kind in ("completed", "failed"):
                canary.finished(row.id, time.time() - row.submitted_at, kind == "failed")

    # ---- run-time adjustment -----------------------------------------------------------------
    def rebalance(self) -> int:
        """One overload check: withdraw not-yet-started tasks from overloaded nodes (they come
        back through :meth:`_done` and are placed elsewhere). How many moved."""
        c = self.cluster
        with c.lock:
            moves = self.watch.moves(c.view, self.closed)
        return sum(c.withdraw(node, k) for node, k in moves)
