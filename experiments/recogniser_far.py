"""The recogniser's fallback for a kind of case it has not seen, fitted on its training rows alone.

Left one family out, the recogniser reads no better than its default pair (BENCHMARKS.md, "cases
of a kind never seen"): its neighbours then come from other kinds of case and say little. The
fallback gives a case that lies far from every training row a pair chosen for robustness across
kinds instead: the candidate with the best mean training score. How far is far is chosen on the
training rows too: each candidate distance (percentiles of the rows' distance to the nearest row
of another family, or never) is scored by leaving one case out (a kind it has seen) and by leaving
one family out (a kind it has not), and the distance with the best mean of the two is kept. No
validation or test case is read.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from experiments.recogniser_fit import distances_apart, leave_one_case_out
from rlsched.policies.recogniser import Recogniser

#: Percentiles of the nearest-other-family distances tried as the far distance (besides never).
FAR_PERCENTILES: tuple[int, ...] = (50, 60, 70, 80, 90, 95, 99)
#: Scores within this are ties: to never, then to the larger distance (the smaller change).
TIE = 0.0005


@dataclass(frozen=True)
class FarTrial:
    """One far distance scored on the training rows.

    :param percentile: its percentile of the nearest-other-family distances (``None``: never).
    :param distance: the distance (``inf``: never).
    :param seen: leave-one-case-out geometric mean of the chosen pair's ratio to the best.
    :param unseen: the same, leaving out each row's whole family.
    :param far_share: share of the rows that are far when their family is left out.
    """

    percentile: int | None
    distance: float
    seen: float
    unseen: float
    far_share: float

    @property
    def score(self) -> float:
        """What the distance is chosen by: the mean of :attr:`seen` and :attr:`unseen`."""
        return (self.seen + self.unseen) / 2


def robust_pair(recogniser: Recogniser) -> str:
    """The candidate with the highest mean training score (log ratio to each case's best)."""
    return recogniser.candidates[int(np.argmax(recogniser.scores.mean(axis=0)))]


def nearest_other(recogniser: Recogniser, groups: Sequence[str]) -> np.ndarray:
    """Each training row's distance to the nearest row of another group (its family).

    :param groups: one per row.
    :raises ValueError: when ``groups`` does not match the rows, or all rows share one group.
    """
    if len(set(groups)) < 2:
        raise ValueError("the training rows hold one family: nothing to leave out")
    weights = np.asarray(recogniser.weights, dtype=float)
    return np.asarray(distances_apart(recogniser, weights, groups).min(axis=1))


def fit_far(recogniser: Recogniser, families: Sequence[str]) -> tuple[Recogniser, list[FarTrial]]:
    """``recogniser`` with the far pair and distance that score best on its training rows, and
    every trial (the first is never). A recogniser left without a fallback (never wins) keeps
    ``far_pair`` ``None``.

    :param families: each training row's family
        (:func:`~experiments.recogniser_unseen.case_family`).
    """
    pair = robust_pair(recogniser)
    near = nearest_other(recogniser, families)
    finite = near[np.isfinite(near)]
    options: list[tuple[int | None, float]] = [(None, math.inf)]
    options += [(p, float(np.percentile(finite, p))) for p in FAR_PERCENTILES]
    trials = []
    for percentile, distance in options:
        model = recogniser.with_far(None if percentile is None else pair, distance)
        weights = np.asarray(model.weights, dtype=float)
        seen = leave_one_case_out(model, weights, model.k, model.margin)
        unseen = leave_one_case_out(model, weights, model.k, model.margin, families)
        share = float((near > distance).mean())
        trials.append(FarTrial(percentile, distance, seen, unseen, share))
    top = max(t.score for t in trials)
    tied = [t for t in trials if t.score >= top - TIE]
    best = tied[0] if tied[0].percentile is None else max(tied, key=lambda t: t.distance)
    if best.percentile is None:
        return recogniser.with_far(None, math.inf), trials
    return recogniser.with_far(pair, best.distance), trials
