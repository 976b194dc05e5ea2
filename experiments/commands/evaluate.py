"""``rlsched evaluate``: schedulers over scenarios and seeds against the capacity bound; a report."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_INCOMPLETE, EXIT_OK, exit_help
from experiments.commands.flags import flag
from experiments.configs import EvalConfig, default
from experiments.suites import SUITE_NAMES, TEST_SEED_BASE, suite


@dataclass(kw_only=True)
class EvaluateArgs:
    """Options of ``rlsched evaluate`` (flags override the suite's).

    :param suite: a prepared evaluation (see README)
    :param scenarios: comma-separated built-in names, scenario files or folders of them (every
        *.toml, sorted; a folder of `rlsched scenarios generate` brings its index); a suffix goes
        on every file of a folder (DIR#200)
    :param schedulers: comma-separated SELECTOR[+PLACER] specs
    :param seeds: number of seeds (default 3)
    :param first_seed: first seed (default: the test set, disjoint from training and validation)
    :param rate: arrival rate override, tasks/min
    :param loads: offered loads, e.g. 0.5,0.7,0.8,0.9,0.95: each scenario runs at the rates that
        give them, and the report plots latency against load
    :param load_of: what --loads are relative to: 'bound' (the LP capacity bound) or
        SELECTOR+PLACER (its knee on each seed: the highest arrival rate it keeps up at, bisected)
    :param model: LDWP checkpoint for ldwp (default: shipped)
    :param placer_model: placer checkpoint for iawp-rl (rlsched train --stage 2; default: shipped)
    :param recogniser: the auto scheduler's recogniser (rlsched fit-recogniser; default: shipped)
    :param jobs: worker processes (default: the cores)
    :param timeout_s: seconds one run may take
    :param runs: NAME=DIR of a training run whose curves to plot (repeatable)
    :param convergence_steps: --suite paper without --runs: DQN steps of each convergence run (0
        skips)
    :param rebalance: move tasks that have not started off nodes that stay overloaded or to idle GPU nodes, as
        rlsched serve does (its rebalance key, on by default there)
    :param resume: keep the runs the --out folder holds from an earlier evaluation (interrupted,
        or with fewer schedulers, seeds or scenarios) that match this one's settings, code and
        models, and run only the rest; without it, a folder holding an evaluation is refused
    :param out: output folder (report.md, report.html, results.*, img/)
    :param json: print the summary as one JSON object instead of lines
    """

    suite: str | None = flag(None, choices=SUITE_NAMES)
    scenarios: str | None = None
    schedulers: str | None = None
    seeds: int | None = flag(None, parse=values.COUNT)
    first_seed: int | None = flag(None, parse=values.SEED, shown=str(TEST_SEED_BASE))
    rate: float | None = flag(None, parse=values.positive_float)
    loads: str | None = None
    load_of: str = default(EvalConfig, "load_of")
    model: str | None = flag(None, path=True)
    placer_model: str | None = flag(None, path=True)
    recogniser: str | None = flag(None, path=True)
    jobs: int | None = flag(None, parse=values.COUNT)
    timeout_s: float = flag(default(EvalConfig, "timeout_s"), name="--timeout", parse=values.positive_float)
    runs: list[str] = flag([], repeat=True)  # noqa: RUF009 (flag() copies the list per instance)
    convergence_steps: int = flag(default(EvalConfig, "convergence_steps"), parse=values.STEPS)
    rebalance: bool = False
    resume: bool = False
    out: str = flag(path=True)
    json: bool = False


def run(args: EvaluateArgs, argv: Sequence[str]) -> int:
    """Run the evaluation; write the report; print its summary. Exit 6 when a run failed or timed
    out: a script must not take a report with holes for a complete one."""
    from experiments.evaluate import evaluate

    # build_config and evaluate's own validate() read every input before the first run.
    cfg = build_config(args, argv)
    summary = evaluate(cfg, args.out, progress=True)
    print(json.dumps(summary) if args.json else "\n".join(summary_lines(summary)))
    return EXIT_INCOMPLETE if summary["failed"] else EXIT_OK


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """What a finished evaluation says on a terminal (``--json``: the same as one object).

    :param summary: what :func:`experiments.evaluate.evaluate` returned.
    """
    kept = (
        f", {summary['kept_runs']} of them kept from the folder's earlier runs"
        if summary["kept_runs"]
        else ""
    )
    notes = [
        f"{summary['failed']} failed (their rows say why; --resume runs them again)"
        if summary["failed"]
        else "none failed",
        f"{summary['above_bound']} above the capacity bound (a bug: please report it)"
        if summary["above_bound"]
        else "none above the capacity bound",
    ]
    if summary["figures_failed"]:
        n = summary["figures_failed"]
        notes.append(f"the figures of {n} scenario{'s' if n > 1 else ''} not drawn (the report names them)")
    out = summary["out"]
    return [
        f"evaluate: {summary['runs']} runs in {summary['wall_s']:.1f} s{kept}; {', '.join(notes)}",
        f"report: {out}/report.html (and report.md; every row in results.json and results.csv)",
    ]


def _split(text: str | None) -> list[str]:
    return [x.strip() for x in (text or "").split(",") if x.strip()]


def build_config(args: EvaluateArgs, argv: Sequence[str]) -> EvalConfig:
    """The evaluation an ``rlsched evaluate`` command line asks for (flags override the suite)."""
    from experiments.evaluate import EvaluateError
    from experiments.evaluation import default_jobs

    scenarios, schedulers, seeds, title = (
        suite(args.suite) if args.suite else ([], [], 3, "rlsched evaluation")
    )
    if args.scenarios is not None:
        scenarios = _split(args.scenarios)  # folders: evaluate() expands them
    if args.schedulers is not None:
        schedulers = _split(args.schedulers)
    if not args.suite and (args.scenarios is None or args.schedulers is None):
        missing = "--scenarios" if args.scenarios is None else "--schedulers"
        raise EvaluateError(missing, "value", "a value: give --suite, or both --scenarios and --schedulers")
    for flag_name, items in (("--scenarios", scenarios), ("--schedulers", schedulers)):
        again = next((x for i, x in enumerate(items) if x in items[:i]), None)
        if again is not None:  # it ran twice and its two runs counted as two seeds
            raise EvaluateError(
                flag_name, "value", "each entry once (a repeat runs twice, as if a seed)", again
            )
    n = seeds if args.seeds is None else args.seeds
    first = TEST_SEED_BASE if args.first_seed is None else args.first_seed
    runs = {}
    for spec in args.runs:
        name, eq, d = spec.partition("=")
        if not eq or not name or not d:
            raise EvaluateError("--runs", "value", "NAME=DIR", spec)
        runs[name] = d
    loads: tuple[float, ...] = ()
    if args.loads is not None:
        from experiments.load_curves import parse_loads

        loads = parse_loads(args.loads)
        if args.rate is not None:
            raise EvaluateError(
                "--rate", "value", "no --rate with --loads (the loads set the rate)", args.rate
            )
    elif args.load_of != "bound":
        raise EvaluateError("--load-of", "value", "--loads beside it", args.load_of)
    return EvalConfig(
        scenarios=scenarios,
        schedulers=schedulers,
        seeds=list(range(first, first + n)),
        rate=args.rate,
        model=args.model,
        placer_model=args.placer_model,
        recogniser=args.recogniser,
        jobs=args.jobs or default_jobs(),
        timeout_s=args.timeout_s,
        runs=runs,
        title=title,
        command=shlex.join(["rlsched", *argv]),
        suite=args.suite,
        convergence_steps=args.convergence_steps,
        loads=loads,
        load_of=args.load_of,
        rebalance=args.rebalance,
        resume=args.resume,
    )


COMMAND = Command(
    "evaluate",
    "compare schedulers over scenarios and seeds against the capacity bound; write a report",
    EvaluateArgs,
    run,
    exit_help(incomplete=True),
)
