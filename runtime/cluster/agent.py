"""The node agent: runs the subtask DAGs of the tasks assigned to one node on real devices.

It is the live twin of the simulator's per-node logic (``envs.simulator``): ready subtasks wait
in priority order; whenever a unit frees up the agent offers them, oldest first, to the same
:class:`~rlsched.scheduler.SubtaskPlacer` the simulator uses, and keeps the
:class:`~rlsched.view.ClusterView` up to date with what it measured. A GPU subtask runs on a stream
lane of its device: its inputs are made resident through the device's MLSM memory manager
(repeated inputs come from the cache), the kernel runs, its outputs stay on the device for the
subtasks that read them. A device that cannot hold a subtask's data hands the subtask back; it is
placed again, never dropped.

The agent keeps the tasks and the ready queue, answers the dispatch hooks, and composes the
rest: :class:`~runtime.cluster.executor.SubtaskExecutor` runs subtasks on lanes,
:class:`~runtime.cluster.unit_accounting.UnitAccounting` keeps the view's units and speeds,
:class:`~runtime.cluster.recovery.MemoryRecovery` hands back, unsticks and spills,
:class:`~runtime.cluster.stream_tuning.StreamTuner` moves streams between GPUs and
:class:`~runtime.cluster.reports.NodeReports` keeps the figures it reports. All scheduling state
is guarded by one lock shared with the cluster (placers read the whole view); kernels and copies
run outside it.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from collections.abc import Callable

from rlsched import dispatch
from rlsched.estimates import node_backlog_seconds
from rlsched.scheduler import CPU, SubtaskPlacer
from rlsched.tasks import Subtask, Task
from rlsched.utilisation import UtilAccumulator
from rlsched.view import ClusterView
from rlsched.view_guard import guarded_placer
from rlsched.world import Observe
from runtime.backends.base import Backend, DeviceFull
from runtime.cluster.backend import MOVED, TaskOutcome
from runtime.cluster.config import LiveClusterSpec
from runtime.cluster.devices import NodeDevices
from runtime.cluster.executor import Result, SubtaskExecutor
from runtime.cluster.recovery import MemoryRecovery
from runtime.cluster.reports import NodeReports
from runtime.cluster.runs import SubtaskJob, TaskRun
from runtime.cluster.speed_reference import SpeedReference
from runtime.cluster.stream_tuning import StreamTuner
from runtime.cluster.unit_accounting import UnitAccounting
from runtime.kernels import TaskData


class NodeAgent:
    """Runs the tasks assigned to node ``node`` of the view.

    :param node: the node's row in ``view``.
    :param spec: the live cluster (for the node's devices and stream bounds).
    :param backend: opens the node's devices.
    :param view: the shared cluster view this agent keeps up to date.
    :param placer: stage 2 (one from outside rlsched reads the view read-only:
        :mod:`rlsched.view_guard`).
    :param lock: the cluster lock guarding ``view`` and every agent's scheduling state.
    :param clock: seconds since the run started.
    :param observe: called with every finished GPU subtask and the time-weighted kinds that ran
        beside it (:mod:`runtime.cluster.corunners`; online interference learning), or ``None``.
    :param speeds: turns measured speeds into speeds relative to the cluster
        (:mod:`runtime.cluster.speed_reference`), shared by the cluster's agents; ``None``: a new
        one for this node alone.
    """

    def __init__(
        self,
        node: int,
        spec: LiveClusterSpec,
        backend: Backend,
        view: ClusterView,
        placer: SubtaskPlacer,
        lock: threading.RLock,
        clock: Callable[[], float],
        observe: Observe | None = None,
        speeds: SpeedReference | None = None,
    ) -> None:
        self.node, self.view, self.lock, self.clock = node, view, lock, clock
        self.placer = placer
        self.observe = observe
        self.speeds = speeds if speeds is not None else SpeedReference()
        ns = self.nspec = spec.nodes[node]
        gpus = self.gpus = NodeDevices.open(spec, node, backend, lock)
        self.residency = gpus.residency
        fastest = spec.fastest_gpu if spec.emulate_core_speed and backend.name == "numpy" else None
        native = None if fastest is None else fastest.model
        self.executor = SubtaskExecutor(ns.name, node, view, gpus.residency, gpus.pools, ns.cpu_cores, native)
        self.tuner = StreamTuner(spec, node, view, gpus.pools, clock)
        #: (time, streams per GPU, mean idle streams per GPU) of each feedback interval.
        self.stream_history = self.tuner.history
        self.reports = NodeReports(ns, node, view, gpus.memory, gpus.pools, self.tuner.feedback, lock, clock)
        self.units = UnitAccounting(ns, node, view, self.speeds, self.reports, gpus.residency, clock)
        self.recovery = MemoryRecovery(self)
        self.waiting = dispatch.ReadyQueue()
        self.redirect = self.recovery.redirect
        self.runs: dict[int, TaskRun] = {}
        self.util = UtilAccumulator(view)
        self.util.start(clock())
        #: Lanes started again after their thread died.
        self.lanes_revived = 0
        self.alive = True

    # ---- task intake ---------------------------------------------------------------------
    def assign(self, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None]) -> None:
        """Take a task (its stage-1 decision chose this node); ``on_done`` gets its outcome."""
        with self.lock:
            v, n = self.view, self.node
            run = TaskRun.assigned(task, data, on_done, self.clock())
            self.runs[task.id] = run
            v.tasks_on_node[n] += 1
            # Nominal seconds per subtask, computed once: completions read them on the hot path.
            run.gpu_nominal, run.cpu_nominal = node_backlog_seconds(task, v, n, len(self.gpus) > 0)
            v.backlog_gpu_s[n] += sum(run.gpu_nominal)
            v.backlog_cpu_s[n] += sum(run.cpu_nominal)
            for s in task.graph.subtasks:
                if not s.parents:
                    self.ready(run, s)
            self.drain()

    @property
    def placer(self) -> SubtaskPlacer:
        """Stage 2 as dispatch calls it: a placer from outside rlsched is handed the view
        read-only, as in the simulator (:func:`rlsched.view_guard.guarded_placer`)."""
        return self._placer

    @placer.setter
    def placer(self, placer: SubtaskPlacer) -> None:
        self._placer = guarded_placer(placer)

    # ---- dispatch hooks (lock held) --------------------------------------------------------
    def ready(self, run: TaskRun, sub: Subtask) -> None:
        """``sub`` may run now: offer it to the placer, or queue it."""
        if not self.alive:
            return
        t0 = time.perf_counter()
        self.view.time_s = self.clock()
        dispatch.offer(self, self.waiting, run, sub)
        self.reports.dispatch_s += time.perf_counter() - t0

    def drain(self) -> None:
        """Offer waiting subtasks, oldest first, to the placer while units are free."""
        if not self.alive:
            return
        t0 = time.perf_counter()
        self.view.time_s = self.clock()
        dispatch.drain(self, self.waiting)
        self.reports.dispatch_s += time.perf_counter() - t0

    def stuck(self, queue: dispatch.ReadyQueue) -> None:
        """Nothing runs, so no event would offer the waiting subtasks again
        (:meth:`MemoryRecovery.unstick`)."""
        self.recovery.unstick(list(queue.items))

    def start(self, run: TaskRun, sub: Subtask, unit: int) -> bool:
        """Run ``sub`` on ``unit`` (a dispatch hook); False if no lane of the unit is free."""
        now = self.clock()
        self.util.advance_node(self.node, now)
        held = self.executor.hold(run, sub, unit)
        if held is None:  # no room for its working set now: it waits for memory to free
            return False
        lane = self.executor.acquire(unit)
        if lane is None:
            self.executor.unhold(unit, held)
            return False
        mark = self.units.started(sub, unit, now)
        if math.isnan(run.first_start_s):
            run.first_start_s = now
        job = SubtaskJob(run, sub, unit, lane, now, mark, held_inputs=held[0], held_working=held[1])
        if unit != CPU:
            self.units.sync_memory(unit)
        self.executor.launch(job, self._finished)
        return True

    # ---- completion (lane thread) ---------------------------------------------------------
    def _finished(self, job: SubtaskJob, result: Result | None, err: BaseException | None) -> None:
        with self.lock:
            self.executor.leave(job)
            try:
                self._complete(job, result, err)
            except Exception:  # never lose a task to a bookkeeping bug: fail it loudly instead
                job.run.error = job.run.error or traceback.format_exc()
                self.finish_task(job.run)
            self.drain()

    def _complete(self, job: SubtaskJob, result: Result | None, err: BaseException | None) -> None:
        v, n, sub, run = self.view, self.node, job.sub, job.run
        self.util.advance_node(n, self.clock())
        if not self.alive:
            return
        if self.runs.get(run.task.id) is not run:  # the task already failed: only free the unit
            self._release_unit(job, measured=0.0)
            return
        if err is not None or result is None:
            self._release_unit(job, measured=0.0)
            if isinstance(err, DeviceFull):
                self.recovery.hand_back(job)
                return
            run.error = run.error or ("".join(traceback.format_exception(err)) if err else "no result")
            self.finish_task(run)
            return
        out, secs = result
        self._release_unit(job, measured=max(secs, 1e-9))
        self.residency.keep_outputs(run.arrays, job.unit, out)
        if job.unit != CPU:
            self.units.sync_memory(job.unit)
        run.units[sub.index] = job.unit
        v.backlog_gpu_s[n] -= run.gpu_nominal[sub.index]
        v.backlog_cpu_s[n] -= run.cpu_nominal[sub.index]
        self.reports.subtasks_done += 1
        if dispatch.subtask_done(run, sub, self.ready):
            self.finish_task(run)

    def _release_unit(self, job: SubtaskJob, measured: float) -> None:
        """Free the job's unit and account its measured seconds (0: it did not run to the end)."""
        self.units.ended(job, measured, self.observe)
        # Stream feedback compares GPUs, so their work is counted in one unit: seconds on the
        # node's mean datasheet GPU (each GPU's own datasheet would make every GPU look alike).
        self.executor.release(job, job.run.gpu_nominal[job.sub.index] if measured > 0 else 0.0)

    def finish_task(self, run: TaskRun) -> None:
        """The task ended (done, failed or withdrawn): free its data and give its outcome."""
        v, n = self.view, self.node
        if self.runs.pop(run.task.id, None) is None:
            return
        v.tasks_on_node[n] -= 1
        self.waiting.drop(run)
        outputs = self.residency.outputs(run.arrays) if run.error is None else {}
        self.residency.release(run.arrays)
        for g in range(len(self.gpus)):
            self.units.sync_memory(g)
        run.on_done(run.outcome(n, self.clock(), outputs))

    def withdraw(self, limit: int) -> int:
        """Hand back up to ``limit`` tasks none of whose subtasks has started, youngest first
        (they would wait longest); each gets its outcome now with error :data:`MOVED`, for the
        caller to place again on another node.

        :return: how many tasks were withdrawn.
        """
        with self.lock:
            idle = [r for r in self.runs.values() if math.isnan(r.first_start_s)]
            idle.sort(key=lambda r: (r.assigned_s, r.task.id), reverse=True)
            v, n = self.view, self.node
            for run in idle[: max(limit, 0)]:
                v.ready_waiting[n] -= sum(1 for item in self.waiting.items if item[1] is run)
                v.backlog_gpu_s[n] -= sum(run.gpu_nominal)
                v.backlog_cpu_s[n] -= sum(run.cpu_nominal)
                run.error = MOVED
                self.finish_task(run)
            return min(len(idle), max(limit, 0))

    # ---- stream feedback and teardown -----------------------------------------------------
    def adjust_streams(self) -> list[int]:
        """One feedback step: move at most one stream between this node's GPUs."""
        with self.lock:
            counts, judged = self.tuner.step()
            if judged:
                self.drain()
            return counts

    def revive_lanes(self) -> int:
        """Watchdog: start again every lane whose thread died, and run the subtask it held again
        (placed anew, as a subtask a full device handed back). How many subtasks it re-placed."""
        with self.lock:
            if not self.alive:
                return 0
            dead = self.executor.dead_jobs()
            for job in dead:
                self._release_unit(job, measured=0.0)
                if self.runs.get(job.run.task.id) is job.run:
                    self.recovery.hand_back(job)
            self.lanes_revived += self.executor.revive()
            if dead:
                self.drain()
            return len(dead)

    def shutdown(self) -> list[TaskRun]:
        """Stop taking work; return the tasks that had not finished (for rescheduling)."""
        with self.lock:
            self.alive = False
            left = list(self.runs.values())
            self.runs.clear()
            self.waiting.clear()
        self.executor.stop()
        self.residency.let_go(run.arrays for run in left)
        self.gpus.close()
        return left
