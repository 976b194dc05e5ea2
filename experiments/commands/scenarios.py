"""``rlsched scenarios [--generated DIR]`` and ``rlsched scenarios generate``: the built-in or a
generated set's scenarios with their offered load and regime, and the scenario generator."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from experiments.commands import values
from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help
from experiments.commands.flags import flag


@dataclass(kw_only=True)
class ScenariosArgs:
    """Options of ``rlsched scenarios``.

    :param generated: list the cases of a set written by 'rlsched scenarios generate' (its folder)
        instead of the built-ins
    """

    generated: str | None = flag(None, path=True, metavar="DIR")


@dataclass(kw_only=True)
class GenerateArgs:
    """Options of ``rlsched scenarios generate``.

    :param family: generate only this family (README "Generated scenarios"; default: every family
        the seed set allows, in turn; test-only families only on test seeds)
    :param count: how many cases
    :param seed: seed of the first case; case i gets seed + i, and all of them must lie in one seed
        set (training 0-9999, validation 10000-19999, test 20000-29999, or other: 30000 and up)
    :param out: folder to write the scenario files, their data and the index cases.json into (new
        or empty)
    """

    family: str | None = None
    count: int = flag(parse=values.COUNT)
    seed: int = flag(parse=values.SEED)
    out: str = flag(path=True)


def run(args: ScenariosArgs, argv: Sequence[str]) -> int:
    """Print the table of the built-ins, or of a generated set's cases."""
    from experiments.suites import scenario_table

    if args.generated is None:
        from rlsched.scenarios.loader import list_scenarios

        print(scenario_table(list_scenarios()))
        return EXIT_OK
    from experiments.scenario_gen.index import read_index

    index = read_index(args.generated)
    files = [str(p) for p in index.paths()]
    extra = [
        ("family", {str(index.path(c)): c.family + ("*" if c.test_only else "") for c in index.cases}),
        ("seed set", {str(index.path(c)): c.seed_set for c in index.cases}),
    ]
    print(scenario_table(files, extra))
    if any(c.test_only for c in index.cases):  # the footnote of a mark the table shows
        print("(* a test-only family: held out from training and validation)")
    return EXIT_OK


def generate(args: GenerateArgs, argv: Sequence[str]) -> int:
    """Write the set; a progress bar on stderr when it is a terminal; print the table."""
    from tqdm import tqdm

    from experiments.scenario_gen.generate import generate_set

    command = shlex.join(["rlsched", *argv])
    with tqdm(total=args.count, desc="cases", unit="case", disable=not sys.stderr.isatty()) as bar:
        index = generate_set(
            Path(args.out), args.count, args.seed, args.family, command, lambda c: bar.update()
        )
    headroom = sum(c.regime == "has headroom" for c in index.cases)
    sets = ", ".join(sorted({c.seed_set for c in index.cases}))
    print(
        f"{len(index.cases)} case{'' if len(index.cases) == 1 else 's'} ({sets} seeds, {headroom} with "
        f"headroom) in {index.folder}; "
        f"list them with: rlsched scenarios --generated {shlex.quote(args.out)}"
    )
    return EXIT_OK


COMMAND = Command(
    "scenarios",
    "list the built-in (or a generated set's) scenarios with their offered load; generate a set",
    ScenariosArgs,
    run,
    exit_help(),
    actions=(
        Command(
            "generate",
            "write a set of random scenarios from the generator's families, with an index",
            GenerateArgs,
            generate,
            exit_help(),
        ),
    ),
)
