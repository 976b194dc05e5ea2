"""Fitting the case recogniser from evaluation grids, and choosing its ``k`` and margin.

A training grid (``rlsched evaluate`` of many pairs on training cases, training seeds) labels
each case with every candidate pair's mean throughput; each (case, seed) run gives one row of
features, computed from the case's fleet and its first ``window`` tasks on that seed exactly as
``auto`` computes them online. A validation grid (other cases, validation seeds) then scores each
``k`` and margin by the pair it would choose on each validation run, with that pair's measured
throughput there, against the best heuristic pair of the case: the geometric mean of the ratio.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from experiments.evaluation import load_entry
from experiments.report_generalisation import best_heuristic, case_means, is_heuristic_row
from rlsched.policies.case_features import FEATURES, case_features
from rlsched.policies.recogniser import Recogniser
from rlsched.scenarios.taskgen import generate_tasks, scenario_for_seed
from rlsched.view import ClusterView

#: Tasks observed before deciding (fixed before any validation run, not tuned).
WINDOW = 50
#: The pair ``auto`` runs first and keeps unless another is predicted better.
DEFAULT_PAIR = "ldwp+iawp"
#: A pair is a candidate when it is within this of the best pair of a case ...
NEAR_BEST = 0.99
#: ... on at least this many training cases,
MIN_CASES = 3
#: ... keeping at most this many (most such cases first), besides the default.
MAX_CANDIDATES = 8
#: Rule ``gain``: a pair joins while it raises the candidates' best-of geometric mean by this.
MIN_GAIN = 0.002
#: The rules :func:`candidates_by` knows.
CANDIDATE_RULES: tuple[str, ...] = ("count", "gain")
#: Feature selection (``--features select``): the leave-one-case-out rule it scores with ...
SELECT_K, SELECT_MARGIN = 10, 0.05
#: ... and the rise of that score a feature must bring to join.
MIN_FEATURE_GAIN = 0.002
#: The ``k`` (training rows) and margins the validation grid chooses among.
KS: tuple[int, ...] = (2, 4, 6, 10, 20, 40, 80)
MARGINS: tuple[float, ...] = (0.0, 0.01, 0.02, 0.05)
#: Validation scores within this are ties (to the larger k, then the larger margin).
TIE = 0.002


@dataclass(frozen=True)
class Grid:
    """An evaluation's runs: throughput by (case, pair, seed), and the heuristic pairs.

    :param throughput: mean throughput of each run, tasks/s (``None``: it failed).
    :param means: each case's per-pair means over its seeds (``report_generalisation``).
    :param heuristics: the pairs that are heuristics.
    """

    throughput: dict[tuple[str, str, int], float | None]
    means: dict
    heuristics: frozenset[str]

    @property
    def cases(self) -> list[str]:
        return sorted({c for c, _, _ in self.throughput})

    def seeds(self, case: str) -> list[int]:
        return sorted({s for c, _, s in self.throughput if c == case})

    def pair_mean(self, case: str, pair: str) -> float | None:
        m = self.means.get((case, None), {}).get(pair)
        return None if m is None else m.throughput

    def pair_latency(self, case: str, pair: str) -> float | None:
        """Mean over seeds of the runs' mean latency, s."""
        m = self.means.get((case, None), {}).get(pair)
        return None if m is None else m.latency_mean_s


def read_grid(*paths: str | Path) -> Grid:
    """The runs of ``rlsched evaluate`` folders' ``results.json`` (or the files themselves),
    together in the order given."""
    rows = []
    for path in paths:
        p = Path(path)
        p = p / "results.json" if p.is_dir() else p
        rows += json.loads(p.read_text(encoding="utf-8"))["rows"]
    thr = {
        (r["scenario"], r["scheduler"], int(r["seed"])): r["throughput"] if r["status"] == "ok" else None
        for r in rows
        if r.get("load") is None
    }
    heur = frozenset(r["scheduler"] for r in rows if is_heuristic_row(r))
    return Grid(thr, case_means(rows), heur)


