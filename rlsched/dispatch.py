"""Stage-2 dispatch on one node: the ready queue and the loop that offers it to the placer.

The simulator (``envs.simulator``) and the live node agent (``runtime.cluster.agent``) both run this code;
what differs between the worlds is behind the :class:`DispatchHost` hooks, never in a copy:

- ``start`` puts a subtask on a unit (the simulator always can; a live stream pool may refuse);
- ``redirect`` may change the placer's answer (the agent steers away from a device that handed
  the subtask back for lack of memory; the simulator has no such devices and passes ``None``);
- ``stuck`` is called when subtasks wait on a node where nothing runs, so no completion would
  ever offer them again (the simulator reports the placer's error; the agent frees memory or
  fails the tasks with the reason).

Order: ready subtasks wait by (higher priority first, older task first, task id, subtask index)
and are offered oldest first. A subtask that becomes ready while nothing waits is offered at
once, before the next one becomes ready; the view a placer reads therefore never counts a
subtask that is already being placed.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any, Protocol

from rlsched.tasks import Device, Subtask, Task
from rlsched.view import ClusterView


class Owner(Protocol):
    """What a world keeps per task on a node; dispatch only reads its task."""

    task: Task


class Progress(Protocol):
    """A task on a node with its DAG bookkeeping: unfinished parents per subtask, subtasks done."""

    task: Task
    deps_left: list[int]
    done: int


class _Placer(Protocol):
    name: str

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None: ...


class DispatchHost(Protocol):
    """A node as dispatch sees it: the view row it keeps, its placer and the world's hooks."""

    @property
    def node(self) -> int: ...

    @property
    def view(self) -> ClusterView: ...

    @property
    def placer(self) -> _Placer: ...

    @property
    def redirect(self) -> Callable[[Any, Subtask, int, bool], int | None] | None:
        """``(owner, sub, unit, cpu_free) -> unit or None``, or ``None`` to take the placer's answer."""
        ...

    def start(self, owner: Any, sub: Subtask, unit: int) -> bool:
        """Run ``sub`` on ``unit``; False if the unit turned out not to be free."""
        ...

    def stuck(self, queue: ReadyQueue) -> None:
        """Subtasks wait and nothing runs on the node."""
        ...


Item = tuple[tuple[int, float, int, int], Any, Subtask]


def ready_key(task: Task, sub: Subtask) -> tuple[int, float, int, int]:
    """Dispatch order of a ready subtask: higher priority, then older task, then id and index."""
    return (-task.priority, task.arrival_s, task.id, sub.index)


class ReadyQueue:
    """Ready subtasks of one node that wait for a unit, in dispatch order."""

    __slots__ = ("items",)

    def __init__(self) -> None:
        self.items: list[Item] = []

    def __len__(self) -> int:
        return len(self.items)

    def push(self, owner: Owner, sub: Subtask) -> None:
        """Queue a ready subtask in its place (appending is the common case)."""
        key = ready_key(owner.task, sub)
        w = self.items
        if not w or w[-1][0] < key:
            w.append((key, owner, sub))
        else:
            # Rare: a higher-priority or older subtask became ready after younger ones.
            bisect.insort(w, (key, owner, sub), key=lambda e: e[0])

    def drop(self, owner: Owner) -> None:
        """Forget every subtask of ``owner`` (its task ended)."""
        self.items = [w for w in self.items if w[1] is not owner]

    def clear(self) -> None:
        self.items.clear()


def subtask_done(owner: Progress, sub: Subtask, ready: Callable[[Any, Subtask], None]) -> bool:
    """Count ``sub`` as finished: every child whose parents have now all finished is handed to
    ``ready(owner, child)``, in index order; True when it was the task's last subtask."""
    owner.done += 1
    graph = owner.task.graph
    deps = owner.deps_left
    for c in graph.children[sub.index]:
        deps[c] -= 1
        if deps[c] == 0:
            ready(owner, graph.subtasks[c])
    return owner.done == len(graph)


def _free(host: DispatchHost) -> tuple[bool, bool]:
    f, node = host.view.fast, host.node
    return f.cpu_busy[node] < f.cores[node], f.node_gpu_running[node] < f.node_streams[node]


def offer(host: DispatchHost, queue: ReadyQueue, owner: Owner, sub: Subtask) -> None:
    """A subtask became ready: place it at once if nothing older waits and its kind of unit is
    free, else queue it (``ready_waiting`` in the view counts it until it starts)."""
    if not queue.items and _try_now(host, owner, sub):
        return
    queue.push(owner, sub)
    host.view.ready_waiting[host.node] += 1


def _try_now(host: DispatchHost, owner: Owner, sub: Subtask) -> bool:
    cpu_free, gpu_free = _free(host)
    dev = sub.kind.device
    if (dev is Device.CPU and not cpu_free) or (dev is Device.GPU and not gpu_free):
        return False
    if not cpu_free and not gpu_free:
        return False
    unit = host.placer.place(owner.task, sub, host.node, host.view)
    if unit is not None and host.redirect is not None:
        unit = host.redirect(owner, sub, unit, cpu_free)
    return unit is not None and host.start(owner, sub, unit)


def drain(host: DispatchHost, queue: ReadyQueue) -> None:
    """Offer waiting subtasks, oldest first, to the placer while units are free; call
    ``host.stuck`` if some still wait on a node where nothing runs."""
    w = queue.items
    if not w:
        return
    v, node = host.view, host.node
    place, start, redirect = host.placer.place, host.start, host.redirect
    f = v.fast
    cpu_free, gpu_free = _free(host)
    kept = []
    for i, item in enumerate(w):
        if not cpu_free and not gpu_free:  # nothing more can start: keep the rest as they are
            kept.extend(w[i:])
            break
        _, owner, sub = item
        dev = sub.kind.device
        if (dev is Device.CPU and not cpu_free) or (dev is Device.GPU and not gpu_free):
            kept.append(item)
            continue
        unit = place(owner.task, sub, node, v)
        if unit is not None and redirect is not None:
            unit = redirect(owner, sub, unit, cpu_free)
        if unit is None or not start(owner, sub, unit):
            kept.append(item)
            continue
        v.ready_waiting[node] -= 1
        cpu_free, gpu_free = _free(host)
    queue.items = kept
    if kept and f.cpu_busy[node] == 0 and f.node_gpu_running[node] == 0:
        host.stuck(queue)
