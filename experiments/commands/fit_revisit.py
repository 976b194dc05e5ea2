"""``rlsched fit-revisit``: ``auto``'s second decision (keep the running pair, or switch), from runs."""

from __future__ import annotations

import json
import shutil
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
from rlsched.policies.names import REVISIT_AT, REVISIT_TARGETS

if TYPE_CHECKING:
    from rlsched.policies.revisit import Revisit


@dataclass(kw_only=True)
class FitRevisitArgs:
    """Options of ``rlsched fit-revisit``.

    :param recogniser: the recogniser folder whose first decision the runs follow (default: the
        shipped one); --out gets a copy of it with the second decision beside it
    :param cases: a folder of scenario files (training cases); repeatable
    :param seeds: comma-separated training seeds to run each case with
    :param validation_cases: a folder of other scenario files (validation cases); repeatable
    :param validation_seeds: comma-separated validation seeds
    :param validation_grid: an 'rlsched evaluate' folder of the heuristic pairs on the validation
        cases at the validation seeds: each case's best heuristic pair, which k and the margin are
        scored against (geometric mean over cases); repeatable
    :param train_rows: runs collected before (a train-runs.jsonl of an earlier --out) instead of
        running --cases again
    :param validation_rows: the same for the validation runs
    :param at: arrivals after which auto decides a second time
    :param targets: comma-separated pairs it may switch to
    :param k: training runs averaged per decision (without validation)
    :param margin: predicted gain (log throughput ratio) a switch needs (without validation)
    :param jobs: worker processes for the runs
    :param out: output folder: the recogniser, revisit.json, meta.json, the runs, validation.json;
        use it with `--recogniser OUT` or the service's `recogniser_model`
    :param json: print one JSON object instead of lines
    """

    recogniser: str | None = flag(None, path=True)
    cases: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009 (flag() copies it)
    seeds: str = "5000,5001"
    validation_cases: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009
    validation_seeds: str = "10001,10002,10003,10004"
    validation_grid: list[str] = flag([], repeat=True, path=True)  # noqa: RUF009
    train_rows: str | None = flag(None, path=True)
    validation_rows: str | None = flag(None, path=True)
    at: int = flag(REVISIT_AT, parse=values.int_at_least(3))
    targets: str = ",".join(REVISIT_TARGETS)
    k: int = flag(10, parse=values.COUNT)
    margin: float = flag(0.0, parse=values.nonneg_float)
    jobs: int = flag(1, parse=values.COUNT)
    out: str = flag(path=True)
    json: bool = False


def _seeds(text: str, name: str, use: str) -> list[int]:
    from rlsched.seeds import seed_set

    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise InputError(text, name, "comma-separated integers") from None
    for s in seeds:
        if seed_set(s) != use:
            raise InputError(name, "seed", f"{use} seeds only", s, hint=f"{s} is a {seed_set(s)} seed")
    if not seeds:
        raise InputError(text, name, "at least one seed")
    return seeds


def _case_files(folders: Sequence[str], name: str, use: str) -> list[str]:
    from experiments.scenario_gen.index import INDEX_NAME, check_use, read_index

    files = []
    for folder in folders:
        d = Path(folder)
        found = sorted(d.glob("*.toml")) if d.is_dir() else []
        if not found:
            raise InputError(folder, name, "a folder of scenario files")
        if (d / INDEX_NAME).is_file():
            check_use(read_index(d), use, name)
        files += [str(p) for p in found]
    return files


#: Per set: its flags (cases, seeds, rows given) and the runs file written into ``--out``.
_SETS = {
    "training": ("--cases", "--seeds", "--train-rows", "train-runs.jsonl"),
    "validation": ("--validation-cases", "--validation-seeds", "--validation-rows", "validation-runs.jsonl"),
}


def _rows(args: FitRevisitArgs, out: Path, use: str) -> list[dict]:
    """The runs of one set: read from the file given, or run and written into ``out``."""
    from experiments import revisit_runs as rr
    from experiments.revisit_fit import read_rows

    cases_flag, seeds_flag, rows_flag, file = _SETS[use]
    training = use == "training"
    given = args.train_rows if training else args.validation_rows
    if given is not None:
        if not Path(given).is_file():
            raise InputError(given, rows_flag, "a runs file of an earlier --out")
        rows = read_rows(given)
        _seeds(",".join(str(r["seed"]) for r in rows), rows_flag, use)
        return rows
    files = _case_files(args.cases if training else args.validation_cases, cases_flag, use)
    seeds = _seeds(args.seeds if training else args.validation_seeds, seeds_flag, use)
    targets = tuple(t for t in args.targets.split(",") if t)
    jobs = [rr.Job(c, s, args.at, targets, args.recogniser) for c in files for s in seeds]

    tty = sys.stderr.isatty()

    def progress(i: int, n: int) -> None:  # one line redrawn on a terminal; a line each in a log
        if tty:
            print(f"\r{use} runs: {i}/{n}", end="" if i < n else "\n", file=sys.stderr, flush=True)
        else:
            print(f"{use} runs: {i}/{n}", file=sys.stderr, flush=True)

    return rr.collect(jobs, out / file, args.jobs, progress)


