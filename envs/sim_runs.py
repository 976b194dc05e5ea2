"""What the simulator keeps of a task on a node and of a subtask running on a unit."""

from __future__ import annotations

from dataclasses import dataclass, field

from rlsched.tasks import Subtask, Task


@dataclass(slots=True, eq=False)
class TaskRun:
    """A task while it is on a node."""

    task: Task
    node: int
    epoch: int
    deps_left: list[int]
    done: int = 0
    started: list[bool] = field(default_factory=list)
    gpu_nominal: list[float] = field(default_factory=list)
    cpu_nominal: list[float] = field(default_factory=list)
    withdrawn: bool = False  # moved off its node before it started (rebalancing)


@dataclass(slots=True, eq=False)
class Run:
    """A subtask executing on a unit."""

    tr: TaskRun
    sub: Subtask
    gpu: int  # GPU index or CPU
    solo_s: float
    remaining: float = 1.0  # fraction of the work left
    rate: float = 0.0  # fraction per second
    t_last: float = 0.0
    t_start: float = 0.0
    version: int = 0
    partners: tuple[str, ...] = ()  # co-runner kinds at start (kept only for observing placers)
