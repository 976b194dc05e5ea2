"""Reading users' text files (CSV, TOML) the same way everywhere: UTF-8, with or without a
byte-order mark (spreadsheet exports write one), and a one-line error naming the file and the
first byte that is not UTF-8 instead of a ``UnicodeDecodeError`` traceback."""

from __future__ import annotations

import io
from pathlib import Path


class TextFileError(ValueError):
    """A file that is not UTF-8 text."""


def read_text(path: str | Path) -> str:
    """The file's text, decoded as UTF-8 with an optional byte-order mark removed.

    :param path: the file.
    :raises TextFileError: naming the file, the offset and the byte that is not UTF-8.
    :raises OSError: when the file cannot be read (missing, a directory, no permission).
    """
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise TextFileError(
            f"{path}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start}); save it as UTF-8"
        ) from None


def open_text(path: str | Path) -> io.StringIO:
    """The file as a text stream for :mod:`csv` (``newline=""`` semantics), read via :func:`read_text`."""
    return io.StringIO(read_text(path), newline="")
