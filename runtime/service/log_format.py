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


def formatter(kind: str) -> logging.Formatter:
    """The formatter of ``log_format`` ``kind``."""
    if kind == "json":
        return JsonFormatter()
    return logging.Formatter("%(asctime)s %(levelname)s %(message)s")


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


def set_format(kind: str) -> None:
    """Switch the service's log lines to ``kind`` (a reload)."""
    for name in LOGGERS:
        for h in logging.getLogger(name).handlers:
            h.setFormatter(formatter(kind))


def line(kind: str, message: str) -> str:
    """``message`` as the log would write it at info level (the start banner, printed)."""
    record = logging.makeLogRecord({"name": "runtime.service", "levelname": "INFO", "msg": message})
    return formatter(kind).format(record)
