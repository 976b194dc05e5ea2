"""The service's durable queue as a world the shared stage-1 loop steps.

``rlsched.world.drive`` decides for the simulator, for ``run_live`` and, through this class, for
``rlsched serve``: the same mask, lock and ``select`` call, so a policy cannot behave differently
in the service than where it was evaluated. What differs is where tasks come from: the queue's
fair-share head (the dispatcher's :meth:`QueueOwner.next_row`) instead of a workload's arrival
times, and a stream that never ends (:meth:`QueueWorld.next_decision` returns ``None`` only when
the service stops).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from typing import Protocol

import numpy as np

from rlsched.feasibility import feasible_nodes, task_needs
from rlsched.tasks import Task
from rlsched.view import ClusterView
from runtime.cluster.backend import ClusterBackend
from runtime.cluster.workload import live_task
from runtime.kernels import TaskData, make_task_data
from runtime.service.store import TaskRow

log = logging.getLogger(__name__)

#: Longest wait when no queued task may start now. The dispatcher is woken at once by what
#: usually changes that (a submission, an outcome, a node resumed or added, new tenant limits);
#: this bounds the wait for anything else.
IDLE_S = 0.1


class QueueOwner(Protocol):
    """What a :class:`QueueWorld` needs of the service's dispatcher
    (:class:`runtime.service.dispatcher.Dispatcher`): fair share, starts and outcomes."""

    #: The started cluster (its view and the lock that guards it).
    cluster: ClusterBackend
    #: ``time.perf_counter()`` when the service started: the zero of the view's clock.
    t0: float
    #: Nodes that take no new tasks (being drained), by index.
    closed: set[int]
    #: Tasks moved off a node, and that node (stage 1 places them elsewhere).
    avoid: dict[int, int]

    def record_pending(self) -> None:
        """Record the outcomes the store refused earlier."""
        ...

    def idle(self, seconds: float) -> None:
        """Wait until woken (something may start now) or ``seconds`` pass."""
        ...

    def next_row(self) -> TaskRow | None:
        """The queued task that goes next by fair share, if any may start now."""
        ...

    def unschedulable(self, row: TaskRow, task: Task, now: float) -> None:
        """Fail a task no node could ever run."""
        ...

    def start_task(self, row: TaskRow, task: Task, data: TaskData, node: int) -> None:
        """Start a task on a node."""
        ...


class QueueWorld:
    """Queued tasks, one stage-1 decision at a time (an ``rlsched.world.Decisions``).

    Nodes being drained, and the node a moved task came from, are masked out; a task that only
    drained nodes could run waits in the queue; a task no node could ever run fails
    (``no feasible node``).

    :param dispatcher: the service's dispatcher (fair share, starts, outcomes).
    :param stop: set when the service stops; :meth:`next_decision` then returns ``None``.
    """

    def __init__(self, dispatcher: QueueOwner, stop: threading.Event) -> None:
        self.d, self._stop = dispatcher, stop
        self._current: tuple[TaskRow, Task, TaskData] | None = None
        self._mask: np.ndarray | None = None  # what the policy was shown

    @property
    def view(self) -> ClusterView:
        return self.d.cluster.view

    @property
    def tenant(self) -> str:
        """The tenant of the task awaiting a decision ("" when none)."""
        return self._current[0].tenant if self._current is not None else ""

    @contextlib.contextmanager
    def lock(self) -> Iterator[object]:
        """The cluster lock, with the view's clock set to the service's."""
        c = self.d.cluster
        with c.lock:
            c.view.time_s = self._now()
            yield c.lock

    def _now(self) -> float:
        return time.perf_counter() - self.d.t0

    def next_decision(self) -> Task | None:
        """The next queued task that may start now (recording outcomes the store refused
        earlier first); waits while there is none."""
        self._current = None
        while not self._stop.is_set():
            self.d.record_pending()
            row = self.d.next_row()
            if row is None:
                self.d.idle(IDLE_S)
                continue
            task, data = self._task(row)
            with self.d.cluster.lock:
                ever = feasible_nodes(task_needs(task), self.d.cluster.view)
            if not ever.any():
                self.d.unschedulable(row, task, self._now())
                continue
            if not self._open(task.id, ever).any():
                self.d.idle(IDLE_S)  # only drained nodes could run it: it waits in the queue
                continue
            self._current = (row, task, data)
            return task
        return None

    def _task(self, row: TaskRow) -> tuple[Task, TaskData]:
        now = self._now()
        data = make_task_data(row.app, row.stream, row.chunk)
        deadline = None if row.deadline_s is None else now + row.submitted_at + row.deadline_s - time.time()
        task = live_task(row.id, data, now)
        return dataclasses.replace(task, priority=row.priority, deadline_s=deadline), data

    def _open(self, task_id: int, feasible: np.ndarray) -> np.ndarray:
        """``feasible`` without drained nodes, and without the node a moved task left when
        another node could take it."""
        m = feasible.copy()
        m[list(self.d.closed)] = False
        away = self.d.avoid.get(task_id)
        if away is not None and m.sum() > 1:
            m[away] = False
        return m

    def mask(self, task: Task) -> np.ndarray:
        """Alive, open nodes that could run ``task`` now."""
        with self.d.cluster.lock:
            feasible = feasible_nodes(task_needs(task), self.d.cluster.view)
        self._mask = self._open(task.id, feasible)
        return self._mask

    def assign(self, task: Task, node: int) -> None:
        """Start the task on ``node``. A node that left or was closed since the mask was taken
        does not start it: the task stays queued and is decided again.

        :raises ValueError: if ``task`` is not the one awaiting a decision, or ``node`` was not in
            the mask the policy was given (the task stays queued).
        """
        if self._current is None or self._current[1].id != task.id:
            raise ValueError(f"task {task.id} is not the task awaiting a decision")
        row, _, data = self._current
        shown, self._current, self._mask = self._mask, None, None
        if shown is None or not (0 <= node < len(shown)) or not shown[node]:
            raise ValueError(f"node {node} cannot run task {task.id}")
        if not self.mask(task)[node]:
            log.debug("rlsched serve: node %d cannot take task %d any more; decided again", node, row.id)
            return
        self.d.avoid.pop(row.id, None)
        self.d.start_task(row, task, data, node)
