"""``rlsched interference fit | evaluate``: the co-location interference model."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help
from experiments.commands.flags import flag


@dataclass(kw_only=True)
class FitArgs:
    """Options of ``rlsched interference fit``.

    :param data: device,kind,partner,norm_throughput CSV (repeatable)
    :param method: model
    :param seed: seeds the fit
    :param out: checkpoint directory to write
    :param json: print one JSON object instead of lines
    """

    data: list[str] = flag(repeat=True, path=True)  # noqa: RUF009 (a required flag: no default)
    method: str = flag("ncf", choices=("ncf", "svd", "mean"))
    seed: int = flag(0, parse=values.SEED)
    out: str = flag(path=True)
    json: bool = False


@dataclass(kw_only=True)
class ScoreArgs:
    """Options of ``rlsched interference evaluate``.

    :param model: checkpoint directory written by 'interference fit'
    :param data: device,kind,partner,norm_throughput CSV
    :param json: print one JSON object instead of a table
    """

    model: str = flag(path=True)
    data: str = flag(path=True)
    json: bool = False


def fit(args: FitArgs, argv: Sequence[str]) -> int:
    """Fit and save; print what was fitted. (The readers of ``--data`` name the file and field.)"""
    from experiments import interference_cli as ix
    from experiments.inputs import unused_output

    unused_output(args.out, ("meta.json", "weights.pt"), "a checkpoint")  # an earlier fit, or a network
    summary = ix.fit(args.data, args.method, args.seed, args.out)
    print(json.dumps(summary) if args.json else "\n".join(ix.fit_lines(summary)))
    return EXIT_OK


def score(args: ScoreArgs, argv: Sequence[str]) -> int:
    """The saved model's error on a co-location CSV."""
    from experiments import interference_cli as ix

    scores = ix.score(args.model, args.data)
    print(json.dumps(scores) if args.json else ix.format_scores(scores))
    return EXIT_OK


COMMAND = Command(
    "interference",
    "co-location interference model: fit, evaluate",
    actions=(
        Command("fit", "fit a model on co-location CSVs and save it", FitArgs, fit, exit_help()),
        Command("evaluate", "error of a saved model on a co-location CSV", ScoreArgs, score, exit_help()),
    ),
)
