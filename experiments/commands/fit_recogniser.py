"""``rlsched fit-recogniser``: the case recogniser behind ``auto``, from evaluation grids."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help
from experiments.commands.flags import flag
from rlsched.errors import InputError

if TYPE_CHECKING:
    from experiments.recogniser_fit import Grid
    from rlsched.policies.recogniser import Recogniser


@dataclass(kw_only=True)
class FitRecogniserArgs:
    """Options of ``rlsched fit-recogniser``.

    :param grid: an 'rlsched evaluate' folder (or its results.json) on training cases and training
        seeds, with the heuristic and learned pairs to choose among; its scenario entries must load
        from the working directory. Repeat it to read several together (more pairs, or the same
        cases at more seeds: a case's label is the mean over all its seeds)
    :param validation_grid: the same pairs on other cases at validation seeds: chooses k and the
        margin (the geometric mean of throughput over each case's best heuristic pair), and the
        table is printed; without it, --k and --margin are used as given. Repeatable as --grid
    :param window: tasks auto observes before it decides
    :param default: the pair auto runs first (it must have run in --grid), and keeps unless
        another is predicted better by --margin
    :param k: training runs averaged per decision (without --validation-grid)
    :param margin: predicted gain (log throughput ratio) a pair needs over --default (without
        --validation-grid)
    :param candidates: how the pairs to choose among are chosen from --grid: count (within 0.99x
        of a case's best on at least 3 training cases, at most 8, most such cases first) or gain
        (greedily the pair that most raises the training cases' geometric mean of the best ratio
        among those chosen, while it rises by 0.002, at most 8); the default pair always
    :param features: all (every feature weighs the same in the distance) or select (features
        chosen greedily on --grid alone, by the leave-one-case-out score of the choice they give;
        the others get weight 0; the steps are printed and kept in meta.json), or select-family
        (the same, leaving out every run of the row's family: features that carry to a kind of
        case the grid does not hold)
    :param families_out: with --validation-grid: score each family of its cases also with the
        recogniser fitted without that family's training cases (leave one family out), beside
        the default pair alone: how it chooses on a kind of case it never saw; printed and kept
        in validation.json
    :param out: output folder (recogniser.json, meta.json, validation.json); use it with
        `--recogniser OUT` or the service's `recogniser_model`
    """

    grid: list[str] = flag(repeat=True, path=True)  # noqa: RUF009 (a required flag: no default)
    validation_grid: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009 (flag() copies it)
    window: int = flag(50, parse=values.int_at_least(2))
    default: str = "ldwp+iawp"
    k: int = flag(10, parse=values.COUNT)
    margin: float = flag(0.0, parse=values.nonneg_float)
    candidates: str = flag("count", choices=("count", "gain"))
    features: str = flag("all", choices=("all", "select", "select-family"))
    families_out: bool = False
    out: str = flag(path=True)


def _grid(paths: Sequence[str], name: str, use: str) -> Grid:
    """The runs of every grid in ``paths`` (named by flag ``name``) together, checked for ``use``."""
    from experiments.recogniser_fit import check_grid_use, read_grid

    for path in paths:
        p = Path(path)
        if not (p / "results.json" if p.is_dir() else p).is_file():
            raise InputError(path, name, "an rlsched evaluate folder or its results.json")
    try:
        grid = read_grid(*paths)
    except (KeyError, ValueError, TypeError) as e:
        raise InputError(", ".join(paths), name, f"an rlsched evaluate results.json ({e})") from None
    check_grid_use(grid, use, name)
    return grid


def _one_or_list(paths: list[str]) -> str | list[str] | None:
    """How meta.json names grids: a path, several, or none."""
    return (paths[0] if len(paths) == 1 else paths) if paths else None


def _families_out(model: Recogniser, validation: Grid) -> list[dict]:
    """Leave one family out (:mod:`experiments.recogniser_unseen`), as validation.json keeps it."""
    from experiments.recogniser_unseen import families_left_out

    rows = [dataclasses.asdict(f) for f in families_left_out(model, validation)]
    return [{k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()} for r in rows]


def _print_families_out(rows: list[dict]) -> None:
    print("  family (left out)   cases  seen    unseen  default alone", file=sys.stderr)
    for r in rows:
        unseen = "-" if r["unseen"] is None else f"{r['unseen']:.4f}"
        line = f"  {r['family']:<19} {r['cases']:>5}  {r['seen']:.4f}  {unseen:<6}  {r['default']:.4f}"
        print(line, file=sys.stderr)


def run(args: FitRecogniserArgs, argv: Sequence[str]) -> int:
    """Fit; choose k and margin on validation; write the folder; print the table."""
    from experiments import recogniser_fit as rf

    t0 = time.perf_counter()
    if args.families_out and not args.validation_grid:
        raise InputError("--families-out", "--families-out", "a --validation-grid to score on", "none given")
    train = _grid(args.grid, "--grid", "training")
    candidates = rf.candidates_by(args.candidates, train, args.default)
    if args.default not in {p for _, p, _ in train.throughput}:
        raise InputError("--default", "--default", "a pair that ran in --grid", args.default)
    model = rf.fit(train, candidates, args.window, args.k, args.margin)
    steps: list[tuple[str, float]] = []
    if args.features in ("select", "select-family"):
        from experiments.recogniser_unseen import case_family

        groups = [case_family(c) for c in model.row_cases] if args.features == "select-family" else None
        weights, steps = rf.select_features(model, groups)
        model = model.with_weights(weights)
        for name, value in steps:
            left_out = "leave-one-family-out" if groups else "leave-one-case-out"
            print(f"  feature {name:<24} {left_out} {value:.4f}", file=sys.stderr)
    table: list[dict] = []
    unseen: list[dict] = []
    if args.validation_grid:
        validation = _grid(args.validation_grid, "--validation-grid", "validation")
        model, scores = rf.tune(model, validation)
        for s in scores:
            table.append({"k": s.k, "margin": s.margin, "geo_mean": round(s.geo_mean, 4),
                          "min": round(min(s.ratios.values()), 4), "cases": len(s.ratios)})  # fmt: skip
        chosen = next(s for s in scores if (s.k, s.margin) == (model.k, model.margin))
        table_picks = {c: list(p) for c, p in chosen.picks.items()}
        if args.families_out:
            unseen = _families_out(model, validation)
    meta = {
        "grid": _one_or_list(args.grid),
        "validation_grid": _one_or_list(args.validation_grid),
        "command": " ".join(["rlsched", *argv]),
        "candidate_rule": args.candidates,
        "feature_rule": args.features,
        "feature_steps": [[n, round(v, 4)] for n, v in steps],
    }
    out = model.save(args.out, meta)
    if table:
        kept = {"scores": table, "picks": table_picks} | ({"families_out": unseen} if unseen else {})
        (out / "validation.json").write_text(json.dumps(kept, indent=1))
        for row in table:
            mark = "*" if (row["k"], row["margin"]) == (model.k, model.margin) else " "
            line = f"{mark} k={row['k']:<3} margin={row['margin']:<5} geo-mean {row['geo_mean']:.4f}"
            print(f"{line}  min {row['min']:.3f}", file=sys.stderr)
        _print_families_out(unseen)
    summary = {
        "out": str(out),
        "candidates": list(model.candidates),
        "training_runs": len(model.rows),
        "k": model.k,
        "margin": model.margin,
        "window": model.window,
        "features": list(model.used_features),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(summary))
    return EXIT_OK


COMMAND = Command(
    "fit-recogniser",
    "fit the case recogniser of the 'auto' scheduler from evaluation grids",
    FitRecogniserArgs,
    run,
    exit_help(),
)
