"""The service log's two formats: ``text`` (a timestamped line, for a person) and ``json`` (one
object per line, for a log collector: Loki, Elasticsearch, CloudWatch).

A JSON line holds ``time`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger`` and
``message``; an access-log line also ``method``, ``path``, ``status``, ``tenant`` and ``ms``; a
logged exception its traceback in ``exception``. Every line is one JSON object, whatever the
message holds (newlines are escaped).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

#: Record attributes a JSON line carries when a log call passed them (``extra=``).
FIELDS = ("method", "path", "status", "tenant", "ms")
#: The loggers whose lines the service writes: its own and the HTTP server's.
LOGGERS = ("runtime", "uvicorn")


class JsonFormatter(logging.Formatter):
    """One JSON object per record."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, object] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        out.update({k: getattr(record, k) for k in FIELDS if hasattr(record, k)})
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """A timestamped line."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(message)s")


def formatter(kind: str) -> logging.Formatter:
    """The formatter of ``log_format`` ``kind``."""
    return JsonFormatter() if kind == "json" else TextFormatter()


class LibraryHandler(logging.StreamHandler):
    """The service's stderr handler as a library's logger holds it: a format the library sets on
    its logger's handlers is ignored (``ray.init`` sets its own on every handler of ``ray``), the
    service's own formats are taken."""

    def setFormatter(self, fmt: logging.Formatter | None) -> None:
        if isinstance(fmt, JsonFormatter | TextFormatter):
            super().setFormatter(fmt)


def configure(level: str, kind: str) -> None:
    """The service's own loggers (``runtime.*``) and the HTTP server's (``uvicorn.*``: warnings
    and errors) to stderr in format ``kind``; ``runtime`` at ``level``. Other libraries' loggers
    keep their defaults."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(kind))
    for name in LOGGERS:
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
    logging.getLogger("runtime").setLevel(level.upper())
    logging.getLogger("uvicorn").setLevel(logging.WARNING)


#: Libraries' loggers :func:`adopt` took in.
_ADOPTED: list[str] = []


def adopt(name: str) -> None:
    """Write library ``name``'s log lines to the service's stderr in the service's format (Ray
    gives its ``ray`` logger a plain-text handler of its own when imported; under ``json`` its
    lines broke a collector's parsing). Nothing when :func:`configure` has not run (the code is
    used as a library). Its level stays the library's."""
    ours = logging.getLogger(LOGGERS[0]).handlers
    if not ours or ours[0].formatter is None:
        return
    handler = LibraryHandler(sys.stderr)
    handler.setFormatter(ours[0].formatter)
    logger = logging.getLogger(name)
    logger.handlers = [handler]
    logger.propagate = False
    if name not in _ADOPTED:
        _ADOPTED.append(name)


def set_format(kind: str) -> None:
    """Switch the service's log lines to ``kind`` (a reload)."""
    for name in (*LOGGERS, *_ADOPTED):
        for h in logging.getLogger(name).handlers:
            h.setFormatter(formatter(kind))


def line(kind: str, message: str) -> str:
    """``message`` as the log would write it at info level (the start banner, printed)."""
    record = logging.makeLogRecord({"name": "runtime.service", "levelname": "INFO", "msg": message})
    return formatter(kind).format(record)
