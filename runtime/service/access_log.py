"""One log line per request: method, path, status, tenant and milliseconds (the service's access
log, at info level on ``runtime.service.access``)."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from runtime.service.guard import GONE_KEY, TENANT_KEY

log = logging.getLogger("runtime.service.access")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class AccessLog:
    """ASGI middleware that logs each HTTP request once its answer has started (or failed).

    Outermost, so that requests the guard refuses (401, 413, 408) are logged too; the tenant is
    the one the guard found for the token (``-`` for none). Probes and ``/metrics`` are logged at
    debug level: a scraper every few seconds would bury the requests that matter.

    :param app: the application.
    :param quiet: paths logged at debug level.
    """

    def __init__(
        self, app: App, quiet: frozenset[str] = frozenset({"/healthz", "/readyz", "/metrics"})
    ) -> None:
        self.app, self.quiet = app, quiet

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        status = 500  # what the client sees if the app fails before answering

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            level = logging.DEBUG if scope["path"] in self.quiet else logging.INFO
            if log.isEnabledFor(level):
                fields = {
                    "method": scope["method"],
                    "path": _printable(scope["path"]),
                    "status": 499 if scope.get(GONE_KEY) else status,  # nginx's "client closed request"
                    "tenant": getattr(scope.get(TENANT_KEY), "name", "-"),
                    "ms": round((time.perf_counter() - t0) * 1000.0, 1),
                }
                # The fields ride along for the JSON format (runtime.service.log_format).
                log.log(
                    level,
                    "%(method)s %(path)s %(status)d tenant=%(tenant)s %(ms).1f ms",
                    fields,
                    extra=fields,
                )


def _printable(path: str) -> str:
    """The request's path with control characters escaped: a ``%0A`` in it (decoded to a newline)
    would write a second, forged line into a text log, and anyone who reaches the port can send one
    (refused requests are logged too)."""
    if path.isprintable():
        return path
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in path)
