"""The commands of ``rlsched``, one module each, and the parser generated from them.

Each command module holds the dataclass of its options (every flag written once, as a field with
its help in the docstring: :mod:`experiments.commands.flags`) and the function that runs it;
:data:`COMMANDS` is the dispatch table. The modules import nothing heavy at start-up: a command's
work is imported when it runs.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Sequence
from typing import Any

from experiments.commands import (
    admin,
    client,
    demo,
    evaluate,
    finetune,
    fit_recogniser,
    fit_revisit,
    interference,
    profile,
    scenarios,
    serve,
    simulate,
    train,
)
from experiments.commands.command import Command
from experiments.commands.exit_codes import BACKEND, EXIT_MEANING, EXIT_UNAVAILABLE, exit_help
from experiments.commands.flags import add_flags, flag_name, to_args
from experiments.commands.version import VersionAction

#: Every command, in the order ``rlsched --help`` lists them.
COMMANDS: tuple[Command, ...] = (
    simulate.COMMAND,
    train.COMMAND,
    fit_recogniser.COMMAND,
    fit_revisit.COMMAND,
    demo.COMMAND,
    finetune.COMMAND,
    scenarios.COMMAND,
    serve.COMMAND,
    *client.COMMANDS,
    *admin.COMMANDS,
    evaluate.COMMAND,
    interference.COMMAND,
    profile.COMMAND,
)

__all__ = ["BACKEND", "COMMANDS", "Command", "parse", "parser"]


def _add(sub: Any, cmd: Command, path: tuple[str, ...], within: Command | None = None) -> None:
    p = sub.add_parser(cmd.name, help=cmd.help, epilog=cmd.epilog)
    if cmd.options is not None:
        if within is not None and within.options is not None:
            shared = _names(within.options) & _names(cmd.options)
            assert not shared, f"{within.name} {cmd.name}: options named as its command's: {shared}"
        add_flags(p, cmd.options)
        # An action's parser sets these after its command's, so the action wins.
        p.set_defaults(_command=cmd, _within=within)
    if cmd.actions:
        dest = "_" + "_".join((*path, cmd.name))
        actions = p.add_subparsers(dest=dest, required=cmd.run is None, metavar="ACTION")
        for action in cmd.actions:
            _add(actions, action, (*path, cmd.name), cmd if cmd.options is not None else None)


def parser() -> argparse.ArgumentParser:
    """The ``rlsched`` parser: one sub-parser per command, its flags generated from its options."""
    p = argparse.ArgumentParser(
        prog="rlsched",
        description="Learning scheduler for heterogeneous GPU clusters.",
        epilog=exit_help(
            strict=True, unavailable=EXIT_MEANING[EXIT_UNAVAILABLE], refused=True, incomplete=True
        ),
    )
    p.add_argument(
        "--version", action=VersionAction, help="show the version and the shipped models, and exit"
    )
    sub = p.add_subparsers(dest="command", required=True)
    for cmd in COMMANDS:
        _add(sub, cmd, ())
    return p


def parse(argv: Sequence[str]) -> tuple[Command, Any]:
    """The command ``argv`` names and its options (argparse exits 2 with usage on a bad line).

    :param argv: the arguments after ``rlsched``.
    """
    p = parser()
    ns = p.parse_args(argv)
    cmd: Command = ns._command
    assert cmd.options is not None
    within: Command | None = ns._within
    if within is not None and within.options is not None:
        # The command's own flags mean nothing to its action: refused, not silently dropped.
        given = [
            flag_name(f) for f in dataclasses.fields(within.options) if getattr(ns, f.name) != _default(f)
        ]
        if given:
            p.error(f"{given[0]} is an option of '{within.name}', not of '{within.name} {cmd.name}'")
    return cmd, to_args(cmd.options, ns)


def _names(options: type) -> set[str]:
    return {f.name for f in dataclasses.fields(options)}


def _default(f: dataclasses.Field[Any]) -> Any:
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
