"""``rlsched fit-recogniser``: the case recogniser behind ``auto``, from evaluation grids."""

from __future__ import annotations

import dataclasses
import json
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

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
        cases at more seeds: a case's label is the mean over all its seeds). Or --from
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
    :param latency_tie: also label each candidate's mean latency on the training cases; among
        the candidates predicted to tie the chosen pair's throughput within 1 %, auto then runs
        the one of least predicted mean latency
    :param start_from: a fitted recogniser's folder ('shipped': the shipped one) to start from
        instead of --grid: its training
        rows, labels, candidates, default, k and margin are kept (so --window, --default, --k,
        --margin, --candidates and --features stay unset); --validation-grid tunes k and the
        margin again, --far-fallback adds the fallback
    :param far_fallback: a case farther from every training row than a distance chosen on the
        training rows runs the candidate with the best mean training score instead (a kind of
        case not seen); the distance is the one (a percentile of the rows' distance to the
        nearest row of another family, or never) with the best mean of the leave-one-case-out
        and leave-one-family-out scores; the trials are printed and kept in meta.json
    :param out: output folder (recogniser.json, meta.json, validation.json); use it with
        `--recogniser OUT` or the service's `recogniser_model`
    :param json: print the summary as one JSON object instead of lines
    """

    grid: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009 (flag() copies it)
    validation_grid: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009 (flag() copies it)
    window: int = flag(50, parse=values.int_at_least(2))
    default: str = "ldwp+iawp"
    k: int = flag(10, parse=values.COUNT)
    margin: float = flag(0.0, parse=values.nonneg_float)
    candidates: str = flag("count", choices=("count", "gain"))
    features: str = flag("all", choices=("all", "select", "select-family"))
    families_out: bool = False
    latency_tie: bool = False
    start_from: str | None = flag(None, name="--from", path=True, metavar="DIR")
    far_fallback: bool = False
    out: str = flag(path=True)
    json: bool = False


#: Flags that shape a fit from grids, which --from keeps as the recogniser has them.
_FIT_FLAGS: tuple[str, ...] = ("window", "default", "k", "margin", "candidates", "features", "latency_tie")


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
    if not rows:  # no --families-out
        return
    print("  family (left out)   cases  seen    unseen  default alone", file=sys.stderr)
    for r in rows:
        unseen = "-" if r["unseen"] is None else f"{r['unseen']:.4f}"
        line = f"  {r['family']:<19} {r['cases']:>5}  {r['seen']:.4f}  {unseen:<6}  {r['default']:.4f}"
        print(line, file=sys.stderr)


def _fit(args: FitRecogniserArgs) -> tuple[Recogniser, list[tuple[str, float]]]:
    """A recogniser fitted on --grid, with the features --features chooses, and their steps."""
    from experiments import recogniser_fit as rf

    train = _grid(args.grid, "--grid", "training")
    candidates = rf.candidates_by(args.candidates, train, args.default)
    if args.default not in {p for _, p, _ in train.throughput}:
        raise InputError("--default", "value", "a pair that ran in --grid", args.default)
    model = rf.fit(train, candidates, args.window, args.k, args.margin, args.latency_tie)
    steps: list[tuple[str, float]] = []
    if args.features in ("select", "select-family"):
        from experiments.recogniser_unseen import case_family

        groups = [case_family(c) for c in model.row_cases] if args.features == "select-family" else None
        weights, steps = rf.select_features(model, groups)
        model = model.with_weights(weights)
        for name, value in steps:
            left_out = "leave-one-family-out" if groups else "leave-one-case-out"
            print(f"  feature {name:<24} {left_out} {value:.4f}", file=sys.stderr)
    return model, steps


def _start_from(args: FitRecogniserArgs) -> Recogniser:
    """The recogniser --from names, refusing the flags that would shape a new fit."""
    from models.checkpoint import CheckpointError
    from rlsched.policies.recogniser import load_recogniser

    plain = FitRecogniserArgs(out=args.out)
    for name in _FIT_FLAGS:
        if getattr(args, name) != getattr(plain, name):
            flag_text = "--" + name
            raise InputError(
                flag_text, "value", "unset with --from (the recogniser's own is kept)", getattr(args, name)
            )
    try:
        return load_recogniser(args.start_from)
    except CheckpointError as e:
        raise InputError(str(args.start_from), "--from", f"a recogniser folder ({e})") from None


def _meta_from(folder: str, meta: dict, tuned: bool) -> dict:
    """meta.json of a recogniser started --from ``folder``: how that one was fitted (its grids,
    rules and command), where it came from, and the validation grids, if tuned here."""
    src = json.loads((Path(folder) / "meta.json").read_text(encoding="utf-8"))
    kept = {
        k: src[k]
        for k in ("grid", "validation_grid", "candidate_rule", "feature_rule", "feature_steps")
        if k in src
    }
    out = meta | kept | {"from": folder, "from_command": src.get("command")}
    if tuned:
        out["validation_grid"] = meta["validation_grid"]
    return out


def _far_fallback(model: Recogniser) -> tuple[Recogniser, dict]:
    """``model`` with the far fallback chosen on its training rows; the trials as meta.json keeps them."""
    from experiments.recogniser_far import fit_far
    from experiments.recogniser_unseen import case_family

    try:
        model, trials = fit_far(model, [case_family(c) for c in model.row_cases])
    except ValueError as e:
        raise InputError(
            "--far-fallback", "--far-fallback", "training rows of two families or more", str(e)
        ) from None
    print("  far distance (percentile)  seen    unseen  far share  mean", file=sys.stderr)
    for t in trials:
        mark = "*" if t.distance == model.far_distance else " "
        name = "never" if t.percentile is None else f"{t.distance:.3f} (p{t.percentile})"
        print(
            f"{mark} {name:<25} {t.seen:.4f}  {t.unseen:.4f}  {t.far_share:>9.2f}  {t.score:.4f}",
            file=sys.stderr,
        )
    kept = [{"percentile": t.percentile, "distance": None if t.percentile is None else round(t.distance, 4),
             "seen": round(t.seen, 4), "unseen": round(t.unseen, 4), "far_share": round(t.far_share, 4)}
            for t in trials]  # fmt: skip
    return model, {"pair": model.far_pair, "distance": None if model.far_pair is None else model.far_distance,
                   "trials": kept}  # fmt: skip


def run(args: FitRecogniserArgs, argv: Sequence[str]) -> int:
    """Fit (or start --from a fitted one); choose k and margin on validation; add the far
    fallback; write the folder; print the tables."""
    from experiments import recogniser_fit as rf
    from experiments.inputs import unused_output

    t0 = time.perf_counter()
    if args.families_out and not args.validation_grid:
        raise InputError("--families-out", "value", "a --validation-grid to score on", "none given")
    if bool(args.grid) == (args.start_from is not None):
        given = "both" if args.grid else "neither"
        raise InputError(
            "--grid", "--grid", "training grids, or --from a fitted recogniser: one of the two", given
        )
    unused_output(args.out, ("meta.json", "recogniser.json"), "a checkpoint")
    if args.start_from == "shipped":  # the installed package's, wherever it is
        from models import PRETRAINED_RECOGNISER

        args = dataclasses.replace(args, start_from=str(PRETRAINED_RECOGNISER))
    steps: list[tuple[str, float]] = []
    if args.start_from is not None:
        model = _start_from(args)
    else:
        model, steps = _fit(args)
    table: list[dict] = []
    unseen: list[dict] = []
    validation = None
    if args.validation_grid:
        validation = _grid(args.validation_grid, "--validation-grid", "validation")
        model, scores = rf.tune(model, validation)
        for s in scores:
            table.append({"k": s.k, "margin": s.margin, "geo_mean": round(s.geo_mean, 4),
                          "min": round(min(s.ratios.values()), 4), "cases": len(s.ratios)})  # fmt: skip
        chosen = next(s for s in scores if (s.k, s.margin) == (model.k, model.margin))
        table_picks = {c: list(p) for c, p in chosen.picks.items()}
    far: dict | None = None
    if args.far_fallback:
        model, far = _far_fallback(model)
    if validation is not None and args.families_out:
        unseen = _families_out(model, validation)
    meta: dict[str, Any] = {
        "grid": _one_or_list(args.grid),
        "validation_grid": _one_or_list(args.validation_grid),
        "candidate_rule": args.candidates,
        "feature_rule": args.features,
        "feature_steps": [[n, round(v, 4)] for n, v in steps],
    }
    if args.start_from is not None:
        meta = _meta_from(args.start_from, meta, bool(args.validation_grid))
    meta |= {"command": " ".join(["rlsched", *argv])} | ({"far": far} if far else {})
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
        "latency_tie": model.latency is not None,
        "far_pair": model.far_pair,
        "far_distance": None if model.far_pair is None else round(model.far_distance, 4),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(summary) if args.json else "\n".join(summary_lines(summary, model.default)))
    return EXIT_OK


def summary_lines(summary: dict[str, Any], default: str) -> list[str]:
    """What a finished fit says on a terminal: what was fitted, and how to use it.

    :param summary: the fit's summary (``--json`` prints it as it is).
    :param default: the pair ``auto`` runs during its window.
    """
    out = summary["out"]
    lines = [
        f"fit-recogniser: wrote {out} in {summary['seconds']:.1f} s: k={summary['k']}, margin "
        f"{summary['margin']}, a window of {summary['window']} tasks on {default}, "
        f"{summary['training_runs']:,} training runs",
        f"  candidates: {', '.join(summary['candidates'])}",
        f"  features: {', '.join(summary['features'])}",
    ]
    if summary["latency_tie"]:
        lines.append("  where throughputs tie, the candidate with the lower mean latency")
    if summary["far_pair"] is not None:
        lines.append(
            f"  beyond distance {summary['far_distance']} of every training row: {summary['far_pair']}"
        )
    quoted = shlex.quote(out)
    lines.append(
        f"use it with: rlsched simulate --scheduler auto --recogniser {quoted} (or evaluate's "
        f"--recogniser; the service's recogniser_model = {json.dumps(out)})"
    )
    return lines


COMMAND = Command(
    "fit-recogniser",
    "fit the case recogniser of the 'auto' scheduler from evaluation grids",
    FitRecogniserArgs,
    run,
    exit_help(),
)
