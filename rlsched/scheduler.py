"""Scheduler protocols and the two-stage scheduler that composes them.

Stage 1 (``NodeSelector``) picks a node for each arriving task; stage 2 (``SubtaskPlacer``) picks
a computing unit on that node for each ready subtask. Both only read a :class:`ClusterView`, so
the same policy object runs against the simulator and the live runtime.

The one exception is declared, not duck-typed: a clairvoyant *reference* (the ``oracle``
selector, a benchmark's clairvoyant placer) reads the simulator's ground truth, says so with
``clairvoyant = True`` (:class:`Clairvoyant`), and is the only kind of policy the simulator hands
itself to; its runs are marked clairvoyant in every report (``RunMetrics.clairvoyant``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from rlsched.tasks import Subtask, Task
from rlsched.view import ClusterView

#: Unit code a placer returns for "any free CPU core of the node" (cores are interchangeable).
CPU = -1


@runtime_checkable
class NodeSelector(Protocol):
    """Stage 1: choose a node for a task."""

    name: str

    def reset(self, view: ClusterView, seed: int) -> None:
        """Forget all state; called before each run with the run's seed."""

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        """Return the index of a node with ``mask[index]`` true.

        :param task: the task to place.
        :param view: the observable cluster state.
        :param mask: (N,) bool, nodes that could run the task; at least one is true.
        """
        ...


@runtime_checkable
class SubtaskPlacer(Protocol):
    """Stage 2: choose a unit on the node for a ready subtask."""

    name: str

    def reset(self, view: ClusterView, seed: int) -> None:
        """Forget all state; called before each run."""

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        """Return a GPU index with a free stream and enough free memory, :data:`CPU` when a core
        is free, or ``None`` to keep the subtask waiting.

        :param task: the subtask's task.
        :param sub: the ready subtask.
        :param node: the node the task runs on.
        :param view: the observable cluster state.
        """
        ...


@runtime_checkable
class Clairvoyant(Protocol):
    """A reference policy that reads the simulator's ground truth (ARCHITECTURE.md section 4).

    It declares so with the class attribute ``clairvoyant = True``; the simulator then hands it
    itself through :meth:`bind_simulator` before the run, and the run's metrics say
    ``clairvoyant``. It cannot run in the live world (nothing there to bind).
    """

    clairvoyant: ClassVar[bool]

    def bind_simulator(self, sim: Any) -> None:
        """Receive the simulator whose ground truth it reads (``envs.simulator.Simulator``)."""
        ...


def is_clairvoyant(policy: object) -> bool:
    """Whether ``policy`` declares itself a clairvoyant reference (``clairvoyant = True`` and a
    ``bind_simulator`` method); only such a policy is handed the simulator.

    :param policy: a selector or placer (or a class of one).
    """
    return getattr(policy, "clairvoyant", False) is True and callable(getattr(policy, "bind_simulator", None))


@dataclass
class TwoStageScheduler:
    """A node selector paired with a subtask placer."""

    selector: NodeSelector
    placer: SubtaskPlacer

    @property
    def name(self) -> str:
        return f"{self.selector.name}+{self.placer.name}"

    def reset(self, view: ClusterView, seed: int) -> None:
        """Reset both stages (the placer on a derived seed so the two draw independently); a
        stage from outside rlsched is handed the view read-only (:mod:`rlsched.view_guard`)."""
        from rlsched.view_guard import guarded_view

        self.selector.reset(guarded_view(view, self.selector), seed)
        self.placer.reset(guarded_view(view, self.placer), seed + 7919)