def _best(grids: Sequence[str]) -> dict[str, float]:
    """Each validation case's best heuristic pair's mean throughput, by file name."""
    from experiments.commands.fit_recogniser import _grid
    from experiments.report_generalisation import best_heuristic

    grid = _grid(grids, "--validation-grid", "validation")
    out = {}
    for case in grid.cases:
        best = best_heuristic(grid.means[(case, None)], set(grid.heuristics))
        value = grid.pair_mean(case, best) if best else None
        if value:
            out[Path(case).name] = value
    return out


def _start_folder(args: FitRevisitArgs) -> Path:
    """``--out`` with a copy of the recogniser (its ``meta.json`` listing only the recogniser)."""
    from experiments.inputs import unused_output
    from models import PRETRAINED_RECOGNISER
    from models.checkpoint import META, write_meta
    from rlsched.policies.recogniser import MODEL_FILE, load_recogniser

    unused_output(args.out, (META, MODEL_FILE, "revisit.json"), "a checkpoint")
    source = Path(args.recogniser) if args.recogniser is not None else PRETRAINED_RECOGNISER
    load_recogniser(source)  # verified before hours of runs
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_FILE, META):
        shutil.copyfile(source / name, out / name)
    meta = json.loads((out / META).read_text(encoding="utf-8"))
    meta["files"] = {MODEL_FILE: meta["files"][MODEL_FILE]}  # not an older second decision
    write_meta(out, meta)
    return out


def _check_targets(text: str) -> None:
    from rlsched.policies.registry import parse_scheduler

    for t in text.split(","):
        try:
            parse_scheduler(t)
        except ValueError as e:
            raise InputError(t, "--targets", "SELECTOR+PLACER pairs", hint=str(e)) from None


def _validate(args: FitRevisitArgs, model: Revisit, out: Path) -> Revisit:
    """Choose k and the margin on the validation runs; print and write the table."""
    from experiments import revisit_fit as rf

    if not args.validation_grid:
        raise InputError("--validation-grid", "value", "the heuristic pairs' grid there")
    rows, best = _rows(args, out, "validation"), _best(args.validation_grid)
    model, scores = rf.tune(model, rows, best)
    stay = rf.score(None, rows, best)
    table = [
        {"k": s.k, "margin": s.margin, "geo_mean": round(s.geo_mean, 4), "switches": s.switches,
         "min": round(min(s.ratios.values()), 4)}
        for s in scores
    ]  # fmt: skip
    doc = {"never_switch": round(stay.geo_mean, 4), "scores": table}
    (out / "validation.json").write_text(json.dumps(doc, indent=1), encoding="utf-8")
    print(f"  never switch          geo-mean {stay.geo_mean:.4f}", file=sys.stderr)
    for r in table:
        mark = "*" if (r["k"], r["margin"]) == (model.k, model.margin) else " "
        line = f"{mark} k={r['k']:<3} margin={r['margin']:<5} geo-mean {r['geo_mean']:.4f}"
        print(f"{line}  min {r['min']:.3f}  switches {r['switches']}", file=sys.stderr)
    return model


def run(args: FitRevisitArgs, argv: Sequence[str]) -> int:
    """Run (or read) the runs, fit, choose k and margin on validation, write the folder."""
    from experiments import revisit_fit as rf

    t0 = time.perf_counter()
    _check_targets(args.targets)
    if not args.cases and args.train_rows is None:
        raise InputError("--cases", "value", "a folder of training cases (or --train-rows)")
    out = _start_folder(args)
    model = rf.fit(_rows(args, out, "training"), args.at, args.k, args.margin)
    if args.validation_cases or args.validation_rows:
        model = _validate(args, model, out)
    model.save(out)
    summary = {
        "out": str(out),
        "at": model.at,
        "targets": list(model.targets),
        "training_runs": len(model.running),
        "k": model.k,
        "margin": model.margin,
        "seconds": round(time.perf_counter() - t0, 1),
        "command": " ".join(["rlsched", *argv]),
    }
    print(json.dumps(summary) if args.json else "\n".join(_lines(summary)))
    return EXIT_OK


def _lines(summary: dict[str, Any]) -> list[str]:
    """What was fitted, where it went, and how to use it."""
    out = summary["out"]
    return [
        f"fitted auto's second decision at arrival {summary['at']} from {summary['training_runs']} "
        f"training runs in {summary['seconds']:.0f} s: k={summary['k']}, margin={summary['margin']:g}, "
        f"may switch to {', '.join(summary['targets'])}",
        f"wrote {out}; use it with: rlsched simulate --scheduler auto --recogniser {out} "
        f'(the service: recogniser_model = "{out}")',
    ]


COMMAND = Command(
    "fit-revisit",
    "fit the second decision of the 'auto' scheduler (keep its pair or switch) from runs",
    FitRevisitArgs,
    run,
    exit_help(),
)
