"""The refusals a run may end with, as opposed to bugs.

A command of the ``rlsched`` CLI ends in one of three ways besides success: its input was bad
(:class:`InputError`, exit 2), the machine or a service it needs cannot do what was asked
(:class:`Unavailable`, exit 4), a service refused the request as asked (:class:`Refused`,
exit 5), or something else was raised — a bug (exit 1). Every reader of a
user's file or flag raises :class:`InputError` itself, where the input is read; nothing turns
another exception into one after the fact, so a ``ValueError`` from inside a run is never
mistaken for a clean refusal of bad input.

An :class:`InputError` is one line of a fixed shape::

    SOURCE[:LINE]: FIELD: expected WHAT[, got VALUE][; HINT]

``SOURCE`` is the file as the user named it (or the built-in scenario's name), or the flag
(``--scheduler``); ``LINE`` is the line in the file, where known (TOML files:
:class:`rlsched.config_reader.ConfigError`); ``FIELD`` is the place in it: a dotted TOML key
(``cluster.nodes[1].gpus``), a CSV line and column (``line 3 (norm_throughput)``), a checkpoint
entry (``feature_version``), ``<file>`` for the file as a whole, ``<syntax>`` for a file that does
not parse, or, for a flag, the part of its value at fault (``selector``) or ``value`` for all of it.

This module imports nothing of ours but :mod:`models.checkpoint` (no torch at import), so every
layer may raise these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from models.checkpoint import CheckpointError


class _Nothing:
    """No offending value to show (``got`` left out of the message)."""

    def __repr__(self) -> str:
        return "NOTHING"

    def __reduce__(self) -> str:
        return "NOTHING"  # pickles as the one module-level object, so `got is NOTHING` still holds


#: ``got`` when there is no single offending value to show.
NOTHING: object = _Nothing()
#: Longest ``got`` shown; longer values are cut (a whole file pasted into a field stays one line).
MAX_SHOWN = 120


def shown(value: object) -> str:
    """``repr(value)`` cut to :data:`MAX_SHOWN` characters, on one line.

    :param value: the offending value.
    """
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 3] + "..."


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) made one space: a message stays one line.

    :param text: any message.
    """
    return " ".join(text.split())


def few(names: Iterable[str], k: int = 8) -> str:
    """The first ``k`` of ``names`` joined by ``", "``, then ``", ..."`` if there are more: a list a
    message can show.

    :param names: e.g. the node names a field may take.
    :param k: how many to show.
    """
    names = list(names)
    return ", ".join(names[:k]) + (", ..." if len(names) > k else "")


def csv_field(line: int, column: str = "") -> str:
    """The ``FIELD`` of a CSV problem: ``line 3 (device)``, ``line 3``, ``device``, or ``<file>``.

    :param line: the line (1 = the header); 0 = the file as a whole.
    :param column: the column at fault, or ``""``.
    """
    if line and column:
        return f"line {line} ({column})"
    return f"line {line}" if line else column or "<file>"


class InputError(ValueError):
    """Bad input: a file or flag the user gave breaks a rule (exit 2).

    A subclass of :class:`ValueError` so that callers that catch bad values keep working; the CLI
    tells it apart by this type, never by ``ValueError``.

    :param source: the file as given (or a built-in's name), or the flag, e.g. ``--scheduler``.
    :param field: where in ``source``: a dotted key, ``line 3 (device)``, ``<file>``, ``<syntax>``,
        or for a flag the part of its value (``value`` for all of it).
    :param expected: what a valid value looks like (the message says ``expected`` before it).
    :param got: the offending value, shown with ``repr`` (cut to 120 characters); :data:`NOTHING`
        leaves it out.
    :param hint: what to do about it, appended after ``;``.
    :param line: the line in ``source``, when known (shown by :class:`~rlsched.config_reader.ConfigError`).
    """

    def __init__(
        self,
        source: str,
        field: str,
        expected: str,
        got: object = NOTHING,
        hint: str | None = None,
        line: int | None = None,
    ) -> None:
        self.source = str(source)
        self.field = field
        self.expected = expected
        self.got = got
        self.hint = hint
        self.line = line
        super().__init__(self._message())

    def _where(self) -> str:
        """The message's ``SOURCE`` part (config files add ``:LINE``)."""
        return self.source

    def _shown_got(self) -> str:
        return shown(self.got)

    def _message(self) -> str:
        text = f"{self._where()}: {self.field}: expected {self.expected}"
        if self.got is not NOTHING:
            text += f", got {self._shown_got()}"
        if self.hint:
            text += f"; {self.hint}"
        return one_line(text)

    def __reduce__(self) -> tuple[Callable[..., InputError], tuple[object, ...]]:
        # Exceptions pickle as cls(*args); ours take more than the message (Ray, multiprocessing).
        return (
            _rebuild_input_error,
            (type(self), self.source, self.field, self.expected, self.got, self.hint, self.line),
        )

    def with_hint(self, hint: str) -> InputError:
        """This error with ``hint`` (what to do, or what is missing) appended after ``;``.

        :param hint: the text to append.
        """
        self.hint = hint
        self.args = (self._message(),)
        return self

    @classmethod
    def from_checkpoint(cls, e: CheckpointError, flag: str | None = None) -> InputError:
        """The same refusal as an :class:`InputError`: ``models`` may not import ``rlsched``, so
        its :class:`~models.checkpoint.CheckpointError` has the same fields and message shape,
        and the code that reads a user's checkpoint maps it with this.

        :param e: the checkpoint's error.
        :param flag: the flag that named the checkpoint (said at the end of the message).
        """
        hint = "; ".join(h for h in (e.hint, f"the checkpoint of {flag}" if flag else None) if h)
        return cls(e.path, e.field, e.expected, e.got if e.has_got else NOTHING, hint or None)


def _rebuild_input_error(
    cls: type[InputError],
    source: str,
    field: str,
    expected: str,
    got: object,
    hint: str | None,
    line: int | None,
) -> InputError:
    """Unpickle any :class:`InputError` subclass, whatever its own constructor takes."""
    err = InputError.__new__(cls)
    InputError.__init__(err, source, field, expected, got, hint, line)
    return err


class Unavailable(Exception):
    """A refusal for a reason of the environment, not of the input (exit 4): a device backend
    that cannot run on this machine, a cluster backend that is not installed, a service that
    cannot be reached or is in trouble for now (a 5xx, a queue bound): asking again later may do.

    :param what: what was asked for, e.g. ``--backend cupy`` or the service's URL.
    :param reason: why it cannot be had here.
    """

    def __init__(self, what: str, reason: str) -> None:
        self.what = what
        self.reason = reason
        super().__init__(one_line(f"{what}: {reason}"))

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), (self.what, self.reason))


class Refused(Unavailable):
    """The service refused the request as it was asked (exit 5): a 4xx other than "not now" — a
    bad token, a role the tenant lacks, no such task or node, a field it does not accept, a task
    that already started, a config file that does not load. Asking the same again will not help,
    unlike :class:`Unavailable`, which it extends (both name what was asked and why).
    """
