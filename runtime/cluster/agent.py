"""The node agent: runs the subtask DAGs of the tasks assigned to one node on real devices.

It is the live twin of the simulator's per-node logic (``envs.simulator``): ready subtasks wait
in priority order; whenever a unit frees up the agent offers them, oldest first, to the same
:class:`~rlsched.scheduler.SubtaskPlacer` the simulator uses, and keeps the
:class:`~rlsched.view.ClusterView` up to date with what it measured. A GPU subtask runs on a stream
lane of its device: its inputs are made resident through the device's MLSM memory manager
(repeated inputs come from the cache), the kernel runs, its outputs stay on the device for the
subtasks that read them. A device that cannot hold a subtask's data hands the subtask back; it is
placed again, never dropped.

All scheduling state is guarded by one lock shared with the cluster (placers read the whole
view); kernels and copies run outside it.
"""

from __future__ import annotations

import math
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlsched import dispatch
from rlsched.estimates import subtask_cpu_seconds, subtask_gpu_seconds
from rlsched.hardware import gpu_model
from rlsched.scheduler import CPU, SubtaskPlacer
from rlsched.tasks import Device as Where
from rlsched.tasks import Subtask, Task
from rlsched.utilisation import UtilAccumulator
from rlsched.view import ClusterView
from rlsched.world import Observe
from runtime import failpoints
from runtime.backends.base import Backend, DeviceConfig, DeviceFull
from runtime.cluster.config import LiveClusterSpec, LiveNode
from runtime.cluster.corunners import CoRunners, Mark
from runtime.cluster.speed_reference import CPU_UNIT, SpeedReference
from runtime.kernels import StagePlan, TaskData, stage_plan
from runtime.mlsm.lanes import Lane
from runtime.mlsm.memory import DeviceMemory
from runtime.mlsm.residency import Residency, TaskArrays
from runtime.mlsm.streams import StreamFeedback, StreamPool

#: Error of a task whose node left the cluster (died, or was removed) before it finished: it is
#: placed again on a live node.
NODE_LOST = "node lost"
#: Error of a task withdrawn from its node before any of its subtasks started (to be placed
#: again elsewhere; see :meth:`NodeAgent.withdraw`).
MOVED = "moved: withdrawn from an overloaded node before it started"
#: Times a subtask may be handed back by full devices before it waits for memory to free.
MAX_HANDBACKS = 8
#: Hand-backs after which a task fails with an error naming the subtask (never silently lost).
GIVE_UP_HANDBACKS = 256


def _datasheet(model: str) -> tuple[float, float]:
    """(FP32 TFLOP/s, memory GB/s) of a catalog GPU model."""
    g = gpu_model(model)
    return g.fp32_tflops, g.mem_bw_gbs


def nominal_seconds(
    task: Task, view: ClusterView, node: int, has_gpus: bool
) -> tuple[list[float], list[float]]:
    """Nominal GPU seconds (GPU-capable subtasks, on the node's mean datasheet GPU) and CPU
    seconds (CPU-only subtasks) of each subtask of ``task`` on ``node``: its backlog there."""
    tflops, bw, gflops = view.node_tflops_mean[node], view.node_bw_mean[node], view.fast.cpu_gflops[node]
    gpu, cpu = [], []
    for s in task.graph.subtasks:
        on_cpu = s.kind.device is Where.CPU
        gpu.append(subtask_gpu_seconds(s, tflops, bw) if has_gpus and not on_cpu else 0.0)
        cpu.append(subtask_cpu_seconds(s, gflops) if on_cpu else 0.0)
    return gpu, cpu


