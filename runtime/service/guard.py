"""The door of the HTTP API: authenticate from the headers, then read a bounded body, in time.

An ASGI middleware, outermost, so that nothing reads a byte of a body before it:

1. Every path but the public ones (health, metrics, the API's own description) needs a valid
   bearer token; without one the answer is 401 and the body is never read. A cluster operation
   (``/v1/admin/...``) from a tenant without the admin role is 403, also before the body.
2. The body is read here, chunk by chunk, and counted as it arrives, whatever its framing: a
   ``Content-Length`` over the limit is refused before any byte is read, and a chunked upload is
   refused (413) as soon as it passes the limit. The server then closes the connection rather
   than drain the rest.
3. A body not received within the request timeout gets 408 (a client that trickles bytes must
   not hold the server).

The route then receives the body from memory. The tenant found in step 1 travels in the ASGI
scope (:data:`TENANT_KEY`), so the route does not hash the token a second time.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from runtime.service.config import Tenant

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Paths served without a token (probes, metrics, the published schema and its pages).
PUBLIC_PATHS = frozenset(
    {"/healthz", "/readyz", "/metrics", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"}
)
#: ASGI scope key under which the authenticated tenant reaches the route.
TENANT_KEY = "rlsched.tenant"
#: Paths of cluster operations: a tenant without the admin role is refused from the headers.
ADMIN_PREFIX = "/v1/admin/"
#: ASGI scope key set when the client went away before its body was read (nobody to answer).
GONE_KEY = "rlsched.client_gone"


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer TOKEN`` header (``None``: no bearer token)."""
    scheme, _, token = (authorization or "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


class RequestGuard:
    """ASGI middleware: authentication before the body, a bounded body, a deadline to send it.

    :param app: the application behind it.
    :param tenant_for: the tenant a token belongs to (``None``: no tenant), in constant time.
    :param max_body: bytes a body may have.
    :param timeout_s: seconds within which the whole body must have arrived.
    """

    def __init__(
        self,
        app: ASGIApp,
        tenant_for: Callable[[str], Tenant | None],
        max_body: int,
        timeout_s: float,
    ) -> None:
        self.app, self.tenant_for, self.max_body, self.timeout_s = app, tenant_for, max_body, timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        if scope["path"] not in PUBLIC_PATHS:
            token = bearer_token(headers.get("authorization"))
            tenant = self.tenant_for(token) if token is not None else None
            if tenant is None:
                await _reply(send, 401, "authorization: a valid bearer token", {"www-authenticate": "Bearer"})
                return
            scope[TENANT_KEY] = tenant
            if scope["path"].startswith(ADMIN_PREFIX) and not tenant.admin:
                # Before the body: a malformed one got 422 from a tenant that may not ask at all.
                await _reply(send, 403, f"tenant {tenant.name}: cluster operations need the admin role")
                return
        size = headers.get("content-length")
        if size is not None and (not size.isdigit() or int(size) > self.max_body):
            await _reply(send, 413, f"body: at most {self.max_body} bytes")
            return
        try:
            body = await asyncio.wait_for(self._read(receive), self.timeout_s)
        except TimeoutError:
            await _reply(send, 408, f"body: not received within {self.timeout_s:g} s")
            return
        except _TooLarge:
            await _reply(send, 413, f"body: at most {self.max_body} bytes")
            return
        except _Disconnected:
            scope[GONE_KEY] = True  # nobody is left to answer; the access log says so, not 500
            return
        await self.app(scope, _replay(body, receive), send)

    async def _read(self, receive: Receive) -> bytes:
        parts, size = [], 0
        while True:
            msg = await receive()
            if msg["type"] == "http.disconnect":
                raise _Disconnected
            chunk = msg.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise _TooLarge
            parts.append(chunk)
            if not msg.get("more_body", False):
                return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives the body read once, then waits on the client (disconnects)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _reply(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    """A refusal before the body is read: ``connection: close``, or the server drains the body the
    client declared (any length, unauthenticated too) to keep the connection, and a chunked body
    still arriving after the answer put a traceback in the log."""
    body = json.dumps({"detail": detail}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw.append((b"connection", b"close"))
    raw += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
