"""Moving not-yet-started tasks off a simulated node, as the service does live.

The service's dispatcher checks :class:`~rlsched.overload.OverloadWatch` every
:data:`~rlsched.overload.TICK_S` seconds and withdraws queued tasks from nodes that stay
overloaded or whose queue outlasts a task's run on an idle GPU node, for stage 1 to place again
(``runtime/service/dispatcher.py``). With ``rebalance`` on, the simulator runs the same watch at
the same period of simulated time, so what an operator gets from ``rlsched serve`` is what the
simulator evaluates. Only tasks none of whose subtasks has started move (nothing is lost); an
input transfer already under way is abandoned, its link time spent.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from envs.sim_runs import TaskRun
from rlsched import dispatch
from rlsched.records import TaskRecord
from rlsched.view import ClusterView


class Host(Protocol):
    """The simulator as rebalancing sees it: its per-node task state (kept by the simulator, and
    changed here only through :func:`withdraw`)."""

    view: ClusterView
    records: list[TaskRecord]
    pending: list[int]
    _on_node: list[dict[int, TaskRun]]
    _admit: list[list[TaskRun]]
    _waiting: list[dispatch.ReadyQueue]
    _avoid: dict[int, int]

    def _admit_tasks(self, node: int) -> None: ...


def withdraw(sim: Host, node: int, limit: int) -> int:
    """Take up to ``limit`` tasks that have not started off ``node``, youngest first, and put them
    back before stage 1; how many moved.

    :param sim: the simulator.
    :param node: the overloaded node.
    :param limit: at most this many tasks.
    """
    idle = [tr for tr in sim._on_node[node].values() if not any(tr.started)]
    idle.sort(key=lambda tr: (tr.task.arrival_s, tr.task.id), reverse=True)
    moved = idle[: max(limit, 0)]
    for tr in moved:
        _undo(sim, tr)
    if moved:
        sim._admit_tasks(node)  # host memory freed: queued inputs may start
        sim.pending.sort()
    return len(moved)


def _undo(sim: Host, tr: TaskRun) -> None:
    node, task = tr.node, tr.task
    release(sim, tr, range(len(tr.started)))  # none of its subtasks started
    rec = sim.records[task.id]
    rec.node = -1
    rec.requeues += 1
    sim._avoid[task.id] = node  # stage 1 places it elsewhere where it can, as the service does
    sim.pending.append(task.id)


def release(sim: Host, tr: TaskRun, unfinished: Iterable[int]) -> None:
    """Take ``tr`` off its node, its running subtasks already stopped: its host memory (or its
    place in the admission queue), its ready subtasks' places, the backlog of its ``unfinished``
    subtasks and its count; an input transfer in flight ends without effect.

    :param sim: the simulator.
    :param tr: the task on its node.
    :param unfinished: indices of its subtasks not finished (all of them, if none started).
    """
    v, node, task = sim.view, tr.node, tr.task
    tr.withdrawn = True
    if tr in sim._admit[node]:
        sim._admit[node].remove(tr)
        v.host_mem_queue_changed(node, -task.host_mem_mb)
    else:
        v.host_mem_changed(node, -task.host_mem_mb)
    queue = sim._waiting[node]
    before = len(queue)
    queue.drop(tr)
    v.ready_waiting[node] -= before - len(queue)
    v.backlog_gpu_s[node] -= sum(tr.gpu_nominal[i] for i in unfinished)
    v.backlog_cpu_s[node] -= sum(tr.cpu_nominal[i] for i in unfinished)
    v.tasks_on_node[node] -= 1
    del sim._on_node[node][task.id]