@dataclass
class TaskOutcome:
    """What happened to one task on a node.

    ``outputs`` holds every array the task computed (on the host); ``units`` the unit each
    subtask ran on (a GPU index, :data:`CPU`, or ``CPU - 1`` if it never ran); ``error`` is
    ``None`` on success.
    """

    task: Task
    node: int
    assigned_s: float
    first_start_s: float
    done_s: float
    outputs: dict[str, np.ndarray]
    error: str | None = None
    handbacks: int = 0
    units: list[int] = field(default_factory=list)
    #: The outputs in brief (``runtime.kernels.output_digest``) when a remote node sent that
    #: instead of the arrays (``outputs`` is then empty).
    digest: dict[str, dict[str, Any]] | None = None


@dataclass
class DeviceReport:
    """End-of-run figures of one GPU."""

    node: str
    gpu: int
    model: str
    streams: int
    util: float
    hits: int
    misses: int
    evictions: int
    h2d_bytes_loaded: int
    h2d_bytes_saved: int

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0


@dataclass
class _Run:
    """A task on the node."""

    task: Task
    data: TaskData
    plans: tuple[StagePlan, ...]
    on_done: Callable[[TaskOutcome], None]
    assigned_s: float
    deps_left: list[int]
    arrays: TaskArrays
    done: int = 0
    first_start_s: float = math.nan
    avoid: dict[int, set[int]] = field(default_factory=dict)
    handbacks: int = 0
    error: str | None = None
    units: list[int] = field(default_factory=list)
    gpu_nominal: list[float] = field(default_factory=list)
    cpu_nominal: list[float] = field(default_factory=list)


@dataclass
class _Job:
    """One subtask running on a unit."""

    run: _Run
    sub: Subtask
    unit: int
    lane: int
    t_start: float
    mark: Mark | None = None  # GPU jobs: where their co-runners are counted from
    pinned: list[str] = field(default_factory=list)