def check_grid_use(grid: Grid, use: str, flag: str) -> None:
    """Refuse a grid that ``use`` may not see: every run on a seed of that set (training seeds to
    fit, validation seeds to choose ``k``), and no folder of generated cases that breaks
    :func:`~experiments.scenario_gen.index.check_use` (test-only families, other seed sets).

    :raises InputError: naming ``flag``, the case and the seed.
    """
    from experiments.case_folders import check_file_use
    from rlsched.errors import InputError
    from rlsched.seeds import seed_set

    for case, _, seed in grid.throughput:
        if seed_set(seed) != use:
            raise InputError(
                flag, "seed", f"runs on {use} seeds only", seed, hint=f"{case} ran on a {seed_set(seed)} seed"
            )
    for case in sorted(grid.cases):  # the cases the grid ran, not their folders' others
        check_file_use(case, use, flag)


def choose_candidates(grid: Grid, default: str = DEFAULT_PAIR) -> list[str]:
    """The pairs within :data:`NEAR_BEST` of each case's best on at least :data:`MIN_CASES`
    cases (at most :data:`MAX_CANDIDATES`, most cases first), and ``default``."""
    near: dict[str, int] = defaultdict(int)
    for case in grid.cases:
        means = {p: m.throughput for p, m in grid.means[(case, None)].items() if m.throughput is not None}
        if not means:
            continue
        top = max(means.values())
        for p, t in means.items():
            near[p] += t >= NEAR_BEST * top
    ranked = sorted((p for p, n in near.items() if n >= MIN_CASES), key=lambda p: (-near[p], p))
    chosen = [p for p in ranked if p != default][:MAX_CANDIDATES]
    return [default, *chosen]


def _case_ratios(grid: Grid) -> dict[str, dict[str, float]]:
    """Per training case, each pair's mean throughput over the case's best pair's (any pair)."""
    out: dict[str, dict[str, float]] = {}
    for case in grid.cases:
        means = {p: m.throughput for p, m in grid.means[(case, None)].items() if m.throughput is not None}
        top = max(means.values(), default=0.0)
        if top > 0:
            out[case] = {p: t / top for p, t in means.items()}
    return out


def choose_candidates_by_gain(grid: Grid, default: str = DEFAULT_PAIR) -> list[str]:
    """``default``, then greedily the pair that most raises the geometric mean over training cases
    of the best ratio among the pairs chosen so far (what a recogniser that always picked right
    among them would score), while that rises by at least :data:`MIN_GAIN`, at most
    :data:`MAX_CANDIDATES` pairs besides ``default``. Unlike the count rule it admits a pair
    that is best on few cases where it rescues them."""
    ratios = _case_ratios(grid)
    pairs = sorted({p for r in ratios.values() for p in r})
    chosen = [default]

    def score(cands: list[str]) -> float:
        logs = [math.log(max((r.get(p, 0.0) for p in cands), default=0.0) or 1e-9) for r in ratios.values()]
        return math.exp(sum(logs) / max(len(logs), 1))

    current = score(chosen)
    while len(chosen) <= MAX_CANDIDATES:
        gains = {p: score([*chosen, p]) for p in pairs if p not in chosen}
        if not gains:
            break
        best = max(gains, key=lambda p: (gains[p], p))
        if gains[best] - current < MIN_GAIN:
            break
        chosen.append(best)
        current = gains[best]
    return chosen


def candidates_by(rule: str, grid: Grid, default: str = DEFAULT_PAIR) -> list[str]:
    """The candidates of ``rule`` (``count``: :func:`choose_candidates`; ``gain``:
    :func:`choose_candidates_by_gain`)."""
    if rule == "gain":
        return choose_candidates_by_gain(grid, default)
    return choose_candidates(grid, default)


