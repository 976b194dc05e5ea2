"""A node agent's records of its work: a task on the node (:class:`TaskRun`), a subtask on one of
its units (:class:`SubtaskJob`), and the nominal seconds a task adds to the node's backlog."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from rlsched.scheduler import CPU
from rlsched.tasks import Subtask, Task
from runtime.cluster.backend import TaskOutcome
from runtime.cluster.corunners import Mark
from runtime.kernels import StagePlan, TaskData, stage_plan
from runtime.mlsm.residency import TaskArrays


@dataclass
class TaskRun:
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

    @classmethod
    def assigned(
        cls, task: Task, data: TaskData, on_done: Callable[[TaskOutcome], None], now: float
    ) -> TaskRun:
        """A task just assigned to the node: its stage plans, every subtask waiting for its
        parents and on no unit yet."""
        return cls(
            task,
            data,
            stage_plan(task.app),
            on_done,
            now,
            [len(s.parents) for s in task.graph.subtasks],
            TaskArrays(task.id, data),
            units=[CPU - 1] * len(task.graph),
        )

    def outcome(self, node: int, done_s: float, outputs: dict[str, np.ndarray]) -> TaskOutcome:
        """The task's outcome on ``node``, ended at ``done_s`` with ``outputs``."""
        return TaskOutcome(
            self.task,
            node,
            self.assigned_s,
            self.first_start_s,
            done_s,
            outputs,
            self.error,
            self.handbacks,
            self.units,
        )


@dataclass
class SubtaskJob:
    """One subtask running on a unit."""

    run: TaskRun
    sub: Subtask
    unit: int
    lane: int
    t_start: float
    mark: Mark | None = None  # GPU jobs: where their co-runners are counted from
    pinned: list[str] = field(default_factory=list)
    #: GPU jobs: device bytes held for inputs not yet resident (given back as they load).
    held_inputs: int = 0
    #: GPU jobs: device bytes held for what the kernel allocates while it runs.
    held_working: int = 0
