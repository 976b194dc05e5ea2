"""How a placer learns interference: from a budgeted survey before a run, and from run-time
observations.

A placer that models interference (IAWP) is calibrated before a run from a *survey* of the cluster
— co-running pairs of subtask kinds on each GPU model, and a few resource metrics per kind — and
keeps learning during the run from what the executor observes. The survey is taken by the world's
:class:`~rlsched.interference.instrument.ProfilingInstrument`, which stays with the world:
:func:`rlsched.world.hand_over` asks the placer what it wants measured (:class:`SurveyRequest`),
runs that one survey (:func:`run_survey`) and hands the placer the resulting data (:class:`Survey`)
— measurements, never the instrument, so nothing a placer holds can measure more than its budget
or reach the parameters behind the measurements.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from rlsched.interference.active import active_colocation
from rlsched.interference.instrument import ProfilingInstrument
from rlsched.tasks import KindSpec

if TYPE_CHECKING:
    from rlsched.interference.kind_profiles import ProfileSamples
    from rlsched.interference.measurements import ColocationData


@dataclass(frozen=True)
class SurveyRequest:
    """What a placer asks to have measured before a run: its whole profiling budget.

    :param colocation_fraction: share of (device, kind, partner) triples to co-run, in (0, 1];
        ``None``: no co-location survey.
    :param metrics_per_kind: resource metrics to measure per kind; ``None``: no kind profiles.
    :param seed: which triples and metrics are picked (and the measurement noise).
    :param active: pick the triples by the value of their answer
        (:func:`rlsched.interference.active.active_colocation`) rather than at random; the budget
        is the same number of co-runs.
    """

    colocation_fraction: float | None = None
    metrics_per_kind: int | None = None
    seed: int = 0
    active: bool = False


@dataclass(frozen=True)
class Survey:
    """The data of one budgeted survey: all a calibrating placer is handed.

    Plain data (strings, kinds, arrays): nothing in it can measure again.

    :param key: identifies what was measured (GPU models, kinds, interference source): models fitted
        from one survey may be reused for another with the same key and request.
    :param devices: GPU model names of the cluster (catalog names, e.g. ``"V100M16"``).
    :param kinds: GPU-capable subtask kinds of the workload.
    :param request: the request it answers.
    :param colocation: normalised co-run throughputs (0 = cannot share), when requested.
    :param profiles: measured resource metrics of the kinds, when requested.
    """

    key: Hashable
    devices: tuple[str, ...]
    kinds: tuple[KindSpec, ...]
    request: SurveyRequest
    colocation: ColocationData | None = None
    profiles: ProfileSamples | None = None


def run_survey(instrument: ProfilingInstrument, request: SurveyRequest) -> Survey:
    """Take the survey ``request`` asks for with ``instrument`` (the world's side of the hand-over).

    :param instrument: the world's profiling instrument.
    :param request: what the placer asks to have measured.
    :raises ValueError: for a fraction outside (0, 1] or a metrics count out of range.
    """
    fraction, metrics, seed = request.colocation_fraction, request.metrics_per_kind, request.seed
    if fraction is None:
        coloc = None
    elif request.active:
        coloc = active_colocation(instrument, fraction, seed)
    else:
        coloc = instrument.colocation(fraction, seed)
    profiles = None if metrics is None else instrument.kind_profiles(metrics, seed)
    return Survey(
        instrument.key(), tuple(instrument.devices()), tuple(instrument.kinds()), request, coloc, profiles
    )


@runtime_checkable
class CalibratingPlacer(Protocol):
    """A placer calibrated from a survey of the cluster before a run (IAWP fits its interference
    model): it says what to measure, and gets the data."""

    def survey_request(self) -> SurveyRequest:
        """The survey this placer wants before a run."""
        ...

    def calibrate(self, survey: Survey) -> None:
        """Fit from the survey's data (called once per hand-over, before the run)."""
        ...


@runtime_checkable
class ObservingPlacer(Protocol):
    """A placer that learns from subtasks the executor saw finish on a GPU."""

    def observe(
        self,
        device: str,
        kind: str,
        partners: tuple[str, ...],
        speed: float,
        shares: tuple[float, ...] | None = None,
    ) -> None:
        """One finished GPU subtask.

        :param device: the GPU's model name.
        :param kind: the subtask's kind.
        :param partners: kinds of the subtasks it shared the GPU with (empty: it ran alone).
        :param speed: measured speed, nominal over measured run time (as ``ClusterView.speed_gpu``).
        :param shares: average number of subtasks of each partner kind beside it over its run
            (the live runtime, where co-runners come and go); ``None``: one per entry of
            ``partners``, the whole run (the simulator reports only runs whose co-runners did
            not change).
        """
        ...
