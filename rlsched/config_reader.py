"""The one reader of rlsched's TOML files — scenarios, live cluster files, service configs — and
its one error, :class:`ConfigError`.

A :class:`ConfigReader` holds one file's text and hands out its values typed and checked: required
or with a default, numbers within bounds, integers, strings, one of a set of choices, booleans,
tables, arrays of tables, and the keys a table may have. Every refusal is a :class:`ConfigError`
that names the file, the dotted key and the line it is written on::

    live.toml:12: nodes[1].gpus[0].mem_mib: expected a number > 0 and <= 1.04858e+06, got -1

``where`` arguments are the dotted path of the table being read (``""`` for the top level,
``cluster.nodes[2]``); the field in a message is ``where`` joined to the key. Line numbers come
from :class:`rlsched.toml_lines.KeyLines` (the key's own line, else its table's header).
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlsched.errors import NOTHING, InputError
from rlsched.textfile import TextFileError, read_text
from rlsched.toml_lines import KeyLines

#: The default of a key that must be given.
REQUIRED: Any = object()


class ConfigError(InputError):
    """A config file that breaks a rule: an :class:`~rlsched.errors.InputError` (exit 2 on the
    command line) whose message is ``PATH[:LINE]: FIELD: expected WHAT[, got VALUE][; HINT]``.

    :param source: the file as the user named it.
    :param field: the dotted key, e.g. ``cluster.nodes[2].gpus``; ``<file>`` when the file cannot
        be read, ``<syntax>`` when it does not parse.
    :param expected: what a valid value looks like.
    :param got: the offending value, if any.
    :param hint: more about it, e.g. the error of a data file the key names.
    :param line: the line of ``field`` in the file (or of its table), when known.
    """

    @property
    def path(self) -> str:
        """The file (the error's source)."""
        return self.source

    def _where(self) -> str:
        return self.source if self.line is None else f"{self.source}:{self.line}"


def is_number(v: object) -> bool:
    """A finite int or float, not a bool.

    :param v: a value read from a file.
    """
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def join(where: str, key: str) -> str:
    """The field of ``key`` in the table at ``where``.

    :param where: the table's dotted path (``""``: the top level).
    :param key: the key.
    """
    return f"{where}.{key}" if where else key


def _bounds(gt: float | None, ge: float | None, lt: float | None, le: float | None) -> str:
    ops = ((">", gt), (">=", ge), ("<", lt), ("<=", le))
    return " and ".join(f"{op} {b:g}" for op, b in ops if b is not None)


class ConfigReader:
    """Typed, checked access to one TOML file's tables.

    :param shown: the file as messages name it.
    :param text: its text, to find the line of a key in; ``""`` gives errors without lines.
    :param error: the :class:`ConfigError` subclass raised (e.g. ``ScenarioError``).
    :param doc: its top-level table (:meth:`open` parses it from ``text``).
    """

    def __init__(
        self,
        shown: str,
        text: str = "",
        error: type[ConfigError] = ConfigError,
        doc: dict[str, Any] | None = None,
    ) -> None:
        self.shown = shown
        self.doc: dict[str, Any] = {} if doc is None else doc
        self._text = text
        self._error = error
        self._lines: KeyLines | None = None

    @classmethod
    def open(
        cls, path: str | Path, what: str, shown: str | None = None, error: type[ConfigError] = ConfigError
    ) -> ConfigReader:
        """Read and parse a TOML file; its top-level table is :attr:`doc`.

        :param path: the file.
        :param what: what the file is, for the message (e.g. ``"live cluster file"``).
        :param shown: the file as messages name it (default: ``path``).
        :param error: the :class:`ConfigError` subclass raised.
        :raises ConfigError: field ``<file>`` when it cannot be read, ``<syntax>`` (with the line)
            when it is not UTF-8 TOML.
        """
        shown = str(path) if shown is None else shown
        try:
            text = read_text(path)
        except TextFileError as e:
            raise error(shown, "<syntax>", "UTF-8 text (save the file as UTF-8)", e.where) from None
        except OSError as e:
            raise error(shown, "<file>", f"a readable {what}", str(e)) from None
        try:
            doc = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            m = re.search(r"at line (\d+)", str(e))
            line = int(m.group(1)) if m else None
            raise error(shown, "<syntax>", f"valid TOML: {e}", line=line) from None
        return cls(shown, text, error, doc)

    def line(self, field: str) -> int | None:
        """The line ``field`` is written on, or its table's (:class:`~rlsched.toml_lines.KeyLines`)."""
        if self._lines is None:
            self._lines = KeyLines(self._text)
        return self._lines.find(field)

    def error(self, field: str, expected: str, got: object = NOTHING, hint: str | None = None) -> ConfigError:
        """The error to raise about ``field`` (with its line).

        :param field: the dotted field.
        :param expected: what a valid value looks like.
        :param got: the offending value, if any.
        :param hint: more about it.
        """
        return self._error(self.shown, field, expected, got, hint=hint, line=self.line(field))

    def keys(self, table: dict[str, Any], where: str, allowed: Sequence[str], what: str = "") -> None:
        """Refuse a key of ``table`` that is not in ``allowed`` (a typo would be silently ignored).

        :param table: the table.
        :param where: its dotted path.
        :param allowed: the keys it may have.
        :param what: said after "keys", e.g. ``" of process 'poisson'"``.
        """
        for key in table:
            if key not in allowed:
                raise self.error(join(where, key), f"one of the keys{what} ({', '.join(allowed)})", key)

    def table(self, value: object, where: str) -> dict[str, Any]:
        """``value`` as a table: an absent one (``None``) is empty.

        :param value: the value read at ``where``.
        :param where: its dotted path.
        """
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.error(where, "a table", value)
        return value

    def get(self, table: dict[str, Any], where: str, key: str, default: Any, expected: str) -> Any:
        """``table[key]`` unchecked, or ``default``; :data:`REQUIRED` refuses an absent key.

        :param expected: what a valid value looks like, for the message about a missing key.
        """
        if key in table:
            return table[key]
        if default is REQUIRED:
            raise self.error(join(where, key), f"{expected} (this key is required)")
        return default

    def number(
        self,
        table: dict[str, Any],
        where: str,
        key: str,
        default: Any = REQUIRED,
        *,
        gt: float | None = None,
        ge: float | None = None,
        lt: float | None = None,
        le: float | None = None,
    ) -> Any:
        """A finite number within the bounds given, as a float (an int is accepted); an absent key
        gives ``default`` unchecked.

        :param gt: exclusive lower bound. :param ge: inclusive lower bound.
        :param lt: exclusive upper bound. :param le: inclusive upper bound.
        """
        expected = " ".join(["a number", _bounds(gt, ge, lt, le)]).strip()
        if key not in table:
            return self.get(table, where, key, default, expected)
        v = table[key]
        ok = is_number(v) and (gt is None or v > gt) and (ge is None or v >= ge)
        if not ok or (lt is not None and not v < lt) or (le is not None and not v <= le):
            raise self.error(join(where, key), expected, v)
        return float(v)

    def integer(
        self,
        table: dict[str, Any],
        where: str,
        key: str,
        default: Any = REQUIRED,
        *,
        ge: int | None = None,
        le: int | None = None,
    ) -> Any:
        """An integer (not a bool) within the bounds given; an absent key gives ``default`` unchecked.

        :param ge: inclusive lower bound. :param le: inclusive upper bound.
        """
        if ge is not None and le is not None:
            expected = f"an integer from {ge:,} to {le:,}"
        else:
            expected = " ".join(["an integer", _bounds(None, ge, None, le)]).strip()
        if key not in table:
            return self.get(table, where, key, default, expected)
        v = table[key]
        ok = isinstance(v, int) and not isinstance(v, bool)
        if not ok or (ge is not None and v < ge) or (le is not None and v > le):
            raise self.error(join(where, key), expected, v)
        return v

    def string(
        self,
        table: dict[str, Any],
        where: str,
        key: str,
        default: Any = REQUIRED,
        *,
        non_empty: bool = False,
        expected: str | None = None,
    ) -> Any:
        """A string; an absent key gives ``default`` unchecked.

        :param non_empty: refuse ``""``.
        :param expected: what the message says a valid value is (default: ``a [non-empty] string``).
        """
        expected = expected or ("a non-empty string" if non_empty else "a string")
        if key not in table:
            return self.get(table, where, key, default, expected)
        v = table[key]
        if not isinstance(v, str) or (non_empty and not v):
            raise self.error(join(where, key), expected, v)
        return v

    def strings(self, table: dict[str, Any], where: str, key: str, default: Any = REQUIRED) -> Any:
        """A list of non-empty strings; an absent key gives ``default`` unchecked."""
        if key not in table:
            return self.get(table, where, key, default, "a list of strings")
        v = table[key]
        if not isinstance(v, list) or not all(isinstance(s, str) and s for s in v):
            raise self.error(join(where, key), "a list of non-empty strings", v)
        return v

    def choice(
        self, table: dict[str, Any], where: str, key: str, options: Sequence[str], default: Any = REQUIRED
    ) -> Any:
        """One of the strings ``options``; an absent key gives ``default`` unchecked."""
        expected = "one of " + ", ".join(f'"{o}"' for o in options)
        if key not in table:
            return self.get(table, where, key, default, expected)
        v = table[key]
        if not isinstance(v, str) or v not in options:
            raise self.error(join(where, key), expected, v)
        return v

    def boolean(self, table: dict[str, Any], where: str, key: str, default: Any = REQUIRED) -> Any:
        """``true`` or ``false``; an absent key gives ``default`` unchecked."""
        if key not in table:
            return self.get(table, where, key, default, "true or false")
        v = table[key]
        if not isinstance(v, bool):
            raise self.error(join(where, key), "true or false", v)
        return v

    def tables(
        self, table: dict[str, Any], where: str, key: str, expected: str | None = None
    ) -> list[dict[str, Any]]:
        """An array of tables (``[[key]]``), empty when absent.

        :param expected: what the message says a valid value is (default: the ``[[...]]`` form).
        """
        v = table.get(key, [])
        if not isinstance(v, list) or not all(isinstance(t, dict) for t in v):
            bare = re.sub(r"\[\d+\]", "", join(where, key))
            raise self.error(join(where, key), expected or f"an array of tables ([[{bare}]])", v)
        return v
