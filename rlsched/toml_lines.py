"""Where a dotted key of a TOML file is written: the line a config error points at.

:mod:`tomllib` gives a table without positions, so this scans the text once more, line by line,
tracking the current ``[table]`` / ``[[array.of.tables]]`` header, and records for every key the
first line that assigns it (``key = ...``, dotted keys too) and for every table its header line.
Keys are named as the config readers name fields: ``cluster.nodes[2].gpus`` (the index counts
the ``[[cluster.nodes]]`` headers), quoted keys without their quotes (``workload.apps.colo:A``).

A field the scan has no line for is looked up without its last part, then the next, and so on:
a key inside an inline table or array (``workload.classes[0].share`` in ``classes = [{...}]``)
points at the line that assigns the whole value, and a required key that is missing points at
its table's header (``cluster.nodes[0]``). A field with no line at all — nothing of it is written,
or it names no key (``<file>``, ``--rate``) — has none.

This is a locator, not a parser: it runs on text :mod:`tomllib` has accepted, and a construct it
does not follow only makes a line less precise, never a message wrong.
"""

from __future__ import annotations

import re

# One part of a dotted key: "quoted", 'literal' or bare.
_PART = re.compile(r"""\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)'|([A-Za-z0-9_-]+))\s*""")
# The last part of a field: an index or a key.
_LAST = re.compile(r"(?:\[\d+\]|\.[^.\[]+|^[^.\[]+)$")


def _dotted(text: str, at: int) -> tuple[list[str], int]:
    """The parts of the dotted key that starts at ``text[at]``, and where it ends."""
    parts: list[str] = []
    while True:
        m = _PART.match(text, at)
        if m is None or m.end() == at:
            return parts, at
        parts.append(next(g for g in m.groups() if g is not None))
        at = m.end()
        if not text.startswith(".", at):
            return parts, at
        at += 1


class _Scan:
    """The state carried from line to line: open brackets and an open multi-line string."""

    def __init__(self) -> None:
        self.depth = 0
        self.open_string = ""  # '"""' or "'''" while inside one

    def value(self, text: str, at: int = 0) -> None:
        """Follow a value (or the rest of one) from ``text[at]`` to the end of the line."""
        if self.open_string:
            end = text.find(self.open_string, at)
            if end < 0:
                return
            at, self.open_string = end + 3, ""
        while at < len(text):
            c = text[at]
            if c == "#":
                return
            if c in "\"'":
                if text.startswith(c * 3, at):
                    end = text.find(c * 3, at + 3)
                    if end < 0:
                        self.open_string = c * 3
                        return
                    at = end + 3
                    continue
                at = _string_end(text, at)
                continue
            if c in "[{":
                self.depth += 1
            elif c in "]}":
                self.depth -= 1
            at += 1


def _string_end(text: str, at: int) -> int:
    """Just past the one-line string that opens at ``text[at]``."""
    quote, at = text[at], at + 1
    while at < len(text) and text[at] != quote:
        at += 2 if quote == '"' and text[at] == "\\" else 1
    return at + 1


class KeyLines:
    """The line of every key and table header of one TOML text.

    :param text: the file's text (as :mod:`tomllib` read it).
    """

    def __init__(self, text: str) -> None:
        self._lines: dict[str, int] = {}
        self._arrays: dict[str, int] = {}  # array of tables -> headers seen so far
        table = ""
        scan = _Scan()
        for number, line in enumerate(text.split("\n"), start=1):
            if scan.depth > 0 or scan.open_string:
                scan.value(line)
                continue
            stripped = line.lstrip()
            if stripped.startswith("["):
                table = self._header(stripped, number) or table
                continue
            parts, end = _dotted(line, 0)
            if parts and line.startswith("=", end):
                self._lines.setdefault(self._path(table, parts), number)
                scan.value(line, end + 1)

    def _path(self, table: str, parts: list[str]) -> str:
        """The field of ``parts`` under ``table``, each array of tables at its latest index."""
        path = table
        for part in parts:
            path = f"{path}.{part}" if path else part
            if path in self._arrays:
                path += f"[{self._arrays[path] - 1}]"
        return path

    def _header(self, stripped: str, number: int) -> str:
        """Record a ``[table]`` or ``[[array]]`` header; the table that follows it."""
        array = stripped.startswith("[[")
        parts, _ = _dotted(stripped, 2 if array else 1)
        if not parts:
            return ""
        if not array:
            path = self._path("", parts)
        else:
            base = self._path("", parts[:-1])
            base = f"{base}.{parts[-1]}" if base else parts[-1]
            self._lines.setdefault(base, number)
            self._arrays[base] = self._arrays.get(base, 0) + 1
            path = f"{base}[{self._arrays[base] - 1}]"
        self._lines.setdefault(path, number)
        return path

    def find(self, field: str) -> int | None:
        """The line of ``field`` or of the nearest part of it that is written (module doc).

        :param field: a dotted field, e.g. ``cluster.nodes[2].gpus``.
        """
        if field.startswith(("<", "-")):
            return None  # not a key: <file>, <syntax>, a flag
        while field:
            if field in self._lines:
                return self._lines[field]
            field = _LAST.sub("", field)
        return None
