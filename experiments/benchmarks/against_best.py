"""Learned pairs from several checkpoints against one grid of heuristic pairs (a script, not a test).

``rlsched evaluate --model DIR`` runs every ``ldwp`` pair with one network, so checkpoints are
compared in several evaluations of the same cases and seeds (runs are deterministic: the same
case, seed and pair give the same figures in any evaluation). This reads each evaluation's
``results.json``, renames its learned pairs after the candidate, puts them beside the heuristic pairs of
the first, and prints each one's throughput ratio to the best heuristic pair of each case
(:mod:`experiments.report_generalisation`): geometric mean, min, median, the shares at >= 0.99x
and >= 0.97x, and the mean-latency ratio where throughputs tie.

``--pick-on`` names a grid of the same cases on *other* seeds (validation seeds): each case's best
heuristic pair is then the one best there, and its figures come from ``--grid``. The best of 25
pairs picked on the seeds it is measured on is the maximum of 25 noisy means, biased upwards;
picked on other seeds, it is an honest estimate of what choosing a heuristic per case gives.

    python -m experiments.benchmarks.against_best --grid val-grid/results.json \\
        --candidate shipped=val-grid/results.json --candidate bc=val-bc/results.json
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import statistics
import sys
from pathlib import Path

from experiments.report_generalisation import (
    PairMean,
    best_heuristic,
    by_learned,
    case_means,
    case_ratios,
    is_heuristic_row,
    latency_summary,
    throughput_summary,
)
from rlsched.policies.registry import is_learned_spec


def _rows(path: str) -> list[dict]:
    return list(json.loads(Path(path).read_text())["rows"])


def merged_rows(grid: str, candidates: list[tuple[str, str]]) -> list[dict]:
    """The heuristic rows of ``grid`` and every candidate's learned rows, renamed after it
    (``ldwp+iawp`` of ``bc`` is ``ldwp+iawp@bc``; ``mct+iawp-rl`` of ``bc`` is ``mct@bc+iawp-rl``).

    :param grid: a ``results.json`` holding the heuristic pairs.
    :param candidates: (name, ``results.json``) of each checkpoint's evaluation.
    """
    rows = [r for r in _rows(grid) if is_heuristic_row(r)]
    for name, path in candidates:
        for r in _rows(path):
            if is_learned_spec(r["scheduler"]):
                rows.append({**r, "scheduler": _renamed(r["scheduler"], name)})
    return rows


def _renamed(spec: str, name: str) -> str:
    """``spec`` marked with ``name`` on its heuristic part, so that it stays a learned spec."""
    sel, _, plc = spec.partition("+")
    if is_learned_spec(sel):
        return f"{sel}+{plc}@{name}" if plc else f"{sel}+@{name}"
    return f"{sel}@{name}+{plc}"


def picked_ratios(rows: list[dict], pick_rows: list[dict]) -> dict[str, list[tuple[float, str]]]:
    """Each learned pair's throughput ratio, case by case, to the heuristic pair that was best on
    that case in ``pick_rows`` (other seeds), measured in ``rows``; with that pair's name.

    :param rows: heuristic and learned rows of the measured seeds.
    :param pick_rows: heuristic rows of the same cases on the seeds that pick.
    """
    heur = {r["scheduler"] for r in pick_rows if is_heuristic_row(r)}
    picked = {k: best_heuristic(m, heur) for k, m in case_means(pick_rows).items()}
    out: dict[str, list[tuple[float, str]]] = {}
    for key, means in case_means(rows).items():
        pair = picked.get(key)
        ref = means.get(pair, PairMean(None, None)) if pair else PairMean(None, None)
        for spec, own in means.items():
            if is_learned_spec(spec) and own.throughput is not None and ref.throughput:
                out.setdefault(spec, []).append((own.throughput / ref.throughput, str(pair)))
    return out


def pick_ceiling(rows: list[dict], pick_rows: list[dict]) -> list[float]:
    """Case by case, the throughput of the heuristic pair best in ``pick_rows`` (other seeds) over
    that of the best heuristic pair in ``rows``: what a scheduler that knew each case's best pair
    from other seeds of the same case would read, the ceiling of choosing one pair per case.

    :param rows: heuristic rows of the measured seeds.
    :param pick_rows: heuristic rows of the same cases on the seeds that pick.
    """
    heur = {r["scheduler"] for r in pick_rows if is_heuristic_row(r)}
    picked = {k: best_heuristic(m, heur) for k, m in case_means(pick_rows).items()}
    measured = {r["scheduler"] for r in rows if is_heuristic_row(r)}
    out = []
    for key, means in case_means(rows).items():
        best, pair = best_heuristic(means, measured), picked.get(key)
        if best and pair and means.get(pair, PairMean(None, None)).throughput is not None:
            out.append((means[pair].throughput or 0.0) / (means[best].throughput or 1.0))
    return out


def _geomean(xs: tuple[float, ...]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--grid", required=True, help="results.json with the heuristic pairs")
    p.add_argument("--candidate", action="append", default=[], help="NAME=results.json (repeatable)")
    p.add_argument("--pick-on", help="results.json of the same cases on other seeds, to pick on")
    args = p.parse_args(argv)
    shown = shlex.join(sys.argv[1:] if argv is None else argv)
    print(f"$ python -m experiments.benchmarks.against_best {shown}")
    candidates = [(c.partition("=")[0], c.partition("=")[2]) for c in args.candidate]
    ratios = case_ratios(merged_rows(args.grid, candidates))
    head = "| pair@checkpoint | cases | geometric mean | min | median | >= 0.99x | >= 0.97x |"
    print(head + " latency <= 1.05x where tied |")
    print("|---|---|---|---|---|---|---|---|")
    for pair, mine in by_learned(ratios).items():
        t, lat = throughput_summary(mine), latency_summary(mine)
        if not t.ratios:  # a run failed, or the pair did not run on every seed of any case
            print(f"| {pair} | {t.cases} | no case with every seed ok | | | | | |")
            continue
        tied = f"{lat.share(at_most=1.05):.0%} of {lat.cases}" if lat.cases else "none tied"
        print(
            f"| {pair} | {t.cases} | {_geomean(t.ratios):.3f} | {min(t.ratios):.3f} | {t.median():.3f} "
            f"| {t.share(0.99):.0%} | {t.share(0.97):.0%} | {tied} |"
        )
    if args.pick_on:
        ceiling = pick_ceiling(merged_rows(args.grid, candidates), _rows(args.pick_on))
        print(_summary_row("best pair of --pick-on (ceiling of one pair per case)", ceiling) + " |")
        _print_picked(merged_rows(args.grid, candidates), _rows(args.pick_on))
    return 0


def _print_picked(rows: list[dict], pick_rows: list[dict]) -> None:
    print(f"\nagainst the heuristic pair best on each case in --pick-on ({len(pick_rows)} runs)")
    print("| pair@checkpoint | cases | geometric mean | min | median | >= 0.99x | >= 0.97x |")
    print("|---|---|---|---|---|---|---|")
    for spec, pairs in picked_ratios(rows, pick_rows).items():
        print(_summary_row(spec, [x for x, _ in pairs]))


def _summary_row(name: str, ratios: list[float]) -> str:
    """A table row: cases, geometric mean, min, median and the shares at >= 0.99x and >= 0.97x."""
    xs = sorted(ratios)
    n = len(xs)
    return (
        f"| {name} | {n} | {_geomean(tuple(xs)):.3f} | {xs[0]:.3f} | {statistics.median(xs):.3f} "
        f"| {sum(x >= 0.99 for x in xs) / n:.0%} | {sum(x >= 0.97 for x in xs) / n:.0%} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
