"""How a recogniser chooses on a kind of case it never saw: leave one family out.

rlsched is judged on cases of kinds no generated family copies, and ``auto``'s validation score
mixes families its training grid holds. This scores each family's validation cases twice: with
the recogniser as fitted, and with the same recogniser fitted without that family's training
cases (same candidates, ``k``, margin, weights; centre and scale from the rows kept); beside the
default pair alone. The gap between the first two is how much recognising the family leaned on
having seen it — the held-out cases' situation, measured on validation cases only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from experiments.recogniser_fit import Grid, run_features, score
from experiments.report_generalisation import best_heuristic, geomean
from rlsched.policies.recogniser import Recogniser


@dataclass(frozen=True)
class FamilyOut:
    """One family's validation cases, scored three ways (geometric mean of throughput over each
    case's best heuristic pair).

    :param family: the family (a built-in's name for a built-in case).
    :param cases: its validation cases scored.
    :param training_cases: its training cases, left out for :attr:`unseen`.
    :param seen: the recogniser as fitted.
    :param unseen: fitted without the family's training cases (``seen`` where it had none;
        ``None`` where every training case is of the family).
    :param default: the default pair throughout.
    """

    family: str
    cases: int
    training_cases: int
    seen: float
    unseen: float | None
    default: float


@cache
def _index_families(folder: Path) -> dict[str, str]:
    from experiments.scenario_gen.index import INDEX_NAME, read_index

    if not (folder / INDEX_NAME).is_file():
        return {}
    return {c.file: c.family for c in read_index(folder).cases}


def case_family(case: str) -> str:
    """A case's family: a generated case's, from its set's index (or, where the index is not
    found, from its file name, which the generator writes ``FAMILY-SEED.toml``); a built-in is a
    kind of its own (``transfer-32`` and ``transfer-4`` are two)."""
    from experiments.case_folders import split_suffix

    path = Path(split_suffix(case)[0])
    family = _index_families(path.parent).get(path.name)
    if family:
        return family
    named = re.fullmatch(r"(.+)-\d+", path.stem) if path.suffix == ".toml" else None
    return named.group(1) if named else path.stem


def without_cases(recogniser: Recogniser, drop: Iterable[str]) -> Recogniser:
    """``recogniser`` fitted without the training rows of the cases ``drop``: the same choice rule,
    standardised over the rows kept (the dropped cases do not even set the feature scales).

    :raises ValueError: when no row is left.
    """
    gone = set(drop)
    keep = [i for i, c in enumerate(recogniser.row_cases) if c not in gone]
    if not keep:
        raise ValueError("no training row is left")
    x = recogniser.rows[keep]
    scale = x.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    return dataclasses.replace(
        recogniser,
        k=min(recogniser.k, len(keep)),
        center=x.mean(axis=0),
        scale=scale,
        rows=x,
        scores=recogniser.scores[keep],
        row_cases=tuple(recogniser.row_cases[i] for i in keep),
        latency=None if recogniser.latency is None else recogniser.latency[keep],
    )


def restrict(grid: Grid, cases: set[str]) -> Grid:
    """The runs of ``grid`` on ``cases`` only."""
    return Grid(
        {k: v for k, v in grid.throughput.items() if k[0] in cases},
        {k: v for k, v in grid.means.items() if k[0] in cases},
        grid.heuristics,
    )


def _default_alone(recogniser: Recogniser, grid: Grid) -> float:
    ratios = []
    for case in grid.cases:
        best = best_heuristic(grid.means[(case, None)], set(grid.heuristics))
        ref = grid.pair_mean(case, best) if best else None
        got = grid.pair_mean(case, recogniser.default)
        if ref and got:
            ratios.append(got / ref)
    return geomean(ratios) if ratios else float("nan")


def families_left_out(recogniser: Recogniser, validation: Grid) -> list[FamilyOut]:
    """Each family of ``validation``'s cases, scored with ``recogniser``, with it fitted without
    the family's training cases, and with its default pair alone (families in name order)."""
    features = {
        (c, s): run_features(c, s, recogniser.window) for c in validation.cases for s in validation.seeds(c)
    }
    by_family: dict[str, set[str]] = {}
    for case in validation.cases:
        by_family.setdefault(case_family(case), set()).add(case)
    out = []
    for family, cases in sorted(by_family.items()):
        sub = restrict(validation, cases)
        train = {c for c in recogniser.row_cases if case_family(c) == family}
        seen = score(recogniser, sub, features)
        if not seen.ratios:
            continue
        unseen: float | None = seen.geo_mean
        if train == set(recogniser.row_cases):
            unseen = None  # nothing would be left to fit on
        elif train:
            unseen = score(without_cases(recogniser, train), sub, features).geo_mean
        default = _default_alone(recogniser, sub)
        out.append(FamilyOut(family, len(seen.ratios), len(train), seen.geo_mean, unseen, default))
    return out
