"""``auto``: a scheduler that recognises the case and runs the pair it wants.

It holds every candidate pair of its :class:`~rlsched.policies.recogniser.Recogniser`, runs the
recogniser's default pair for the first ``window`` tasks, then computes the case's features from
the fleet and those tasks (:mod:`rlsched.policies.case_features`), asks the recogniser, and from
then on hands each decision to the chosen pair. The candidates that are not running stay
calibrated and keep observing finished co-runs, so a placer that takes over has learnt from the
whole run. One decision per run (per service start): the pairs are judged on whole cases.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from rlsched.interference.calibration import CalibratingPlacer, ObservingPlacer, Survey, SurveyRequest
from rlsched.policies.case_features import case_features
from rlsched.policies.names import AUTO
from rlsched.policies.recogniser import Choice, Recogniser
from rlsched.policies.revisit import SecondChoice, SecondDecision
from rlsched.policies.run_features import RunWatch
from rlsched.scheduler import NodeSelector, SubtaskPlacer, TwoStageScheduler
from rlsched.tasks import Subtask, Task
from rlsched.view import ClusterView


@dataclass
class Switchboard:
    """The candidate pairs' policies and which pair is running (shared by the two stages).

    :param recogniser: what decides.
    :param selectors: a selector per selector name of the candidates.
    :param placers: a placer per placer name of the candidates.
    :param revisit: the second decision, or ``None`` (one decision per run).
    """

    recogniser: Recogniser
    selectors: dict[str, NodeSelector]
    placers: dict[str, SubtaskPlacer]
    revisit: SecondDecision | None = None
    #: The pair running now.
    current: str = ""
    #: The decision, once made.
    choice: Choice | None = None
    #: Tasks seen before it, in arrival order.
    seen: list[Task] = field(default_factory=list)
    #: Whether the decision was restored (a service restart) rather than made in this run.
    restored: bool = False
    #: The second decision, once made.
    second: SecondChoice | None = None
    #: Distinct tasks that arrived until the last decision.
    arrived: int = 0
    watch: RunWatch = field(default_factory=RunWatch)
    _ids: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.current = self.current or self.recogniser.default

    @property
    def selector(self) -> NodeSelector:
        return self.selectors[self.current.partition("+")[0]]

    @property
    def placer(self) -> SubtaskPlacer:
        return self.placers[self.current.partition("+")[2]]

    def reset(self) -> None:
        self.current, self.choice, self.restored = self.recogniser.default, None, False
        self.second, self.arrived = None, 0
        self.seen.clear()
        self._ids.clear()
        self.watch.reset()

    def restore(self, choice: Choice, second: SecondChoice | None = None) -> bool:
        """Take decisions made before (the service's checkpoint after a restart: the same
        cluster and stream of work, so no new window of tasks on the default pair).

        :param choice: the first decision; refused (``False``) when its pair is not a candidate.
        :param second: the second one, if it was made; ignored when this ``auto`` has no second
            decision or its pair is not a target. Without it, the second decision comes
            ``revisit.at`` arrivals into the run as before the restart (counting the window as seen).
        """
        if choice.pair not in self.recogniser.candidates:
            return False
        self.choice, self.current, self.restored = choice, choice.pair, True
        self.seen.clear()
        self.arrived = self.recogniser.window
        if second is not None and self.revisit is not None and self._runs(second.pair):
            self.second, self.current = second, second.pair
        return True

    def _runs(self, pair: str) -> bool:
        sel, _, plc = pair.partition("+")
        return sel in self.selectors and plc in self.placers

    @property
    def decided(self) -> bool:
        """Whether every decision of the run is made (nothing more to watch)."""
        return self.choice is not None and (self.revisit is None or self.second is not None)

    def note(self, task: Task, view: ClusterView) -> None:
        """Count an arriving task; decide once ``window`` tasks have arrived, and again (the
        revisit, where there is one) once ``revisit.at`` have."""
        if self.decided or task.id in self._ids:
            return
        self._ids.add(task.id)
        self.arrived += 1
        if self.choice is None:
            self.seen.append(task)
            if len(self.seen) >= self.recogniser.window:
                self.choice = self.recogniser.choose(case_features(view, self.seen))
                self.current = self.choice.pair
                self.seen.clear()  # kept only until the decision
            return
        assert self.revisit is not None
        self.watch.observe(view)
        if self.arrived >= self.revisit.at:
            self.second = self.revisit.decide(self.watch.features(view, self.arrived), self.current)
            self.current = self.second.pair
            self._ids.clear()


class AutoSelector:
    """Stage 1 of ``auto``: notes each task, then asks the running pair's selector."""

    name = AUTO

    def __init__(self, board: Switchboard) -> None:
        self.board = board

    def reset(self, view: ClusterView, seed: int) -> None:
        self.board.reset()
        for s in self.board.selectors.values():
            s.reset(view, seed)

    def select(self, task: Task, view: ClusterView, mask: np.ndarray) -> int:
        self.board.note(task, view)
        return self.board.selector.select(task, view, mask)


#: What the service reads and sets on an interference-aware placer (``runtime/service/learning.py``):
#: ``auto`` answers them from its primary candidate placer (the first that predicts interference).
_READ_FROM_PRIMARY = frozenset({"predictor", "extend", "updates", "seen", "predictions", "prediction_error"})
#: Set on every candidate that has them (each keeps its own copy of the model).
_SET_ON_ALL = frozenset({"online_batch", "updates", "fallback", "active"})


