"""``rlsched scenarios``: the built-in scenarios with their offered load and regime."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from experiments.commands.command import Command
from experiments.commands.exit_codes import EXIT_OK, exit_help


@dataclass(kw_only=True)
class ScenariosArgs:
    """Options of ``rlsched scenarios`` (none)."""


def run(args: ScenariosArgs, argv: Sequence[str]) -> int:
    """Print the table."""
    from experiments.suites import scenario_table
    from rlsched.scenarios.loader import list_scenarios

    print(scenario_table(list_scenarios()))
    return EXIT_OK


COMMAND = Command(
    "scenarios", "list the built-in scenarios with their offered load", ScenariosArgs, run, exit_help()
)
