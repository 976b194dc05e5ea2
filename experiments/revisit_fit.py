"""Fitting ``auto``'s second decision from ``revisit_data`` rows, and choosing its ``k`` and margin.

Training rows (training seeds) give a :class:`~rlsched.policies.revisit.Revisit`: each row's run
features, the pair running when it decided, and the measured log throughput of switching to each
target over keeping that pair. Validation rows (other cases, validation seeds) score each ``k``
and margin by the throughput the decision would realise on each run (measured: every switch was
run), against the best heuristic pair of the case (an evaluation grid of the same validation
seeds): the geometric mean over cases of the ratio.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rlsched.policies.revisit import Revisit

#: The ``k`` and margins the validation rows choose among (written down before any fit).
KS: tuple[int, ...] = (5, 10, 20, 40)
MARGINS: tuple[float, ...] = (0.0, 0.02, 0.05, 0.10)
#: Validation scores within this are ties (to the larger margin, then the larger ``k``).
TIE = 0.002


def read_rows(*paths: str | Path) -> list[dict]:
    """The JSON lines of ``revisit_data`` files, in order."""
    out = []
    for p in paths:
        out += [json.loads(line) for line in Path(p).read_text(encoding="utf-8").splitlines() if line.strip()]
    return out


def fit(rows: list[dict], at: int, k: int = 10, margin: float = 0.0) -> Revisit:
    """A :class:`Revisit` of the training ``rows`` (every row must have run every target).

    :raises ValueError: without rows.
    """
    if not rows:
        raise ValueError("no training rows")
    targets = tuple(rows[0]["switch"])
    x = np.array([r["features"] for r in rows], dtype=float)
    gains = np.array([[math.log(r["switch"][t] / r["stay"]) for t in targets] for r in rows])
    scale = x.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    running = tuple(r["running"] for r in rows)
    return Revisit(at, targets, k, margin, x.mean(axis=0), scale, x, running, gains)


@dataclass(frozen=True)
class Score:
    """A choice rule on the validation rows.

    :param k: training rows averaged.
    :param margin: gain a switch needs.
    :param ratios: per case, the realised throughput (mean over seeds) over the best heuristic pair's.
    :param switches: runs on which it switched.
    """

    k: int
    margin: float
    ratios: dict[str, float]
    switches: int

    @property
    def geo_mean(self) -> float:
        return math.exp(sum(math.log(r) for r in self.ratios.values()) / len(self.ratios))


def score(revisit: Revisit | None, rows: list[dict], best: dict[str, float]) -> Score:
    """What ``revisit`` realises on validation ``rows`` (``None``: never switch, the shipped
    ``auto``), per case against ``best`` (the best heuristic pair's mean throughput, by case file name)."""
    got: dict[str, list[float]] = defaultdict(list)
    switches = 0
    for r in rows:
        pair = r["running"]
        if revisit is not None:
            pair = revisit.decide(np.asarray(r["features"]), pair).pair
        switches += pair != r["running"]
        got[Path(r["case"]).name].append(r["stay"] if pair == r["running"] else r["switch"][pair])
    ratios = {c: float(np.mean(v)) / best[c] for c, v in got.items() if c in best}
    k = revisit.k if revisit is not None else 0
    return Score(k, revisit.margin if revisit is not None else 0.0, ratios, switches)


def tune(
    revisit: Revisit,
    rows: list[dict],
    best: dict[str, float],
    ks: Iterable[int] = KS,
    margins: Iterable[float] = MARGINS,
) -> tuple[Revisit, list[Score]]:
    """The ``k`` and margin that score best on the validation ``rows`` (ties within :data:`TIE`
    to the larger margin, then the larger ``k``), and every score."""
    n = len(revisit.running)
    usable = sorted({min(k, n) for k in ks})  # k beyond the runs is all of them: scored once
    scores = [score(revisit.with_choice_rule(k, m), rows, best) for k in usable for m in margins]
    top = max(s.geo_mean for s in scores)
    pick = max((s for s in scores if s.geo_mean >= top - TIE), key=lambda s: (s.margin, s.k))
    return revisit.with_choice_rule(pick.k, pick.margin), scores
