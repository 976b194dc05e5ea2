"""The world protocol: what the simulator and the live runtime both are to a scheduler.

A world runs one stream of tasks on one cluster. Stage 1 is driven from outside, one decision at
a time (:meth:`World.next_decision`, :meth:`World.mask`, :meth:`World.assign`); stage 2 runs
inside the world, on every node, with the placer the world was given once, at construction.
``envs.simulator.Simulator`` implements it in simulated time, ``runtime.cluster.live.LiveSession`` in
wall-clock time on real devices. The decision loop (:func:`drive`), the placer hand-over
(:func:`hand_over`) and the Gymnasium environment (``rlsched.scheduling_env``) are written once,
against this protocol.
"""

from __future__ import annotations

import contextlib
import copy
import time
from collections.abc import Callable, Hashable
from typing import Protocol, runtime_checkable

import numpy as np

from rlsched.interference.calibration import CalibratingPlacer, ObservingPlacer, Survey, run_survey
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.metrics import RunMetrics
from rlsched.tasks import Task
from rlsched.view import ClusterView
from rlsched.view_guard import guarded_view, is_ours

#: ``(device model, kind, co-runner kinds, measured speed[, shares])`` of a finished GPU subtask
#: (:meth:`rlsched.interference.calibration.ObservingPlacer.observe`).
Observe = Callable[..., None]


class Selector(Protocol):
    """What the decision loop needs of stage 1 (``rlsched.scheduler.NodeSelector``)."""

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int: ...


@runtime_checkable
class Decisions(Protocol):
    """What the stage-1 loop (:func:`drive`) steps: tasks that need a node, one at a time.

    Every :class:`World` is one; so is the service's durable queue
    (``runtime.service.queue_world.QueueWorld``), which never finishes.
    """

    @property
    def view(self) -> ClusterView:
        """The observable cluster state (read it inside :meth:`lock`)."""
        ...

    def next_decision(self) -> Task | None:
        """Wait until a task needs a node and return it (the view then shows that moment);
        ``None`` once every task has been given one."""
        ...

    def mask(self, task: Task) -> np.ndarray:
        """(N,) bool: the live nodes that could run ``task`` now."""
        ...

    def assign(self, task: Task, node: int) -> None:
        """Send the task :meth:`next_decision` returned to ``node``.

        :raises ValueError: if ``task`` is not the one awaiting a decision or ``node`` cannot run it.
        """
        ...

    def lock(self) -> contextlib.AbstractContextManager[object]:
        """Held while a policy reads the view (live agents update it from their threads)."""
        ...


@runtime_checkable
class World(Decisions, Protocol):
    """A cluster running one task stream; stage 1 decided from outside, stage 2 inside."""

    @property
    def now(self) -> float:
        """Seconds since the run started (simulated or wall clock)."""
        ...

    @property
    def completed(self) -> int:
        """Tasks completed so far."""
        ...

    def in_system_area(self) -> float:
        """Task-seconds spent in the system so far (arrived, not finished)."""
        ...

    def finish(self) -> RunMetrics:
        """Run everything assigned to the end and return the run's metrics (tasks never given a
        node are not waited for)."""
        ...


# Surveys by (instrument key, request): profiling a cluster is a one-off, so runs over many seeds
# of one scenario share it (on the live runtime a survey takes seconds of real kernels). Plain
# data only; each placer gets its own copy.
_SURVEYS: dict[Hashable, Survey] = {}


def hand_over(placer: object, instrument: ProfilingInstrument | None) -> Observe | None:
    """Prepare a placer for a world: when it calibrates, run the survey it asks for on the world's
    instrument and hand it the data; return its ``observe`` hook (the world calls it with
    finished GPU subtasks), if any.

    The placer never holds the instrument: what it is handed is the measurements of its one
    budgeted survey (:class:`rlsched.interference.calibration.Survey`), so it can neither measure
    more than it asked for nor reach what the instrument measures (the simulator's ground truth).

    :param placer: the world's stage-2 policy.
    :param instrument: the world's profiling instrument, or ``None`` where it has none.
    :raises TypeError: a placer with a ``calibrate`` hook but no ``survey_request`` (the hook of
        earlier releases, which took the instrument itself).
    """
    if callable(getattr(placer, "calibrate", None)) and not isinstance(placer, CalibratingPlacer):
        # A placer written for the old hook (calibrate(instrument)) would run uncalibrated.
        name = getattr(placer, "name", type(placer).__name__)
        raise TypeError(
            f"placer {name}: has calibrate() but no survey_request(); a calibrating placer states "
            "the survey it wants (survey_request() -> SurveyRequest) and is handed its data "
            "(calibrate(survey: Survey)), never the instrument"
        )
    if instrument is not None and isinstance(placer, CalibratingPlacer):
        request = placer.survey_request()
        key = (instrument.key(), request)
        survey = _SURVEYS.get(key)
        if survey is None:
            survey = _SURVEYS[key] = run_survey(instrument, request)
        placer.calibrate(copy.deepcopy(survey))
    return placer.observe if isinstance(placer, ObservingPlacer) else None


def take_decision(pending: list[int], task: Task, node: int, mask: np.ndarray) -> None:
    """Check a stage-1 decision against the world's queue of tasks awaiting one, and dequeue it
    (both worlds' :meth:`World.assign` start here).

    :raises ValueError: if ``task`` is not the one awaiting a decision or ``node`` cannot run it.
    """
    if not pending or pending[0] != task.id:
        raise ValueError(f"task {task.id} is not the task awaiting a decision")
    if not (0 <= node < len(mask)) or not mask[node]:
        raise ValueError(f"node {node} cannot run task {task.id}")
    pending.pop(0)


def _is_index(node: object) -> bool:
    """An integer that is not a bool (``True`` indexed the mask as a boolean array)."""
    return isinstance(node, (int, np.integer)) and not isinstance(node, (bool, np.bool_))


def drive(
    world: Decisions,
    selector: Selector,
    on_decision: Callable[[], object] | None = None,
    on_select: Callable[[Task, float], object] | None = None,
) -> float:
    """The stage-1 loop: every task the world presents goes to the node ``selector`` picks.

    The simulator, ``run_live`` and the service (``rlsched serve``) all decide here.

    :param world: the simulator, a live session or the service's queue.
    :param selector: stage 1.
    :param on_decision: called after each decision (progress bars, time limits).
    :param on_select: called with each task and the seconds its ``select`` took (metrics).
    :return: seconds spent in ``selector.select``.
    """
    select = selector.select
    ours = is_ours(selector)  # another's gets the view read-only (rlsched.view_guard)
    decide_s = 0.0
    while (task := world.next_decision()) is not None:
        mask = world.mask(task)
        with world.lock():
            view = world.view if ours else guarded_view(world.view, selector)
            d0 = time.perf_counter()
            node = select(task, view, mask)
            took = time.perf_counter() - d0
        if not (_is_index(node) and 0 <= node < len(mask) and mask[node]):
            raise ValueError(
                f"selector {getattr(selector, 'name', type(selector).__name__)!r}: select returned {node!r} "
                f"for task {task.id}, expected "
                f"the index of a node its mask allows (0..{len(mask) - 1})"
            )
        decide_s += took
        if on_select is not None:
            on_select(task, took)
        world.assign(task, node)
        if on_decision is not None:
            on_decision()
    return decide_s