class NodeAgent:
    """Runs the tasks assigned to node ``node`` of the view.

    :param node: the node's row in ``view``.
    :param spec: the live cluster (for the node's devices and stream bounds).
    :param backend: opens the node's devices.
    :param view: the shared cluster view this agent keeps up to date.
    :param placer: stage 2.
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
        self.node = node
        self.speeds = speeds if speeds is not None else SpeedReference()
        self.nspec: LiveNode = spec.nodes[node]
        self.view = view
        self.placer = placer
        self.lock = lock
        self.clock = clock
        self.observe = observe
        self.devices = [
            backend.open(DeviceConfig(g.index, g.model, g.mem_bytes, g.rel_speed, spec.device_concurrency))
            for g in self.nspec.gpus
        ]
        self.memory = [
            DeviceMemory(g.mem_bytes, f"{self.nspec.name}/gpu{i}") for i, g in enumerate(self.nspec.gpus)
        ]
        self.pools = [
            StreamPool(d, self.nspec.streams_per_gpu, f"{self.nspec.name}-g{i}")
            for i, d in enumerate(self.devices)
        ]
        self.copy_streams = [d.new_stream() for d in self.devices]
        self.residency = Residency(self.memory, self.copy_streams, lock)
        self.cores = [Lane(f"{self.nspec.name}-c{i}") for i in range(self.nspec.cpu_cores)]
        fastest = spec.fastest_gpu if spec.emulate_core_speed and backend.name == "numpy" else None
        #: (TFLOP/s, GB/s) of the GPU emulated at native speed, when cores are stretched to match.
        self._native_gpu = None if fastest is None else _datasheet(fastest.model)
        self.free_cores = list(range(self.nspec.cpu_cores))
        self.feedback = StreamFeedback(spec.min_streams_per_gpu, spec.max_streams_per_gpu)
        self.waiting = dispatch.ReadyQueue()
        self.redirect = self._redirect
        self.runs: dict[int, _Run] = {}
        self.corunners = CoRunners(len(self.devices))
        self.gpu_busy_s = [0.0] * len(self.devices)
        self._gpu_mark = [0.0] * len(self.devices)
        self.util = UtilAccumulator(view)
        self.util.start(clock())
        self.subtasks_done = 0
        self.dispatch_s = 0.0
        self._cooldown = False
        #: (time, streams per GPU, mean idle streams per GPU) of each feedback interval.
        self.stream_history: list[tuple[float, list[int], list[float]]] = []
        #: The job each busy lane runs, by (unit, lane): how a lane that died is found.
        self._on_lane: dict[tuple[int, int], _Job] = {}
        #: Lanes started again after their thread died.
        self.lanes_revived = 0
        self.alive = True

    # ---- task intake ---------------------------------------------------------------------
    def assign(self, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None]) -> None:
        """Take a task (its stage-1 decision chose this node); ``on_done`` gets its outcome."""
        with self.lock:
            v, n = self.view, self.node
            run = _Run(
                task,
                data,
                stage_plan(task.app),
                on_done,
                self.clock(),
                [len(s.parents) for s in task.graph.subtasks],
                TaskArrays(task.id, data),
                units=[CPU - 1] * len(task.graph),
            )
            self.runs[task.id] = run
            v.tasks_on_node[n] += 1
            # Nominal seconds per subtask, computed once: completions read them on the hot path.
            run.gpu_nominal, run.cpu_nominal = nominal_seconds(task, v, n, bool(self.devices))
            v.backlog_gpu_s[n] += sum(run.gpu_nominal)
            v.backlog_cpu_s[n] += sum(run.cpu_nominal)
            for s in task.graph.subtasks:
                if not s.parents:
                    self._ready(run, s)
            self._drain()

    def _ready(self, run: _Run, sub: Subtask) -> None:
        if not self.alive:
            return
        t0 = time.perf_counter()
        self.view.time_s = self.clock()
        dispatch.offer(self, self.waiting, run, sub)
        self.dispatch_s += time.perf_counter() - t0

    # ---- dispatch hooks (lock held) --------------------------------------------------------
    def _drain(self) -> None:
        """Offer waiting subtasks, oldest first, to the placer while units are free."""
        if not self.alive:
            return
        t0 = time.perf_counter()
        self.view.time_s = self.clock()
        dispatch.drain(self, self.waiting)
        self.dispatch_s += time.perf_counter() - t0

    def _redirect(self, run: _Run, sub: Subtask, unit: int, cpu_free: bool) -> int | None:
        """Steer away from a device that handed this subtask back for lack of memory."""
        if unit != CPU and unit in run.avoid.get(sub.index, ()):
            return CPU if (sub.kind.device is not Where.GPU and cpu_free) else None
        return unit

    def stuck(self, queue: dispatch.ReadyQueue) -> None:
        """Nothing runs, so no event would offer the waiting subtasks again (see :meth:`_unstick`)."""
        self._unstick(list(queue.items))

    def _unstick(self, kept: list[dispatch.Item]) -> None:
        """Nothing runs, so no event would offer the waiting subtasks again. In order: forget
        devices that were full (they are idle now); spill the outputs tasks hold on the GPUs to
        the host (placers wait for memory that nothing running would free); start subtasks that
        may use a core on one; only then fail what is left, with the reason."""
        if any(run.avoid for _, run, _ in kept):
            for _, run, _ in kept:
                run.avoid.clear()
            self._drain()
            return
        if self._spill_outputs():
            self._drain()
            return
        still = []
        for item in kept:
            _, run, sub = item
            if sub.kind.device is not Where.GPU and self.free_cores and self.start(run, sub, CPU):
                self.view.ready_waiting[self.node] -= 1
            else:
                still.append(item)
        self.waiting.items = still
        if len(still) < len(kept):
            return
        for _, run, sub in kept:
            run.error = run.error or f"placer {self.placer.name} left {sub.kind.name} waiting on idle node"
            self._finish_task(run)

    def start(self, run: _Run, sub: Subtask, unit: int) -> bool:
        """Run ``sub`` on ``unit`` (a dispatch hook); False if no lane of the unit is free."""
        v, n, now = self.view, self.node, self.clock()
        self.util.advance_node(n, now)
        if unit == CPU:
            if not self.free_cores:
                return False
            lane = self.free_cores.pop(0)
            v.cpu_started(n)
        else:
            i = self.pools[unit].acquire()
            if i is None:
                return False
            lane = i
            self._gpu_tick(unit, now)
            v.gpu_started(n, unit, sub.mem_mb, sub.kind.name)
        if math.isnan(run.first_start_s):
            run.first_start_s = now
        job = _Job(run, sub, unit, lane, now)
        self._on_lane[(unit, lane)] = job
        if unit != CPU:
            job.mark = self.corunners.started(unit, sub.kind.name, now)
            self.pools[unit].lanes[lane].submit(
                lambda: self._execute(job), lambda r, e: self._finished(job, r, e)
            )
        else:
            self.cores[lane].submit(lambda: self._execute(job), lambda r, e: self._finished(job, r, e))
        return True

    # ---- execution (lane thread, lock not held) ------------------------------------------
    def _execute(self, job: _Job) -> tuple[dict[str, Any], float]:
        plan = job.run.plans[job.sub.index]
        if job.unit == CPU:
            inputs = {name: self.residency.on_host(job.run.arrays, name) for name in plan.reads}
            t0 = time.perf_counter()
            out = plan.spec.fn(np, inputs, plan.params)
            stretch = self._core_stretch(job.sub)
            if stretch > 1.0:
                time.sleep((time.perf_counter() - t0) * (stretch - 1.0))
            if failpoints.chance("lane-dies"):
                raise failpoints.LaneKilled(f"{self.nspec.name} core {job.lane}")
            return out, time.perf_counter() - t0
        g = job.unit
        stream = self.pools[g].streams[job.lane]
        ta = job.run.arrays
        inputs = {name: self.residency.on_device(ta, name, g, stream, job.pinned) for name in plan.reads}
        out, secs = stream.run(plan.spec.fn, inputs, plan.params)
        if failpoints.chance("lane-dies"):
            raise failpoints.LaneKilled(f"{self.nspec.name} gpu{g} stream {job.lane}")
        return out, secs

    def _core_stretch(self, sub: Subtask) -> float:
        """How much longer a core takes than the native-speed emulated GPU (1 when not emulated)."""
        if self._native_gpu is None or sub.kind.device is not Where.BOTH:
            return 1.0
        tflops, bw = self._native_gpu
        gpu_s = subtask_gpu_seconds(sub, tflops, bw)
        cpu_s = subtask_cpu_seconds(sub, float(self.view.cpu_gflops[self.node]))
        return cpu_s / gpu_s if gpu_s > 0 else 1.0

    # ---- completion (lane thread) ---------------------------------------------------------
    def _finished(
        self, job: _Job, result: tuple[dict[str, Any], float] | None, err: BaseException | None
    ) -> None:
        with self.lock:
            self._on_lane.pop((job.unit, job.lane), None)
            try:
                self._complete(job, result, err)
            except Exception:  # never lose a task to a bookkeeping bug: fail it loudly instead
                job.run.error = job.run.error or traceback.format_exc()
                self._finish_task(job.run)
            self._drain()

    def _complete(
        self, job: _Job, result: tuple[dict[str, Any], float] | None, err: BaseException | None
    ) -> None:
        v, n, sub, run = self.view, self.node, job.sub, job.run
        for data_id in job.pinned:
            self.memory[job.unit].unpin(data_id)
        now = self.clock()
        self.util.advance_node(n, now)
        if not self.alive:
            return
        if self.runs.get(run.task.id) is not run:  # the task already failed: only free the unit
            self._release_unit(job, measured=0.0)
            return
        if err is not None or result is None:
            self._release_unit(job, measured=0.0)
            if isinstance(err, DeviceFull):
                self._hand_back(job)
                return
            run.error = run.error or ("".join(traceback.format_exception(err)) if err else "no result")
            self._finish_task(run)
            return
        out, secs = result
        self._release_unit(job, measured=max(secs, 1e-9))
        self._store_outputs(job, out)
        run.units[sub.index] = job.unit
        v.backlog_gpu_s[n] -= run.gpu_nominal[sub.index]
        v.backlog_cpu_s[n] -= run.cpu_nominal[sub.index]
        self.subtasks_done += 1
        if dispatch.subtask_done(run, sub, self._ready):
            self._finish_task(run)

    def _release_unit(self, job: _Job, measured: float) -> None:
        """Free the job's unit and account its measured seconds (0: it did not run to the end)."""
        v, n, sub = self.view, self.node, job.sub
        if job.unit == CPU:
            nominal = job.run.cpu_nominal[sub.index]
            v.cpu_finished(n, self._relative(CPU_UNIT, sub, nominal, measured), 1.0)
            self.free_cores.append(job.lane)
            return
        g = job.unit
        f = v.fast
        self._gpu_tick(g, self.clock())
        nominal = subtask_gpu_seconds(sub, f.gpu_tflops[n][g], f.gpu_bw[n][g])
        speed = nominal / measured if measured > 0 else 0.0
        v.gpu_finished(n, g, sub.mem_mb, sub.kind.name, self._relative(g, sub, nominal, measured), 1.0)
        # Stream feedback compares GPUs, so their work is counted in one unit: seconds on the
        # node's mean datasheet GPU (each GPU's own datasheet would make every GPU look alike).
        self.pools[g].release(job.lane, job.run.gpu_nominal[sub.index] if measured > 0 else 0.0)
        shares = self.corunners.finished(g, sub.kind.name, job.mark, self.clock()) if job.mark else {}
        if self.observe is not None and speed > 0:
            model = self.nspec.gpus[g].model
            self.observe(model, sub.kind.name, tuple(shares), speed, tuple(shares.values()))
        self._sync_memory(g)

    def _relative(self, unit: int, sub: Subtask, nominal: float, measured: float) -> float:
        """The unit's speed relative to the cluster after this run (0: no sample, the view keeps
        its value). Already smoothed, so the view takes it as it is (EMA weight 1)."""
        if measured <= 0 or nominal <= 0:
            return 0.0
        return self.speeds.record(self.node, unit, sub.kind.name, nominal / measured)

    def _gpu_tick(self, g: int, now: float) -> None:
        """Integrate the time GPU ``g`` had at least one subtask running."""
        if self.view.fast.gpu_running[self.node][g] > 0:
            self.gpu_busy_s[g] += now - self._gpu_mark[g]
        self._gpu_mark[g] = now

    def gpu_util(self) -> list[float]:
        """Fraction of the run each GPU had at least one subtask running."""
        with self.lock:
            now = self.clock()
            for g in range(len(self.devices)):
                self._gpu_tick(g, now)
            return [b / now if now > 0 else 0.0 for b in self.gpu_busy_s]

    def device_reports(self) -> list[DeviceReport]:
        """Per-GPU stream count, utilisation and cache counters of this node."""
        util = self.gpu_util()
        out = []
        for g, mem in enumerate(self.memory):
            st = mem.stats()
            out.append(
                DeviceReport(
                    self.nspec.name,
                    g,
                    self.nspec.gpus[g].model,
                    self.pools[g].active,
                    util[g],
                    st.hits,
                    st.misses,
                    st.evictions,
                    st.h2d_bytes_loaded,
                    st.h2d_bytes_saved,
                )
            )
        return out

    def _store_outputs(self, job: _Job, out: dict[str, Any]) -> None:
        self.residency.keep_outputs(job.run.arrays, job.unit, out)
        if job.unit != CPU:
            self._sync_memory(job.unit)

    def _hand_back(self, job: _Job) -> None:
        """A device could not hold the job's data: place the subtask again elsewhere."""
        run, sub = job.run, job.sub
        run.handbacks += 1
        if run.handbacks > GIVE_UP_HANDBACKS:
            # Stage 1 checks memory, so only data far larger than measured gets here: report it.
            where = f"any GPU of {self.nspec.name}"
            run.error = f"{sub.kind.name} did not fit on {where} in {run.handbacks} tries"
            self._finish_task(run)
            return
        avoid = run.avoid.setdefault(sub.index, set())
        avoid.add(job.unit)
        if run.handbacks > MAX_HANDBACKS or (
            sub.kind.device is Where.GPU and len(avoid) >= len(self.devices)
        ):
            avoid.clear()  # every device was full once: wait for memory to free instead of spinning
        self._ready(run, sub)

    def _spill_outputs(self) -> bool:
        """Move every task output held on a GPU of this node to the host; True if any moved."""
        moved = self.residency.spill(run.arrays for run in self.runs.values())
        for g in range(len(self.devices)):
            self._sync_memory(g)
        return moved

    def _sync_memory(self, g: int) -> None:
        self.view.set_gpu_mem_used(self.node, g, self.residency.held_mb(g))

    def _finish_task(self, run: _Run) -> None:
        v, n = self.view, self.node
        if self.runs.pop(run.task.id, None) is None:
            return
        v.tasks_on_node[n] -= 1
        self.waiting.drop(run)
        outputs = self.residency.outputs(run.arrays) if run.error is None else {}
        self.residency.release(run.arrays)
        for g in range(len(self.devices)):
            self._sync_memory(g)
        outcome = TaskOutcome(
            run.task,
            n,
            run.assigned_s,
            run.first_start_s,
            self.clock(),
            outputs,
            run.error,
            run.handbacks,
            run.units,
        )
        run.on_done(outcome)

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
                self._finish_task(run)
            return min(len(idle), max(limit, 0))

    # ---- stream feedback and teardown -----------------------------------------------------
    def adjust_streams(self) -> list[int]:
        """One feedback step: move at most one stream between this node's GPUs."""
        with self.lock:
            stats = [p.take_stats() for p in self.pools]
            self.stream_history.append((self.clock(), [s.active for s in stats], [s.idle for s in stats]))
            if self._cooldown:
                # The interval after a move still shows the donor finishing on its lost stream and
                # the receiver not yet using its new one: judging it would undo the move.
                self._cooldown = False
                return [p.active for p in self.pools]
            counts = self.feedback.adjust(stats)
            self._cooldown = counts != [s.active for s in stats]
            for g, c in enumerate(counts):
                if c != self.pools[g].active:
                    self.pools[g].resize(c)
                    self.view.set_streams(self.node, g, c)
            self._drain()
            return counts

    def revive_lanes(self) -> int:
        """Watchdog: start again every lane whose thread died, and run the subtask it held again
        (placed anew, as a subtask a full device handed back). How many subtasks it re-placed."""
        with self.lock:
            if not self.alive:
                return 0
            dead = [(key, job) for key, job in self._on_lane.items() if not self._lane(*key).alive]
            for key, job in dead:
                del self._on_lane[key]
                for data_id in job.pinned:
                    self.memory[job.unit].unpin(data_id)
                self._release_unit(job, measured=0.0)
                if self.runs.get(job.run.task.id) is job.run:
                    self._hand_back(job)
            revived = [lane.revive() for lane in (*self.cores, *(x for p in self.pools for x in p.lanes))]
            self.lanes_revived += sum(revived)
            if dead:
                self._drain()
            return len(dead)

    def _lane(self, unit: int, lane: int) -> Lane:
        return self.cores[lane] if unit == CPU else self.pools[unit].lanes[lane]

    def shutdown(self) -> list[_Run]:
        """Stop taking work; return the tasks that had not finished (for rescheduling)."""
        with self.lock:
            self.alive = False
            left = list(self.runs.values())
            self.runs.clear()
            self.waiting.clear()
        for p in self.pools:
            p.close()
        for lane in self.cores:
            lane.stop(wait=False)
        for d in self.devices:
            d.close()  # CuPy: returns the pool's free blocks; NumPy: releases the BLAS limit
        return left
