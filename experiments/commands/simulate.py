"""``rlsched simulate``: one scenario, one scheduler, in the simulator."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import exit_help
from experiments.commands.flags import flag
from experiments.commands.unschedulable import report_unschedulable


@dataclass(kw_only=True)
class SimulateArgs:
    """Options of ``rlsched simulate``.

    :param scenario: built-in name or path of a TOML file, with an optional @RATE or ~LOAD and #TASKS
    :param scheduler: SELECTOR[+PLACER], e.g. mct+mlsm; a bare selector uses 'speedup'
    :param seed: seed for tasks and drift (default: the scenario's)
    :param rate: arrival rate override, tasks/min
    :param json: print one JSON object instead of a table
    :param strict: exit 3 when any task was unschedulable
    :param model: checkpoint directory for the ldwp selector (default: shipped)
    :param placer_model: placer checkpoint for iawp-rl (rlsched train --stage 2; default: shipped)
    :param recogniser: the auto scheduler's recogniser (rlsched fit-recogniser; default: shipped)
    :param rebalance: move tasks that have not started off nodes that stay overloaded or to idle GPU nodes, as
        rlsched serve does
    """

    scenario: str = flag("paper", path=True)
    scheduler: str = "mct"
    seed: int | None = flag(None, parse=values.SEED)
    rate: float | None = flag(None, parse=values.positive_float)
    json: bool = False
    strict: bool = False
    model: str | None = flag(None, path=True)
    placer_model: str | None = flag(None, path=True)
    recogniser: str | None = flag(None, path=True)
    rebalance: bool = False


def run(args: SimulateArgs, argv: Sequence[str]) -> int:
    """Run it; print the metrics (tasks/min in the table, both units in ``--json``)."""
    from experiments import inputs
    from experiments.fit_cache import install
    from experiments.simulate import auto_lines, simulate_run

    install()  # an interference model fitted by an earlier command is read, not fitted again
    # Every input is read and checked here; the run below raises only bugs (exit 1).
    scenario = inputs.scenario(args.scenario, args.rate)
    spec = inputs.scheduler(args.scheduler, "--scheduler")
    options = inputs.policy_options([spec], args.model, args.placer_model, args.recogniser)
    progress = not args.json and sys.stderr.isatty()
    run = simulate_run(scenario, spec, args.seed, progress, options, args.rebalance)
    m = run.metrics
    seed = scenario.seed if args.seed is None else args.seed
    out = {"scenario": scenario.name, "scheduler": args.scheduler, "seed": seed, **m.to_dict()}
    if args.json:
        extra = {"auto": run.auto} if run.auto is not None else {}
        print(json.dumps({**out, "throughput_per_min": m.throughput * 60.0, **extra}))
    else:
        # Tasks per minute, as demo and evaluate report it (--json keeps `throughput` in tasks/s).
        out = {k if k != "throughput" else "throughput_per_min": v for k, v in out.items()}
        out["throughput_per_min"] = m.throughput * 60.0
        if run.auto is not None:  # which pair ran is what a reader of an `auto` run asks first
            out = {
                "scenario": out.pop("scenario"),
                "scheduler": out.pop("scheduler"),
                **dict(auto_lines(run.auto)),
                **out,
            }
        w = max(len(k) for k in out)
        for k, v in out.items():
            print(f"{k:<{w}}  {v:.4g}" if isinstance(v, float) else f"{k:<{w}}  {v}")
    return report_unschedulable(scenario, {seed: m}, args.strict)


COMMAND = Command(
    "simulate",
    "run a scenario in the simulator with one scheduler",
    SimulateArgs,
    run,
    exit_help(strict=True),
)
