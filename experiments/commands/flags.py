"""Command-line flags generated from dataclasses: each flag is written once, as a field.

A command's options are one dataclass. Each field becomes a flag: its name is the field's (``--half-life-s``
unless :func:`flag` names it), its type and default are the field's, and its help text is the
field's ``:param name:`` line in the class docstring. :func:`add_flags` writes the fields into an
:class:`argparse.ArgumentParser`; :func:`to_args` builds the dataclass back from what was parsed.
(CleanRL and tyro do the same; this is the small part of it the commands need, without a
dependency.)
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import re
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, Field, dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Flag:
    """How one field is spelt on the command line.

    :param name: the flag (``"--from"``); ``None``: ``--`` and the field name with dashes.
    :param parse: turns the text into the value and raises ``argparse.ArgumentTypeError`` when it
        cannot (``None``: the field's type).
    :param choices: the values allowed.
    :param positional: a positional argument instead of a flag.
    :param repeat: may be given several times (a positional: one or more values, or with a
        default none or more); the field is a list of the values.
    :param negatable: a boolean with ``--no-`` form (for fields whose default is ``True``).
    :param path: the value names a file or folder: an ``OSError`` on it is the user's input
        (exit 2), not a bug.
    :param metavar: the placeholder in ``--help``.
    :param shown: the default as ``--help`` states it, where the field's own default (``None``)
        means "decided later" (read it off the config that decides).
    """

    name: str | None = None
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    positional: bool = False
    repeat: bool = False
    negatable: bool = False
    path: bool = False
    metavar: str | None = None
    shown: str | None = None


def flag(default: Any = MISSING, **spelling: Any) -> Any:
    """A dataclass field that is a flag spelt as ``spelling`` says (keywords of :class:`Flag`).

    :param default: the default; none: the flag is required.
    """
    meta = {"flag": Flag(**spelling)}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: type(default)(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def spelling(f: Field[Any]) -> Flag:
    """The :class:`Flag` of field ``f`` (the plain one when it was declared without :func:`flag`)."""
    return f.metadata.get("flag", Flag())


def flag_name(f: Field[Any]) -> str:
    """The command-line spelling of field ``f`` (``--half-life``, or ``id`` for a positional)."""
    s = spelling(f)
    if s.positional:
        return f.name
    return s.name or "--" + f.name.replace("_", "-")


_PARAM = re.compile(r"^:param (\w+):[ \t]*(.*)$")


def field_help(cls: type) -> dict[str, str]:
    """Each documented field's help text: its ``:param name:`` entry in the class docstring (or a
    base class's), continuation lines joined."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        name: str | None = None
        for line in inspect.cleandoc(klass.__doc__ or "").splitlines():
            m = _PARAM.match(line)
            if m:
                name = m.group(1)
                out[name] = m.group(2).strip()
            elif name and line.startswith(" ") and line.strip():
                out[name] += " " + line.strip()
            else:
                name = None
    return out


def _plain(hint: Any) -> Any:
    """``X`` of ``X | None``; the hint itself otherwise."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        rest = [a for a in typing.get_args(hint) if a is not type(None)]
        return rest[0] if len(rest) == 1 else str
    return hint


def _shown_default(value: Any) -> str | None:
    if value is MISSING or value is None or value is False or value == [] or value == ():
        return None
    if value is True:
        return "on"
    return f"{value:g}" if isinstance(value, float) else str(value)


def add_flags(parser: argparse.ArgumentParser, cls: type) -> None:
    """Add a flag to ``parser`` for every field of the dataclass ``cls``.

    :param parser: the command's parser.
    :param cls: the command's options.
    :raises TypeError: a field without help text (every flag is documented).
    """
    helps = field_help(cls)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in helps:
            raise TypeError(f"{cls.__name__}.{f.name}: no ':param {f.name}:' in the docstring")
        s = spelling(f)
        default = f.default_factory() if f.default_factory is not MISSING else f.default
        text = helps[f.name]
        shown = s.shown if s.shown is not None else _shown_default(default)
        # A text that states its default itself ("(default: ...") is left alone; one that only
        # uses the word ("--default", "the default pair") still gets its own.
        if shown is not None and "(default" not in text and "default:" not in text:
            text += f" (default: {shown})"
        kw: dict[str, Any] = {"help": text.replace("%", "%%"), "dest": f.name}
        kind = _plain(hints[f.name])
        if kind is bool and not s.positional:
            kw["action"] = argparse.BooleanOptionalAction if s.negatable else "store_true"
            kw["default"] = default
        else:
            if s.repeat and s.positional:
                kw["nargs"] = "+" if default is MISSING else "*"
            elif s.repeat:
                kw["action"] = "append"
            kw["type"] = s.parse or (_plain(typing.get_args(kind)[0]) if s.repeat else kind)
            if s.choices is not None:
                kw["choices"] = s.choices
            if s.choices is None and not s.positional:
                kw["metavar"] = s.metavar or flag_name(f).lstrip("-").replace("-", "_").upper()
            if default is MISSING:
                kw["required"] = not s.positional
            else:
                kw["default"] = default
        if s.positional:
            parser.add_argument(f.name, **{k: v for k, v in kw.items() if k not in ("dest", "required")})
        else:
            parser.add_argument(flag_name(f), **kw)


def to_args(cls: type[T], ns: argparse.Namespace) -> T:
    """The dataclass ``cls`` built from what :func:`add_flags`' flags parsed into ``ns``."""
    return cls(**{f.name: getattr(ns, f.name) for f in dataclasses.fields(cls)})  # type: ignore[arg-type]


def given(argv: Sequence[str], names: Sequence[str]) -> list[str]:
    """Which of the flags ``names`` the command line gives (``--x V`` or ``--x=V``), in order."""
    return [n for n in names if any(a == n or a.startswith(n + "=") for a in argv)]


def pick(target: type, args: Any, **overrides: Any) -> dict[str, Any]:
    """The keyword arguments for the config dataclass ``target`` that ``args`` carries under the
    same field names, with ``overrides`` on top: how a command's options become a workflow's
    config without writing each field again.

    :param target: the workflow's config class.
    :param args: a command's options.
    """
    names = {f.name for f in dataclasses.fields(target)}
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(args) if f.name in names}
    return {**given, **overrides}


def path_values(args: Any) -> list[tuple[str, str]]:
    """``(value, flag)`` for every path-valued flag that was given (see :attr:`Flag.path`)."""
    out = []
    for f in dataclasses.fields(args):
        if not spelling(f).path:
            continue
        value = getattr(args, f.name)
        for v in value if isinstance(value, list) else [value]:
            if isinstance(v, str) and v:
                out.append((v, flag_name(f)))
    return out
