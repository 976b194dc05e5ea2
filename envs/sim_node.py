"""The simulator's work on one node: a task's input transfer, its subtasks on GPU streams and CPU
cores at rates from the ground truth, and its results' upload.

:class:`NodeExecution` is the part of :class:`envs.simulator.Simulator` that runs a task once
stage 1 gave it a node; the simulator's event loop calls it. Stage 2 runs through
:mod:`rlsched.dispatch`, the loop the live node agents run: :class:`_NodeDispatch` is one node as
that loop sees it. Whenever the set of subtasks on a GPU changes, :meth:`NodeExecution._rerate`
recomputes the progress rate of every co-runner and reschedules its completion.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from envs.ground_truth import GroundTruth
from envs.network import Link
from envs.sim_runs import Run, TaskRun
from rlsched import dispatch
from rlsched.cluster import NodeSpec
from rlsched.estimates import backlog_seconds, subtask_cpu_seconds, subtask_gpu_seconds
from rlsched.records import TaskRecord
from rlsched.scheduler import CPU, SubtaskPlacer
from rlsched.tasks import Device, Subtask, Task
from rlsched.utilisation import UtilAccumulator
from rlsched.view import SPEED_EMA, ClusterView

# Event kinds, ordered so that at equal times departures free resources before arrivals look.
_DONE, _XFER, _UPLOAD, _LEAVE, _JOIN, _DRIFT, _ARRIVE, _TICK = range(8)


class PlacementError(RuntimeError):
    """A placer returned a unit that cannot take the subtask."""


class _NodeDispatch:
    """One node of the simulator as :mod:`rlsched.dispatch` sees it (units never refuse a start;
    no redirection; waiting on an idle node is the placer's error)."""

    __slots__ = ("node", "sim")
    redirect = None

    def __init__(self, sim: NodeExecution, node: int) -> None:
        self.sim, self.node = sim, node

    @property
    def view(self) -> ClusterView:
        return self.sim.view

    @property
    def placer(self) -> SubtaskPlacer:
        return self.sim.dispatch_placer

    def start(self, tr: TaskRun, sub: Subtask, unit: int) -> bool:
        return self.sim._start(tr, sub, unit)

    def stuck(self, queue: dispatch.ReadyQueue) -> None:
        raise PlacementError(
            f"placer {self.sim.placer.name} left {len(queue)} subtasks waiting on idle node {self.node}"
        )


class NodeExecution:
    """Runs tasks on the nodes stage 1 gave them (a base of :class:`envs.simulator.Simulator`,
    which sets every attribute below in its ``_init_state``)."""

    view: ClusterView
    nodes: Sequence[NodeSpec]
    placer: SubtaskPlacer
    dispatch_placer: Any
    truth: GroundTruth
    records: list[TaskRecord]
    trace: list[tuple] | None
    now: float
    completed: int
    in_system: int
    _seq: int
    _events: list[tuple]
    _observe: Callable[[str, str, tuple[str, ...], float], None] | None
    _gpu_runs: list[list[list[Run]]]
    _cpu_runs: list[dict[Run, None]]
    _waiting: list[dispatch.ReadyQueue]
    _hosts: list[_NodeDispatch]
    _admit: list[list[TaskRun]]
    _on_node: list[dict[int, TaskRun]]
    _epoch: list[int]
    _down: Link
    _up: Link
    _cpu_gf: list[float]
    _tf: list[list[float]]
    _bw: list[list[float]]
    _net: list[float]
    _tf_mean: list[float]
    _bw_mean: list[float]
    _util: UtilAccumulator

    def _push(self, t: float, kind: int, obj: object, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._events, (t, kind, self._seq, obj, version))

    def _to_node(self, task: Task, node: int) -> None:
        v = self.view
        rec = self.records[task.id]
        rec.node = node
        tr = TaskRun(
            task,
            node,
            self._epoch[node],
            [len(s.parents) for s in task.graph.subtasks],
            started=[False] * len(task.graph),
        )
        tf, bw, cgf = self._tf_mean[node], self._bw_mean[node], self._cpu_gf[node]
        tr.gpu_nominal, tr.cpu_nominal = backlog_seconds(task, tf, bw, cgf, tf > 0)
        v.backlog_gpu_s[node] += sum(tr.gpu_nominal)
        v.backlog_cpu_s[node] += sum(tr.cpu_nominal)
        v.tasks_on_node[node] += 1
        self._on_node[node][task.id] = tr
        self._admit[node].append(tr)
        v.host_mem_queue_changed(node, task.host_mem_mb)
        self._admit_tasks(node)

    def _admit_tasks(self, node: int) -> None:
        """Start input transfers, in order, for queued tasks whose host memory fits."""
        v = self.view
        q = self._admit[node]
        f = v.fast
        while q and f.host_mem_used[node] + q[0].task.host_mem_mb <= f.host_mem[node]:
            tr = q.pop(0)
            self._util.advance_node(node, self.now)
            v.host_mem_queue_changed(node, -tr.task.host_mem_mb)
            v.host_mem_changed(node, tr.task.host_mem_mb)
            end = self._down.reserve(node, self.now, tr.task.input_mb / self._net[node])
            self._push(end, _XFER, tr, tr.epoch)

    def _transfer_done(self, tr: TaskRun) -> None:
        if tr.epoch != self._epoch[tr.node] or tr.withdrawn:
            return  # the node left, or the task was moved, while the input was in flight
        for s in tr.task.graph.subtasks:
            if not s.parents:
                self._ready(tr, s)
        self._drain(tr.node)

    def _ready(self, tr: TaskRun, sub: Subtask) -> None:
        dispatch.offer(self._hosts[tr.node], self._waiting[tr.node], tr, sub)

    def _drain(self, node: int) -> None:
        dispatch.drain(self._hosts[node], self._waiting[node])

    def _start(self, tr: TaskRun, sub: Subtask, unit: int) -> bool:
        v, node, now = self.view, tr.node, self.now
        self._check_unit(tr, sub, unit)
        self._util.advance_node(node, now)
        tr.started[sub.index] = True
        rec = self.records[tr.task.id]
        if math.isnan(rec.first_start_s):
            rec.first_start_s = now
        if unit == CPU:
            solo = self.truth.cpu_solo_seconds(sub, self._cpu_gf[node])
            run = Run(tr, sub, CPU, solo, 1.0, 1.0 / solo, now, now, 0)
            v.cpu_started(node)
            self._cpu_runs[node][run] = None
            self._push(now + solo, _DONE, run, 0)
        else:
            model = self.nodes[node].gpus[unit]
            run = Run(tr, sub, unit, self.truth.gpu_solo_seconds(sub, model), 1.0, 0.0, now, now, 0)
            v.gpu_started(node, unit, sub.mem_mb, sub.kind.name)
            runs = self._gpu_runs[node][unit]
            if self._observe is not None:
                run.partners = tuple(r.sub.kind.name for r in runs)
            runs.append(run)
            self._rerate(node, unit)
        if self.trace is not None:
            self.trace.append(("start", now, tr.task.id, sub.index, node, unit))
        return True

    def _check_unit(self, tr: TaskRun, sub: Subtask, unit: int) -> None:
        f, node = self.view.fast, tr.node
        if isinstance(unit, (bool, np.bool_)) or not isinstance(unit, (int, np.integer)):
            raise PlacementError(
                f"{self.placer.name}: place returned {unit!r} for {sub.kind.name} on node {node}, expected "
                f"a GPU index, CPU ({CPU}) or None"
            )
        if unit == CPU:
            if sub.kind.device is Device.GPU:
                raise PlacementError(f"{self.placer.name}: {sub.kind.name} runs on GPUs only, not a CPU core")
            if f.cpu_busy[node] >= f.cores[node]:
                raise PlacementError(f"{self.placer.name}: no CPU core for {sub.kind.name} on node {node}")
            return
        gpus = self.nodes[node].gpus
        ok = (
            sub.kind.device is not Device.CPU
            and 0 <= unit < len(gpus)
            and f.gpu_running[node][unit] < f.gpu_streams[node][unit]
            and f.gpu_mem_used[node][unit] + sub.mem_mb <= f.gpu_mem[node][unit]
            and (not tr.task.gpu_models or gpus[unit].name in tr.task.gpu_models)
        )
        if not ok:
            raise PlacementError(f"{self.placer.name}: GPU {unit} of node {node} cannot take {sub.kind.name}")

    def _rerate(self, node: int, gpu: int) -> None:
        """Recompute the progress rates of every subtask on a GPU after its co-runners changed."""
        runs = self._gpu_runs[node][gpu]
        if not runs:
            return
        now = self.now
        if len(runs) == 1:
            f: list[float] | tuple[float] = (1.0,)
        else:
            model = self.nodes[node].gpus[gpu]
            f = self.truth.factors([r.sub.kind for r in runs], [r.sub.share for r in runs], model)
        speed = float(self.truth.speed[node, gpu])
        events = self._events
        for r, fi in zip(runs, f, strict=True):
            rate = speed * fi / r.solo_s
            if rate == r.rate:
                continue  # its completion event still holds
            r.remaining -= (now - r.t_last) * r.rate
            r.t_last = now
            r.rate = rate
            r.version += 1
            self._seq += 1
            left = r.remaining if r.remaining > 0.0 else 0.0
            heapq.heappush(events, (now + left / rate, _DONE, self._seq, r, r.version))

    def _subtask_done(self, run: Run) -> None:
        tr, sub, v, now = run.tr, run.sub, self.view, self.now
        node = tr.node
        self._util.advance_node(node, now)
        measured = now - run.t_start
        if run.gpu == CPU:
            del self._cpu_runs[node][run]
            nominal = subtask_cpu_seconds(sub, self._cpu_gf[node])
            v.cpu_finished(node, _speed(nominal, measured), SPEED_EMA)
        else:
            g = run.gpu
            self._gpu_runs[node][g].remove(run)
            nominal = subtask_gpu_seconds(sub, self._tf[node][g], self._bw[node][g])
            speed = _speed(nominal, measured)
            v.gpu_finished(node, g, sub.mem_mb, sub.kind.name, speed, SPEED_EMA)
            if self._observe is not None and run.version == 1:  # co-runners never changed
                self._observe(self.nodes[node].gpus[g].name, sub.kind.name, run.partners, speed)
            self._rerate(node, g)
        v.backlog_gpu_s[node] -= tr.gpu_nominal[sub.index]
        v.backlog_cpu_s[node] -= tr.cpu_nominal[sub.index]
        if self.trace is not None:
            self.trace.append(("done", now, tr.task.id, sub.index, node, run.gpu))
        if dispatch.subtask_done(tr, sub, self._ready):
            self._upload(tr)
        self._drain(node)

    def _upload(self, tr: TaskRun) -> None:
        """Ship a finished task's results back over the node's uplink (FIFO, full duplex)."""
        node = tr.node
        end = self._up.reserve(node, self.now, tr.task.output_mb / self._net[node])
        self._push(end, _UPLOAD, tr, tr.epoch)

    def _task_done(self, tr: TaskRun) -> None:
        v, node = self.view, tr.node
        rec = self.records[tr.task.id]
        rec.done_s = self.now
        rec.completions += 1
        self.completed += 1
        self.in_system -= 1
        v.host_mem_changed(node, -tr.task.host_mem_mb)
        v.tasks_on_node[node] -= 1
        del self._on_node[node][tr.task.id]
        self._admit_tasks(node)


def _speed(nominal: float, measured: float) -> float:
    """Measured speed relative to nominal; 1 where the run took no time that float seconds can
    tell (a tiny subtask late in a long horizon): no evidence either way."""
    return nominal / measured if measured > 0.0 else 1.0