def run_features(entry: str, seed: int, window: int = WINDOW) -> np.ndarray:
    """The features ``auto`` computes on ``entry`` run with ``seed`` (its first ``window`` tasks)."""
    scenario = scenario_for_seed(load_entry(entry, None), seed)
    tasks = generate_tasks(scenario, seed)[:window]
    return case_features(ClusterView.from_spec(scenario.cluster), tasks)


def fit(
    grid: Grid,
    candidates: Sequence[str],
    window: int = WINDOW,
    k: int = 10,
    margin: float = 0.0,
    latency: bool = False,
) -> Recogniser:
    """A recogniser of every (case, seed) run of ``grid`` on which every candidate ran.

    :param grid: the training grid.
    :param candidates: the pairs to choose among (the first is the default).
    :param latency: also label each candidate's mean latency (its log ratio to the case's least),
        which then breaks throughput ties (cases without every candidate's latency are left out).
    :raises ValueError: when no case has every candidate.
    """
    rows, scores, names, lats = [], [], [], []
    for case in grid.cases:
        means = [grid.pair_mean(case, p) for p in candidates]
        t = [v for v in means if v is not None and v > 0]
        lat = [grid.pair_latency(case, p) for p in candidates] if latency else []
        known = [v for v in lat if v is not None and v > 0]
        if len(t) < len(candidates) or len(known) < len(lat):
            continue
        score = np.log(np.asarray(t) / max(t))
        for seed in grid.seeds(case):
            rows.append(run_features(case, seed, window))
            scores.append(score)
            names.append(case)
            if latency:
                lats.append(np.log(np.asarray(known) / min(known)))
    if not rows:
        raise ValueError("no training case has a run of every candidate")
    x = np.asarray(rows)
    scale = x.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    return Recogniser(
        tuple(candidates), candidates[0], window, min(k, len(rows)), margin,
        x.mean(axis=0), scale, x, np.asarray(scores), tuple(names),
        latency=np.asarray(lats) if latency else None,
    )  # fmt: skip


def distances_apart(recogniser: Recogniser, weights: np.ndarray, groups: Sequence[str]) -> np.ndarray:
    """(R, R) distances between the training rows with ``weights`` (standardised features), ``inf``
    between rows of the same group.

    :param groups: one per row (its case, or its family).
    :raises ValueError: when ``groups`` does not match the rows.
    """
    w = np.asarray(weights, dtype=float) / recogniser.scale
    z = (recogniser.rows - recogniser.center) * w
    g = np.asarray(groups)
    if len(g) != len(z):
        raise ValueError(f"groups: expected {len(z)} (one per training row), got {len(g)}")
    dist = np.linalg.norm(z[:, None, :] - z[None, :, :], axis=2)
    dist[g[:, None] == g[None, :]] = np.inf
    return np.asarray(dist)


def leave_one_case_out(
    recogniser: Recogniser,
    weights: np.ndarray,
    k: int,
    margin: float,
    groups: Sequence[str] | None = None,
) -> float:
    """Geometric mean over the training rows of the chosen candidate's ratio to the case's best
    candidate, each row judged by the rows of the other cases only, with ``weights`` in the
    distance (the training data's own estimate of how well those features recognise a case).

    :param groups: per row, what it may not be judged by (default: its case); each row's family
        makes it leave one family out: how well the features carry to a kind never seen.
    A row farther than the recogniser's far distance from every row it may be judged by gets its
    far pair, as :meth:`~rlsched.policies.recogniser.Recogniser.choose` does."""
    dist = distances_apart(recogniser, weights, recogniser.row_cases if groups is None else groups)
    default = recogniser.candidates.index(recogniser.default)
    far = None if recogniser.far_pair is None else recogniser.candidates.index(recogniser.far_pair)
    got = []
    for i in range(len(dist)):
        near = np.argsort(dist[i], kind="stable")[:k]
        predicted = recogniser.scores[near].mean(axis=0)
        best = int(np.argmax(predicted))
        pick = best if predicted[best] - predicted[default] > margin else default
        if far is not None and dist[i, near[0]] > recogniser.far_distance:
            pick = far
        got.append(recogniser.scores[i, pick])
    return float(np.exp(np.mean(got)))


