"""From the durable queue to the live cluster: fair sharing between tenants, stage 1, completion.

One thread takes queued tasks from the store and gives each a node with the scheduler's stage-1
selector (stage 2 runs in the node agents, as in every live run). Tenants share the cluster by
start-time fair queueing over dispatches: each tenant has a virtual time that advances by
``1 / weight`` per task it starts; the backlogged tenant with the smallest virtual time goes next,
and a tenant that was idle re-enters at the smallest virtual time of the backlogged ones (so idle
time is not banked). Under contention each tenant's share of started tasks tends to its share of
the weights. A tenant at its ``max_running`` is skipped until one of its tasks finishes.

Tasks in flight are bounded (a few per stream and core of the cluster), so the queue itself stays
in the database, where a crash cannot lose it.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rlsched.feasibility import feasible_nodes, task_needs
from rlsched.scheduler import TwoStageScheduler
from runtime.cluster.agent import TaskOutcome
from runtime.cluster.live import NODE_LOST
from runtime.cluster.local import ClusterBackend
from runtime.cluster.workload import live_task
from runtime.kernels import make_task_data
from runtime.service.config import Tenant
from runtime.service.store import TaskRow, TaskStore

#: Tasks in flight per stream or core of the cluster.
INFLIGHT_PER_UNIT = 2
#: Seconds the loop sleeps when there is nothing to start.
IDLE_S = 0.01


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
        ``completed``, ``failed``.
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
        self.on_event = on_event or (lambda kind, tenant, s: None)
        spec = cluster.spec
        units = sum(n.cpu_cores + n.streams_per_gpu * len(n.gpus) for n in spec.nodes)
        self.max_inflight = max(INFLIGHT_PER_UNIT * units, 1)
        self.inflight: dict[int, _Flight] = {}
        self.vtime: dict[str, float] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="rlsched-dispatch", daemon=True)
        self.t0 = time.perf_counter()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # ---- the loop ---------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            if not self._dispatch_one():
                self._stop.wait(IDLE_S)

    def _next(self) -> TaskRow | None:
        with self._lock:
            if len(self.inflight) >= self.max_inflight:
                return None
            busy = {name: 0 for name in self.tenants}
            for f in self.inflight.values():
                busy[f.row.tenant] = busy.get(f.row.tenant, 0) + 1
        heads = self.store.queued_heads(1)
        ready = [t for t in heads if t in self.tenants and busy.get(t, 0) < self.tenants[t].max_running]
        if not ready:
            return None
        floor = min((self.vtime.get(t, 0.0) for t in ready if t in self.vtime), default=0.0)
        for t in ready:
            self.vtime[t] = max(self.vtime.get(t, floor), floor)
        tenant = min(ready, key=lambda t: (self.vtime[t], t))
        return heads[tenant][0]

    def _dispatch_one(self) -> bool:
        row = self._next()
        if row is None:
            return False
        now = time.perf_counter() - self.t0
        data = make_task_data(row.app, row.stream, row.chunk)
        task = live_task(row.id, data, now)
        c = self.cluster
        with c.lock:
            mask = feasible_nodes(task_needs(task), c.view)
            if not mask.any():
                node = -1
            else:
                c.view.time_s = now
                d0 = time.perf_counter()
                node = self.scheduler.selector.select(task, c.view, mask)
                self.on_event("decision", row.tenant, time.perf_counter() - d0)
        if node < 0:
            attempt = self.store.start(row.id, "-")
            if attempt is not None:
                self.store.finish(row.id, attempt, "no feasible node")
                self.on_event("failed", row.tenant, 0.0)
            return True
        attempt = self.store.start(row.id, c.spec.nodes[node].name)
        if attempt is None:  # cancelled between the read and the start
            return True
        t = self.tenants[row.tenant]
        self.vtime[row.tenant] = self.vtime.get(row.tenant, 0.0) + 1.0 / t.weight
        with self._lock:
            self.inflight[row.id] = _Flight(row, attempt, time.perf_counter())
        c.submit(node, task, data, functools.partial(self._done, row, attempt))
        return True

    def _done(self, row: TaskRow, attempt: int, out: TaskOutcome) -> None:
        with self._lock:
            flight = self.inflight.pop(row.id, None)
        took = time.perf_counter() - flight.started if flight else 0.0
        if out.error == NODE_LOST:
            self.store.requeue(row.id, attempt)
            return
        if self.store.finish(row.id, attempt, out.error):
            self.on_event("completed" if out.error is None else "failed", row.tenant, took)
