"""What a scheduler may learn interference from: a budgeted survey and run-time observations.

A placer that models interference (IAWP) is calibrated before a run from a *survey* of the cluster
— co-running pairs of subtask kinds on each GPU model, and a few resource metrics per kind — and
keeps learning during the run from what the executor observes. The survey is taken by an
instrument: the simulator's (``envs.simulated_instrument``) runs kinds against its ground truth, as
a micro-benchmark would on real hardware; the live runtime's is its profiler. Either way the
instrument stays with the world: :func:`rlsched.world.hand_over` asks the placer what it wants
measured (:class:`SurveyRequest`), runs that one survey (:func:`run_survey`) and hands the placer
the resulting data (:class:`Survey`) — measurements, never the instrument, so nothing a placer
holds can measure more than its budget or reach the parameters behind the measurements.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from rlsched.tasks import KindSpec

if TYPE_CHECKING:
    from rlsched.interference.kind_profiles import ProfileSamples
    from rlsched.interference.measurements import ColocationData


@runtime_checkable
class ProfilingInstrument(Protocol):
    """Measures the kinds of a workload on the GPU models of a cluster.

    Held by the world only (the trusted side): placers get a :class:`Survey` taken with it.
    """

    def key(self) -> Hashable:
        """Identifies what is measured (cluster GPU models, kinds, interference source): models
        fitted from one instrument may be reused for another with the same key."""
        ...

    def devices(self) -> list[str]:
        """GPU model names of the cluster (catalog names, e.g. ``"V100M16"``)."""
        ...

    def kinds(self) -> list[KindSpec]:
        """Subtask kinds of the workload that may run on a GPU."""
        ...

    def colocation(self, fraction: float, seed: int) -> ColocationData:
        """Co-run a random ``fraction`` of (device, kind, partner) triples (at least one partner per
        device and kind) and return their normalised throughputs (0 = cannot share)."""
        ...

    def measure(self, triples: Sequence[tuple[str, str, str]], seed: int) -> ColocationData:
        """Co-run exactly these (device, kind, partner) triples (names as :meth:`devices` and
        :meth:`kinds` give them) and return their normalised throughputs (0 = cannot share);
        ``seed`` seeds the measurement noise. Active profiling (:mod:`rlsched.interference.active`)
        picks them."""
        ...

    def kind_profiles(self, metrics_per_kind: int, seed: int) -> ProfileSamples:
        """Measure ``metrics_per_kind`` randomly chosen resource metrics of every kind."""
        ...


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
        from rlsched.interference.active import active_colocation

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


#: Seed salt of the triples a co-location survey picks (shared by every instrument, so the
#: simulator's and the live profiler's surveys pick the same triples for one seed).
SURVEY_SALT = 0xC0C0


def colocation_survey(
    devices: Sequence[str],
    kinds: Sequence[KindSpec],
    fraction: float,
    seed: int,
    measure: Callable[[str, KindSpec, KindSpec, np.random.Generator], float],
) -> ColocationData:
    """Measure a random ``fraction`` of (device, kind, partner) triples, at least one partner per
    device and kind, as every :class:`ProfilingInstrument` does.

    Each partner is kept with probability ``fraction`` (one drawn at random when none is). The
    generator is handed to ``measure`` too, and an instrument's own draws (measurement noise)
    come from it in the same order for every instrument, so surveys stay in step.

    :param devices: GPU model names.
    :param kinds: GPU-capable kinds.
    :param fraction: share of triples, in (0, 1].
    :param seed: selection seed.
    :param measure: normalised throughput of a kind next to a partner on a device (0 = cannot share).
    :raises ValueError: for a fraction outside (0, 1].
    """
    from rlsched.interference.measurements import ColocationData

    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, SURVEY_SALT]))
    dev: list[str] = []
    kind: list[str] = []
    partner: list[str] = []
    y: list[float] = []
    for d in devices:
        for k in kinds:
            chosen = [p for p in kinds if rng.random() < fraction]
            if not chosen:
                chosen = [kinds[int(rng.integers(len(kinds)))]]
            for p in chosen:
                dev.append(d)
                kind.append(k.name)
                partner.append(p.name)
                y.append(measure(d, k, p, rng))
    return ColocationData(dev, kind, partner, np.array(y, dtype=np.float64))


def measure_triples(
    triples: Sequence[tuple[str, str, str]],
    kinds: Sequence[KindSpec],
    seed: int,
    measure: Callable[[str, KindSpec, KindSpec, np.random.Generator], float],
) -> ColocationData:
    """Measure the given (device, kind, partner) triples, in order, as every
    :class:`ProfilingInstrument`'s ``measure`` does (one generator for the noise, drawn alike).

    :param triples: (device, kind name, partner name) to co-run.
    :param kinds: the instrument's kinds (names resolve to these).
    :param seed: noise seed.
    :param measure: as for :func:`colocation_survey`.
    :raises ValueError: naming a kind the instrument does not have.
    """
    from rlsched.interference.measurements import ColocationData

    by_name = {k.name: k for k in kinds}
    missing = sorted({n for _, k, p in triples for n in (k, p)} - set(by_name))
    if missing:
        raise ValueError(f"cannot measure unknown kinds: {', '.join(missing)}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, SURVEY_SALT, 1]))
    y = [measure(d, by_name[k], by_name[p], rng) for d, k, p in triples]
    return ColocationData(
        [t[0] for t in triples],
        [t[1] for t in triples],
        [t[2] for t in triples],
        np.array(y, dtype=np.float64),
    )