def select_features(
    recogniser: Recogniser, groups: Sequence[str] | None = None
) -> tuple[np.ndarray, list[tuple[str, float]]]:
    """Feature weights (1: used, 0: not) chosen greedily on the training rows: from none, add
    the feature that most raises :func:`leave_one_case_out` (``k`` :data:`SELECT_K`, margin
    :data:`SELECT_MARGIN`) while it rises by at least :data:`MIN_FEATURE_GAIN`; and each step
    (feature, score), the first being ``("none", score)``.

    :param groups: as :func:`leave_one_case_out` (each row's family: features that carry across
        families)."""
    weights = np.zeros(len(FEATURES))
    k = min(SELECT_K, len(recogniser.rows) - 1)
    current = leave_one_case_out(recogniser, weights, k, SELECT_MARGIN, groups)
    steps = [("none", current)]
    while True:
        trials: dict[int, float] = {}
        for f in (int(i) for i in np.flatnonzero(weights == 0)):
            w = weights.copy()
            w[f] = 1.0
            trials[f] = leave_one_case_out(recogniser, w, k, SELECT_MARGIN, groups)
        if not trials:
            break
        top = max(trials, key=lambda i: (trials[i], -i))
        if trials[top] - current < MIN_FEATURE_GAIN:
            break
        weights[top], current = 1.0, trials[top]
        steps.append((FEATURES[top], current))
    return weights, steps


@dataclass(frozen=True)
class Score:
    """A choice rule on the validation grid.

    :param k: training rows averaged.
    :param margin: gain over the default needed.
    :param ratios: per case, the chosen pairs' throughput (mean over seeds) over the best heuristic pair's.
    :param picks: per case, the pair chosen on each seed.
    """

    k: int
    margin: float
    ratios: dict[str, float]
    picks: dict[str, tuple[str, ...]]

    @property
    def geo_mean(self) -> float:
        return math.exp(sum(math.log(r) for r in self.ratios.values()) / len(self.ratios))


def score(recogniser: Recogniser, grid: Grid, features: dict[tuple[str, int], np.ndarray]) -> Score:
    """How ``recogniser`` would do on ``grid``'s cases, choosing per run from ``features``."""
    ratios, picks = {}, {}
    for case in grid.cases:
        best = best_heuristic(grid.means[(case, None)], set(grid.heuristics))
        ref = grid.pair_mean(case, best) if best else None
        seeds = grid.seeds(case)
        chosen = tuple(recogniser.choose(features[(case, s)]).pair for s in seeds)
        runs = [grid.throughput.get((case, p, s)) for p, s in zip(chosen, seeds, strict=True)]
        got = [g for g in runs if g is not None]
        if ref and len(got) == len(runs):
            ratios[case] = float(np.mean(got)) / ref
            picks[case] = chosen
    return Score(recogniser.k, recogniser.margin, ratios, picks)


def tune(
    recogniser: Recogniser, grid: Grid, ks: Iterable[int] = KS, margins: Iterable[float] = MARGINS
) -> tuple[Recogniser, list[Score]]:
    """The ``k`` and margin that score best on the validation ``grid`` (ties within :data:`TIE`
    to the larger ``k``, then the larger margin), and every score."""
    features = {(c, s): run_features(c, s, recogniser.window) for c in grid.cases for s in grid.seeds(c)}
    # k beyond the training runs is all of them: each such k is scored once, not once per k.
    usable = sorted({min(k, len(recogniser.rows)) for k in ks})
    scores = [score(recogniser.with_choice_rule(k, m), grid, features) for k in usable for m in margins]
    top = max(s.geo_mean for s in scores)
    best = max((s for s in scores if s.geo_mean >= top - TIE), key=lambda s: (s.k, s.margin))
    return recogniser.with_choice_rule(best.k, best.margin), scores
