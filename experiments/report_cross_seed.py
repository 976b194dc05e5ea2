"""The report's second measure of learned pairs: against the heuristic pair chosen on the case's
*other* seeds, and the ceiling of choosing one pair per case.

"Against the best heuristic pair" (:mod:`experiments.report_generalisation`) picks the reference
on the very seeds it measures, so the reference keeps every lucky draw of the best of N pairs, and
it rises with each baseline added whatever the learned pair does (issue 29: 0.946 -> 0.941 ->
0.940 against 25/30/35 pairs, the learned pair unchanged). Here each seed of a case is measured
against the heuristic pair best on the case's remaining seeds (leave one seed out), and the same
is done for that picked pair itself: its ratio to the best heuristic pair of the measured seed is
what a scheduler that knew each case's best pair from other seeds would read — the ceiling of any
scheduler that runs one pair per case, on the first measure.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.report_generalisation import (
    TIE,
    CaseKey,
    PairMean,
    best_heuristic,
    case_means,
    geomean,
    is_heuristic_row,
    scenario_label,
)
from experiments.report_writer import Block, _fmt
from rlsched.policies.registry import is_learned_spec

#: The row of the picked pair itself against the measured seed's best (the ceiling).
CEILING = "pair picked on other seeds (ceiling)"
#: Throughput ratios whose share of cases the table gives (at least this).
GOALS = (0.99, 0.97)
_EPS = 1e-9


@dataclass(frozen=True)
class CrossSeedRatio:
    """One pair on one case: its throughput ratios, one per seed, to the heuristic pair best on the
    case's other seeds (``results.json``: ``against_pair_picked_on_other_seeds``).

    :param scenario: the scenario entry.
    :param load: the offered load under ``--loads``, else ``None``.
    :param pair: the learned pair, or :data:`CEILING`.
    :param picked: the pair picked for each measured seed, in seed order.
    :param seeds: the measured seeds.
    :param ratios: one ratio per measured seed.
    :param failed: the learned pair has a failed or timed-out run on the case: no ratio, and the
        case counts against every share (as in the section above).
    """

    scenario: str
    load: float | None
    pair: str
    picked: tuple[str, ...]
    seeds: tuple[int, ...]
    ratios: tuple[float, ...]
    failed: bool = False

    @property
    def ratio(self) -> float:
        """The case's ratio: the geometric mean over its seeds (0 when a seed read 0; NaN when
        the pair failed on the case)."""
        return geomean(self.ratios) if self.ratios else math.nan


def _by_case_and_seed(rows: Sequence[dict]) -> dict[CaseKey, dict[int, list[dict]]]:
    out: dict[CaseKey, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        out[(r["scenario"], r.get("load"))][r["seed"]].append(r)
    return out


def cross_seed_ratios(rows: Sequence[dict]) -> list[CrossSeedRatio]:
    """Each learned pair and the ceiling, case by case, against the heuristic pair picked on the
    case's other seeds (empty where no case has two seeds, or no learned and heuristic pair ran).

    A seed counts only where the picked pair, the measured pair and the seed's best heuristic pair
    all ran ok on it; a case's ratio is over the seeds that count.
    """
    heuristics = {r["scheduler"] for r in rows if is_heuristic_row(r)}
    learned = list(dict.fromkeys(r["scheduler"] for r in rows if is_learned_spec(r["scheduler"])))
    if not heuristics or not learned:
        return []
    out = []
    for (sc, load), by_seed in _by_case_and_seed(rows).items():
        seeds = sorted(by_seed)
        if len(seeds) < 2:
            continue
        per: dict[str, list[tuple[int, str, float]]] = defaultdict(list)
        failed: set[str] = set()
        for s in seeds:
            others = [r for t in seeds if t != s for r in by_seed[t]]
            picked = best_heuristic(next(iter(case_means(others).values())), heuristics)
            here = next(iter(case_means(by_seed[s]).values()))
            best_here = best_heuristic(here, heuristics)
            ref = here.get(picked, PairMean(None, None)) if picked else PairMean(None, None)
            if not (picked and best_here and ref.throughput):
                continue
            per[CEILING].append((s, picked, ref.throughput / (here[best_here].throughput or 1.0)))
            for pair in learned:
                own = here.get(pair, PairMean(None, None)).throughput
                if own is None:  # a failed run: the case counts against the pair, not dropped
                    failed.add(pair)
                else:
                    per[pair].append((s, picked, own / ref.throughput))
        for pair, xs in per.items():
            if pair in failed:
                continue
            seeds_, picks, ratios = zip(*xs, strict=True)
            out.append(CrossSeedRatio(sc, load, pair, tuple(picks), tuple(seeds_), tuple(ratios)))
        if CEILING in per:
            out += [CrossSeedRatio(sc, load, p, (), (), (), failed=True) for p in learned if p in failed]
    return out


def _row(pair: str, mine: list[CrossSeedRatio]) -> tuple[str, ...]:
    xs = sorted(c.ratio for c in mine if not c.failed)
    failed = len(mine) - len(xs)
    shares = (f"{100 * sum(x >= g - _EPS for x in xs) / len(mine):.0f} %" for g in GOALS)
    if not xs:
        return (pair, str(len(mine)), "–", "–", "–", *shares, str(failed))
    return (
        pair,
        str(len(mine)),
        _fmt(geomean(xs)),
        _fmt(xs[0]),
        _fmt(statistics.median(xs)),
        *shares,
        str(failed),
    )


HOW_TO_READ = (
    "The same learned pairs against a reference chosen on other seeds: each seed of a case is "
    "measured against the heuristic pair best (highest mean throughput, ties within {tie} to the "
    "lower latency) on the case's **other** seeds; a case's ratio is the geometric mean over its "
    "seeds. The reference above is picked on the seeds it is measured on, so it keeps every lucky "
    "draw among the heuristic pairs and rises with each one added. The last row is the picked pair "
    "itself against each seed's own best heuristic pair: what a scheduler that knew each case's "
    "best pair from its other seeds would read against the best pair of the seed it runs — the "
    "ceiling, on that reference, of any scheduler that runs one pair per case. Per-case ratios are "
    "in `results.json` (`against_pair_picked_on_other_seeds`). A learned pair with a failed run on a "
    "case has no ratio there and counts against every share (`failed`)."
)
HEAD = ("pair", "cases", "geometric mean", "min", "median", *(f"≥ {g:g}×" for g in GOALS), "failed")


def cross_seed_blocks(ratios: Sequence[CrossSeedRatio]) -> list[Block]:
    """The sub-section (empty when there is nothing to measure)."""
    if not ratios:
        return []
    groups: dict[str, list[CrossSeedRatio]] = defaultdict(list)
    for c in ratios:
        groups[c.pair].append(c)
    order = [p for p in groups if p != CEILING] + ([CEILING] if CEILING in groups else [])
    worst = sorted(groups.get(CEILING, []), key=lambda c: c.ratio)[:3]  # the ceiling never fails
    text = ", ".join(f"{scenario_label(c.scenario, c.load)} {c.ratio:.3f}" for c in worst)
    blocks = [
        Block("h3", "Against the pair chosen on other seeds"),
        Block("p", HOW_TO_READ.format(tie=f"{100 * TIE:.0f} %")),
        Block("table", head=HEAD, rows=tuple(_row(p, groups[p]) for p in order)),
    ]
    if text:
        lowest = f"Where the ceiling is lowest (the best pair changes from seed to seed): {text}."
        blocks.append(Block("p", lowest))
    return blocks
