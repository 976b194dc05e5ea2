"""Workloads for generated scenarios: app and kernel mixes, arrival processes, task classes and
speed drift.

Every time in an arrival process, a churn event or drift is drawn as a share of the run's expected
span of arrivals (tasks over rate), so that :mod:`experiments.scenario_gen.load` can set the
offered load by compressing time alone: the run keeps its shape (as many bursts, joins and
leaves per run) at any load.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rlsched.scenarios.spec import ArrivalSpec, DriftSpec, TaskClass

#: The TPDS paper's video apps.
VIDEO_APPS: tuple[str, ...] = ("intrusion_detection", "video_synopsis", "face_recognition")
#: Compute-bound (matmul), memory-bound (fft) and mixed (kmeans) kernels.
KERNEL_APPS: tuple[str, ...] = ("matmul", "fft", "kmeans")
#: Ratio of the high to the low rate of a bursty process.
BURST_RATIO = (3.0, 20.0)
#: Share of the time a bursty process spends in its high state.
BURST_HIGH_SHARE = (0.15, 0.5)
#: Bursts per run of a bursty process (its mean cycle is the span over this).
BURSTS_PER_RUN = (2.0, 8.0)
#: Standard deviation of the log-speed change per drift interval.
DRIFT_SIGMA = (0.0, 0.12)
#: Drift intervals per run.
DRIFT_STEPS = (10.0, 40.0)


def app_shares(rng: np.random.Generator, apps: Sequence[str], keep: float = 0.7) -> dict[str, float]:
    """Uneven shares over ``apps`` (Dirichlet), each app kept with probability ``keep`` (at least one).

    :param rng: the case's random source.
    :param apps: the candidate apps.
    :param keep: probability that an app is in the mix.
    """
    kept = [a for a in apps if rng.random() < keep] or [apps[int(rng.integers(len(apps)))]]
    w = rng.dirichlet(np.ones(len(kept)))
    return {a: max(round(float(x), 3), 0.001) for a, x in zip(kept, w, strict=True)}


def input_range(
    rng: np.random.Generator, low: tuple[float, float], spread: tuple[float, float]
) -> tuple[float, float]:
    """A uniform input-size range ``[lo, lo x spread]``, MB.

    :param rng: the case's random source.
    :param low: range of ``lo``.
    :param spread: range of ``hi / lo``.
    """
    lo = float(rng.uniform(*low))
    return round(lo, 1), round(lo * float(rng.uniform(*spread)), 1)


def poisson(rate_per_min: float) -> ArrivalSpec:
    """Poisson arrivals at ``rate_per_min``.

    :param rate_per_min: tasks per minute.
    """
    return ArrivalSpec(process="poisson", rate_per_min=rate_per_min)


def bursty(rng: np.random.Generator, rate_per_min: float, span_s: float) -> ArrivalSpec:
    """Bursts and lulls (two-state Markov-modulated Poisson) with long-run mean ``rate_per_min``:
    the high rate :data:`BURST_RATIO` times the low one, :data:`BURSTS_PER_RUN` bursts in ``span_s``.

    :param rng: the case's random source.
    :param rate_per_min: long-run mean, tasks per minute.
    :param span_s: the run's expected span of arrivals, seconds.
    """
    ratio = float(rng.uniform(*BURST_RATIO))
    p = float(rng.uniform(*BURST_HIGH_SHARE))
    cycle = span_s / float(rng.uniform(*BURSTS_PER_RUN))
    high = rate_per_min / (p + (1.0 - p) / ratio)
    return ArrivalSpec(
        process="bursty",
        rate_per_min=rate_per_min,
        high_rate_per_min=high,
        low_rate_per_min=high / ratio,
        mean_high_s=p * cycle,
        mean_low_s=(1.0 - p) * cycle,
    )


def drift(rng: np.random.Generator, span_s: float) -> DriftSpec:
    """Speed drift with a sigma from :data:`DRIFT_SIGMA` (often none), :data:`DRIFT_STEPS` steps per run.

    :param rng: the case's random source.
    :param span_s: the run's expected span of arrivals, seconds.
    """
    if rng.random() < 0.3:
        return DriftSpec()
    return DriftSpec(
        sigma=round(float(rng.uniform(*DRIFT_SIGMA)), 3),
        interval_s=span_s / float(rng.uniform(*DRIFT_STEPS)),
        min_factor=round(float(rng.uniform(0.5, 0.8)), 2),
        max_factor=round(float(rng.uniform(1.0, 1.1)), 2),
    )


def two_classes(rng: np.random.Generator, deadline_s: tuple[float, float]) -> tuple[TaskClass, ...]:
    """An interactive class (priority 1, a deadline from ``deadline_s``) and a batch class
    (priority 0, no deadline), sometimes a middle class (priority 0, a looser deadline).

    :param rng: the case's random source.
    :param deadline_s: range of the interactive deadline, seconds.
    """
    tight = round(float(rng.uniform(*deadline_s)), 1)
    interactive = TaskClass("interactive", round(float(rng.uniform(0.1, 0.5)), 2), 1, tight)
    batch = TaskClass("batch", round(float(rng.uniform(0.3, 0.8)), 2), 0, None)
    if rng.random() < 0.5:
        return interactive, batch
    middle = TaskClass("standard", round(float(rng.uniform(0.1, 0.4)), 2), 0, round(tight * 3, 1))
    return interactive, middle, batch
