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
    :param actions: sub-commands. A command with actions may also have ``options`` and ``run`` of
        its own (``rlsched scenarios`` and ``rlsched scenarios generate``): it runs when no action
        is named, and its flags, which come before an action, are refused with one. Without
        ``run`` an action is required.
    """

    name: str
    help: str
    options: type | None = None
    run: Callable[[Any, Sequence[str]], int] | None = None
    epilog: str | None = None
    actions: tuple[Command, ...] = ()