class AutoPlacer:
    """Stage 2 of ``auto``: the running pair's placer places; every candidate placer is
    calibrated from the one survey and observes every finished co-run.

    Where the candidates include interference-aware placers (``iawp``, ``iawp-pass``, ...), it
    also has their learning hooks, so the service calibrates, checkpoints and reports it as it
    does ``iawp``: it reads the model, error report and counters of the first of them (the
    primary), and an adopted model goes to each of them (a copy each: each keeps learning from
    the run's co-runs on its own).
    """

    name = AUTO

    def __init__(self, board: Switchboard) -> None:
        self.__dict__["board"] = board
        placers = list(board.placers.values())
        self.__dict__["_calibrating"] = [p for p in placers if isinstance(p, CalibratingPlacer)]
        self.__dict__["_observing"] = [p for p in placers if isinstance(p, ObservingPlacer)]
        self.__dict__["_learners"] = [p for p in placers if callable(getattr(p, "adopt", None))]
        self.survey_request()  # refuse candidates that want different surveys now

    def __getattr__(self, name: str) -> Any:
        learners = self.__dict__.get("_learners") or []
        if learners and (name in _READ_FROM_PRIMARY or name in _SET_ON_ALL):
            return getattr(learners[0], name)
        if learners and name == "adopt":
            return self._adopt
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setattr__(self, name: str, value: Any) -> None:
        learners = [p for p in self._learners if hasattr(p, name)]
        if name in _SET_ON_ALL and learners:
            for p in learners:
                setattr(p, name, value)
        else:
            super().__setattr__(name, value)

    def _adopt(self, predictor: Any, devices: list[str]) -> None:
        """Place with ``predictor`` from now on: the primary takes it, the others a copy each."""
        for i, p in enumerate(self._learners):
            p.adopt(predictor if i == 0 else copy.deepcopy(predictor), devices)

    def reset(self, view: ClusterView, seed: int) -> None:
        for p in self.board.placers.values():
            p.reset(view, seed)

    def survey_request(self) -> SurveyRequest:
        """The survey every calibrating candidate asks for.

        :raises ValueError: when they ask for different ones (one cluster has one survey).
        """
        requests = {p.survey_request() for p in self._calibrating}
        if len(requests) > 1:
            names = ", ".join(str(getattr(p, "name", p)) for p in self._calibrating)
            raise ValueError(f"auto: candidate placers {names} ask for different surveys; one run has one")
        return requests.pop() if requests else SurveyRequest(colocation_fraction=None, seed=0)

    def calibrate(self, survey: Survey) -> None:
        """Each calibrating candidate gets its own copy of the survey."""
        for p in self._calibrating:
            p.calibrate(copy.deepcopy(survey))

    def observe(
        self,
        device: str,
        kind: str,
        partners: tuple[str, ...],
        speed: float,
        shares: tuple[float, ...] | None = None,
    ) -> None:
        """Every observing candidate learns from the run, whichever pair placed it."""
        for p in self._observing:
            p.observe(device, kind, partners, speed, shares)

    def place(self, task: Task, sub: Subtask, node: int, view: ClusterView) -> int | None:
        return self.board.placer.place(task, sub, node, view)


class AutoScheduler(TwoStageScheduler):
    """The two stages of ``auto``: one scheduler, named ``auto`` (not ``auto+auto``)."""

    @property
    def name(self) -> str:
        return AUTO


def build_auto(
    recogniser: Recogniser,
    make_selector: Callable[[str], NodeSelector],
    make_placer: Callable[[str], SubtaskPlacer],
    revisit: SecondDecision | None = None,
) -> TwoStageScheduler:
    """The ``auto`` scheduler over ``recogniser``'s candidates (and ``revisit``'s targets).

    :param recogniser: the model that chooses.
    :param make_selector: builds a selector by name (the registry's, with its checkpoints).
    :param make_placer: builds a placer by name.
    :param revisit: the second decision, or ``None``.
    """
    pairs = [*recogniser.candidates, *(revisit.targets if revisit is not None else ())]
    sels = {c.partition("+")[0] for c in pairs}
    plcs = {c.partition("+")[2] for c in pairs}
    board = Switchboard(
        recogniser,
        {s: make_selector(s) for s in sorted(sels)},
        {p: make_placer(p) for p in sorted(plcs)},
        revisit,
    )
    return AutoScheduler(AutoSelector(board), AutoPlacer(board))


def describe(scheduler: TwoStageScheduler) -> dict[str, Any] | None:
    """What ``auto`` has seen and chosen (``/v1/models`` shows it), or ``None`` for another scheduler.

    :param scheduler: the scheduler running.
    """
    board = switchboard(scheduler)
    if board is None:
        return None
    r = board.recogniser
    return {
        "candidates": list(r.candidates),
        "default": r.default,
        "window": r.window,
        "tasks_seen": r.window if board.choice is not None else len(board.seen),
        "running": board.current,
        "choice": board.choice.to_dict() if board.choice is not None else None,
        "restored": board.restored,
        "revisit_at": board.revisit.at if board.revisit is not None else None,
        "second": board.second.to_dict() if board.second is not None else None,
    }


def switchboard(scheduler: TwoStageScheduler) -> Switchboard | None:
    """``auto``'s switchboard, or ``None`` for another scheduler."""
    board = getattr(scheduler.selector, "board", None)
    return board if isinstance(board, Switchboard) else None
