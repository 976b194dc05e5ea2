"""Reading users' text files (CSV, TOML) the same way everywhere: UTF-8, with or without a
byte-order mark (spreadsheet exports write one), and a one-line error naming the file and the
first byte that is not UTF-8 instead of a ``UnicodeDecodeError`` traceback."""

from __future__ import annotations

import io
from pathlib import Path

from rlsched.errors import InputError


class TextFileError(InputError):
    """A file that is not UTF-8 text: ``PATH: offset N: expected UTF-8 text, got byte 0xNN; ...``.

    :param path: the file.
    :param offset: where the first byte that is not UTF-8 is.
    :param byte: that byte.
    """

    def __init__(self, path: str | Path, offset: int, byte: int) -> None:
        self.offset, self.byte = offset, byte
        super().__init__(str(path), f"offset {offset}", "UTF-8 text", byte, hint="save the file as UTF-8")

    def _shown_got(self) -> str:
        return f"byte 0x{self.byte:02x}"

    def __reduce__(self) -> tuple[type, tuple[object, ...]]:
        return (type(self), (self.source, self.offset, self.byte))

    @property
    def where(self) -> str:
        """The bad byte and its offset, e.g. ``byte 0xff at offset 12`` (for messages that wrap this)."""
        return f"byte 0x{self.byte:02x} at offset {self.offset}"


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
        raise TextFileError(path, e.start, data[e.start]) from None


def open_text(path: str | Path) -> io.StringIO:
    """The file as a text stream for :mod:`csv` (``newline=""`` semantics), read via :func:`read_text`."""
    return io.StringIO(read_text(path), newline="")
