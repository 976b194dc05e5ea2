"""Running subtasks on a node's lanes: one thread per CPU core, one per GPU stream.

:class:`SubtaskExecutor` hands out free lanes, runs a subtask's kernel on its lane (its inputs
made resident through the node's :class:`~runtime.mlsm.residency.Residency`, outside the agent's
lock), and keeps the job each busy lane runs, so that a lane whose thread died is found and its
job placed again (:meth:`SubtaskExecutor.dead_jobs`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from rlsched.estimates import subtask_cpu_seconds, subtask_gpu_seconds
from rlsched.hardware import gpu_model
from rlsched.scheduler import CPU
from rlsched.tasks import Device as Where
from rlsched.tasks import Subtask
from rlsched.view import ClusterView
from runtime import failpoints
from runtime.backends.base import DeviceFull
from runtime.cluster.runs import SubtaskJob, TaskRun
from runtime.kernels.working_memory import working_bytes
from runtime.mlsm.lanes import Lane
from runtime.mlsm.residency import Residency
from runtime.mlsm.streams import StreamPool

#: A kernel's outputs and its measured seconds (``None`` when the lane gave no result).
Result = tuple[dict[str, Any], float]
#: Called on the lane's thread when a job ends: ``(job, result, error)``.
Finished = Callable[[SubtaskJob, Result | None, BaseException | None], None]


class SubtaskExecutor:
    """The lanes of one node and what runs on them.

    Every method but :meth:`execute` is called with the agent's lock held.

    :param name: the node's name (lane thread names, failpoint messages).
    :param node: the node's row in ``view``.
    :param view: the cluster view (the node's CPU speed, for emulated core speed).
    :param residency: makes a subtask's inputs resident where it runs.
    :param pools: the stream pool of each GPU of the node.
    :param cpu_cores: how many CPU cores the node has (one lane each).
    :param native_model: the GPU model emulated at native speed when cores are stretched to match
        it (NumPy backend with ``emulate_core_speed``), else ``None``.
    """

    def __init__(
        self,
        name: str,
        node: int,
        view: ClusterView,
        residency: Residency,
        pools: list[StreamPool],
        cpu_cores: int,
        native_model: str | None = None,
    ) -> None:
        self.name, self.node, self.view = name, node, view
        self.residency = residency
        self.pools = pools
        self.cores = [Lane(f"{name}-c{i}") for i in range(cpu_cores)]
        self.free_cores = list(range(cpu_cores))
        g = gpu_model(native_model) if native_model is not None else None
        #: (TFLOP/s, GB/s) of the GPU emulated at native speed, when cores are stretched to match.
        self._native_gpu = None if g is None else (g.fp32_tflops, g.mem_bw_gbs)
        #: The job each busy lane runs, by (unit, lane): how a lane that died is found.
        self._on_lane: dict[tuple[int, int], SubtaskJob] = {}

    @property
    def n_gpus(self) -> int:
        """GPUs of the node (one stream pool each)."""
        return len(self.pools)

    def acquire(self, unit: int) -> int | None:
        """A free lane of ``unit`` (:data:`CPU` or a GPU index), taken; ``None`` if none is free."""
        if unit == CPU:
            return self.free_cores.pop(0) if self.free_cores else None
        return self.pools[unit].acquire()

    def hold(self, run: TaskRun, sub: Subtask, unit: int) -> tuple[int, int] | None:
        """Take the device memory ``sub`` needs on GPU ``unit`` before it starts: its inputs not
        yet resident there and what its kernel allocates while it runs (its kind's measured peak,
        :mod:`runtime.kernels.working_memory`), evicting unused cached inputs. A real GPU's pool
        refuses a kernel's temporaries when cached data fill it, whatever MLSM's accounting says,
        so they are accounted before launch, where a refusal only means "not now".

        :return: (input bytes, working bytes) held, ``(0, 0)`` on a core; ``None`` when they do
            not fit even with every unused input evicted (nothing is taken then).
        """
        if unit == CPU:
            return 0, 0
        plan = run.plans[sub.index]
        total, pending = self.residency.pending_bytes(run.arrays, plan.reads, unit)
        working = working_bytes(plan.spec.kind, total)
        try:
            self.residency.memory[unit].reserve(pending + working)
        except DeviceFull:
            return None
        return pending, working

    def unhold(self, unit: int, held: tuple[int, int]) -> None:
        """Give back what :meth:`hold` took for a subtask that did not start."""
        nbytes = held[0] + held[1]
        if unit != CPU and nbytes:
            self.residency.memory[unit].release(nbytes)

    def release(self, job: SubtaskJob, work_s: float) -> None:
        """Give the job's lane back (``work_s``: GPU work done on it, for stream feedback; a core
        ignores it)."""
        if job.unit == CPU:
            self.free_cores.append(job.lane)
        else:
            self.pools[job.unit].release(job.lane, work_s)

    def launch(self, job: SubtaskJob, finished: Finished) -> None:
        """Run ``job`` on its lane; ``finished`` is called on the lane's thread when it ends."""
        self._on_lane[(job.unit, job.lane)] = job
        lane = self._lane(job.unit, job.lane)
        lane.submit(lambda: self.execute(job), lambda r, e: finished(job, r, e))

    def leave(self, job: SubtaskJob) -> None:
        """The job left its lane (it ended, or its lane died): its inputs are no longer pinned."""
        self._on_lane.pop((job.unit, job.lane), None)
        if job.unit == CPU:
            return
        mem = self.residency.memory[job.unit]
        for data_id in job.pinned:
            mem.unpin(data_id)
        job.pinned.clear()
        held, job.held_inputs, job.held_working = job.held_inputs + job.held_working, 0, 0
        if held:
            mem.release(held)

    def dead_jobs(self) -> list[SubtaskJob]:
        """The jobs of lanes whose thread died, taken off them (:meth:`leave`)."""
        dead = [job for key, job in self._on_lane.items() if not self._lane(*key).alive]
        for job in dead:
            self.leave(job)
        return dead

    def revive(self) -> int:
        """Start again every lane whose thread died; how many."""
        return sum(lane.revive() for lane in (*self.cores, *(x for p in self.pools for x in p.lanes)))

    def stop(self) -> None:
        """Stop every lane (GPU stream pools closed, core threads told to end)."""
        for p in self.pools:
            p.close()
        for lane in self.cores:
            lane.stop(wait=False)

    def _lane(self, unit: int, lane: int) -> Lane:
        return self.cores[lane] if unit == CPU else self.pools[unit].lanes[lane]

    # ---- the lane's thread, lock not held ----------------------------------------------------
    def execute(self, job: SubtaskJob) -> Result:
        """Run the job's kernel on its unit; its outputs and measured seconds."""
        plan = job.run.plans[job.sub.index]
        if job.unit == CPU:
            inputs = {name: self.residency.on_host(job.run.arrays, name) for name in plan.reads}
            t0 = time.perf_counter()
            out = plan.spec.fn(np, inputs, plan.params)
            stretch = self.core_stretch(job.sub)
            if stretch > 1.0:
                time.sleep((time.perf_counter() - t0) * (stretch - 1.0))
            if failpoints.chance("lane-dies"):
                raise failpoints.LaneKilled(f"{self.name} core {job.lane}")
            return out, time.perf_counter() - t0
        g = job.unit
        stream = self.pools[g].streams[job.lane]
        ta = job.run.arrays
        # The inputs' share of what start() held becomes their own accounting as they load.
        placeholder, job.held_inputs = job.held_inputs, 0
        if placeholder:
            self.residency.memory[g].release(placeholder)
        inputs = {name: self.residency.on_device(ta, name, g, stream, job.pinned) for name in plan.reads}
        out, secs = stream.run(plan.spec.fn, inputs, plan.params)
        if failpoints.chance("lane-dies"):
            raise failpoints.LaneKilled(f"{self.name} gpu{g} stream {job.lane}")
        return out, secs

    def core_stretch(self, sub: Subtask) -> float:
        """How much longer a core takes than the native-speed emulated GPU (1 when not emulated)."""
        if self._native_gpu is None or sub.kind.device is not Where.BOTH:
            return 1.0
        tflops, bw = self._native_gpu
        gpu_s = subtask_gpu_seconds(sub, tflops, bw)
        cpu_s = subtask_cpu_seconds(sub, float(self.view.cpu_gflops[self.node]))
        return cpu_s / gpu_s if gpu_s > 0 else 1.0
