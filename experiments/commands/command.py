"""What a command of ``rlsched`` is: a name, its options and the function that runs it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One command (or one action of a command with actions, such as ``interference fit``).

    :param name: what the user types.
    :param help: one line for ``rlsched --help``.
    :param options: the dataclass of its flags (:mod:`experiments.commands.flags`).
    :param run: runs it with the parsed options and the command line (reports print it); returns
        the exit code.
    :param epilog: the last line of its ``--help`` (the exit codes it may end with).
    :param actions: sub-commands; a command with actions has no ``options`` or ``run`` of its own.
    """

    name: str
    help: str
    options: type | None = None
    run: Callable[[Any, Sequence[str]], int] | None = None
    epilog: str | None = None
    actions: tuple[Command, ...] = ()
