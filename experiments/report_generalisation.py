"""The report's section "Against the best heuristic pair": each learned pair, case by case, against
the heuristic pair that did best on that case.

A *learned* pair runs a trained network (:func:`rlsched.policies.registry.is_learned_spec`); a
*heuristic* pair is any other that is not a clairvoyant reference. A *case* is one scenario entry
(at one offered load under ``--loads``). On each case every pair's throughput and mean latency are
averaged over the seeds; the *best heuristic pair* is the heuristic pair with the highest mean
throughput, ties within :data:`TIE` going to the lower mean latency. Each learned pair's ratios
to it, one per case, are what this section summarises, draws and writes into ``results.json``.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.case_folders import CaseInfo, split_suffix
from experiments.report_stats import ARRIVAL_BOUND
from experiments.report_writer import Block, _fmt
from rlsched.policies.registry import is_clairvoyant_spec, is_learned_spec
from rlsched.seeds import caption, seed_set

#: Throughputs within this share of each other tie.
TIE = 0.01
#: Throughput ratios whose share of cases the section gives (at least this).
THROUGHPUT_GOALS = (0.99, 0.97)
#: Mean-latency ratio whose share of tied cases the section gives (at most this).
LATENCY_GOAL = 1.05
#: Worst cases named per learned pair.
WORST = 5
#: Slack on comparisons of ratios, so that a ratio of exactly 0.99 counts as 0.99.
_EPS = 1e-9

CaseKey = tuple[str, float | None]  # (scenario entry, offered load under --loads, else None)


@dataclass(frozen=True)
class PairMean:
    """One pair on one case: means over the seeds, ``None`` unless it ran ok on every seed that
    any pair ran on the case.

    :param throughput: mean throughput, tasks/s.
    :param latency_mean_s: mean of the runs' mean latencies, s.
    """

    throughput: float | None
    latency_mean_s: float | None


@dataclass(frozen=True)
class CaseRatio:
    """A learned pair against the best heuristic pair on one case (the ``results.json`` record).

    :param scenario: the scenario entry.
    :param load: the offered load under ``--loads`` (``None``: the scenario's own rate).
    :param learned: the learned pair.
    :param best_heuristic: the best heuristic pair (``None``: no heuristic ran ok on every seed).
    :param throughput: the learned pair's mean throughput, tasks/s (``None``: a run failed).
    :param best_throughput: the best heuristic pair's, tasks/s.
    :param throughput_ratio: the first over the second.
    :param ties: the throughputs are within :data:`TIE` of each other.
    :param latency_ratio: mean latency over the best heuristic pair's, where they tie.
    :param family: the case's generator family, where its folder's index gives it.
    :param seed_set: the case's seed set, where its folder's index gives it.
    :param test_only: the case's family is held out from training and validation (index).
    :param offered_load: the case's offered load as run (arrivals over the capacity bound, the
        mean over seeds; ``None`` where no bound was computed).
    """

    scenario: str
    load: float | None
    learned: str
    best_heuristic: str | None
    throughput: float | None
    best_throughput: float | None
    throughput_ratio: float | None
    ties: bool
    latency_ratio: float | None
    family: str | None = None
    seed_set: str | None = None
    test_only: bool | None = None
    offered_load: float | None = None

    @property
    def arrival_bound(self) -> bool:
        """Every reasonable scheduler completes what arrives (the Headroom section's word): the
        throughput ratio measures the last tasks' tail there, not the scheduler."""
        return self.offered_load is not None and self.offered_load < ARRIVAL_BOUND


def is_heuristic_row(row: dict) -> bool:
    """Whether a row's pair is a heuristic: not learned, and not a clairvoyant reference (by its
    run's own mark or by its name)."""
    spec = row["scheduler"]
    return not is_learned_spec(spec) and not row.get("clairvoyant") and not is_clairvoyant_spec(spec)


def applies(rows: Sequence[dict]) -> bool:
    """Whether the section belongs in the report: at least one learned and one heuristic pair."""
    return any(is_learned_spec(r["scheduler"]) for r in rows) and any(is_heuristic_row(r) for r in rows)


def geomean(xs: Sequence[float]) -> float:
    """The geometric mean of ratios (0 when one is 0: a pair that completed nothing on a seed).

    :raises ValueError: when ``xs`` is empty."""
    if min(xs) <= 0:
        return 0.0
    return math.exp(statistics.fmean(math.log(x) for x in xs))


def _mean(values: list) -> float | None:
    if not values or any(v is None or v != v for v in values):
        return None
    return float(statistics.fmean(values))


def case_means(rows: Sequence[dict]) -> dict[CaseKey, dict[str, PairMean]]:
    """Every pair's means over the seeds, by case (in the rows' order)."""
    runs: dict[CaseKey, dict[str, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        runs[(r["scenario"], r.get("load"))][r["scheduler"]].append(r)
    out: dict[CaseKey, dict[str, PairMean]] = {}
    for key, by_pair in runs.items():
        out[key] = {}
        seeds = {r["seed"] for rs in by_pair.values() for r in rs}
        for pair, rs in by_pair.items():
            # Means over the same seeds for every pair, or none.
            ok = all(r["status"] == "ok" for r in rs) and {r["seed"] for r in rs} == seeds
            thr = _mean([r["throughput"] for r in rs]) if ok else None
            lat = _mean([r["latency_mean_s"] for r in rs]) if ok else None
            out[key][pair] = PairMean(thr, lat)
    return out


def best_heuristic(means: Mapping[str, PairMean], heuristics: set[str]) -> str | None:
    """The heuristic pair with the highest mean throughput; among those within :data:`TIE` of it,
    the one with the lowest mean latency (a pair without one last). ``None`` when no heuristic
    ran ok on every seed.

    :param means: every pair's means on one case.
    :param heuristics: the heuristic pairs.
    """
    ran = {p: m for p, m in means.items() if p in heuristics and m.throughput is not None}
    if not ran:
        return None
    top = max(m.throughput or 0.0 for m in ran.values())
    tied = [p for p, m in ran.items() if (m.throughput or 0.0) >= (1 - TIE) * top - _EPS]

    def latency(p: str) -> tuple[bool, float]:
        lat = ran[p].latency_mean_s
        return lat is None, lat if lat is not None else 0.0

    return min(tied, key=latency)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def case_ratios(rows: Sequence[dict], info: Mapping[str, CaseInfo] | None = None) -> list[CaseRatio]:
    """Each learned pair's ratios to the best heuristic pair, case by case (empty unless
    :func:`applies`).

    :param rows: the evaluation's rows (``report_writer.build_rows``).
    :param info: what the folders' indexes say of each scenario entry.
    """
    if not applies(rows):
        return []
    info = info or {}
    heuristics = {r["scheduler"] for r in rows if is_heuristic_row(r)}
    learned = list(dict.fromkeys(r["scheduler"] for r in rows if is_learned_spec(r["scheduler"])))
    loads = _offered_loads(rows)
    out = []
    for (sc, load), means in case_means(rows).items():
        best = best_heuristic(means, heuristics)
        ref = means[best] if best else PairMean(None, None)
        case = info.get(sc, CaseInfo())
        for pair in learned:
            own = means.get(pair, PairMean(None, None))
            thr = _ratio(own.throughput, ref.throughput)
            ties = thr is not None and abs(thr - 1.0) <= TIE + _EPS
            lat = _ratio(own.latency_mean_s, ref.latency_mean_s) if ties else None
            values = (own.throughput, ref.throughput, thr, ties, lat)
            known = (case.family, case.seed_set, case.test_only, loads.get((sc, load)))
            out.append(CaseRatio(sc, load, pair, best, *values, *known))
    return out


def _offered_loads(rows: Sequence[dict]) -> dict[CaseKey, float]:
    """Each case's offered load as run: the mean over its seeds of the bound's (one per seed)."""
    per_seed: dict[CaseKey, dict[int, float]] = defaultdict(dict)
    for r in rows:
        x = r.get("bound_offered_load")
        if x is not None and x == x:
            per_seed[(r["scenario"], r.get("load"))].setdefault(r["seed"], float(x))
    return {k: statistics.fmean(v.values()) for k, v in per_seed.items()}


@dataclass(frozen=True)
class RatioSummary:
    """One learned pair's ratios over the cases that have a best heuristic pair.

    :param cases: the cases counted.
    :param failed: of them, those where the learned pair has no mean (a run failed): they count
        against every share.
    :param ratios: the ratios of the rest, sorted.
    """

    cases: int
    failed: int
    ratios: tuple[float, ...]

    def share(self, at_least: float | None = None, at_most: float | None = None) -> float | None:
        """Share of the cases whose ratio is ``>= at_least`` (or ``<= at_most``)."""
        if not self.cases:
            return None
        if at_least is not None:
            return sum(x >= at_least - _EPS for x in self.ratios) / self.cases
        return sum(x <= (at_most or 0.0) + _EPS for x in self.ratios) / self.cases

    def median(self) -> float | None:
        return float(statistics.median(self.ratios)) if self.ratios else None


def throughput_summary(ratios: Sequence[CaseRatio]) -> RatioSummary:
    """Throughput ratios of one learned pair, over its cases with a best heuristic pair."""
    mine = [c for c in ratios if c.best_heuristic is not None]
    xs = sorted(c.throughput_ratio for c in mine if c.throughput_ratio is not None)
    return RatioSummary(len(mine), len(mine) - len(xs), tuple(xs))


def latency_summary(ratios: Sequence[CaseRatio]) -> RatioSummary:
    """Mean-latency ratios of one learned pair, over the cases where throughputs tie."""
    mine = [c for c in ratios if c.ties]
    xs = sorted(c.latency_ratio for c in mine if c.latency_ratio is not None)
    return RatioSummary(len(mine), len(mine) - len(xs), tuple(xs))


def worst_cases(ratios: Sequence[CaseRatio], n: int = WORST) -> list[CaseRatio]:
    """The ``n`` cases of lowest throughput ratio (failed runs first), of one learned pair."""
    mine = [c for c in ratios if c.best_heuristic is not None]
    return sorted(mine, key=lambda c: -1.0 if c.throughput_ratio is None else c.throughput_ratio)[:n]


def by_learned(ratios: Sequence[CaseRatio]) -> dict[str, list[CaseRatio]]:
    """The ratios grouped by learned pair, in order of first appearance."""
    out: dict[str, list[CaseRatio]] = defaultdict(list)
    for c in ratios:
        out[c.learned].append(c)
    return dict(out)


def case_label(c: CaseRatio) -> str:
    """A case as a reader knows it: the scenario file's name (or built-in name), and its load."""
    return scenario_label(c.scenario, c.load)


def scenario_label(scenario: str, load: float | None) -> str:
    """A scenario entry (at an offered load) as a reader knows it."""
    name, suffix = split_suffix(scenario)
    label = Path(name).name + suffix
    return label if load is None else f"{label} at load {load:g}"


# ---- the section -----------------------------------------------------------------------------------
HOW_TO_READ = (
    "A **learned** pair runs a trained network (selector `ldwp` or placer `iawp-rl`) or `auto` (a "
    "fitted recogniser choosing among heuristic pairs); a "
    "**heuristic** pair is any other, except clairvoyant references such as `oracle` (they read the"
    " simulator's ground truth). A case is one scenario file (at one offered load under `--loads`)."
    " On each case every pair's throughput and mean latency are averaged over the seeds; the **best"
    " heuristic pair** of a case is the heuristic pair with the highest mean throughput, ties "
    "within {tie} going to the lower mean latency (a heuristic pair with a failed run on a case is "
    "not a candidate there). Each learned pair's throughput ratio is its mean throughput over the "
    "best heuristic pair's on the same case; where the two are within {tie} (they tie), its latency"
    " ratio is its mean latency over the best heuristic pair's. A learned pair with a failed run on"
    " a case has no ratio there and counts against every share (`failed`). The figure draws every "
    "case's ratio, sorted (an empirical CDF); the per-case ratios are in `results.json` "
    "(`against_best_heuristic`)."
)
THROUGHPUT_HEAD = (
    "learned pair",
    "cases",
    "min",
    "median",
    *(f"≥ {g:g}×" for g in THROUGHPUT_GOALS),
    "failed",
)
LATENCY_HEAD = ("learned pair", "cases tied", "min", "median", "max", f"≤ {LATENCY_GOAL:g}×", "failed")
WORST_HEAD = (
    "learned pair",
    "case",
    "family",
    "seed set",
    "offered load",
    "best heuristic pair",
    "throughput ratio",
    "latency ratio",
)


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _share(s: RatioSummary, at_least: float | None = None, at_most: float | None = None) -> str:
    x = s.share(at_least, at_most)
    if x is None:
        return "–"
    hits = round(x * s.cases)
    return f"{_pct(x)} ({hits}/{s.cases})"


def _cells(s: RatioSummary) -> tuple[str, str, str]:
    """Cases, least ratio, median ratio."""
    return str(s.cases), _fmt(s.ratios[0] if s.ratios else None), _fmt(s.median())


def _seed_text(ratios: Sequence[CaseRatio], seeds: Sequence[int]) -> str:
    text = f"Runs on seeds {list(seeds)} ({caption(list(seeds))})."
    used = sorted({seed_set(s) for s in seeds} & {"training", "validation"})
    if used:
        text += (
            f" **The runs use {' and '.join(used)} seeds**: learning trains on training seeds and"
            " chooses its checkpoints on validation seeds, so a learned pair's ratios on them are"
            " not a measure of how it does on runs it never saw; that is the test set's"
            " (`--first-seed 20000`)."
        )
    per_case = {c.scenario: c.seed_set for c in ratios}
    sets = Counter(s for s in per_case.values() if s)
    if not sets:
        return text + " The cases carry no index (`cases.json`): their family and seed set are not known."
    told = ", ".join(f"{name} ({n})" for name, n in sorted(sets.items()))
    held = len({c.scenario for c in ratios if c.test_only})
    seen = sum(n for name, n in sets.items() if name != "test")
    caution = (
        f" **{seen} of these cases are training or validation cases**: what was trained or chosen on"
        " them scores well there by construction, so their ratios do not say how a pair does on"
        " a case it never saw; that is the test set's (`rlsched scenarios generate --seed 20000`"
        " and up)."
        if seen
        else ""
    )
    return (
        text + f" Cases by seed set, from their folders' index (`cases.json`): {told}; "
        f"{sum(sets.values())} of {len(per_case)} cases indexed, {held} from families held out "
        f"from training and validation.{caution}"
    )


def _best_text(ratios: Sequence[CaseRatio]) -> str:
    best = Counter(b for b in dict((c.scenario, c.best_heuristic) for c in ratios).values() if b)
    if not best:
        return "No heuristic pair ran ok on every seed of any case: there is nothing to compare with."
    parts = [f"`{p}` on {n}" for p, n in best.most_common()]
    return f"Best heuristic pair: {', '.join(parts)} of {sum(best.values())} cases."


def generalisation_blocks(ratios: Sequence[CaseRatio], seeds: Sequence[int], out: Path) -> list[Block]:
    """The section: definitions, the seed sets, the ratio tables and figure, the worst cases.

    :param ratios: :func:`case_ratios` of the evaluation (empty: no section).
    :param seeds: the seeds every pair ran.
    :param out: the report's folder (the figure goes in ``img/``).
    """
    if not ratios:
        return []
    from experiments import report_plots as plots  # matplotlib: imported when a figure is drawn

    groups = by_learned(ratios)
    thr = {p: throughput_summary(rs) for p, rs in groups.items()}
    lat = {p: latency_summary(rs) for p, rs in groups.items()}
    thr_rows = _throughput_rows(thr)
    lat_rows = tuple(
        (
            p,
            *_cells(s),
            _fmt(s.ratios[-1] if s.ratios else None),
            _share(s, at_most=LATENCY_GOAL),
            str(s.failed),
        )
        for p, s in lat.items()
    )
    fig = plots.ratio_ecdf(
        out / "img" / "against-best-heuristic.png",
        "Learned pairs against the best heuristic pair of each case",
        [
            (
                "throughput ratio to the best heuristic pair",
                {p: (s.ratios, s.cases) for p, s in thr.items()},
                THROUGHPUT_GOALS,
            ),
            (
                f"mean-latency ratio (throughputs tied within {_pct(TIE)})",
                {p: (s.ratios, s.cases) for p, s in lat.items()},
                (LATENCY_GOAL,),
            ),
        ],
    )
    worst = tuple(
        (
            p,
            case_label(c),
            c.family or "–",
            c.seed_set or "–",
            _load_cell(c),
            c.best_heuristic or "–",
            "failed" if c.throughput_ratio is None else _fmt(c.throughput_ratio),
            _fmt(c.latency_ratio),
        )
        for p, rs in groups.items()
        for c in worst_cases(rs)
    )
    return [
        Block("h2", "Against the best heuristic pair"),
        Block("p", HOW_TO_READ.format(tie=_pct(TIE))),
        Block("p", _seed_text(ratios, seeds) + " " + _best_text(ratios)),
        Block(
            "p", "Throughput ratio to the best heuristic pair, over the cases (share of cases at or above):"
        ),
        Block("table", head=THROUGHPUT_HEAD, rows=thr_rows),
        *_headroom_only_blocks(groups),
        Block(
            "p",
            f"Mean-latency ratio to the best heuristic pair, over the cases where throughputs tie within "
            f"{_pct(TIE)} (share of those cases at or below):",
        ),
        Block("table", head=LATENCY_HEAD, rows=lat_rows),
        Block(
            "img", text=fig.relative_to(out).as_posix(), head=("ratios to the best heuristic pair, by case",)
        ),
        Block(
            "p",
            f"Worst cases: the {WORST} lowest throughput ratios of each learned pair (failed runs first), "
            "with the best heuristic pair of each; latency ratio only where throughputs tie.",
        ),
        Block("table", head=WORST_HEAD, rows=worst),
    ]


def _throughput_rows(thr: Mapping[str, RatioSummary]) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (p, *_cells(s), *(_share(s, at_least=g) for g in THROUGHPUT_GOALS), str(s.failed))
        for p, s in thr.items()
    )


def _load_cell(c: CaseRatio) -> str:
    if c.offered_load is None:
        return "–"
    return f"{c.offered_load:.2f}" + (" (arrival-bound)" if c.arrival_bound else "")


def _headroom_only_blocks(groups: Mapping[str, list[CaseRatio]]) -> list[Block]:
    """The throughput table again over the cases with headroom, where some are arrival-bound:
    there every reasonable scheduler completes what arrives, and a throughput ratio measures when
    the last tasks finished on the seeds drawn, not the scheduler."""
    bound = {(c.scenario, c.load) for rs in groups.values() for c in rs if c.arrival_bound}
    if not bound:
        return []
    kept = {p: throughput_summary([c for c in rs if not c.arrival_bound]) for p, rs in groups.items()}
    n = len({(c.scenario, c.load) for rs in groups.values() for c in rs}) - len(bound)
    return [
        Block(
            "p",
            f"{len(bound)} of these cases {'is' if len(bound) == 1 else 'are'} arrival-bound "
            f"(offered load under {ARRIVAL_BOUND:g}: "
            "every reasonable scheduler completes what arrives, and a throughput ratio there "
            "measures when the last tasks finished on the seeds drawn, not the scheduler; the "
            "latency table below judges those whose throughputs tie). The same over the "
            f"{n} case{'' if n == 1 else 's'} with headroom:",
        ),
        Block("table", head=THROUGHPUT_HEAD, rows=_throughput_rows(kept)),
    ]
