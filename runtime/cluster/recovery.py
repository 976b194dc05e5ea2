"""What a node agent does when device memory runs out: a subtask a full device handed back is
placed again away from that device, and a node where subtasks wait while nothing runs frees
memory before it fails anything.

A subtask is never dropped: it is handed back (:meth:`MemoryRecovery.hand_back`) and placed
again; only after :data:`GIVE_UP_HANDBACKS` tries, or when an idle node has nothing left to free,
does its task fail, with an error that names the reason.
"""

from __future__ import annotations

from typing import Protocol

from rlsched import dispatch
from rlsched.scheduler import CPU, SubtaskPlacer
from rlsched.tasks import Device as Where
from rlsched.tasks import Subtask
from rlsched.view import ClusterView
from runtime.cluster.config import LiveNode
from runtime.cluster.executor import SubtaskExecutor
from runtime.cluster.runs import SubtaskJob, TaskRun
from runtime.cluster.unit_accounting import UnitAccounting
from runtime.mlsm.residency import Residency

#: Times a subtask may be handed back by full devices before it waits for memory to free.
MAX_HANDBACKS = 8
#: Hand-backs after which a task fails with an error naming the subtask (never silently lost).
GIVE_UP_HANDBACKS = 256


class RecoveryHost(Protocol):
    """The node agent as memory recovery sees it (its lock held on every call)."""

    node: int
    nspec: LiveNode
    view: ClusterView
    placer: SubtaskPlacer
    waiting: dispatch.ReadyQueue
    runs: dict[int, TaskRun]
    residency: Residency
    executor: SubtaskExecutor
    units: UnitAccounting

    def start(self, run: TaskRun, sub: Subtask, unit: int) -> bool: ...

    def drain(self) -> None: ...

    def ready(self, run: TaskRun, sub: Subtask) -> None: ...

    def finish_task(self, run: TaskRun) -> None: ...


class MemoryRecovery:
    """Hand-back, redirection and unsticking for one node agent.

    :param host: the agent.
    """

    def __init__(self, host: RecoveryHost) -> None:
        self.host = host

    def redirect(self, run: TaskRun, sub: Subtask, unit: int, cpu_free: bool) -> int | None:
        """Steer away from a device that handed this subtask back for lack of memory (the
        dispatch ``redirect`` hook)."""
        if unit != CPU and unit in run.avoid.get(sub.index, ()):
            return CPU if (sub.kind.device is not Where.GPU and cpu_free) else None
        return unit

    def hand_back(self, job: SubtaskJob) -> None:
        """A device could not hold the job's data: place the subtask again elsewhere."""
        h, run, sub = self.host, job.run, job.sub
        run.handbacks += 1
        if run.handbacks > GIVE_UP_HANDBACKS:
            # Stage 1 checks memory, so only data far larger than measured gets here: report it.
            where = f"any GPU of {h.nspec.name}"
            run.error = f"{sub.kind.name} did not fit on {where} in {run.handbacks} tries"
            h.finish_task(run)
            return
        avoid = run.avoid.setdefault(sub.index, set())
        avoid.add(job.unit)
        if run.handbacks > MAX_HANDBACKS or (
            sub.kind.device is Where.GPU and len(avoid) >= h.executor.n_gpus
        ):
            avoid.clear()  # every device was full once: wait for memory to free instead of spinning
        h.ready(run, sub)

    def unstick(self, kept: list[dispatch.Item]) -> None:
        """Nothing runs, so no event would offer the waiting subtasks again. In order: forget
        devices that were full (they are idle now); spill the outputs tasks hold on the GPUs to
        the host (placers wait for memory that nothing running would free); start subtasks that
        may use a core on one; only then fail what is left, with the reason."""
        h = self.host
        if any(run.avoid for _, run, _ in kept):
            for _, run, _ in kept:
                run.avoid.clear()
            h.drain()
            return
        if self.spill_outputs():
            h.drain()
            return
        still = []
        for item in kept:
            _, run, sub = item
            if sub.kind.device is not Where.GPU and h.executor.free_cores and h.start(run, sub, CPU):
                h.view.ready_waiting[h.node] -= 1
            else:
                still.append(item)
        h.waiting.items = still
        if len(still) < len(kept):
            return
        for _, run, sub in kept:
            run.error = run.error or f"placer {h.placer.name} left {sub.kind.name} waiting on idle node"
            h.finish_task(run)

    def spill_outputs(self) -> bool:
        """Move every task output held on a GPU of the node to the host; True if any moved."""
        h = self.host
        moved = h.residency.spill(run.arrays for run in h.runs.values())
        for g in range(h.executor.n_gpus):
            h.units.sync_memory(g)
        return moved
