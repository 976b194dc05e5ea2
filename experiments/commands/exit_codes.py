"""The exit codes of ``rlsched`` (README "Exit codes") and the line each command's ``--help``
ends with."""

from __future__ import annotations

#: The command did what was asked.
EXIT_OK = 0
#: Anything raised that is not one of the refusals below: a bug (``--debug`` shows the traceback).
EXIT_INTERNAL = 1
#: Bad input (:class:`~rlsched.errors.InputError`): one line naming the file or flag and the field.
EXIT_INPUT = 2
#: ``--strict`` and some tasks were unschedulable.
EXIT_UNSCHEDULABLE = 3
#: Refused for a reason of the environment (:class:`~rlsched.errors.Unavailable`): a device or
#: cluster backend that cannot run on this machine; a service that cannot be reached or is in
#: trouble for now (a 5xx, a queue bound).
EXIT_UNAVAILABLE = 4
#: The service refused the request as asked (:class:`~rlsched.errors.Refused`, a 4xx): the same
#: request again will not help.
EXIT_REFUSED = 5
#: ``evaluate``: some runs failed or timed out; the report is written and their rows say why.
EXIT_INCOMPLETE = 6
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED = 130
#: The output pipe was closed (``| head``).
EXIT_BROKEN_PIPE = 141

#: What each exit code means, for ``--help`` (codes 3 to 6 only where a command can end so).
EXIT_MEANING = {
    EXIT_OK: "done",
    EXIT_INTERNAL: "internal error (a bug; --debug shows the traceback)",
    EXIT_INPUT: "bad input (one line: rlsched: error: FILE-OR-FLAG: FIELD: expected ...)",
    EXIT_UNSCHEDULABLE: "unschedulable tasks under --strict",
    EXIT_UNAVAILABLE: "a backend or service that is unavailable here",
    EXIT_REFUSED: "the service refused the request (HTTP 4xx)",
    EXIT_INCOMPLETE: "some runs failed or timed out (the report is written; their rows say why)",
    EXIT_INTERRUPTED: "interrupted",
    EXIT_BROKEN_PIPE: "output pipe closed",
}

#: Code 4 of the commands that run a device or cluster backend.
BACKEND = "the device or cluster backend cannot run on this machine"


def exit_help(
    strict: bool = False, unavailable: str | None = None, refused: bool = False, incomplete: bool = False
) -> str:
    """The ``exit codes: ...`` line of a command's ``--help``.

    :param strict: the command has ``--strict`` (code 3).
    :param unavailable: what code 4 means for the command, or ``None`` when it cannot end so.
    :param refused: the command asks a service, which may refuse (code 5).
    :param incomplete: the command runs many runs and reports those that failed (code 6).
    """
    meaning = dict(EXIT_MEANING)
    if not strict:
        del meaning[EXIT_UNSCHEDULABLE]
    if not refused:
        del meaning[EXIT_REFUSED]
    if not incomplete:
        del meaning[EXIT_INCOMPLETE]
    if unavailable is None:
        del meaning[EXIT_UNAVAILABLE]
    else:
        meaning[EXIT_UNAVAILABLE] = unavailable
    return "exit codes: " + "; ".join(f"{code} {text}" for code, text in sorted(meaning.items()))
